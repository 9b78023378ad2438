"""Reference semantics of reductions, arg reductions and normalizations against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from refcheck import as_float64, assert_matches, call, foundation_ops, random, rng  # noqa: F401 (rng: fixture)
from sdc.dialect.opdef import all_ops


def _int_mean(x, axes, keepdims):
    """Integer mean, truncated toward zero."""
    total = np.sum(x.astype(np.int64), axis=axes, keepdims=keepdims)
    count = int(np.prod([x.shape[a] for a in axes]))
    return np.trunc(total / count).astype(x.dtype)


REDUCTIONS = {
    "reduce_sum": np.sum,
    "reduce_mean": np.mean,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_prod": np.prod,
}

# (input shape, axes, keepdims)
REDUCE_CASES = [
    ((3, 4, 5), [1], False),
    ((3, 4, 5), [0, 2], True),
    ((3, 4, 5), [-1], False),
    ((3, 4, 5), [-3, 1], True),
    ((3, 4, 5), [], False),  # empty axes: every dim
    ((3, 4, 5), [], True),
    ((6,), [0], False),
    ((2, 3), [1, 0], False),
]


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("shape,axes,keepdims", REDUCE_CASES)
def test_reduce_float(name, shape, axes, keepdims, rng):
    low, high = (0.5, 1.5) if name == "reduce_prod" else (-3, 3)
    x = random(rng, shape, "f32", low, high)
    got = call(name, x, axes=axes, keepdims=keepdims)
    want = REDUCTIONS[name](as_float64(x), axis=tuple(axes) if axes else None, keepdims=keepdims)
    assert_matches(got, want, "f32")


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", ["i32", "i64", "f16"])
@pytest.mark.parametrize("shape,axes,keepdims", [REDUCE_CASES[1], REDUCE_CASES[4]])
def test_reduce_other_types(name, dtype, shape, axes, keepdims, rng):
    low, high = (-2, 2) if name == "reduce_prod" else (-9, 9)
    if dtype == "f16":
        low, high = (0.7, 1.3) if name == "reduce_prod" else (-1, 1)
    x = random(rng, shape, dtype, low, high)
    axis = tuple(axes) if axes else None
    got = call(name, x, axes=axes, keepdims=keepdims)
    if dtype == "f16":
        want = REDUCTIONS[name](as_float64(x), axis=axis, keepdims=keepdims)
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-2)
        return
    if name == "reduce_mean":
        want = _int_mean(x, axis or tuple(range(x.ndim)), keepdims)
    else:
        want = REDUCTIONS[name](x, axis=axis, keepdims=keepdims).astype(x.dtype)
    assert_matches(got, want, dtype)


def test_reduce_of_a_scalar_is_the_scalar(rng):
    x = random(rng, (), "f32")
    assert_matches(call("reduce_sum", x), x, "f32")


# ---------------------------------------------------------------- argmax / argmin


def _np_arg(x, axis, largest, keepdims, last):
    """Index of the extreme value along `axis`; ties to the first or the last index."""
    extreme = (np.max if largest else np.min)(x, axis=axis, keepdims=True)
    index = np.arange(x.shape[axis]).reshape([-1 if d == axis % x.ndim else 1 for d in range(x.ndim)])
    hits = np.where(x == extreme, index, -1 if last else x.shape[axis])
    found = hits.max(axis=axis, keepdims=keepdims) if last else hits.min(axis=axis, keepdims=keepdims)
    return found.astype(np.int64)


@pytest.mark.parametrize("name,largest", [("argmax", True), ("argmin", False)])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("last", [False, True])
def test_arg_reductions(name, largest, axis, keepdims, last, rng):
    x = random(rng, (4, 5, 6), "i32", -2, 2)  # few distinct values: many ties
    got = call(name, x, axis=axis, keepdims=keepdims, select_last_index=last)
    assert_matches(got, _np_arg(x, axis, largest, keepdims, last), "i64")


def test_argmax_float(rng):
    x = random(rng, (3, 7), "f32")
    assert_matches(call("argmax", x, axis=1), np.argmax(x, axis=1), "i64")


# ---------------------------------------------------------------- softmax


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
def test_softmax(axis, dtype, rng):
    x = random(rng, (3, 4, 5), dtype, -5, 5)
    assert_matches(call("softmax", x, axis=axis), _np_softmax(as_float64(x), axis), dtype)


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_log_softmax(axis, dtype, rng):
    x = random(rng, (3, 4, 5), dtype, -5, 5)
    want = np.log(_np_softmax(as_float64(x), axis))
    assert_matches(call("log_softmax", x, axis=axis), want, dtype)


def test_softmax_is_stable_for_large_inputs(rng):
    x = random(rng, (2, 6), "f32", 500, 600)
    assert_matches(call("softmax", x), _np_softmax(as_float64(x), -1), "f32")


# ---------------------------------------------------------------- normalizations


@pytest.mark.parametrize("axis", [-1, -2, 1])
@pytest.mark.parametrize("epsilon", [1e-5, 0.1])
def test_layer_norm(axis, epsilon, rng):
    x = random(rng, (2, 3, 4, 5))
    dims = tuple(range(axis % x.ndim, x.ndim))
    scale, bias = random(rng, x.shape[axis % x.ndim:]), random(rng, x.shape[axis % x.ndim:])
    got = call("layer_norm", x, scale, bias, axis=axis, epsilon=epsilon)
    xd = as_float64(x)
    mean = xd.mean(axis=dims, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=dims, keepdims=True)
    want = (xd - mean) / np.sqrt(var + epsilon) * scale + bias
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_rms_norm(axis, dtype, rng):
    x = random(rng, (2, 3, 8), dtype)
    scale = random(rng, (2, 3, 8)[axis % 3:], dtype)
    got = call("rms_norm", x, scale, axis=axis, epsilon=1e-6)
    xd = as_float64(x)
    dims = tuple(range(axis % 3, 3))
    want = xd / np.sqrt((xd ** 2).mean(axis=dims, keepdims=True) + 1e-6) * as_float64(scale)
    tolerance = {"f32": 1e-5, "f16": 5e-3, "bf16": 4e-2}[dtype]
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5)])
def test_batch_norm(shape, rng):
    x = random(rng, shape)
    c = shape[1]
    scale, bias, mean = random(rng, (c,)), random(rng, (c,)), random(rng, (c,))
    var = random(rng, (c,), "f32", 0.2, 2.0)
    got = call("batch_norm", x, scale, bias, mean, var, epsilon=1e-3)
    view = (1, c) + (1,) * (len(shape) - 2)
    want = ((as_float64(x) - mean.reshape(view)) / np.sqrt(var.reshape(view) + 1e-3) * scale.reshape(view)
            + bias.reshape(view))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _np_lrn(x, size, alpha, beta, bias):
    channels = x.shape[1]
    out = np.empty_like(x)
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + size - 1 - (size - 1) // 2)
        square_sum = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        out[:, c] = x[:, c] / (bias + alpha / size * square_sum) ** beta
    return out


@pytest.mark.skipif("lrn" not in all_ops(), reason="no sdc.lrn")
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn(size, rng):
    x = random(rng, (2, 6, 3, 4))
    attrs = {"size": size, "alpha": 0.2, "beta": 0.75, "bias": 1.5}
    got = call("lrn", x, **attrs)
    assert_matches(got, _np_lrn(as_float64(x), **attrs), "f32")


def test_every_reduction_and_normalization_has_a_reference_case():
    covered = set(REDUCTIONS) | {"argmax", "argmin", "softmax", "log_softmax", "layer_norm", "rms_norm",
                                 "batch_norm", "lrn"}
    missing = sorted(n for n in foundation_ops({"reduction", "normalization"}) if n not in covered)
    assert not missing, f"ops without a reference test: {missing}"
