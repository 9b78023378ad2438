"""Reference semantics of the elementwise ops (unary, binary, comparison, logical, where, clip,
cast) against numpy on random inputs, with broadcasting and the integer types they accept."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from refcheck import as_float64, assert_matches, call, foundation_ops, random, rng  # noqa: F401 (rng: fixture)
from sdc import dtypes

INTS = ("i8", "i32", "i64")


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.log1p(np.exp(x))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _away_from_zero(rng, shape, dtype):
    magnitude = random(rng, shape, "f64", 0.2, 3.0)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return _cast_input(magnitude * sign, dtype)


def _cast_input(a: np.ndarray, dtype: str):
    if dtype == "bf16":
        return torch.from_numpy(a).to(torch.bfloat16)
    return a.astype(dtypes.to_numpy(dtype))


# name -> (numpy function of (x, attrs), input range or sampler, element types, attribute sets)
UNARY = {
    "neg": (lambda x, a: -x, (-3, 3), ("f32", "f16", "bf16") + INTS, [{}]),
    "abs": (lambda x, a: np.abs(x), (-3, 3), ("f32", "f64") + INTS, [{}]),
    "sign": (lambda x, a: np.sign(x), (-3, 3), ("f32",) + INTS, [{}]),
    "exp": (lambda x, a: np.exp(x), (-3, 3), ("f32", "f16", "f64"), [{}]),
    "log": (lambda x, a: np.log(x), (0.05, 5), ("f32", "f16"), [{}]),
    "sqrt": (lambda x, a: np.sqrt(x), (0.05, 5), ("f32",), [{}]),
    "rsqrt": (lambda x, a: 1.0 / np.sqrt(x), (0.05, 5), ("f32", "f16"), [{}]),
    "reciprocal": (lambda x, a: 1.0 / x, _away_from_zero, ("f32",), [{}]),
    "tanh": (lambda x, a: np.tanh(x), (-3, 3), ("f32", "f16", "bf16"), [{}]),
    "sigmoid": (lambda x, a: _sigmoid(x), (-6, 6), ("f32", "f16"), [{}]),
    "erf": (lambda x, a: _erf(x), (-2.5, 2.5), ("f32",), [{}]),
    "sin": (lambda x, a: np.sin(x), (-4, 4), ("f32",), [{}]),
    "cos": (lambda x, a: np.cos(x), (-4, 4), ("f32",), [{}]),
    "tan": (lambda x, a: np.tan(x), (-1.2, 1.2), ("f32",), [{}]),
    "asin": (lambda x, a: np.arcsin(x), (-0.95, 0.95), ("f32",), [{}]),
    "acos": (lambda x, a: np.arccos(x), (-0.95, 0.95), ("f32",), [{}]),
    "atan": (lambda x, a: np.arctan(x), (-4, 4), ("f32",), [{}]),
    "sinh": (lambda x, a: np.sinh(x), (-3, 3), ("f32",), [{}]),
    "cosh": (lambda x, a: np.cosh(x), (-3, 3), ("f32",), [{}]),
    "asinh": (lambda x, a: np.arcsinh(x), (-4, 4), ("f32",), [{}]),
    "acosh": (lambda x, a: np.arccosh(x), (1.05, 5), ("f32",), [{}]),
    "atanh": (lambda x, a: np.arctanh(x), (-0.95, 0.95), ("f32",), [{}]),
    "floor": (lambda x, a: np.floor(x), (-5, 5), ("f32", "f64"), [{}]),
    "ceil": (lambda x, a: np.ceil(x), (-5, 5), ("f32",), [{}]),
    "round": (lambda x, a: np.round(x), (-5, 5), ("f32",), [{}]),
    "relu": (lambda x, a: np.maximum(x, 0), (-3, 3), ("f32", "bf16") + INTS, [{}]),
    "silu": (lambda x, a: x * _sigmoid(x), (-5, 5), ("f32", "f16"), [{}]),
    "softplus": (lambda x, a: _softplus(x), (-5, 5), ("f32",), [{}]),
    "softsign": (lambda x, a: x / (1 + np.abs(x)), (-5, 5), ("f32",), [{}]),
    "mish": (lambda x, a: x * np.tanh(_softplus(x)), (-5, 5), ("f32",), [{}]),
    "gelu": (
        lambda x, a: _gelu_tanh(x) if a.get("approximate") == "tanh" else 0.5 * x * (1 + _erf(x / math.sqrt(2))),
        (-4, 4), ("f32", "f16", "bf16"), [{}, {"approximate": "tanh"}],
    ),
    "leaky_relu": (
        lambda x, a: np.where(x >= 0, x, a.get("alpha", 0.01) * x), (-3, 3), ("f32",), [{}, {"alpha": 0.2}],
    ),
    "elu": (
        lambda x, a: np.where(x > 0, x, a.get("alpha", 1.0) * (np.exp(x) - 1)), (-3, 3), ("f32",),
        [{}, {"alpha": 0.5}],
    ),
    "selu": (
        lambda x, a: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1)),
        (-3, 3), ("f32",), [{}],
    ),
    "hard_sigmoid": (
        lambda x, a: np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1), (-6, 6), ("f32",),
        [{}, {"alpha": 0.3, "beta": 0.4}, {"alpha": 0.1666666716337204, "beta": 0.5}],  # the last: torch's
    ),
    "hard_swish": (lambda x, a: x * np.clip(x / 6 + 0.5, 0, 1), (-6, 6), ("f32", "f64", "bf16"), [{}]),
    "not": (lambda x, a: np.logical_not(x), (0, 1), ("i1",), [{}]),
    "bitwise_not": (lambda x, a: np.invert(x), (-100, 100), ("i32", "i8", "i1"), [{}]),
    "clip": (
        lambda x, a: np.clip(x, a.get("min", -np.inf), a.get("max", np.inf)),
        (-5, 5), ("f32", "i32", "i64"), [{}, {"min": -1.5, "max": 2.0}, {"min": 0.0}, {"max": 1.0}],
    ),
}


def _unary_cases():
    for name, (_, _, types, attr_sets) in UNARY.items():
        for dtype in types:
            for i, attrs in enumerate(attr_sets):
                yield pytest.param(name, dtype, attrs, id=f"{name}-{dtype}-{i}")


@pytest.mark.parametrize("name,dtype,attrs", list(_unary_cases()))
def test_unary(name, dtype, attrs, rng):
    fn, domain, _, _ = UNARY[name]
    shape = (3, 5)
    x = domain(rng, shape, dtype) if callable(domain) else random(rng, shape, dtype, *domain)
    got = call(name, x, **attrs)
    if dtypes.kind(dtype) == "float":
        want = fn(as_float64(x), attrs)
    else:
        # integer clip bounds are whole numbers here, so the numpy result keeps its type.
        want = fn(x, {k: int(v) for k, v in attrs.items()} if attrs else attrs).astype(x.dtype)
    assert_matches(got, want, dtype)


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 2.51], dtype=np.float32)
    assert_matches(call("round", x), np.array([0, 2, 2, -0, -2, -2, 0, 3], dtype=np.float32), "f32")


@pytest.mark.parametrize("name,test", [("isnan", np.isnan), ("isinf", np.isinf)])
@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
def test_predicates(name, test, dtype, rng):
    x = random(rng, (4, 5), dtype)
    x.flat[[1, 7]] = np.nan
    x.flat[[3]] = np.inf
    x.flat[[11]] = -np.inf
    got = call(name, x)
    assert_matches(got, test(x), "i1")


# ---------------------------------------------------------------- binary


def _trunc_div(x, y):
    if np.issubdtype(x.dtype, np.integer):
        return (np.trunc(x.astype(np.float64) / y)).astype(x.dtype)
    return x / y


# name -> (numpy function of (x, y, attrs), lhs range, rhs range or sampler, element types, attribute sets)
BINARY = {
    "add": (lambda x, y, a: x + y, (-5, 5), (-5, 5), ("f32", "f16", "bf16", "i32", "i64", "ui8"), [{}]),
    "sub": (lambda x, y, a: x - y, (-5, 5), (-5, 5), ("f32", "i32", "ui8"), [{}]),
    "mul": (lambda x, y, a: x * y, (-5, 5), (-5, 5), ("f32", "f64", "i16", "ui8"), [{}]),
    "div": (lambda x, y, a: _trunc_div(x, y), (-20, 20), "nonzero", ("f32", "i32", "i64"), [{}]),
    "pow": (lambda x, y, a: np.power(x, y), (0.3, 3), (-2, 2), ("f32", "f16"), [{}]),
    "max": (lambda x, y, a: np.maximum(x, y), (-5, 5), (-5, 5), ("f32", "i32", "ui8"), [{}]),
    "min": (lambda x, y, a: np.minimum(x, y), (-5, 5), (-5, 5), ("f32", "i64"), [{}]),
    "mod": (
        lambda x, y, a: np.fmod(x, y) if a.get("fmod") else np.mod(x, y),
        (-20, 20), "nonzero", ("f32", "i32"), [{}, {"fmod": True}],
    ),
    "bitwise_and": (lambda x, y, a: x & y, (-100, 100), (-100, 100), ("i32", "i1", "ui8"), [{}]),
    "bitwise_or": (lambda x, y, a: x | y, (-100, 100), (-100, 100), ("i32", "i1"), [{}]),
    "bitwise_xor": (lambda x, y, a: x ^ y, (-100, 100), (-100, 100), ("i64", "i1"), [{}]),
    "shift_left": (lambda x, y, a: np.left_shift(x, y), (-100, 100), (0, 6), ("i32", "i64"), [{}]),
    "shift_right": (lambda x, y, a: np.right_shift(x, y), (-100, 100), (0, 6), ("i32", "i8"), [{}]),
}

# (lhs shape, rhs shape): numpy broadcasting in both directions, and scalars.
SHAPES = [((2, 3), (2, 3)), ((2, 1, 4), (3, 1)), ((4,), (2, 3, 4)), ((), (2, 3)), ((3, 1), ())]


def _sample(rng, shape, dtype, domain):
    if domain == "nonzero":
        if dtypes.kind(dtype) == "float":
            return _away_from_zero(rng, shape, dtype)
        values = random(rng, shape, dtype, 1, 7)
        return np.where(rng.random(shape) < 0.5, -values, values).astype(values.dtype)
    low, high = domain
    if dtypes.kind(dtype) == "uint":
        low, high = 0, 200 if high > 50 else max(high, 5) * 10
    return random(rng, shape, dtype, low, high)


def _binary_cases():
    for name, (_, _, _, types, attr_sets) in BINARY.items():
        for dtype in types:
            for i, attrs in enumerate(attr_sets):
                for lhs_shape, rhs_shape in SHAPES[:3] if dtype == "f32" else SHAPES[1:2]:
                    yield pytest.param(name, dtype, attrs, lhs_shape, rhs_shape,
                                       id=f"{name}-{dtype}-{i}-{lhs_shape}-{rhs_shape}")


@pytest.mark.parametrize("name,dtype,attrs,lhs_shape,rhs_shape", list(_binary_cases()))
def test_binary(name, dtype, attrs, lhs_shape, rhs_shape, rng):
    fn, lhs_domain, rhs_domain, _, _ = BINARY[name]
    x = _sample(rng, lhs_shape, dtype, lhs_domain)
    y = _sample(rng, rhs_shape, dtype, rhs_domain)
    got = call(name, x, y, **attrs)
    if dtypes.kind(dtype) == "float":
        want = fn(as_float64(x), as_float64(y), attrs)
    else:
        with np.errstate(over="ignore"):
            want = fn(x, y, attrs)
    assert_matches(got, want, dtype)


def test_integer_pow():
    x = np.array([[-3, -2, 0, 2, 3]], dtype=np.int32)
    y = np.array([[0], [1], [3]], dtype=np.int32)
    assert_matches(call("pow", x, y), np.power(x, y), "i32")


@pytest.mark.parametrize("exponent_shape", [(), (1,), (1, 1, 1), (1, 1, 1, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_pow_with_a_one_element_exponent(exponent_shape, dtype, rng):
    # GELU's x ** 3: a one-element exponent runs as a Python number (a rank above x's keeps the tensor path).
    from sdc.runtime.executor import _direct_kernel
    from sdc.dialect.shapes import TensorSpec

    x = random(rng, (2, 3, 4), dtype, 0.3, 3)
    for value in (3.0, 0.5, -1.5, 2.0):
        y = np.full(exponent_shape, value, dtype=x.dtype)
        got = call("pow", x, y)
        assert got.shape == np.broadcast_shapes(x.shape, y.shape)
        assert_matches(got, np.power(as_float64(x), as_float64(y)), dtype)
    spec = TensorSpec((3,), "f32")
    assert _direct_kernel("pow", {}, (spec, spec)) is None  # the executor runs the reference function


@pytest.mark.parametrize("name,fn", [("max", np.fmax), ("min", np.fmin)])
def test_max_min_propagate_nan(name, fn, rng):
    x = random(rng, (6,))
    y = random(rng, (6,))
    x[1] = np.nan
    y[4] = np.nan
    got = call(name, x, y)
    want = fn(x, y)
    want[[1, 4]] = np.nan
    assert_matches(got, want, "f32")


@pytest.mark.parametrize("shapes", SHAPES)
def test_scalar_and_broadcast_shapes(shapes, rng):
    x, y = random(rng, shapes[0]), random(rng, shapes[1])
    assert call("add", x, y).shape == np.broadcast_shapes(*shapes)


# ---------------------------------------------------------------- comparison, logical, where

COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}


@pytest.mark.parametrize("name", list(COMPARE))
@pytest.mark.parametrize("dtype", ["f32", "i32", "f16"])
def test_compare(name, dtype, rng):
    x = random(rng, (3, 1, 4), dtype, -3, 3)
    y = random(rng, (2, 4), dtype, -3, 3)
    # Make some elements tie, so eq/le/ge see equal values.
    y[0, :2] = x[0, 0, :2]
    y[1, 2] = x[2, 0, 2]
    got = call(name, x, y)
    assert_matches(got, COMPARE[name](x, y), "i1")


LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


@pytest.mark.parametrize("name", list(LOGICAL))
def test_logical(name, rng):
    x = random(rng, (2, 1, 5), "i1")
    y = random(rng, (3, 5), "i1")
    assert_matches(call(name, x, y), LOGICAL[name](x, y), "i1")


@pytest.mark.parametrize("dtype", ["f32", "i64", "f16"])
def test_where(dtype, rng):
    cond = random(rng, (2, 1, 4), "i1")
    on_true = random(rng, (3, 4), dtype)
    on_false = random(rng, (1,), dtype)
    got = call("where", cond, on_true, on_false)
    assert_matches(got, np.where(cond, on_true, on_false), dtype)


# ---------------------------------------------------------------- cast

CASTS = [
    ("f32", "i32"), ("f32", "i64"), ("f32", "i8"), ("f64", "i32"), ("f16", "i32"),
    ("f32", "i1"), ("i32", "i1"), ("i1", "f32"), ("i1", "i32"),
    ("i32", "f32"), ("i64", "f64"), ("f32", "f16"), ("f16", "f32"), ("f32", "f64"), ("i8", "i64"),
]


@pytest.mark.parametrize("src,dst", CASTS)
def test_cast(src, dst, rng):
    x = random(rng, (4, 6), src, -9, 9)
    if dtypes.kind(src) != "bool":
        x.flat[:3] = 0  # casts to i1 test for non-zero: give them zeros to see
    got = call("cast", x, dtype=dst)
    if dst == "i1":
        want = x != 0
    elif dtypes.kind(src) == "float" and dtypes.kind(dst) in ("int", "uint"):
        want = np.trunc(x.astype(np.float64)).astype(dtypes.to_numpy(dst))
    else:
        want = x.astype(dtypes.to_numpy(dst))
    assert_matches(got, want, dst)


def test_cast_truncates_toward_zero():
    x = np.array([-2.7, -1.5, -0.4, 0.4, 1.5, 2.7], dtype=np.float32)
    assert_matches(call("cast", x, dtype="i32"), np.array([-2, -1, 0, 0, 1, 2], dtype=np.int32), "i32")


def test_cast_bf16(rng):
    x = random(rng, (3, 4), "f32")
    got = call("cast", x, dtype="bf16")
    back = torch.from_numpy(x).to(torch.bfloat16).float().numpy()  # the nearest bf16 values
    assert_matches(got, back, "bf16")
    np.testing.assert_allclose(got, x, rtol=8e-3)


# ---------------------------------------------------------------- coverage


def test_every_elementwise_op_has_a_reference_case():
    families = {"elementwise unary", "elementwise binary", "comparison", "logical", "elementwise ternary"}
    covered = set(UNARY) | set(BINARY) | set(COMPARE) | set(LOGICAL) | {"isnan", "isinf", "where"}
    missing = sorted(n for n in foundation_ops(families) if n not in covered)
    assert not missing, f"elementwise ops without a reference test: {missing}"
