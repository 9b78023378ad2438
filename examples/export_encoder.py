"""Export the small BERT-style encoder that ships in examples/models/encoder.onnx.

Dynamic batch and sequence: python examples/export_encoder.py [OUT.onnx]
"""
import math
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, s, self.h, -1).transpose(1, 2)
        k = k.reshape(b, s, self.h, -1).transpose(1, 2)
        v = v.reshape(b, s, self.h, -1).transpose(1, 2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.h)
        att = att.masked_fill(mask[:, None, None, :] == 0, -1e9).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.ff2(nn.functional.gelu(self.ff1(self.ln2(x))))
class Encoder(nn.Module):
    """A small BERT-style encoder: token + position embeddings, pre-norm blocks, final norm."""
    def __init__(self, vocab=1000, d=64, heads=4, layers=2, max_len=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.tok(input_ids) + self.pos(pos)[None]
        for blk in self.blocks:
            x = blk(x, attention_mask)
        return self.norm(x)
OUT = sys.argv[1] if len(sys.argv) > 1 else "examples/models/encoder.onnx"
m = Encoder().eval()
ids = torch.randint(0, 1000, (2, 16)); mask = torch.ones(2, 16, dtype=torch.int64)
torch.onnx.export(m, (ids, mask), OUT, input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                  dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"}},
                  opset_version=17, dynamo=False)
