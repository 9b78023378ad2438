"""plan.json, version 2: one rank's plan read into typed steps, checked once, at load time.

A rank's plan is a values table and an ordered list of steps, each with a `kind`:

- `alloc`: a buffer for a value (its shape and dtype are the value's), optionally taking the memory
  of a value freed earlier (`reuses`);
- `view`: a value bound to a slice of an allocated one along one axis (a concat's operand, which its
  kernel writes in place: sdc/codegen/memory.py `write_concats_in_place`);
- `launch`: a kernel on a stream, with the values it reads and writes; its `kernel` says which
  backend runs it (`reference`: a group of sdc ops run by their reference semantics; `triton`,
  `cuda`, `c`: a generated Triton, CUDA C++ or C kernel, its source in kernels/), which kernel the
  planner chose for it (`runs`, each op of a reference group its own) and its planned `fallback`
  (format.KERNELS and FALLBACKS; sdc/runtime/kernel_choice.py);
- `collective`: one collective op over mesh axes (its group), on a stream;
- `record` / `wait`: an event recorded on one stream and waited for on another;
- `free`: values nothing reads any more.

A rank may also list the runs of steps the CPU runtime calls as one (`calls_as_one`,
sdc/codegen/calls_as_one.py).

`parse_rank_plan` checks everything that can be checked without the weights: the fields and their
types, that every value is defined before it is read and never read after it is freed, that a
stream waits only for an event recorded before. (Whether each op is a known sdc op is the executor's
check: the op tables import torch, and reading an artifact does not.) Each error names the
step (`rank 0 step 7 (launch k3): ...`), so a bad plan is found at load and never in the middle of a
run. The executor (`sdc.runtime.executor`) then works from these objects alone. See docs/artifact.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Union

from sdc import dtypes
from sdc.dialect import symexpr
from sdc.runtime.format import COLLECTIVE, KERNELS_DIR, LAUNCH, RECORD, REFERENCE, STEP_KINDS, TRITON, WAIT
from sdc.runtime.format import C, CUDA, FALLBACKS, GENERATED_KERNELS, KERNELS, TORCH

Dim = Union[int, str]


@dataclass(frozen=True)
class Value:
    id: str
    shape: tuple[Dim, ...]  # ints, symbol names (or expressions such as "B//2"), "?"
    dtype: str
    weight: str | None = None  # the tensor of the rank's weights file it is bound to
    layout: tuple[int, ...] | None = None  # the weight's physical dim order


@dataclass(frozen=True)
class OpEntry:
    """One op of a reference kernel group."""

    op: str
    attrs: dict  # as encoded in JSON (dense constants are {"weight": NAME}); decoded by the executor
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    loc: str = ""
    in_place: int | None = None  # the operand whose memory the op may write its result into
    runs: str | None = None  # the kernel the planner chose for it (sdc/runtime/kernel_choice.py); None: not said


@dataclass(frozen=True)
class Step:
    index: int
    where: str  # "rank 0 step 7 (launch k3)", for messages


@dataclass(frozen=True)
class Alloc(Step):
    value: str
    reuses: str | None


@dataclass(frozen=True)
class View(Step):
    """`value` is `of.narrow(axis, offset, value's size there)`: the kernel that makes it writes there."""

    value: str
    of: str
    axis: int
    offset: int


@dataclass(frozen=True)
class KernelTensor:
    """A tensor argument or result of a generated kernel: `map[j]` is the domain dim that dim j of
    the value is indexed by (None: size 1, broadcast); `layout`: a result's physical dim order."""

    value: str
    map: tuple[int | None, ...]
    layout: tuple[int, ...] | None = None


@dataclass(frozen=True)
class TritonKernel:
    """A generated Triton kernel (sdc/codegen/triton): its source file in the artifact, its entry
    function, the index domain (static sizes, None where known at run time), its tensors, the grid
    (dim expressions over the domain sizes d0, d1, ...), constexprs and warps. `contiguous_flag`:
    a constexpr the launcher sets per call (1 when every tensor is dense in the dims it maps);
    `tune`: other launch configurations to time at first run (the launcher keeps the fastest)."""

    source: str
    entry: str
    template: str
    domain: tuple[int | None, ...]
    args: tuple[KernelTensor, ...]
    results: tuple[KernelTensor, ...]
    grid: tuple[str, ...]
    constexprs: dict
    num_warps: int
    contiguous_flag: str | None = None
    tune: tuple[TuneConfig, ...] = ()


@dataclass(frozen=True)
class TuneConfig:
    """One launch configuration of a generated kernel that autotuning may choose (plan.json `tune`)."""

    constexprs: dict
    num_warps: int
    grid: tuple[str, ...]


@dataclass(frozen=True)
class CudaKernel:
    """A generated CUDA C++ kernel (sdc/codegen/cuda), compiled at load with NVRTC: its source file
    in the artifact, its `extern "C"` entry, the index domain and tensors (as a TritonKernel's), the
    grid (1 to 3 dim expressions over d0, d1, ...), the block (threads per block, 1 to 3 sizes), the
    dynamic shared memory in bytes, and `scalars`: dim expressions passed after the tensors'
    pointers (arguments, then results), each as a 32-bit C `int`."""

    source: str
    entry: str
    template: str
    domain: tuple[int | None, ...]
    args: tuple[KernelTensor, ...]
    results: tuple[KernelTensor, ...]
    grid: tuple[str, ...]
    block: tuple[int, ...]
    shared_mem: int
    scalars: tuple[str, ...]


@dataclass(frozen=True)
class CKernel:
    """A generated C kernel of the CPU target (sdc/codegen/c), compiled at load with the host's C
    compiler: its source file in the artifact (all kernels of a rank in one), its entry function
    (`int ENTRY(void **p, const int64_t *d)`, the ABI of sdc/runtime/launch/c.py), the template
    it was rendered from, and the index domain and tensors (as a TritonKernel's, dense row-major, or
    dense in the physical order a tensor's `layout` gives, its map then over those dims)."""

    source: str
    entry: str
    template: str
    domain: tuple[int | None, ...]
    args: tuple[KernelTensor, ...]
    results: tuple[KernelTensor, ...]
    # args that are 2-d weights the kernel reads transposed: the launcher passes a [K, N] copy of the
    # plan's [N, K] weight, made once at load (their maps are over the copy's dims)
    transposed: tuple[int, ...] = ()


@dataclass(frozen=True)
class Launch(Step):
    id: str
    stream: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    backend: str
    ops: tuple[OpEntry, ...]  # the group's ops: what a reference kernel runs, what a generated one computes
    triton: TritonKernel | None = None
    cuda: CudaKernel | None = None
    c: CKernel | None = None
    runs: str = TORCH  # the kernel that runs it (format.KERNELS), as the planner chose it
    fallback: str | None = None  # what it may fall back to at run time (format.FALLBACKS), or None


@dataclass(frozen=True)
class Collective(Step):
    id: str
    stream: int
    op: str
    mesh_axes: tuple[str, ...]
    attrs: dict
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    loc: str


@dataclass(frozen=True)
class Record(Step):
    event: str
    stream: int


@dataclass(frozen=True)
class Wait(Step):
    event: str
    stream: int


@dataclass(frozen=True)
class Free(Step):
    values: tuple[str, ...]


@dataclass(frozen=True)
class Arena:
    """The rank's memory plan (sdc/codegen/memory.py): one buffer of `size` bytes; an `alloc` step of a
    value in `offsets` takes the bytes from its offset on. `bounds`: the symbols' upper bounds that
    the sizes of values with symbolic dims were planned at."""

    size: int
    alignment: int
    offsets: dict[str, int]
    bounds: dict[str, int]
    nbytes: dict[str, int]  # each planned value's size at the bounds


@dataclass(frozen=True)
class RankProgram:
    rank: int
    weights: str
    values: dict[str, Value]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    streams: tuple[str, ...]
    steps: tuple[Step, ...]
    arena: Arena | None = None
    # runs of consecutive steps the CPU runtime calls as one, as the planner found them:
    # (kind, step ids), kind "c_segment" or "c_run" (sdc/codegen/calls_as_one.py); () where it does not say
    calls_as_one: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def collective_axes(self) -> list[list[str]]:
        """Every set of mesh axes the rank's collectives run over (each needs a process group)."""
        out: list[list[str]] = []
        for step in self.steps:
            if isinstance(step, Collective) and list(step.mesh_axes) not in out:
                out.append(list(step.mesh_axes))
        return out


class PlanError(ValueError):
    """A malformed rank plan; the message names the rank and step."""


BACKENDS = (REFERENCE, TRITON, CUDA, C)  # the kernel backends this runtime runs


def parse_rank_plan(raw: Any) -> RankProgram:
    """Check one entry of plan.json's `ranks` and read it into typed steps; raises PlanError."""
    if not isinstance(raw, dict) or not _is_int(raw.get("rank")):
        raise PlanError(f"a rank plan must be an object with an integer 'rank', found {_short(raw)}")
    rank = raw["rank"]
    for key, kind in (("weights", str), ("values", dict), ("inputs", list), ("outputs", list), ("steps", list),
                      ("streams", list)):
        if not isinstance(raw.get(key), kind):
            raise PlanError(f"rank {rank}: field '{key}' is missing or not a {_KIND_NAMES[kind]}")
    streams = raw["streams"]
    if not streams or not all(isinstance(s, str) for s in streams):
        raise PlanError(f"rank {rank}: 'streams' must be a non-empty list of stream names, found {_short(streams)}")
    values = {vid: _value(rank, vid, v) for vid, v in raw["values"].items()}
    reader = _Reader(rank, values, len(streams))
    inputs = reader.ids(raw["inputs"], f"rank {rank}: inputs")
    outputs = reader.ids(raw["outputs"], f"rank {rank}: outputs")
    for vid in inputs:
        if values[vid].weight is not None:
            raise PlanError(f"rank {rank}: input value '{vid}' is bound to weight '{values[vid].weight}'")
    reader.defined.update(inputs)
    reader.defined.update(vid for vid, v in values.items() if v.weight is not None)
    reader.protected = set(inputs) | set(outputs) | {vid for vid, v in values.items() if v.weight is not None}
    reader.arena = _arena(rank, raw.get("arena"), values, reader.protected)
    steps = tuple(reader.step(i, s) for i, s in enumerate(raw["steps"]))
    for vid in outputs:
        if vid not in reader.defined:
            raise PlanError(f"rank {rank}: output value '{vid}' is never computed")
    groups = _calls_as_one(rank, raw.get("calls_as_one", []), steps)
    return RankProgram(rank, raw["weights"], values, inputs, outputs, tuple(streams), steps, reader.arena, groups)


CALLS_AS_ONE = ("c_segment", "c_run")


def _calls_as_one(rank: int, raw: Any, steps: tuple) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A rank's `calls_as_one`, checked: each a kind and launch step ids of the plan, in plan order (a
    step may end one and start the next: its ops are cut between them)."""
    where = f"rank {rank}: calls_as_one"
    if not isinstance(raw, list):
        raise PlanError(f"{where} must be a list of {{\"kind\", \"steps\"}}, found {_short(raw)}")
    order = {s.id: n for n, s in enumerate(steps) if isinstance(s, Launch)}
    out = []
    for n, group in enumerate(raw):
        kind = group.get("kind") if isinstance(group, dict) else None
        ids = group.get("steps") if isinstance(group, dict) else None
        if kind not in CALLS_AS_ONE or not isinstance(ids, list) or not ids:
            raise PlanError(f"{where}[{n}] must have a 'kind' ({', '.join(CALLS_AS_ONE)}) and a non-empty 'steps' "
                            f"list, found {_short(group)}")
        unknown = [sid for sid in ids if sid not in order]
        if unknown:
            raise PlanError(f"{where}[{n}] names step {_short(unknown[0])}, which is not a launch step of the plan")
        if [order[sid] for sid in ids] != sorted(order[sid] for sid in ids) or len(set(ids)) != len(ids):
            raise PlanError(f"{where}[{n}]: its steps must be distinct and in plan order, found {_short(ids)}")
        out.append((kind, tuple(ids)))
    return tuple(out)


def _arena(rank: int, raw: Any, values: dict[str, Value], protected: set[str]) -> Arena | None:
    """Check a rank's `arena`: every planned value is an intermediate of known (or bounded) size,
    aligned, and inside the arena. That no two live values overlap is checked at their alloc steps."""
    if raw is None:
        return None
    where = f"rank {rank}: arena"
    if not isinstance(raw, dict):
        raise PlanError(f"{where} must be an object, found {_short(raw)}")
    size, alignment, offsets, bounds = raw.get("bytes"), raw.get("alignment"), raw.get("offsets"), raw.get("bounds", {})
    if not _is_int(size) or size < 0:
        raise PlanError(f"{where}: 'bytes' must be a size in bytes, found {_short(size)}")
    if not _is_int(alignment) or alignment <= 0 or alignment & (alignment - 1):
        raise PlanError(f"{where}: 'alignment' must be a power of two, found {_short(alignment)}")
    if not isinstance(offsets, dict):
        raise PlanError(f"{where}: 'offsets' must map value ids to byte offsets, found {_short(offsets)}")
    if not isinstance(bounds, dict) or not all(isinstance(k, str) and _is_int(b) and b >= 0 for k, b in bounds.items()):
        raise PlanError(f"{where}: 'bounds' must map symbols to their upper bounds, found {_short(bounds)}")
    nbytes: dict[str, int] = {}
    for vid, offset in offsets.items():
        if vid not in values:
            raise PlanError(f"{where} places value {vid!r}, which is not in the values table")
        if vid in protected:
            raise PlanError(f"{where} places value '{vid}', an input, output or weight (only intermediates go there)")
        if not _is_int(offset) or offset < 0 or offset % alignment:
            raise PlanError(f"{where}: value '{vid}' has offset {_short(offset)}, not a multiple of {alignment}")
        n = dtypes.itemsize(values[vid].dtype)
        for d in values[vid].shape:
            try:
                n *= d if _is_int(d) else symexpr.evaluate(str(d), bounds)
            except (symexpr.SymExprError, KeyError, ValueError, ZeroDivisionError):
                raise PlanError(f"{where}: value '{vid}' has dim {d!r}, which the arena's bounds "
                                f"{_short(bounds)} do not size") from None
        if offset + n > size:
            raise PlanError(f"{where}: value '{vid}' (bytes {offset}..{offset + n}) does not fit in the arena of "
                            f"{size} bytes")
        nbytes[vid] = n
    return Arena(size, alignment, dict(offsets), dict(bounds), nbytes)


_KIND_NAMES = {str: "string", dict: "object", list: "list", int: "integer"}


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _value(rank: int, vid: str, v: Any) -> Value:
    where = f"rank {rank}: value '{vid}'"
    if not isinstance(v, dict) or not isinstance(v.get("shape"), list) or not dtypes.is_known(str(v.get("dtype"))):
        raise PlanError(f"{where} must have a 'shape' list and a known 'dtype', found {_short(v)}")
    if not all((_is_int(d) and d >= 0) or (isinstance(d, str) and d) for d in v["shape"]):
        raise PlanError(f"{where}: shape must list sizes, symbol names or \"?\", found {_short(v['shape'])}")
    weight, layout = v.get("weight"), v.get("layout")
    if weight is not None and not isinstance(weight, str):
        raise PlanError(f"{where}: 'weight' must be a weight name, found {_short(weight)}")
    if layout is not None:
        if weight is None:
            raise PlanError(f"{where} has a 'layout' but is not a weight")
        if not isinstance(layout, list) or sorted(layout) != list(range(len(v["shape"]))):
            raise PlanError(f"{where} has layout {layout!r}, which is not a permutation of its {len(v['shape'])} dims")
        layout = tuple(layout)
    return Value(vid, tuple(v["shape"]), v["dtype"], weight, layout)


class _Reader:
    """Reads the steps in order, tracking what is defined, freed and recorded."""

    def __init__(self, rank: int, values: dict[str, Value], n_streams: int):
        self.rank = rank
        self.values = values
        self.n_streams = n_streams
        self.defined: set[str] = set()
        self.freed: set[str] = set()
        self.protected: set[str] = set()  # inputs, outputs and weights: never freed
        self.allocated: set[str] = set()
        self.events: set[str] = set()
        self.step_ids: set[str] = set()
        self.arena: Arena | None = None
        self.in_arena: dict[str, tuple[int, int]] = {}  # allocated arena values not yet freed: byte spans
        self.bases: dict[str, str] = {}  # a view step's value -> the value it is a slice of

    def ids(self, raw: Any, where: str) -> tuple[str, ...]:
        if not isinstance(raw, list):
            raise PlanError(f"{where} must be a list of value ids, found {_short(raw)}")
        for vid in raw:
            if not isinstance(vid, str) or vid not in self.values:
                raise PlanError(f"{where} refers to value {vid!r}, which is not in the values table")
        return tuple(raw)

    def reads(self, vids: tuple[str, ...], where: str, local: set[str] = frozenset()) -> None:
        for vid in vids:
            if vid in self.freed:
                raise PlanError(f"{where}: reads value '{vid}' after it is freed")
            if vid not in self.defined and vid not in local:
                raise PlanError(f"{where}: reads value '{vid}' before it is computed")
            base = self.bases.get(vid)
            while base is not None:
                if base in self.freed:
                    raise PlanError(f"{where}: reads value '{vid}', a view of '{base}', after '{base}' is freed")
                base = self.bases.get(base)

    def writes(self, vids: tuple[str, ...], where: str) -> None:
        for vid in vids:
            if vid in self.defined and vid not in self.allocated:
                raise PlanError(f"{where}: writes value '{vid}', which is already defined")
            if vid in self.freed:
                raise PlanError(f"{where}: writes value '{vid}' after it is freed")

    def stream(self, raw: dict, where: str) -> int:
        s = raw.get("stream")
        if not _is_int(s) or not 0 <= s < self.n_streams:
            raise PlanError(f"{where}: 'stream' must be a stream index 0..{self.n_streams - 1}, found {_short(s)}")
        return s

    def step(self, i: int, raw: Any) -> Step:
        head = f"rank {self.rank} step {i}"
        if not isinstance(raw, dict):
            raise PlanError(f"{head}: a step must be an object, found {_short(raw)}")
        kind = raw.get("kind")
        if kind not in STEP_KINDS:
            raise PlanError(f"{head}: unknown step kind {kind!r} (kinds: {', '.join(STEP_KINDS)})")
        label = raw.get("id") if kind in (LAUNCH, COLLECTIVE) else raw.get("event") if kind in (RECORD, WAIT) else None
        where = f"{head} ({kind} {label})" if isinstance(label, str) else f"{head} ({kind})"
        return getattr(self, f"_{kind}")(i, where, raw)

    def _id(self, raw: dict, where: str) -> str:
        sid = raw.get("id")
        if not isinstance(sid, str) or not sid:
            raise PlanError(f"{where}: 'id' must be a non-empty string, found {_short(sid)}")
        if sid in self.step_ids:
            raise PlanError(f"{where}: step id '{sid}' is used twice")
        self.step_ids.add(sid)
        return sid

    def _alloc(self, i: int, where: str, raw: dict) -> Alloc:
        (vid,) = self.ids([raw.get("value")], where)
        if vid in self.defined:
            raise PlanError(f"{where}: value '{vid}' is already defined")
        if "?" in self.values[vid].shape:
            raise PlanError(f"{where}: value '{vid}' has an unknown dim ('?'), so no buffer can be sized for it")
        reuses = raw.get("reuses")
        if reuses is not None:
            (reuses,) = self.ids([reuses], f"{where}: reuses")
            if reuses not in self.freed:
                raise PlanError(f"{where}: reuses the memory of value '{reuses}', which is not freed before")
        self._arena_takes((vid,), where)
        self.defined.add(vid)
        self.allocated.add(vid)
        return Alloc(i, where, vid, reuses)

    def _view(self, i: int, where: str, raw: dict) -> View:
        (vid,) = self.ids([raw.get("value")], where)
        (base,) = self.ids([raw.get("of")], f"{where}: of")
        axis, offset = raw.get("axis"), raw.get("offset")
        if vid in self.defined or vid in self.protected:
            raise PlanError(f"{where}: value '{vid}' is already defined, or an input, output or weight")
        if base not in self.allocated or base in self.freed:
            raise PlanError(f"{where}: views value '{base}', which no earlier alloc or view step makes (or is freed)")
        if self.arena is not None and vid in self.arena.offsets:
            raise PlanError(f"{where}: value '{vid}' is a view, so the arena cannot place it")
        v, b = self.values[vid], self.values[base]
        if v.dtype != b.dtype or len(v.shape) != len(b.shape) or "?" in v.shape:
            raise PlanError(f"{where}: value '{vid}' ({v.dtype}{list(v.shape)}) cannot be a slice of '{base}' "
                            f"({b.dtype}{list(b.shape)})")
        if not _is_int(axis) or not 0 <= axis < len(b.shape) or not _is_int(offset) or offset < 0:
            raise PlanError(f"{where}: 'axis' must be a dim of '{base}' and 'offset' a size, found "
                            f"{_short(axis)} and {_short(offset)}")
        size = v.shape[axis]
        if (not _is_int(size) or any(d != e for j, (d, e) in enumerate(zip(v.shape, b.shape)) if j != axis)
                or (_is_int(b.shape[axis]) and offset + size > b.shape[axis])):
            raise PlanError(f"{where}: value '{vid}' {list(v.shape)} at offset {offset} of axis {axis} is not a "
                            f"slice of '{base}' {list(b.shape)}")
        self.defined.add(vid)
        self.allocated.add(vid)
        self.bases[vid] = base
        return View(i, where, vid, base, axis, offset)

    def _arena_takes(self, vids: tuple[str, ...], where: str) -> None:
        """The arena values among `vids` take their bytes here (at their alloc step, else at the step
        that makes them): those must not overlap the bytes of any arena value still live (not freed)."""
        if self.arena is None:
            return
        for vid in vids:
            if vid not in self.arena.offsets or vid in self.in_arena:
                continue
            lo = self.arena.offsets[vid]
            hi = lo + self.arena.nbytes[vid]
            for other, (a, b) in self.in_arena.items():
                if lo < b and a < hi:
                    raise PlanError(f"{where}: value '{vid}' (arena bytes {lo}..{hi}) overlaps value '{other}' "
                                    f"(bytes {a}..{b}), which is still live")
            if hi > lo:
                self.in_arena[vid] = (lo, hi)

    def _launch(self, i: int, where: str, raw: dict) -> Launch:
        sid = self._id(raw, where)
        stream = self.stream(raw, where)
        inputs = self.ids(raw.get("inputs"), f"{where}: inputs")
        outputs = self.ids(raw.get("outputs"), f"{where}: outputs")
        kernel = raw.get("kernel")
        if not isinstance(kernel, dict) or not isinstance(kernel.get("backend"), str):
            raise PlanError(f"{where}: 'kernel' must be an object with a 'backend', found {_short(kernel)}")
        backend = kernel["backend"]
        if backend not in BACKENDS:
            raise PlanError(f"{where}: kernel backend '{backend}' is not one this runtime runs "
                            f"({', '.join(BACKENDS)})")
        self.reads(inputs, where)
        self.writes(outputs, where)
        ops = kernel.get("ops")
        if not isinstance(ops, list) or not ops:
            raise PlanError(f"{where}: a {backend} kernel needs a non-empty 'ops' list")
        made: set[str] = set()
        entries = []
        for n, entry in enumerate(ops):
            e = self._op_entry(entry, f"{where} op {n}")
            for vid in e.inputs:
                if vid not in made and vid not in inputs:
                    self.reads((vid,), f"{where} op {n} ('{e.op}')")
            self.writes(e.outputs, f"{where} op {n} ('{e.op}')")
            made.update(e.outputs)
            entries.append(e)
        missing = [v for v in outputs if v not in made]
        if missing:
            raise PlanError(f"{where}: lists output '{missing[0]}', which none of its ops computes")
        self._arena_takes(outputs, where)
        self.defined.update(made)
        triton = _triton_kernel(kernel, inputs, outputs, self.values, where) if backend == TRITON else None
        cuda = _cuda_kernel(kernel, inputs, outputs, self.values, where) if backend == CUDA else None
        c = _c_kernel(kernel, inputs, outputs, self.values, where) if backend == C else None
        runs, fallback = _kernel_choice(kernel, backend, entries, where)
        return Launch(i, where, sid, stream, inputs, outputs, backend, tuple(entries), triton, cuda, c, runs, fallback)

    def _op_entry(self, raw: Any, where: str) -> OpEntry:
        if not isinstance(raw, dict):
            raise PlanError(f"{where}: an op must be an object, found {_short(raw)}")
        name = raw.get("op")
        if not isinstance(name, str) or not name:
            raise PlanError(f"{where}: 'op' must be an sdc op name, found {_short(name)}")
        where = f"{where} ('{name}')"
        attrs = raw.get("attrs", {})
        if not isinstance(attrs, dict):
            raise PlanError(f"{where}: 'attrs' must be an object, found {_short(attrs)}")
        inputs = self.ids(raw.get("inputs", []), f"{where}: inputs")
        outputs = self.ids(raw.get("outputs", []), f"{where}: outputs")
        loc = raw.get("loc") or ""
        if not isinstance(loc, str):
            raise PlanError(f"{where}: 'loc' must be a string, found {_short(loc)}")
        in_place = raw.get("in_place")
        if in_place is not None and (not _is_int(in_place) or not 0 <= in_place < len(inputs) or len(outputs) != 1):
            raise PlanError(f"{where}: 'in_place' must be the index of one of its {len(inputs)} operands "
                            f"(and the op must have one result), found {_short(in_place)}")
        runs = raw.get("runs")
        if runs is not None and runs not in KERNELS:
            raise PlanError(f"{where}: 'runs' must name a kernel ({', '.join(KERNELS)}), found {_short(runs)}")
        return OpEntry(name, attrs, inputs, outputs, loc, in_place, runs)

    def _collective(self, i: int, where: str, raw: dict) -> Collective:
        sid = self._id(raw, where)
        stream = self.stream(raw, where)
        name = raw.get("op")
        if not isinstance(name, str) or not name:
            raise PlanError(f"{where}: 'op' must be an sdc collective op name, found {_short(name)}")
        axes = raw.get("mesh_axes")
        if not isinstance(axes, list) or not axes or not all(isinstance(a, str) for a in axes):
            raise PlanError(f"{where}: 'mesh_axes' must be a non-empty list of mesh axis names, found {_short(axes)}")
        attrs = raw.get("attrs", {})
        if not isinstance(attrs, dict):
            raise PlanError(f"{where}: 'attrs' must be an object, found {_short(attrs)}")
        inputs = self.ids(raw.get("inputs"), f"{where}: inputs")
        outputs = self.ids(raw.get("outputs"), f"{where}: outputs")
        self.reads(inputs, where)
        self.writes(outputs, where)
        self._arena_takes(outputs, where)
        self.defined.update(outputs)
        loc = raw.get("loc") or ""
        return Collective(i, where, sid, stream, name, tuple(axes), attrs, inputs, outputs,
                          loc if isinstance(loc, str) else "")

    def _record(self, i: int, where: str, raw: dict) -> Record:
        event, stream = self._event(raw, where), self.stream(raw, where)
        if event in self.events:
            raise PlanError(f"{where}: event '{event}' is recorded twice")
        self.events.add(event)
        return Record(i, where, event, stream)

    def _wait(self, i: int, where: str, raw: dict) -> Wait:
        event, stream = self._event(raw, where), self.stream(raw, where)
        if event not in self.events:
            raise PlanError(f"{where}: waits for event '{event}', which no earlier step records")
        return Wait(i, where, event, stream)

    def _event(self, raw: dict, where: str) -> str:
        event = raw.get("event")
        if not isinstance(event, str) or not event:
            raise PlanError(f"{where}: 'event' must be a non-empty string, found {_short(event)}")
        return event

    def _free(self, i: int, where: str, raw: dict) -> Free:
        vids = self.ids(raw.get("values"), f"{where}: values")
        for vid in vids:
            if vid in self.protected:
                raise PlanError(f"{where}: frees value '{vid}', an input, output or weight")
            if vid in self.freed:
                raise PlanError(f"{where}: frees value '{vid}' twice")
            if vid not in self.defined:
                raise PlanError(f"{where}: frees value '{vid}' before it is computed")
        self.freed.update(vids)
        for vid in vids:
            self.in_arena.pop(vid, None)
        return Free(i, where, vids)


def _kernel_choice(kernel: dict, backend: str, entries: list[OpEntry], where: str) -> tuple[str, str | None]:
    """A launch's `runs` and `fallback` (the planner's choice of kernel, docs/artifact.md), checked: a
    generated kernel's is its backend's; a reference group's is one of its ops' choices. A plan that
    does not say gets its backend's kernel (a reference group's: torch, unless its ops say)."""
    runs, fallback = kernel.get("runs"), kernel.get("fallback")
    generated = GENERATED_KERNELS.get(backend)
    if runs is None:
        said = [e.runs for e in entries if e.runs is not None]
        runs = generated or (min(said, key=list(KERNELS).index) if said else TORCH)
    elif runs not in KERNELS:
        raise PlanError(f"{where}: 'runs' must name a kernel ({', '.join(KERNELS)}), found {_short(runs)}")
    elif generated is not None and runs != generated:
        raise PlanError(f"{where}: a {backend} kernel runs as '{generated}', the plan says {_short(runs)}")
    elif generated is None and any(e.runs is not None for e in entries) and runs not in {e.runs for e in entries}:
        raise PlanError(f"{where}: 'runs' is {_short(runs)}, which none of its ops runs "
                        f"({', '.join(sorted({e.runs for e in entries if e.runs}))})")
    if "fallback" not in kernel and backend == C:
        fallback = TORCH  # (the C launcher's own, planned or not)
    if fallback is not None and fallback not in FALLBACKS.get(runs, ()):
        allowed = FALLBACKS.get(runs, ())
        raise PlanError(f"{where}: a '{runs}' kernel falls back to " + (" or ".join(allowed) if allowed else "nothing")
                        + f", the plan says {_short(fallback)}")
    return runs, fallback


# ---------------------------------------------------------------- generated (triton) kernels

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KERNEL_FILE = re.compile(rf"^{KERNELS_DIR}/[A-Za-z0-9_.-]+\.py$")


def _source_and_entry(raw: dict, where: str, backend: str, file: re.Pattern, suffix: str,
                      language: str) -> tuple[str, str]:
    """A generated kernel's `source` (a file kernels/NAME.<suffix> of the artifact) and `entry`."""
    source, entry = raw.get("source"), raw.get("entry")
    if not isinstance(source, str) or not file.match(source) or ".." in source:
        raise PlanError(f"{where}: a {backend} kernel's 'source' must be a file {KERNELS_DIR}/NAME.{suffix}, "
                        f"found {_short(source)}")
    if not isinstance(entry, str) or not _IDENTIFIER.match(entry):
        raise PlanError(f"{where}: a {backend} kernel's 'entry' must be a {language} identifier, found {_short(entry)}")
    return source, entry


def _domain_and_tensors(raw: dict, inputs: tuple[str, ...], outputs: tuple[str, ...], values: dict[str, Value],
                        where: str, backend: str) -> tuple[list, tuple, tuple]:
    """A generated kernel's `domain` (sizes, null where known only at run time), its tensor `args`
    and `results` over it; the results must be the launch's outputs."""
    domain = raw.get("domain")
    if not isinstance(domain, list) or not all(d is None or (_is_int(d) and d >= 0) for d in domain):
        raise PlanError(f"{where}: 'domain' must list sizes or null, found {_short(domain)}")
    args = _kernel_tensors(raw, "args", inputs, values, len(domain), where)
    results = _kernel_tensors(raw, "results", outputs, values, len(domain), where)
    if sorted(r.value for r in results) != sorted(outputs):
        raise PlanError(f"{where}: a {backend} kernel's 'results' must be the launch's outputs {list(outputs)}")
    return domain, args, results


def _triton_kernel(raw: dict, inputs: tuple[str, ...], outputs: tuple[str, ...], values: dict[str, Value],
                   where: str) -> TritonKernel:
    """Check a triton `kernel` object: its file, entry, domain, tensors, grid and constexprs."""
    source, entry = _source_and_entry(raw, where, "triton", _KERNEL_FILE, "py", "Python")
    template = raw.get("template", "")
    domain, args, results = _domain_and_tensors(raw, inputs, outputs, values, where, "triton")
    rank = len(domain)
    grid, constexprs, warps = _launch_config(raw, rank, where)
    flag = raw.get("contiguous_flag")
    if flag is not None and (not isinstance(flag, str) or flag not in constexprs):
        raise PlanError(f"{where}: 'contiguous_flag' must name one of the kernel's constexprs, found {_short(flag)}")
    tune = raw.get("tune", [])
    if not isinstance(tune, list) or not all(isinstance(t, dict) for t in tune):
        raise PlanError(f"{where}: 'tune' must be a list of launch configurations, found {_short(tune)}")
    configs = tuple(TuneConfig(c, w, g) for g, c, w in (_launch_config(t, rank, f"{where} tune[{i}]")
                                                         for i, t in enumerate(tune)))
    for i, c in enumerate(configs):
        if set(c.constexprs) != set(constexprs):
            raise PlanError(f"{where} tune[{i}]: its constexprs {sorted(c.constexprs)} are not the kernel's "
                            f"{sorted(constexprs)}")
    return TritonKernel(source, entry, str(template), tuple(domain), args, results, grid, constexprs, warps,
                        flag, configs)


def _kernel_tensors(raw: dict, key: str, allowed: tuple[str, ...], values: dict[str, Value], rank: int,
                    where: str) -> tuple[KernelTensor, ...]:
    """A generated kernel's `args` or `results` (`key`), checked: launch values with one domain dim
    (or null) per dim."""
    items = raw.get(key)
    if not isinstance(items, list):
        raise PlanError(f"{where}: '{key}' must be a list of {{\"value\", \"map\"}}, found {_short(items)}")
    out = []
    for t in items:
        vid = t.get("value") if isinstance(t, dict) else None
        if vid not in allowed:
            raise PlanError(f"{where}: '{key}' names value {_short(vid)}, which is not among the launch's "
                            f"{'inputs' if key == 'args' else 'outputs'}")
        m = t.get("map")
        if (not isinstance(m, list) or len(m) != len(values[vid].shape)
                or not all(d is None or (_is_int(d) and 0 <= d < rank) for d in m)):
            raise PlanError(f"{where}: the map of '{vid}' must give one domain dim (0..{rank - 1}) or null for "
                            f"each of its {len(values[vid].shape)} dims, found {_short(m)}")
        layout = t.get("layout")
        if layout is not None and (not isinstance(layout, list) or sorted(layout) != list(range(len(m)))):
            raise PlanError(f"{where}: the layout of '{vid}' must be a permutation, found {_short(layout)}")
        out.append(KernelTensor(vid, tuple(m), tuple(layout) if layout is not None else None))
    return tuple(out)


_CUDA_FILE = re.compile(rf"^{KERNELS_DIR}/[A-Za-z0-9_.-]+\.cu$")
MAX_THREADS_PER_BLOCK = 1024  # CUDA's limit on every device sdc targets
MAX_STATIC_SHARED_MEM = 48 * 1024  # what a launch gets without opting in to more (cuFuncSetAttribute)


def _cuda_kernel(raw: dict, inputs: tuple[str, ...], outputs: tuple[str, ...], values: dict[str, Value],
                 where: str) -> CudaKernel:
    """Check a cuda `kernel` object: its file, entry, domain, tensors, grid, block, shared memory, scalars."""
    source, entry = _source_and_entry(raw, where, "cuda", _CUDA_FILE, "cu", "C")
    domain, args, results = _domain_and_tensors(raw, inputs, outputs, values, where, "cuda")
    rank = len(domain)
    if any(t.layout is not None for t in (*args, *results)):
        raise PlanError(f"{where}: a cuda kernel's tensors are dense in row-major order (no 'layout')")
    grid = _grid_exprs(raw, rank, where)
    block = raw.get("block")
    if (not isinstance(block, list) or not 1 <= len(block) <= 3 or not all(_is_int(b) and b > 0 for b in block)
            or math.prod(block) > MAX_THREADS_PER_BLOCK):
        raise PlanError(f"{where}: 'block' must be 1 to 3 positive thread counts, at most "
                        f"{MAX_THREADS_PER_BLOCK} in all, found {_short(block)}")
    shared = raw.get("shared_mem", 0)
    if not _is_int(shared) or not 0 <= shared <= MAX_STATIC_SHARED_MEM:
        raise PlanError(f"{where}: 'shared_mem' must be 0..{MAX_STATIC_SHARED_MEM} bytes, found {_short(shared)}")
    scalars = _grid_exprs(raw, rank, where, key="scalars")
    return CudaKernel(source, entry, str(raw.get("template", "")), tuple(domain), args, results, grid,
                      tuple(block), shared, scalars)


_C_FILE = re.compile(rf"^{KERNELS_DIR}/[A-Za-z0-9_.-]+\.c$")
C_TEMPLATES = ("elementwise", "row", "matmul")
# element types of the C kernel ABI (sdc/runtime/launch/c.py): no f16 or bf16 (C11 has no such type)
C_DTYPES = frozenset({"f64", "f32", "i64", "i32", "i16", "i8", "ui8", "i1"})


def _c_kernel(raw: dict, inputs: tuple[str, ...], outputs: tuple[str, ...], values: dict[str, Value],
              where: str) -> CKernel:
    """Check a c `kernel` object: its file, entry, template, domain and tensors (dense, of ABI dtypes)."""
    source, entry = _source_and_entry(raw, where, "c", _C_FILE, "c", "C")
    template = raw.get("template")
    if template not in C_TEMPLATES:
        raise PlanError(f"{where}: a c kernel's 'template' must be one of {', '.join(C_TEMPLATES)}, "
                        f"found {_short(template)}")
    domain, args, results = _domain_and_tensors(raw, inputs, outputs, values, where, "c")
    # a tensor with a `layout` is passed dense in that physical order, its map over the physical dims
    for t in (*args, *results):
        if values[t.value].dtype not in C_DTYPES:
            raise PlanError(f"{where}: value '{t.value}' is {values[t.value].dtype}, which a c kernel does not "
                            f"store (it stores {', '.join(sorted(C_DTYPES))})")
    transposed = raw.get("transposed", [])
    if (not isinstance(transposed, list) or not all(_is_int(i) and 0 <= i < len(args) for i in transposed)
            or len(set(transposed)) != len(transposed)
            or any(values[args[i].value].weight is None or len(values[args[i].value].shape) != 2 for i in transposed)):
        raise PlanError(f"{where}: a c kernel's 'transposed' must list distinct indices of its args that are 2-d "
                        f"weights, found {_short(transposed)}")
    return CKernel(source, entry, template, tuple(domain), args, results, tuple(transposed))


def _grid_exprs(raw: dict, rank: int, where: str, key: str = "grid") -> tuple[str, ...]:
    """A kernel object's `grid` (1 to 3 dim expressions over the domain sizes d0, d1, ...), or with
    `key="scalars"` a cuda kernel's list of such expressions (any number, none by default)."""
    exprs = raw.get(key, [] if key == "scalars" else None)
    if not isinstance(exprs, list) or (key == "grid" and not 1 <= len(exprs) <= 3):
        count = "1 to 3" if key == "grid" else "any number of"
        raise PlanError(f"{where}: '{key}' must be a list of {count} dim expressions, found {_short(exprs)}")
    names = {f"d{d}" for d in range(rank)}
    for g in exprs:
        try:
            used = symexpr.free_symbols(str(g)) if isinstance(g, (str, int)) and not isinstance(g, bool) else None
        except symexpr.SymExprError as e:
            raise PlanError(f"{where}: {key} entry {_short(g)}: {e}") from None
        if used is None or not set(used) <= names:
            raise PlanError(f"{where}: {key} entry {_short(g)} must be a dim expression over {sorted(names)}")
    return tuple(str(g) for g in exprs)


def _launch_config(raw: dict, rank: int, where: str) -> tuple[tuple[str, ...], dict, int]:
    """(grid, constexprs, num_warps) of a triton kernel object or of one of its `tune` entries, checked."""
    grid = _grid_exprs(raw, rank, where)
    constexprs = raw.get("constexprs", {})
    if not isinstance(constexprs, dict) or not all(
            isinstance(k, str) and _IDENTIFIER.match(k) and (_is_int(v) or isinstance(v, bool))
            for k, v in constexprs.items()):
        raise PlanError(f"{where}: 'constexprs' must map names to integers, found {_short(constexprs)}")
    warps = raw.get("num_warps", 4)
    if not _is_int(warps) or warps not in (1, 2, 4, 8, 16, 32):
        raise PlanError(f"{where}: 'num_warps' must be a power of 2 up to 32, found {_short(warps)}")
    return grid, dict(constexprs), warps
