"""The sdc dialect in MLIR: IRDL-backed op classes generated from the op tables, and their verifier.

Each `OpDef` becomes a `dialects.ext` operation class (`sdc.<name>`); its
`verify_invariants` runs `verify_op`, which checks operand/result counts and
types, attributes (presence, kind, choices), and the shape rule: the declared
result types must agree with the ones the rule infers. Messages say what was
expected and what was found, at the op's location.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from sdc import dtypes
from sdc.dialect import attrs as A
from sdc.dialect.attrs import AttrError, Sdc
from sdc.dialect.dense import DenseValue
from sdc.dialect.ir import module_mesh, read_attrs, tensor_spec, tensor_type
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import OPS, OpDef, all_ops
from sdc.dialect.shapes import ShapeContext, ShapeError, TensorSpec, is_static
from sdc.mlir import ext, ir
from sdc.dialect.structure import STRUCTURE_OPS, report, verify_structure  # defines sdc.fusion and sdc.yield

# ---------------------------------------------------------------- types and attributes

# tensor_spec, tensor_type, read_attrs, op_attributes, module_mesh and shard_counts live in
# sdc/dialect/ir.py (with the other IR accessors); the verifier and the builders use them from there.


def _spec_or_error(t: ir.Type, what: str) -> TensorSpec:
    # These bindings have no RankedTensorType.isinstance; a plain ir.Type downcasts to its class.
    if not isinstance(t.maybe_downcast() if hasattr(t, "maybe_downcast") else t, ir.RankedTensorType):
        raise ShapeError(f"{what} must be a ranked tensor, found {t}")
    spec = tensor_spec(t)
    if not dtypes.is_known(spec.dtype):
        raise ShapeError(f"{what} has unsupported element type {spec.dtype} "
                         f"(supported: {', '.join(dtypes.ELEMENT_TYPES)})")
    return spec


class VerifyContext(ShapeContext):
    def __init__(self, mesh: dict[str, int] | None):
        self.mesh = mesh


# ---------------------------------------------------------------- the verifier


def infer_results(opdef: OpDef, operand_specs: list[TensorSpec], attrs: dict, mesh=None) -> list[TensorSpec] | None:
    """Result specs from the shape rule (None when the op's result types are declared)."""
    if opdef.shape is None:
        return None
    return opdef.shape(VerifyContext(mesh), operand_specs, attrs)


def verify_op(op) -> str | None:
    """Check one sdc op; returns the error message (without the op-name prefix) or None."""
    op = op.operation if hasattr(op, "operation") else op
    opdef = OPS.get(op.name[4:])
    if opdef is None:
        if op.name in STRUCTURE_OPS:
            return verify_structure(op)
        return f"is not an sdc op"
    try:
        operands = list(op.operands)
        results = list(op.results)
        n_decl = len(opdef.operands)
        if opdef.variadic_operand:
            fixed = n_decl - 1
            if len(operands) < fixed + opdef.min_operands:
                return f"expects at least {fixed + opdef.min_operands} operands, found {len(operands)}"
        elif len(operands) != n_decl:
            return f"expects {n_decl} operand{'s' if n_decl != 1 else ''}, found {len(operands)}"
        if opdef.operand_slots and len(operands) > len(opdef.operands) - 1 + opdef.operand_slots:
            return f"expects at most {len(opdef.operands) - 1 + opdef.operand_slots} operands, found {len(operands)}"
        if opdef.result_slots and len(results) > len(opdef.results) - 1 + opdef.result_slots:
            return f"expects at most {len(opdef.results) - 1 + opdef.result_slots} results, found {len(results)}"
        if not opdef.variadic_results and len(results) != len(opdef.results):
            n = len(opdef.results)
            return f"expects {n} result{'s' if n != 1 else ''}, found {len(results)}"
        in_specs = [_spec_or_error(v.type, f"operand #{i}") for i, v in enumerate(operands)]
        out_specs = [_spec_or_error(r.type, f"result #{i}") for i, r in enumerate(results)]
        values = read_attrs(opdef, op)
        inferred = infer_results(opdef, in_specs, values, module_mesh(op) if opdef.kind == OpKind.COLLECTIVE else None)
    except (AttrError, ShapeError) as e:
        return str(e)
    if inferred is None:
        return None
    if len(inferred) != len(out_specs):
        return f"has {len(out_specs)} results, the shape rule gives {len(inferred)}"
    for i, (got, want) in enumerate(zip(out_specs, inferred)):
        msg = _compare(i, got, want)
        if msg:
            return msg
    return None


def _compare(i: int, got: TensorSpec, want: TensorSpec) -> str | None:
    if got.dtype != want.dtype:
        return f"result #{i} element type is {got.dtype}, expected {want.dtype}"
    if got.rank != want.rank:
        return f"result #{i} has rank {got.rank}, expected {want.rank} ({want})"
    for d, (g, w) in enumerate(zip(got.shape, want.shape)):
        if is_static(g) and is_static(w) and g != w:
            return f"result #{i} dim {d} is {g}, expected {w} (inferred type {want})"
    return None


class SdcOpBase(Sdc.Operation):
    """Shared base of every generated sdc op class.

    No class-level annotations here: dialects.ext turns every annotation into an op field.
    """

    def verify_invariants(self) -> bool:
        return report(self, verify_op)


def _class_name(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_")) + "Op"


def _field_annotations(names: Sequence[str], kind: Any, slots: int, variadic: bool) -> dict[str, Any]:
    """The ext field declarations of an op's operands or results: the last one may be variadic (one
    type for all its members) or `slots` optional fields of their own types (`name0`, `name1`, ...)."""
    out: dict[str, Any] = {}
    for i, name in enumerate(names):
        last = i == len(names) - 1
        if last and slots:
            out.update({f"{name}{k}": Optional[kind] for k in range(slots)})
        else:
            out[name] = Sequence[kind] if (last and variadic) else kind
    return out


def _make_op_class(opdef: OpDef) -> type:
    annotations: dict[str, Any] = {
        **_field_annotations(opdef.operands, ext.Operand[Any], opdef.operand_slots, opdef.variadic_operand),
        **_field_annotations(opdef.results, ext.Result[Any], opdef.result_slots, opdef.variadic_results),
    }
    ns = {"__annotations__": annotations, "__doc__": opdef.doc, "_opdef": opdef, "__module__": __name__}
    traits = [ext.Pure] if opdef.pure else []
    return type(_class_name(opdef.name), (SdcOpBase,), ns, name=opdef.name, traits=traits)


OP_CLASSES: dict[str, type] = {name: _make_op_class(d) for name, d in all_ops().items()}


def new_context() -> ir.Context:
    """A fresh context with the sdc dialect loaded and unknown dialects refused."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = False
    with ctx, ir.Location.unknown():
        load_into(ctx)
    return ctx


def load_into(ctx: ir.Context) -> None:
    """Load the sdc dialect into `ctx` (the context must be current)."""
    if not ctx.is_dialect_loaded("sdc"):
        Sdc.load()


# ---------------------------------------------------------------- building ops from Python


def create(name: str, operands: Sequence[ir.Value] = (), attrs: dict | None = None,
           result_types: Sequence[ir.Type] | None = None, loc: ir.Location | None = None,
           mesh: dict[str, int] | None = None) -> ir.Operation:
    """Create `sdc.<name>` at the current insertion point, inferring result types from its shape rule.

    Attributes are plain values, converted by their kinds; unset optional ones are filled with
    their defaults so the printed IR is complete. Result types must be given for ops whose
    results are declared (parameter, recv).
    """
    opdef = OPS[name]
    attrs = dict(attrs or {})
    values = opdef.with_defaults({k: _table_value(opdef.attrs[k], v) if k in opdef.attrs else v
                                  for k, v in attrs.items()})
    missing = [k for k, s in opdef.attrs.items() if s.required and k not in values]
    if missing:
        raise ValueError(f"sdc.{name} needs attribute(s) {', '.join(missing)}")
    mlir_attrs = {k: A.to_mlir(opdef.attrs[k], v) for k, v in values.items() if k in opdef.attrs}
    mlir_attrs.update({k: v for k, v in attrs.items() if k not in opdef.attrs})
    if result_types is None:
        specs = infer_results(opdef, [tensor_spec(v.type) for v in operands], values, mesh)
        if specs is None:
            raise ValueError(f"sdc.{name} needs explicit result types")
        result_types = [tensor_type(s) for s in specs]
    if opdef.operand_slots or opdef.result_slots:
        mlir_attrs.update(_segment_sizes(opdef, len(operands), len(result_types)))
    return ir.Operation.create(f"sdc.{name}", results=list(result_types), operands=list(operands),
                               attributes=mlir_attrs, loc=loc)


def _segment_sizes(opdef: OpDef, n_operands: int, n_results: int) -> dict[str, ir.Attribute]:
    """`operandSegmentSizes` / `resultSegmentSizes` of an op with slot groups (OpDef.operand_slots):
    the fixed operands, then the slots filled from the first."""
    out = {}
    for key, fixed, slots, n, what in (
            ("operandSegmentSizes", len(opdef.operands) - 1, opdef.operand_slots, n_operands, "operands"),
            ("resultSegmentSizes", len(opdef.results) - 1, opdef.result_slots, n_results, "results")):
        if not slots:
            continue
        used = n - fixed
        if not 0 <= used <= slots:
            raise ValueError(f"sdc.{opdef.name} takes {fixed} to {fixed + slots} {what}, found {n}")
        out[key] = ir.DenseI32ArrayAttr.get([1] * fixed + [1] * used + [0] * (slots - used))
    return out


def _table_value(spec, value):
    """An attribute value as the op tables see it: a `dense` value given as an array becomes a DenseValue."""
    if spec.kind == "dense" and not isinstance(value, DenseValue):
        return DenseValue.from_numpy(np.asarray(value))
    return value
