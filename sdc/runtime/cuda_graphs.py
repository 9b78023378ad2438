"""CUDA graphs: capture a whole call once per input shape, replay it afterwards.

Why: a call runs one Python instruction per op; on a small batch that host time (about 1.8 ms per
call for ResNet-18 at batch 1) is most of the time. A CUDA graph replays every kernel of the call
with one host call.

How (`GraphRunner`, one per executor on a CUDA device): calls are keyed by their input signature
(each input's shape and dtype). The first call of a signature runs eagerly (it warms up: Triton
compiles its kernels, cuBLAS makes its handles). The second captures the call's instructions into
a `torch.cuda.CUDAGraph` with static input buffers and replays it. Memory the instructions take
during capture comes from the graph's pool, and the arena (sdc/runtime/arena.py) was allocated
before, so every address is fixed. Dynamic dims get one entry per signature, in an LRU cache of
`capacity` (8) entries.

What a replay costs besides the kernels, and how it is kept small:
- Inputs: a caller's tensor is copied into the static input buffer, unless it is that buffer
  (`static_inputs` hands them out: fill them in place and pass them back, and no copy is made).
- Outputs: the graph's output buffers are handed to the caller as they are, without a clone. That is
  safe because a graph is replayed only when nobody outside holds its outputs any more: before a
  replay the runner reads the use count of each output's storage (views and numpy arrays of it count
  too). When the caller still holds them (the usual `y = exe(x)` loop holds the previous `y` during
  the call), the next graph of a small ring (`RING`, 2), captured on first need over the same inputs
  and the same memory pool, writes its own output buffers. When every graph's outputs are still held
  (a caller keeping all its results), that call runs eagerly, into fresh memory. So an earlier
  output never changes under its caller, and outputs cost no device copy. An output that is not the
  graph's own memory (it aliases an input buffer or a weight) is cloned per replay.
A caller that wants the torch.compile convention (outputs valid until the next replay) loses nothing
here: dropping the previous outputs keeps replaying the first graph. The price of the ring is memory,
paid only by keys whose outputs a caller held across a call: a second set of output buffers (the
graphs of a key share one memory pool, so their intermediates are not doubled: replays of one
executor never run at the same time).

When it is not used (`skipped` says why, `sdc run --profile` and `exe.profiler` run eagerly):
- `SDC_CUDA_GRAPHS=0` (or off) in the environment when the artifact is loaded;
- a plan with collectives (NCCL capture needs its own setup, gloo cannot be captured) or with more
  than one stream;
- a plan of fewer than `MIN_LAUNCHES` launches: replaying saves one host call per launch, while
  copying the inputs into the static buffers costs a pass over every input (on the H200 a one-kernel
  64M-element bf16 program spent 0.27 ms of its 0.4 ms call in those copies and the output clones
  that replays made then; outputs are no longer copied, inputs are unless passed as `static_inputs`);
- a capture that fails: an op that synchronizes with the host (a reference kernel calling `.item()`,
  a shape that depends on the data) cannot be captured; the call runs eagerly, and the executable
  stays eager from then on, with the error as the reason.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sdc.runtime import plan_schema as S

GRAPHS_ENV = "SDC_CUDA_GRAPHS"
CAPACITY = 8
MIN_LAUNCHES = 3
RING = 2

Signature = tuple


def graphs_enabled() -> bool:
    return os.environ.get(GRAPHS_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def static_reason(program: S.RankProgram, device: torch.device | None) -> str | None:
    """Why this plan is never captured on `device`, or None when it may be."""
    if device is None or device.type != "cuda":
        return "not on a CUDA device"
    if not graphs_enabled():
        return f"turned off ({GRAPHS_ENV}=0)"
    if any(isinstance(s, S.Collective) for s in program.steps):
        return "the plan has collectives"
    if len(program.streams) > 1:
        return "the plan uses more than one stream"
    launches = sum(isinstance(s, S.Launch) for s in program.steps)
    if launches < MIN_LAUNCHES:
        return (f"the plan has {launches} launch{'es' if launches != 1 else ''}: a replay would save less host "
                f"time than copying the inputs and outputs through the graph's buffers costs")
    return None


# torch's count of the references to a storage (what its cudagraph trees read for the same purpose);
# private, so a torch without it gets the safe behaviour: every output cloned per replay.
_USE_COUNT = getattr(torch._C, "_storage_Use_Count", None)


def storage_uses(t: torch.Tensor) -> int:
    """How many tensors (and storage objects) share `t`'s memory: views count, numpy arrays too."""
    return _USE_COUNT(t.untyped_storage()._cdata)


class CudaGraphBackend:
    """What `GraphRunner` needs of CUDA: graphs, a memory pool shared by the graphs of one signature,
    capture and a device sync. Tests pass a fake with the same four methods (no GPU in CI)."""

    def __init__(self, device: torch.device):
        self.device = device

    def new_graph(self) -> Any:
        return torch.cuda.CUDAGraph()

    def new_pool(self) -> Any:
        return torch.cuda.graph_pool_handle()

    def capture(self, graph: Any, pool: Any, call: Callable[[], list[torch.Tensor]]) -> list[torch.Tensor]:
        with torch.cuda.graph(graph, pool=pool):
            return list(call())

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)


@dataclass(eq=False)
class Captured:
    """One signature's graphs: the static inputs they share, and per graph its output buffers."""

    inputs: list[torch.Tensor]  # static input buffers
    pool: Any  # the memory pool the graphs capture into
    graphs: list[Any] = field(default_factory=list)  # torch.cuda.CUDAGraph, at most RING
    outputs: list[list[torch.Tensor]] = field(default_factory=list)  # per graph: its static outputs
    # per graph: (index, baseline use count) of the outputs handed out as they are; the others are cloned
    owned: list[list[tuple[int, int]]] = field(default_factory=list)
    next: int = 0  # the graph to try first

    def free_graph(self) -> int | None:
        """A graph whose handed-out outputs nobody holds any more, or None."""
        n = len(self.graphs)
        for k in range(n):
            i = (self.next + k) % n
            outs = self.outputs[i]
            for j, base in self.owned[i]:
                if storage_uses(outs[j]) > base:
                    break
            else:
                return i
        return None


class GraphRunner:
    """Runs an executor's calls through CUDA graphs where it can (module docstring)."""

    def __init__(self, eager: Callable[[list, dict], list], device: torch.device, capacity: int = CAPACITY,
                 backend: Any = None, ring: int = RING):
        self.eager = eager  # one uncaptured call: eager(inputs, symbols) -> outputs
        self.device = device
        self.capacity = capacity
        self.ring = ring
        self.backend = backend if backend is not None else CudaGraphBackend(device)
        self.cache: OrderedDict[Signature, Captured] = OrderedDict()
        self.seen: set[Signature] = set()
        self.skipped: str | None = None  # why calls stopped being captured
        self.captures = 0
        self.replays = 0
        self.input_copies = 0  # inputs copied into static buffers (0 when callers pass `static_inputs`)
        self.held_fallbacks = 0  # calls run eagerly because every graph's outputs were still held

    @staticmethod
    def signature(inputs: list[torch.Tensor]) -> Signature:
        return tuple((t.shape, t.dtype) for t in inputs)

    def run(self, inputs: list[torch.Tensor], symbols: dict[str, int]) -> list[torch.Tensor]:
        if self.skipped is not None:
            return self.eager(inputs, symbols)
        key = self.signature(inputs)
        entry = self.cache.get(key)
        if entry is None:
            if key not in self.seen:
                self.seen.add(key)
                return self.eager(inputs, symbols)
            entry = self._new_entry(key, inputs)
        else:
            self.cache.move_to_end(key)
        i = entry.free_graph()
        if i is None:
            if len(entry.graphs) >= self.ring:
                self.held_fallbacks += 1
                return self.eager(inputs, symbols)
            self._copy_in(entry, inputs)
            i = self._capture(key, entry, symbols)
            if i is None:
                return self.eager(inputs, symbols)
        else:
            self._copy_in(entry, inputs)
        entry.graphs[i].replay()
        entry.next = i
        self.replays += 1
        outs = entry.outputs[i]
        owned = entry.owned[i]
        # Each handed-out output is a new alias of the buffer (`detach`), never the runner's own tensor
        # object: the alias is what raises the storage's use count while the caller holds it, and the
        # caller can change nothing of the buffer's tensor (resize_, set_).
        if len(owned) == len(outs):
            return [t.detach() for t in outs]
        mine = {j for j, _ in owned}
        return [t.detach() if j in mine else t.clone() for j, t in enumerate(outs)]

    def static_inputs(self, inputs: list[torch.Tensor], symbols: dict[str, int]) -> list[torch.Tensor] | None:
        """The static input buffers of `inputs`' signature, capturing its first graph now if need be
        (after one eager warm-up call on `inputs`); None when calls of this runner are not captured.
        Filling them in place and passing them back makes a replay copy no input."""
        key = self.signature(inputs)
        if self.skipped is None and key not in self.cache:
            if key not in self.seen:
                self.seen.add(key)
                self.eager(inputs, symbols)
            entry = self._new_entry(key, inputs)
            self._copy_in(entry, inputs)
            if self._capture(key, entry, symbols) is None:
                return None
        entry = self.cache.get(key)
        return list(entry.inputs) if entry is not None else None

    def _copy_in(self, entry: Captured, inputs: list[torch.Tensor]) -> None:
        for static, t in zip(entry.inputs, inputs):
            if t is not static and (t.data_ptr() != static.data_ptr() or t.stride() != static.stride()):
                static.copy_(t)
                self.input_copies += 1

    def _new_entry(self, key: Signature, inputs: list[torch.Tensor]) -> Captured:
        entry = Captured([torch.empty_like(t, memory_format=torch.contiguous_format) for t in inputs],
                         self.backend.new_pool())
        self.cache[key] = entry
        while len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
        return entry

    def _capture(self, key: Signature, entry: Captured, symbols: dict[str, int]) -> int | None:
        """Capture one more graph of `entry` (its static inputs already hold this call's values);
        returns its index, or None when capture failed (then calls stay eager from now on)."""
        graph = self.backend.new_graph()
        self.backend.synchronize()
        try:
            outputs = self.backend.capture(graph, entry.pool, lambda: self.eager(entry.inputs, symbols))
        except Exception as e:  # a host sync or an op capture does not allow: stay eager from now on
            self.backend.synchronize()
            self.skipped = f"capture failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            self.cache.clear()
            return None
        inputs = {t.untyped_storage().data_ptr() for t in entry.inputs}
        seen: set[int] = set()
        owned = []
        for j, t in enumerate(outputs):
            ptr = t.untyped_storage().data_ptr()
            if _USE_COUNT is not None and ptr not in inputs and ptr not in seen:  # the graph's own, this output's only
                owned.append(j)
            seen.add(ptr)
        entry.graphs.append(graph)
        entry.outputs.append(outputs)
        # The baseline: the uses of each output's storage that are the runner's own (its list here).
        entry.owned.append([(j, storage_uses(outputs[j])) for j in owned])
        self.captures += 1
        return len(entry.graphs) - 1
