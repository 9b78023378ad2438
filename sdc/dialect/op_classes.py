"""The sdc dialect in MLIR: IRDL-backed op classes generated from the op tables, and their verifier.

Each `OpDef` becomes a `dialects.ext` operation class (`sdc.<name>`); its
`verify_invariants` runs `verify_op`, which checks operand/result counts and
types, attributes (presence, kind, choices), and the shape rule: the declared
result types must agree with the ones the rule infers. Messages say what was
expected and what was found, at the op's location. Ops are built by sdc/dialect/builder.py, which
infers result types with the same shape rules (`infer_results`).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from sdc import dtypes
from sdc.dialect.attrs import AttrError, Sdc
# create: the builder's, importable from here too for the call sites that predate sdc/dialect/builder.py
from sdc.dialect.builder import VerifyContext, create, infer_results  # noqa: F401
from sdc.dialect.ir import module_mesh, read_attrs, tensor_spec
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import OPS, OpDef, all_ops
from sdc.dialect.shapes import ShapeError, TensorSpec, is_static
from sdc.mlir import ext, ir
from sdc.dialect.structure import STRUCTURE_OPS, report, verify_structure  # defines sdc.fusion and sdc.yield

# ---------------------------------------------------------------- types and attributes

# tensor_spec, tensor_type, read_attrs, op_attributes, module_mesh and shard_counts live in
# sdc/dialect/ir.py (with the other IR accessors); the verifier and the builder use them from there.


def _spec_or_error(t: ir.Type, what: str) -> TensorSpec:
    # These bindings have no RankedTensorType.isinstance; a plain ir.Type downcasts to its class.
    if not isinstance(t.maybe_downcast() if hasattr(t, "maybe_downcast") else t, ir.RankedTensorType):
        raise ShapeError(f"{what} must be a ranked tensor, found {t}")
    spec = tensor_spec(t)
    if not dtypes.is_known(spec.dtype):
        raise ShapeError(f"{what} has unsupported element type {spec.dtype} "
                         f"(supported: {', '.join(dtypes.ELEMENT_TYPES)})")
    return spec


# ---------------------------------------------------------------- the verifier


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
