"""sdc-spmd-partition: rewrite each function into the program one device runs.

Input: a module with an `sdc.mesh` whose values carry shardings (sdc-sharding-propagation's output;
an op without one gets whatever its operands give). Output, on every device the same program:

- local types: a dim split n ways is n times smaller (`tensor<8x784xf32>` split over dp=2 becomes
  `tensor<4x784xf32>`); shape attributes follow (`["B", 64]` becomes `["B//2", 64]`: symbols keep
  naming the global sizes). Entry arguments take the local blocks; their `sdc.dims` stay global and
  `sdc.sharding` says how they are split.
- collectives exactly where an op needs its operand in another sharding than it has
  (`sharding.reshard`): all_reduce of partial sums, reduce_scatter, all_gather, all_to_all, and
  all_slice (no data moves) from whole to split. Each carries `sdc.reason` (why), `sdc.bytes` (the
  bytes each device sends per run) and `sdc.tensor` (what it moves), and the location of the op that
  needed it; `sdc compile --explain sharding` lists them.
- weights stay global `sdc.parameter`s and `sdc.constant`s followed by `sdc.all_slice`: the plan
  builder slices them once per rank, so each rank's weights file holds its block only.
- a gather from a table split by rows (an embedding split by vocabulary) becomes a masked gather of
  the local rows, a partial sum.
- `sdc.shard` ops disappear (into the collectives they need), symbolic dims that are split get a
  run-time guard (`B % 2 == 0`) in the entry function's `sdc.guards`, and the module gets
  `sdc.partitioned`.

Without a mesh it only removes `sdc.shard` ops (a one-device program ignores its annotations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sdc import dtypes
from sdc.diagnostics import DiagnosticSink
from sdc.dialect import attrs as A
from sdc.dialect.dense import DenseValue
from sdc.dialect import symexpr
from sdc.dialect.ir import (ARG_ATTRS, RES_ATTRS, arg_dims, attr_dicts, defined_functions, read_attrs, set_attr_dicts,
                            tensor_spec, tensor_type)
from sdc.dialect.builder import create
from sdc.dialect.mesh import Mesh, Sharding, local_dim
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import TensorSpec, is_static
from sdc.dialect.symexpr import SymExprError
from sdc.mlir import ir
from sdc.transforms import sharding as S
from sdc.transforms.base import ModulePass, walk_ops
from sdc.transforms.sharding_ir import SHARDING, FunctionGraph, get_mesh, read_function, sharding_attr
from sdc.transforms.sharding_propagation import PARTITIONED

if TYPE_CHECKING:
    import torch
else:
    from sdc.lazy import lazy_import

    torch = lazy_import("torch")  # for bf16 constants only: `sdc-opt --list-passes` needs no torch

REASON, BYTES, TENSOR = "sdc.reason", "sdc.bytes", "sdc.tensor"


@dataclass(frozen=True)
class SpmdPartitionPass(ModulePass):
    """No options."""

    name = "sdc-spmd-partition"
    summary = "rewrite into the per-device program: local shapes, collectives where shardings change"

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        if PARTITIONED in module.attributes:
            return
        mesh = get_mesh(module)
        for fn in defined_functions(module):
            if mesh is None:
                _erase_shards(fn)
                continue
            fg = read_function(fn, mesh, diag)
            if fg is not None:
                _Partitioner(fg, mesh, diag).run()
        if mesh is not None and not diag.has_errors:
            module.attributes[PARTITIONED] = ir.UnitAttr.get()


def _generates(name: str) -> bool:
    """An op without operands whose results each device makes for itself (its sharding rule is the
    generator's: parameters, constants, iotas)."""
    opdef = OPS.get(name)
    return opdef is not None and opdef.sharding.rule == "generator"


def _erase_shards(fn) -> None:
    for op in walk_ops(fn, "sdc.shard"):
        if op.name == "sdc.shard":
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()


class _Partitioner:
    def __init__(self, fg: FunctionGraph, mesh: Mesh, diag: DiagnosticSink):
        self.fg = fg
        self.graph = fg.graph
        self.mesh = mesh
        self.diag = diag
        self.local: dict[int, ir.Value] = {}  # value id -> its local IR value
        self.sharding: dict[int, Sharding] = {}  # value id -> the sharding of that local value
        self.cache: dict[tuple[int, Sharding], tuple[ir.Value, Sharding]] = {}
        self.guards: dict[str, str] = {}
        self.symbols = _input_symbols(fg.fn)

    # ------------------------------------------------------------ the walk

    def run(self) -> None:
        fn = self.fg.fn
        block = fn.regions[0].blocks[0]
        for arg in block.arguments:
            v = self.fg.ids[arg]
            s = self._annotation(v) or Sharding.replicated(len(self.graph.values[v].dims))
            s = s.with_partial(())
            spec = tensor_spec(arg.type)
            arg.set_type(tensor_type(self._local_spec(spec, s)))
            self.local[v], self.sharding[v] = arg, s
            self._guard(v, s)
        for index, op in enumerate(self.graph.ops):
            ir_op = self.fg.ir_ops[index]
            if op.name == "return":
                continue
            if _generates(op.name):
                self._generator(index, op, ir_op)
            elif op.name == "shard":
                self._shard(index, op, ir_op)
            else:
                self._op(index, op, ir_op)
        self._returns(block)
        self._signature(fn, block)
        self._write_guards(fn)

    def _annotation(self, v: int) -> Sharding | None:
        found = self.fg.annotations.get(v)
        return found[0] if found else None

    def _generator(self, index: int, op: S.Op, ir_op) -> None:
        v = op.results[0]
        made = Sharding.replicated(len(self.graph.values[v].dims))
        original = ir_op.results[0]
        self.local[v], self.sharding[v] = original, made
        want = self._annotation(v)
        if want is None or want.with_partial(()) == made:
            return
        want = want.with_partial(())
        value, s, created = self._reshard(v, want, ir_op, f"{op.label} is wanted {_as(want)}", after=ir_op)
        original.replace_all_uses_except(value, created[0])
        self.local[v], self.sharding[v] = value, s
        self._guard(v, s)

    def _shard(self, index: int, op: S.Op, ir_op) -> None:
        src, out = op.operands[0], op.results[0]
        want = self._annotation(out)
        asked = str(want) if not want.is_replicated else "it whole"
        value, s = self._reshard(src, want, ir_op, f"{op.label} asks for {asked}")
        ir_op.results[0].replace_all_uses_with(value)
        ir_op.erase()
        self.local[out], self.sharding[out] = value, s
        self._guard(out, s)

    def _op(self, index: int, op: S.Op, ir_op) -> None:
        wanted = [self._annotation(v) for v in op.results]
        plan = S.plan_op(op, [self.sharding[v] for v in op.operands],
                         [w.dims if w is not None else None for w in wanted], self.graph, self.mesh)
        operands = []
        for i, (v, need) in enumerate(zip(op.operands, plan.operands)):
            value, _ = self._reshard(v, need, ir_op, f"{op.label} needs operand #{i} {_as(need)}")
            operands.append(value)
        opdef = OPS[op.name]
        attrs = read_attrs(opdef, ir_op)
        extra = {k: a for k, a in _discardable(ir_op).items() if k not in ("sdc.result_dims", SHARDING)}
        with ir.InsertionPoint(ir_op), ir_op.location:
            self._localize(op, attrs, plan)
            if plan.masked:
                new_results = [self._masked_gather(op, ir_op, operands, attrs, plan)]
            else:
                new = create(op.name, operands, {**attrs, **extra}, mesh=self.mesh.as_dict())
                new_results = list(new.results)
        for k, (v, made) in enumerate(zip(op.results, plan.results)):
            value = new_results[k]
            owner = value.owner
            _set_result_dims(owner, k, len(op.results), S.local_dims(self.graph.values[v].dims, made, self.mesh),
                             "sdc.result_dims" in ir_op.attributes)
            owner.attributes[SHARDING] = _sharding_attrs(owner, k, len(op.results), made)
            self.local[v], self.sharding[v] = value, made
            want = wanted[k]
            if want is not None:
                target = Sharding(want.dims, tuple(a for a in want.partial if a in made.partial))
                if target != made:
                    value, made = self._reshard(v, target, ir_op, f"{op.label} result #{k} is wanted {_as(target)}")
                    self.local[v], self.sharding[v] = value, made
            ir_op.results[k].replace_all_uses_with(self.local[v])
            self._guard(v, self.sharding[v])
        ir_op.erase()

    def _returns(self, block) -> None:
        ret = None
        for op in block.operations:
            if op.operation.name == "func.return":
                ret = op.operation
        if ret is None:
            return
        for j, out in enumerate(self.fg.outputs):
            src = self.graph.ops[self.graph.values[out].producer].operands[0]
            want = self._annotation(out)
            want = Sharding(want.dims) if want is not None else Sharding(self.sharding[src].dims)
            value, s = self._reshard(src, want, ret, f"output #{j} is returned {_as(want)}")
            ret.operands[j] = value
            self.sharding[out] = s

    def _signature(self, fn, block) -> None:
        ret = [op.operation for op in block.operations if op.operation.name == "func.return"][0]
        fn_type = ir.FunctionType.get([a.type for a in block.arguments], [v.type for v in ret.operands])
        fn.attributes["function_type"] = ir.TypeAttr.get(fn_type)
        res = attr_dicts(fn, RES_ATTRS)
        for j, out in enumerate(self.fg.outputs):
            res[j][SHARDING] = sharding_attr(self.sharding[out])
        set_attr_dicts(fn, RES_ATTRS, res)
        args = attr_dicts(fn, ARG_ATTRS)
        for i, arg in enumerate(block.arguments):
            args[i][SHARDING] = sharding_attr(self.sharding[self.fg.ids[arg]])
        set_attr_dicts(fn, ARG_ATTRS, args)

    # ------------------------------------------------------------ collectives

    def _reshard(self, v: int, want: Sharding, requirer, why: str, after=None):
        """The local value of `v` in sharding `want`, and the collectives made for it: before
        `requirer`, or right after the op `after` (cached when before a requirer)."""
        have = self.sharding[v]
        if have == want:
            return (self.local[v], have) if after is None else (self.local[v], have, [])
        key = (v, want)
        if key in self.cache and after is None:
            return self.cache[key]
        info = self.graph.values[v]
        x, cur = self.local[v], have
        created = []
        try:
            steps = S.reshard(have, want, self.mesh)
        except S.ShardingError as e:
            self.diag.error(requirer, f"'{requirer.name}' op cannot be partitioned: {why}, but {info.label} is "
                                      f"{have} ({e})")
            return (x, have) if after is None else (x, have, [])
        for step in steps:
            before = S.local_dims(info.dims, cur, self.mesh)
            nxt = step.apply(cur)
            with ir.InsertionPoint(requirer), requirer.location:
                new = create(step.kind, [x], _step_attrs(step), mesh=self.mesh.as_dict())
            if after is not None:
                new.move_after(created[-1] if created else after)
            new.attributes[REASON] = ir.StringAttr.get(_reason(step, why))
            new.attributes[BYTES] = ir.StringAttr.get(_bytes_text(step, before, info.itemsize, self.mesh))
            new.attributes[TENSOR] = ir.StringAttr.get(
                f"{info.label}, {_dtype_of(x)}[{', '.join(str(d) for d in before)}] per device")
            new.attributes[SHARDING] = sharding_attr(nxt)
            _set_result_dims(new, 0, 1, S.local_dims(info.dims, nxt, self.mesh), True)
            created.append(new)
            x, cur = new.results[0], nxt
        if after is not None:
            return x, cur, created
        self.cache[key] = (x, cur)
        return x, cur

    # ------------------------------------------------------------ local attributes

    def _localize(self, op: S.Op, attrs: dict, plan: S.OpPlan) -> None:
        rule = op.rule
        for name in rule.shape_attrs:
            if name not in attrs or not rule.results:
                continue
            row = rule.results[0]
            shape = list(attrs[name])
            for d, f in enumerate(row):
                if f is None or d >= len(shape):
                    continue
                n = self.mesh.size(plan.factor_axes[f])
                if n > 1 and shape[d] != -1:
                    shape[d] = local_dim(shape[d], n)
            attrs[name] = shape
        groups = rule.role("groups")
        if groups is not None and "groups" in attrs:
            attrs["groups"] = attrs["groups"] // self.mesh.size(plan.factor_axes[groups])

    def _masked_gather(self, op: S.Op, ir_op, operands, attrs, plan: S.OpPlan) -> ir.Value:
        """gather from rows split over `axes`: each device gathers the indices in its block, zeroes the
        others, and the result is a partial sum over `axes`."""
        (f, axes), = plan.masked.items()
        data, indices = operands
        data_dims = self.graph.values[op.operands[0]].dims
        axis = op.rule.operands[0].index(f)
        total = int(data_dims[axis])
        n = self.mesh.size(axes)
        block = total // n
        idx_dtype = tensor_spec(indices.type).dtype
        data_dtype = tensor_spec(data.type).dtype
        idx_rank = tensor_spec(indices.type).rank
        mesh = self.mesh.as_dict()

        def const(value, dtype):
            return create("constant", [], {"value": _dense(value, dtype)}).results[0]

        def mk(name, ins, a=None):
            return create(name, ins, a or {}, mesh=mesh).results[0]

        offsets = const(np.arange(n) * block, idx_dtype)
        offset = mk("all_slice", [offsets], {"mesh_axes": list(axes), "axis": 0})
        if idx_rank == 0:
            offset = mk("reshape", [offset], {"shape": []})
        zero, size, rows = const(0, idx_dtype), const(total, idx_dtype), const(block, idx_dtype)
        wrapped = mk("where", [mk("lt", [indices, zero]), mk("add", [indices, size]), indices])
        local = mk("sub", [wrapped, offset])
        inside = mk("and", [mk("ge", [local, zero]), mk("lt", [local, rows])])
        gathered = mk("gather", [data, mk("where", [inside, local, zero])], {"axis": attrs["axis"]})
        out_rank = tensor_spec(gathered.type).rank
        lead, trail = axis, out_rank - axis - idx_rank
        mask = inside
        if lead or trail:
            mask = mk("unsqueeze", [inside], {"axes": list(range(lead)) +
                                              list(range(lead + idx_rank, lead + idx_rank + trail))})
        return mk("where", [mask, gathered, const(0, data_dtype)])

    # ------------------------------------------------------------ types and guards

    def _local_spec(self, spec: TensorSpec, s: Sharding) -> TensorSpec:
        shape = []
        for d, size in enumerate(spec.shape):
            n = self.mesh.size(s.dims[d])
            shape.append(size // n if is_static(size) else size)
        return TensorSpec(tuple(shape), spec.dtype)

    def _guard(self, v: int, s: Sharding) -> None:
        value = self.graph.values[v]
        for d, axes in enumerate(s.dims):
            n = self.mesh.size(axes)
            size = value.dims[d] if d < len(value.dims) else None
            if n == 1 or size is None or isinstance(size, int):
                continue
            text = str(size)
            try:
                tree = symexpr.parse(text)
            except SymExprError:
                continue
            used = set(symexpr.free_symbols(tree))
            if not used or not used <= self.symbols:
                continue
            cond = symexpr.to_text(symexpr.Compare(("==",), (symexpr.BinOp("%", tree, symexpr.Int(n)), symexpr.Int(0))))
            if cond not in self.guards:
                self.guards[cond] = (f"{text} is split over mesh axis {', '.join(axes)} ({n} devices) in "
                                     f"{value.label}; it must be a multiple of {n}")

    def _write_guards(self, fn) -> None:
        if not self.guards:
            return
        existing = list(ir.ArrayAttr(fn.attributes["sdc.guards"])) if "sdc.guards" in fn.attributes else []
        have = {str(g) for g in existing}
        for cond, message in self.guards.items():
            g = A.guard(cond, message)
            if str(g) not in have:
                existing.append(g)
        fn.attributes["sdc.guards"] = ir.ArrayAttr.get(existing)


# ---------------------------------------------------------------- helpers


def _input_symbols(fn) -> set[str]:
    out = set()
    for dims in arg_dims(fn):
        for d in dims or []:
            if isinstance(d, str):
                out.add(d)
    return out


def _discardable(op) -> dict:
    attrs = op.attributes
    return {attrs[i].name: attrs[i].attr for i in range(len(attrs)) if "." in attrs[i].name}


def _step_attrs(step: S.Step) -> dict:
    """The attributes of the collective op a resharding step becomes (the step's kind names it)."""
    takes = OPS[step.kind].attrs
    out: dict = {"mesh_axes": list(step.axes)}
    if "reduction" in takes:
        out["reduction"] = "sum"
    if "axis" in takes:
        out["axis"] = step.dim
    if "split_axis" in takes:
        out["split_axis"] = step.split
        out["concat_axis"] = step.dim
    return out


def _as(s: Sharding) -> str:
    if s.is_replicated:
        return "whole"
    return f"as {s}"


def _reason(step: S.Step, why: str) -> str:
    axes = ",".join(step.axes)
    if step.kind == "all_reduce":
        what = f"it is a partial sum over {axes}: summed"
    elif step.kind == "reduce_scatter":
        what = f"it is a partial sum over {axes}: summed and split along dim {step.dim} in one step"
    elif step.kind == "all_gather":
        what = f"dim {step.dim} is split over {axes}: gathered"
    elif step.kind == "all_to_all":
        what = f"dim {step.dim} is split over {axes} and dim {step.split} is wanted split instead: exchanged"
    else:
        what = f"dim {step.dim} is whole and wanted split over {axes}: each device keeps its block, nothing is sent"
    return f"{why}; {what}"


def _bytes_text(step: S.Step, local_dims: list, itemsize: int, mesh: Mesh) -> str:
    factor = step.bytes_sent(1.0, mesh)  # bytes sent per local byte
    if factor == 0.0:
        return "0"
    if all(isinstance(d, int) for d in local_dims):
        total = itemsize * factor
        for d in local_dims:
            total *= d
        return str(int(round(total)))
    size = S.describe_bytes(local_dims, itemsize)[:-2]
    return size if factor == 1.0 else f"{_num(factor)}*{size}"


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:.3g}"


def _dtype_of(value) -> str:
    return tensor_spec(value.type).dtype


def _set_result_dims(op, k: int, n: int, dims: list, enabled: bool) -> None:
    if not enabled or any(d is None for d in dims):
        return
    entries = []
    if "sdc.result_dims" in op.attributes and n > 1:
        entries = list(ir.ArrayAttr(op.attributes["sdc.result_dims"]))
    while len(entries) < n:
        entries.append(A.dims([d if d is not None else "?" for d in dims]))
    entries[k] = A.dims(dims)
    op.attributes["sdc.result_dims"] = ir.ArrayAttr.get(entries)


def _sharding_attrs(op, k: int, n: int, s: Sharding):
    if n == 1:
        return sharding_attr(s)
    existing = list(ir.ArrayAttr(op.attributes[SHARDING])) if SHARDING in op.attributes else []
    while len(existing) < n:
        existing.append(sharding_attr(s))
    existing[k] = sharding_attr(s)
    return ir.ArrayAttr.get(existing)


def _dense(value, dtype: str) -> DenseValue:
    if dtype == "bf16":
        return DenseValue(torch.tensor(value, dtype=torch.bfloat16), "bf16")
    array = np.asarray(value, dtype=dtypes.to_numpy(dtype))
    return DenseValue.from_numpy(array)
