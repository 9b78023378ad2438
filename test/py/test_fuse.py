"""Fusion: the grouping and its cost model on plain data, sdc-fuse on IR, plans and the CPU runtime
with kernel groups, the report, and the light zoo giving the same results after layouts and fusion."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from sdc.cli.main import main as sdc_main
from sdc.cli.layout_report import format_layout_report, layout_report
from sdc.codegen.plan import build_plan
from sdc.compiler import compile_module
from sdc.diagnostics import DiagnosticSink
from sdc.interpreter import interpret
from sdc.ir_text import parse_module
from sdc.mlir import ir
from sdc.runtime.executor import PreparedOp
from sdc.transforms import fuse as F
from sdc.transforms.base import walk_ops

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

# ---------------------------------------------------------------- the grouping, on plain data


class Graph:
    """A FusionGraph built op by op: `g.op(kind, *operand values)` returns the result value."""

    def __init__(self):
        self.values: list[F.Value] = []
        self.nodes: list[F.Node] = []

    def input(self, nbytes=1024, type_="t") -> int:
        self.values.append(F.Value(nbytes, type_))
        return len(self.values) - 1

    def op(self, kind, *operands, nbytes=1024, type_="t", flops=256, domain=None, place=None, layout=None) -> int:
        self.values.append(F.Value(nbytes, type_, 4, (2, 8, 4, 4), layout, len(self.nodes)))
        self.nodes.append(F.Node(kind, tuple(operands), (len(self.values) - 1,), flops, domain, place))
        return len(self.values) - 1

    def plan(self, *outputs, target="cuda") -> tuple[F.FusionGraph, list[list[int]]]:
        graph = F.FusionGraph(self.values, self.nodes, list(outputs))
        return graph, [g.members for g in F.plan_groups(graph, target).groups]


EW, RED = F.ELEMENTWISE, F.REDUCTION


def test_elementwise_chain_is_one_kernel_and_moves_a_third():
    g = Graph()
    x = g.input()
    y = g.op(EW, g.op(EW, g.op(EW, x)))
    graph, groups = g.plan(y)
    assert groups == [[0, 1, 2]]
    assert F.traffic_unfused(graph) == 6 * 1024 and F.traffic(graph, groups) == 2 * 1024


def test_reduction_takes_prologue_and_epilogue_of_one_domain():
    g = Graph()
    x = g.input()
    m = g.op(RED, x, domain="rows", nbytes=32, type_="s")
    d = g.op(EW, x, m)
    s = g.op(RED, g.op(EW, d), domain="rows", nbytes=32, type_="s")
    out = g.op(EW, d, s)
    other = g.op(RED, out, domain="columns", nbytes=32, type_="s")  # another domain: its own kernel
    _, groups = g.plan(out, other)
    assert groups == [[0, 1, 2, 3, 4], [5]]


def test_anchor_starts_a_group_and_takes_its_epilogue_only():
    g = Graph()
    x, w = g.input(), g.input()
    pre = g.op(EW, x)
    mm = g.op("contraction", pre, w)
    out = g.op(EW, g.op(EW, mm, x))
    _, groups = g.plan(out)
    assert groups == [[0], [1, 2, 3]]


def test_barriers_places_and_layouts_split_groups():
    g = Graph()
    x = g.input()
    a = g.op(EW, x)
    b = g.op(F.BARRIER, a)
    c = g.op(EW, b)
    d = g.op(EW, c, place=("gpu1",))
    e = g.op(EW, d, place=("gpu1",), layout=(0, 2, 3, 1))
    _, groups = g.plan(e)
    assert groups == [[0], [1], [2], [3], [4]]


def test_groups_stay_convex():
    # a -> opaque -> c, and a -> c directly: c may not join a's group (the path leaves through the reshape).
    g = Graph()
    x = g.input()
    a = g.op(EW, x)
    b = g.op(F.OPAQUE, a)
    c = g.op(EW, a, b)
    _, groups = g.plan(c)
    assert groups == [[0], [1], [2]]


def test_convexity_sees_paths_made_by_later_joins():
    # o joins a's group and makes it depend on c's group; p then may not join c's group, because
    # p reads b, which comes from a's group: c -> (a, o) -> b -> p would be a cycle between kernels.
    g = Graph()
    x, y = g.input(), g.input()
    a = g.op(EW, x)
    b = g.op(F.OPAQUE, a)
    c = g.op(EW, y, flops=10 ** 9)  # too dear to recompute
    o = g.op(EW, a, c)
    p = g.op(EW, c, b)
    graph, groups = g.plan(o, p)
    assert groups == [[0, 3], [1], [2], [4]]
    grouping = F.plan_groups(graph)
    order = F.kernel_order(graph, [grp.members for grp in grouping.groups])
    assert sorted(order) == list(range(len(grouping.groups)))


def test_outputs_of_one_group_share_a_type():
    g = Graph()
    x = g.input()
    a = g.op(EW, x)
    s = g.op(RED, a, domain="rows", nbytes=32, type_="s")  # leaves the group: another type than a
    big = g.op("contraction", g.input(), g.input())
    out = g.op(EW, big, a)
    graph, groups = g.plan(s, out)
    for members, leaving in zip(groups, F.group_outputs(graph, groups)):
        assert len({graph.values[v].type for v in leaving}) <= 1


def test_recomputes_a_cheap_op_only_when_it_saves_traffic():
    def build(flops):
        g = Graph()
        x = g.input()
        e = g.op(EW, x, flops=flops)
        s = g.op(RED, e, domain="rows", nbytes=32, type_="s")
        r = g.op(EW, g.op("contraction", g.input(), g.input()), e)
        return g, s, r

    g, s, r = build(flops=1024)
    graph = F.FusionGraph(g.values, g.nodes, [s, r])
    grouping = F.plan_groups(graph, "cuda")
    assert grouping.recomputed == [(0, 1)]  # exp copied into the matmul's group
    assert [grp.members for grp in grouping.groups] == [[0, 1], [0, 2, 3]]
    g, s, r = build(flops=10 ** 9)  # far too expensive to do twice
    graph = F.FusionGraph(g.values, g.nodes, [s, r])
    assert F.plan_groups(graph, "cuda").recomputed == []


# ---------------------------------------------------------------- sdc-fuse on IR

BLOCK = """
func.func @main(%x: tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32> {
  %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<16x16x3x3xf32>
  %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<16x16x3x3xf32>
  %s = "sdc.parameter"() {name = "s"} : () -> tensor<16xf32>
  %b = "sdc.parameter"() {name = "b"} : () -> tensor<16xf32>
  %m = "sdc.parameter"() {name = "m"} : () -> tensor<16xf32>
  %v = "sdc.parameter"() {name = "v"} : () -> tensor<16xf32>
  %bias = "sdc.parameter"() {name = "bias"} : () -> tensor<16x1x1xf32>
  %0 = "sdc.conv"(%x, %w1) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %1 = "sdc.batch_norm"(%0, %s, %b, %m, %v) : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x8x8xf32>
  %2 = "sdc.relu"(%1) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %3 = "sdc.conv"(%2, %w2) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %4 = "sdc.add"(%3, %bias) : (tensor<2x16x8x8xf32>, tensor<16x1x1xf32>) -> tensor<2x16x8x8xf32>
  %5 = "sdc.add"(%4, %2) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %6 = "sdc.relu"(%5) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %7 = "sdc.reduce_max"(%6) {axes = array<i64: 1>, keepdims = true} : (tensor<2x16x8x8xf32>) -> tensor<2x1x8x8xf32>
  %8 = "sdc.sub"(%6, %7) : (tensor<2x16x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x16x8x8xf32>
  %9 = "sdc.exp"(%8) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %10 = "sdc.reduce_sum"(%9) {axes = array<i64: 1>, keepdims = true} : (tensor<2x16x8x8xf32>) -> tensor<2x1x8x8xf32>
  %11 = "sdc.div"(%9, %10) : (tensor<2x16x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x16x8x8xf32>
  return %11 : tensor<2x16x8x8xf32>
}
"""


def block_params(rng) -> dict:
    c = 16
    return {"w1": rng.standard_normal((c, c, 3, 3), dtype=np.float32) * 0.2,
            "w2": rng.standard_normal((c, c, 3, 3), dtype=np.float32) * 0.2,
            "s": rng.standard_normal(c, dtype=np.float32), "b": rng.standard_normal(c, dtype=np.float32),
            "m": rng.standard_normal(c, dtype=np.float32), "v": rng.uniform(0.5, 2, c).astype(np.float32),
            "bias": rng.standard_normal((c, 1, 1), dtype=np.float32)}


def run_passes(module, pipeline: str) -> None:
    from sdc.transforms.pipeline import build_pipeline

    sink = DiagnosticSink()
    with module.context, ir.Location.unknown():
        build_pipeline(pipeline, sink).run(module)
    assert not sink.has_errors, [d.format() for d in sink.diagnostics]


@pytest.mark.parametrize("target", ["cuda", "cpu"])
def test_fused_block_interprets_the_same(target):
    rng = np.random.default_rng(17)
    params = block_params(rng)
    module = parse_module(BLOCK)
    x = rng.standard_normal((2, 16, 8, 8), dtype=np.float32)
    (before,) = interpret(module, [x], params)
    run_passes(module, f"sdc-layout-constraints{{target={target}}},sdc-fuse{{target={target}}},sdc-verify")
    groups = walk_ops(module, "sdc.fusion")
    kinds = [str(g.attributes["kind"]) for g in groups]
    assert kinds == ['"convolution"', '"convolution"', '"reduction"']
    (after,) = interpret(module, [x], params)
    np.testing.assert_array_equal(after, before)


def test_plan_runs_a_group_as_one_step_and_reports_the_same_traffic():
    module = parse_module(BLOCK)
    run_passes(module, "sdc-layout-constraints{target=cuda}")
    fn = walk_ops(module, "func.func")[0]
    with module.context:
        graph = F.read_graph(fn)
    run_passes(module, "sdc-fuse{target=cuda}")
    with module.context:
        grouping_report = F.report(graph, F.plan_groups(graph, "cuda"))
    plan = build_plan(module, block_params(np.random.default_rng(0)), "cuda")
    steps = plan.ranks[0].launches()
    assert [[op["op"] for op in s["kernel"]["ops"]] for s in steps] == [
        ["layout_cast", "conv", "batch_norm", "relu"],
        ["conv", "add", "relu"],  # the bias add merged into the convolution (plan.py _bias_into_conv)
        ["reduce_max", "sub", "exp", "reduce_sum", "div", "layout_cast"]]
    report = layout_report(plan.to_json())
    assert (report.kernels, report.fused, report.ops) == (3, 3, 13)
    # the same traffic after fusion; before it, the plan counts one op fewer than sdc-fuse's graph (the bias
    # add the planner merged into the convolution, whose unfused write and read of the result are gone)
    assert report.bytes_after == grouping_report.bytes_after and report.bytes_before < grouping_report.bytes_before
    assert report.bytes_after < report.bytes_before / 2
    assert [c.layout for c in report.casts] == [[0, 2, 3, 1], [0, 1, 2, 3]]
    assert all("operand" in c.reason or "result" in c.reason for c in report.casts)
    text = format_layout_report(report)
    assert "layout casts: 2" in text and "kernel groups: 3 for 13 ops (3 fused, 0 single ops)" in text


# ---------------------------------------------------------------- the CPU runtime


def test_cpu_runtime_runs_fused_groups_with_folded_weights():
    rng = np.random.default_rng(23)
    params = block_params(rng)
    x = rng.standard_normal((2, 16, 8, 8), dtype=np.float32)
    (expected,) = interpret(parse_module(BLOCK), [x], params)
    exe = compile_module(parse_module(BLOCK), params)
    program = [op for op in exe._executor.program if isinstance(op, PreparedOp)]
    assert "batch_norm" not in [op.name for op in program]  # folded into the first convolution at compile time
    # both take a bias (input, weight, bias; a merged residual add's other operand comes last)
    assert sum(1 for op in program if op.name == "conv"
               and len(op.ins) == 3 + ("add" in op.attrs.get("sdc.epilogue", []))) == 2
    (out,) = exe(x)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    (again,) = exe(x)
    np.testing.assert_array_equal(again, out)  # in-place kernels never touch what they do not own
    assert not np.shares_memory(out, x)


SHARED = """
func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = "sdc.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "sdc.relu"(%0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "sdc.add"(%0, %1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = "sdc.neg"(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = "sdc.layout_cast"(%x) {layout = #sdc.layout<array<i64: 1, 0>>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = "sdc.relu"(%4) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %3, %5 : tensor<4x8xf32>, tensor<4x8xf32>
}
"""


def test_in_place_only_on_values_nobody_else_reads():
    x = np.random.default_rng(3).standard_normal((4, 8), dtype=np.float32)
    expected = interpret(parse_module(SHARED), [x])
    exe = compile_module(parse_module(SHARED))
    x_before = x.copy()
    for got, want in zip(exe(x), expected):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(x, x_before)  # the input survives the in-place kernels and the cast


def test_cpu_layout_cast_moves_the_bytes():
    from sdc.runtime.reference_kernels import reference_kernel

    x = torch.randn(2, 3, 4, 5)
    y = reference_kernel("layout_cast", None)(None, {"layout": [0, 2, 3, 1]}, x)
    assert torch.equal(y, x) and y.is_contiguous(memory_format=torch.channels_last)
    assert reference_kernel("layout_cast", None)(None, {"layout": [0, 1, 2, 3]}, y).is_contiguous()


# ---------------------------------------------------------------- the report on the command line


def test_explain_layout_and_inspect_print_the_report(tmp_path, capsys):
    model = tmp_path / "block.mlir"
    model.write_text(BLOCK)
    np.savez(tmp_path / "p.npz", **block_params(np.random.default_rng(1)))
    code = sdc_main(["compile", str(model), "--params", str(tmp_path / "p.npz"), "-o", str(tmp_path / "b.sdc"),
                     "--explain", "layout"])
    out = capsys.readouterr().out
    assert code == 0
    assert "layout and fusion (target cpu)" in out and "layout casts: 2" in out
    # 12 ops, not the program's 14: the batch norm is folded into the first convolution's weights at compile
    # time (sdc-fold-conv-batch-norm) and each convolution takes its per-channel add as its bias (the planner)
    assert "why: operand #0 of 'sdc.conv'" in out and "kernel groups: 3 for 12 ops" in out
    assert "before fusion" in out
    assert sdc_main(["inspect", str(tmp_path / "b.sdc")]) == 0
    inspected = capsys.readouterr().out
    assert "layout and fusion" in inspected and "kernel groups: 3 for 12 ops" in inspected
    plan = json.loads((tmp_path / "b.sdc" / "plan.json").read_text())
    assert any("layout" in v for v in plan["ranks"][0]["values"].values())  # OHWI weights stored that way


# ---------------------------------------------------------------- the light zoo


def logits(module) -> None:
    """Return the pre-softmax values: with random weights the softmax is nearly uniform, and would
    hide a wrong result."""
    fn = walk_ops(module, "func.func")[0]
    ret = [op.operation for op in fn.regions[0].blocks[0].operations][-1]
    owner = ret.operands[0].owner
    owner = owner.operation if hasattr(owner, "operation") else owner
    if owner.name == "sdc.softmax":
        ret.operands[0] = owner.operands[0]
        owner.erase()


def random_weights(params: dict, rng) -> dict:
    """Fresh weights of the same shapes: the light models' own are degenerate (ResNet-50's give every
    class the same logit), and would hide a wrong result. Matrices and kernels get He-scaled normal
    values, vectors (biases, norm statistics) values in [0.5, 1.5]: variances stay positive."""
    out = {}
    for name, value in params.items():
        shape = np.shape(value)
        if len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            out[name] = (rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)
        else:
            out[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    return out


@pytest.mark.parametrize("name", ["resnet50", "densenet121", "inception_v2"])
def test_zoo_same_results_after_layouts_and_fusion(name):
    from sdc.frontend.onnx import import_onnx

    imported = import_onnx(str(LIGHT / f"light_{name}.onnx"))
    module = imported.module
    with module.context:
        logits(module)
    fn = walk_ops(module, "func.func")[0]
    shape = list(ir.RankedTensorType(fn.regions[0].blocks[0].arguments[0].type).shape)
    x = np.random.default_rng(hash(name) % 2 ** 32).standard_normal(shape, dtype=np.float32)
    params = random_weights(imported.params, np.random.default_rng(7))
    (before,) = interpret(module, [x], params)
    run_passes(module, "sdc-verify,sdc-canonicalize,cse,sdc-layout-constraints{target=cuda},"
                       "sdc-fuse{target=cuda},sdc-verify")
    assert len(walk_ops(module, "sdc.layout_cast")) <= 2 and walk_ops(module, "sdc.fusion")
    (after,) = interpret(module, [x], params)
    assert np.ptp(before) > 1e-3  # a result that can tell a wrong program from a right one
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6 * np.abs(before).max())
