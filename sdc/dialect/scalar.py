"""Scalar formulas: an elementwise op's math, written once, as a tiny expression tree over primitives.

An elementwise op's `OpDef.scalar` (its table entry in sdc/dialect/ops/elementwise.py) is a function
`formula(attrs, *operands) -> Expr` that builds the op's value at one element from its operands
(`Expr` leaves) with the primitives below, Python arithmetic (`+ - * /`, unary `-`, `< <= > >=`) and
numbers. `gelu` is `0.5 * x * (1 + erf(x * SQRT1_2))`; `relu` is `where(x < 0, 0, x)`; `exp` is the
primitive `exp(x)` itself. Every codegen backend derives the op's code from the formula and supplies
only the primitives (sdc/codegen/kernel/decompose.py); `evaluate` computes it with torch, which the
tests compare with the op's reference function.

`steps(expr, dtypes)` is the formula in order of evaluation, each step typed: a comparison's result
is i1, anything else has its operands' type, and a number takes the type of what it meets (the other
operand, the other branch of a `where`; the first operand's type at the top). So one formula serves
every element type an op takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from sdc import dtypes

# primitive name -> arity
UNARY = ("neg", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round", "isnan", "isinf", "not",
         "bitwise_not")
BINARY = ("add", "sub", "mul", "div", "max", "min", "pow", "fmod", "remainder", "bitwise_and", "bitwise_or",
          "bitwise_xor", "shift_left", "shift_right", "and", "or", "xor", "eq", "ne", "lt", "le", "gt", "ge")
PRIMITIVES: dict[str, int] = {**{p: 1 for p in UNARY}, **{p: 2 for p in BINARY}, "where": 3}
# primitives whose result is i1 whatever their operands' type
PREDICATES = frozenset({"isnan", "isinf", "not", "and", "or", "xor", "eq", "ne", "lt", "le", "gt", "ge"})

Number = int | float | bool


@dataclass(frozen=True, eq=False)
class Expr:
    """A node of a formula: a primitive of `args`, an operand (`op == "operand"`, `value` its index,
    `dtype` its element type where the caller knows it) or a number (`op == "const"`). Compared by
    identity: `==` is not overloaded (use `eq`)."""

    op: str
    args: tuple[Expr, ...] = ()
    value: Any = None
    dtype: str | None = None

    def __add__(self, other): return _prim("add", self, other)
    def __radd__(self, other): return _prim("add", other, self)
    def __sub__(self, other): return _prim("sub", self, other)
    def __rsub__(self, other): return _prim("sub", other, self)
    def __mul__(self, other): return _prim("mul", self, other)
    def __rmul__(self, other): return _prim("mul", other, self)
    def __truediv__(self, other): return _prim("div", self, other)
    def __rtruediv__(self, other): return _prim("div", other, self)
    def __neg__(self): return _prim("neg", self)
    def __lt__(self, other): return _prim("lt", self, other)
    def __le__(self, other): return _prim("le", self, other)
    def __gt__(self, other): return _prim("gt", self, other)
    def __ge__(self, other): return _prim("ge", self, other)


Formula = Callable[..., Expr]  # (attrs, *operands) -> the result's Expr


def operand(index: int, dtype: str | None = None) -> Expr:
    return Expr("operand", value=index, dtype=dtype)


def const(value: Number) -> Expr:
    return Expr("const", value=value)


def _as_expr(x: Expr | Number) -> Expr:
    return x if isinstance(x, Expr) else const(x)


def _prim(name: str, *args: Expr | Number) -> Expr:
    if PRIMITIVES.get(name) != len(args):
        raise ValueError(f"primitive '{name}' takes {PRIMITIVES.get(name)} operands, given {len(args)}")
    return Expr(name, tuple(_as_expr(a) for a in args))


def _unary(name: str) -> Callable[[Expr], Expr]:
    return lambda x: _prim(name, x)


def _binary(name: str) -> Callable[[Expr, Expr], Expr]:
    return lambda x, y: _prim(name, x, y)


neg, abs_, exp, expm1, log, log1p, sqrt, rsqrt, tanh, erf = map(_unary, (
    "neg", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "tanh", "erf"))
isnan, isinf, logical_not, bitwise_not = map(_unary, ("isnan", "isinf", "not", "bitwise_not"))
maximum, minimum, power, fmod, remainder = map(_binary, ("max", "min", "pow", "fmod", "remainder"))
eq, ne = _binary("eq"), _binary("ne")


def primitive(name: str, *args: Expr | Number) -> Expr:
    """Any primitive by name (the formula of an op that is one primitive)."""
    return _prim(name, *args)


def where(cond: Expr, on_true: Expr | Number, on_false: Expr | Number) -> Expr:
    return _prim("where", cond, on_true, on_false)


def clamp(x: Expr, lo: Expr | Number | None, hi: Expr | Number | None) -> Expr:
    """x clamped by comparisons, each bound optional: NaN stays NaN, as in torch.clamp."""
    out = x
    if lo is not None:
        out = where(out < lo, lo, out)
    if hi is not None:
        out = where(out > hi, hi, out)
    return out


SQRT1_2 = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


# ---------------------------------------------------------------- typed steps


@dataclass(frozen=True)
class Step:
    """One step of a formula in order of evaluation: `op` a primitive, "operand" (`value`: its index)
    or "const" (`value`: the number, of `dtype`); `args` index earlier steps."""

    op: str
    args: tuple[int, ...]
    dtype: str
    value: Any = None


def steps(expr: Expr, operand_dtypes: Sequence[str]) -> list[Step]:
    """The formula as typed steps, the result last. A subtree used twice is one step. What only
    numbers decide (sign's `where(x > 0, 1, where(x < 0, -1, 0))`) has the first operand's type."""
    out: list[Step] = []
    done: dict[tuple[int, str | None], int] = {}

    def typed(e: Expr) -> str | None:
        """The type of `e` without context: None for a number or what only numbers decide."""
        if e.op == "operand":
            return operand_dtypes[e.value]
        if e.op == "const":
            return None
        if e.op in PREDICATES:
            return "i1"
        parts = e.args[1:] if e.op == "where" else e.args
        return next((t for t in map(typed, parts) if t is not None), None)

    def visit(e: Expr, want: str | None) -> int:
        key = (id(e), want if e.op == "const" else None)
        if key in done:
            return done[key]
        if e.op == "operand":
            out.append(Step("operand", (), operand_dtypes[e.value], e.value))
        elif e.op == "const":
            if want is None:
                raise ValueError("a formula's number has no type: give it an operand to meet")
            out.append(Step("const", (), want, _typed_number(e.value, want)))
        else:
            if e.op == "where":
                branch = typed(e) or want
                args = (visit(e.args[0], "i1"), visit(e.args[1], branch), visit(e.args[2], branch))
                dtype = branch
            else:
                inner = next((t for t in map(typed, e.args) if t is not None), None)
                inner = inner or (want if e.op not in PREDICATES else None)
                args = tuple(visit(a, inner) for a in e.args)
                dtype = "i1" if e.op in PREDICATES else inner
            if dtype is None:
                raise ValueError(f"the type of '{e.op}' in a formula is not known")
            out.append(Step(e.op, args, dtype))
        done[key] = len(out) - 1
        return done[key]

    visit(expr, typed(expr) or (operand_dtypes[0] if operand_dtypes else None))
    return out


def _typed_number(value: Number, dtype: str) -> Number:
    if dtype == "i1":
        return bool(value)
    if dtypes.is_integer(dtype):
        return int(value)
    return float(value)


def primitives_of(expr: Expr) -> frozenset[str]:
    """The primitives a formula uses."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.op not in ("operand", "const"):
            found.add(e.op)
        stack.extend(e.args)
    return frozenset(found)


# ---------------------------------------------------------------- evaluation with torch


def torch_primitives() -> dict[str, Callable]:
    """Each primitive as a torch function (what `evaluate` computes a formula with)."""
    import torch

    def div(x, y):
        return torch.div(x, y) if x.is_floating_point() else torch.div(x, y, rounding_mode="trunc")

    return {
        "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "expm1": torch.expm1, "log": torch.log,
        "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh, "erf": torch.erf,
        "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
        "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh,
        "atanh": torch.atanh, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
        "isnan": torch.isnan, "isinf": torch.isinf, "not": torch.logical_not, "bitwise_not": torch.bitwise_not,
        "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": div, "max": torch.maximum,
        "min": torch.minimum, "pow": torch.pow, "fmod": torch.fmod, "remainder": torch.remainder,
        "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
        "shift_left": torch.bitwise_left_shift, "shift_right": torch.bitwise_right_shift,
        "and": torch.logical_and, "or": torch.logical_or, "xor": torch.logical_xor, "eq": torch.eq, "ne": torch.ne,
        "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "where": torch.where,
    }


def evaluate(formula: Formula, attrs: dict, *tensors: Any) -> Any:
    """The formula computed with torch on `tensors`, step by step in their types (numbers as 0-d
    tensors of the type they take)."""
    import torch

    names = [dtypes.from_torch(t.dtype) for t in tensors]
    prims = torch_primitives()
    values: list[Any] = []
    for s in steps(formula(attrs, *(operand(i, t) for i, t in enumerate(names))), names):
        if s.op == "operand":
            values.append(tensors[s.value])
        elif s.op == "const":
            values.append(torch.tensor(s.value, dtype=dtypes.to_torch(s.dtype), device=tensors[0].device))
        else:
            values.append(prims[s.op](*(values[a] for a in s.args)))
    return values[-1]
