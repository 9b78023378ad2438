"""Every op has every hook a pass asks for (sdc/dialect/hooks.py), and the hooks say what the passes
relied on when they kept tables of names.

Each op's own example (its docs/dialect.md entry) gives operand and result types and attributes to
call its hooks with: the cost rule, the layout rule and the sharding rule must all accept them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sdc import dtypes
from sdc.dialect import derivatives
from sdc.dialect.hooks import (DYNAMIC_DIM, KIND_DEFAULTS, Cost, FusionClass, KernelForm, LayoutRule, OpKind,
                               Precision, Recompute, RowReduce, ShardingRule)
from sdc.dialect.ir import read_attrs, tensor_spec
from sdc.dialect.op_classes import new_context
from sdc.dialect.opdef import OpDef, all_ops, weight_ops
from sdc.dialect.ops import elementwise, reduce
from sdc.dialect.shapes import DYN, TensorSpec, is_static
from sdc.ir_text import parse_module
from sdc.transforms import layout_model as lm
from sdc.transforms import sharding as S
from test_dialect_doc import _the_op, example_module

OPS = all_ops()


def _example(name: str) -> tuple[list[TensorSpec], list[TensorSpec], dict]:
    """The operand and result specs and the attributes (defaults filled in) of an op's example."""
    ctx = new_context()
    module = parse_module(example_module(OPS[name].example), source_name=f"sdc.{name}.example", ctx=ctx)
    with ctx:
        op = _the_op(module, name)
        return ([tensor_spec(v.type) for v in op.operands], [tensor_spec(r.type) for r in op.results],
                read_attrs(OPS[name], op))


def _bytes(spec: TensorSpec) -> int:
    n = dtypes.itemsize(spec.dtype)
    for d in spec.shape:
        n *= d if is_static(d) else DYNAMIC_DIM
    return n


# ---------------------------------------------------------------- coverage: every op, every hook


def test_every_kind_has_defaults_and_ops():
    assert set(KIND_DEFAULTS) == set(OpKind), "give the new kind its defaults in KIND_DEFAULTS"
    assert {op.kind for op in OPS.values()} == set(OpKind), "a kind no op has"


def test_an_op_without_a_kind_is_refused():
    with pytest.raises(TypeError, match="needs a kind"):
        OpDef(name="frobnicate", summary="", operands=("x",), shape=None, ref=lambda env, a, x: x)
    with pytest.raises(TypeError, match="needs a kind"):
        OpDef(name="frobnicate", summary="", operands=("x",), shape=None, ref=lambda env, a, x: x, kind="shape")


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_every_hook(name):
    op = OPS[name]
    assert isinstance(op.kind, OpKind)
    assert isinstance(op.precision, Precision)
    assert isinstance(op.fusion, FusionClass)
    assert isinstance(op.recompute, Recompute)
    assert isinstance(op.sharding, ShardingRule) and op.sharding.rule in S.FACTOR_RULES, op.sharding
    assert op.sharding.linear in ("", "unary", "all", "one", "lhs")
    assert isinstance(op.may_view, bool) and isinstance(op.folds, bool) and isinstance(op.differentiable, bool)
    assert callable(op.cost)
    if op.may_view:
        assert op.operands or op.variadic_operand, "an op without operands has no operand to view"
    if not op.pure:
        assert op.recompute == Recompute.NEVER and not op.folds


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_hook_takes_the_ops_own_example(name):
    op = OPS[name]
    ins, outs, attrs = _example(name)
    cost = op.cost(ins, outs, attrs)
    assert isinstance(cost, Cost) and isinstance(cost.flops, int) and cost.flops >= 0
    assert cost.bytes == sum(_bytes(s) for s in (*ins, *outs))
    rule = op.layout_rule([s.rank for s in ins])
    assert isinstance(rule, LayoutRule) and rule.relation in lm.RELATIONS and rule.why
    dims = [[d if is_static(d) else None for d in s.shape] for s in ins]
    rdims = [[d if is_static(d) else None for d in s.shape] for s in outs]
    factors = S.rule_for(name, op.kind, attrs, dims, rdims, [s.dtype for s in (*ins, *outs)])
    assert [len(row) for row in factors.operands] == [len(d) for d in dims]
    assert [len(row) for row in factors.results] == [len(d) for d in rdims]


def test_every_op_the_kernel_lowering_writes_out_has_its_lowering():
    from sdc.codegen.kernel.lowering import _Lowering

    for name, op in OPS.items():
        assert isinstance(op.kernel_form, KernelForm) and isinstance(op.kernel_floats_only, bool)
        if op.kernel_form != KernelForm.RENDERED:
            assert op.row_reduce is not None or hasattr(_Lowering, f"_lower_{name}"), f"sdc.{name}: no _lower_{name}"
        if op.row_reduce is not None:
            assert op.kernel_form == KernelForm.ROW and op.row_reduce.primitive in ("sum", "max", "min"), name
        for i, dim in op.vector_operands.items():
            assert 0 < i < len(op.operands) and isinstance(dim, int), (name, i, dim)
    own = {m.removeprefix("_lower_") for m in dir(_Lowering) if m.startswith("_lower_")} - {"reduction"}
    assert own <= set(OPS), "a _lower_<op> method of no op"
    # every op with such a method is written out by the lowering, but random_uniform, which the renderer has
    assert {n for n in own if OPS[n].kernel_form == KernelForm.RENDERED} == {"random_uniform"}


def test_every_differentiable_op_has_a_vjp_or_is_a_known_gap():
    missing = sorted(n for n, op in OPS.items() if derivatives.is_differentiable_kind(op) and op.vjp is None)
    assert missing == sorted(derivatives.PENDING)
    assert not [n for n, op in OPS.items() if op.vjp is not None and not op.differentiable]


def test_the_override_tables_name_ops():
    assert set(elementwise.HOOKS) <= set(OPS)
    assert set(reduce._REDUCE_HOOKS) <= set(OPS)


# ---------------------------------------------------------------- what the passes' tables said


def test_costs():
    f32 = "f32"
    mm = OPS["matmul"].cost([TensorSpec((4, 8), f32), TensorSpec((8, 16), f32)], [TensorSpec((4, 16), f32)], {})
    assert mm == Cost(2 * 4 * 16 * 8, (32 + 128 + 64) * 4)
    conv = OPS["conv"].cost([TensorSpec((1, 3, 8, 8), f32), TensorSpec((4, 3, 3, 3), f32)],
                            [TensorSpec((1, 4, 6, 6), f32)], {})
    assert conv.flops == 2 * (4 * 6 * 6) * (3 * 3 * 3)
    x = TensorSpec((2, 3), f32)
    assert OPS["add"].cost([x, x], [x], {}).flops == 6
    assert OPS["exp"].cost([x], [x], {}).flops == 6 * 8  # a transcendental counts as 8
    assert OPS["softmax"].cost([TensorSpec((2, 5), f32)], [TensorSpec((2, 5), f32)], {"axis": -1}).flops == 80
    assert OPS["max_pool"].cost([TensorSpec((1, 2, 4, 4), f32)], [TensorSpec((1, 2, 2, 2), f32)],
                                {"kernel": [2, 2]}).flops == 8 * 4
    dyn = TensorSpec((DYN, 4), f32)
    assert OPS["relu"].cost([dyn], [dyn], {}) == Cost(32 * 4, 2 * 32 * 4 * 4)


def test_fusion_classes():
    expected = {"add": "elementwise", "gelu": "elementwise", "cast": "elementwise", "batch_norm": "elementwise",
                "random_uniform": "elementwise", "reduce_sum": "reduction", "softmax": "reduction",
                "layer_norm": "reduction", "global_avg_pool": "reduction", "layout_cast": "layout",
                "matmul": "contraction", "conv": "convolution", "max_pool": "pooling", "all_reduce": "barrier",
                "gather": "opaque", "reshape": "opaque", "custom": "opaque"}
    assert {n: OPS[n].fusion.value for n in expected} == expected
    assert OPS["layer_norm"].reduced_axes(4, {"axis": -2}) == (2, 3)


def test_recompute_and_views_and_weights():
    assert {n for n, op in OPS.items() if op.recompute == Recompute.HEAVY} == {
        "matmul", "conv", "conv_weight_grad", "conv_transpose", "deform_conv", "linear_attention"}
    assert OPS["random_uniform"].recompute == OPS["all_reduce"].recompute == Recompute.NEVER
    assert OPS["reshape"].may_view and OPS["cast"].may_view and OPS["all_gather"].may_view
    assert not OPS["add"].may_view and not OPS["matmul"].may_view and not OPS["iota"].may_view
    assert weight_ops() == {"sdc.parameter", "sdc.constant"}
    assert OPS["all_slice"].folds and not OPS["all_gather"].folds and OPS["add"].folds


def test_layout_rules():
    assert OPS["gather"].layout_rule((2, 1)).relation == "uniform"  # by 1-d indices: any layout
    assert OPS["gather"].layout_rule((2, 2)).relation == "rigid"  # an embedding lookup
    assert OPS["matmul"].layout_rule().relation == "contraction"
    assert OPS["reduce_mean"].layout_rule().relation == "reduce"
    assert OPS["resize"].layout_rule().relation == "uniform" and OPS["grid_sample"].layout_rule().relation == "rigid"
    assert lm.rule_for("cpu", "conv").costs[lm.CHANNELS_LAST] == 0  # the target's preference, by kind
    assert lm.rule_for("cpu", "conv").costs[lm.ROW_MAJOR] > 0


def test_sharding_rules():
    assert OPS["add"].sharding == ShardingRule("elementwise", "all")
    assert OPS["reduce_sum"].sharding.linear == "unary" and OPS["reduce_max"].sharding.linear == ""
    assert S.rule_for("softmax", "normalization", {"axis": -1}, [[4, 8]], [[4, 8]]).kinds == [S.PARALLEL, S.BLOCKED]
    assert S.rule_for("lrn", "normalization", {}, [[2, 3, 4, 4]], [[2, 3, 4, 4]]).kinds[1] == S.BLOCKED
    # an op this process does not define: its kind's rule, else the fallback
    assert S.rule_for("no_such_op", "elementwise unary", {}, [[4]], [[4]]).kinds == [S.PARALLEL]
    assert S.rule_for("no_such_op", "", {}, [[4]], [[4]]).kinds == [S.BLOCKED, S.BLOCKED]


def test_precision_policies():
    keep = {"softmax", "layer_norm", "reduce_sum", "cast", "deform_conv", "avg_pool", "scatter_nd", "send", "recv"}
    low = {"matmul", "conv", "add", "gelu", "where"}
    follow = {"reshape", "all_reduce", "eq", "isnan", "max_pool", "reduce_max", "gather"}
    got = {n: OPS[n].precision for n in keep | low | follow}
    assert got == {**{n: Precision.KEEP for n in keep}, **{n: Precision.LOW for n in low},
                   **{n: Precision.FOLLOW for n in follow}}


def test_kernel_lowering_facts():
    """What sdc/codegen/kernel/lowering.py's tables said: the row template's ops, their reduction
    primitives, the per-channel and per-row operands, the ops it writes out, the float-only ones."""
    assert {n for n, op in OPS.items() if op.kernel_form == KernelForm.ROW} == {
        "softmax", "log_softmax", "layer_norm", "rms_norm", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min"}
    assert {n for n, op in OPS.items() if op.kernel_form == KernelForm.LOWERED} == {
        "cast", "layout_cast", "batch_norm", "gather", "pow"}
    assert {n: op.row_reduce for n, op in OPS.items() if op.row_reduce is not None} == {
        "reduce_sum": RowReduce("sum"), "reduce_mean": RowReduce("sum", mean=True), "reduce_max": RowReduce("max"),
        "reduce_min": RowReduce("min")}
    assert {n: dict(op.vector_operands) for n, op in OPS.items() if op.vector_operands} == {
        "batch_norm": {1: 1, 2: 1, 3: 1, 4: 1}, "layer_norm": {1: -1, 2: -1}, "rms_norm": {1: -1}}
    assert {n for n, op in OPS.items() if op.kernel_floats_only} == {"div", "mod", "pow", "clip"}


def test_the_kernel_lowering_asks_the_opdef_not_the_name(monkeypatch):
    """An op the lowering has never heard of, with reduce_max's hooks, lowers as a row reduction; with
    batch_norm's per-channel operands moved to the last dim, they are read along it."""
    from sdc.codegen.c.renderer import CRenderer
    from sdc.codegen.kernel import LoweringError, lower_group

    supported = CRenderer.elementwise_ops()
    monkeypatch.setitem(OPS, "row_peak", dataclasses.replace(OPS["reduce_max"], name="row_peak"))
    values = {"x": {"shape": [4, 6], "dtype": "f32"}, "y": {"shape": [4], "dtype": "f32"},
              "s": {"shape": [6], "dtype": "f32"}, "z": {"shape": [4, 6], "dtype": "f32"}}
    peak = {"op": "row_peak", "attrs": {"axes": [1], "keepdims": False}, "inputs": ["x"], "outputs": ["y"]}
    program = lower_group([peak], ["x"], ["y"], values, supported)
    assert program.template == "row" and [n.op for n in program.nodes] == ["load", "max"]
    assert [list(r.map) for r, _ in program.results] == [[0]]
    monkeypatch.setitem(OPS, "row_peak", dataclasses.replace(OPS["reduce_max"], name="row_peak",
                                                             kernel_form=KernelForm.RENDERED, row_reduce=None))
    with pytest.raises(LoweringError, match="no kernel template or renderer form for 'sdc.row_peak'"):
        lower_group([peak], ["x"], ["y"], values, supported)

    monkeypatch.setitem(OPS, "last_dim_norm", dataclasses.replace(
        OPS["batch_norm"], name="last_dim_norm", vector_operands={i: -1 for i in range(1, 5)}))
    values.update({"w": {"shape": [2, 4, 6], "dtype": "f32"}, "v": {"shape": [2, 4, 6], "dtype": "f32"}})
    norm = {"op": "last_dim_norm", "attrs": {"epsilon": 1e-5}, "inputs": ["w", "s", "s", "s", "s"], "outputs": ["v"]}
    program = lower_group([norm], ["w", "s"], ["v"], values, supported)
    assert program.template == "elementwise"
    assert {a.value: list(a.map) for a in program.args} == {"w": [0, 1, 2], "s": [2]}  # batch_norm's: [1]


def test_the_docs_table_of_kind_defaults_is_current():
    text = (Path(__file__).resolve().parents[2] / "docs" / "ops.md").read_text()
    for kind in OpKind:
        d = KIND_DEFAULTS[kind]
        other = [fact for fact, holds in (("may view", d.may_view), ("not differentiable", not d.differentiable),
                                          ("no folding", not d.folds)) if holds]
        row = (f"| {kind.value} | {d.precision} | {d.fusion} | {d.layout.relation} | {d.sharding.rule} | "
               f"{d.recompute} | {', '.join(other) or '-'} |")
        assert row in text, f"docs/ops.md: the row of kind '{kind.value}' should read {row}"
