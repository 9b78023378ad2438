"""The entry signature: what the inputs must look like, checked before anything runs.

An input's shape is a list of dims: an int (fixed), a symbol name (any size, but the same
everywhere the symbol appears, across all inputs), or "?" (any size). Guards are conditions
over the symbols (`"H % 2 == 0"`), written by the shape solver; they are parsed once, at load
time, into a small safe evaluator (integers, + - * // %, comparisons, and/or/not).
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from sdc import dtypes
from sdc.diagnostics import SdcError

UNKNOWN = "?"


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of an executable: name, element type and symbolic shape."""

    name: str
    dtype: str
    shape: tuple  # ints, symbol names, or "?"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def symbols(self) -> list[str]:
        return [d for d in self.shape if isinstance(d, str) and d != UNKNOWN]

    def shape_str(self) -> str:
        return format_shape(self.shape)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{format_shape(self.shape)}"


def format_shape(shape: Sequence) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


# ---------------------------------------------------------------- guards

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}

Expr = Callable[[Mapping[str, int]], Any]


@dataclass(frozen=True)
class Guard:
    condition: str
    message: str
    symbols: tuple[str, ...]
    check: Expr

    def __str__(self) -> str:
        return f"{self.condition}" + (f"  ({self.message})" if self.message else "")


def parse_guard(condition: str, message: str = "") -> Guard:
    """Compile a guard condition; raises ValueError on anything but integer arithmetic over symbols."""
    try:
        tree = ast.parse(condition, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"guard '{condition}' is not an expression: {e.msg}") from None
    names: list[str] = []
    check = _compile(tree.body, condition, names)
    return Guard(condition, message, tuple(dict.fromkeys(names)), check)


def _compile(node: ast.AST, text: str, names: list[str]) -> Expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        value = node.value
        return lambda env: value
    if isinstance(node, ast.Name):
        name = node.id
        names.append(name)
        return lambda env: env[name]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        inner = _compile(node.operand, text, names)
        if isinstance(node.op, ast.USub):
            return lambda env: -inner(env)
        return lambda env: not inner(env)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        fn, lhs, rhs = _BINARY[type(node.op)], _compile(node.left, text, names), _compile(node.right, text, names)
        return lambda env: fn(lhs(env), rhs(env))
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v, text, names) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda env: all(p(env) for p in parts)
        return lambda env: any(p(env) for p in parts)
    if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
        first = _compile(node.left, text, names)
        rest = [(_COMPARE[type(o)], _compile(c, text, names)) for o, c in zip(node.ops, node.comparators)]

        def compare(env):
            lhs = first(env)
            for fn, term in rest:
                rhs = term(env)
                if not fn(lhs, rhs):
                    return False
                lhs = rhs
            return True

        return compare
    raise ValueError(f"guard '{text}' uses '{ast.unparse(node)}': only integers, symbol names, "
                     "+ - * // %, comparisons and and/or/not are allowed")


# ---------------------------------------------------------------- binding inputs


@dataclass
class BoundInputs:
    tensors: list[torch.Tensor]
    symbols: dict[str, int]
    as_torch: bool


class Signature:
    """Checks call arguments against the entry inputs and binds the symbolic dims."""

    def __init__(self, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo], guards: Sequence[Guard]):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.guards = list(guards)
        self._index = {t.name: i for i, t in enumerate(self.inputs)}
        # Where each symbol is first bound, for messages: symbol -> (input name, dim).
        self.binders: dict[str, tuple[str, int]] = {}
        for t in self.inputs:
            for d, dim in enumerate(t.shape):
                if isinstance(dim, str) and dim != UNKNOWN:
                    self.binders.setdefault(dim, (t.name, d))
        for g in self.guards:
            unbound = [s for s in g.symbols if s not in self.binders]
            if unbound:
                raise ValueError(f"guard '{g.condition}' uses symbol '{unbound[0]}', which no input binds")

    def bind(self, args: Sequence[Any], named: Mapping[str, Any], device: torch.device) -> BoundInputs:
        values = self._arrange(args, named)
        as_torch = any(isinstance(v, torch.Tensor) for v in values)
        tensors = [self._tensor(info, v, device) for info, v in zip(self.inputs, values)]
        symbols = self._symbols(tensors)
        self._check_guards(symbols)
        return BoundInputs(tensors, symbols, as_torch)

    def _arrange(self, args: Sequence[Any], named: Mapping[str, Any]) -> list[Any]:
        n = len(self.inputs)
        if len(args) > n:
            raise SdcError(f"expected {n} input{'s' if n != 1 else ''} ({self._names()}), got {len(args)}")
        values: list[Any] = list(args) + [_MISSING] * (n - len(args))
        for name, value in named.items():
            if name not in self._index:
                raise SdcError(f"unknown input '{name}' (inputs: {self._names() or 'none'})")
            i = self._index[name]
            if values[i] is not _MISSING:
                raise SdcError(f"input '{name}' given twice (by position and by name)")
            values[i] = value
        for info, value in zip(self.inputs, values):
            if value is _MISSING:
                raise SdcError(f"missing input '{info.name}' ({info.dtype}{info.shape_str()})")
        return values

    def _names(self) -> str:
        return ", ".join(t.name for t in self.inputs)

    @staticmethod
    def _tensor(info: TensorInfo, value: Any, device: torch.device) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            t = value
            if t.device != device:
                raise SdcError(f"input '{info.name}' is on {t.device}, this executable runs on {device}")
            got = dtypes.from_torch(t.dtype) if t.dtype in _TORCH_DTYPES else str(t.dtype).replace("torch.", "")
        else:
            try:
                array = np.asarray(value)
            except ValueError as e:
                raise SdcError(f"input '{info.name}' is not an array: {e}") from None
            try:
                got = dtypes.from_numpy(array.dtype)
            except KeyError:
                got = str(array.dtype)
            t = None
        if got != info.dtype:
            raise SdcError(f"input '{info.name}' has dtype {got}, expected {info.dtype}")
        if t is None:
            if not array.flags.writeable or any(s < 0 for s in array.strides):
                array = array.copy()  # torch wants writable arrays with non-negative strides
            t = torch.from_numpy(array)
        shape = tuple(t.shape)
        if len(shape) != info.rank or any(isinstance(w, int) and w != g for g, w in zip(shape, info.shape)):
            raise SdcError(f"input '{info.name}' has shape {format_shape(shape)}, expected {info.shape_str()}")
        return t

    def _symbols(self, tensors: list[torch.Tensor]) -> dict[str, int]:
        symbols: dict[str, int] = {}
        where: dict[str, tuple[str, int]] = {}
        for info, t in zip(self.inputs, tensors):
            for d, dim in enumerate(info.shape):
                if not isinstance(dim, str) or dim == UNKNOWN:
                    continue
                size = int(t.shape[d])
                if dim not in symbols:
                    symbols[dim], where[dim] = size, (info.name, d)
                    continue
                if symbols[dim] != size:
                    first, fd = where[dim]
                    if first == info.name:
                        raise SdcError(f"input '{info.name}' dims {fd} (= {symbols[dim]}) and {d} (= {size}) "
                                       f"must be equal (both are '{dim}')")
                    raise SdcError(f"inputs '{first}' (dim {fd} = {symbols[dim]}) and '{info.name}' "
                                   f"(dim {d} = {size}) must be equal (both are '{dim}')")
        return symbols

    def _check_guards(self, symbols: dict[str, int]) -> None:
        for g in self.guards:
            try:
                ok = bool(g.check(symbols))
            except ZeroDivisionError:
                ok = False
            if ok:
                continue
            bound = ", ".join(f"{s} = {symbols[s]} from input '{self.binders[s][0]}' dim {self.binders[s][1]}"
                              for s in g.symbols)
            reason = f": {g.message}" if g.message else ""
            raise SdcError(f"inputs break the guard '{g.condition}'{reason} ({bound})")


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
_TORCH_DTYPES = {dtypes.to_torch(n) for n in dtypes.ELEMENT_TYPES}
