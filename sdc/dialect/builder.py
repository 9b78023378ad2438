"""Building sdc ops: the one place that creates them.

An op is built from its `OpDef`: operands, attributes given as plain values and encoded by their
kinds (unset optional ones filled with their defaults, so the printed IR is complete), result types
from the op's shape rule or given, and a location. `create` builds one op at the current insertion
point; `OpBuilder` builds at a chosen insertion point and location, and is the `b` that derivative
rules build with (sdc/dialect/derivatives.py: `op`, `ops`, `spec`, `scalar`). The structure ops of
sdc-fuse are built here too (`create_fusion`, `create_yield`).

The users add only what is theirs: the frontends' `Builder` (sdc/frontend/builder.py) folds
compile-time values, types results with symbolic dims and names parameters; sdc-autodiff gives each
rule an `OpBuilder` that inserts before the entry's return and keeps the cotangents; passes call
`create` under their rewriter's or an op's insertion point.

    with ir.InsertionPoint(op), op.location:
        y = create("matmul", [x, w], {"transpose_rhs": True}).results[0]
    b = OpBuilder(ir.InsertionPoint(ret), loc)
    two = b.op("add", b.scalar(1.0, "f32"), b.scalar(1.0, "f32"))
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Sequence

import numpy as np

from sdc import dtypes
from sdc.dialect import attrs as A
from sdc.dialect.dense import DenseValue
from sdc.dialect.ir import tensor_spec, tensor_type
from sdc.dialect.opdef import OPS, OpDef
from sdc.dialect.shapes import ShapeContext, TensorSpec
from sdc.dialect.structure import FUSION, YIELD
from sdc.mlir import ir


class VerifyContext(ShapeContext):
    """What a shape rule may ask while ops are built or verified: the module's mesh (collectives)."""

    def __init__(self, mesh: dict[str, int] | None):
        self.mesh = mesh


def infer_results(opdef: OpDef, operand_specs: list[TensorSpec], attrs: dict, mesh=None) -> list[TensorSpec] | None:
    """Result specs from the shape rule (None when the op's result types are declared)."""
    if opdef.shape is None:
        return None
    return opdef.shape(VerifyContext(mesh), operand_specs, attrs)


def create(name: str, operands: Sequence[ir.Value] = (), attrs: dict | None = None,
           result_types: Sequence[ir.Type] | None = None, loc: ir.Location | None = None,
           mesh: dict[str, int] | None = None, ip: ir.InsertionPoint | None = None) -> ir.Operation:
    """Create `sdc.<name>` at `ip` (default: the current insertion point), inferring result types
    from its shape rule.

    Attributes are plain values, converted by their kinds; unset optional ones are filled with
    their defaults so the printed IR is complete. Result types must be given for ops whose
    results are declared (parameter, recv). `mesh` is the device mesh a collective's shape rule reads.
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
                               attributes=mlir_attrs, loc=loc, ip=ip)


def create_fusion(kind: str, result_types: Sequence[ir.Type], *, loc: ir.Location,
                  ip: ir.InsertionPoint) -> ir.Operation:
    """An empty `sdc.fusion` of `kind` (one of structure.FUSION_KINDS) at `ip`, its body block
    appended; the caller moves the members in and ends the body with `create_yield`."""
    fusion = ir.Operation.create(FUSION, results=list(result_types), operands=[], regions=1,
                                 attributes={"kind": ir.StringAttr.get(kind)}, loc=loc, ip=ip)
    fusion.regions[0].blocks.append()
    return fusion


def create_yield(values: Sequence[ir.Value], *, loc: ir.Location, ip: ir.InsertionPoint) -> ir.Operation:
    """`sdc.yield` of `values`, the terminator of a fusion body."""
    return ir.Operation.create(YIELD, operands=list(values), loc=loc, ip=ip)


class OpBuilder:
    """Builds sdc ops at one insertion point with one location.

    `ip`: where ops go (default: the current insertion point when each op is built); `loc`: their
    location (default: the current one). `scalars` holds one rank-0 constant per (number, dtype):
    builders may share it only when their ops go to one insertion point. `created` receives every
    op built, in order. `mesh` is the device mesh that collectives' shape rules read.
    """

    def __init__(self, ip: ir.InsertionPoint | None = None, loc: ir.Location | None = None, *,
                 scalars: dict | None = None, created: list | None = None, mesh: dict[str, int] | None = None):
        self.ip = ip
        self.loc = loc
        self.scalars = scalars if scalars is not None else {}
        self.created = created if created is not None else []
        self.mesh = mesh

    def create(self, name: str, operands: Sequence[ir.Value] = (), attrs: dict | None = None,
               result_types: Sequence[ir.Type] | None = None) -> ir.Operation:
        """`sdc.<name>` (see the module-level `create`), recorded in `created`."""
        with nullcontext() if self.ip is None else self.ip, nullcontext() if self.loc is None else self.loc:
            op = create(name, operands, attrs, result_types, mesh=self.mesh)
        self.created.append(op)
        return op

    def ops(self, name: str, /, *operands: ir.Value, **attrs: Any) -> list[ir.Value]:
        """All results of `sdc.<name>` on `operands` with `attrs`."""
        return list(self.create(name, list(operands), attrs).results)

    def op(self, name: str, /, *operands: ir.Value, **attrs: Any) -> ir.Value:
        """The one result of `sdc.<name>` on `operands` with `attrs`."""
        return self.ops(name, *operands, **attrs)[0]

    @staticmethod
    def spec(value: ir.Value) -> TensorSpec:
        return tensor_spec(value.type)

    def scalar(self, number: float, dtype: str) -> ir.Value:
        """A rank-0 constant of `dtype` (built once per number and dtype)."""
        key = (float(number), dtype)
        if key not in self.scalars:
            if dtype == "bf16":  # numpy cannot spell a bf16 literal, so an f32 one is cast
                value = self.op("cast", self.scalar(number, "f32"), dtype=dtype)
            else:
                literal = np.asarray(number, dtype=dtypes.to_numpy(dtype))
                value = self.op("constant", value=DenseValue.from_numpy(literal))
            self.scalars[key] = value
        return self.scalars[key]


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
