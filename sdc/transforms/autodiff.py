"""sdc-autodiff: reverse-mode differentiation of the entry function, on the sdc dialect.

The entry function keeps its results and gains one gradient per differentiated value, appended in
order and named `grad.<name>` (its `sdc.name` result attribute): the backward program is ordinary
sdc ops, emitted before the `func.return` by each op's derivative rule (`OpDef.vjp`, attached in
sdc/dialect/derivatives.py) through the dialect's `OpBuilder`. Later passes (shape constraints,
fusion, codegen) see one program.

Options:
- `results`: which results to differentiate, comma-separated indices or `sdc.name`s (default `0`,
  the loss). Each must be a float value of one element; it is seeded with 1 (several: the gradient
  of their sum).
- `wrt`: what to differentiate with respect to, comma-separated names: `sdc.parameter` names or
  entry input names (`sdc.name`, else `argN`). Default: every float parameter, in order of first
  appearance, and no inputs. Several `sdc.parameter` ops with one name are one weight: their
  cotangents add up. A value the results do not depend on gets a zero gradient.

How it works: a forward sweep marks the float values that depend on a `wrt` value; a reverse sweep
over the entry block hands each op that has a result cotangent and an active operand to its rule,
and adds up the cotangents of values used several times. A gradient reaching an op with no rule is
an error at that op, one per op (`'sdc.lrn' is not differentiable (no derivative rule): a gradient
flows through it`); so is a rule that cannot handle its case (dynamic dims, an unsupported mode).
Run it before sdc-fuse, on a function with static shapes where rules need them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdc import dtypes
from sdc.diagnostics import DiagnosticSink, SdcError
from sdc.dialect.builder import OpBuilder
from sdc.dialect.derivatives import RuleError, broadcast_to
from sdc.dialect.ir import (RES_ATTRS, arg_names, attr_dicts, entry_function, read_attrs, result_names,
                            set_attr_dicts, tensor_spec)
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import TensorSpec, is_static
from sdc.mlir import ir
from sdc.transforms.base import ModulePass

GRAD_PREFIX = "grad."


@dataclass(frozen=True)
class AutodiffPass(ModulePass):
    """Options: `results` (default "0") and `wrt` (default: every float parameter); see the module doc."""

    results: str = "0"
    wrt: str = ""

    name = "sdc-autodiff"
    summary = "append the gradients of the entry's loss with respect to its parameters (reverse mode)"

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        try:
            fn = entry_function(module)
        except SdcError as e:
            diag.error(module, f"sdc-autodiff: {e}")
            return
        _Autodiff(fn, diag, self).run()


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _is_float(value: ir.Value) -> bool:
    return dtypes.is_float(tensor_spec(value.type).dtype)


def _element_count(spec: TensorSpec) -> int | None:
    if not all(is_static(d) for d in spec.shape):
        return None
    n = 1
    for d in spec.shape:
        n *= d
    return n


class _Autodiff:
    def __init__(self, fn: ir.Operation, diag: DiagnosticSink, options: AutodiffPass):
        self.fn = fn
        self.diag = diag
        self.options = options
        self.block = fn.regions[0].blocks[0]
        self.ops = [op.operation for op in self.block.operations]
        self.scalars: dict = {}
        self.created: list[ir.Operation] = []

    def _builder(self, ret: ir.Operation, loc: ir.Location) -> OpBuilder:
        """What a rule builds with: ops before the entry's return, at `loc` (the forward op's, so messages
        and plans point at it); one scalar constant per (number, dtype) for the whole pass."""
        return OpBuilder(ir.InsertionPoint(ret), loc, scalars=self.scalars, created=self.created)

    def run(self) -> None:
        ret = self.ops[-1] if self.ops else None
        if ret is None or ret.name != "func.return":
            self.diag.error(self.fn, "sdc-autodiff: the entry function has no func.return")
            return
        fused = [op for op in self.ops if op.name == "sdc.fusion"]
        if fused:
            self.diag.error(fused[0], "sdc-autodiff runs before sdc-fuse: found 'sdc.fusion'")
            return
        losses = self._losses(ret)
        targets = self._targets()
        if losses is None or targets is None:
            return
        active = self._active([v for _, values in targets for v in values])
        cts: dict[ir.Value, ir.Value] = {}
        seed_builder = self._builder(ret, self.fn.location)
        for loss in losses:
            spec = tensor_spec(loss.type)
            one = seed_builder.scalar(1.0, spec.dtype)
            self._accumulate(cts, loss, broadcast_to(seed_builder, one, spec.shape) if spec.rank else one, ret)
        failed = False
        for op in reversed(self.ops[:-1]):
            failed |= not self._backward(op, cts, active, ret)
        if failed:
            return
        grads = [self._gradient(values, cts, ret) for _, values in targets]
        if any(g is None for g in grads):
            return
        self._return(ret, grads, [f"{GRAD_PREFIX}{name}" for name, _ in targets])
        self._erase_unused()

    def _erase_unused(self) -> None:
        """Rules compute every operand's cotangent; drop those nothing reads (inputs not differentiated)."""
        for op in reversed(self.created):
            if all(len(list(r.uses)) == 0 for r in op.results):
                op.erase()

    # ------------------------------------------------------------ what to differentiate

    def _losses(self, ret: ir.Operation) -> list[ir.Value] | None:
        returned = list(ret.operands)
        names = result_names(self.fn)
        out = []
        for item in _names(self.options.results) or ["0"]:
            index = int(item) if item.isdigit() else (names.index(item) if item in names else None)
            if index is None or index >= len(returned):
                self.diag.error(self.fn, f"sdc-autodiff: no result '{item}' to differentiate "
                                         f"(results: {', '.join(names) or 'none'})")
                return None
            value = returned[index]
            spec = tensor_spec(value.type)
            if not dtypes.is_float(spec.dtype) or _element_count(spec) != 1:
                self.diag.error(self.fn, f"sdc-autodiff differentiates a scalar float loss: result {index} "
                                         f"('{names[index]}') has type {value.type}")
                return None
            out.append(value)
        return out

    def _targets(self) -> list[tuple[str, list[ir.Value]]] | None:
        params: dict[str, list[ir.Value]] = {}
        for op in self.ops:
            if op.name == "sdc.parameter":
                name = read_attrs(OPS["parameter"], op)["name"]
                params.setdefault(name, []).append(op.results[0])
        inputs = dict(zip(arg_names(self.fn), self.block.arguments))
        wanted = _names(self.options.wrt)
        if not wanted:
            return [(name, values) for name, values in params.items() if _is_float(values[0])]
        out = []
        for name in wanted:
            values = params.get(name) or ([inputs[name]] if name in inputs else None)
            if values is None:
                self.diag.error(self.fn, f"sdc-autodiff: no parameter or input named '{name}' "
                                         f"(parameters: {', '.join(params) or 'none'}; inputs: "
                                         f"{', '.join(inputs) or 'none'})")
                return None
            if not _is_float(values[0]):
                self.diag.error(self.fn, f"sdc-autodiff: '{name}' has type {values[0].type}; only float values "
                                         "have gradients")
                return None
            out.append((name, values))
        return out

    def _active(self, seeds: list[ir.Value]) -> set:
        """Float values that depend on a differentiated value: where cotangents can matter."""
        active = set(seeds)
        for op in self.ops:
            if any(v in active for v in op.operands):
                active.update(r for r in op.results if _is_float(r))
        return active

    # ------------------------------------------------------------ the reverse sweep

    def _backward(self, op: ir.Operation, cts: dict, active: set, ret: ir.Operation) -> bool:
        results = list(op.results)
        if not any(r in cts for r in results):
            return True
        operands = list(op.operands)
        if not any(v in active for v in operands):
            return True
        opdef = OPS.get(op.name[4:]) if op.name.startswith("sdc.") else None
        if opdef is None or opdef.vjp is None:
            self.diag.error(op, f"'{op.name}' is not differentiable (no derivative rule): a gradient flows through it")
            return False
        b = self._builder(ret, op.location)
        try:
            incoming = [cts.get(r) if r in cts or not _is_float(r) else _zeros(b, r) for r in results]
            grads = opdef.vjp(b, operands, results, read_attrs(opdef, op), incoming)
        except RuleError as e:
            self.diag.error(op, f"'{op.name}' is not differentiable: {e}")
            return False
        if len(grads) != len(operands):
            self.diag.error(op, f"the derivative rule of '{op.name}' gave {len(grads)} cotangents for "
                                f"{len(operands)} operands")
            return False
        for value, g in zip(operands, grads):
            if g is None or value not in active:
                continue
            if g.type != value.type:
                self.diag.error(op, f"the derivative rule of '{op.name}' gave a cotangent of type {g.type} "
                                    f"for an operand of type {value.type}")
                return False
            self._accumulate(cts, value, g, ret)
        return True

    def _accumulate(self, cts: dict, value: ir.Value, g: ir.Value, ret: ir.Operation) -> None:
        if value in cts:
            b = self._builder(ret, ir.Location.unknown())
            g = b.op("add", cts[value], g)
        cts[value] = g

    def _gradient(self, values: list[ir.Value], cts: dict, ret: ir.Operation) -> ir.Value | None:
        total = None
        for v in values:
            if v in cts:
                total = cts[v] if total is None else self._builder(ret, ir.Location.unknown()).op(
                    "add", total, cts[v])
        if total is not None:
            return total
        b = self._builder(ret, ir.Location.unknown())
        try:
            return _zeros(b, values[0])
        except RuleError as e:
            self.diag.error(self.fn, f"sdc-autodiff: cannot build a zero gradient: {e}")
            return None

    def _return(self, ret: ir.Operation, grads: list[ir.Value], names: list[str]) -> None:
        res_attrs = attr_dicts(self.fn, RES_ATTRS)
        returned = list(ret.operands) + grads
        with ir.InsertionPoint(ret), ret.location:
            ir.Operation.create("func.return", operands=returned)
        ret.erase()
        arg_types = [a.type for a in self.block.arguments]
        self.fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [v.type for v in returned]))
        res_attrs += [{"sdc.name": ir.StringAttr.get(n)} for n in names]
        set_attr_dicts(self.fn, RES_ATTRS, res_attrs)


def _zeros(b: OpBuilder, like: ir.Value) -> ir.Value:
    from sdc.dialect.derivatives import static_shape, zeros

    spec = tensor_spec(like.type)
    return zeros(b, static_shape(b, like, "value"), spec.dtype) if spec.rank else b.scalar(0.0, spec.dtype)
