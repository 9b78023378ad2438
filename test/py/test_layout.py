"""The layout cost model and solver on plain data, and sdc-layout-constraints on IR and on the zoo."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import onnx
import pytest

from sdc.diagnostics import DiagnosticSink
from sdc.interpreter import interpret
from sdc.ir_text import parse_module
from sdc.mlir import ir
from sdc.target import TARGETS
from sdc.transforms import PASSES, get_pass
from sdc.transforms import layout_model as lm
from sdc.transforms.base import PassOptionError, walk_ops
from sdc.transforms.layout_constraints import LayoutConstraintsPass

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NCHW, NHWC = (0, 1, 2, 3), (0, 2, 3, 1)

# ---------------------------------------------------------------- permutations


def test_candidate_layouts_by_rank():
    assert lm.alternative(4) == NHWC and lm.alternative(5) == (0, 2, 3, 4, 1)
    assert lm.alternative(3) == (0, 2, 1) and lm.alternative(2) == (1, 0)
    assert lm.alternative(1) is None and lm.alternative(0) is None
    assert lm.kind_layout(lm.CHANNELS_LAST, 1) == (0,)


def test_equivalent_layouts_ignore_unit_dims():
    assert lm.equivalent((1, 2048, 1, 1), NCHW, NHWC)
    assert lm.equivalent((2, 2048, 1, 1), NCHW, NHWC)  # N before C either way
    assert not lm.equivalent((2, 2048, 1, 7), NCHW, NHWC)  # W before C, or after
    assert not lm.equivalent((1, 64, 7, 7), NCHW, NHWC)
    assert not lm.equivalent((None, 64, 1, 1), (1, 0, 2, 3), NCHW)  # a dynamic dim is never 1


def test_projection_and_dropped_axes():
    assert lm.project(NHWC, 3) == (1, 2, 0)  # a [C, H, W] operand of an NHWC op is read [H, W, C]
    assert lm.project(NHWC, 1) == (0,)
    assert lm.drop_axes(NHWC, (2, 3)) == (0, 1)  # mean over H, W of NHWC: [N, C] row-major
    assert lm.drop_axes(NHWC, (1,)) == (0, 1, 2)
    assert lm.drop_axes((0, 2, 3, 1), (3,)) == (0, 2, 1)
    assert lm.inverse(NHWC) == (0, 3, 1, 2)
    assert lm.swap_last_two(3) == (0, 2, 1)


# ---------------------------------------------------------------- tables


@pytest.mark.parametrize("target", list(TARGETS))
def test_tables_are_data(target):
    table = lm.layout_table(target)
    assert "*" in table and table["*"].relation == "rigid"
    for key, rule in table.items():
        assert rule.relation in lm.RELATIONS, key
        assert rule.costs and set(rule.costs) <= set(lm.KINDS), key
        assert all(cost >= 0 for cost in rule.costs.values()), key


def test_convolution_prefers_nhwc_and_accepts_nchw_at_a_cost():
    rule = lm.rule_for("cuda", "conv", "convolution")
    assert rule.costs[lm.CHANNELS_LAST] == 0 and rule.costs[lm.ROW_MAJOR] > 0
    assert lm.rule_for("cuda", "matmul", "contraction").relation == "contraction"
    assert lm.rule_for("cuda", "reduce_sum", "reduction").relation == "reduce"
    assert lm.rule_for("cuda", "gather", "shape").relation == "rigid"
    assert lm.rule_for("cuda", "concat", "shape").relation == "uniform"


# ---------------------------------------------------------------- the solver


def tensor(shape, source="op", **kw) -> lm.TensorInfo:
    return lm.TensorInfo(tuple(shape), 4, source, **kw)


def residual_block(target="cuda", shape=(1, 64, 56, 56)) -> lm.LayoutProblem:
    """x -> conv -> add bias -> relu -> conv -> add x -> relu -> out."""
    w = (64, 64, 3, 3)
    tensors = [tensor(shape, "argument"), tensor(w, "weight"), tensor(shape), tensor((64, 1, 1), "weight"),
               tensor(shape), tensor(shape), tensor(w, "weight"), tensor(shape), tensor(shape), tensor(shape)]
    ops = [lm.OpInfo("conv", "convolution", (0, 1), (2,)),
           lm.OpInfo("add", "elementwise binary", (2, 3), (4,)),
           lm.OpInfo("relu", "elementwise unary", (4,), (5,)),
           lm.OpInfo("conv", "convolution", (5, 6), (7,)),
           lm.OpInfo("add", "elementwise binary", (7, 0), (8,)),
           lm.OpInfo("relu", "elementwise unary", (8,), (9,))]
    return lm.LayoutProblem(target, tensors, ops, [(9, None)])


@pytest.mark.parametrize("target", list(TARGETS))
def test_block_pays_one_cast_in_and_one_out(target):
    solution = lm.solve(residual_block(target))
    assert solution.exact
    assert solution.op_kinds == [lm.CHANNELS_LAST] * 6
    entry, exit_ = sorted(solution.casts, key=lambda c: c.tensor)
    assert (entry.tensor, entry.target, sorted(entry.consumers)) == (0, NHWC, [(0, 0), (4, 1)])  # one cast, two uses
    assert (exit_.tensor, exit_.target, exit_.consumers) == (9, NCHW, [(-1, 0)])
    assert solution.tensor_layouts[1] == NHWC and solution.tensor_layouts[6] == NHWC  # weights stored OHWI
    assert solution.cast_cost == 2 * 2 * 4 * 64 * 56 * 56
    assert "convolution" in entry.reason and "function argument" not in exit_.reason


def test_dynamic_dims_keep_the_answer():
    solution = lm.solve(residual_block(shape=(None, 64, None, None)))
    assert solution.op_kinds == [lm.CHANNELS_LAST] * 6 and len(solution.casts) == 2


def test_one_small_convolution_is_not_worth_two_casts():
    p = lm.LayoutProblem("cuda", [tensor((1, 8, 32, 32), "argument"), tensor((8, 8, 1, 1), "weight"),
                                  tensor((1, 8, 32, 32))],
                         [lm.OpInfo("conv", "convolution", (0, 1), (2,))], [(2, None)])
    solution = lm.solve(p)
    assert solution.op_kinds == [lm.ROW_MAJOR] and not solution.casts
    assert solution.op_cost == 4 * (8 * 32 * 32 * 2 + 64)  # the NCHW penalty, less than two casts


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_resize_between_convolutions_keeps_their_layout(target):
    """A decoder's upsampling between channels-last convolutions stays channels-last: no cast to
    row-major and back around it (torch's bilinear upsampling of 128 channels took 41 us row-major, 6
    channels-last), one in and one out of the block."""
    p = lm.LayoutProblem(target, [tensor((1, 128, 6, 4), "argument"), tensor((128, 128, 3, 3), "weight"),
                                  tensor((1, 128, 6, 4)), tensor((1, 128, 12, 8)), tensor((128, 128, 3, 3), "weight"),
                                  tensor((1, 128, 12, 8))],
                         [lm.OpInfo("conv", "convolution", (0, 1), (2,)),
                          lm.OpInfo("resize", "resampling", (2,), (3,)),
                          lm.OpInfo("conv", "convolution", (3, 4), (5,))], [(5, None)])
    solution = lm.solve(p)
    assert solution.op_kinds == [lm.CHANNELS_LAST] * 3
    assert sorted(c.tensor for c in solution.casts) == [0, 5]
    other = lm.rule_for(target, "grid_sample", "resampling")  # its grid operand: not a layout to follow
    assert other.relation == "rigid"


def test_requested_layouts_hold():
    p = residual_block()
    p.tensors[0].pinned = NHWC
    p.outputs = [(9, NHWC)]
    assert lm.solve(p).casts == []
    p = residual_block()
    p.ops[0].pinned = (NCHW,)
    solution = lm.solve(p)
    assert solution.op_kinds[0] == lm.ROW_MAJOR  # and then the rest stays NCHW too: casts would cost more
    assert solution.op_kinds == [lm.ROW_MAJOR] * 6 and solution.cost == lm.brute_force(p)[0]


def test_impossible_request_names_the_op():
    p = residual_block()
    p.ops[1].pinned = ((0, 3, 1, 2),)
    with pytest.raises(lm.LayoutRequestError, match=r"'sdc.add' cannot produce layout \[0, 3, 1, 2\]") as e:
        lm.solve(p)
    assert e.value.op == 1


def test_reduction_remaps_its_axes():
    # conv (NHWC) -> mean over H, W -> [N, C]: row-major in either layout, so no cast at the exit.
    p = lm.LayoutProblem("cuda", [tensor((2, 64, 14, 14), "argument", pinned=NHWC), tensor((64, 64, 3, 3), "weight"),
                                  tensor((2, 64, 14, 14)), tensor((2, 64))],
                         [lm.OpInfo("conv", "convolution", (0, 1), (2,)),
                          lm.OpInfo("reduce_mean", "reduction", (2,), (3,), axes=(2, 3), keepdims=False)],
                         [(3, None)])
    solution = lm.solve(p)
    assert solution.op_kinds == [lm.CHANNELS_LAST, lm.CHANNELS_LAST] and solution.casts == []
    assert solution.tensor_layouts[3] == (0, 1)


def test_matmul_reads_a_transposed_operand_as_it_is():
    p = lm.LayoutProblem("cuda", [tensor((4, 64), "argument", pinned=(1, 0)), tensor((64, 32), "weight"),
                                  tensor((4, 32))],
                         [lm.OpInfo("matmul", "contraction", (0, 1), (2,))], [(2, None)])
    assert lm.solve(p).casts == []


def random_problem(rng: random.Random, n_ops: int) -> lm.LayoutProblem:
    """A random DAG of convolutions, elementwise ops, pools and reshapes over [1, C, H, W] tensors."""
    shape = (1, 8, 4, 4)
    tensors = [tensor(shape, "argument", pinned=NHWC if rng.random() < 0.3 else None)]
    ops = []
    for _ in range(n_ops):
        kind = rng.choice(["conv", "add", "relu", "pool", "reshape"])
        a = rng.randrange(len(tensors))
        if kind == "conv":
            tensors.append(tensor((8, 8, 3, 3), "weight"))
            ops.append(lm.OpInfo("conv", "convolution", (a, len(tensors) - 1), (len(tensors),)))
        elif kind == "add":
            ops.append(lm.OpInfo("add", "elementwise binary", (a, rng.randrange(len(tensors))), (len(tensors),)))
        elif kind == "relu":
            ops.append(lm.OpInfo("relu", "elementwise unary", (a,), (len(tensors),)))
        elif kind == "pool":
            ops.append(lm.OpInfo("max_pool", "pooling", (a,), (len(tensors),)))
        else:
            ops.append(lm.OpInfo("reshape", "shape", (a,), (len(tensors),)))
        tensors.append(tensor(shape))
    outputs = [(len(tensors) - 1, rng.choice([None, NHWC]))]
    return lm.LayoutProblem(rng.choice(list(TARGETS)), tensors, ops, outputs)


def test_min_cut_finds_the_exact_minimum_on_random_graphs():
    rng = random.Random(20261129)
    for _ in range(60):
        p = random_problem(rng, rng.randrange(1, 9))
        solution = lm.solve(p)
        best, _ = lm.brute_force(p)
        assert solution.exact
        assert solution.cost == best, (p, solution)


# ---------------------------------------------------------------- the pass on IR

BLOCK = """
func.func @block(%x: tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32> {
  %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<16x16x3x3xf32>
  %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<16x16x3x3xf32>
  %b = "sdc.parameter"() {name = "b"} : () -> tensor<16x1x1xf32>
  %0 = "sdc.conv"(%x, %w1) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %1 = "sdc.add"(%0, %b) : (tensor<2x16x8x8xf32>, tensor<16x1x1xf32>) -> tensor<2x16x8x8xf32>
  %2 = "sdc.relu"(%1) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %3 = "sdc.conv"(%2, %w2) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %4 = "sdc.add"(%3, %x) : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %5 = "sdc.relu"(%4) : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  return %5 : tensor<2x16x8x8xf32>
}
"""


def run_passes(module, pipeline: str) -> DiagnosticSink:
    from sdc.transforms.pipeline import build_pipeline

    sink = DiagnosticSink()
    with module.context, ir.Location.unknown():
        build_pipeline(pipeline, sink).run(module)
    return sink


def block_params(rng) -> dict:
    return {"w1": rng.standard_normal((16, 16, 3, 3), dtype=np.float32),
            "w2": rng.standard_normal((16, 16, 3, 3), dtype=np.float32),
            "b": rng.standard_normal((16, 1, 1), dtype=np.float32)}


def test_pass_keeps_values_and_marks_layouts():
    rng = np.random.default_rng(5)
    module = parse_module(BLOCK)
    params = block_params(rng)
    x = rng.standard_normal((2, 16, 8, 8), dtype=np.float32)
    (before,) = interpret(module, [x], params)
    run_passes(module, "sdc-layout-constraints{target=cuda},sdc-verify")
    casts = walk_ops(module, "sdc.layout_cast")
    assert len(casts) == 2
    assert all("0, 2, 3, 1" in str(op.attributes["sdc.layout"]) for op in walk_ops(module, "sdc.conv"))
    (after,) = interpret(module, [x], params)
    np.testing.assert_array_equal(after, before)


def test_pass_is_registered_under_its_own_name():
    for name, factory in PASSES.items():
        assert factory().name == name
    assert get_pass("sdc-layout-constraints") is LayoutConstraintsPass


def test_unknown_target_is_an_option_error():
    with pytest.raises(PassOptionError, match=r"option 'target': unknown target 'tpu' \(targets: cpu, cuda\)"):
        LayoutConstraintsPass.from_options({"target": "tpu"})


# ---------------------------------------------------------------- the light zoo (target cuda)

# ShuffleNet's channel shuffles (reshape, transpose, reshape: row-major only) become gathers by 1-d
# indices in sdc-canonicalize, which take any layout: without that it paid 33 casts.
ZOO = ["resnet50", "densenet121", "inception_v2", "shufflenet"]


@pytest.mark.parametrize("name", ZOO)
def test_zoo_pays_at_most_two_casts(name):
    from sdc.frontend.onnx import import_onnx

    module = import_onnx(str(LIGHT / f"light_{name}.onnx")).module
    sink = run_passes(module, "sdc-verify,sdc-canonicalize,cse,sdc-layout-constraints{target=cuda},sdc-verify")
    assert not sink.has_errors
    casts = walk_ops(module, "sdc.layout_cast")
    convs = walk_ops(module, "sdc.conv")
    assert 1 <= len(casts) <= 2
    assert convs and all("0, 2, 3, 1" in str(op.attributes["sdc.layout"]) for op in convs)
    assert all("0, 2, 3, 1" in str(op.attributes["sdc.layout"]) for op in walk_ops(module, "sdc.gather"))
    assert all(op.attributes["sdc.reason"] for op in casts)
