"""Derivative rules (reverse mode) of the sdc ops, attached to their `OpDef.vjp`.

A rule is `vjp(b, operands, results, attrs, cotangents) -> [cotangent or None per operand]`: given
the op's operand and result values, its attributes (plain values, defaults filled in) and one
cotangent per result, it emits sdc ops through `b` that compute the cotangent of each operand.
None means that no gradient flows to that operand (integer indices, a condition, or a derivative
that is zero almost everywhere such as floor's). Values are opaque handles of the builder, so this
module, like the op tables, imports no MLIR; the builder is the dialect's `OpBuilder`
(sdc/dialect/builder.py), which sdc-autodiff (sdc/transforms/autodiff.py) gives each rule it calls.

The elementwise families are tables below (name -> derivative), the derivative column of the op
tables, which take their rules with `unary_vjp` / `binary_vjp`; every other rule is a function
`<op>_vjp` that the op's definition names (`OpDef(vjp=derivatives.matmul_vjp)` in
sdc/dialect/ops/*.py), so a rule is attached where its op is defined.

The builder `b` offers (see `OpBuilder`): `b.op(name, *operands, **attrs)` (one result),
`b.ops(...)` (all results), `b.spec(value)` (its TensorSpec) and `b.scalar(number, dtype)` (a
rank-0 constant, which broadcasts against anything). A rule that cannot handle a case (dynamic
dims, an unsupported mode) raises `RuleError`; the pass reports it at the op.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from sdc.dialect.opdef import OpDef
from sdc.dialect.shapes import TensorSpec, is_static

if TYPE_CHECKING:  # the rules' annotations only: this module imports no MLIR
    from sdc.dialect.builder import OpBuilder as Builder

Value = Any


class RuleError(Exception):
    """A rule cannot differentiate this instance of its op (the message says why)."""


# ---------------------------------------------------------------- helpers every rule uses


def static_shape(b: Builder, v: Value, what: str = "operand") -> tuple[int, ...]:
    shape = b.spec(v).shape
    if not all(is_static(d) for d in shape):
        raise RuleError(f"its {what} has dynamic dims {b.spec(v)}; sdc-autodiff needs static shapes "
                        "(give the input shapes)")
    return tuple(shape)


def const(b: Builder, number: float, like: Value) -> Value:
    """A rank-0 constant of `like`'s element type."""
    return b.scalar(number, b.spec(like).dtype)


def add(b: Builder, x: Value, y: Value) -> Value:
    return b.op("add", x, y)


def sub(b: Builder, x: Value, y: Value) -> Value:
    return b.op("sub", x, y)


def mul(b: Builder, x: Value, y: Value) -> Value:
    return b.op("mul", x, y)


def div(b: Builder, x: Value, y: Value) -> Value:
    return b.op("div", x, y)


def scale(b: Builder, x: Value, number: float) -> Value:
    return mul(b, x, const(b, number, x))


def mask(b: Builder, cond: Value, like: Value) -> Value:
    """An i1 tensor as 0.0 / 1.0 of `like`'s element type."""
    return b.op("cast", cond, dtype=b.spec(like).dtype)


def select(b: Builder, cond: Value, on_true: Value, on_false: Value) -> Value:
    return b.op("where", cond, on_true, on_false)


def zeros(b: Builder, shape: tuple[int, ...], dtype: str) -> Value:
    """Zeros of a static shape: a broadcast scalar, never a dense literal of that size."""
    return b.op("broadcast", b.scalar(0.0, dtype), shape=list(shape))


def sum_to(b: Builder, g: Value, target: TensorSpec) -> Value:
    """The cotangent of an operand broadcast to `g`'s shape: `g` summed over the dims the broadcast
    added or stretched, reshaped to the operand's shape. Every broadcasting rule uses this."""
    shape = b.spec(g).shape
    if tuple(shape) == tuple(target.shape):
        return g
    lead = len(shape) - target.rank
    axes = list(range(lead))
    for i, d in enumerate(target.shape):
        if d == 1 and shape[lead + i] != 1:
            axes.append(lead + i)
    out = b.op("reduce_sum", g, axes=axes, keepdims=True) if axes else g
    if tuple(b.spec(out).shape) == tuple(target.shape):
        return out
    return b.op("reshape", out, shape=_reshape_dims(target, "operand"))


def broadcast_to(b: Builder, g: Value, shape: tuple[int, ...]) -> Value:
    if tuple(b.spec(g).shape) == tuple(shape):
        return g
    return b.op("broadcast", g, shape=list(shape))


def _reshape_dims(spec: TensorSpec, what: str) -> list[int]:
    dyn = [i for i, d in enumerate(spec.shape) if not is_static(d)]
    if len(dyn) > 1:
        raise RuleError(f"its {what} has more than one dynamic dim ({spec}); sdc-autodiff needs static shapes")
    return [-1 if i in dyn else d for i, d in enumerate(spec.shape)]


def reshape_like(b: Builder, g: Value, like: Value) -> Value:
    if b.spec(g).shape == b.spec(like).shape:
        return g
    return b.op("reshape", g, shape=_reshape_dims(b.spec(like), "operand"))


# ---------------------------------------------------------------- elementwise unary
# name -> d(b, x, y, g, attrs): the operand's cotangent from operand x, result y and cotangent g.

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu(b: Builder, x, y, g, a):
    if a["approximate"] == "tanh":
        # y = x/2 (1 + t), t = tanh(u), u = c (x + k x^3): dy = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3k x^2)
        k = 0.044715
        x2 = mul(b, x, x)
        u = scale(b, add(b, x, scale(b, mul(b, x2, x), k)), _SQRT_2_OVER_PI)
        t = b.op("tanh", u)
        one = const(b, 1.0, x)
        du = scale(b, add(b, one, scale(b, x2, 3 * k)), _SQRT_2_OVER_PI)
        left = scale(b, add(b, one, t), 0.5)
        right = mul(b, scale(b, mul(b, x, sub(b, one, mul(b, t, t))), 0.5), du)
        return mul(b, g, add(b, left, right))
    # y = x Phi(x): dy = Phi(x) + x phi(x)
    cdf = scale(b, add(b, const(b, 1.0, x), b.op("erf", scale(b, x, 1 / math.sqrt(2.0)))), 0.5)
    pdf = scale(b, b.op("exp", scale(b, mul(b, x, x), -0.5)), _INV_SQRT_2PI)
    return mul(b, g, add(b, cdf, mul(b, x, pdf)))


def _silu(b: Builder, x, y, g, a):
    s = b.op("sigmoid", x)
    one = const(b, 1.0, x)
    return mul(b, g, mul(b, s, add(b, one, mul(b, x, sub(b, one, s)))))


def _mish(b: Builder, x, y, g, a):
    t = b.op("tanh", b.op("softplus", x))
    dt = mul(b, b.op("sigmoid", x), sub(b, const(b, 1.0, x), mul(b, t, t)))
    return mul(b, g, add(b, t, mul(b, x, dt)))


def _positive(b: Builder, x):
    return b.op("gt", x, const(b, 0.0, x))


def _inv_sqrt_of(b: Builder, g, v):
    return mul(b, g, b.op("rsqrt", v))


def _hard_swish(b: Builder, x, y, g, a):
    inner = b.op("clip", add(b, scale(b, x, 1 / 6), const(b, 0.5, x)), min=0.0, max=1.0)
    inside = b.op("and", b.op("gt", x, const(b, -3.0, x)), b.op("lt", x, const(b, 3.0, x)))
    return mul(b, g, add(b, inner, scale(b, mul(b, x, mask(b, inside, x)), 1 / 6)))


def _clip(b: Builder, x, y, g, a):
    lo, hi = a["min"], a["max"]
    keep = None
    if not math.isinf(lo):
        keep = b.op("ge", x, const(b, lo, x))
    if not math.isinf(hi):
        upper = b.op("le", x, const(b, hi, x))
        keep = upper if keep is None else b.op("and", keep, upper)
    return g if keep is None else mul(b, g, mask(b, keep, x))


def _hard_sigmoid(b: Builder, x, y, g, a):
    z = add(b, scale(b, x, a["alpha"]), const(b, a["beta"], x))
    inside = b.op("and", b.op("gt", z, const(b, 0.0, x)), b.op("lt", z, const(b, 1.0, x)))
    return mul(b, g, scale(b, mask(b, inside, x), a["alpha"]))


def _negative_exp(b: Builder, x, g, alpha):
    """x > 0: g; else alpha * e^x * g (elu, selu)."""
    return select(b, _positive(b, x), g, mul(b, g, scale(b, b.op("exp", x), alpha)))


def _one_minus_sq(b: Builder, v):
    return sub(b, const(b, 1.0, v), mul(b, v, v))


UNARY_VJP: dict[str, Callable[..., Value] | None] = {
    "neg": lambda b, x, y, g, a: b.op("neg", g),
    "abs": lambda b, x, y, g, a: mul(b, g, b.op("sign", x)),
    "exp": lambda b, x, y, g, a: mul(b, g, y),
    "log": lambda b, x, y, g, a: div(b, g, x),
    "sqrt": lambda b, x, y, g, a: div(b, g, scale(b, y, 2.0)),
    "rsqrt": lambda b, x, y, g, a: mul(b, g, scale(b, mul(b, mul(b, y, y), y), -0.5)),
    "reciprocal": lambda b, x, y, g, a: b.op("neg", mul(b, g, mul(b, y, y))),
    "tanh": lambda b, x, y, g, a: mul(b, g, _one_minus_sq(b, y)),
    "sigmoid": lambda b, x, y, g, a: mul(b, g, mul(b, y, sub(b, const(b, 1.0, y), y))),
    "erf": lambda b, x, y, g, a: mul(b, g, scale(b, b.op("exp", b.op("neg", mul(b, x, x))), 2 / math.sqrt(math.pi))),
    "sin": lambda b, x, y, g, a: mul(b, g, b.op("cos", x)),
    "cos": lambda b, x, y, g, a: b.op("neg", mul(b, g, b.op("sin", x))),
    "tan": lambda b, x, y, g, a: mul(b, g, add(b, const(b, 1.0, y), mul(b, y, y))),
    "asin": lambda b, x, y, g, a: _inv_sqrt_of(b, g, _one_minus_sq(b, x)),
    "acos": lambda b, x, y, g, a: b.op("neg", _inv_sqrt_of(b, g, _one_minus_sq(b, x))),
    "atan": lambda b, x, y, g, a: div(b, g, add(b, const(b, 1.0, x), mul(b, x, x))),
    "sinh": lambda b, x, y, g, a: mul(b, g, b.op("cosh", x)),
    "cosh": lambda b, x, y, g, a: mul(b, g, b.op("sinh", x)),
    "asinh": lambda b, x, y, g, a: _inv_sqrt_of(b, g, add(b, mul(b, x, x), const(b, 1.0, x))),
    "acosh": lambda b, x, y, g, a: _inv_sqrt_of(b, g, sub(b, mul(b, x, x), const(b, 1.0, x))),
    "atanh": lambda b, x, y, g, a: div(b, g, _one_minus_sq(b, x)),
    "relu": lambda b, x, y, g, a: mul(b, g, mask(b, _positive(b, x), x)),
    "silu": _silu,
    "softplus": lambda b, x, y, g, a: mul(b, g, b.op("sigmoid", x)),
    "softsign": lambda b, x, y, g, a: div(b, g, (lambda d: mul(b, d, d))(add(b, const(b, 1.0, x), b.op("abs", x)))),
    "mish": _mish,
    "gelu": _gelu,
    "leaky_relu": lambda b, x, y, g, a: select(b, _positive(b, x), g, scale(b, g, a["alpha"])),
    "elu": lambda b, x, y, g, a: _negative_exp(b, x, g, a["alpha"]),
    "selu": lambda b, x, y, g, a: scale(b, _negative_exp(b, x, g, a["alpha"]), a["gamma"]),
    "hard_sigmoid": _hard_sigmoid,
    "hard_swish": _hard_swish,
    "clip": _clip,
    # Piecewise constant: the derivative is zero wherever it exists, so no gradient flows.
    "sign": None,
    "floor": None,
    "ceil": None,
    "round": None,
}


def _unary(d: Callable[..., Value] | None):
    def vjp(b: Builder, ins, outs, attrs, cts):
        return [None if d is None else d(b, ins[0], outs[0], cts[0], attrs)]

    return vjp


# ---------------------------------------------------------------- elementwise binary
# name -> d(b, x, y, z, g, attrs) -> (cotangent of x, of y), both of the broadcast result shape;
# the wrapper sums each back to its operand's shape.


def _pow(b: Builder, x, y, z, g, a):
    # d/dx x^y = y x^(y-1); d/dy x^y = x^y log x (defined for x > 0)
    dx = mul(b, g, mul(b, y, b.op("pow", x, sub(b, y, const(b, 1.0, y)))))
    dy = mul(b, g, mul(b, z, b.op("log", x)))
    return dx, dy


def _mod(b: Builder, x, y, z, g, a):
    # z = x - y q with q = floor(x / y) (trunc with fmod); q is piecewise constant, and it is
    # recovered exactly from the result as round((x - z) / y), so one rule serves both modes.
    q = b.op("round", div(b, sub(b, x, z), y))
    return g, b.op("neg", mul(b, g, q))


def _max_share(b: Builder, x, y, larger: bool):
    """x's share of the gradient of max (min): 1 where x wins, 1/2 on ties (as torch splits them)."""
    wins = b.op("gt" if larger else "lt", x, y)
    tie = b.op("eq", x, y)
    return add(b, mask(b, wins, x), scale(b, mask(b, tie, x), 0.5))


def _extreme(larger: bool):
    def d(b: Builder, x, y, z, g, a):
        share = _max_share(b, x, y, larger)
        return mul(b, g, share), mul(b, g, sub(b, const(b, 1.0, x), share))

    return d


BINARY_VJP: dict[str, Callable[..., tuple[Value, Value]]] = {
    "add": lambda b, x, y, z, g, a: (g, g),
    "sub": lambda b, x, y, z, g, a: (g, b.op("neg", g)),
    "mul": lambda b, x, y, z, g, a: (mul(b, g, y), mul(b, g, x)),
    "div": lambda b, x, y, z, g, a: (div(b, g, y), b.op("neg", div(b, mul(b, g, z), y))),
    "pow": _pow,
    "mod": _mod,
    "max": _extreme(True),
    "min": _extreme(False),
}


def _binary(d: Callable[..., tuple[Value, Value]]):
    def vjp(b: Builder, ins, outs, attrs, cts):
        x, y = ins
        dx, dy = d(b, x, y, outs[0], cts[0], attrs)
        return [sum_to(b, dx, b.spec(x)), sum_to(b, dy, b.spec(y))]

    return vjp


def unary_vjp(name: str) -> Callable[..., list] | None:
    """The rule of elementwise unary op `name` (its row of UNARY_VJP), for the op table's loop."""
    return _unary(UNARY_VJP[name]) if name in UNARY_VJP else None


def binary_vjp(name: str) -> Callable[..., list] | None:
    """The rule of elementwise binary op `name` (its row of BINARY_VJP), for the op table's loop."""
    return _binary(BINARY_VJP[name]) if name in BINARY_VJP else None


# ---------------------------------------------------------------- everything else: `<op>_vjp`, named by the op's OpDef


def where_vjp(b: Builder, ins, outs, attrs, cts):
    cond, x, y = ins
    g = cts[0]
    zero = const(b, 0.0, g)
    return [None, sum_to(b, select(b, cond, g, zero), b.spec(x)), sum_to(b, select(b, cond, zero, g), b.spec(y))]


def cast_vjp(b: Builder, ins, outs, attrs, cts):
    source = b.spec(ins[0]).dtype
    if not _is_float(source) or not _is_float(b.spec(outs[0]).dtype):
        return [None]
    return [b.op("cast", cts[0], dtype=source)]


def layout_cast_vjp(b: Builder, ins, outs, attrs, cts):
    return [cts[0]]


def reshape_vjp(b: Builder, ins, outs, attrs, cts):
    return [reshape_like(b, cts[0], ins[0])]


def transpose_vjp(b: Builder, ins, outs, attrs, cts):
    perm = list(attrs["perm"])
    inverse = [perm.index(i) for i in range(len(perm))]
    return [b.op("transpose", cts[0], perm=inverse)]


def broadcast_vjp(b: Builder, ins, outs, attrs, cts):
    return [sum_to(b, cts[0], b.spec(ins[0]))]


def concat_vjp(b: Builder, ins, outs, attrs, cts):
    lhs, rhs = ins
    rank = b.spec(lhs).rank
    axis = attrs["axis"] % rank
    n = static_shape(b, lhs, "lhs")[axis]
    total = static_shape(b, outs[0], "result")[axis]
    return [b.op("slice", cts[0], starts=[0], ends=[n], axes=[axis], steps=[1]),
            b.op("slice", cts[0], starts=[n], ends=[total], axes=[axis], steps=[1])]


def split_vjp(b: Builder, ins, outs, attrs, cts):
    axis = attrs["axis"] % b.spec(ins[0]).rank
    out = cts[0]
    for g in cts[1:]:
        out = b.op("concat", out, g, axis=axis)
    return [out]


def slice_vjp(b: Builder, ins, outs, attrs, cts):
    x = ins[0]
    shape = static_shape(b, x)
    rank = len(shape)
    starts, ends = list(attrs["starts"]), list(attrs["ends"])
    axes = [ax % rank for ax in (list(attrs["axes"]) or list(range(len(starts))))]
    steps = list(attrs["steps"]) or [1] * len(starts)
    g = cts[0]
    # The slices apply one axis after another, so their cotangents undo them in reverse order.
    sizes = list(shape)
    staged = []
    for ax, s, e, st in zip(axes, starts, ends, steps):
        staged.append((ax, sizes[ax], range(*slice(s, e, st).indices(sizes[ax]))))
        sizes[ax] = len(staged[-1][2])
    for ax, size, kept in reversed(staged):
        g = _unslice(b, g, ax, size, kept)
    return [g]


def _unslice(b: Builder, g: Value, axis: int, size: int, kept: range) -> Value:
    """The cotangent of `x` from that of `x[kept]` along `axis`: zeros where nothing was taken."""
    if kept.step < 0:
        raise RuleError("slices with negative steps have no derivative rule yet")
    shape = list(static_shape(b, g, "cotangent"))
    rank = len(shape)
    n = len(kept)
    if n == 0:
        return zeros(b, tuple(shape[:axis] + [size] + shape[axis + 1:]), b.spec(g).dtype)
    if kept.step > 1:
        # Interleave step-1 zeros after each element: [n, 1] padded to [n, step], flattened to n*step.
        g = b.op("unsqueeze", g, axes=[axis + 1])
        pads = [0] * (2 * (rank + 1))
        pads[rank + 1 + axis + 1] = kept.step - 1
        g = b.op("pad", g, pads=pads)
        g = b.op("reshape", g, shape=shape[:axis] + [n * kept.step] + shape[axis + 1:])
    covered = n * kept.step
    pads = [0] * (2 * rank)
    pads[axis] = kept.start
    pads[rank + axis] = size - kept.start - covered  # negative: crop the padding past the end
    return b.op("pad", g, pads=pads) if any(pads) else g


def pad_vjp(b: Builder, ins, outs, attrs, cts):
    if attrs["mode"] != "constant":
        raise RuleError(f"pad mode '{attrs['mode']}' has no derivative rule yet")
    # Padding by -pads crops what was added and fills what was cropped with zeros.
    return [b.op("pad", cts[0], pads=[-p for p in attrs["pads"]])]


# ---------------------------------------------------------------- reductions


def _axes(attrs, rank: int) -> list[int]:
    return sorted(ax % rank for ax in attrs["axes"]) if attrs["axes"] else list(range(rank))


def _kept(b: Builder, g: Value, x: Value, axes: list[int], keepdims: bool) -> Value:
    """A reduction's cotangent with the reduced dims back as size 1 (so it broadcasts against x)."""
    if keepdims:
        return g
    shape = static_shape(b, x)
    return b.op("reshape", g, shape=[1 if i in axes else d for i, d in enumerate(shape)])


def _reduce_linear(mean: bool):
    def vjp(b: Builder, ins, outs, attrs, cts):
        x = ins[0]
        shape = static_shape(b, x)
        axes = _axes(attrs, len(shape))
        out = broadcast_to(b, _kept(b, cts[0], x, axes, attrs["keepdims"]), shape)
        return [scale(b, out, 1.0 / math.prod(shape[i] for i in axes)) if mean else out]

    return vjp


reduce_sum_vjp = _reduce_linear(mean=False)
reduce_mean_vjp = _reduce_linear(mean=True)


def reduce_extreme_vjp(b: Builder, ins, outs, attrs, cts):
    x = ins[0]
    shape = static_shape(b, x)
    axes = _axes(attrs, len(shape))
    y = _kept(b, outs[0], x, axes, attrs["keepdims"])
    g = _kept(b, cts[0], x, axes, attrs["keepdims"])
    return [_spread_to_winners(b, x, y, g, axes)]


def _spread_to_winners(b: Builder, x, y, g, axes):
    """g split evenly over the elements equal to the extreme y (torch's amax/amin rule for ties)."""
    hit = mask(b, b.op("eq", x, y), x)
    count = b.op("reduce_sum", hit, axes=axes, keepdims=True)
    return mul(b, hit, div(b, g, count))


def reduce_prod_vjp(b: Builder, ins, outs, attrs, cts):
    # d prod / d x_i = prod / x_i (for non-zero x_i)
    x = ins[0]
    axes = _axes(attrs, b.spec(x).rank)
    y = _kept(b, outs[0], x, axes, attrs["keepdims"])
    g = _kept(b, cts[0], x, axes, attrs["keepdims"])
    return [div(b, mul(b, g, y), x)]


def global_avg_pool_vjp(b: Builder, ins, outs, attrs, cts):
    shape = static_shape(b, ins[0])
    n = math.prod(shape[2:])
    return [scale(b, broadcast_to(b, cts[0], shape), 1.0 / n)]


def global_max_pool_vjp(b: Builder, ins, outs, attrs, cts):
    x = ins[0]
    axes = list(range(2, b.spec(x).rank))
    return [_spread_to_winners(b, x, outs[0], cts[0], axes)]


def softmax_vjp(b: Builder, ins, outs, attrs, cts):
    y, g = outs[0], cts[0]
    axis = attrs["axis"] % b.spec(y).rank
    inner = b.op("reduce_sum", mul(b, g, y), axes=[axis], keepdims=True)
    return [mul(b, y, sub(b, g, inner))]


def log_softmax_vjp(b: Builder, ins, outs, attrs, cts):
    y, g = outs[0], cts[0]
    axis = attrs["axis"] % b.spec(y).rank
    total = b.op("reduce_sum", g, axes=[axis], keepdims=True)
    return [sub(b, g, mul(b, b.op("exp", y), total))]


def cumsum_vjp(b: Builder, ins, outs, attrs, cts):
    # Each input element adds to the results after it (before it when reversed): the transpose of a
    # running sum is the running sum the other way, with the same exclusiveness.
    return [b.op("cumsum", cts[0], axis=attrs["axis"], exclusive=attrs["exclusive"], reverse=not attrs["reverse"])]


# ---------------------------------------------------------------- normalizations


def _norm_stats_axes(b: Builder, x, axis: int) -> tuple[list[int], list[int]]:
    rank = b.spec(x).rank
    axis %= rank
    return list(range(axis, rank)), list(range(axis))


def _mean(b: Builder, v, axes):
    return b.op("reduce_mean", v, axes=axes, keepdims=True)


def layer_norm_vjp(b: Builder, ins, outs, attrs, cts):
    x, gamma, beta = ins
    g = cts[0]
    norm_axes, lead_axes = _norm_stats_axes(b, x, attrs["axis"])
    centered = sub(b, x, _mean(b, x, norm_axes))
    var = _mean(b, mul(b, centered, centered), norm_axes)
    rstd = b.op("rsqrt", add(b, var, const(b, attrs["epsilon"], x)))
    xhat = mul(b, centered, rstd)
    dxhat = mul(b, g, gamma)
    dx = mul(b, rstd, sub(b, sub(b, dxhat, _mean(b, dxhat, norm_axes)),
                          mul(b, xhat, _mean(b, mul(b, dxhat, xhat), norm_axes))))
    return [dx, _sum_over(b, mul(b, g, xhat), lead_axes), _sum_over(b, g, lead_axes)]


def rms_norm_vjp(b: Builder, ins, outs, attrs, cts):
    x, gamma = ins
    g = cts[0]
    norm_axes, lead_axes = _norm_stats_axes(b, x, attrs["axis"])
    r = b.op("rsqrt", add(b, _mean(b, mul(b, x, x), norm_axes), const(b, attrs["epsilon"], x)))
    xhat = mul(b, x, r)
    dxhat = mul(b, g, gamma)
    dx = mul(b, r, sub(b, dxhat, mul(b, xhat, _mean(b, mul(b, dxhat, xhat), norm_axes))))
    return [dx, _sum_over(b, mul(b, g, xhat), lead_axes)]


def _sum_over(b: Builder, v, axes):
    return b.op("reduce_sum", v, axes=axes, keepdims=False) if axes else v


def batch_norm_vjp(b: Builder, ins, outs, attrs, cts):
    # Inference batch norm: the statistics are operands, so their cotangents are plain sums.
    x, gamma, beta, mean, var = ins
    g = cts[0]
    rank = b.spec(x).rank
    channels = static_shape(b, gamma, "scale")[0]
    column = [1, channels] + [1] * (rank - 2)
    axes = [0] + list(range(2, rank))

    def per_channel(v):
        return b.op("reshape", v, shape=column)

    rstd = b.op("rsqrt", add(b, var, const(b, attrs["epsilon"], var)))
    centered = sub(b, x, per_channel(mean))
    g_sum = _sum_over(b, g, axes)
    gc_sum = _sum_over(b, mul(b, g, centered), axes)
    dx = mul(b, g, per_channel(mul(b, gamma, rstd)))
    dgamma = mul(b, gc_sum, rstd)
    dmean = b.op("neg", mul(b, g_sum, mul(b, gamma, rstd)))
    dvar = mul(b, gc_sum, mul(b, gamma, scale(b, mul(b, rstd, mul(b, rstd, rstd)), -0.5)))
    return [dx, dgamma, g_sum, dmean, dvar]


# ---------------------------------------------------------------- contractions


def matmul_vjp(b: Builder, ins, outs, attrs, cts):
    a, w = ins
    g = cts[0]
    ta = attrs["transpose_lhs"] and b.spec(a).rank >= 2
    tb = attrs["transpose_rhs"] and b.spec(w).rank >= 2
    # A 1-D operand is a matrix with a size-1 dim that the result does not show: restore it.
    a2 = b.op("unsqueeze", a, axes=[0]) if b.spec(a).rank == 1 else a
    w2 = b.op("unsqueeze", w, axes=[1]) if b.spec(w).rank == 1 else w
    g2 = g
    if b.spec(a).rank == 1:
        g2 = b.op("unsqueeze", g2, axes=[b.spec(g2).rank - (0 if b.spec(w).rank == 1 else 1)])
    if b.spec(w).rank == 1:
        g2 = b.op("unsqueeze", g2, axes=[b.spec(g2).rank])
    # With A = op(a) and B = op(w): dA = g B^T, dB = A^T g; a transposed operand takes the transpose.
    if ta:
        da = b.op("matmul", w2, g2, transpose_lhs=tb, transpose_rhs=True)
    else:
        da = b.op("matmul", g2, w2, transpose_rhs=not tb)
    if tb:
        dw = b.op("matmul", g2, a2, transpose_lhs=True, transpose_rhs=ta)
    else:
        dw = b.op("matmul", a2, g2, transpose_lhs=not ta)
    da = reshape_like(b, sum_to(b, da, b.spec(a2)), a)
    dw = reshape_like(b, sum_to(b, dw, b.spec(w2)), w)
    return [da, dw]


# ---------------------------------------------------------------- convolutions and pooling


def _window(b: Builder, x: Value, attrs) -> tuple[int, list[int], list[int], list[int]]:
    """(spatial rank, strides, dilations, pads) of a window op, defaults filled in."""
    n = b.spec(x).rank - 2
    strides = list(attrs["strides"]) or [1] * n
    dilations = list(attrs.get("dilations") or []) or [1] * n
    pads = list(attrs["pads"]) or [0] * (2 * n)
    return n, strides, dilations, pads


def _conv_input_grad(b: Builder, g: Value, w: Value, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                     e: tuple[int, ...], strides, dilations, pads, groups: int) -> Value:
    """d/dx of `conv(x, w)` [N, O, E..] for cotangent `g`: the transposed convolution of g with the
    same weight; output_padding restores the input rows that no window reached (the stride's
    remainder)."""
    n = len(e)
    extra = [x_shape[2 + i] - ((e[i] - 1) * strides[i] + dilations[i] * (w_shape[2 + i] - 1) + 1
                               - pads[i] - pads[n + i]) for i in range(n)]
    return b.op("conv_transpose", g, w, strides=strides, dilations=dilations, pads=pads, output_padding=extra,
                groups=groups)


def conv_vjp(b: Builder, ins, outs, attrs, cts):
    x, w = ins
    g = cts[0]
    x_shape, w_shape = static_shape(b, x, "input"), static_shape(b, w, "weight")
    e = static_shape(b, outs[0], "result")[2:]
    _, strides, dilations, pads = _window(b, x, attrs)
    dx = _conv_input_grad(b, g, w, x_shape, w_shape, e, strides, dilations, pads, attrs["groups"])
    # The weight's cotangent is one op of its own (one cuDNN/oneDNN weight-gradient call), not a
    # convolution over the batch with the batch as channels, which runs on cuDNN's slowest kernels.
    dw = b.op("conv_weight_grad", x, g, strides=strides, dilations=dilations, pads=pads, groups=attrs["groups"],
              kernel=list(w_shape[2:]))
    return [dx, dw]


def conv_weight_grad_vjp(b: Builder, ins, outs, attrs, cts):
    # dw(x, g) is bilinear: <dw(x, g), h> = <g, conv(x, h)>. So g's cotangent is the convolution of x
    # with the cotangent h as the weight, and x's is that convolution's input gradient for g.
    x, g = ins
    h = cts[0]
    x_shape, w_shape = static_shape(b, x, "input"), static_shape(b, outs[0], "result")
    e = static_shape(b, g, "grad")[2:]
    _, strides, dilations, pads = _window(b, x, attrs)
    groups = attrs["groups"]
    dx = _conv_input_grad(b, g, h, x_shape, w_shape, e, strides, dilations, pads, groups)
    dg = b.op("conv", x, h, strides=strides, dilations=dilations, pads=pads, groups=groups)
    return [dx, dg]


def conv_transpose_vjp(b: Builder, ins, outs, attrs, cts):
    x, w = ins
    g = cts[0]
    x_shape, w_shape = static_shape(b, x, "input"), static_shape(b, w, "weight")
    e = static_shape(b, outs[0], "result")[2:]
    n, strides, dilations, pads = _window(b, x, attrs)
    groups = attrs["groups"]
    # Undo the crop (and the output padding) first: `full` is g on the uncropped result, exactly
    # (D - 1)*stride + dilation*(K - 1) + 1 long; then both cotangents are those of a plain conv.
    full = [(x_shape[2 + i] - 1) * strides[i] + dilations[i] * (w_shape[2 + i] - 1) + 1 for i in range(n)]
    begin = pads[:n]
    end = [full[i] - begin[i] - e[i] for i in range(n)]
    g_full = g
    if any(begin) or any(end):
        g_full = b.op("pad", g, pads=[0, 0] + begin + [0, 0] + end)
    dx = b.op("conv", g_full, w, strides=strides, dilations=dilations, pads=[0] * (2 * n), groups=groups)
    # y = conv_transpose(x, w) is the input cotangent of conv(., w) at x, so w's cotangent is that
    # conv's weight cotangent with the roles of input and cotangent exchanged.
    dw = b.op("conv_weight_grad", g_full, x, strides=strides, dilations=dilations, pads=[0] * (2 * n),
              groups=groups, kernel=list(w_shape[2:]))
    return [dx, dw]


def _pool_geometry(b: Builder, x: Value, y: Value, attrs):
    """(kernel, strides, dilations, pads begin, padded length) per spatial dim; the padded length
    covers exactly the windows the result has (ceil_mode's extra cells included)."""
    kernel = list(attrs["kernel"])
    n, strides, dilations, pads = _window(b, x, attrs)
    d = static_shape(b, x, "input")[2:]
    e = static_shape(b, y, "result")[2:]
    length = [(e[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 for i in range(n)]
    return kernel, strides, dilations, pads[:n], length, list(d), list(e)


def _taps(kernel: list[int]):
    """Every kernel offset, in row-major order (the order torch scans a window)."""
    out = [[]]
    for k in kernel:
        out = [t + [i] for t in out for i in range(k)]
    return out


def max_pool_vjp(b: Builder, ins, outs, attrs, cts):
    # Each window's cotangent goes to one element: the first maximum in row-major order of the
    # window, as torch's max_pool backward does (ties do not split). sdc has no max_pool with
    # indices, so the winner is found tap by tap: the strided view of the padded input at each
    # kernel offset, compared with the result, minus the windows an earlier tap already won.
    x, y = ins[0], outs[0]
    g = cts[0]
    if not _is_float(b.spec(x).dtype):
        return [None]
    kernel, strides, dilations, begin, length, d, e = _pool_geometry(b, x, y, attrs)
    n = len(kernel)
    end = [length[i] - begin[i] - d[i] for i in range(n)]
    xp = x
    if any(begin) or any(end):
        xp = b.op("pad", x, pads=[0, 0] + begin + [0, 0] + end, value=-math.inf)
    axes = list(range(2, 2 + n))
    taken = None
    total = None
    for tap in _taps(kernel):
        starts = [tap[i] * dilations[i] for i in range(n)]
        view = b.op("slice", xp, starts=starts, ends=[starts[i] + (e[i] - 1) * strides[i] + 1 for i in range(n)],
                    axes=axes, steps=strides)
        hit = b.op("eq", view, y)
        if taken is not None:
            first = b.op("and", hit, b.op("not", taken))
            taken = b.op("or", taken, hit)
        else:
            first = taken = hit
        part = mul(b, g, mask(b, first, g))
        for i in reversed(range(n)):
            kept = range(starts[i], starts[i] + (e[i] - 1) * strides[i] + 1, strides[i])
            part = _unslice(b, part, 2 + i, length[i], kept)
        total = part if total is None else add(b, total, part)
    if any(begin) or any(end):
        total = b.op("pad", total, pads=[0, 0] + [-p for p in begin] + [0, 0] + [-p for p in end])
    return [total]


def avg_pool_vjp(b: Builder, ins, outs, attrs, cts):
    # Linear: each window's cotangent, divided by its count, spreads evenly over the window. The
    # counts are a convolution of the padding mask (ones on the input, and on the explicit pads
    # with count_include_pad) with a kernel of ones; the spreading is the transposed convolution
    # of g / count with that kernel, one channel at a time.
    x, y = ins[0], outs[0]
    g = cts[0]
    kernel, strides, dilations, begin, length, d, e = _pool_geometry(b, x, y, attrs)
    n = len(kernel)
    n_batch, channels = static_shape(b, x)[:2]
    pads = list(attrs["pads"]) or [0] * (2 * n)
    dtype = b.spec(x).dtype
    ones_kernel = b.op("broadcast", b.scalar(1.0, dtype), shape=[1, 1] + kernel)
    valid = b.op("broadcast", b.scalar(1.0, dtype), shape=[1, 1] + d)
    if attrs["count_include_pad"] and any(pads):
        valid = b.op("pad", valid, pads=[0, 0] + pads[:n] + [0, 0] + pads[n:], value=1.0)
        inner = [0] * n
    else:
        inner = begin
    outer = [length[i] - b.spec(valid).shape[2 + i] - inner[i] for i in range(n)]
    if any(inner) or any(outer):
        valid = b.op("pad", valid, pads=[0, 0] + inner + [0, 0] + outer)
    count = b.op("conv", valid, ones_kernel, strides=strides, dilations=dilations, pads=[0] * (2 * n))
    share = b.op("reshape", div(b, g, count), shape=[n_batch * channels, 1] + e)
    end = [length[i] - begin[i] - d[i] for i in range(n)]
    spread = b.op("conv_transpose", share, ones_kernel, strides=strides, dilations=dilations, pads=begin + end)
    return [b.op("reshape", spread, shape=[n_batch, channels] + d)]


# ---------------------------------------------------------------- indexing


def gather_vjp(b: Builder, ins, outs, attrs, cts):
    # The cotangent of a gather adds each result slice into the row it was read from: a scatter-add
    # (sdc.scatter_nd with reduction add) on a zero tensor, with the indexed dim moved to the front.
    data, indices = ins
    g = cts[0]
    shape = static_shape(b, data, "data")
    idx_shape = static_shape(b, indices, "indices")
    rank = len(shape)
    axis = attrs["axis"] % rank
    n_idx = math.prod(idx_shape)
    before, after = list(shape[:axis]), list(shape[axis + 1:])
    # g: [before, idx..., after] -> [idx..., before, after] -> [n_idx, before, after]
    k = len(idx_shape)
    perm = list(range(axis, axis + k)) + list(range(axis)) + list(range(axis + k, axis + k + len(after)))
    if perm != list(range(len(perm))):
        g = b.op("transpose", g, perm=perm)
    g = b.op("reshape", g, shape=[n_idx] + before + after)
    flat_idx = b.op("reshape", indices, shape=[n_idx, 1])
    moved = [shape[axis]] + before + after
    out = b.op("scatter_nd", zeros(b, tuple(moved), b.spec(data).dtype), flat_idx, g, reduction="add")
    if axis:
        back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
        out = b.op("transpose", out, perm=back)
    return [out, None]


def gather_elements_vjp(b: Builder, ins, outs, attrs, cts):
    data, indices = ins
    empty = zeros(b, static_shape(b, data, "data"), b.spec(data).dtype)
    return [b.op("scatter_elements", empty, indices, cts[0], axis=attrs["axis"], reduction="add"), None]


def gather_nd_vjp(b: Builder, ins, outs, attrs, cts):
    # A scatter-add of the result slices into zeros at the same index tuples. With batch dims, the
    # batch is flattened into one leading dim and its position prepended to each tuple.
    data, indices = ins
    g = cts[0]
    shape = static_shape(b, data, "data")
    idx_shape = static_shape(b, indices, "indices")
    nb, k = attrs["batch_dims"], idx_shape[-1]
    empty = zeros(b, shape, b.spec(data).dtype)
    if nb == 0:
        return [b.op("scatter_nd", empty, indices, g, reduction="add"), None]
    batch, rest = math.prod(shape[:nb]), list(shape[nb:])
    tuples = math.prod(idx_shape[nb:-1])
    idx = b.op("reshape", indices, shape=[batch, tuples, k])
    row = b.op("iota", shape=[batch, tuples, 1], dimension=0, dtype=b.spec(indices).dtype)
    idx = b.op("reshape", b.op("concat", row, idx, axis=2), shape=[batch * tuples, k + 1])
    g = b.op("reshape", g, shape=[batch * tuples] + list(shape[nb + k:]))
    flat = b.op("scatter_nd", zeros(b, tuple([batch] + rest), b.spec(data).dtype), idx, g, reduction="add")
    return [b.op("reshape", flat, shape=list(shape)), None]


def _scatter(read: str):
    """scatter_elements / scatter_nd (`read`: the gather that reads what they write): an update's
    cotangent is the result's cotangent where it went; data's is the result's cotangent, with
    zeros where `none` overwrote it. Repeated indices under `none` give every duplicate update the
    cotangent (as torch's scatter does). mul, max and min have no rule yet."""

    def vjp(b: Builder, ins, outs, attrs, cts):
        data, indices, updates = ins
        g = cts[0]
        reduction = attrs["reduction"]
        if reduction not in ("none", "add"):
            raise RuleError(f"reduction '{reduction}' has no derivative rule yet (none and add do)")
        kw = {"axis": attrs["axis"]} if "axis" in attrs else {}
        d_updates = b.op(read, g, indices, **kw)
        if reduction == "add":
            return [g, None, d_updates]
        blank = zeros(b, static_shape(b, updates, "updates"), b.spec(updates).dtype)
        d_data = b.op(read.replace("gather", "scatter"), g, indices, blank, reduction="none", **kw)
        return [d_data, None, d_updates]

    return vjp


scatter_elements_vjp = _scatter("gather_elements")
scatter_nd_vjp = _scatter("gather_nd")


def topk_vjp(b: Builder, ins, outs, attrs, cts):
    # The values' cotangents go back to the positions they were taken from; indices carry none.
    x = ins[0]
    g = cts[0]
    if g is None:
        return [None]
    empty = zeros(b, static_shape(b, x), b.spec(x).dtype)
    return [b.op("scatter_elements", empty, outs[1], g, axis=attrs["axis"], reduction="add")]


def cumprod_vjp(b: Builder, ins, outs, attrs, cts):
    # d y_i / d x_j = y_i / x_j for every y_i that x_j is a factor of: the running sum of g * y the
    # other way, divided by x. Exact for non-zero x (an x of zero gives inf/nan, unlike torch's
    # special case for zeros).
    x, y = ins[0], outs[0]
    carried = b.op("cumsum", mul(b, cts[0], y), axis=attrs["axis"], exclusive=attrs["exclusive"],
                   reverse=not attrs["reverse"])
    return [div(b, carried, x)]


# ---------------------------------------------------------------- coverage

# Float ops with no rule yet: a gradient through one is an error naming it (see test_autodiff's
# coverage test, which keeps this list exact).
PENDING = ("deform_conv", "lrn", "resize", "grid_sample", "roi_align",
           "col2im", "dft", "det", "linear_attention")


def _is_float(dtype: str) -> bool:
    from sdc import dtypes

    return dtypes.is_float(dtype)


def is_differentiable_kind(op: OpDef) -> bool:
    """The marker: an op a gradient can meaningfully flow through, so it needs a rule (float
    arithmetic and data movement). Not: comparisons, logic, integer-only ops, index producers,
    ops without operands (constants, parameters, iota), side-effecting ops, and collectives and
    sharding annotations (their derivatives come with the distributed training step)."""
    return op.pure and bool(op.operands) and op.differentiable
