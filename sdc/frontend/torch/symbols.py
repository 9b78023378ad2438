"""torch.export's symbolic sizes as sdc dims: names for torch's symbols, their ranges as guards.

torch.export names every dynamic size with a fresh symbol (`s77`) and keeps the user's `Dim` names
only in the `dynamic_shapes` argument. `SymbolNames` gives each torch symbol the name of its `Dim`
(`Dim("seq")` -> `seq`, the root of a derived `2*seq` -> `seq`), or `<input>_<dim>` (the ONNX
importer's convention) when it has none, and `to_sdc` rewrites a size expression of torch's sympy
(with its `FloorDiv`, `Mod`, `PowByNatural`, ...) into the frontends' sympy dims over those names
(built through sdc/dialect/symbolic.py), which the Builder prints in the dim grammar
(`sdc/dialect/symexpr.py`). `range_guards` turns
`ExportedProgram.range_constraints` into `#sdc.guard` conditions that the shape pass reads back as
constraints (docs/shapes.md), so the artifact refuses at run time what torch.export would refuse.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch.utils._sympy import functions as tfn  # torch's size-expression classes, read here only

from sdc.dialect import symbolic
from sdc.dialect.shapes import ShapeError
from sdc.frontend.values import symbol_name


def size_expr(value: Any) -> Any:
    """The sympy expression (or int) of a torch size: an int, a SymInt, or already an expression."""
    if isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return value.node.expr
    return value


class SymbolNames:
    """torch symbol -> sdc dim name, assigned once per import; `to_sdc` translates expressions."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}  # torch's sympy symbols
        self._taken: set[str] = set()
        self._symbols: dict[str, Any] = {}

    def name(self, symbol: Any, name: str) -> None:
        """Give `symbol` the name `name` (a user's Dim name), unless it has one already."""
        if symbol in self.names:
            return
        base = symbol_name(name)
        unique, k = base, 1
        while unique in self._taken:
            k += 1
            unique = f"{base}_{k}"
        self.names[symbol] = unique
        self._taken.add(unique)

    def sdc_symbol(self, symbol: Any) -> Any:
        name = self.names.get(symbol)
        if name is None:
            raise ShapeError(f"size symbol {symbol} has no name (it is not a dim of any input)")
        s = self._symbols.get(name)
        if s is None:
            s = self._symbols[name] = symbolic.size_symbol(name)
        return s

    def to_sdc(self, expr: Any) -> Any:
        """A torch size expression as an int or a sympy expression over sdc names."""
        expr = size_expr(expr)
        if isinstance(expr, int):
            return expr
        if not symbolic.is_symbolic(expr):
            raise ShapeError(f"not a size: {expr!r}")
        out = self._convert(expr)
        out = symbolic.simplify(out) if not out.is_Atom else out
        return int(out) if out.is_Integer else out

    def _convert(self, e: Any) -> Any:
        if e.is_Integer:
            return symbolic.integer(int(e))
        if e.is_Symbol:
            return self.sdc_symbol(e)
        args = [self._convert(a) for a in e.args]
        if e.is_Add:
            return symbolic.add(*args)
        if e.is_Mul:
            return symbolic.mul(*args)
        if (isinstance(e, tfn.PowByNatural) or e.is_Pow) and args[1].is_Integer and int(args[1]) >= 0:
            return args[0] ** int(args[1])
        if isinstance(e, tfn.FloorDiv):
            return symbolic.floor_div(args[0], args[1])
        if isinstance(e, tfn.CeilDiv):
            return -symbolic.floor_div(-args[0], args[1])
        if isinstance(e, (tfn.Mod, tfn.PythonMod)):
            return symbolic.mod(args[0], args[1])
        raise ShapeError(f"the size expression {e} ({type(e).__name__}) is not expressible as an sdc dim")


def name_input_dims(names: SymbolNames, inputs: Iterable[tuple[str, Any, Any]]) -> None:
    """Name torch's symbols from the user's `Dim`s first, then `<input>_<dim>` for the rest.

    `inputs`: (input name, example value (a FakeTensor), its dynamic_shapes entry or None).
    """
    inputs = list(inputs)
    for _, fake, spec in inputs:
        for d, dim in _spec_dims(spec, fake):
            expr = size_expr(fake.shape[d])
            if not symbolic.is_symbolic(expr) or expr.is_Integer:
                continue
            root = getattr(dim, "root", None)  # a derived Dim (2*seq) names its root's symbol
            dim_name = getattr(root if root is not None else dim, "__name__", None)
            if dim_name and len(expr.free_symbols) == 1 and (expr.is_Symbol or root is not None):
                names.name(next(iter(expr.free_symbols)), dim_name)
    for input_name, fake, _ in inputs:
        for d, size in enumerate(fake.shape):
            expr = size_expr(size)
            if symbolic.is_symbolic(expr):
                for s in sorted(expr.free_symbols, key=str):
                    names.name(s, f"{input_name}_{d}")


def _spec_dims(spec: Any, fake: Any) -> list[tuple[int, Any]]:
    """(dim index, Dim) pairs of one tensor's dynamic_shapes entry: {0: Dim} or (Dim, None, ...)."""
    if not isinstance(fake, torch.Tensor) or spec is None:
        return []
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = list(enumerate(spec))
    else:
        return []
    return [(int(d) % max(fake.dim(), 1), dim) for d, dim in items if dim is not None and isinstance(d, int)]


def range_guards(names: SymbolNames, range_constraints: dict) -> list[tuple[str, str]]:
    """(condition, message) for each named symbol's range that says more than `>= 1`."""
    guards = []
    for symbol, vr in range_constraints.items():
        if not (symbolic.is_symbolic(symbol) and symbol.is_Symbol) or symbol not in names.names:
            continue
        name = names.names[symbol]
        lo = max(1, int(vr.lower)) if _is_int(vr.lower) else 1
        hi = int(vr.upper) if _is_int(vr.upper) else None  # torch's int_oo says "finite" but is no int
        bound = f"[{lo}, {hi if hi is not None else 'inf'}]"
        message = f"torch.export range of dim '{name}': {bound}"
        if hi is not None:
            guards.append((f"{lo} <= {name} <= {hi}", message))
        elif lo > 1:
            guards.append((f"{name} >= {lo}", message))
    return guards


def _is_int(bound: Any) -> bool:
    return symbolic.is_integer_value(bound)
