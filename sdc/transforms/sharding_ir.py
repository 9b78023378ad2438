"""Between the IR and the pure sharding model (sharding.py): read a function into a `Graph`, read
and write `#sdc.sharding` annotations.

Where shardings live in the IR:
- the module's `sdc.mesh` (`#sdc.mesh<["dp", "tp"], array<i64: 2, 2>>`);
- `sdc.shard` ops (user annotations: the result has the op's `sharding`);
- `sdc.sharding` on an op: its result's sharding (an array of them for several results); on an
  entry argument or result (`arg_attrs` / `res_attrs`): the input's or output's sharding. Present
  before propagation, they are user annotations; propagation writes them on every op.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdc.diagnostics import DiagnosticSink
from sdc.dialect import attrs as A
from sdc.dialect.attrs import AttrError, read_dims
from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, arg_dims, arg_names, attr_dicts, entry_function, module_mesh, op_label,
                            read_attrs, result_names, set_attr_dicts, tensor_spec)
from sdc.dialect.mesh import Mesh, Sharding
from sdc.dialect.hooks import OpKind
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import is_static
from sdc.mlir import ir
from sdc.transforms import sharding as S

SHARDING = "sdc.sharding"


def itemsize(dtype: str) -> int:
    if dtype == "i1":
        return 1
    digits = "".join(c for c in dtype if c.isdigit())
    return max(1, int(digits) // 8) if digits else 4


def read_sharding_attr(attr) -> Sharding:
    dims, partial = A.read_sharding(attr)
    return Sharding(tuple(tuple(d) for d in dims), tuple(partial))


def sharding_attr(s: Sharding) -> ir.Attribute:
    return A.sharding([list(d) for d in s.dims], list(s.partial))


def get_mesh(module) -> Mesh | None:
    mesh = module_mesh(module)
    return Mesh.of(mesh) if mesh else None


def op_result_dims(op) -> list[list] | None:
    """The op's `sdc.result_dims` (symbolic dims per result, from sdc-shape-constraints), if any."""
    if "sdc.result_dims" not in op.attributes:
        return None
    try:
        return [read_dims(a) for a in ir.ArrayAttr(op.attributes["sdc.result_dims"])]
    except (AttrError, ValueError):
        return None


def type_dims(t) -> list:
    spec = tensor_spec(t)
    return [d if is_static(d) else None for d in spec.shape]


def _merge(type_d: list, named: list | None) -> list:
    if named is None or len(named) != len(type_d):
        return list(type_d)
    return [t if t is not None else n for t, n in zip(type_d, named)]


@dataclass
class FunctionGraph:
    """A function as a sharding `Graph`, with the IR objects behind each value and op."""

    fn: object
    mesh: Mesh
    graph: S.Graph = field(default_factory=S.Graph)
    ids: dict = field(default_factory=dict)  # ir.Value -> value id
    ir_values: list = field(default_factory=list)  # value id -> ir.Value (None for outputs)
    ir_ops: list = field(default_factory=list)  # op id -> ir.Operation (the func.return for outputs)
    annotations: dict = field(default_factory=dict)  # value id -> (Sharding, origin)
    origins: dict = field(default_factory=dict)  # origin -> the IR op (or function) it names
    outputs: list = field(default_factory=list)  # output value ids, in return order
    dtypes: list = field(default_factory=list)  # value id -> element type


def read_function(fn, mesh: Mesh, diag: DiagnosticSink) -> FunctionGraph | None:
    """The function as a Graph, its annotations checked against the mesh. None (after diagnostics)
    when the function cannot be partitioned."""
    fg = FunctionGraph(fn, mesh)
    block = fn.regions[0].blocks[0]
    names = arg_names(fn)
    arg_dicts = attr_dicts(fn, ARG_ATTRS)
    annotated = arg_dims(fn, skip_bad=True)
    ok = True
    for i, arg in enumerate(block.arguments):
        v = _add_value(fg, arg, _merge(type_dims(arg.type), annotated[i]), "input", f"input '{names[i]}'")
        if SHARDING in arg_dicts[i]:
            origin = f"the sharding of input '{names[i]}'"
            ok &= _annotate(fg, v, arg_dicts[i][SHARDING], origin, fn, diag, f"input '{names[i]}'")
    for op in block.operations:
        op = op.operation
        if op.name == "func.return":
            for j, value in enumerate(op.operands):
                ok &= _add_output(fg, op, j, value, diag)
            continue
        if op.name == "sdc.fusion":
            diag.error(op, "'sdc.fusion' op: sharding runs before fusion (sdc-fuse); partition the program first")
            return None
        if not op.name.startswith("sdc.") or op.name[4:] not in OPS:
            diag.error(op, f"'{op.name}' op: cannot shard an op that is not an sdc op")
            return None
        opdef = OPS[op.name[4:]]
        if opdef.kind == OpKind.COLLECTIVE:
            diag.error(op, f"'{op.name}' op: the program already has collectives; sharding propagation and "
                           "partitioning take the program for one device")
            return None
        try:
            attrs = read_attrs(opdef, op)
        except AttrError as e:
            diag.error(op, f"'{op.name}' op {e}")
            return None
        named = op_result_dims(op)
        results = []
        for k, r in enumerate(op.results):
            dims = _merge(type_dims(r.type), named[k] if named and k < len(named) else None)
            if None in dims and not named:
                dims = _guess_dims(dims, opdef, attrs)
            results.append(_add_value(fg, r, dims, "op", f"result of {op_label(op)}"))
        if opdef.name == "slice" and all(fg.graph.values[fg.ids[o]].kind == "weight" for o in op.operands):
            v = results[0]  # a block of a weight is a weight too: the plan builder slices it
            fg.graph.values[v].kind = "weight"
            fg.graph.values[v].label = f"{fg.graph.values[fg.ids[op.operands[0]]].label} ({_window(attrs)})"
        if opdef.weight:
            v = results[0]
            fg.graph.values[v].kind = "weight"
            fg.graph.values[v].label = (f"parameter '{attrs['name']}'" if opdef.name == "parameter"
                                        else f"the {op_label(op)}")
        operand_dims = [list(fg.graph.values[fg.ids[o]].dims) for o in op.operands]
        result_dims_ = [list(fg.graph.values[v].dims) for v in results]
        if opdef.name == "gather":
            data = operand_dims[0] if operand_dims else []
            axis = attrs.get("axis", 0)
            axis = axis + len(data) if axis < 0 else axis
            if data and not isinstance(data[axis], int):
                # an index block by vocabulary needs the table's size, which must be static
                rule = S.rule_for(opdef.name, opdef.kind, attrs, operand_dims, result_dims_)
                rule.kinds = [S.BLOCKED if k == S.MASKED else k for k in rule.kinds]
            else:
                rule = S.rule_for(opdef.name, opdef.kind, attrs, operand_dims, result_dims_)
        else:
            types = [tensor_spec(o.type).dtype for o in op.operands] + [tensor_spec(r.type).dtype for r in op.results]
            rule = S.rule_for(opdef.name, opdef.kind, attrs, operand_dims, result_dims_, types)
        if not named and not rule.shape_attrs:
            _fill_from_operands(fg.graph, rule, [fg.ids[o] for o in op.operands], results)
        fg.graph.add_op(opdef.name, rule, [fg.ids[o] for o in op.operands], results, op_label(op), op)
        fg.ir_ops.append(op)
        if opdef.name == "shard":
            dims, partial = attrs["sharding"]
            ok &= _check_and_annotate(fg, results[0], Sharding(tuple(map(tuple, dims)), tuple(partial)),
                                      f"the {op_label(op)}", op, diag, "'sdc.shard' op result")
        elif SHARDING in op.attributes:
            attr = op.attributes[SHARDING]
            items = list(ir.ArrayAttr(attr)) if isinstance(attr, ir.ArrayAttr) else [attr]
            if len(items) != len(results):
                diag.error(op, f"'{op.name}' op 'sdc.sharding' gives {len(items)} shardings for "
                               f"{len(results)} results")
                ok = False
                continue
            for k, (v, item) in enumerate(zip(results, items)):
                ok &= _annotate(fg, v, item, f"the sharding of {op_label(op)}", op, diag,
                                f"'{op.name}' op result #{k}")
    return fg if ok else None


def _guess_dims(dims: list, opdef, attrs: dict) -> list:
    """Symbolic names for a result's unknown dims, when sdc-shape-constraints has not recorded them,
    from a `shape` attribute (reshape, broadcast, iota)."""
    spec = opdef.attrs.get("shape")
    shape = attrs.get("shape") if spec is not None and spec.kind == "shape" else None
    if shape is None:
        return dims
    return [shape[d] if size is None and d < len(shape) and isinstance(shape[d], str) else size
            for d, size in enumerate(dims)]


def _window(attrs: dict) -> str:
    axes = list(attrs.get("axes") or range(len(attrs["starts"])))
    return ", ".join(f"dim {a} [{s}:{e}]" for a, s, e in zip(axes, attrs["starts"], attrs["ends"]))


def _fill_from_operands(graph: S.Graph, rule: S.FactorRule, operands: list[int], results: list[int]) -> None:
    """A result dim of unknown size runs over a factor an operand dim of known size runs over too: they are
    the same size (ops whose factors join dims of different sizes, reshape and broadcast, are skipped)."""
    for row, v in zip(rule.results, results):
        dims = list(graph.values[v].dims)
        for d, f in enumerate(row):
            if dims[d] is not None or f is None:
                continue
            for orow, o in zip(rule.operands, operands):
                known = [graph.values[o].dims[j] for j, g in enumerate(orow) if g == f and graph.values[o].dims[j]
                         is not None]
                if known:
                    dims[d] = known[0]
                    break
        graph.values[v].dims = tuple(dims)


def _add_value(fg: FunctionGraph, value, dims: list, kind: str, label: str) -> int:
    spec = tensor_spec(value.type)
    v = fg.graph.add_value(dims, itemsize(spec.dtype), kind, label)
    fg.ids[value] = v
    fg.ir_values.append(value)
    fg.dtypes.append(spec.dtype)
    return v


def _add_output(fg: FunctionGraph, ret, j: int, value, diag: DiagnosticSink) -> bool:
    src = fg.ids[value]
    dims = list(fg.graph.values[src].dims)
    out = fg.graph.add_value(dims, fg.graph.values[src].itemsize, "output", f"output #{j}")
    fg.ir_values.append(None)
    fg.dtypes.append(fg.dtypes[src])
    fs_rule = S.rule_for("shard", "sharding", {}, [dims], [dims])
    fs_rule.linear = ""  # an output is whole: partial sums are added up before the return
    fg.graph.add_op("return", fs_rule, [src], [out], f"output #{j}", ret)
    fg.ir_ops.append(ret)
    fg.outputs.append(out)
    res = attr_dicts(fg.fn, RES_ATTRS)
    if j < len(res) and SHARDING in res[j]:
        return _annotate(fg, out, res[j][SHARDING], f"the sharding of output #{j}", fg.fn, diag, f"output #{j}")
    return True


def _annotate(fg, v, attr, origin, where, diag, what) -> bool:
    try:
        s = read_sharding_attr(attr)
    except AttrError as e:
        if diag is not None:
            diag.error(where, f"{what}: 'sdc.sharding' {e}")
        return False
    return _check_and_annotate(fg, v, s, origin, where, diag, what)


def _check_and_annotate(fg, v, s: Sharding, origin, where, diag, what) -> bool:
    value = fg.graph.values[v]
    problem = check_sharding(s, value.dims, fg.mesh)
    if problem:
        if diag is not None:
            diag.error(where, f"{what} cannot be sharded {s}: {problem}")
        return False
    fg.annotations[v] = (s, origin)
    fg.origins[origin] = where
    return True


def check_sharding(s: Sharding, dims, mesh: Mesh) -> str | None:
    if s.rank != len(dims):
        return f"it has {s.rank} dims, the tensor has rank {len(dims)}"
    bad = s.check(mesh)
    if bad:
        return bad
    for d, axes in enumerate(s.dims):
        n = mesh.size(axes)
        if n > 1 and isinstance(dims[d], int) and dims[d] % n:
            names = ", ".join(f"'{a}'" for a in axes)
            return (f"dim {d} of size {dims[d]} is not divisible by mesh axis {names} "
                    f"({n} devices)")
    return None


def write_shardings(fg: FunctionGraph, shardings: list[Sharding]) -> None:
    """Write the solution: `sdc.sharding` on every op, entry argument and entry result."""
    fn = fg.fn
    for op_index, op in enumerate(fg.graph.ops):
        ir_op = fg.ir_ops[op_index]
        if op.name in ("return", "shard") or not op.results:
            continue
        items = [sharding_attr(shardings[v]) for v in op.results]
        ir_op.attributes[SHARDING] = items[0] if len(items) == 1 else ir.ArrayAttr.get(items)
    block = fn.regions[0].blocks[0]
    dicts = attr_dicts(fn, ARG_ATTRS)
    for i, arg in enumerate(block.arguments):
        dicts[i][SHARDING] = sharding_attr(shardings[fg.ids[arg]])
    set_attr_dicts(fn, ARG_ATTRS, dicts)
    res = attr_dicts(fn, RES_ATTRS)
    for j, out in enumerate(fg.outputs):
        res[j][SHARDING] = sharding_attr(Sharding(shardings[out].dims))
    set_attr_dicts(fn, RES_ATTRS, res)


# ---------------------------------------------------------------- the compile driver's options


def prepare_mesh(module, mesh, shardings) -> bool:
    """Give the module the mesh `mesh` (a Mesh, dict or "dp=2,tp=2"; None keeps the module's own) and the
    user `shardings` (name -> per-dim axes); True when the module then has a mesh. Raises SdcError."""
    from sdc.diagnostics import SdcError
    from sdc.dialect.mesh import MeshError

    op = module.operation if hasattr(module, "operation") else module
    with op.context:
        if mesh is not None:
            try:
                m = Mesh.parse(mesh) if isinstance(mesh, str) else Mesh.of(mesh)
            except (MeshError, TypeError, ValueError) as e:
                raise SdcError(f"bad mesh {mesh!r}: {e}") from None
            existing = module_mesh(op)
            if existing and existing != m.as_dict():
                have = ",".join(f"{a}={n}" for a, n in existing.items())
                raise SdcError(f"the module already has the mesh {have}, which differs from the mesh {m} asked for")
            op.attributes["sdc.mesh"] = A.mesh(m.as_dict())
        current = module_mesh(op)
        if shardings:
            if not current:
                raise SdcError("shardings need a device mesh (give mesh=..., or --mesh)")
            apply_shardings(op, shardings)
        return bool(current)


def apply_shardings(module, shardings: dict) -> None:
    """User annotations by name: an entry input or output (its `sdc.name`, else argN / outputN) or a
    parameter. Raises SdcError for an unknown name or a spec of the wrong rank."""
    from sdc.diagnostics import SdcError

    fn = entry_function(module)
    block = fn.regions[0].blocks[0]
    in_names = arg_names(fn)
    args = attr_dicts(fn, ARG_ATTRS)
    res = attr_dicts(fn, RES_ATTRS)
    res_names = result_names(fn)
    returned = [op.operation for op in block.operations if op.operation.name == "func.return"][0].operands
    params = {}
    for op in block.operations:
        op = op.operation
        if op.name == "sdc.parameter":
            params.setdefault(ir.StringAttr(op.attributes["name"]).value, []).append(op)
    for name, spec in shardings.items():
        s = spec if isinstance(spec, Sharding) else Sharding.of(list(spec))
        if name in in_names:
            i = in_names.index(name)
            _rank_check(s, block.arguments[i].type, f"input '{name}'")
            args[i][SHARDING] = sharding_attr(s)
        elif name in res_names:
            j = res_names.index(name)
            _rank_check(s, returned[j].type, f"output '{name}'")
            res[j][SHARDING] = sharding_attr(s)
        elif name in params:
            for op in params[name]:
                _rank_check(s, op.results[0].type, f"parameter '{name}'")
                op.attributes[SHARDING] = sharding_attr(s)
        else:
            known = ", ".join(in_names + res_names + sorted(params)[:20])
            raise SdcError(f"shardings name '{name}', which is no input, output or parameter (known: {known})")
    set_attr_dicts(fn, ARG_ATTRS, args)
    set_attr_dicts(fn, RES_ATTRS, res)


def _rank_check(s: Sharding, t, what: str) -> None:
    from sdc.diagnostics import SdcError

    rank = tensor_spec(t).rank
    if s.rank != rank:
        raise SdcError(f"the sharding {s} of {what} has {s.rank} dims, {what} has rank {rank}")
