"""sdc-shape-constraints: solve each function's symbolic dims (the language is in docs/shapes.md).

Reading: entry arguments give the symbols (their `sdc.dims` names; a dynamic dim without one
gets a fresh name, `<input>_<dim>`), `input-shape` binds or bounds them, and every op's
shape rule runs over symbolic dims with a `RecordingContext`, whose `equal` / `divisible` /
`positive` / `broadcast` / `slice_len` / `exact_div` / `window` add constraints to a
`ShapeConstraintSet` (sdc/transforms/shape_solver.py) tied to the op. A result type that
declares a static dim the rule leaves symbolic adds that equality too.

Writing back, after `solve()`:
- every value's type gets each dim the solver proved static; `shape` attributes holding
  dim expressions are rewritten in the canonical symbols;
- an sdc op whose results keep symbolic dims records them: `sdc.result_dims = [#sdc.dims<...>]`
  (one per result); entry arguments and results get `sdc.dims`;
- the function records `sdc.relations` (every relation established, as text) and
  `sdc.guards` (the conditions left for run time, `#sdc.guard<"M == N", "why">`), which the
  artifact's manifest carries and the runtime checks before running.

A contradiction is an error at the op whose constraint closed it, with a note at each op
(or input) whose constraint takes part. Recorded guards are read back as constraints, so the
pass can run again on its own output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from sdc.diagnostics import DiagnosticSink
from sdc.dialect import attrs as A
from sdc.dialect.attrs import AttrError
from sdc.dialect import symexpr
from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, arg_dims, arg_names, attr_dicts, module_mesh, op_label, read_attrs,
                            set_attr_dicts, tensor_spec, tensor_type)
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import OPS
from sdc.dialect.bindings import ShapeBinding, parse_bindings
from sdc.dialect.shapes import DYN, ShapeContext, ShapeError, TensorSpec, is_static, window_out
from sdc.dialect.symbolic import Expr, SolverError, parse
from sdc.mlir import ir
from sdc.transforms.base import ModulePass, PassOptionError, walk_ops
from sdc.transforms.shape_solver import Condition, Constraint, Contradiction, ShapeConstraintSet, Solution

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SLICE_END = 1 << 62  # an end at least this large means "to the end"
MAX_NESTING = 12  # a dim whose floors nest deeper becomes an unknown (opaque) size


# ---------------------------------------------------------------- origins


@dataclass(frozen=True, eq=False)
class InputDim:
    """The origin of an input's symbol: the function and the input's dim."""

    fn: Any
    input: str
    dim: int

    @property
    def location(self):
        return self.fn.location

    def __str__(self) -> str:
        return f"input '{self.input}' dim {self.dim}"


@dataclass(frozen=True, eq=False)
class FunctionLevel:
    """A constraint the function itself states (an --input-shape bound, a recorded guard)."""

    fn: Any
    what: str
    recorded: bool = False  # a guard an earlier run recorded (its reason is that guard's message)

    @property
    def location(self):
        return self.fn.location

    def __str__(self) -> str:
        return self.what


def where(origin) -> str:
    """A constraint's origin in words: `'sdc.add' at f.mlir:3:8`, `input 'x' dim 0`, ..."""
    if origin is None:
        return ""
    if isinstance(origin, (InputDim, FunctionLevel)):
        return str(origin)
    return op_label(origin)


# ---------------------------------------------------------------- the recording context


class RecordingContext(ShapeContext):
    """Shape rules' context over symbolic dims: relations become constraints of `cs`, tied to `op`."""

    def __init__(self, cs: ShapeConstraintSet, mesh: dict[str, int] | None = None):
        self.cs = cs
        self.mesh = mesh
        self.op: Any = None

    def _symbolic(self, *dims) -> bool:
        return any(not is_static(d) for d in dims) and not any(d is DYN for d in dims)

    def equal(self, a, b, message: str):
        if not self._symbolic(a, b):
            return super().equal(a, b, message)
        if Expr.of(a) != Expr.of(b):
            self.cs.add_equal(a, b, origin=self.op, reason=message.format(a=a, b=b))
        return a if is_static(a) else b if is_static(b) else a

    def divisible(self, a, b, message: str):
        if not self._symbolic(a, b):
            return super().divisible(a, b, message)
        if is_static(b) and b <= 0:
            return None
        self.cs.add_divisible(a, b, origin=self.op, reason=message.format(a=a, b=b))
        return None

    def positive(self, a, message: str):
        if not self._symbolic(a):
            return super().positive(a, message)
        self.cs.add_inequality(a, lo=1, origin=self.op, reason=message.format(a=a))
        return None

    def product(self, dims: Sequence):
        total: Any = 1
        for d in dims:
            if d is DYN:
                return DYN
            total = total * d
        return total

    def exact_div(self, a, b, message: str):
        if not self._symbolic(a, b):
            return super().exact_div(a, b, message)
        if is_static(b) and b <= 0:
            self.fail(message.format(a=a, b=b))
        self.divisible(a, b, message)
        return Expr.of(a).floordiv(Expr.of(b)).value()

    def window(self, size, k, stride: int, pad_begin: int, pad_end: int, dilation: int, ceil_mode: bool = False):
        if not self._symbolic(size, k):
            return window_out(size, k, stride, pad_begin, pad_end, dilation, ceil_mode)
        return self.cs.window(size, k, stride, pad_begin, pad_end, dilation, ceil_mode, origin=self.op,
                              reason=f"the window (kernel {k}, dilation {dilation}) must fit in the input of size "
                                     f"{size} padded by {pad_begin}+{pad_end}")

    def broadcast(self, *shapes: Sequence, names: Sequence[str] = ()) -> tuple:
        """numpy broadcasting, where a symbolic dim never stretches: it must equal the other non-1 dims."""
        rank = max((len(s) for s in shapes), default=0)
        out = []
        for i in range(rank):
            dims = [(k, s[len(s) - rank + i]) for k, s in enumerate(shapes) if len(s) - rank + i >= 0]
            live = [(k, d) for k, d in dims if not (is_static(d) and d == 1)]
            if not live:
                out.append(1)
                continue
            statics = {d for _, d in live if is_static(d)}
            if len(statics) > 1:
                super().broadcast(*shapes, names=names)  # reports the static mismatch
            known = [(k, d) for k, d in live if d is not DYN]
            if not known:
                out.append(DYN)
                continue
            first_k, first = next(((k, d) for k, d in known if is_static(d)), known[0])
            for k, d in known:
                if k == first_k or Expr.of(d) == Expr.of(first):
                    continue
                self.cs.add_equal(d, first, origin=self.op,
                                  reason=f"dim {i - rank + len(shapes[k])} of {_name(names, k)} ({d}) must equal "
                                         f"dim {i - rank + len(shapes[first_k])} of {_name(names, first_k)} ({first}) "
                                         f"to broadcast (a symbolic dim never stretches)")
            out.append(first)
        return tuple(out)

    def slice_len(self, size, start: int, end: int, step: int):
        """Slices whose bounds are clear (from the start or the end): their length, assuming the dim is long
        enough for the bounds, which becomes a constraint; other slices have an unknown length."""
        if size is DYN:
            return DYN
        s = Expr.of(size)
        to_end = end >= SLICE_END
        if step > 0:
            if start >= 0 and to_end:
                begin, stop, need = Expr.const(start), s, start
            elif start < 0 and to_end:
                begin, stop, need = s.plus(Expr.const(start)), s, -start
            elif start >= 0 > end:
                begin, stop, need = Expr.const(start), s.plus(Expr.const(end)), None
            elif start < 0 and end < 0:
                if end <= start:
                    return 0
                begin, stop, need = s.plus(Expr.const(start)), s.plus(Expr.const(end)), -start
            else:
                return self._unknown_slice(size, max(0, end - start) if start >= 0 else None)
            length = stop.plus(begin, -1)
            if need is not None:
                self.cs.add_inequality(s, lo=need, origin=self.op,
                                       reason=f"the slice {start}:{_end_text(end)}:{step} needs at least {need} "
                                              f"elements along a dim of size {size}")
            else:
                self.cs.add_inequality(length, lo=0, origin=self.op,
                                       reason=f"the slice {start}:{_end_text(end)}:{step} must not start past its end "
                                              f"along a dim of size {size}")
            return length.plus(Expr.const(step - 1)).floordiv(Expr.const(step)).value()
        whole_reversed = end <= -SLICE_END and (start == -1 or start >= SLICE_END)
        if whole_reversed:
            return s.plus(Expr.const(-step - 1)).floordiv(Expr.const(-step)).value()
        return self._unknown_slice(size, None)

    def _unknown_slice(self, size, at_most: int | None):
        u = self.cs.fresh(origin=self.op, reason=f"the length of a slice of a dim of size {size}")
        if at_most is not None:
            self.cs.add_inequality(u, hi=at_most, origin=self.op, reason="a slice is no longer than its bounds")
        return u


def _name(names: Sequence[str], k: int) -> str:
    return names[k] if k < len(names) else f"operand #{k}"


def _end_text(end: int) -> str:
    return "" if end >= SLICE_END else str(end)


# ---------------------------------------------------------------- the pass


@dataclass(frozen=True)
class ShapeConstraintsPass(ModulePass):
    """Options: `input-shape` (str, default none): bindings and bounds separated by spaces or ';':
    `NAME=DIMS` sets an entry argument's dims (by its `sdc.name`, else argN; ints, symbol names,
    `?`), `SYMBOL=LO..HI` bounds a symbol (`B=1..64`, `B=8..`, `B=..64`), `SYMBOL=N` fixes it."""

    name = "sdc-shape-constraints"
    summary = "solve symbolic dims: static types where provable, relations and run-time guards as attributes"
    input_shape: tuple[ShapeBinding, ...] | str = ()  # the text form is parsed once, here

    def __post_init__(self) -> None:
        if isinstance(self.input_shape, str):
            try:
                object.__setattr__(self, "input_shape", tuple(parse_bindings(self.input_shape)))
            except ValueError as e:
                raise PassOptionError(f"pass '{self.name}' option 'input-shape': {e}") from None

    def option_text(self, field_name: str, value) -> str:
        return " ".join(b.text() for b in value) if field_name == "input_shape" else super().option_text(field_name, value)

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        bindings = list(self.input_shape)
        fns = [fn for fn in walk_ops(module, "func.func") if fn.regions[0].blocks]
        if not _check_bindings(bindings, fns, diag):
            return
        for fn in fns:
            FunctionShapes(fn, bindings, diag).run()


def _check_bindings(bindings: Sequence[ShapeBinding], fns: list, diag: DiagnosticSink) -> bool:
    """Input dims must name an input of some function; anything else must be a symbol name."""
    if not fns:
        return True
    names = {n for fn in fns for n in arg_names(fn)}
    entry = next((fn for fn in fns if ir.StringAttr(fn.attributes["sym_name"]).value == "main"), fns[0])
    ok = True
    for b in bindings:
        if b.name in names:
            continue
        if b.dims is not None:
            known = ", ".join(f"'{n}'" for n in arg_names(entry)) or "none"
            diag.error(entry, f"--input-shape {b.text()}: no input is named '{b.name}' (inputs: {known})")
            ok = False
        elif not _NAME.match(b.name):
            diag.error(entry, f"--input-shape {b.text()}: '{b.name}' is neither an input nor a symbol name")
            ok = False
    return ok


class FunctionShapes:
    """One function: read the constraints in, solve, write the results back."""

    def __init__(self, fn: ir.Operation, bindings: Sequence[ShapeBinding], diag: DiagnosticSink):
        self.fn = fn
        self.block = fn.regions[0].blocks[0]
        self.bindings = list(bindings)
        self.diag = diag
        self.cs = ShapeConstraintSet()
        self.ctx = RecordingContext(self.cs, module_mesh(fn))
        self.dims: dict[Any, tuple] = {}
        self.rename: dict[str, Expr] = {}  # a symbol an --input-shape replaced -> what replaces it
        self.parsed: dict[str, Expr] = {}  # dim texts already read
        self.failed = False
        self.arg_dims: list[list] = []  # per argument: the dims to write to `sdc.dims` (before solving)

    # ------------------------------------------------------------ driver

    def run(self) -> None:
        if not self._needs_solving():
            return
        self._read_arguments()
        if self.failed:
            return
        self._read_recorded_guards()
        for op in list(self.block.operations):
            self._read_op(op.operation)
        if self.failed:
            return
        try:
            solution = self.cs.solve()
        except Contradiction as e:
            self._report(e)
            return
        Writer(self, solution).write()

    def _needs_solving(self) -> bool:
        if self.bindings:
            return True
        for arg in self.block.arguments:
            if _ranked(arg.type) and not ir.RankedTensorType(arg.type).has_static_shape:
                return True
        for op in self.block.operations:
            op = op.operation
            for r in op.results:
                if _ranked(r.type) and not ir.RankedTensorType(r.type).has_static_shape:
                    return True
        return False

    # ------------------------------------------------------------ reading

    def _symbol(self, name: str, origin) -> Expr:
        if name in self.rename:
            return self.rename[name]
        reason = f"{origin} is a size" if isinstance(origin, InputDim) else ""
        return self.cs.symbol(name, origin=origin, reason=reason)

    def _dim_text(self, text: str, origin) -> Expr:
        cached = self.parsed.get(text)
        if cached is None:
            cached = self.parsed[text] = parse(text, lambda n: self._symbol(n, origin))
        return cached

    def _read_arguments(self) -> None:
        names = arg_names(self.fn)
        annotated = arg_dims(self.fn, skip_bad=True)  # sdc-verify reports a malformed one
        by_name = {b.name: b for b in self.bindings if not b.is_range}
        used = set()
        # Renames first: a binding that names an argument's symbol differently renames it everywhere.
        for i, (arg, name) in enumerate(zip(self.block.arguments, names)):
            b = by_name.get(name)
            if b is None or not _ranked(arg.type):
                continue
            spec = tensor_spec(arg.type)
            dims = list(b.dims) if b.dims is not None else [b.value]
            if len(dims) != spec.rank:
                self._error(self.fn, f"--input-shape {b.text()} has {len(dims)} dims, input '{name}' has rank "
                                     f"{spec.rank}")
                continue
            for d, (given, declared) in enumerate(zip(dims, spec.shape)):
                if isinstance(given, int) and is_static(declared) and given != declared:
                    self._error(self.fn, f"--input-shape {b.text()}: input '{name}' dim {d} is {declared}, not {given}")
                old = annotated[i][d] if annotated[i] is not None else None
                if isinstance(old, str) and _NAME.match(old) and given != "?" and given != old:
                    self.rename[old] = Expr.const(given) if isinstance(given, int) else Expr.symbol(given)
            used.add(name)
        for i, (arg, name) in enumerate(zip(self.block.arguments, names)):
            if not _ranked(arg.type):
                self.arg_dims.append([])
                continue
            spec = tensor_spec(arg.type)
            b = by_name.get(name)
            given = (list(b.dims) if b.dims is not None else [b.value]) if b is not None else None
            if given is not None and len(given) != spec.rank:
                given = None
            ann = annotated[i]
            out, written = [], []
            for d, declared in enumerate(spec.shape):
                origin = InputDim(self.fn, name, d)
                g = given[d] if given is not None else None
                a = ann[d] if ann is not None and d < len(ann) else None
                if isinstance(g, int):
                    dim, text = g, g
                elif isinstance(g, str) and g != "?":
                    dim, text = self._symbol(g, origin), g
                elif is_static(declared):
                    dim, text = declared, declared
                elif isinstance(a, int):
                    dim, text = a, a
                elif isinstance(a, str):
                    try:
                        dim = self._dim_text(a, origin).value()
                    except SolverError as e:
                        self._error(self.fn, f"input '{name}' dim {d}: {e}")
                        dim = self.cs.fresh(origin=origin)
                    renamed = _NAME.match(a) and a in self.rename
                    text = a if not renamed else dim if isinstance(dim, int) else dim.text()
                else:
                    fresh = self._fresh_input_name(name, d)
                    dim, text = self._symbol(fresh, origin), fresh
                out.append(dim)
                written.append(text)
            self.dims[arg] = tuple(out)
            self.arg_dims.append(written)
        for b in self.bindings:
            if b.name in used or b.name in names or b.dims is not None or not _NAME.match(b.name):
                continue  # another function's input (_check_bindings reported the unknown ones)
            if b.name not in self.cs.symbols and b.name not in self.rename:
                continue  # a symbol this function does not use
            origin = FunctionLevel(self.fn, f"--input-shape {b.text()}")
            target = self._symbol(b.name, origin)
            if b.value is not None:
                self.cs.add_equal(target, b.value, origin=origin, reason=f"--input-shape {b.text()}")
            else:
                self.cs.add_inequality(target, lo=b.lo, hi=b.hi, origin=origin, reason=f"--input-shape {b.text()}")

    def _fresh_input_name(self, input_name: str, d: int) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", input_name) or "arg"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "_" + base
        name = f"{base}_{d}"
        k = 1
        while name in self.cs.symbols:
            name = f"{base}_{d}_{k}"
            k += 1
        return name

    def _read_recorded_guards(self) -> None:
        if "sdc.guards" not in self.fn.attributes:
            return
        for g in ir.ArrayAttr(self.fn.attributes["sdc.guards"]):
            if not isinstance(g, A.GuardAttr):
                continue
            condition = ir.StringAttr(A._down(g.condition)).value
            message = ir.StringAttr(A._down(g.message)).value or f"the recorded guard '{condition}'"
            origin = FunctionLevel(self.fn, f"the recorded guard '{condition}'", recorded=True)
            try:
                for kind, lhs, rhs in _comparisons(condition):
                    left, right = self._dim_text(lhs, origin), self._dim_text(rhs, origin)
                    if kind == "==":
                        self.cs.add_equal(left, right, origin=origin, reason=message)
                    elif kind == ">=":
                        self.cs.add_inequality(left, lo=right, origin=origin, reason=message)
                    elif kind == "<=":
                        self.cs.add_inequality(left, hi=right, origin=origin, reason=message)
            except (SolverError, ValueError):
                continue  # a guard that is no conjunction of comparisons (a choice of residues) stays a guard only

    def _read_op(self, op: ir.Operation) -> None:
        opdef = OPS.get(op.name[4:]) if op.name.startswith("sdc.") else None
        inferred = None
        if opdef is not None and opdef.shape is not None and not op.regions:
            inferred = self._infer(op, opdef)
        for i, result in enumerate(op.results):
            if not _ranked(result.type):
                continue
            declared = tensor_spec(result.type)
            spec = inferred[i] if inferred is not None and i < len(inferred) else None
            if spec is not None and len(spec.shape) != declared.rank:
                spec = None
            dims = []
            for d, t in enumerate(declared.shape):
                v = spec.shape[d] if spec is not None else DYN
                if isinstance(v, Expr) and v.depth() > MAX_NESTING:
                    v = DYN  # a chain of floors of floors: tracked no further
                if v is DYN:
                    v = t if is_static(t) else self.cs.fresh(origin=op, reason=f"result #{i} dim {d} of '{op.name}'")
                elif is_static(t) and not is_static(v):
                    self.cs.add_equal(v, t, origin=op, reason=f"result #{i} dim {d} is declared {t}")
                    v = t  # later rules see the declared static dim
                elif is_static(t) and is_static(v) and t != v:
                    v = t  # the verifier reports it
                dims.append(v)
            self.dims[result] = tuple(dims)

    def _infer(self, op: ir.Operation, opdef) -> list[TensorSpec] | None:
        try:
            attrs = read_attrs(opdef, op)
        except AttrError:
            return None  # the verifier reports it
        try:
            attrs = {k: self._symbolic_attr(opdef.attrs[k].kind, v, op) if k in opdef.attrs else v
                     for k, v in attrs.items()}
            specs = []
            for v in op.operands:
                if not _ranked(v.type):
                    return None
                specs.append(TensorSpec(self._operand_dims(v), tensor_spec(v.type).dtype))
        except SolverError as e:
            self._error(op, f"'{op.name}' op {e}")
            return None
        self.ctx.op = op
        self.ctx.mesh = module_mesh(op) if opdef.kind == OpKind.COLLECTIVE else None
        try:
            return opdef.shape(self.ctx, specs, attrs)
        except ShapeError as e:
            self._error(op, f"'{op.name}' op {e}")
        except (TypeError, ValueError, ArithmeticError, SolverError):
            pass  # a rule that cannot take symbolic dims: the declared result types stand
        return None

    def _operand_dims(self, value) -> tuple:
        dims = self.dims.get(value)
        if dims is not None:
            return dims
        spec = tensor_spec(value.type)  # a value from outside this block: its static dims, fresh ones else
        dims = tuple(d if is_static(d) else self.cs.fresh(reason="a dim from outside the function") for d in spec.shape)
        self.dims[value] = dims
        return dims

    def _symbolic_attr(self, kind: str, value, op):
        if kind != "shape":
            return value
        return [self._dim_text(d, op).value() if isinstance(d, str) else d for d in value]

    # ------------------------------------------------------------ contradictions

    def _report(self, e: Contradiction) -> None:
        chain = e.chain
        ops = [c for c in chain if _is_op(c.origin)]
        primary = ops[-1] if ops else (chain[-1] if chain else None)
        if primary is None:
            self._error(self.fn, f"shape constraints contradict: {e.detail}")
            return
        notes = []
        for c in chain:
            if c is primary:
                continue
            at = c.origin if c.origin is not None else self.fn
            text = f"conflicting constraint: {c.text}"
            if c.reason:
                text += f" ({c.reason})"
            elif isinstance(c.origin, (InputDim, FunctionLevel)):
                text += f" ({c.origin})"
            notes.append((at, text))
        head = f"'{primary.origin.name}' op " if _is_op(primary.origin) else ""
        why = primary.reason or primary.text
        at = primary.origin if primary.origin is not None else self.fn
        self.failed = True
        self.diag.error(at, f"{head}shape constraints contradict: {why}; {e.detail}", notes=notes)

    def _error(self, at, message: str) -> None:
        self.failed = True
        self.diag.error(at, message)


class Writer:
    """Writes a solution back into the function."""

    def __init__(self, shapes: FunctionShapes, solution: Solution):
        self.s = shapes
        self.sol = solution
        self.fn = shapes.fn

    def write(self) -> None:
        self._arguments()
        for op in list(self.s.block.operations):
            self._op(op.operation)
        self._function()

    def _solved(self, dims: tuple) -> list:
        return [d if is_static(d) else self.sol.simplify(d) for d in dims]

    def _retype(self, value) -> list:
        dims = self._solved(self.s.dims[value])
        spec = tensor_spec(value.type)
        new = tuple(d if isinstance(d, int) else DYN for d in dims)
        merged = tuple(s if is_static(s) else n for s, n in zip(spec.shape, new))
        if merged != spec.shape:
            value.set_type(tensor_type(TensorSpec(merged, spec.dtype)))
        return dims

    def _arguments(self) -> None:
        attrs_list = attr_dicts(self.fn, ARG_ATTRS)
        changed = False
        for i, arg in enumerate(self.s.block.arguments):
            if arg not in self.s.dims:
                continue
            solved = self._retype(arg)
            written = [d if isinstance(d, int) else w for d, w in zip(solved, self.s.arg_dims[i])]
            dynamic = any(not isinstance(d, int) for d in written)
            entry = attrs_list[i]
            if dynamic or "sdc.dims" in entry:
                entry["sdc.dims"] = A.dims(written)
                changed = True
        if changed:
            set_attr_dicts(self.fn, ARG_ATTRS, attrs_list)

    def _op(self, op: ir.Operation) -> None:
        if op.name == "func.return":
            return
        results = [r for r in op.results if r in self.s.dims]
        texts = []
        for r in results:
            solved = self._retype(r) if op.name.startswith("sdc.") else self._solved(self.s.dims[r])
            texts.append([d if isinstance(d, int) else d.text() for d in solved])
        if op.name.startswith("sdc.") and results:
            if any(not isinstance(d, int) for t in texts for d in t):
                op.attributes["sdc.result_dims"] = ir.ArrayAttr.get([A.dims(t) for t in texts])
            elif "sdc.result_dims" in op.attributes:
                del op.attributes["sdc.result_dims"]
        self._shape_attrs(op)

    def _shape_attrs(self, op: ir.Operation) -> None:
        opdef = OPS.get(op.name[4:]) if op.name.startswith("sdc.") else None
        if opdef is None:
            return
        for key, spec in opdef.attrs.items():
            if spec.kind != "shape" or key not in op.attributes:
                continue
            try:
                values = A.to_python(spec, op.attributes[key])
            except AttrError:
                continue
            if not any(isinstance(d, str) for d in values):
                continue
            new = []
            for d in values:
                if isinstance(d, str):
                    v = self.sol.simplify(self.s._dim_text(d, op))
                    d = v if isinstance(v, int) else v.text()
                new.append(d)
            if new != values:
                op.attributes[key] = A.to_mlir(spec, new)

    def _function(self) -> None:
        fn = self.fn
        returned = None
        for op in self.s.block.operations:
            if op.operation.name == "func.return":
                returned = list(op.operation.operands)
        arg_types = [a.type for a in self.s.block.arguments]
        if returned is not None:
            fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, [v.type for v in returned]))
            self._result_dims(returned)
        guards = [g for g in self.sol.guards]
        relations = self.sol.relations()
        _set_or_drop(fn, "sdc.relations", ir.ArrayAttr.get([ir.StringAttr.get(r) for r in relations])
                     if relations else None)
        _set_or_drop(fn, "sdc.guards", ir.ArrayAttr.get([A.guard(g.text, guard_message(g)) for g in guards])
                     if guards else None)

    def _result_dims(self, returned) -> None:
        fn = self.fn
        entries = attr_dicts(fn, RES_ATTRS)
        changed = False
        for i, v in enumerate(returned):
            if v not in self.s.dims:
                continue
            solved = self._solved(self.s.dims[v])
            texts = [d if isinstance(d, int) else (d.text() if d.symbols() <= self.sol.inputs else "?")
                     for d in solved]
            if any(not isinstance(d, int) for d in texts) or "sdc.dims" in entries[i]:
                entries[i]["sdc.dims"] = A.dims(texts)
                changed = True
        if changed:
            set_attr_dicts(fn, RES_ATTRS, entries)


# ---------------------------------------------------------------- guard messages


def guard_message(g: Condition) -> str:
    """Why a guard exists, in the model's terms: the constraints it comes from and where they were added.
    Guards an earlier run recorded keep their message unless ops of this run explain them."""
    fresh = [c for c in g.constraints if not (isinstance(c.origin, FunctionLevel) and c.origin.recorded)]
    if not fresh:
        return "; ".join(dict.fromkeys(c.reason for c in g.constraints if c.reason))
    parts = []
    for c in fresh:
        if c.default:
            text = f"{c.origin} is a size" if isinstance(c.origin, InputDim) else c.reason
        else:
            text = c.reason or c.text
            at = where(c.origin)
            if at and at != text:
                text = f"{at}: {text}"
        if text and text not in parts:
            parts.append(text)
    if len(parts) > 3:
        parts = parts[:3] + [f"and {len(parts) - 3} more"]
    return "; ".join(parts)


# ---------------------------------------------------------------- IR helpers


def _ranked(t) -> bool:
    t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
    return isinstance(t, ir.RankedTensorType)


def _is_op(origin) -> bool:
    return origin is not None and not isinstance(origin, (InputDim, FunctionLevel)) and hasattr(origin, "name")


def _set_or_drop(op, key: str, value) -> None:
    if value is not None:
        op.attributes[key] = value
    elif key in op.attributes:
        del op.attributes[key]


def _comparisons(condition: str) -> list[tuple[str, str, str]]:
    """`1 <= B <= 64` -> [('<=', '1', 'B'), ('<=', 'B', '64')]; also `and` of comparisons. ValueError else
    (SymExprError, for text outside the condition grammar)."""
    tree = symexpr.parse_condition(condition)
    nodes = tree.parts if isinstance(tree, symexpr.BoolOp) and tree.op == "and" else (tree,)
    out = []
    for node in nodes:
        if not isinstance(node, symexpr.Compare):
            raise ValueError(condition)
        for op, a, b in zip(node.ops, node.terms, node.terms[1:]):
            if op not in ("==", ">=", "<="):
                raise ValueError(condition)
            out.append((op, symexpr.to_text(a), symexpr.to_text(b)))
    return out