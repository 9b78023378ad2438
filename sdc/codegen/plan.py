"""The execution plan: a module's entry function as ordered steps per rank, plus its weights.

`build_plan(module, params)` walks `@main` in order. Each `sdc.fusion` becomes one kernel group
(a step whose ops are the region's ops, in order); any other sdc op is a step of its own.
`sdc.parameter` and `sdc.constant` make no step: their values are weights, stored in the rank's
weights file and bound by name at load time. A weight with a non-row-major `sdc.layout` is stored
in that physical order (its value records the `layout`; the runtime views it back logically), and
a `sdc.layout_cast` keeps the `reason` the layout pass gave it.

Every value gets an id with its shape (ints, symbol names, "?")
and dtype, and each step lists the intermediates whose last use it is, so the runtime frees
them as it goes. The plan is plain JSON (`Plan.to_json()`); see docs/artifact.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch

from sdc import dtypes
from sdc.diagnostics import SdcError, parse_location
from sdc.dialect.attrs import AttrError, read_dims
from sdc.dialect.op_classes import module_mesh, read_attrs, tensor_spec
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import TensorSpec, is_static
from sdc.interpreter import arg_dims, arg_names, entry_function
from sdc.mlir import ir
from sdc.runtime.format import TARGETS, encode_value, weights_file

UNKNOWN = "?"


@dataclass
class RankPlan:
    rank: int
    values: dict[str, dict] = field(default_factory=dict)  # id -> {"shape", "dtype"[, "weight"]}
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    weights: dict[str, torch.Tensor] = field(default_factory=dict)
    coords: dict[str, int] | None = None  # the rank's position on the mesh (partitioned programs)

    def to_json(self) -> dict:
        out = {"rank": self.rank, "weights": weights_file(self.rank), "values": self.values,
               "inputs": self.inputs, "outputs": self.outputs, "steps": self.steps}
        if self.coords is not None:
            out["coords"] = self.coords
        return out


@dataclass
class Plan:
    target: str
    mesh: dict[str, int]
    world_size: int
    inputs: list[dict]  # {"name", "dtype", "shape"}
    outputs: list[dict]
    guards: list[dict]  # {"condition", "message"}
    ranks: list[RankPlan]
    shardings: dict | None = None  # how each input and output is split (partitioned programs)

    def to_json(self) -> dict:
        out = {"target": self.target, "world_size": self.world_size, "mesh": self.mesh,
               "ranks": [r.to_json() for r in self.ranks]}
        if self.shardings is not None:
            out["shardings"] = self.shardings
        return out


def build_plan(module, params: Mapping[str, Any] | None = None, target: str = "cpu") -> Plan:
    """Plan the module's entry function for `target`; `params` holds the `sdc.parameter` values."""
    if target not in TARGETS:
        raise SdcError(f"unknown target '{target}' (targets: {', '.join(TARGETS)})")
    module_op = module.operation if hasattr(module, "operation") else module
    mesh = module_mesh(module_op) or {}
    world_size = 1
    for size in mesh.values():
        world_size *= size
    if world_size != 1 and "sdc.partitioned" not in module_op.attributes:
        raise SdcError(f"the module's mesh {mesh} has {world_size} devices but the program is not partitioned: "
                       "run sdc-sharding-propagation and sdc-spmd-partition first (sdc compile --mesh does)")
    if mesh and "sdc.partitioned" in module_op.attributes:
        return _build_ranks(module_op, params or {}, target, mesh)
    with module_op.context:
        builder = _RankBuilder(0, params or {})
        entry = entry_function(module_op)
        inputs, outputs = builder.walk(entry)
        guards = entry_guards(entry)
    return Plan(target=target, mesh=mesh, world_size=world_size, inputs=inputs, outputs=outputs, guards=guards,
                ranks=[builder.plan])


def _build_ranks(module_op, params: Mapping[str, Any], target: str, mesh_axes: dict[str, int]) -> Plan:
    """A partitioned program: one rank plan per device, each holding its weight blocks (sdc/codegen/ranks.py)."""
    from sdc.codegen import ranks as R
    from sdc.dialect.mesh import Mesh

    mesh = Mesh.of(mesh_axes)
    plans = []
    with module_op.context:
        entry = entry_function(module_op)
        for rank in range(mesh.world_size):
            builder = _RankBuilder(rank, params)
            builder.mesh = mesh
            inputs, outputs = builder.walk(entry)
            R.prune_weights(builder.plan)
            builder.plan.coords = mesh.coords(rank)
            plans.append(builder.plan)
        in_shardings = R.io_shardings(entry, "arg_attrs", len(inputs))
        out_shardings = R.io_shardings(entry, "res_attrs", len(outputs))
        R.globalize(inputs, in_shardings, mesh)
        R.globalize(outputs, out_shardings, mesh)
        for plan in plans:
            R.localize_inputs(plan, in_shardings, mesh)
        table = R.sharding_table(entry, len(inputs), len(outputs))
        guards = entry_guards(entry)
    return Plan(target=target, mesh=mesh_axes, world_size=mesh.world_size, inputs=inputs, outputs=outputs,
                guards=guards, ranks=plans, shardings=table)


class _RankBuilder:
    def __init__(self, rank: int, params: Mapping[str, Any]):
        self.plan = RankPlan(rank)
        self.params = params
        self.ids: dict[Any, str] = {}  # ir.Value -> value id
        self.produced_by: dict[str, int] = {}  # intermediate value id -> index of its step
        self.last_use: dict[str, int] = {}
        self.param_errors: list[str] = []
        self.constants = 0
        self.logical: dict[str, torch.Tensor] = {}  # parameter values, in their logical order
        self.mesh = None  # the device mesh of a partitioned program (see _build_ranks)

    # ------------------------------------------------------------ values

    def _new_value(self, value, shape: list | None = None, **extra) -> str:
        vid = f"v{len(self.plan.values)}"
        spec = tensor_spec(value.type)
        dims = [d if is_static(d) else UNKNOWN for d in spec.shape]
        if shape is not None:  # symbolic names from an annotation refine the type's "?"
            dims = [s if d == UNKNOWN else d for d, s in zip(dims, shape)]
        self.plan.values[vid] = {"shape": dims, "dtype": spec.dtype, **extra}
        self.ids[value] = vid
        return vid

    def _constant_name(self) -> str:
        while True:
            name = f"sdc.constant.{self.constants}"
            self.constants += 1
            if name not in self.plan.weights and name not in self.params:
                return name

    def _store_weight(self, name: str, tensor: torch.Tensor) -> str:
        self.plan.weights[name] = tensor
        return name

    # ------------------------------------------------------------ the walk

    def walk(self, fn) -> tuple[list[dict], list[dict]]:
        block = fn.regions[0].blocks[0]
        names = arg_names(fn)
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise SdcError(f"two entry inputs are named '{dup}'")
        inputs = []
        for arg, name, dims in zip(block.arguments, names, arg_dims(fn)):
            vid = self._new_value(arg, dims)
            self.plan.inputs.append(vid)
            v = self.plan.values[vid]
            inputs.append({"name": name, "dtype": v["dtype"], "shape": list(v["shape"])})
        returned = None
        for op in block.operations:
            op = op.operation
            if op.name == "func.return":
                returned = list(op.operands)
                break
            self._op(op)
        if self.param_errors:
            raise SdcError("parameters without a usable value: " + "; ".join(self.param_errors))
        if returned is None:
            raise SdcError("the entry function has no func.return")
        outputs = self._outputs(fn, returned)
        self._free_lists()
        return inputs, outputs

    def _op(self, op) -> None:
        if op.name == "sdc.fusion":
            self._fusion(op)
            return
        if not op.name.startswith("sdc.") or op.name[4:] not in OPS:
            raise SdcError(f"{_loc(op) or 'the entry function'}: cannot compile '{op.name}': "
                           "the entry function may hold only sdc ops")
        opdef = OPS[op.name[4:]]
        attrs = self._attrs(opdef, op)
        if opdef.name == "parameter":
            self._parameter(op, attrs["name"], _layout(op))
            return
        if opdef.name in ("all_slice", "slice") and self.mesh is not None:
            from sdc.codegen.ranks import fold_weight_op

            if fold_weight_op(self, op, opdef, attrs, _layout(op)):
                return
        if opdef.name == "constant":
            layout = _layout(op)
            name = self._store_weight(self._constant_name(), _physical(attrs["value"].tensor, layout))
            self._new_value(op.results[0], weight=name, **({"layout": layout} if layout else {}))
            return
        step_index = len(self.plan.steps)
        self.plan.steps.append({"kind": "kernel", "id": f"k{step_index}",
                                "ops": [self._entry(opdef, op, attrs, step_index)], "free": []})

    def _attrs(self, opdef, op) -> dict:
        try:
            return read_attrs(opdef, op)
        except AttrError as e:
            raise SdcError(f"{_loc(op)}: '{op.name}' {e}") from None

    def _entry(self, opdef, op, attrs: dict, step_index: int) -> dict:
        ins = [self.ids[v] for v in op.operands]
        for vid in ins:
            self.last_use[vid] = step_index
        outs = [self._new_value(r) for r in op.results]
        for vid in outs:
            self.produced_by[vid] = step_index
        encoded = {k: encode_value(v, lambda d: self._store_weight(self._constant_name(), d.tensor))
                   for k, v in attrs.items()}
        entry = {"op": opdef.name, "attrs": encoded, "inputs": ins, "outputs": outs, "loc": _loc(op)}
        if "sdc.reason" in op.attributes:
            entry["reason"] = ir.StringAttr(op.attributes["sdc.reason"]).value
        return entry

    def _fusion(self, op) -> None:
        """One kernel group: the region's ops in order; the fusion's results are the values its yield names."""
        step_index = len(self.plan.steps)
        entries = []
        for inner in op.regions[0].blocks[0].operations:
            inner = inner.operation
            if inner.name == "sdc.yield":
                for result, value in zip(op.results, inner.operands):
                    self.ids[result] = self.ids[value]
                continue
            if not inner.name.startswith("sdc.") or inner.name[4:] not in OPS or inner.name in (
                    "sdc.parameter", "sdc.constant"):
                raise SdcError(f"{_loc(inner) or 'a fusion region'}: cannot compile '{inner.name}' inside "
                               "'sdc.fusion'")
            opdef = OPS[inner.name[4:]]
            entries.append(self._entry(opdef, inner, self._attrs(opdef, inner), step_index))
        self.plan.steps.append({"kind": "kernel", "id": f"k{step_index}", "ops": entries, "free": []})

    def _parameter(self, op, name: str, layout: list[int] | None = None) -> None:
        declared = tensor_spec(op.results[0].type)
        if name in self.logical:
            self._check_param(name, self.logical[name], declared)
        else:
            tensor = self._param_tensor(name)
            if tensor is not None and self._check_param(name, tensor, declared):
                self.logical[name] = tensor
        # the same weight in another physical order is another tensor of the weights file
        key = f"{name}@{','.join(map(str, layout))}" if layout else name
        if name in self.logical and key not in self.plan.weights:
            self.plan.weights[key] = _physical(self.logical[name], layout)
        self._new_value(op.results[0], weight=key, **({"layout": layout} if layout else {}))

    def _param_tensor(self, name: str) -> torch.Tensor | None:
        if name not in self.params:
            self.param_errors.append(f"'{name}' is missing")
            return None
        value = self.params[name]
        if isinstance(value, torch.Tensor):
            return value.detach().cpu()
        array = np.asarray(value)
        try:
            dtypes.from_numpy(array.dtype)
        except KeyError:
            self.param_errors.append(f"'{name}' has unsupported dtype {array.dtype}")
            return None
        return torch.from_numpy(np.ascontiguousarray(array))

    def _check_param(self, name: str, tensor: torch.Tensor, declared: TensorSpec) -> bool:
        got = dtypes.from_torch(tensor.dtype)
        shape = tuple(tensor.shape)
        if got != declared.dtype or len(shape) != declared.rank or any(
                is_static(w) and w != s for s, w in zip(shape, declared.shape)):
            self.param_errors.append(f"'{name}' is {got}{list(shape)}, the IR declares {declared}")
            return False
        return True

    def _outputs(self, fn, returned) -> list[dict]:
        names = [f"output{i}" for i in range(len(returned))]
        dims: list[list | None] = [None] * len(returned)
        if "res_attrs" in fn.attributes:
            for i, attrs in enumerate(ir.ArrayAttr(fn.attributes["res_attrs"])):
                attrs = ir.DictAttr(attrs)
                if "sdc.name" in attrs:
                    names[i] = ir.StringAttr(attrs["sdc.name"]).value
                if "sdc.dims" in attrs:
                    dims[i] = read_dims(attrs["sdc.dims"])
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise SdcError(f"two entry outputs are named '{dup}'")
        outputs = []
        for value, name, annotated in zip(returned, names, dims):
            vid = self.ids[value]
            self.plan.outputs.append(vid)
            v = self.plan.values[vid]
            shape = list(v["shape"])
            if annotated is not None:
                shape = [a if d == UNKNOWN else d for d, a in zip(shape, annotated)]
            outputs.append({"name": name, "dtype": v["dtype"], "shape": shape})
        return outputs

    def _free_lists(self) -> None:
        """Free each intermediate after the step of its last use (right after its own step when unused)."""
        keep = set(self.plan.outputs)
        for vid, produced in self.produced_by.items():
            if vid in keep:
                continue
            last = self.last_use.get(vid, produced)
            self.plan.steps[last]["free"].append(vid)


def _layout(op) -> list[int] | None:
    """A weight's non-row-major storage order (its `sdc.layout`), or None."""
    if "sdc.layout" not in op.attributes:
        return None
    from sdc.dialect.attrs import to_python

    try:
        perm = to_python(OPS["layout_cast"].attrs["layout"], op.attributes["sdc.layout"])
    except AttrError as e:
        raise SdcError(f"{_loc(op)}: '{op.name}' attribute 'sdc.layout' {e}") from None
    return None if perm == list(range(len(perm))) else perm


def _physical(tensor: torch.Tensor, layout: list[int] | None) -> torch.Tensor:
    """A tensor's data in physical order `layout` (contiguous, with the permuted shape)."""
    return tensor if not layout else tensor.permute(layout).contiguous()


def entry_guards(fn) -> list[dict]:
    """The entry function's `sdc.guards` (written by sdc-shape-constraints) as manifest entries."""
    if "sdc.guards" not in fn.attributes:
        return []
    from sdc.dialect.attrs import GuardAttr, _down

    out = []
    for g in ir.ArrayAttr(fn.attributes["sdc.guards"]):
        if not isinstance(g, GuardAttr):
            raise SdcError(f"the entry function's 'sdc.guards' holds {g}, not #sdc.guard<\"condition\", \"message\">")
        out.append({"condition": ir.StringAttr(_down(g.condition)).value, "message": ir.StringAttr(_down(g.message)).value})
    return out


def _loc(op) -> str:
    """An op's source location for plan.json: the node name, else FILE:LINE:COL, else ""."""
    loc, label = parse_location(str(op.location))
    return label or (str(loc) if loc else "")
