"""Lowering a fresh torch.export graph to core ATen in place (sdc/frontend/torch/local_decomp.py).

The fast path must give what `run_decompositions` gives: the same core-ATen ops, and the same
numbers once compiled. Where a node has no rewrite, or an in-place update cannot be undone locally,
the graph is left exactly as it was and the retrace runs (the compiled model still matches eager).
"""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import sdc
from sdc.frontend.torch.export import decomposition_table, views_as_reshapes
from sdc.frontend.torch.local_decomp import _batch_norm, _bind, lower_locally, plan_lowering

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _ops(program) -> collections.Counter:
    return collections.Counter(str(n.target) for n in program.graph.nodes if n.op == "call_function")


def _check_compiled(model: nn.Module, *inputs: torch.Tensor) -> None:
    exe = sdc.compile(model, inputs, target="cpu")
    (got,) = exe(*inputs)
    with torch.no_grad():
        want = model(*inputs)
    torch.testing.assert_close(got, want, **TOL)


class Block(nn.Module):
    """What torchvision's ResNets export to: conv2d, eval batch_norm, relu_, add_, pools, flatten, linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.fc = nn.Linear(8, 5)
        for bn in (self.bn1, self.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        y = self.bn2(self.conv2(x))
        y += x
        y = self.relu(y)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class Mixed(nn.Module):
    """conv1d, layer norm, softmax / log_softmax, dropout (eval), reshape (of a non-contiguous value
    too), contiguous, a dtype conversion, linear without bias, and a value read both before and
    after two in-place updates of it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=1)
        self.norm = nn.LayerNorm(6)
        self.proj = nn.Linear(6, 6, bias=False)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        y = self.conv(x)                        # [B, 6, L]
        before = y * 2.0                        # reads y before it is updated
        y.relu_()
        y.mul_(1.5)
        h = self.norm(y.transpose(1, 2).contiguous())   # [B, L, 6]
        h = self.drop(h).reshape(-1, 6)
        h = self.proj(h).softmax(-1) + h.log_softmax(-1)
        flat = y.transpose(1, 2).reshape(x.shape[0], -1)  # a reshape of a non-contiguous value
        positive = (x > 0).to(torch.float32).sum((1, 2))  # aten.to.dtype
        return h.reshape(x.shape[0], -1).sum(-1) + (before + y).sum((1, 2)) + flat[:, ::2].sum(-1) + positive


@pytest.mark.parametrize("model,shape", [(Block, (2, 3, 16, 16)), (Mixed, (3, 4, 7))])
def test_the_fast_path_gives_the_retrace_ops_and_numbers(model, shape):
    m = model().eval()
    x = torch.randn(*shape)
    lowered = torch.export.export(m, (x,), strict=False)
    retraced = torch.export.export(m, (x,), strict=False)
    assert lower_locally(lowered, decomposition_table()) is None
    with views_as_reshapes(retraced):
        retraced = retraced.run_decompositions(decomposition_table())
    got, want = _ops(lowered), _ops(retraced)
    # the retrace writes a global average pool as a mean, and routes views its own way
    same = {"aten._adaptive_avg_pool2d.default", "aten.mean.dim", "aten.view.default", "aten.reshape.default",
            "aten.clone.default", "aten.permute.default", "aten.transpose.int", "<built-in function getitem>"}
    assert {k: v for k, v in got.items() if k not in same} == {k: v for k, v in want.items() if k not in same}
    assert not any(str(k).rstrip(".default").endswith("_") for k in got), got  # no in-place op is left
    with torch.no_grad():
        torch.testing.assert_close(lowered.module()(x), m(x), **TOL)
    _check_compiled(m, x)


class InputUpdate(nn.Module):
    def forward(self, x):
        x.add_(1.0)  # the caller's tensor: state, not a local value
        return x * 2


class ViewThenUpdate(nn.Module):
    def forward(self, x):
        y = x * 3
        v = y.view(-1)  # sees the update below
        y.relu_()
        return v + 1


class TrainingNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(x)


@pytest.mark.parametrize("model,why", [(InputUpdate, "in-place"), (ViewThenUpdate, "viewed value")])
def test_an_update_it_cannot_undo_leaves_the_graph_to_the_retrace(model, why):
    m = model()
    program = torch.export.export(m, (torch.randn(2, 5),), strict=False)
    before = [(n.name, n.target, n.args) for n in program.graph.nodes]
    refused = lower_locally(program, decomposition_table())
    assert refused is not None and why in refused
    assert [(n.name, n.target, n.args) for n in program.graph.nodes] == before
    if model is ViewThenUpdate:
        _check_compiled(m, torch.randn(2, 5))


def test_training_mode_batch_norm_has_no_local_rewrite():
    program = torch.export.export(TrainingNorm().train(), (torch.randn(6, 4),), strict=False)
    plan = plan_lowering(program.graph, decomposition_table())
    # it counts its batches into a buffer (state: refused first) and its rule refuses training mode
    assert plan.refused is not None and "in-place aten.add_" in plan.refused
    node = next(n for n in program.graph.nodes if n.target is torch.ops.aten.batch_norm.default)
    assert _batch_norm(_bind(node.target, node), node) is None


class UpdateThenRead(nn.Module):
    def forward(self, x):
        y = x * 3
        y.relu_()
        return y + 1


def test_a_reader_of_the_written_value_reads_the_update():
    """torch.export already points later readers at the in-place node; a graph that names the
    written value instead (as FX allows) must read the update once the op is out of place."""
    m = UpdateThenRead()
    x = torch.randn(4, 5)
    program = torch.export.export(m, (x,), strict=False)
    relu = next(n for n in program.graph.nodes if n.target is torch.ops.aten.relu_.default)
    add = next(n for n in program.graph.nodes if n.target is torch.ops.aten.add.Tensor)
    add.replace_input_with(relu, relu.args[0])  # the same program, read through the written name
    assert lower_locally(program, decomposition_table()) is None
    assert relu.target is torch.ops.aten.relu.default and add.args[0] is relu
    torch.testing.assert_close(program.module()(x), m(x.clone()), **TOL)


def test_a_rewrite_that_fails_halfway_leaves_an_equivalent_graph_to_the_retrace(monkeypatch):
    import sdc.frontend.torch.local_decomp as local

    made = []
    real = local._new_node

    def flaky(graph, like, target, args, kwargs):
        made.append(target)
        if len(made) >= 3:
            raise RuntimeError("no fake value")
        return real(graph, like, target, args, kwargs)

    monkeypatch.setattr(local, "_new_node", flaky)
    m = Block().eval()
    x = torch.randn(2, 3, 16, 16)
    program = torch.export.export(m, (x,), strict=False)
    refused = lower_locally(program, decomposition_table())
    assert refused is not None and "failed: RuntimeError: no fake value" in refused
    with torch.no_grad():
        torch.testing.assert_close(program.module()(x), m(x), **TOL)  # the graph is still the model
    _check_compiled(m, x)  # export_program: the same failure, then the retrace of what it left
