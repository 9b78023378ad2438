"""The entry signature: what the inputs must look like, checked before anything runs.

An input's shape is a list of dims: an int (fixed), a symbol name (any size, but the same
everywhere the symbol appears, across all inputs), or "?" (any size). Guards are conditions
over the symbols (`"H % 2 == 0"`), written by the shape solver; they are parsed once, at load
time, by the dim grammar of sdc/dialect/symexpr.py into a small safe evaluator (integers,
+ - * // %, comparisons, and/or/not; no eval()).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect import symexpr
from sdc.limits import check_alloc
from sdc.dialect.symexpr import SymExprError
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # `sdc inspect` formats shapes without it

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

Expr = Callable[[Mapping[str, int]], Any]


@dataclass(frozen=True)
class Guard:
    condition: str
    message: str
    symbols: tuple[str, ...]
    check: Expr
    shape: "GuardShape | None" = None  # the recognized form, for messages in the inputs' terms

    def __str__(self) -> str:
        return f"{self.condition}" + (f"  ({self.message})" if self.message else "")


@dataclass(frozen=True)
class GuardShape:
    """A guard of a form the shape solver writes, taken apart.

    kind "equal": `X == Y`; "define": `X == expr`; "bound": `X >= lo`, `X <= hi`, `lo <= X <= hi`;
    "congruence": `X % m == r`.
    """

    kind: str
    symbol: str
    other: str | None = None  # equal: Y
    expr: Expr | None = None  # define: the right side
    expr_text: str = ""
    lo: int | None = None
    hi: int | None = None
    modulus: int = 1
    residue: int = 0


def parse_guard(condition: str, message: str = "") -> Guard:
    """Compile a guard condition (sdc/dialect/symexpr.py's condition grammar); raises ValueError on
    anything but integer arithmetic over symbols."""
    try:
        tree = symexpr.parse_condition(condition)
    except SymExprError as e:
        if e.token:
            raise ValueError(f"guard '{condition}' uses '{e.token}': only {symexpr.ALLOWED_IN_CONDITIONS} "
                             "are allowed") from None
        raise ValueError(f"guard '{condition}' is not an expression ({e.reason}): only "
                         f"{symexpr.ALLOWED_IN_CONDITIONS} are allowed") from None
    return Guard(condition, message, symexpr.free_symbols(tree), symexpr.evaluator(tree), _shape(tree))


def _int(node: symexpr.Node) -> int | None:
    return node.value if isinstance(node, symexpr.Int) else None


def _shape(node: symexpr.Node) -> GuardShape | None:
    if not isinstance(node, symexpr.Compare):
        return None
    terms, ops = node.terms, node.ops
    Sym = symexpr.Sym
    if ops == ("==",) and isinstance(terms[0], Sym):
        lhs, rhs = terms
        if isinstance(rhs, Sym):
            return GuardShape("equal", lhs.name, other=rhs.name)
        return GuardShape("define", lhs.name, expr=symexpr.evaluator(rhs), expr_text=symexpr.to_text(rhs))
    first = terms[0]
    if ops == ("==",) and isinstance(first, symexpr.BinOp) and first.op == "%" and isinstance(first.lhs, Sym) and \
            _int(first.rhs) and _int(terms[1]) is not None:
        return GuardShape("congruence", first.lhs.name, modulus=_int(first.rhs), residue=_int(terms[1]))
    if ops == ("<=", "<=") and isinstance(terms[1], Sym) and _int(terms[0]) is not None and \
            _int(terms[2]) is not None:
        return GuardShape("bound", terms[1].name, lo=_int(terms[0]), hi=_int(terms[2]))
    if len(ops) == 1 and isinstance(first, Sym) and _int(terms[1]) is not None:
        if ops[0] == ">=":
            return GuardShape("bound", first.name, lo=_int(terms[1]))
        if ops[0] == "<=":
            return GuardShape("bound", first.name, hi=_int(terms[1]))
    return None


# ---------------------------------------------------------------- binding inputs


@dataclass
class BoundInputs:
    tensors: list[torch.Tensor]
    symbols: dict[str, int]
    as_torch: bool


CHECKED_CAPACITY = 64  # input signatures whose checks `Signature.bind` remembers


class Signature:
    """Checks call arguments against the entry inputs and binds the symbolic dims."""

    def __init__(self, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo], guards: Sequence[Guard]):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.guards = list(guards)
        self._index = {t.name: i for i, t in enumerate(self.inputs)}
        # The symbols of input signatures already checked (`_checked_key`), oldest first.
        self._checked: dict[tuple, dict[str, int]] = {}
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
        values = args if not named and len(args) == len(self.inputs) else self._arrange(args, named)
        key = self._checked_key(values, device)
        if key is not None:
            symbols = self._checked.get(key)
            if symbols is not None:  # (a loop, not comprehensions: this is every call's path)
                tensors, as_torch = [], False
                for info, v in zip(self.inputs, values):
                    if type(v) is torch.Tensor:
                        tensors.append(v)
                        as_torch = True
                    else:
                        tensors.append(_from_numpy(info.name, v))
                return BoundInputs(tensors, dict(symbols), as_torch)
        as_torch = any(isinstance(v, torch.Tensor) for v in values)
        tensors = [self._tensor(info, v, device) for info, v in zip(self.inputs, values)]
        symbols = self._symbols(tensors)
        self._check_guards(symbols)
        if key is not None:
            if len(self._checked) >= CHECKED_CAPACITY:
                self._checked.pop(next(iter(self._checked)))
            self._checked[key] = dict(symbols)
        return BoundInputs(tensors, symbols, as_torch)

    def _checked_key(self, values: Sequence[Any], device: torch.device) -> tuple | None:
        """What decides a call's checks, for inputs that are torch tensors or numpy arrays: every check
        of `bind` (count, device, dtype, shape, guards) depends on their types, shapes, dtypes and
        device only, so a signature that passed once passes again with the same symbols. That saves a
        small model's call, or a CUDA-graph replay, most of its host time. None (check in full) for
        anything else, and for broadcast views (stride 0), whose size check reads the strides."""
        if len(values) != len(self.inputs):
            return None
        key = []
        for v in values:
            kind = type(v)
            if kind is torch.Tensor:
                if v.device != device or 0 in v.stride():
                    return None
                key.append((0, v.shape, v.dtype))
            elif kind is np.ndarray:
                if 0 in v.strides:
                    return None
                key.append((1, v.shape, v.dtype))
            else:
                return None
        return tuple(key)

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
            got = dtypes.from_torch(t.dtype) if dtypes.is_torch_known(t.dtype) else str(t.dtype).replace("torch.", "")
        else:
            try:
                array = np.asarray(value)
            except (ValueError, TypeError, OverflowError) as e:
                raise SdcError(f"input '{info.name}' is not an array: {e}") from None
            try:
                got = dtypes.from_numpy(array.dtype)
            except (KeyError, TypeError, ValueError):
                got = str(array.dtype)
            t = None
        if got != info.dtype:
            raise SdcError(f"input '{info.name}' has dtype {got}, expected {info.dtype}")
        shape = tuple(t.shape if t is not None else array.shape)
        if len(shape) != info.rank or any(isinstance(w, int) and w != g for g, w in zip(shape, info.shape)):
            raise SdcError(f"input '{info.name}' has shape {format_shape(shape)}, expected {info.shape_str()}")
        strides = t.stride() if t is not None else array.strides
        if any(s == 0 for s, n in zip(strides, shape) if n > 1):
            # A broadcast view (stride 0) declares more data than it holds; the kernels will
            # materialize it, so its logical size must fit the limit.
            itemsize = t.element_size() if t is not None else array.itemsize
            check_alloc(_numel(shape) * itemsize, f"input '{info.name}' (a broadcast view of shape "
                                                  f"{format_shape(shape)})")
        if t is None:
            t = _from_numpy(info.name, array)
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
            if not guard_holds(g, symbols):
                raise SdcError(self.violation(g, symbols))

    def _dim(self, symbol: str, symbols: Mapping[str, int]) -> tuple[str, str]:
        """(input name, `dim D = V`) of the input dim that binds `symbol`."""
        name, d = self.binders[symbol]
        return name, f"dim {d} = {symbols[symbol]}"

    def violation(self, g: Guard, symbols: Mapping[str, int]) -> str:
        """What a broken guard means for the inputs: which input dims, and the relation they break."""
        why = f" ({g.condition}: {g.message})" if g.message else f" ({g.condition})"
        shape = g.shape
        if shape is not None and shape.kind == "equal":
            first, second = sorted((shape.symbol, shape.other),
                                   key=lambda s: (self._index[self.binders[s][0]], self.binders[s][1]))
            (a, da), (b, db) = self._dim(first, symbols), self._dim(second, symbols)
            if a == b:
                ia, ib = self.binders[first][1], self.binders[second][1]
                return (f"input '{a}' dims {ia} (= {symbols[first]}) and {ib} (= {symbols[second]}) "
                        f"must be equal{why}")
            return f"inputs '{a}' ({da}) and '{b}' ({db}) must be equal{why}"
        if shape is not None and shape.kind == "define":
            a, da = self._dim(shape.symbol, symbols)
            others = sorted((s for s in g.symbols if s != shape.symbol),
                            key=lambda s: (self._index[self.binders[s][0]], self.binders[s][1]))
            value = _safe(shape.expr, symbols)
            where = "; ".join(f"{s} is input '{self.binders[s][0]}' dim {self.binders[s][1]} = {symbols[s]}"
                              for s in others)
            return (f"input '{a}' ({da}) must equal {shape.expr_text} = {value}"
                    + (f", where {where}" if where else "") + why)
        if shape is not None and shape.kind == "bound":
            a, da = self._dim(shape.symbol, symbols)
            if shape.lo is not None and shape.hi is not None:
                rule = f"be between {shape.lo} and {shape.hi}"
            elif shape.lo is not None:
                rule = f"be at least {shape.lo}"
            else:
                rule = f"be at most {shape.hi}"
            return f"input '{a}' ({da}) must {rule}{why}"
        if shape is not None and shape.kind == "congruence":
            a, da = self._dim(shape.symbol, symbols)
            rule = (f"be a multiple of {shape.modulus}" if shape.residue == 0
                    else f"leave {shape.residue} when divided by {shape.modulus}")
            return f"input '{a}' ({da}) must {rule}{why}"
        bound = ", ".join(f"{s} = {symbols[s]} from input '{self.binders[s][0]}' dim {self.binders[s][1]}"
                          for s in g.symbols)
        reason = f": {g.message}" if g.message else ""
        return f"inputs break the guard '{g.condition}'{reason} ({bound})"


def _numel(shape: Sequence[int]) -> int:
    total = 1
    for n in shape:
        total *= int(n)
    return total


def _from_numpy(name: str, array: np.ndarray) -> torch.Tensor:
    """A torch view of a checked numpy input, copying only where torch needs it: byte order not
    the machine's (torch has no big-endian tensors), read-only memory, negative strides."""
    # (the common case first; numpy calls a size-1 dim of negative stride C-contiguous, torch refuses it)
    if array.dtype.isnative and array.flags.writeable and (not array.strides or min(array.strides) >= 0):
        return torch.from_numpy(array)
    if not array.dtype.isnative:
        check_alloc(array.size * array.itemsize, f"input '{name}' (converted to native byte order)")
        array = array.astype(array.dtype.newbyteorder("="))
    if not array.flags.writeable or any(s < 0 for s in array.strides):
        check_alloc(array.size * array.itemsize, f"input '{name}' (copied: read-only or negative strides)")
        array = array.copy()
    return torch.from_numpy(array)


def guard_holds(g: Guard, symbols: Mapping[str, int]) -> bool:
    try:
        return bool(g.check(symbols))
    except ZeroDivisionError:
        return False


def _safe(expr: Expr | None, symbols: Mapping[str, int]):
    try:
        return expr(symbols) if expr is not None else "?"
    except ZeroDivisionError:
        return "undefined"


def fit_to_guards(sizes: dict[str, int], guards: Sequence[Guard], fixed: set[str] = frozenset(),
                  rounds: int = 8) -> dict[str, int]:
    """Adjust symbol sizes (for random inputs) until they pass the guards the solver writes: a
    defined symbol takes its definition's value, a bounded one is clamped, a congruence rounds up.
    Sizes in `fixed` stay. Returns the sizes (possibly still breaking guards of other forms)."""
    sizes = dict(sizes)
    for _ in range(rounds):
        changed = False
        for g in guards:
            if guard_holds(g, sizes) or g.shape is None:
                continue
            s = g.shape
            target = s.symbol if s.symbol not in fixed else None
            if s.kind == "equal":
                if target is not None:
                    sizes[target] = sizes[s.other]
                elif s.other not in fixed:
                    sizes[s.other] = sizes[s.symbol]
                else:
                    continue
            elif target is None:
                continue
            elif s.kind == "define":
                value = _safe(s.expr, sizes)
                if not isinstance(value, int) or value < 0:
                    continue
                sizes[target] = value
            elif s.kind == "bound":
                value = sizes[target]
                if s.lo is not None:
                    value = max(value, s.lo)
                if s.hi is not None:
                    value = min(value, s.hi)
                sizes[target] = value
            elif s.kind == "congruence":
                sizes[target] += (s.residue - sizes[target]) % s.modulus
            changed = True
        if not changed:
            break
    return sizes


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
