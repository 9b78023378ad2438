"""The CPU executor: runs one rank's plan by each op's reference semantics (torch CPU ops).

Everything the plan says is resolved once, at load time: value ids become list slots, op
names become reference functions, attributes are decoded (dense constants bound to their
weights), and each step's `free` list becomes slots to clear. A kernel group of several ops
is rewritten into fused CPU kernels where one fits, and a layout_cast really reorders the
bytes (`sdc.runtime.fused`). A call is then a loop over prepared ops, under
`torch.inference_mode()`, with no JSON or name lookups in it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect.dense import DenseValue
from sdc.dialect.opdef import RefEnv, get_op
from sdc.dialect.shapes import DYN, TensorSpec
from sdc.runtime.format import decode_value
from sdc.runtime.fused import kernel, specialize


@dataclass(frozen=True, eq=False)
class PreparedOp:
    name: str
    kernel: str
    loc: str
    ref: Callable[..., Any]
    attrs: dict
    ins: tuple[int, ...]
    outs: tuple[int, ...]
    free: tuple[int, ...]  # slots to clear after this op (the last op of its step carries the step's list)

    def where(self) -> str:
        return f"{self.loc}: " if self.loc else ""


class CpuExecutor:
    def __init__(self, rank_plan: dict, weights: dict[str, torch.Tensor], mesh: dict[str, int], error, comm=None,
                 device: torch.device | None = None):
        """`error(message)` makes the SdcError for a malformed plan (naming the artifact and plan.json).
        `comm` runs the collectives (sdc.runtime.distributed); `device` is where the tensors live."""
        self.mesh = dict(mesh)
        self.comm = comm
        self.device = device
        self.params = weights
        values = rank_plan["values"]
        self.slots = {vid: i for i, vid in enumerate(values)}
        self.specs = {vid: _spec(vid, v, error) for vid, v in values.items()}
        self.initial: list[torch.Tensor | None] = [None] * len(self.slots)
        defined: set[str] = set()
        for vid, v in values.items():
            if "weight" in v:
                self.initial[self.slots[vid]] = _weight(weights, v["weight"], self.specs[vid], error, vid,
                                                        v.get("layout"))
                defined.add(vid)
        self.input_slots = [self._slot(vid, "inputs", error) for vid in rank_plan["inputs"]]
        defined.update(rank_plan["inputs"])
        self.uses = _uses(rank_plan, self.slots)
        self.program: list[PreparedOp] = []
        for step in rank_plan["steps"]:
            self._prepare_step(step, defined, weights, error)
        missing = [vid for vid in rank_plan["outputs"] if vid not in defined]
        if missing:
            raise error(f"output value '{missing[0]}' is never computed")
        self.output_slots = [self._slot(vid, "outputs", error) for vid in rank_plan["outputs"]]

    def _slot(self, vid: Any, where: str, error) -> int:
        if vid not in self.slots:
            raise error(f"{where} refers to value '{vid}', which is not in the values table")
        return self.slots[vid]

    def _prepare_step(self, step: dict, defined: set[str], weights: dict, error) -> None:
        kid = step.get("id", "?")
        if step.get("kind") != "kernel":
            raise error(f"step '{kid}' has kind {step.get('kind')!r}; the CPU executor runs 'kernel' steps")
        ops = step.get("ops")
        if not isinstance(ops, list) or not ops:
            raise error(f"kernel '{kid}' has no ops")
        free = tuple(self._slot(v, f"kernel '{kid}' free list", error) for v in step.get("free", []))
        prepared: list[PreparedOp] = []
        for i, entry in enumerate(ops):
            name = entry.get("op")
            try:
                opdef = get_op(name)
            except (KeyError, TypeError):
                raise error(f"kernel '{kid}' uses unknown op {name!r}") from None
            for vid in entry.get("inputs", []):
                if vid not in defined:
                    raise error(f"kernel '{kid}' reads value '{vid}' before it is computed")
            outs = entry.get("outputs", [])
            try:
                attrs = {k: decode_value(v, lambda w: _dense(weights, w)) for k, v in
                         entry.get("attrs", {}).items()}
            except ValueError as e:
                raise error(f"kernel '{kid}': {e}") from None
            if opdef.shape is None and outs:
                attrs["_result_spec"] = self.specs[outs[0]] if outs[0] in self.specs else None
            prepared.append(PreparedOp(
                name=opdef.name, kernel=kid, loc=entry.get("loc") or "", ref=kernel(opdef.name, opdef.ref),
                attrs=attrs,
                ins=tuple(self._slot(v, f"kernel '{kid}'", error) for v in entry.get("inputs", [])),
                outs=tuple(self._slot(v, f"kernel '{kid}'", error) for v in outs),
                free=free if i == len(ops) - 1 else (),
            ))
            defined.update(outs)
        self.program.extend(specialize(prepared, self.uses, self.initial, self._add_weight))

    def _add_weight(self, tensor: torch.Tensor) -> int:
        """A new slot holding a tensor made at load time (a fused kernel's folded weights)."""
        self.initial.append(tensor)
        return len(self.initial) - 1

    def run(self, inputs: list[torch.Tensor], symbols: dict[str, int]) -> list[torch.Tensor]:
        env = RefEnv(symbols=symbols, mesh=self.mesh, comm=self.comm)
        env.params = self.params
        vals = self.initial.copy()
        for slot, t in zip(self.input_slots, inputs):
            vals[slot] = t
        comm = self.comm
        on_device = torch.device(self.device) if self.device is not None and self.device.type != "cpu" else None
        with torch.inference_mode(), (on_device or contextlib.nullcontext()):
            for op in self.program:
                try:
                    if comm is not None:
                        comm.where = (op.name, op.loc, op.kernel)
                        args = [vals[i] for i in op.ins]
                        comm.ready(args)
                        out = op.ref(env, op.attrs, *args)
                    else:
                        out = op.ref(env, op.attrs, *[vals[i] for i in op.ins])
                except SdcError:
                    raise
                except Exception as e:
                    raise SdcError(f"{op.where()}'sdc.{op.name}' failed in kernel {op.kernel}: {e}") from e
                if len(op.outs) == 1:
                    vals[op.outs[0]] = out[0] if isinstance(out, (tuple, list)) else out
                elif op.outs:
                    for slot, t in zip(op.outs, out):
                        vals[slot] = t
                for slot in op.free:
                    vals[slot] = None
        return [vals[i] for i in self.output_slots]


def _uses(rank_plan: dict, slots: dict[str, int]) -> dict[int, int]:
    """How many op inputs read each slot, an entry output counting as one more reader."""
    uses: dict[int, int] = {}
    readers = [vid for step in rank_plan["steps"] for op in step.get("ops", []) if isinstance(op, dict)
               for vid in op.get("inputs", [])]
    for vid in [*readers, *rank_plan["outputs"]]:
        if vid in slots:
            uses[slots[vid]] = uses.get(slots[vid], 0) + 1
    return uses


def _spec(vid: str, v: Any, error) -> TensorSpec:
    if not isinstance(v, dict) or not isinstance(v.get("shape"), list) or not dtypes.is_known(str(v.get("dtype"))):
        raise error(f"value '{vid}' must have a 'shape' list and a known 'dtype', found {v!r}")
    return TensorSpec(tuple(d if isinstance(d, int) else DYN for d in v["shape"]), v["dtype"])


def _weight(weights: dict, name: Any, spec: TensorSpec, error, vid: str, layout: Any = None) -> torch.Tensor:
    if name not in weights:
        raise error(f"value '{vid}' refers to weight {name!r}, which is not in the weights file")
    t = weights[name]
    if layout is not None:  # stored in physical order `layout`: view it in logical order
        if not isinstance(layout, list) or sorted(layout) != list(range(t.dim())):
            raise error(f"value '{vid}' has layout {layout!r}, which is not a permutation of its weight's "
                        f"{t.dim()} dims")
        inverse = [0] * len(layout)
        for i, p in enumerate(layout):
            inverse[p] = i
        t = t.permute(inverse)
    got = dtypes.from_torch(t.dtype)
    if got != spec.dtype or len(t.shape) != spec.rank or any(
            isinstance(want, int) and want != size for size, want in zip(t.shape, spec.shape)):
        raise error(f"weight '{name}' is {got}{list(t.shape)} in the weights file, value '{vid}' is {spec}")
    return t


def _dense(weights: dict, name: str) -> DenseValue:
    if name not in weights:
        raise ValueError(f"attribute refers to weight '{name}', which is not in the weights file")
    t = weights[name]
    return DenseValue(t, dtypes.from_torch(t.dtype))

