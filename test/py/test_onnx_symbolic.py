"""Symbolic dims through shape arithmetic, as exporters emit them: one regression case per class
of failure that real exported models hit (issue 10).

1. a shape computed from symbolic dims feeding a shape operand (Shape -> ConstantOfShape / Expand /
   Range), which the constant folder used to try to evaluate;
2. Slice bounds that are dim expressions (`position_ids[:, :seq]`, `mask[:, past:past + seq]`);
3. shape values of rank other than 1 used at run time (a scalar `past + seq`, a [1, 1] pair), as
   decoders with a KV cache compute them.

Each model passes `onnx.checker`'s full check, is compiled ONCE, and runs at several shapes on fresh
random inputs against onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import sdc
from sdc.diagnostics import SdcError

RNG = np.random.default_rng()
I64 = TensorProto.INT64


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


def _f32(name: str, dims) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def _node(op: str, inputs, outputs, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), list(outputs), name=outputs[0], **attrs)


def _check(model: onnx.ModelProto, shapes: dict[str, list[tuple[int, ...]]]) -> sdc.runtime.Executable:
    """Compile once; at each listed shape, fresh random inputs match onnxruntime."""
    exe = sdc.compile(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = list(shapes)
    for dims in zip(*shapes.values()):
        inputs = {n: RNG.standard_normal(d).astype(np.float32) for n, d in zip(names, dims)}
        got = exe(**inputs)
        got = got if isinstance(got, (list, tuple)) else [got]
        want = session.run(None, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.asarray(g).shape == w.shape
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
    return exe


# ---------------------------------------------------------------- 1. shape arithmetic into shape operands


def test_constant_of_shape_of_a_symbolic_shape():
    """The issue's minimal case: it crashed with `TypeError: ... 'int' and 'NoneType'`."""
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [1.5])
    model = _model([_node("Shape", ["x"], ["s"]), _node("ConstantOfShape", ["s"], ["c"], value=fill),
                    _node("Add", ["x", "c"], ["y"])],
                   [_f32("x", ["B", "T", 8])], [_f32("y", ["B", "T", 8])])
    _check(model, {"x": [(1, 3, 8), (2, 5, 8), (4, 1, 8)]})


def test_expand_to_a_shape_built_by_concat():
    """Shape -> Gather -> Unsqueeze -> Concat -> Expand: a bias broadcast to [B, T, 8]."""
    nodes = [_node("Shape", ["x"], ["s"]),
             _node("Gather", ["s", "i01"], ["bt"], axis=0),
             _node("Concat", ["bt", "eight"], ["target"], axis=0),
             _node("Expand", ["bias", "target"], ["e"]),
             _node("Mul", ["x", "e"], ["y"])]
    bias = numpy_helper.from_array(RNG.standard_normal((1, 1, 8)).astype(np.float32), "bias")
    model = _model(nodes, [_f32("x", ["B", "T", 8])], [_f32("y", ["B", "T", 8])],
                   [_ints("i01", [0, 1]), _ints("eight", [8]), bias])
    _check(model, {"x": [(1, 3, 8), (3, 6, 8)]})


def test_range_to_a_symbolic_length_builds_a_causal_mask():
    """Range(0, T) compared with its transpose: the causal mask decoders build from the sequence length."""
    nodes = [_node("Shape", ["x"], ["s"]),
             _node("Gather", ["s", "one"], ["t"], axis=0),  # a scalar: T
             _node("Range", ["zero", "t", "step"], ["r"]),
             _node("Unsqueeze", ["r", "ax0"], ["row"]),
             _node("Unsqueeze", ["r", "ax1"], ["col"]),
             _node("Greater", ["row", "col"], ["future"]),
             _node("Cast", ["future"], ["future_f"], to=TensorProto.FLOAT),
             _node("Mul", ["future_f", "minus"], ["mask"]),
             _node("Add", ["x", "mask"], ["y"])]
    inits = [_ints("one", 1), _ints("zero", 0), _ints("step", 1), _ints("ax0", [0]), _ints("ax1", [1]),
             numpy_helper.from_array(np.array(-1e4, np.float32), "minus")]
    model = _model(nodes, [_f32("x", ["B", "T", "T"])], [_f32("y", ["B", "T", "T"])], inits)
    _check(model, {"x": [(1, 1, 1), (2, 4, 4), (1, 7, 7)]})


def test_range_from_a_symbolic_start():
    """Range(P, P + T): the positions of T new tokens after a cache of P, as a decoder numbers them. A
    symbolic start used to crash the importer (`Cannot convert symbols to int`, fuzzer onnx-struct:2203:2996)."""
    nodes = [_node("Shape", ["past"], ["sp"]),
             _node("Gather", ["sp", "zero"], ["p"], axis=0),  # a scalar: P
             _node("Shape", ["x"], ["sx"]),
             _node("Gather", ["sx", "zero"], ["t"], axis=0),
             _node("Add", ["p", "t"], ["end"]),
             _node("Range", ["p", "end", "one"], ["r"]),
             _node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             _node("Add", ["x", "rf"], ["y"])]
    model = _model(nodes, [_f32("x", ["T"]), _f32("past", ["P"])], [_f32("y", ["T"])],
                   [_ints("zero", 0), _ints("one", 1)])
    _check(model, {"x": [(1,), (4,), (3,)], "past": [(2,), (5,), (1,)]})


# ---------------------------------------------------------------- 2. symbolic slice bounds


def _position_slice_model(table: int) -> onnx.ModelProto:
    """`x + pos[:, :T]` with `pos` a [1, table, 4] buffer: BERT's position ids, as both exporters write it."""
    nodes = [_node("Shape", ["x"], ["s"]),
             _node("Slice", ["s", "one", "two"], ["t"]),  # [T]
             _node("Slice", ["pos", "zero", "t", "one"], ["p"]),
             _node("Add", ["x", "p"], ["y"])]
    pos = numpy_helper.from_array(RNG.standard_normal((1, table, 4)).astype(np.float32), "pos")
    return _model(nodes, [_f32("x", ["B", "T", 4])], [_f32("y", ["B", "T", 4])],
                  [pos, _ints("zero", [0]), _ints("one", [1]), _ints("two", [2])])


def test_slice_to_a_symbolic_end():
    exe = _check(_position_slice_model(16), {"x": [(2, 3, 4), (1, 16, 4), (3, 1, 4)]})
    assert any("T <= 16" in g.condition for g in exe.guards), exe.guards


def test_slice_past_its_table_is_a_clean_run_time_error():
    """At T > 16 the slice would clamp to 16 and the Add fail (onnxruntime fails too): the import's
    assumption T <= 16 is a guard, checked before running."""
    exe = sdc.compile(_position_slice_model(16))
    with pytest.raises(SdcError, match="T <= 16"):
        exe(RNG.standard_normal((1, 17, 4)).astype(np.float32))


def test_slice_between_two_symbolic_bounds():
    """`pos[:, P:P + T]`: the positions of new tokens after a cache of length P."""
    nodes = [_node("Shape", ["past"], ["ps"]),
             _node("Shape", ["x"], ["xs"]),
             _node("Slice", ["ps", "one", "two"], ["p"]),
             _node("Slice", ["xs", "one", "two"], ["t"]),
             _node("Add", ["p", "t"], ["end"]),
             _node("Slice", ["pos", "p", "end", "one"], ["window"]),
             _node("Add", ["x", "window"], ["y"])]
    pos = numpy_helper.from_array(RNG.standard_normal((1, 32, 4)).astype(np.float32), "pos")
    model = _model(nodes, [_f32("x", ["B", "T", 4]), _f32("past", ["B", "P", 4])], [_f32("y", ["B", "T", 4])],
                   [pos, _ints("one", [1]), _ints("two", [2])])
    _check(model, {"x": [(1, 3, 4), (2, 1, 4), (1, 8, 4)], "past": [(1, 5, 4), (2, 0 + 9, 4), (1, 24, 4)]})


def test_slice_from_the_end_with_a_symbolic_start():
    """`x[:, -T:]` of a [B, P + T] concatenation: the last T entries (a negative symbolic start)."""
    nodes = [_node("Concat", ["past", "x"], ["all"], axis=1),
             _node("Shape", ["x"], ["xs"]),
             _node("Slice", ["xs", "one", "two"], ["t"]),
             _node("Neg", ["t"], ["minus_t"]),
             _node("Slice", ["all", "minus_t", "big", "one"], ["tail"]),
             _node("Mul", ["tail", "x"], ["y"])]
    model = _model(nodes, [_f32("x", ["B", "T"]), _f32("past", ["B", "P"])], [_f32("y", ["B", "T"])],
                   [_ints("one", [1]), _ints("two", [2]), _ints("big", [2**62])])
    _check(model, {"x": [(2, 3), (1, 1)], "past": [(2, 4), (1, 6)]})


# ---------------------------------------------------------------- 3. shape values of any rank


def test_kv_cache_lengths_as_run_time_values_of_rank_0_and_2():
    """A decoder step: keys = Concat(past, new) along the sequence; the total length P + T as a rank-0
    value and as a [1, 1] value both reach run-time arithmetic (it failed with `a symbolic shape value
    of rank other than 1 is needed at run time`)."""
    nodes = [_node("Concat", ["past_k", "k"], ["keys"], axis=2),
             _node("Shape", ["keys"], ["ks"]),
             _node("Gather", ["ks", "two"], ["total"], axis=0),  # rank 0: P + T
             _node("Cast", ["total"], ["total_f"], to=TensorProto.FLOAT),
             _node("Div", ["keys", "total_f"], ["scaled"]),
             _node("Unsqueeze", ["total", "ax01"], ["total_11"]),  # rank 2: [[P + T]]
             _node("Cast", ["total_11"], ["total_11f"], to=TensorProto.FLOAT),
             _node("Add", ["scaled", "total_11f"], ["y"])]
    model = _model(nodes, [_f32("past_k", ["B", 2, "P", 4]), _f32("k", ["B", 2, "T", 4])],
                   [_f32("y", ["B", 2, "P + T", 4])], [_ints("two", 2), _ints("ax01", [0, 1])])
    _check(model, {"past_k": [(1, 2, 5, 4), (2, 2, 1, 4), (1, 2, 9, 4)],
                   "k": [(1, 2, 1, 4), (2, 2, 3, 4), (1, 2, 1, 4)]})
