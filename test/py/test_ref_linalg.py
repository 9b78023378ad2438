"""Reference semantics of matmul, convolution and pooling against numpy loops and onnxruntime."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from sdc.dialect.opdef import RefEnv, get_op

from refcheck import as_float64, assert_matches, call, foundation_ops, random, rng  # noqa: F401 (rng: fixture)

# ---------------------------------------------------------------- matmul

# (lhs shape, rhs shape, transpose_lhs, transpose_rhs)
MATMULS = [
    ((3, 4), (4, 5), False, False),
    ((4,), (4,), False, False),
    ((4,), (2, 4, 3), False, False),
    ((2, 3, 4), (4,), False, False),
    ((2, 1, 3, 4), (5, 4, 2), False, False),
    ((4, 3), (4, 5), True, False),
    ((3, 4), (5, 4), False, True),
    ((2, 4, 3), (1, 5, 4), True, True),
    ((4,), (5, 4), True, True),  # transposes leave 1-D operands alone
]


def _np_matmul(x, y, transpose_lhs, transpose_rhs):
    if x.ndim >= 2 and transpose_lhs:
        x = np.swapaxes(x, -1, -2)
    if y.ndim >= 2 and transpose_rhs:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


@pytest.mark.parametrize("lhs,rhs,tl,tr", MATMULS)
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_matmul(lhs, rhs, tl, tr, dtype, rng):
    x, y = random(rng, lhs, dtype), random(rng, rhs, dtype)
    got = call("matmul", x, y, transpose_lhs=tl, transpose_rhs=tr)
    assert_matches(got, _np_matmul(as_float64(x), as_float64(y), tl, tr), dtype)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_matmul_low_precision(dtype, rng):
    x, y = random(rng, (2, 3, 8), dtype, -1, 1), random(rng, (8, 4), dtype, -1, 1)
    got = call("matmul", x, y)
    want = np.matmul(as_float64(x), as_float64(y))
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", ["i32", "i64"])
def test_matmul_integer(dtype, rng):
    x, y = random(rng, (2, 3, 4), dtype, -5, 5), random(rng, (4, 2), dtype, -5, 5)
    assert_matches(call("matmul", x, y), np.matmul(x, y), dtype)


# ---------------------------------------------------------------- convolution


def _np_conv(x, w, strides, pads, dilations, groups):
    """Cross-correlation by explicit kernel-offset loops; pads are all begins then all ends."""
    n = x.ndim - 2
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    pads = pads or [0] * (2 * n)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[n + i]) for i in range(n)])
    kernel = w.shape[2:]
    out_sizes = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
    out = np.zeros((x.shape[0], w.shape[0], *out_sizes))
    c_per_group, o_per_group = w.shape[1], w.shape[0] // groups
    for offsets in itertools.product(*(range(k) for k in kernel)):
        window = tuple(
            slice(offsets[i] * dilations[i], offsets[i] * dilations[i] + strides[i] * (out_sizes[i] - 1) + 1, strides[i])
            for i in range(n))
        patch = xp[(slice(None), slice(None)) + window]  # [N, C, out...]
        for g in range(groups):
            xs = patch[:, g * c_per_group:(g + 1) * c_per_group]
            ws = w[(slice(g * o_per_group, (g + 1) * o_per_group), slice(None)) + offsets]  # [O/g, C/g]
            out[:, g * o_per_group:(g + 1) * o_per_group] += np.einsum("nc...,oc->no...", xs, ws)
    return out


# (input shape, weight shape, attributes)
CONVS = [
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((1, 4, 9, 8), (6, 2, 3, 2), {"groups": 2, "strides": [2, 1], "pads": [1, 0, 2, 1]}),
    ((2, 4, 10, 9), (4, 1, 3, 3), {"groups": 4, "dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    ((1, 2, 8, 7), (3, 2, 2, 3), {"strides": [3, 2], "dilations": [2, 1], "pads": [0, 1, 1, 0]}),
    ((2, 3, 11), (5, 3, 4), {"strides": [2], "pads": [3, 1], "dilations": [2]}),
    ((1, 2, 5, 4, 6), (2, 1, 2, 3, 2), {"groups": 2, "pads": [1, 0, 1, 0, 1, 0]}),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONVS)
def test_conv(x_shape, w_shape, attrs, rng):
    x, w = random(rng, x_shape), random(rng, w_shape)
    got = call("conv", x, w, **attrs)
    want = _np_conv(as_float64(x), as_float64(w), attrs.get("strides"), attrs.get("pads"),
                    attrs.get("dilations"), attrs.get("groups", 1))
    assert_matches(got, want, "f32")


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONVS[:4])
def test_conv_against_onnxruntime(x_shape, w_shape, attrs, rng):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    x, w = random(rng, x_shape), random(rng, w_shape)
    n = len(x_shape) - 2
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=attrs.get("groups", 1),
                            strides=attrs.get("strides") or [1] * n, pads=attrs.get("pads") or [0] * (2 * n),
                            dilations=attrs.get("dilations") or [1] * n)
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x, "w": w})
    assert_matches(call("conv", x, w, **attrs), want, "f32")


def test_conv_f16(rng):
    x, w = random(rng, (1, 2, 5, 5), "f16", -1, 1), random(rng, (3, 2, 3, 3), "f16", -1, 1)
    got = call("conv", x, w, pads=[1, 1, 1, 1])
    np.testing.assert_allclose(got, _np_conv(as_float64(x), as_float64(w), None, [1, 1, 1, 1], None, 1),
                               rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------- pooling


def _pool_out(size, k, stride, begin, end, dilation, ceil_mode):
    span = dilation * (k - 1) + 1
    if not ceil_mode:
        return (size + begin + end - span) // stride + 1
    out = math.ceil((size + begin + end - span) / stride) + 1
    # A window must start inside the input or its begin padding.
    while (out - 1) * stride >= size + begin:
        out -= 1
    return out


def _np_pool(x, kind, kernel, strides=None, pads=None, dilations=None, ceil_mode=False, count_include_pad=False):
    """Max or average pooling, one output element at a time."""
    n = x.ndim - 2
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    pads = pads or [0] * (2 * n)
    sizes = x.shape[2:]
    outs = [_pool_out(sizes[i], kernel[i], strides[i], pads[i], pads[n + i], dilations[i], ceil_mode)
            for i in range(n)]
    result = np.empty(x.shape[:2] + tuple(outs))
    for pos in itertools.product(*(range(o) for o in outs)):
        taps = []  # per dim: the window's input positions inside the input, and its count with pads
        padded_counts = []
        for i in range(n):
            start = pos[i] * strides[i] - pads[i]
            positions = [start + j * dilations[i] for j in range(kernel[i])]
            taps.append([p for p in positions if 0 <= p < sizes[i]])
            padded_counts.append(len([p for p in positions if -pads[i] <= p < sizes[i] + pads[n + i]]))
        values = x[(slice(None), slice(None)) + np.ix_(*taps)].reshape(x.shape[0], x.shape[1], -1)
        if kind == "max":
            result[(slice(None), slice(None)) + pos] = values.max(axis=-1)
        else:
            divisor = math.prod(padded_counts) if count_include_pad else values.shape[-1]
            result[(slice(None), slice(None)) + pos] = values.sum(axis=-1) / divisor
    return result


# (input shape, attributes)
POOLS = [
    ((2, 3, 6, 7), {"kernel": [2, 2], "strides": [2, 2]}),
    ((1, 2, 7, 7), {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 7, 8), {"kernel": [3, 2], "strides": [2, 3], "ceil_mode": True}),
    ((1, 2, 6, 6), {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 0], "ceil_mode": True}),
    ((1, 2, 5, 9), {"kernel": [2, 3], "strides": [2, 2], "pads": [0, 1, 1, 1], "ceil_mode": True}),
    ((2, 2, 10), {"kernel": [3], "strides": [3], "pads": [1, 1], "ceil_mode": True}),
    ((1, 1, 4, 5, 6), {"kernel": [2, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}),
    # symmetric pads of at most half the kernel: torch's pooling pads them itself (linalg._native_padding)
    ((1, 2, 6, 5, 7), {"kernel": [3, 2, 3], "strides": [1, 2, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ((2, 3, 9), {"kernel": [4], "strides": [2], "pads": [2, 2]}),
    ((1, 2, 8, 8), {"kernel": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "ceil_mode": True}),
]


@pytest.mark.parametrize("x_shape,attrs", POOLS)
def test_max_pool(x_shape, attrs, rng):
    x = random(rng, x_shape)
    got = call("max_pool", x, **attrs)
    assert_matches(got, _np_pool(as_float64(x), "max", **attrs), "f32")


@pytest.mark.parametrize("dilations", [[2, 2], [1, 3]])
@pytest.mark.parametrize("pads", [[1, 1, 0, 1], [1, 1, 1, 1]])
def test_max_pool_dilated(dilations, pads, rng):
    x = random(rng, (1, 2, 9, 10))
    attrs = {"kernel": [2, 3], "strides": [2, 1], "pads": pads, "dilations": dilations}
    got = call("max_pool", x, **attrs)
    assert_matches(got, _np_pool(as_float64(x), "max", **attrs), "f32")


def test_max_pool_padding_never_wins(rng):
    x = -random(rng, (1, 1, 4, 4), "f32", 1, 2)  # all negative: a zero pad would win
    got = call("max_pool", x, kernel=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])
    assert (got < 0).all()


@pytest.mark.parametrize("x_shape,attrs", POOLS)
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_avg_pool(x_shape, attrs, count_include_pad, rng):
    x = random(rng, x_shape)
    got = call("avg_pool", x, count_include_pad=count_include_pad, **attrs)
    want = _np_pool(as_float64(x), "avg", count_include_pad=count_include_pad, **attrs)
    assert_matches(got, want, "f32")


@pytest.mark.parametrize("name", ["max_pool", "avg_pool"])
def test_pool_of_a_channels_last_operand(name, rng):
    """The same values as on the NCHW copy, and the result stays channels-last (no copy for the next op)."""
    x = torch.as_tensor(random(rng, (2, 5, 7, 6)))
    attrs = get_op(name).with_defaults({"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    got = get_op(name).ref(RefEnv(), attrs, x.contiguous(memory_format=torch.channels_last))
    want = _np_pool(x.double().numpy(), "max" if name == "max_pool" else "avg", kernel=[3, 3], strides=[2, 2],
                    pads=[1, 1, 1, 1])
    assert_matches(got.numpy(), want, "f32")
    assert got.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("name,fn", [("global_avg_pool", np.mean), ("global_max_pool", np.max)])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 2, 4)])
def test_global_pool(name, fn, shape, rng):
    x = random(rng, shape)
    axes = tuple(range(2, len(shape)))
    assert_matches(call(name, x), fn(as_float64(x), axis=axes, keepdims=True), "f32")


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((2, 3, 9, 9), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 4, 8, 7), (6, 2, 3, 2), {"groups": 2, "dilations": [2, 1], "pads": [0, 1, 2, 0]}),
    ((3, 2, 10), (5, 2, 3), {}),
])
def test_conv_weight_grad(x_shape, w_shape, attrs, rng):
    """d(sum(conv(x, w) * g))/dw by torch.autograd in float64 against sdc.conv_weight_grad(x, g)."""
    import torch
    import torch.nn.functional as F

    x = random(rng, x_shape)
    w = torch.tensor(random(rng, w_shape), dtype=torch.float64, requires_grad=True)
    n = len(x_shape) - 2
    pads = attrs.get("pads", [0] * 2 * n)
    xt = F.pad(torch.tensor(as_float64(x)), [p for d in reversed(range(n)) for p in (pads[d], pads[n + d])])
    conv = {1: F.conv1d, 2: F.conv2d}[n]
    y = conv(xt, w, stride=attrs.get("strides", [1] * n), dilation=attrs.get("dilations", [1] * n),
             groups=attrs.get("groups", 1))
    g = random(rng, tuple(y.shape))
    (y * torch.tensor(as_float64(g))).sum().backward()
    got = call("conv_weight_grad", x, g, kernel=list(w_shape[2:]), **attrs)
    assert_matches(got, w.grad.numpy(), "f32")


def test_every_window_op_has_a_reference_case():
    covered = {"matmul", "conv", "conv_weight_grad", "max_pool", "avg_pool", "global_avg_pool", "global_max_pool"}
    families = {"contraction", "convolution", "pooling"}
    missing = sorted(n for n in foundation_ops(families) if n not in covered)
    assert not missing, f"ops without a reference test: {missing}"
