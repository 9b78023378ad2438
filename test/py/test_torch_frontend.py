"""The PyTorch frontend (sdc/frontend/torch/): torch.export -> core ATen -> sdc, against torch eager.

Every model runs on fresh random inputs (never zeros) and is compared with the same module in
eager PyTorch; batch norms get random running statistics so that folding them is visible.
"""

from __future__ import annotations

import math
import os
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import sdc
from sdc.diagnostics import SdcError
from sdc.frontend.torch import import_torch
from sdc.torch_compile import STATS

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5)}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def check(exe, model, *inputs):
    (got,) = exe(*inputs)
    with torch.no_grad():
        want = model(*inputs)
    assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, **TOL[want.dtype])


# ---------------------------------------------------------------- models


class CNN(nn.Module):
    """conv-bn-relu, a residual block, max pool, global average pool, a classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8, 5)
        for bn in (self.stem[1], self.bn1, self.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = self.stem(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = self.pool(F.relu(x + y))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention through SDPA, a GELU MLP."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


def test_mlp_matches_eager():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)).eval()
    exe = sdc.compile(model, (torch.randn(3, 16),))
    check(exe, model, torch.randn(3, 16))


def test_cnn_with_batch_norm_and_residual_matches_eager():
    model = CNN().eval()
    exe = sdc.compile(model, (torch.randn(2, 3, 16, 16),))
    check(exe, model, torch.randn(2, 3, 16, 16))


def test_transformer_block_matches_eager():
    model = Block().eval()
    exe = sdc.compile(model, (torch.randn(2, 6, 32),))
    check(exe, model, torch.randn(2, 6, 32))


def test_dynamic_batch_and_sequence_run_at_three_sizes_from_one_artifact(tmp_path):
    model = Block().eval()
    batch, seq = Dim("batch", max=16), Dim("seq", max=64)
    exe = sdc.compile(model, (torch.randn(2, 6, 32),), dynamic_shapes=({0: batch, 1: seq},),
                      output=tmp_path / "block.sdc")
    assert [i.shape for i in exe.inputs] == [("batch", "seq", 32)]
    for b, s in ((1, 3), (4, 9), (16, 64)):
        check(exe, model, torch.randn(b, s, 32))
    with pytest.raises(SdcError, match=r"input 'x' \(dim 1 = 65\) must be between 1 and 64 "
                                       r"\(1 <= seq <= 64: torch.export range of dim 'seq'"):
        exe(torch.randn(2, 65, 32))


class Pairs(nn.Module):
    """A derived dim: `y` is twice as long as `x`."""

    def forward(self, x, y):
        return torch.cat([x, x], dim=1) * y


def test_derived_dim_is_a_dim_expression_and_a_guard():
    seq = Dim("seq", max=32)
    x, y = torch.randn(2, 3), torch.randn(2, 6)
    exe = sdc.compile(Pairs(), (x, y), dynamic_shapes=({1: seq}, {1: 2 * seq}))
    assert [i.shape for i in exe.inputs] == [(2, "seq"), (2, "y_1")]  # y_1 == 2*seq is a guard
    x, y = torch.randn(2, 5), torch.randn(2, 10)
    check(exe, Pairs(), x, y)
    with pytest.raises(SdcError, match=r"input 'y' \(dim 1 = 9\) must equal 2\*seq = 10"):
        exe(torch.randn(2, 5), torch.randn(2, 9))


def test_weights_keep_their_state_dict_names_and_ops_their_source_lines():
    model = CNN().eval()
    imported = import_torch(model, (torch.randn(1, 3, 8, 8),))
    assert set(imported.params) >= {k for k in model.state_dict() if not k.endswith("num_batches_tracked")}
    torch.testing.assert_close(imported.params["conv1.weight"], model.conv1.weight.detach())
    text = imported.module.get_asm(enable_debug_info=True)
    line = CNN.forward.__code__.co_firstlineno + 3  # y = self.bn2(self.conv2(y))
    assert re.search(rf'loc\("[^"]*test_torch_frontend.py":{line}:0\)', text), text[-2000:]


class TwoUnsupported(nn.Module):
    def forward(self, x):
        a = torch.atan2(x, x + 1)
        return torch.diagonal(a) + 1


def test_unsupported_ops_are_listed_together_with_their_source_lines():
    first = TwoUnsupported.forward.__code__.co_firstlineno + 1
    with pytest.raises(SdcError) as err:
        sdc.compile(TwoUnsupported(), (torch.randn(4, 4),))
    message = str(err.value)
    # the file as the user's shell would name it: relative to the working directory where it is below it
    here = os.path.relpath(__file__)
    here = here if not here.startswith("..") else __file__
    assert message.startswith("unsupported ATen ops (2): ")
    assert f"aten.atan2.default at {here}:{first} (node 'atan2')" in message
    assert f"aten.diagonal.default at {here}:{first + 1}" in message


def test_frontend_errors_are_one_line():
    with pytest.raises(SdcError, match="needs example_args"):
        sdc.compile(nn.Linear(2, 2))
    program = torch.export.export(nn.Linear(2, 2), (torch.randn(1, 2),))
    with pytest.raises(SdcError, match="an ExportedProgram carries its own example inputs"):
        sdc.compile(program, (torch.randn(1, 2),))
    with pytest.raises(SdcError, match=r"updates .*running_mean.* in place .*model.eval\(\)"):
        sdc.compile(nn.BatchNorm1d(3).train(), (torch.randn(4, 3),))
    with pytest.raises(SdcError, match=r"^torch.export failed: "):
        sdc.compile(nn.Linear(2, 2), (torch.randn(1, 3),))


def test_an_exported_program_compiles_as_it_is():
    model = nn.Sequential(nn.Linear(8, 8), nn.SiLU(), nn.LayerNorm(8)).eval()
    program = torch.export.export(model, (torch.randn(2, 8),), dynamic_shapes=({0: Dim("n")},))
    exe = sdc.compile(program)
    assert exe.inputs[0].shape == ("input_0", 8)  # an ExportedProgram keeps no Dim names: <input>_<dim>
    for n in (1, 5):
        check(exe, model, torch.randn(n, 8))


# ---------------------------------------------------------------- torch.compile(backend="sdc")


class Broken(nn.Module):
    """Two graphs: Dynamo breaks the graph at the print."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        x = torch.relu(self.a(x))
        torch._dynamo.graph_break()
        return self.b(x).softmax(-1)


def test_torch_compile_backend_compiles_each_graph():
    torch._dynamo.reset()
    STATS.reset()
    model = Broken().eval()
    compiled = torch.compile(model, backend="sdc", dynamic=False)
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), **TOL[torch.float32])
    assert (STATS.graphs, STATS.fallbacks) == (2, 0)


def test_torch_compile_backend_names_unsupported_ops_and_falls_back_only_when_asked():
    torch._dynamo.reset()
    STATS.reset()
    x = torch.randn(4, 4)
    with pytest.raises(Exception, match=r"unsupported ATen ops \(2\): aten.atan2.default at .*test_torch_frontend"):
        torch.compile(TwoUnsupported(), backend="sdc", dynamic=False)(x)
    torch._dynamo.reset()
    STATS.reset()
    eager = torch.compile(TwoUnsupported(), backend="sdc", dynamic=False, options={"fallback": "eager"})
    torch.testing.assert_close(eager(x), TwoUnsupported()(x))
    assert (STATS.graphs, STATS.fallbacks) == (0, 1)


def test_coverage_doc_is_current():
    from pathlib import Path

    from sdc.frontend.torch.coverage import render

    page = Path(__file__).resolve().parents[2] / "docs" / "torch-coverage.md"
    text = page.read_text(encoding="utf-8")
    version = torch.__version__.split("+")[0]
    if f"The core ATen op set of torch {version} " not in text:  # another torch has another core op set
        pytest.skip(f"docs/torch-coverage.md describes another torch than this {version}")
    assert text == render(), \
        "docs/torch-coverage.md is stale: python -m sdc.frontend.torch.coverage > docs/torch-coverage.md"


# ---------------------------------------------------------------- models users bring


def _transformers():
    """transformers (conftest.py has defined torchvision's op schemas where its C++ ops cannot load)."""
    import transformers

    return transformers


class HiddenStates(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def test_bert_from_a_small_config_matches_eager():
    tf = _transformers()
    config = tf.BertConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                           vocab_size=100, max_position_embeddings=64)
    model = HiddenStates(tf.BertModel(config)).eval()
    exe = sdc.compile(model, (torch.randint(0, 100, (2, 7)),))
    check(exe, model, torch.randint(0, 100, (2, 7)))
