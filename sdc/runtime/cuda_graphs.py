"""CUDA graphs: capture a whole call once per input shape, replay it afterwards.

Why: a call runs one Python instruction per op; on a small batch that host time (about 1.8 ms per
call for ResNet-18 at batch 1) is most of the time. A CUDA graph replays every kernel of the call
with one host call.

How (`GraphRunner`, one per executor on a CUDA device): calls are keyed by their input signature
(each input's shape and dtype). The first call of a signature runs eagerly (it warms up: Triton
compiles its kernels, cuBLAS makes its handles). The second captures the call's instructions into
a `torch.cuda.CUDAGraph` with static input buffers (the inputs are copied into them) and replays
it; later calls copy their inputs in and replay. Memory the instructions take during capture comes
from the graph's private pool, and the arena (sdc/runtime/arena.py) was allocated before, so every
address is fixed. The outputs are the graph's static tensors, so each call returns copies of them:
the caller's outputs never change under it. Dynamic dims get one graph per signature, in an LRU
cache of `capacity` (8) graphs.

When it is not used (`skipped` says why, `sdc run --profile` and `exe.profiler` run eagerly):
- `SDC_CUDA_GRAPHS=0` (or off) in the environment when the artifact is loaded;
- a plan with collectives (NCCL capture needs its own setup, gloo cannot be captured) or with more
  than one stream;
- a plan of fewer than `MIN_LAUNCHES` launches: replaying saves one host call per launch, while
  the copies into the static inputs and out of the static outputs cost a pass over every input
  and output (on the H200 a one-kernel 64M-element bf16 program spent 0.27 ms of its 0.4 ms call
  in them);
- a capture that fails: an op that synchronizes with the host (a reference kernel calling `.item()`,
  a shape that depends on the data) cannot be captured; the call runs eagerly, and the executable
  stays eager from then on, with the error as the reason.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import torch

from sdc.runtime import plan_schema as S

GRAPHS_ENV = "SDC_CUDA_GRAPHS"
CAPACITY = 8
MIN_LAUNCHES = 3

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


@dataclass
class Captured:
    graph: Any  # torch.cuda.CUDAGraph
    inputs: list[torch.Tensor]  # static input buffers
    outputs: list[torch.Tensor]  # the graph's static outputs


class GraphRunner:
    """Runs an executor's calls through CUDA graphs where it can (module docstring)."""

    def __init__(self, eager: Callable[[list, dict], list], device: torch.device, capacity: int = CAPACITY):
        self.eager = eager  # one uncaptured call: eager(inputs, symbols) -> outputs
        self.device = device
        self.capacity = capacity
        self.cache: OrderedDict[Signature, Captured] = OrderedDict()
        self.seen: set[Signature] = set()
        self.skipped: str | None = None  # why calls stopped being captured
        self.captures = 0
        self.replays = 0

    @staticmethod
    def signature(inputs: list[torch.Tensor]) -> Signature:
        return tuple((tuple(t.shape), t.dtype) for t in inputs)

    def run(self, inputs: list[torch.Tensor], symbols: dict[str, int]) -> list[torch.Tensor]:
        if self.skipped is not None:
            return self.eager(inputs, symbols)
        key = self.signature(inputs)
        captured = self.cache.get(key)
        if captured is None:
            if key not in self.seen:
                self.seen.add(key)
                return self.eager(inputs, symbols)
            captured = self._capture(key, inputs, symbols)
            if captured is None:
                return self.eager(inputs, symbols)
        else:
            self.cache.move_to_end(key)
        for static, t in zip(captured.inputs, inputs):
            static.copy_(t)
        captured.graph.replay()
        self.replays += 1
        return [t.clone() for t in captured.outputs]

    def _capture(self, key: Signature, inputs: list[torch.Tensor], symbols: dict[str, int]) -> Captured | None:
        static = [torch.empty_like(t, memory_format=torch.contiguous_format).copy_(t) for t in inputs]
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize(self.device)
        try:
            with torch.cuda.graph(graph):
                outputs = self.eager(static, symbols)
        except Exception as e:  # a host sync or an op capture does not allow: stay eager from now on
            torch.cuda.synchronize(self.device)
            self.skipped = f"capture failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            self.cache.clear()
            return None
        captured = Captured(graph, static, list(outputs))
        self.cache[key] = captured
        self.captures += 1
        while len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
        return captured
