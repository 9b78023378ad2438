"""Elementwise ops: one table per arity, numpy broadcasting throughout."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sdc import dtypes
from sdc.dialect import derivatives
from sdc.dialect import scalar as S
from sdc.dialect.hooks import TRANSCENDENTAL, KernelForm, OpKind, Precision, ShardingRule, per_result_element
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.shapes import ShapeContext, TensorSpec
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
    import torch.nn.functional as F
else:
    torch = lazy_import("torch")
    F = lazy_import("torch.nn.functional")

# ---------------------------------------------------------------- dtype guards

ANY, FLOAT, INT, BOOL, NUMERIC, INTBOOL = "any", "float", "integer", "bool", "numeric", "integer or bool"


def _accepts(category: str, dtype: str) -> bool:
    kind = dtypes.kind(dtype)
    return {
        ANY: True,
        FLOAT: kind == "float",
        INT: kind in ("int", "uint"),
        BOOL: kind == "bool",
        NUMERIC: kind != "bool",
        INTBOOL: kind in ("int", "uint", "bool"),
    }[category]


def check_dtype(ctx: ShapeContext, category: str, spec: TensorSpec, what: str) -> None:
    if not _accepts(category, spec.dtype):
        ctx.fail(f"{what} must have {category} element type, found {spec.dtype}")


# ---------------------------------------------------------------- unary

def _unary_rule(category: str):
    def rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
        check_dtype(ctx, category, ins[0], "operand")
        return [ins[0]]

    return rule


def _predicate_rule(ctx, ins, attrs):
    check_dtype(ctx, FLOAT, ins[0], "operand")
    return [ins[0].with_dtype("i1")]


def _gelu(a, x):
    return F.gelu(x, approximate=a["approximate"])


# ---------------------------------------------------------------- scalar formulas (sdc/dialect/scalar.py)

def _primitive(name: str) -> S.Formula:
    """The formula of an op that is one primitive of the same operands."""
    return lambda a, *xs: S.primitive(name, *xs)


def _softplus(x: S.Expr) -> S.Expr:
    return S.where(x > 20, x, S.log1p(S.exp(x)))  # torch's threshold 20: past it, x itself


def _gelu_scalar(a: dict, x: S.Expr) -> S.Expr:
    if a["approximate"] == "tanh":
        return 0.5 * x * (1 + S.tanh(S.SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + S.erf(x * S.SQRT1_2))


def _clip_scalar(a: dict, x: S.Expr) -> S.Expr:
    """Bounds by comparisons (NaN stays NaN); an infinite bound is none. On integers the bounds are
    int() of the float attributes, as the reference takes them, and one outside x's type is none."""
    lo, hi = a["min"], a["max"]
    lo, hi = None if math.isinf(lo) else lo, None if math.isinf(hi) else hi
    if x.dtype is not None and dtypes.is_integer(x.dtype):
        bits = 8 * dtypes.itemsize(x.dtype)
        least, most = (-(1 << bits - 1), (1 << bits - 1) - 1) if dtypes.kind(x.dtype) == "int" else (0, (1 << bits) - 1)
        lo = None if lo is None or int(lo) <= least else int(lo)
        hi = None if hi is None or int(hi) >= most else int(hi)
    return S.clamp(x, lo, hi)


def _round_half_even(a, x):
    return torch.round(x)


def _rsqrt(a, x):
    return torch.rsqrt(x)


# name: (torch function of (attrs, x), dtype category, attributes, semantics, scalar formula)
UNARY = {
    "neg": (lambda a, x: torch.neg(x), NUMERIC, {}, "-x", _primitive("neg")),
    "abs": (lambda a, x: torch.abs(x), NUMERIC, {}, "|x|", _primitive("abs")),
    "sign": (lambda a, x: torch.sign(x), NUMERIC, {}, "-1, 0 or 1 by the sign of x",
             lambda a, x: S.where(x > 0, 1, S.where(x < 0, -1, 0))),
    "exp": (lambda a, x: torch.exp(x), FLOAT, {}, "e^x", _primitive("exp")),
    "log": (lambda a, x: torch.log(x), FLOAT, {}, "natural logarithm", _primitive("log")),
    "sqrt": (lambda a, x: torch.sqrt(x), FLOAT, {}, "square root", _primitive("sqrt")),
    "rsqrt": (_rsqrt, FLOAT, {}, "1 / sqrt(x)", _primitive("rsqrt")),
    "reciprocal": (lambda a, x: torch.reciprocal(x), FLOAT, {}, "1 / x", lambda a, x: 1 / x),
    "tanh": (lambda a, x: torch.tanh(x), FLOAT, {}, "hyperbolic tangent", _primitive("tanh")),
    "sigmoid": (lambda a, x: torch.sigmoid(x), FLOAT, {}, "1 / (1 + e^-x)", lambda a, x: 1 / (1 + S.exp(-x))),
    "erf": (lambda a, x: torch.erf(x), FLOAT, {}, "the Gauss error function", _primitive("erf")),
    "sin": (lambda a, x: torch.sin(x), FLOAT, {}, "sine", _primitive("sin")),
    "cos": (lambda a, x: torch.cos(x), FLOAT, {}, "cosine", _primitive("cos")),
    "tan": (lambda a, x: torch.tan(x), FLOAT, {}, "tangent", _primitive("tan")),
    "asin": (lambda a, x: torch.asin(x), FLOAT, {}, "arc sine", _primitive("asin")),
    "acos": (lambda a, x: torch.acos(x), FLOAT, {}, "arc cosine", _primitive("acos")),
    "atan": (lambda a, x: torch.atan(x), FLOAT, {}, "arc tangent", _primitive("atan")),
    "sinh": (lambda a, x: torch.sinh(x), FLOAT, {}, "hyperbolic sine", _primitive("sinh")),
    "cosh": (lambda a, x: torch.cosh(x), FLOAT, {}, "hyperbolic cosine", _primitive("cosh")),
    "asinh": (lambda a, x: torch.asinh(x), FLOAT, {}, "inverse hyperbolic sine", _primitive("asinh")),
    "acosh": (lambda a, x: torch.acosh(x), FLOAT, {}, "inverse hyperbolic cosine", _primitive("acosh")),
    "atanh": (lambda a, x: torch.atanh(x), FLOAT, {}, "inverse hyperbolic tangent", _primitive("atanh")),
    "floor": (lambda a, x: torch.floor(x), FLOAT, {}, "round toward -inf", _primitive("floor")),
    "ceil": (lambda a, x: torch.ceil(x), FLOAT, {}, "round toward +inf", _primitive("ceil")),
    "round": (_round_half_even, FLOAT, {}, "round half to even", _primitive("round")),
    "relu": (lambda a, x: torch.relu(x), NUMERIC, {}, "max(x, 0)", lambda a, x: S.where(x < 0, 0, x)),
    "silu": (lambda a, x: F.silu(x), FLOAT, {}, "x * sigmoid(x)", lambda a, x: x / (1 + S.exp(-x))),
    "softplus": (lambda a, x: F.softplus(x), FLOAT, {}, "log(1 + e^x)", lambda a, x: _softplus(x)),
    "softsign": (lambda a, x: F.softsign(x), FLOAT, {}, "x / (1 + |x|)", lambda a, x: x / (1 + S.abs_(x))),
    "mish": (lambda a, x: F.mish(x), FLOAT, {}, "x * tanh(softplus(x))", lambda a, x: x * S.tanh(_softplus(x))),
    "gelu": (
        _gelu,
        FLOAT,
        {"approximate": attr("enum", "none", "`none` (exact, with erf) or `tanh`", ("none", "tanh"))},
        "x * Phi(x), exact or with the tanh approximation",
        _gelu_scalar,
    ),
    "leaky_relu": (
        lambda a, x: F.leaky_relu(x, a["alpha"]),
        FLOAT,
        {"alpha": attr("float", 0.01, "slope for x < 0")},
        "x if x >= 0 else alpha * x",
        lambda a, x: S.where(x > 0, x, x * a["alpha"]),
    ),
    "elu": (
        lambda a, x: F.elu(x, a["alpha"]),
        FLOAT,
        {"alpha": attr("float", 1.0, "scale of the negative part")},
        "x if x > 0 else alpha * (e^x - 1)",
        lambda a, x: S.where(x > 0, x, a["alpha"] * S.expm1(x)),
    ),
    "selu": (
        lambda a, x: a["gamma"] * torch.where(x > 0, x, a["alpha"] * torch.expm1(x)),
        FLOAT,
        {
            "alpha": attr("float", 1.67326319217681884765625, "scale of the negative part"),
            "gamma": attr("float", 1.05070102214813232421875, "scale of the whole result"),
        },
        "gamma * (x if x > 0 else alpha * (e^x - 1))",
        lambda a, x: a["gamma"] * S.where(x > 0, x, a["alpha"] * S.expm1(x)),
    ),
    "hard_sigmoid": (
        lambda a, x: _hard_sigmoid(a, x),
        FLOAT,
        {"alpha": attr("float", 0.2, "slope"), "beta": attr("float", 0.5, "offset")},
        "clamp(alpha * x + beta, 0, 1)",
        lambda a, x: S.clamp(a["alpha"] * x + a["beta"], 0, 1),
    ),
    # One torch kernel instead of four (div, add, clamp, mul): MobileNet-v3 runs one after most convolutions.
    "hard_swish": (lambda a, x: F.hardswish(x), FLOAT, {}, "x * clamp(x / 6 + 1/2, 0, 1)",
                   lambda a, x: x * S.clamp(x + 3, 0, 6) / 6),
    "not": (lambda a, x: torch.logical_not(x), BOOL, {}, "logical not", _primitive("not")),
    "bitwise_not": (lambda a, x: torch.bitwise_not(x), INTBOOL, {}, "bitwise not", _primitive("bitwise_not")),
    "clip": (
        lambda a, x: _clip(a, x),
        NUMERIC,
        {
            "min": attr("float", -math.inf, "lower bound (inclusive)"),
            "max": attr("float", math.inf, "upper bound (inclusive)"),
        },
        "min(max(x, min), max)",
        _clip_scalar,
    ),
}


def _hard_sigmoid(a: dict, x: torch.Tensor) -> torch.Tensor:
    """clamp(alpha * x + beta, 0, 1); with torch's own constants (1/6, 1/2: what exporters of
    `nn.Hardsigmoid` write) one torch kernel instead of three."""
    if math.isclose(a["alpha"], 1 / 6, rel_tol=1e-6) and a["beta"] == 0.5:
        return F.hardsigmoid(x)
    return torch.clamp(a["alpha"] * x + a["beta"], 0, 1)


def _clip(a, x):
    lo, hi = a["min"], a["max"]
    if not x.is_floating_point():
        lo = None if math.isinf(lo) else int(lo)
        hi = None if math.isinf(hi) else int(hi)
        if lo is None and hi is None:
            return x.clone()
    return torch.clamp(x, lo, hi)


PREDICATES = {
    "isnan": (lambda a, x: torch.isnan(x), "x is NaN", _primitive("isnan")),
    "isinf": (lambda a, x: torch.isinf(x), "x is +inf or -inf", _primitive("isinf")),
}


# ---------------------------------------------------------------- binary

def _binary_rule(category: str, result: str | None):
    def rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
        lhs, rhs = ins
        if lhs.dtype != rhs.dtype:
            ctx.fail(f"operand element types differ: lhs is {lhs.dtype}, rhs is {rhs.dtype}")
        check_dtype(ctx, category, lhs, "operands")
        shape = ctx.broadcast(lhs.shape, rhs.shape, names=("lhs", "rhs"))
        return [TensorSpec(shape, result or lhs.dtype)]

    return rule


def _div(a, x, y):
    if x.is_floating_point():
        return torch.div(x, y)
    return torch.div(x, y, rounding_mode="trunc")


def _pow(a, x, y):
    # A one-element float exponent (GELU's `x ** 3`, an exported constant) as a Python number: torch then
    # takes its scalar-exponent kernels (a cube is two multiplies), 3 us where the tensor-exponent
    # kernel (std::pow per element) takes 22 us on a [3, 24, 128] f32 operand. Same dtype and a rank no
    # higher than x's, so the result's type and shape are what they were.
    if (y.numel() == 1 and y.dim() <= x.dim() and y.dtype == x.dtype and x.is_floating_point()
            and x.device.type == "cpu" and y.device.type == "cpu"):
        return torch.pow(x, y.item())
    return torch.pow(x, y)


def _mod(a, x, y):
    if a["fmod"]:
        return torch.fmod(x, y)
    return torch.remainder(x, y)


BINARY = {
    "add": (lambda a, x, y: torch.add(x, y), NUMERIC, {}, "x + y", _primitive("add")),
    "sub": (lambda a, x, y: torch.sub(x, y), NUMERIC, {}, "x - y", _primitive("sub")),
    "mul": (lambda a, x, y: torch.mul(x, y), NUMERIC, {}, "x * y", _primitive("mul")),
    "div": (_div, NUMERIC, {}, "x / y (integers: truncating)", _primitive("div")),
    "pow": (_pow, NUMERIC, {}, "x ^ y", _primitive("pow")),
    "max": (lambda a, x, y: torch.maximum(x, y), NUMERIC, {}, "the larger of x and y (NaN propagates)",
            _primitive("max")),
    "min": (lambda a, x, y: torch.minimum(x, y), NUMERIC, {}, "the smaller of x and y (NaN propagates)",
            _primitive("min")),
    "mod": (
        _mod,
        NUMERIC,
        {"fmod": attr("bool", False, "true: sign of the dividend (C fmod); false: sign of the divisor (Python %)")},
        "remainder of x / y",
        lambda a, x, y: S.fmod(x, y) if a["fmod"] else S.remainder(x, y),
    ),
    "bitwise_and": (lambda a, x, y: torch.bitwise_and(x, y), INTBOOL, {}, "bitwise and", _primitive("bitwise_and")),
    "bitwise_or": (lambda a, x, y: torch.bitwise_or(x, y), INTBOOL, {}, "bitwise or", _primitive("bitwise_or")),
    "bitwise_xor": (lambda a, x, y: torch.bitwise_xor(x, y), INTBOOL, {}, "bitwise xor", _primitive("bitwise_xor")),
    "shift_left": (lambda a, x, y: torch.bitwise_left_shift(x, y), INT, {}, "x << y", _primitive("shift_left")),
    "shift_right": (lambda a, x, y: torch.bitwise_right_shift(x, y), INT, {}, "x >> y", _primitive("shift_right")),
}

COMPARE = {
    "eq": (lambda a, x, y: torch.eq(x, y), "x == y", _primitive("eq")),
    "ne": (lambda a, x, y: torch.ne(x, y), "x != y", _primitive("ne")),
    "lt": (lambda a, x, y: torch.lt(x, y), "x < y", _primitive("lt")),
    "le": (lambda a, x, y: torch.le(x, y), "x <= y", _primitive("le")),
    "gt": (lambda a, x, y: torch.gt(x, y), "x > y", _primitive("gt")),
    "ge": (lambda a, x, y: torch.ge(x, y), "x >= y", _primitive("ge")),
}

LOGICAL = {
    "and": (lambda a, x, y: torch.logical_and(x, y), "x and y", _primitive("and")),
    "or": (lambda a, x, y: torch.logical_or(x, y), "x or y", _primitive("or")),
    "xor": (lambda a, x, y: torch.logical_xor(x, y), "x xor y", _primitive("xor")),
}


# ---------------------------------------------------------------- ternary

def _where_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    cond, x, y = ins
    if cond.dtype != "i1":
        ctx.fail(f"condition must have element type i1, found {cond.dtype}")
    if x.dtype != y.dtype:
        ctx.fail(f"branch element types differ: on_true is {x.dtype}, on_false is {y.dtype}")
    return [TensorSpec(ctx.broadcast(cond.shape, x.shape, y.shape, names=("condition", "on_true", "on_false")), x.dtype)]


# ---------------------------------------------------------------- hooks

# Per-op hooks that differ from the kind's defaults (sdc/dialect/hooks.py); the tables above keep
# one tuple per op, and the registration loops below merge these in.
_COSTLY = {"cost": per_result_element(TRANSCENDENTAL)}  # a transcendental or a division per element
_SCORE = {"flash_score": True}  # the flash attention kernel computes it in a score chain or a mask
_NO_GRADIENT = {"differentiable": False}  # integer or boolean results: nothing to differentiate
# generated kernels take it on floats only: its integer semantics (truncating division, ...) keep torch
_FLOATS_IN_KERNELS = {"kernel_floats_only": True}


def _linear(how: str) -> dict:
    """Linear in some operands (sdc/dialect/hooks.py ShardingRule): a partial sum passes through."""
    return {"sharding": ShardingRule("elementwise", how)}


HOOKS: dict[str, dict] = {
    **{name: _COSTLY for name in (
        "exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "mish", "softplus", "sin", "cos", "tan", "asin",
        "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "reciprocal", "selu", "elu",
        "softsign", "pow")},
    **{name: _SCORE for name in ("max", "min", "where", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor")},
    **{name: _NO_GRADIENT for name in (
        "not", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right")},
    "not": {**_SCORE, **_NO_GRADIENT},
    "tanh": {**_COSTLY, **_SCORE},
    "add": {**_linear("all"), **_SCORE},
    "sub": {**_linear("all"), **_SCORE},
    "neg": {**_linear("unary"), **_SCORE},
    "mul": {**_linear("one"), **_SCORE},
    "div": {**_linear("lhs"), **_COSTLY, **_SCORE, **_FLOATS_IN_KERNELS},
    "mod": _FLOATS_IN_KERNELS,
    "clip": _FLOATS_IN_KERNELS,
    # by a constant exponent, which the kernel lowering writes out as products and square roots
    "pow": {**_COSTLY, **_FLOATS_IN_KERNELS, "kernel_form": KernelForm.LOWERED},
    # f16's range would turn large values into inf; no gradient through a test
    "isnan": {"precision": Precision.FOLLOW, **_NO_GRADIENT},
    "isinf": {"precision": Precision.FOLLOW, **_NO_GRADIENT},
}


# ---------------------------------------------------------------- registration

_WIDE_UNSIGNED = None


def _wrap(fn):
    """Reference semantics over any element type: torch's CPU kernels lack most uint16/32/64
    arithmetic, so those compute in int64 (same bits modulo 2^n) and convert back."""

    def ref(env, a, *xs):
        global _WIDE_UNSIGNED
        if _WIDE_UNSIGNED is None:
            _WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)
        if not any(x.dtype in _WIDE_UNSIGNED for x in xs):
            return fn(a, *xs)
        original = next(x.dtype for x in xs if x.dtype in _WIDE_UNSIGNED)
        out = fn(a, *[x.to(torch.int64) if x.dtype in _WIDE_UNSIGNED else x for x in xs])
        return out.to(original) if out.dtype == torch.int64 else out

    return ref


def _example1(name: str, attrs: dict, dtype: str = "f32", result: str | None = None) -> str:
    attr_text = _example_attrs(attrs)
    res = result or dtype
    return f'%1 = "sdc.{name}"(%0){attr_text} : (tensor<?x4x{dtype}>) -> tensor<?x4x{res}>'


def _example_attrs(attrs: dict) -> str:
    shown = {k: s for k, s in attrs.items()}
    if not shown:
        return ""
    parts = []
    for k, s in shown.items():
        v = s.default
        if s.kind == "enum":
            parts.append(f'{k} = "{v}"')
        elif s.kind == "float":
            parts.append(f"{k} = {float(v) if math.isfinite(v) else 6.0:e} : f64")
        elif s.kind == "bool":
            parts.append(f"{k} = {'true' if v else 'false'}")
    return " {" + ", ".join(parts) + "}" if parts else ""


for _name, (_fn, _cat, _attrs, _sem, _scalar) in UNARY.items():
    _dt = "i1" if _cat == BOOL else ("i32" if _cat == INTBOOL else "f32")
    register(OpDef(
        name=_name, kind=OpKind.ELEMENTWISE_UNARY,
        summary=f"elementwise {_sem}",
        doc=f"Elementwise `{_sem}` on a tensor of {_cat} element type; the result has the operand's type.",
        operands=("operand",), attrs=_attrs, shape=_unary_rule(_cat), ref=_wrap(_fn), scalar=_scalar,
        example=_example1(_name, _attrs, _dt), vjp=derivatives.unary_vjp(_name), **HOOKS.get(_name, {}),
    ))

for _name, (_fn, _sem, _scalar) in PREDICATES.items():
    register(OpDef(
        name=_name, kind=OpKind.ELEMENTWISE_UNARY,
        summary=f"elementwise test: {_sem}",
        doc=f"Elementwise test `{_sem}` on a float tensor; the result is i1 of the operand's shape.",
        operands=("operand",), shape=_predicate_rule, ref=_wrap(_fn), scalar=_scalar,
        example=_example1(_name, {}, "f32", "i1"), **HOOKS.get(_name, {}),
    ))


def _binary_example(name: str, dtype: str, result: str | None = None) -> str:
    return (f'%2 = "sdc.{name}"(%0, %1) : (tensor<?x1x{dtype}>, tensor<3x{dtype}>) '
            f"-> tensor<?x3x{result or dtype}>")


for _name, (_fn, _cat, _attrs, _sem, _scalar) in BINARY.items():
    _dt = "i32" if _cat in (INT, INTBOOL) else "f32"
    register(OpDef(
        name=_name, kind=OpKind.ELEMENTWISE_BINARY,
        summary=f"elementwise {_sem}",
        doc=(f"Elementwise `{_sem}` with numpy broadcasting. Both operands have the same {_cat} "
             "element type; the result has it too."),
        operands=("lhs", "rhs"), attrs=_attrs, shape=_binary_rule(_cat, None), ref=_wrap(_fn), scalar=_scalar,
        example=_binary_example(_name, _dt), vjp=derivatives.binary_vjp(_name), **HOOKS.get(_name, {}),
    ))

for _name, (_fn, _sem, _scalar) in COMPARE.items():
    register(OpDef(
        name=_name, kind=OpKind.COMPARISON,
        summary=f"elementwise comparison {_sem}",
        doc=f"Elementwise `{_sem}` with numpy broadcasting; operands share an element type, the result is i1.",
        operands=("lhs", "rhs"), shape=_binary_rule(ANY, "i1"), ref=_wrap(_fn), scalar=_scalar,
        example=_binary_example(_name, "f32", "i1"), **HOOKS.get(_name, {}),
    ))

for _name, (_fn, _sem, _scalar) in LOGICAL.items():
    register(OpDef(
        name=_name, kind=OpKind.LOGICAL,
        summary=f"elementwise logical {_sem}",
        doc=f"Elementwise `{_sem}` on i1 tensors with numpy broadcasting.",
        operands=("lhs", "rhs"), shape=_binary_rule(BOOL, "i1"), ref=_wrap(_fn), scalar=_scalar,
        example=_binary_example(_name, "i1"), **HOOKS.get(_name, {}),
    ))

register(OpDef(
    name="where", kind=OpKind.ELEMENTWISE_TERNARY, vjp=derivatives.where_vjp,
    summary="elementwise select: on_true where condition holds, else on_false",
    doc="`condition ? on_true : on_false` elementwise, with numpy broadcasting of all three operands.",
    operands=("condition", "on_true", "on_false"), shape=_where_rule,
    ref=lambda env, a, c, x, y: torch.where(c, x, y), scalar=_primitive("where"), **HOOKS["where"],
    example=('%3 = "sdc.where"(%0, %1, %2) : (tensor<?x4xi1>, tensor<?x4xf32>, tensor<1xf32>) '
             "-> tensor<?x4xf32>"),
))
