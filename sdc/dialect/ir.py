"""Reading a module the way every layer does: one place for the entry function, its inputs' and
outputs' names and symbolic dims, op labels and locations, and types and attributes as plain values.

Transforms, codegen, the interpreter and the reports all read the same facts from the IR; they
read them here, so that "what is input 0 called" or "where is this op" has one answer (before,
three copies of `arg_names` disagreed on a malformed `arg_attrs`, and codegen imported the
interpreter to ask). Nothing here changes the IR except `set_attr_dicts`.

Conventions (also what the runtime shows the user):
- an entry input is named by its `sdc.name` argument attribute, else `argN`; an output by its
  `sdc.name` result attribute, else `outputN`;
- an input's or output's symbolic dims are its `sdc.dims` attribute (`#sdc.dims<["B", 3]>`);
- an op's location, for messages and plans, is its name label (`loc("conv1"(...))`, what the
  frontends give), else `file:line:col`.
"""

from __future__ import annotations

import weakref
from typing import Any

from sdc.diagnostics import SdcError, parse_location
from sdc.dialect import attrs as A
from sdc.dialect.attrs import AttrError, read_dims
from sdc.dialect.opdef import OpDef
from sdc.dialect.shapes import DYN, ShapeError, TensorSpec, is_static
from sdc.mlir import ir

MAX_DIM = 1 << 62  # a tensor dim (MLIR keeps dims in int64; the dynamic marker is its minimum)
ARG_ATTRS = "arg_attrs"
RES_ATTRS = "res_attrs"


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines `value`, or None for a block argument."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return operation(owner)


def operation(op: Any) -> ir.Operation:
    """The ir.Operation behind an op view, a module or an operation."""
    return op.operation if hasattr(op, "operation") else op


# ---------------------------------------------------------------- functions


def defined_functions(module: Any) -> list[ir.Operation]:
    """Every `func.func` with a body, in the module's order (declarations have no body to transform)."""
    body = operation(module).regions[0].blocks[0]
    return [op.operation for op in body.operations
            if op.operation.name == "func.func" and op.operation.regions[0].blocks]


def entry_function(module: Any, name: str | None = None) -> ir.Operation:
    """The function to run: `name`, else `@main`, else the module's only function. Raises SdcError."""
    body = operation(module).regions[0].blocks[0]
    funcs = [op.operation for op in body.operations if op.operation.name == "func.func"]
    by_name = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in funcs}
    if name is not None:
        if name not in by_name:
            raise SdcError(f"no function named '{name}' (functions: {', '.join(by_name) or 'none'})")
        return by_name[name]
    if "main" in by_name:
        return by_name["main"]
    if len(funcs) == 1:
        return funcs[0]
    raise SdcError(f"cannot choose an entry function: no @main among {', '.join(by_name) or 'none'}")


def _count(fn: ir.Operation, key: str) -> int:
    if key == ARG_ATTRS:
        return len(fn.regions[0].blocks[0].arguments)
    return len(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).results)


def attr_dicts(fn: ir.Operation, key: str) -> list[dict[str, ir.Attribute]]:
    """The attribute dictionary of each argument (`key` "arg_attrs") or result ("res_attrs") of
    `fn`, one per argument or result (empty where none is written)."""
    n = _count(fn, key)
    if key not in fn.attributes:
        return [{} for _ in range(n)]
    out = []
    for d in ir.ArrayAttr(fn.attributes[key]):
        d = ir.DictAttr(d)
        out.append({d[i].name: d[i].attr for i in range(len(d))})
    return out[:n] + [{} for _ in range(n - len(out))]


def set_attr_dicts(fn: ir.Operation, key: str, dicts: list[dict[str, ir.Attribute]]) -> None:
    """Write back what `attr_dicts` read (after changing some entries)."""
    fn.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])


def _names(dicts: list[dict], prefix: str) -> list[str]:
    return [ir.StringAttr(d["sdc.name"]).value if "sdc.name" in d else f"{prefix}{i}" for i, d in enumerate(dicts)]


def _dims(dicts: list[dict], skip_bad: bool) -> list[list | None]:
    out: list[list | None] = []
    for d in dicts:
        if "sdc.dims" not in d:
            out.append(None)
            continue
        try:
            out.append(read_dims(d["sdc.dims"]))
        except AttrError:
            if not skip_bad:
                raise
            out.append(None)
    return out


def arg_names(fn: ir.Operation) -> list[str]:
    """Entry input names: each argument's `sdc.name`, else argN (as the runtime names inputs)."""
    return _names(attr_dicts(fn, ARG_ATTRS), "arg")


def result_names(fn: ir.Operation) -> list[str]:
    """Entry output names: each result's `sdc.name`, else outputN."""
    return _names(attr_dicts(fn, RES_ATTRS), "output")


def arg_dims(fn: ir.Operation, *, skip_bad: bool = False) -> list[list | None]:
    """Each argument's `sdc.dims` (ints and symbol names; None where there is none). A malformed
    annotation raises AttrError, or reads as None with `skip_bad` (for passes that leave reporting
    it to sdc-verify)."""
    return _dims(attr_dicts(fn, ARG_ATTRS), skip_bad)


def result_dims(fn: ir.Operation, *, skip_bad: bool = False) -> list[list | None]:
    """Each result's `sdc.dims`, as `arg_dims` reads the arguments'."""
    return _dims(attr_dicts(fn, RES_ATTRS), skip_bad)


def shard_counts(fn: ir.Operation, arg_attrs: Any, rank: int) -> list[int]:
    """How many blocks each dim of an entry argument is split into: its `sdc.sharding` attribute
    (in `arg_attrs`, a DictAttr or dict) over the enclosing module's mesh; 1 per dim when unsharded."""
    if "sdc.sharding" not in arg_attrs:
        return [1] * rank
    try:
        per_dim, _ = A.read_sharding(arg_attrs["sdc.sharding"])
    except AttrError:
        return [1] * rank
    mesh = module_mesh(fn) or {}
    out = []
    for d in range(rank):
        n = 1
        for axis in per_dim[d] if d < len(per_dim) else []:
            n *= mesh.get(axis, 1)
        out.append(n)
    return out


def module_mesh(op: Any) -> dict[str, int] | None:
    """The device mesh of the module enclosing `op` (its `sdc.mesh` attribute), if any."""
    cur = operation(op)
    while cur is not None:
        if cur.name == "builtin.module" and "sdc.mesh" in cur.attributes:
            return A.read_mesh(cur.attributes["sdc.mesh"])
        if not cur.attached:  # a parsed top-level op: asking for its parent raises
            return None
        parent = cur.parent
        cur = operation(parent) if parent is not None else None
    return None


# ---------------------------------------------------------------- ops: where they are, what they hold


def op_location(op: Any, *, file_first: bool = False) -> str:
    """Where an op comes from, for messages and plans: its name label (a frontend's node name),
    else `file:line:col`, else "". `file_first` prefers the file position (error prefixes)."""
    loc, label = parse_location(str(operation(op).location))
    first, second = (str(loc) if loc else None, label) if file_first else (label, str(loc) if loc else None)
    return first or second or ""


def op_label(op: Any) -> str:
    """How messages name an op: `'sdc.matmul' at fc1` (or `at f.mlir:3:8`), `'sdc.matmul'` without a location."""
    op = operation(op)
    where = op_location(op)
    return f"'{op.name}'" + (f" at {where}" if where else "")


def op_attributes(op: Any) -> dict[str, ir.Attribute]:
    """Every attribute of an op, by name."""
    attributes = operation(op).attributes
    named = (attributes[i] for i in range(len(attributes)))
    return {na.name: na.attr for na in named}


SEGMENT_ATTRS = ("operandSegmentSizes", "resultSegmentSizes")


def read_attrs(opdef: OpDef, op: Any) -> dict:
    """The op's attributes as plain values, defaults filled in. Raises AttrError."""
    present = op_attributes(op)
    values = {}
    for key in present:
        if key in SEGMENT_ATTRS and (opdef.operand_slots or opdef.result_slots):
            continue  # the sizes of an op's slot groups (OpDef.operand_slots): structure, not an attribute
        if key not in opdef.attrs and "." not in key:
            expected = ", ".join(f"'{k}'" for k in opdef.attrs) or "none"
            raise AttrError(f"has unknown attribute '{key}' (known: {expected})")
    for key, spec in opdef.attrs.items():
        if key not in present:
            if spec.required:
                raise AttrError(f"requires attribute '{key}'")
            values[key] = spec.default
            continue
        try:
            values[key] = A.to_python(spec, present[key])
        except AttrError as e:
            raise AttrError(f"attribute '{key}' {e}") from None
    return values


# ---------------------------------------------------------------- types <-> specs


_DYNAMIC_SIZE = ir.ShapedType.get_dynamic_size()

# Per context, an element type's uniqued storage (its hash) -> its name. Printing a type costs
# ~9 us and the verifier reads ~30000 tensor types compiling ResNet-50; a type's storage lives as
# long as its context, so within one context the hash names one type for good.
_ELEMENT_NAMES: "weakref.WeakKeyDictionary[Any, dict[int, str]]" = weakref.WeakKeyDictionary()


def _element_name(element: ir.Type) -> str:
    names = _ELEMENT_NAMES.get(element.context)
    if names is None:
        names = _ELEMENT_NAMES[element.context] = {}
    key = hash(element)
    name = names.get(key)
    if name is None:
        name = names[key] = str(element)
    return name


def tensor_spec(t: ir.Type) -> TensorSpec:
    """A ranked tensor type as a plain TensorSpec (dynamic dims as DYN)."""
    rt = ir.RankedTensorType(t)
    dynamic = _DYNAMIC_SIZE
    shape = tuple(DYN if d == dynamic else d for d in rt.shape)  # one call for the sizes, not two per dim
    return TensorSpec(shape, _element_name(rt.element_type))


def tensor_type(spec: TensorSpec) -> ir.RankedTensorType:
    """The ranked tensor type of a TensorSpec (symbolic dims become `?`)."""
    dyn = ir.ShapedType.get_dynamic_size()
    shape = [d if is_static(d) else dyn for d in spec.shape]
    for d in shape:
        if d != dyn and not 0 <= d < MAX_DIM:  # what a model declares or a shape rule computes
            raise ShapeError(f"a dim of {d} cannot be a tensor dim (sizes are 0 to 2^62)")
    return ir.RankedTensorType.get(shape, A.element_type(spec.dtype))
