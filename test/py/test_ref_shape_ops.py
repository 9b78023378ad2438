"""Reference semantics of the data-movement ops against numpy indexing and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from refcheck import assert_matches, call, foundation_ops, random, rng  # noqa: F401 (rng: fixture)
from sdc.dialect.opdef import RefEnv

# ---------------------------------------------------------------- gather


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", ["i64", "i32"])
def test_gather(axis, index_dtype, rng):
    data = random(rng, (4, 5, 3))
    size = data.shape[axis]
    indices = random(rng, (2, 3), index_dtype, -size, size - 1)  # negative ones count from the end
    indices.flat[0], indices.flat[1] = -1, -size
    got = call("gather", data, indices, axis=axis)
    assert_matches(got, np.take(data, indices.astype(np.int64), axis=axis), "f32")


def test_gather_scalar_index_and_integer_data(rng):
    data = random(rng, (6, 2), "i32", -50, 50)
    index = np.array(-2, dtype=np.int64)
    assert_matches(call("gather", data, index, axis=0), data[-2], "i32")


@pytest.mark.parametrize("dtype", ["ui32", "ui64", "i1", "f16"])
def test_gather_other_element_types(dtype, rng):
    data = random(rng, (5, 3), dtype, 0, 2**31) if dtype.startswith("ui") else random(rng, (5, 3), dtype)
    indices = np.array([[4, -1, 0]], dtype=np.int64)
    assert_matches(call("gather", data, indices, axis=0), np.take(data, indices, axis=0), dtype)
    assert_matches(call("gather", data, indices[:, 1:], axis=1), np.take(data, indices[:, 1:], axis=1), dtype)


def test_gather_index_out_of_range_fails():
    import torch

    with pytest.raises((IndexError, RuntimeError)):
        call("gather", np.ones((4, 2), np.float32), np.array([4], np.int64), axis=0)
    with pytest.raises((IndexError, RuntimeError)):
        call("gather", np.ones((2, 4), np.float32), torch.tensor([-5]), axis=1)


def test_gather_against_onnxruntime(rng):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    data = random(rng, (5, 4))
    indices = np.array([[0, -1], [3, -5]], dtype=np.int64)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["d", "i"], ["y"], axis=0)], "g",
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, [5, 4]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"d": data, "i": indices})
    assert_matches(call("gather", data, indices, axis=0), want, "f32")


# ---------------------------------------------------------------- reshape, transpose, broadcast


@pytest.mark.parametrize("shape,target", [
    ((2, 3, 4), [6, 4]), ((2, 3, 4), [-1]), ((2, 3, 4), [4, -1, 2]), ((6,), [1, 2, 1, 3]), ((1,), []),
    ((2, 3), [3, 2]),
])
def test_reshape(shape, target, rng):
    x = random(rng, shape)
    assert_matches(call("reshape", x, shape=target), np.reshape(x, target), "f32")


def test_reshape_with_symbols(rng):
    x = random(rng, (2, 3, 8))
    env = RefEnv(symbols={"B": 2, "S": 3})
    got = call("reshape", x, shape=["B", "S", 2, -1], env=env)
    assert_matches(got, x.reshape(2, 3, 2, 4), "f32")
    got = call("reshape", x, shape=["S", "B", 8], env=env)
    assert_matches(got, x.reshape(3, 2, 8), "f32")


def test_reshape_with_an_unbound_symbol_fails(rng):
    with pytest.raises(Exception, match="'T'"):
        call("reshape", random(rng, (2, 3)), shape=["T", -1], env=RefEnv(symbols={"B": 2}))


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 1, 2], [2, 1, 0]])
@pytest.mark.parametrize("dtype", ["f32", "i64", "i1"])
def test_transpose(perm, dtype, rng):
    x = random(rng, (2, 3, 4), dtype)
    assert_matches(call("transpose", x, perm=perm), np.transpose(x, perm), dtype)


@pytest.mark.parametrize("shape,target", [
    ((3, 1), [2, 3, 4]), ((1,), [5]), ((4,), [2, 1]), ((2, 1, 3), [1, 4, 1]), ((), [2, 2]), ((3,), []),
])
def test_broadcast(shape, target, rng):
    x = random(rng, shape)
    want = np.broadcast_to(x, np.broadcast_shapes(shape, tuple(target)))
    assert_matches(call("broadcast", x, shape=target), want, "f32")


def test_broadcast_with_symbols(rng):
    x = random(rng, (1, 4))
    got = call("broadcast", x, shape=["B", 1], env=RefEnv(symbols={"B": 3}))
    assert_matches(got, np.broadcast_to(x, (3, 4)), "f32")


# ---------------------------------------------------------------- concat, split


@pytest.mark.parametrize("axis,lhs,rhs", [
    (0, (2, 3), (4, 3)), (1, (2, 1), (2, 5)), (-1, (2, 3, 1), (2, 3, 2)), (-3, (1, 2, 2), (3, 2, 2)), (0, (0, 2), (2, 2)),
])
@pytest.mark.parametrize("dtype", ["f32", "i64"])
def test_concat(axis, lhs, rhs, dtype, rng):
    x, y = random(rng, lhs, dtype), random(rng, rhs, dtype)
    assert_matches(call("concat", x, y, axis=axis), np.concatenate([x, y], axis=axis), dtype)


@pytest.mark.parametrize("axis,parts", [(1, 3), (0, 1), (-1, 2), (2, 4)])
def test_split(axis, parts, rng):
    x = random(rng, (4, 6, 4))
    got = call("split", x, axis=axis, parts=parts)
    want = np.split(x, parts, axis=axis)
    assert len(got) == len(want) == parts
    for g, w in zip(got, want):
        assert_matches(g, w, "f32")


# ---------------------------------------------------------------- slice

BIG = 2 ** 63 - 1

# (shape, starts, ends, axes, steps)
SLICES = [
    ((6, 5), [1], [4], [], []),
    ((6, 5), [1, 0], [4, 5], [0, 1], [2, 2]),
    ((6, 5), [-2], [BIG], [1], []),
    ((6, 5), [-100], [100], [0], []),  # clamped
    ((6, 5), [5], [-BIG], [0], [-1]),  # walk back to the start
    ((6, 5), [-1, 3], [-7, 0], [0, 1], [-2, -1]),
    ((6, 5), [4], [1], [0], [1]),  # empty
    ((6, 5), [2], [2], [-1], [1]),  # empty
    ((3, 4, 5), [0, 4], [3, 0], [-1, 1], [2, -3]),
    ((3, 4, 5), [10], [20], [2], [1]),  # start past the end: empty
    ((3, 4, 5), [-10], [-20], [2], [-1]),  # both before the start: empty
]


@pytest.mark.parametrize("shape,starts,ends,axes,steps", SLICES)
def test_slice(shape, starts, ends, axes, steps, rng):
    x = random(rng, shape)
    index = [slice(None)] * len(shape)
    for i, (start, end) in enumerate(zip(starts, ends)):
        axis = axes[i] if axes else i
        index[axis] = slice(start, end, steps[i] if steps else 1)
    got = call("slice", x, starts=starts, ends=ends, axes=axes, steps=steps)
    assert_matches(got, x[tuple(index)], "f32")


def test_slice_against_onnxruntime(rng):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    x = random(rng, (6, 5, 4))
    starts, ends, axes, steps = [-1, 1, 0], [-BIG, 100, 3], [0, 1, -1], [-2, 2, 1]
    inits = [numpy_helper.from_array(np.array(v, dtype=np.int64), n)
             for n, v in (("s", starts), ("e", ends), ("a", axes), ("t", steps))]
    graph = helper.make_graph(
        [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])], "s",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    assert_matches(call("slice", x, starts=starts, ends=ends, axes=axes, steps=steps), want, "f32")


# ---------------------------------------------------------------- pad

# (shape, pads: all begins then all ends, mode)
PADS = [
    ((3, 4), [1, 2, 0, 1], "constant"),
    ((3, 4), [1, 2, 2, 3], "reflect"),
    ((3, 4), [0, 3, 2, 0], "edge"),
    ((2, 3, 5), [0, 1, 4, 0, 2, 4], "reflect"),  # pads as wide as the dim - 1
    ((2, 3, 5), [1, 0, 2, 1, 3, 0], "edge"),
    ((4, 5), [-1, 2, 0, -3], "constant"),  # negative pads crop
    ((4, 5), [-2, -1, -2, -4], "constant"),
]


def _np_pad(x, pads, mode, value):
    rank = x.ndim
    widths = [(max(pads[i], 0), max(pads[rank + i], 0)) for i in range(rank)]
    np_mode = {"constant": "constant", "reflect": "reflect", "edge": "edge"}[mode]
    kwargs = {"constant_values": value} if mode == "constant" else {}
    y = np.pad(x, widths, mode=np_mode, **kwargs)
    crop = tuple(slice(max(-pads[i], 0), y.shape[i] - max(-pads[rank + i], 0)) for i in range(rank))
    return y[crop]


@pytest.mark.parametrize("shape,pads,mode", PADS)
@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_pad(shape, pads, mode, dtype, rng):
    x = random(rng, shape, dtype, -9, 9)
    value = 2.0 if dtype == "i32" else -1.5
    got = call("pad", x, pads=pads, mode=mode, value=value)
    assert_matches(got, _np_pad(x, pads, mode, value), dtype)


def test_pad_reflect_wider_than_the_dim(rng):
    # Reflection keeps bouncing between the edges.
    x = random(rng, (3,))
    got = call("pad", x, pads=[5, 6], mode="reflect")
    order = [0, 1, 2, 1]
    want = np.array([x[order[(i - 5) % 4]] for i in range(3 + 11)], dtype=np.float32)
    assert_matches(got, want, "f32")


# ---------------------------------------------------------------- squeeze, unsqueeze


@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 2), [0, 2]), ((1, 3, 1, 2), [-2]), ((1,), [0]), ((2, 1), [])])
def test_squeeze(shape, axes, rng):
    x = random(rng, shape)
    assert_matches(call("squeeze", x, axes=axes), np.squeeze(x, axis=tuple(axes)), "f32")


@pytest.mark.parametrize("shape,axes", [((3, 2), [0]), ((3, 2), [1, 3]), ((3, 2), [-1]), ((), [0, 1]), ((4,), [2, 0])])
def test_unsqueeze(shape, axes, rng):
    x = random(rng, shape)
    assert_matches(call("unsqueeze", x, axes=axes), np.expand_dims(x, axis=tuple(axes)), "f32")


def test_every_shape_op_has_a_reference_case():
    covered = {"gather", "reshape", "transpose", "broadcast", "concat", "split", "slice", "pad", "squeeze",
               "unsqueeze"}
    missing = sorted(n for n in foundation_ops({"shape"}) if n not in covered)
    assert not missing, f"shape ops without a reference test: {missing}"
