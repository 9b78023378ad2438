"""Hugging Face decoders through the PyTorch frontend, against torch eager on fresh random inputs.

GPT-2 (with and without a KV cache), LLaMA, Mistral and Qwen2 at small configs with random weights
(nothing is downloaded), and the importer mechanisms they needed, each on a small module of its
own: a view whose operand's strides change when torch.export decomposes SDPA, advanced indexing
with several index tensors, a size used as data, and a dim that an sdc rule leaves unknown while
torch knows it. GPT-2 is built once for its two tests (a module-scoped fixture); the file takes
about 22 s alone on 2 cores, 19 s more after test_torch_frontend.py (which warms torch.export up).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import sdc
from sdc.diagnostics import SdcError

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5)}
VOCAB = 128


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _transformers():
    """transformers (conftest.py has defined torchvision's op schemas where its C++ ops cannot load)."""
    import transformers

    return transformers


def check_outputs(got: list, want: tuple) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, torch.Tensor) and g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, **TOL[w.dtype])


def check(exe, model: nn.Module, *inputs: torch.Tensor) -> None:
    with torch.no_grad():
        want = model(*inputs)
    check_outputs(exe(*inputs), want if isinstance(want, tuple) else (want,))


# ---------------------------------------------------------------- the mechanisms, one module each


class SdpaThenView(nn.Module):
    """GPT-2's attention output: SDPA, heads back to [B, S, D] by reshape, then a `view` (as Conv1D
    does). Exported, SDPA is one op whose result is laid out [B, S, H, D]; decomposed, it is a
    matmul chain with another layout, and the view no longer views."""

    def __init__(self, d: int = 16, heads: int = 2):
        super().__init__()
        self.heads, self.proj = heads, nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q = x.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        a = a.transpose(1, 2).reshape(b, s, d).contiguous()
        return self.proj(a.view(-1, d)).view(b, s, d)


def test_a_view_after_decomposed_attention_imports_and_leaves_the_program_as_it_was():
    model = SdpaThenView().eval()
    program = torch.export.export(model, (torch.randn(2, 5, 16),), strict=False)
    before = [str(n.target) for n in program.graph.nodes]
    assert "aten.view.default" in before
    exe = sdc.compile(program)
    assert [str(n.target) for n in program.graph.nodes] == before
    check(exe, model, torch.randn(2, 5, 16))


class Indexing(nn.Module):
    """Advanced indexing with several index tensors: adjacent (their dims stay in place),
    separated by a slice (their dims go first), broadcast against each other, negative."""

    def forward(self, x, i, j):
        adjacent = x[:, i, j]  # [2, 3, 4] at dims 1, 2 -> [2, 3, 4, 5]
        separated = x[i, :, j]  # dims 0 and 2 -> [3, 4, 6, 5]
        wide = x[i[:, :1], j[:1, :]]  # [3, 1] with [1, 4] -> [3, 4, 7, 5]
        return adjacent, separated, wide


def test_indexing_with_several_index_tensors_matches_eager():
    model = Indexing().eval()
    x = torch.randn(2, 6, 7, 5)

    def indices():
        return torch.randint(-2, 2, (3, 4)), torch.randint(-6, 6, (3, 4))

    exe = sdc.compile(model, (x, *indices()))
    check(exe, model, torch.randn(2, 6, 7, 5), *indices())


class MaskSelect(nn.Module):
    def forward(self, x, mask):
        return x[mask]


def test_indexing_with_a_boolean_mask_is_one_error_naming_the_line():
    with pytest.raises(SdcError, match=r"^(.*/)?test_torch_decoders\.py:\d+: aten\.index\.Tensor \(node 'index'\): "
                                       r"indexing with a boolean mask is unsupported \(its result size depends "
                                       r"on the data\)$"):
        sdc.compile(MaskSelect(), (torch.randn(4, 3), torch.tensor([True, False, True, True])))


class Positions(nn.Module):
    """A size as data: positions that start after a cache of run-time length."""

    def forward(self, x, past):
        return x + (torch.arange(x.shape[1]) + past.shape[1]).to(x.dtype)


def test_a_run_time_size_used_as_a_tensor_value():
    model = Positions().eval()
    exe = sdc.compile(model, (torch.randn(2, 3), torch.randn(2, 5)), dynamic_shapes=(None, {1: Dim("past")}))
    for past in (1, 9):
        check(exe, model, torch.randn(2, 3), torch.randn(2, past))


class Shifted(nn.Module):
    """`x[:, :1]` of a run-time dim: sdc's slice rule cannot tell its size, torch knows it is 1
    (transformers' `diff` of position ids, where later slices end at the run-time size)."""

    def forward(self, x):
        n = x.shape[1]
        y = torch.cat([x[:, :1] - 1, x], dim=-1)
        return y[:, 1:n + 1] - y[:, :n]


def test_a_dim_only_torch_can_tell_takes_torch_size():
    model = Shifted().eval()
    exe = sdc.compile(model, (torch.randn(2, 6),), dynamic_shapes=({1: Dim("n", max=32)},))
    assert [i.shape for i in exe.inputs] == [(2, "n")]
    for n in (1, 7):
        check(exe, model, torch.randn(2, n))


# ---------------------------------------------------------------- transformers decoders


class Logits(nn.Module):
    """A causal LM's logits, without a KV cache; `attention_mask` when given."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask=None):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


class CachedStep(nn.Module):
    """One decoding step with a KV cache as tensors: `past` is [layers, 2 (key, value), B, H, P, D];
    the results are the logits and the cache grown by the new tokens."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, past):
        tf = _transformers()
        cache = tf.DynamicCache(ddp_cache_data=[(past[i, 0], past[i, 1]) for i in range(past.shape[0])])
        out = self.model(input_ids=input_ids, cache=cache, use_cache=True)
        grown = torch.stack([torch.stack([layer.keys, layer.values]) for layer in out.past_key_values.layers])
        return out.logits, grown


def padded(batch: int, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and an attention mask whose first row is left-padded (a third of it masked)."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, : max(seq // 3, 1)] = 0
    return torch.randint(0, VOCAB, (batch, seq)), mask


def _rotary_config(kind: str, **extra):
    """A LLaMA-style config (rotary embeddings, RMSNorm, SiLU MLP, GQA: 4 query heads, 2 kv heads)."""
    return getattr(_transformers(), kind)(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                          num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                          max_position_embeddings=64, **extra)


@pytest.fixture(scope="module")
def gpt2():
    tf = _transformers()
    torch.manual_seed(1)
    config = tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=64,
                           bos_token_id=0, eos_token_id=0)
    return tf.GPT2LMHeadModel(config).eval()


def test_gpt2_matches_eager(gpt2):
    model = Logits(gpt2).eval()
    exe = sdc.compile(model, (torch.randint(0, VOCAB, (2, 9)),))
    check(exe, model, torch.randint(0, VOCAB, (2, 9)))


def test_gpt2_with_a_kv_cache_runs_at_two_past_lengths_from_one_artifact(gpt2):
    model = CachedStep(gpt2).eval()
    layers, heads, head_dim = 2, 4, 16
    exe = sdc.compile(model, (torch.randint(0, VOCAB, (2, 3)), torch.randn(layers, 2, 2, heads, 5, head_dim)),
                      dynamic_shapes=(None, {4: Dim("past", max=48)}))
    assert [i.shape for i in exe.inputs] == [(2, 3), (layers, 2, 2, heads, "past", head_dim)]
    for past in (4, 11):
        check(exe, model, torch.randint(0, VOCAB, (2, 3)), torch.randn(layers, 2, 2, heads, past, head_dim))


def test_llama_with_dynamic_batch_and_sequence_runs_at_three_sizes_from_one_artifact(tmp_path):
    model = Logits(_transformers().LlamaForCausalLM(_rotary_config("LlamaConfig"))).eval()
    batch, seq = Dim("batch", max=8), Dim("seq", max=32)
    exe = sdc.compile(model, padded(2, 7), dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}),
                      output=tmp_path / "llama.sdc")
    assert [i.shape for i in exe.inputs] == [("batch", "seq"), ("batch", "seq")]
    for b, s in ((1, 5), (3, 9), (8, 32)):
        check(exe, model, *padded(b, s))


def test_llama_with_a_kv_cache_takes_rotary_positions_after_the_past():
    # Dim.DYNAMIC, not a named Dim: with grouped-query attention torch.export's solver cannot
    # prove its own guard Min(16*(past+3), 32*(past+3)) == 16*(past+3) and calls a named range
    # violated (torch 2.13); an unnamed dynamic dim gets the same graph, named `past_4` here.
    model = CachedStep(_transformers().LlamaForCausalLM(_rotary_config("LlamaConfig"))).eval()
    layers, kv_heads, head_dim = 2, 2, 16
    exe = sdc.compile(model, (torch.randint(0, VOCAB, (2, 3)), torch.randn(layers, 2, 2, kv_heads, 5, head_dim)),
                      dynamic_shapes=(None, {4: Dim.DYNAMIC}))
    assert [i.shape for i in exe.inputs] == [(2, 3), (layers, 2, 2, kv_heads, "past_4", head_dim)]
    for past in (2, 9):
        check(exe, model, torch.randint(0, VOCAB, (2, 3)), torch.randn(layers, 2, 2, kv_heads, past, head_dim))


def test_mistral_with_a_sliding_window_shorter_than_the_sequence_matches_eager():
    model = Logits(_transformers().MistralForCausalLM(_rotary_config("MistralConfig", sliding_window=4))).eval()
    ids = torch.randint(0, VOCAB, (2, 9))
    exe = sdc.compile(model, (ids,))
    check(exe, model, torch.randint(0, VOCAB, (2, 9)))


def test_qwen2_matches_eager():
    model = Logits(_transformers().Qwen2ForCausalLM(_rotary_config("Qwen2Config"))).eval()
    exe = sdc.compile(model, (torch.randint(0, VOCAB, (2, 7)),))
    check(exe, model, torch.randint(0, VOCAB, (2, 7)))
