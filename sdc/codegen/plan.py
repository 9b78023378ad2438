"""The execution plan (plan.json v2): a module's entry function as ordered steps per rank, plus its weights.

`build_plan(module, params, options)` walks `@main` in order and emits the steps of
`sdc.runtime.plan_schema` (docs/artifact.md): each `sdc.fusion` becomes one `launch` of a reference
kernel group (the region's ops, in order), any other sdc op a launch of its own, and each collective
(all_reduce, all_gather, ...) a `collective` step. Everything goes on stream 0, so no record/wait.

Work that can happen at compile time happens here. `sdc.parameter` and `sdc.constant` make no step:
their values are weights, stored in the rank's weights file and bound by name at load time; every
other op whose operands are all weights is evaluated now, by its reference semantics, and its
result stored as a new weight (the folded weights of sdc-fold-conv-batch-norm, layout casts and
slices of weights, each rank's block of an all_slice). A weight with a non-row-major layout is
stored in that physical order (its value records the `layout`; the runtime views it back
logically). The planner also chooses the reference kernels: a convolution takes a per-channel add
as its bias (on cuda too, where the Triton conv template reads it as an operand), and on the CPU
the add and unary op after it (its epilogue, `_merge_conv_epilogues`). It
marks the ops that may run in place, puts a `free` step after the last reader of each
intermediate, names the kernel of every launch and its planned fallback (`_choose_kernels`,
sdc/runtime/kernel_choice.py), and on the CPU records which steps the runtime calls as one
(`calls_as_one`, sdc/codegen/calls_as_one.py). The runtime only honours all of this. The plan is
plain JSON (`Plan.to_json()`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from sdc import dtypes
from sdc.codegen.backends import BackendOptions
from sdc.diagnostics import SdcError
from sdc.dialect.attrs import AttrError
from sdc.dialect.ir import (ARG_ATTRS, arg_dims, arg_names, attr_dicts, entry_function, module_mesh, op_location,
                            read_attrs, result_dims, result_names, tensor_spec)
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import TensorSpec, is_static
from sdc.mlir import ir
from sdc.runtime.format import (COLLECTIVE, COMPUTE_STREAM, FREE, KERNELS_DIR, LAUNCH, REFERENCE, encode_value,
                               weights_file)
from sdc.runtime.reference_kernels import FRESH_RESULT, IN_PLACE_OPS
from sdc.options import CompileOptions
from sdc.target import DEFAULT_TARGET, Target
from sdc.transforms.optimizer_step import STATE_ATTR
from sdc.transforms.sharding_ir import op_result_dims

UNKNOWN = "?"


@dataclass
class RankPlan:
    rank: int
    values: dict[str, dict] = field(default_factory=dict)  # id -> {"shape", "dtype"[, "weight", "layout"]}
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)  # plan.json v2 steps (sdc.runtime.plan_schema)
    weights: dict[str, torch.Tensor] = field(default_factory=dict)
    coords: dict[str, int] | None = None  # the rank's position on the mesh (partitioned programs)
    streams: list[str] = field(default_factory=lambda: [COMPUTE_STREAM])
    kernel_sources: dict[str, str] = field(default_factory=dict)  # generated kernels: artifact path -> source
    arena: dict | None = None  # the memory plan (sdc/codegen/memory.py), or None when nothing is planned
    calls_as_one: list[dict] = field(default_factory=list)  # runs of C calls made as one (codegen/calls_as_one.py)

    def to_json(self) -> dict:
        out = {"rank": self.rank, "weights": weights_file(self.rank), "streams": self.streams,
               "values": self.values, "inputs": self.inputs, "outputs": self.outputs, "steps": self.steps}
        if self.coords is not None:
            out["coords"] = self.coords
        if self.arena is not None:
            out["arena"] = self.arena
        if self.calls_as_one:
            out["calls_as_one"] = self.calls_as_one
        return out

    def launches(self) -> list[dict]:
        return [s for s in self.steps if s["kind"] == LAUNCH]


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
    state: list[dict] = field(default_factory=list)  # the manifest's entry.state (see state_table)

    def kernel_files(self) -> dict[str, str]:
        """The generated kernel sources of every rank, by their path in the artifact (`kernels/...`)."""
        return {path: text for r in self.ranks for path, text in r.kernel_sources.items()}

    def to_json(self) -> dict:
        out = {"target": self.target, "world_size": self.world_size, "mesh": self.mesh,
               "ranks": [r.to_json() for r in self.ranks]}
        if self.shardings is not None:
            out["shardings"] = self.shardings
        return out


def build_plan(module, params: Mapping[str, Any] | None = None,
               options: CompileOptions | str = DEFAULT_TARGET) -> Plan:
    """Plan the module's entry function as `options` say (its target, precision and kernel choices;
    a target's name stands for that target's default options); `params` holds the `sdc.parameter`
    values."""
    options = options if isinstance(options, CompileOptions) else CompileOptions(target=options)
    target = options.target_info  # the target object travels from here
    settings = _builder_settings(target, options)
    module_op = module.operation if hasattr(module, "operation") else module
    mesh = module_mesh(module_op) or {}
    world_size = 1
    for size in mesh.values():
        world_size *= size
    if world_size != 1 and "sdc.partitioned" not in module_op.attributes:
        raise SdcError(f"the module's mesh {mesh} has {world_size} devices but the program is not partitioned: "
                       "run sdc-sharding-propagation and sdc-spmd-partition first (sdc compile --mesh does)")
    if mesh and "sdc.partitioned" in module_op.attributes:
        if any(STATE_ATTR in d for d in attr_dicts(entry_function(module_op), ARG_ATTRS)):
            raise SdcError("a program with state (a training step) cannot be partitioned over a mesh yet")
        return _build_ranks(module_op, params or {}, target, mesh, settings)
    with module_op.context:
        builder = _RankBuilder(0, params or {}, **settings)
        entry = entry_function(module_op)
        inputs, outputs = builder.walk(entry)
        guards = entry_guards(entry)
        state = state_table(entry, inputs, outputs, params or {}, builder.plan.weights)
    return Plan(target=target.name, mesh=mesh, world_size=world_size, inputs=inputs, outputs=outputs,
                guards=guards, ranks=[builder.plan], state=state)


def _builder_settings(target: Target, options: CompileOptions) -> dict[str, Any]:
    """What every rank's builder is told: whether the kernel groups run by reference semantics (no
    Triton backend), whether C kernels are generated (the target has the C backend and the options
    do not turn it off), the precision, the target's codegen backends in order and the options that
    choose between their kernels."""
    return {"reference_kernels": not target.has_triton_backend,
            "c_kernels": target.has_c_backend and options.c_kernels,
            "precision": options.precision, "backends": target.backends, "on_cpu": target.device == "cpu",
            "backend_options": BackendOptions(cuda_cpp=options.cuda_cpp, conv_kernel=options.conv_kernel)}


def _build_ranks(module_op, params: Mapping[str, Any], target: Target, mesh_axes: dict[str, int],
                 settings: dict[str, Any]) -> Plan:
    """A partitioned program: one rank plan per device, each holding its weight blocks (sdc/codegen/ranks.py)."""
    from sdc.codegen import ranks as R
    from sdc.dialect.mesh import Mesh

    mesh = Mesh.of(mesh_axes)
    plans = []
    with module_op.context:
        entry = entry_function(module_op)
        for rank in range(mesh.world_size):
            builder = _RankBuilder(rank, params, **settings)
            builder.mesh = mesh
            inputs, outputs = builder.walk(entry)
            R.name_blocks(builder.plan)
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
    return Plan(target=target.name, mesh=mesh_axes, world_size=mesh.world_size, inputs=inputs, outputs=outputs,
                guards=guards, ranks=plans, shardings=table)


class _RankBuilder:
    """Walks the entry function once for one rank: values, weights (with everything computable from
    weights alone evaluated now) and the work steps; `finish` then adds what needs the whole program
    (reference kernel choices, in-place flags, free steps)."""

    def __init__(self, rank: int, params: Mapping[str, Any], reference_kernels: bool = True, precision: str = "f32",
                 c_kernels: bool = False, backends: Sequence[str] = ("torch",),
                 backend_options: BackendOptions = BackendOptions(), on_cpu: bool = True):
        self.plan = RankPlan(rank)
        self.on_cpu = on_cpu  # the target's artifacts run on the CPU (the kernels it chooses: `_choose_kernels`)
        self.params = params
        self.reference_kernels = reference_kernels  # the target runs the kernel groups by reference semantics
        self.c_kernels = c_kernels  # ... except those a C template fits (the CPU target, sdc/codegen/c)
        self.precision = precision  # the options' precision (tf32 lets generated f32 matmuls use tf32)
        self.backends = tuple(backends)  # the target's codegen backends, in order (sdc/codegen/backends.py)
        self.backend_options = backend_options  # the options that choose between their kernels
        self.ids: dict[Any, str] = {}  # ir.Value -> value id
        self.work: list[dict] = []  # launch and collective steps, in order (free steps go between them)
        self.param_errors: list[str] = []
        self.constants = 0
        self.logical: dict[str, torch.Tensor] = {}  # parameter values, in their logical order
        self.mesh = None  # the device mesh of a partitioned program (see _build_ranks)
        self.launch_count = 0
        self.collective_count = 0
        self.roots: dict[str, str] = {}  # a weight computed at compile time -> the weight it is named after
        self.result_dims: dict[str, list] = {}  # an op result -> its symbolic dims (`sdc.result_dims`)
        # an op result the layout pass stores in another than row-major order -> that order (the C
        # kernels read such values as they lie: cpu.generate.physical_order)
        self.layouts: dict[str, tuple[int, ...]] = {}

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

    def _fresh_weight_name(self, base: str) -> str:
        name, n = base, 1
        while name in self.plan.weights or name in self.params:
            name = f"{base}.{n}"
            n += 1
        return name

    def _root(self, weight: str) -> str:
        """The name a weight computed from `weight` is named after: the parameter it comes from."""
        if weight in self.roots:
            return self.roots[weight]
        return weight.rsplit("@", 1)[0] if weight in self.plan.weights and weight not in self.params else weight

    def weight_tensor(self, vid: str | None) -> torch.Tensor | None:
        """The logical value of a weight value (a view, when it is stored in another layout), or None."""
        value = self.plan.values.get(vid) if vid is not None else None
        if value is None or "weight" not in value or value["weight"] not in self.plan.weights:
            return None
        t = self.plan.weights[value["weight"]]
        return t.permute(_inverse(value["layout"])) if value.get("layout") else t

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
        self.finish()
        from sdc.codegen.memory import plan_rank_memory  # the arena, symbols bounded by the guards

        self.plan.arena = plan_rank_memory(
            self.plan.values, self.plan.outputs, self.plan.steps, [g["condition"] for g in entry_guards(fn)],
            direct_only=not self.reference_kernels)
        return inputs, outputs

    def _op(self, op) -> None:
        if op.name == "sdc.fusion":
            self._fusion(op)
            return
        if not op.name.startswith("sdc.") or op.name[4:] not in OPS:
            raise SdcError(f"{op_location(op) or 'the entry function'}: cannot compile '{op.name}': "
                           "the entry function may hold only sdc ops")
        opdef = OPS[op.name[4:]]
        attrs = self._attrs(opdef, op)
        if opdef.name == "parameter":
            self._parameter(op, attrs["name"], _layout(op))
            return
        if opdef.name == "constant":
            layout = _layout(op)
            name = self._store_weight(self._constant_name(), _physical(attrs["value"].tensor, layout))
            self._new_value(op.results[0], weight=name, **({"layout": layout} if layout else {}))
            return
        if self._fold(op, opdef, attrs):
            return
        if opdef.family == "collective" and opdef.name != "all_slice":
            self._collective(op, opdef, attrs)
            return
        self._launch([self._entry(opdef, op, attrs)])

    def _attrs(self, opdef, op) -> dict:
        try:
            return read_attrs(opdef, op)
        except AttrError as e:
            raise SdcError(f"{op_location(op)}: '{op.name}' {e}") from None

    def _encode(self, attrs: dict) -> dict:
        return {k: encode_value(v, lambda d: self._store_weight(self._constant_name(), d.tensor))
                for k, v in attrs.items()}

    def _entry(self, opdef, op, attrs: dict) -> dict:
        ins = [self.ids[v] for v in op.operands]
        outs = [self._new_value(r) for r in op.results]
        self.result_dims.update(zip(outs, op_result_dims(op) or []))
        if len(outs) == 1:  # (a multi-result op's `sdc.layout` lists one per result: not read here)
            layout = list(attrs["layout"]) if opdef.name == "layout_cast" else _layout(op)
            if layout and layout != list(range(len(layout))):
                self.layouts[outs[0]] = tuple(layout)
        entry = {"op": opdef.name, "attrs": self._encode(attrs), "inputs": ins, "outputs": outs, "loc": op_location(op)}
        if "sdc.reason" in op.attributes:
            entry["reason"] = ir.StringAttr(op.attributes["sdc.reason"]).value
        return entry

    def _launch(self, ops: list[dict]) -> None:
        """A launch of a reference kernel group; its `inputs`/`outputs` are set by `finish`."""
        self.work.append({"kind": LAUNCH, "id": f"k{self.launch_count}", "stream": 0, "inputs": [], "outputs": [],
                          "kernel": {"backend": REFERENCE, "ops": ops}})
        self.launch_count += 1

    def _collective(self, op, opdef, attrs: dict) -> None:
        attrs = dict(attrs)
        axes = list(attrs.pop("mesh_axes"))
        ins = [self.ids[v] for v in op.operands]
        outs = [self._new_value(r) for r in op.results]
        self.work.append({"kind": COLLECTIVE, "id": f"c{self.collective_count}", "stream": 0, "op": opdef.name,
                          "mesh_axes": axes, "attrs": self._encode(attrs), "inputs": ins, "outputs": outs,
                          "loc": op_location(op)})
        self.collective_count += 1

    def _fusion(self, op) -> None:
        """One kernel group: the region's ops in order; the fusion's results are the values its yield names."""
        entries = []
        for inner in op.regions[0].blocks[0].operations:
            inner = inner.operation
            if inner.name == "sdc.yield":
                for result, value in zip(op.results, inner.operands):
                    self.ids[result] = self.ids[value]
                continue
            if not inner.name.startswith("sdc.") or inner.name[4:] not in OPS or inner.name in (
                    "sdc.parameter", "sdc.constant"):
                raise SdcError(f"{op_location(inner) or 'a fusion region'}: cannot compile '{inner.name}' inside "
                               "'sdc.fusion'")
            opdef = OPS[inner.name[4:]]
            attrs = self._attrs(opdef, inner)
            if self._fold(inner, opdef, attrs):
                continue
            if opdef.family == "collective" and opdef.name != "all_slice":
                raise SdcError(f"{op_location(inner) or 'a fusion region'}: a collective ('{inner.name}') cannot be part "
                               "of a kernel group")
            entries.append(self._entry(opdef, inner, attrs))
        if entries:
            self._launch(entries)

    # ------------------------------------------------------------ evaluating weight-only ops now

    def _fold(self, op, opdef, attrs: dict) -> bool:
        """Compute now an op whose operands are all weights: its results become weights of the rank.

        What one rank holds of an `sdc.all_slice` is its block (sdc/codegen/ranks.py). Any other pure
        op on weights only runs its reference semantics here, unless its results are not static, it
        cannot be evaluated without run-time values, or it would store much more than it reads (a
        broadcast of a scalar to a large tensor stays a run-time op)."""
        if not op.operands or not opdef.pure:
            return False
        if opdef.name == "all_slice":
            from sdc.codegen.ranks import fold_all_slice

            return fold_all_slice(self, op, attrs, _layout(op))
        if opdef.family == "collective":
            return False
        tensors = [self.weight_tensor(self.ids.get(v)) for v in op.operands]
        if any(t is None for t in tensors):
            return False
        specs = [tensor_spec(r.type) for r in op.results]
        if not all(all(is_static(d) for d in s.shape) for s in specs):
            return False
        produced = sum(_numel(s.shape) for s in specs)
        if produced > max(FOLD_GROWTH_LIMIT, sum(t.numel() for t in tensors)):
            return False
        from sdc.dialect.opdef import RefEnv

        env = RefEnv(mesh=self.mesh.as_dict() if self.mesh is not None else {}, params={},
                     result_spec=specs[0] if opdef.shape is None and specs else None)
        try:
            out = opdef.ref(env, attrs, *tensors)
        except Exception:  # noqa: BLE001 (an op the reference cannot evaluate now runs at run time)
            return False
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(specs):
            return False
        base = self._root(self.plan.values[self.ids[op.operands[0]]]["weight"])
        layouts = [_result_layout(op, opdef, attrs)] if len(specs) == 1 else [None] * len(specs)
        for result, t, spec, layout in zip(op.results, outs, specs, layouts):
            t = t.to(dtypes.to_torch(spec.dtype)).reshape(spec.shape)
            name = self._fresh_weight_name(_derived_name(base, opdef.name, attrs, layout))
            self.roots[name] = base
            self.plan.weights[name] = _physical(t, layout).contiguous()
            self._new_value(result, weight=name, **({"layout": layout} if layout else {}))
        return True

    # ------------------------------------------------------------ parameters and outputs

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
        names, dims = result_names(fn), result_dims(fn)
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

    # ------------------------------------------------------------ what needs the whole program

    def finish(self) -> None:
        """Choose the reference kernels, mark in-place ops, and lay out the steps with their frees."""
        # every target: a reference convolution takes its bias in the call (cuDNN's fused calls on cuda
        # too, reference_kernels.fused_conv), and the Triton conv template reads it as an operand
        for step in self.work:
            if step["kind"] == LAUNCH:
                self._bias_into_conv(step["kernel"]["ops"])
        readers = self._readers()
        for step in self.work:
            if step["kind"] == LAUNCH:
                _mark_in_place(step["kernel"]["ops"], readers, self.plan.values, self.plan.outputs)
        self._lay_out_steps(readers)
        if self.c_kernels:
            self._generate_c_kernels()
        if not self.reference_kernels:
            self._generate_kernels()
            from sdc.codegen.memory import write_concats_in_place  # generated kernels write their slices

            self.plan.steps = write_concats_in_place(self.plan.values, self.plan.outputs, self.plan.steps,
                                                     self.plan.inputs, self.result_dims)
        if self.on_cpu:
            self._merge_conv_epilogues()
        self._choose_kernels()
        if self.on_cpu and self.c_kernels:
            from sdc.codegen.calls_as_one import plan_calls_as_one

            self.plan.calls_as_one = plan_calls_as_one(self.plan.steps, self.plan.values, self.plan.outputs)
        prune_weights(self.plan)

    def _merge_conv_epilogues(self) -> None:
        """A CPU plan's reference convolutions take the add and unary op after them that the in-place
        marks allow (reference_kernels.fuse_epilogues): one conv entry with `sdc.epilogue`, which its
        kernel (sdc's C library, oneDNN's post-ops) applies as it writes the result. The merged ops'
        intermediate values leave the plan (their free steps too). (On cuda the executor still merges
        them at load, for cuDNN's fused call.)"""
        from sdc.runtime.plan_schema import OpEntry
        from sdc.runtime.reference_kernels import fuse_epilogues

        dropped: set[str] = set()
        for step in self.plan.steps:
            if step["kind"] != LAUNCH or step["kernel"]["backend"] != REFERENCE:
                continue
            ops = step["kernel"]["ops"]
            if not any(op["op"] == "conv" for op in ops):
                continue
            entries = [OpEntry(op["op"], op.get("attrs", {}), tuple(op["inputs"]), tuple(op["outputs"]),
                               in_place=op.get("in_place")) for op in ops]
            merged = fuse_epilogues(entries)
            if len(merged) == len(entries):
                continue
            original = {id(e): op for e, op in zip(entries, ops)}
            kept = {id(e) for e in merged}
            new_ops = []
            for entry in merged:
                if id(entry) in original:
                    new_ops.append(original[id(entry)])
                    continue
                conv = next(op for e, op in zip(entries, ops) if e.op == "conv" and id(e) not in kept
                            and e.inputs == entry.inputs[:len(e.inputs)] and op not in new_ops)
                new_ops.append({**conv, "attrs": dict(entry.attrs), "inputs": list(entry.inputs),
                                "outputs": list(entry.outputs)})
            made = {v for op in ops for v in op["outputs"]}
            dropped |= made - {v for op in new_ops for v in op["outputs"]}
            step["kernel"]["ops"] = new_ops
        if not dropped:
            return
        steps = []
        for step in self.plan.steps:
            if step["kind"] == FREE:
                step["values"] = [v for v in step["values"] if v not in dropped]
                if not step["values"]:
                    continue
            steps.append(step)
        self.plan.steps = steps
        for vid in dropped:
            self.plan.values.pop(vid, None)

    def _choose_kernels(self) -> None:
        """Name the kernel of every launch (`kernel.runs`) and what it may fall back to at run time
        (`kernel.fallback`): a generated kernel's backend; for each op of a reference group the rule
        of sdc/runtime/kernel_choice.py (sdc's C kernel library, oneDNN, the vendor libraries on cuda,
        or torch), the group's the most specific of its ops'. The runtime runs what this says."""
        from sdc.runtime import kernel_choice as K
        from sdc.runtime.format import GENERATED_KERNELS

        for step in self.plan.steps:
            if step["kind"] != LAUNCH:
                continue
            kernel = step["kernel"]
            ops = kernel["ops"]
            if kernel["backend"] in GENERATED_KERNELS:
                runs = GENERATED_KERNELS[kernel["backend"]]
                kernel["runs"], kernel["fallback"] = runs, K.step_fallback(runs)
                continue
            for op in ops:
                operands = [_spec_of(self.plan.values[v]) for v in op["inputs"]]
                constants = [self.weight_tensor(v) for v in op["inputs"]]
                op["runs"] = K.op_kernel(op["op"], op.get("attrs", {}), operands, constants, op.get("in_place"),
                                         self.on_cpu, self.c_kernels)
            if any(op["runs"] == K.CUDNN for op in ops) and K.cudnn_fuses(ops, self.plan.values):
                for op in ops:  # its convolution and epilogue: one cuDNN call
                    op["runs"] = K.CUDNN_FUSED if op["op"] == "conv" else op["runs"]
            runs = K.step_kernel([op["runs"] for op in ops])
            kernel["runs"], kernel["fallback"] = runs, K.step_fallback(runs, [op["op"] for op in ops])

    def _generate_kernels(self) -> None:
        """Each launch that a Triton template fits becomes a generated kernel (backend "triton",
        its source in kernels/); the others stay reference kernel groups (sdc/codegen/triton)."""
        from sdc.codegen.backends import Group, backend, choose

        # (the C backend has a pass of its own: _generate_c_kernels)
        backends = [backend(name, self.backend_options) for name in self.backends if name != "c"]
        for step in self.plan.steps:
            if step["kind"] != LAUNCH:
                continue
            ops = [{k: v for k, v in e.items() if k != "in_place"} for e in step["kernel"]["ops"]]
            entry = f"r{self.plan.rank}_{step['id']}" if self.mesh is not None else step["id"]
            generated, why = choose(backends, Group(ops, step["inputs"], step["outputs"], self.plan.values, entry,
                                                    self.weight_tensor, self.precision))
            if generated is None:
                step["kernel"]["why_reference"] = why
                for op in step["kernel"]["ops"]:
                    if op["op"] == "conv" and len(self.plan.values[op["inputs"][1]]["shape"]) == 4:
                        # cuda runs convolutions channels-last (the layout pass); given a plain weight,
                        # cuDNN would copy it to channels-last on every call
                        self._store_laid_out(op["inputs"][1], CHANNELS_LAST_WEIGHT)
                continue
            if generated.program.template == "conv":
                from sdc.codegen.kernel.conv import CONV_WEIGHT_LAYOUT, conv_weight

                self._store_laid_out(conv_weight(generated.program), CONV_WEIGHT_LAYOUT)
            from sdc.runtime.format import CUDA

            path = f"{KERNELS_DIR}/{entry}.{'cu' if generated.kernel['backend'] == CUDA else 'py'}"
            self.plan.kernel_sources[path] = generated.source
            step["kernel"] = {"backend": generated.kernel["backend"], "source": path,
                              **{k: v for k, v in generated.kernel.items() if k != "backend"}}

    def _generate_c_kernels(self) -> None:
        """Each launch that a C template fits becomes a generated C kernel (backend "c"): all of the
        rank's functions in one source file, compiled at load (sdc/codegen/c). The launch keeps its
        ops, which the runtime runs through torch instead where the C kernel does not apply (a large
        product on several threads, a run-time broadcast, no C compiler on the host)."""
        from sdc.codegen.backends import Group, backend, choose
        from sdc.codegen.c import C_SOURCE

        c = backend("c")
        backends = [c, *(backend(name) for name in self.backends if name != "c")]
        layouts = {**self.layouts, **{vid: tuple(v["layout"]) for vid, v in self.plan.values.items() if v.get("layout")}}
        source = C_SOURCE if self.mesh is None else C_SOURCE.replace(".c", f"_r{self.plan.rank}.c")
        for step in self.plan.steps:
            if step["kind"] != LAUNCH:
                continue
            ops = [{k: v for k, v in e.items() if k != "in_place"} for e in step["kernel"]["ops"]]
            entry = f"r{self.plan.rank}_{step['id']}" if self.mesh is not None else step["id"]
            try:
                ops, values, transposed = self._stored_transposed(_product_first(ops))
                generated, why = choose(backends, Group(ops, step["inputs"], step["outputs"], values, entry,
                                                        self.weight_tensor, self.precision, transposed, layouts))
            except ValueError as e:  # a renderer without a form for a node
                generated, why = None, str(e)
            if generated is None:
                if why:
                    step["kernel"]["why_reference"] = why
                continue
            step["kernel"] = {"backend": generated.kernel["backend"], "source": f"{KERNELS_DIR}/{source}",
                              **{k: v for k, v in generated.kernel.items() if k != "backend"},
                              "ops": step["kernel"]["ops"]}
        if c.functions:
            self.plan.kernel_sources[f"{KERNELS_DIR}/{source}"] = c.file()

    def _stored_transposed(self, ops: list[dict]) -> tuple[list[dict], dict, list[str]]:
        """(ops, values, transposed) for the C lowering of one group: a matmul that reads a 2-d plan
        weight transposed (`transpose_rhs`: a Gemm with transB, a linear layer's [out, in] weight) is
        lowered as the product with that weight stored [K, N], which the launcher makes once at load
        (the kernel's `transposed`): the C matmul reads rows of B in place, and would otherwise copy a
        transposed B on every call. The plan's weight and ops stay as they are (their torch form,
        the fallback, reads the same values as a view of that copy)."""
        values, transposed, out = self.plan.values, [], []
        for op in ops:
            vid = op["inputs"][1] if op["op"] == "matmul" and len(op["inputs"]) == 2 else None
            logical = self.weight_tensor(vid)
            if (logical is None or logical.dim() != 2 or not op.get("attrs", {}).get("transpose_rhs")
                    or sum(vid in e["inputs"] for e in ops) != 1):
                out.append(op)
                continue
            if values is self.plan.values:
                values = dict(values)
            values[vid] = {**values[vid], "shape": list(reversed(values[vid]["shape"]))}
            transposed.append(vid)
            out.append({**op, "attrs": {**op["attrs"], "transpose_rhs": False}})
        return out, values, transposed

    def _store_laid_out(self, vid: str, layout: tuple[int, ...]) -> None:
        """A convolution's weight stored in physical order `layout` (the runtime views it back logically,
        so its strides are what the kernel reads): a Triton conv kernel's [KH, KW, Cin, Cout]
        (conv.CONV_WEIGHT_LAYOUT, its tiles' fastest order; it indexes by strides), a cuDNN one's
        channels-last [O, KH, KW, C]. Only a plan weight in plain order that no other op reads."""
        value, logical = self.plan.values[vid], self.weight_tensor(vid)
        if logical is None or value.get("layout") or self._readers().get(vid, 0) != 1:
            return
        layout = list(layout)
        name = self._fresh_weight_name(f"{value['weight']}@{','.join(map(str, layout))}")
        self.plan.weights[name] = _physical(logical, layout)
        value["weight"], value["layout"] = name, layout

    def _readers(self) -> dict[str, int]:
        """How many op operands read each value, a rank output counting as one more reader."""
        count: dict[str, int] = {}
        for vid in [*_reads(self.work), *self.plan.outputs]:
            count[vid] = count.get(vid, 0) + 1
        return count

    def _bias_into_conv(self, ops: list[dict]) -> None:
        """A convolution whose only reader adds one weight value per output channel becomes one
        convolution with that bias: the reference convolution takes a bias, so the result is written once."""
        readers = self._readers()
        i = 0
        while i < len(ops):
            conv = ops[i]
            y = conv["outputs"][0] if conv["op"] == "conv" and len(conv["outputs"]) == 1 else None
            if y is None or len(conv["inputs"]) != 2 or readers.get(y) != 1:
                i += 1
                continue
            add = next((e for e in ops[i + 1:] if y in e["inputs"]), None)
            bias = self._bias(add, y, conv) if add is not None else None
            if bias is None:
                i += 1
                continue
            conv["inputs"] = [*conv["inputs"], bias]
            conv["outputs"] = list(add["outputs"])
            ops.remove(add)
            del self.plan.values[y]
            readers = self._readers()
            i += 1

    def _bias(self, add: dict, y: str, conv: dict) -> str | None:
        """The value id of a per-channel bias that `add` adds to the convolution result `y`, or None."""
        if add["op"] != "add" or add["inputs"].count(y) != 1 or len(add["inputs"]) != 2:
            return None
        other = add["inputs"][1] if add["inputs"][0] == y else add["inputs"][0]
        t, w = self.weight_tensor(other), self.weight_tensor(conv["inputs"][1])
        out = self.plan.values[y]
        if t is None or w is None or not t.is_floating_point() or t.dtype != w.dtype:
            return None
        if self.plan.values[add["outputs"][0]]["shape"] != out["shape"] or out["dtype"] != dtypes.from_torch(t.dtype):
            return None  # the add broadcasts the convolution's result: not a bias
        per_channel = _per_channel(t, w.shape[0], w.dim())
        if per_channel is None:
            return None
        base = self._root(self.plan.values[other]["weight"])
        name = self._fresh_weight_name(f"{base}:bias")
        self.roots[name] = base
        self.plan.weights[name] = per_channel.contiguous()
        vid = f"v{len(self.plan.values)}"
        while vid in self.plan.values:
            vid = f"v{int(vid[1:]) + 1}"
        self.plan.values[vid] = {"shape": [w.shape[0]], "dtype": out["dtype"], "weight": name}
        return vid

    def _lay_out_steps(self, readers: dict[str, int]) -> None:
        """The final steps: each launch lists what it reads and writes, and after each step a `free`
        step drops the intermediates whose last reader it is (an unread result right after its own step)."""
        produced_by: dict[str, int] = {}
        last_read: dict[str, int] = {}
        for i, step in enumerate(self.work):
            for vid in _step_outputs(step):
                produced_by[vid] = i
            for vid in _step_inputs(step):
                last_read[vid] = i
        keep = set(self.plan.outputs)
        frees: dict[int, list[str]] = {}
        for vid, produced in produced_by.items():
            if vid not in keep:
                frees.setdefault(last_read.get(vid, produced), []).append(vid)
        steps = []
        for i, step in enumerate(self.work):
            if step["kind"] == LAUNCH:
                ops = step["kernel"]["ops"]
                made = {v for e in ops for v in e["outputs"]}
                step["inputs"] = _unique(v for e in ops for v in e["inputs"] if v not in made)
                step["outputs"] = [v for v in _unique(v for e in ops for v in e["outputs"])
                                   if v in keep or last_read.get(v, i) > i]
            steps.append(step)
            if frees.get(i):
                steps.append({"kind": FREE, "values": frees[i]})
        self.plan.steps = steps


def _spec_of(value: dict) -> TensorSpec:
    """A plan value's type: its static dims, DYN for the others (symbol names, "?")."""
    from sdc.dialect.shapes import DYN

    return TensorSpec(tuple(d if isinstance(d, int) else DYN for d in value["shape"]), value["dtype"])


def _layout(op) -> list[int] | None:
    """A weight's non-row-major storage order (its `sdc.layout`), or None."""
    if "sdc.layout" not in op.attributes:
        return None
    from sdc.dialect.attrs import to_python

    try:
        perm = to_python(OPS["layout_cast"].attrs["layout"], op.attributes["sdc.layout"])
    except AttrError as e:
        raise SdcError(f"{op_location(op)}: '{op.name}' attribute 'sdc.layout' {e}") from None
    return None if perm == list(range(len(perm))) else perm


def _product_first(ops: list[dict]) -> list[dict]:
    """A group's ops with those before its one matmul that the product does not read (directly or
    through other ops) moved after it, in their order: the elementwise ops an epilogue reads (a
    residual add, a mask's where) that the fuse pass placed first, which the matmul template
    computes per element of its tile. Any other group is returned as it is."""
    at = [i for i, e in enumerate(ops) if e["op"] == "matmul"]
    if len(at) != 1:
        return ops
    needed, before = set(ops[at[0]]["inputs"]), []
    for e in reversed(ops[:at[0]]):
        if needed.intersection(e["outputs"]):
            needed.update(e["inputs"])
            before.append(e)
    if len(before) == at[0]:
        return ops
    feeding = {id(e) for e in before}
    ahead = ops[:at[0]]
    return [*(e for e in ahead if id(e) in feeding), ops[at[0]], *(e for e in ahead if id(e) not in feeding),
            *ops[at[0] + 1:]]


def _physical(tensor: torch.Tensor, layout: list[int] | None) -> torch.Tensor:
    """A tensor's data in physical order `layout` (contiguous, with the permuted shape)."""
    return tensor if not layout else tensor.permute(layout).contiguous()


FOLD_GROWTH_LIMIT = 1 << 16  # elements a folded op may store beyond what it reads (see _RankBuilder._fold)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _inverse(perm: list[int]) -> list[int]:
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return inverse


def _unique(items) -> list:
    return list(dict.fromkeys(items))


def _result_layout(op, opdef, attrs: dict) -> list[int] | None:
    """The physical order a folded op's single result is stored in: a layout_cast's own layout, else
    the `sdc.layout` the layout pass gave the op (None: row-major)."""
    if opdef.name == "layout_cast":
        perm = list(attrs["layout"])
        return None if perm == list(range(len(perm))) else perm
    return _layout(op)


def _derived_name(base: str, op: str, attrs: dict, layout: list[int] | None) -> str:
    """A folded weight's name, from the parameter it is computed from: `w@0,2,3,1` (a layout cast),
    `w[1:0:64]` (a slice: axis:start:end), `w:mul` (any other op), `w:mul@0,2,3,1` (stored in a layout)."""
    stored = f"@{','.join(map(str, layout))}" if layout else ""
    if op == "layout_cast":
        return base + stored
    if op == "slice":
        window = ",".join(f"{a}:{s}:{e}" for a, s, e in zip(attrs.get("axes") or [], attrs.get("starts", []),
                                                            attrs.get("ends", [])))
        return f"{base}[{window or op}]{stored}"
    return f"{base}:{op}{stored}"


def _per_channel(t: torch.Tensor, channels: int, rank: int) -> torch.Tensor | None:
    """`t` as one value per channel of an [N, C, spatial...] tensor it is added to, or None."""
    if t.numel() == 1 and t.dim() <= rank:
        return t.reshape(1).expand(channels).clone()
    shape = list(t.shape)
    if len(shape) == rank:
        if shape[0] != 1:
            return None
        shape = shape[1:]
    if len(shape) == rank - 1 and shape[0] == channels and all(d == 1 for d in shape[1:]):
        return t.reshape(channels).clone()
    return None


def _step_inputs(step: dict) -> list[str]:
    if step["kind"] == LAUNCH:
        return [v for e in step["kernel"]["ops"] for v in e["inputs"]]
    return list(step.get("inputs", []))


def _step_outputs(step: dict) -> list[str]:
    if step["kind"] == LAUNCH:
        return [v for e in step["kernel"]["ops"] for v in e["outputs"]]
    return list(step.get("outputs", []))


def _reads(steps: list[dict]) -> list[str]:
    """Every operand read of the steps' ops, in order (a value read twice counts twice)."""
    return [v for step in steps for v in _step_inputs(step)]


def _mark_in_place(ops: list[dict], readers: dict[str, int], values: dict[str, dict], outputs: list[str]) -> None:
    """Mark `"in_place": i` on the ops of one kernel group that may write their result into operand i:
    a float intermediate of the same group, made by an op whose result is fresh memory, read by
    nobody else (and not an output)."""
    fresh: set[str] = set()  # values this group made into memory nobody else holds
    returned = set(outputs)
    for entry in ops:
        choice = _in_place_operand(entry, fresh, readers, values, returned)
        if choice is not None:
            entry["in_place"] = choice
        if len(entry["outputs"]) == 1 and entry["op"] in FRESH_RESULT:
            fresh.add(entry["outputs"][0])


def _in_place_operand(entry: dict, fresh: set[str], readers: dict[str, int], values: dict[str, dict],
                      returned: set[str]) -> int | None:
    allowed = IN_PLACE_OPS.get(entry["op"], ())
    ins = entry["inputs"]
    if not allowed or len(entry["outputs"]) != 1 or len(ins) != (2 if entry["op"] in ("add", "sub", "mul", "div")
                                                                  else 1):
        return None
    result = values[entry["outputs"][0]]
    for i in allowed:
        vid = ins[i]
        v = values[vid]
        # A dim unknown here (`UNKNOWN`) does not stop it: a unary op's result always has its operand's
        # shape, and an in-place binary kernel runs out of place where the other operand does not
        # broadcast into this one at run time (sdc/runtime/reference_kernels.py).
        if (vid in fresh and readers.get(vid, 0) == 1 and vid not in returned and ins.count(vid) == 1
                and dtypes.is_float(v["dtype"]) and v["dtype"] == result["dtype"] and v["shape"] == result["shape"]):
            return i
    return None


# torch's channels_last for a 4-d weight [O, C, KH, KW]: stored [O, KH, KW, C]
CHANNELS_LAST_WEIGHT = (0, 2, 3, 1)


def prune_weights(plan: RankPlan) -> None:
    """Drop weight values nothing reads (weights only folded ops read: a parameter the plan
    evaluated into a new weight, a whole weight a rank holds a block of), then their tensors."""
    read = set(plan.outputs) | set(_reads(plan.steps))
    attr_weights: set[str] = set()
    for step in plan.steps:
        for entry in step["kernel"]["ops"] if step["kind"] == LAUNCH else [step]:
            _collect_weights(entry.get("attrs", {}), attr_weights)
    for vid in [vid for vid, v in plan.values.items() if "weight" in v and vid not in read]:
        del plan.values[vid]
    used = {v["weight"] for v in plan.values.values() if "weight" in v} | attr_weights
    for name in [n for n in plan.weights if n not in used]:
        del plan.weights[name]


def _collect_weights(value: Any, out: set[str]) -> None:
    if isinstance(value, dict):
        if set(value) == {"weight"} and isinstance(value["weight"], str):
            out.add(value["weight"])
        for v in value.values():
            _collect_weights(v, out)
    elif isinstance(value, list):
        for v in value:
            _collect_weights(v, out)


def state_table(fn, inputs: list[dict], outputs: list[dict], params: Mapping[str, Any],
                weights: dict[str, torch.Tensor]) -> list[dict]:
    """The entry's state: each input whose `sdc.state` attribute names the output that updates it.
    Its initial value is `params[<input name>]`, stored in the weights file as `state/<name>`; the
    runtime keeps it resident and rebinds it to that output after each call (docs/artifact.md)."""
    out_index = {o["name"]: i for i, o in enumerate(outputs)}
    table = []
    for desc, attrs in zip(inputs, attr_dicts(fn, ARG_ATTRS)):
        if STATE_ATTR not in attrs:
            continue
        name, output = desc["name"], ir.StringAttr(attrs[STATE_ATTR]).value
        if output not in out_index:
            raise SdcError(f"state input '{name}' is updated by output '{output}', which the entry function "
                           "does not have")
        updated = outputs[out_index[output]]
        if (updated["dtype"], updated["shape"]) != (desc["dtype"], desc["shape"]):
            raise SdcError(f"state input '{name}' is {desc['dtype']}{desc['shape']}, the output '{output}' that "
                           f"updates it is {updated['dtype']}{updated['shape']}")
        if not all(isinstance(d, int) for d in desc["shape"]):
            raise SdcError(f"state input '{name}' has a dynamic shape {desc['shape']}: state must be static")
        if name not in params:
            raise SdcError(f"state input '{name}' has no initial value (give it in the parameters)")
        value = params[name]
        tensor = (value.detach().cpu() if isinstance(value, torch.Tensor)
                  else torch.from_numpy(np.ascontiguousarray(np.asarray(value))))
        if dtypes.from_torch(tensor.dtype) != desc["dtype"] or list(tensor.shape) != desc["shape"]:
            raise SdcError(f"the initial value of state '{name}' is {dtypes.from_torch(tensor.dtype)}"
                           f"{list(tensor.shape)}, the input is {desc['dtype']}{desc['shape']}")
        weight = f"state/{name}"
        if weight in weights:
            raise SdcError(f"state '{name}': the weights file already holds a tensor named '{weight}'")
        weights[weight] = tensor.contiguous()
        table.append({"name": name, "input": name, "output": output, "dtype": desc["dtype"],
                      "shape": list(desc["shape"]), "weight": weight})
    return table


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
