"""Runs of the CPU executor's C-kernel ops replayed as one call: the `CRun` instruction.

A convolution, pooling, global average pooling, local response normalization, linear resize, channel
shuffle, channel scaling or concat that runs in c_conv.c costs some 5 us of Python per
call besides its kernel (the thread gate, the kernel's checks of its operands, its result's allocation,
the ctypes call), and more with the caches cold: in the bench, where other engines run between two
calls, the Python of a MobileNet-v3 segmentation model's 75 such instructions took 0.4-0.6 ms more
than in a warm loop. A run is a maximal sequence of consecutive executor instructions that are plain
ops of those kinds (`RUN_OPS`) and free steps, holding at least two ops.

The first call of a run with given input layouts (the shapes, strides and dtypes of the values it reads
from before it) and thread count runs its instructions one by one, as the executor would, and records
the kernel each op called (c_conv.start_recording): its function, its tensors and its size and
activation arrays. When every op made exactly one call and its result is the kernel's output, and
every tensor a call read is a weight (a constant slot, or the kernel's own packed weight), a value the
run reads from before it, or an earlier call's result, the record becomes a plan (`_Plan`): one array
of calls for c_conv.c's `sdc_run_calls`. Values the run makes and frees live in buffers the plan keeps,
a buffer taken again by a later value of the run once its value is freed (the memory most recently
written, as a memory planner gives it); values read after the run get fresh tensors per call. A later
call of those layouts writes the pointers of its inputs and fresh results into the array and makes one
ctypes call. The kernels take their thread counts from the recorded size arrays, so the counts are
those the gate chose in the recorded call; torch's count is left as the last op left it.

Where an op did not run a kernel here (oneDNN or the reference ran it: an input of another layout, a
unary op the kernel has none of), the run is cut around it for calls of those layouts: the parts of
two or more C ops become runs of their own (recording on their next call), the rest run one by one.
Where no plan can be made (one tensor in two of the run's input slots, where the record could not
tell which slot a call read; a call read a tensor that is none of the above), the instructions run one
by one, as they do when a kernel's scratch was not allocated (no instruction of a run writes a value
it reads, so running them again from the start is the call's result). `SDC_C_RUNS=0` at load turns
runs off.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sdc.runtime import c_conv
from sdc.runtime.instructions import FreeSlots, PreparedOp, _straight_line, replace_runs
from sdc.runtime.switches import env_switch

RUNS_ENV = "SDC_C_RUNS"
# and an op whose direct kernel says it is one (`c_run_member`: a channel shuffle, a squeeze-excite
# scaling, a concat along the channels)
RUN_OPS = ("conv", "global_avg_pool", "max_pool", "avg_pool", "lrn", "resize")
PLANS = 8  # input layouts a run keeps a plan for


def runs_enabled() -> bool:
    """SDC_C_RUNS (read when an artifact is loaded): unset or 1/on, or 0/off."""
    return env_switch(RUNS_ENV) is not False


def build_runs(program: list[Callable], comm: Any, initial: list) -> list[Callable]:
    """`program` with each run (module docstring) replaced by one `CRun`; `initial` holds the executor's
    slots before a call (its weights)."""
    if not runs_enabled() or c_conv.library() is None:
        return program

    def member(i: Any) -> bool:
        if isinstance(i, FreeSlots):
            return not i.keep
        return (isinstance(i, PreparedOp) and i.plain(comm) and len(i.outs) == 1 and bool(i.ins)
                and (i.name in RUN_OPS or getattr(i.direct, "c_run_member", False)))

    return replace_runs(program, member, lambda i: isinstance(i, PreparedOp), lambda run: CRun(run, comm, initial))


@dataclass
class _Plan:
    """What calls of one input layout and thread count run (module docstring)."""

    stepwise: bool = False  # run the instructions one by one
    parts: tuple = ()  # or these instructions: runs of C kernels between ops that ran elsewhere (`CRun._split`)
    count: int = 0
    calls: Any = None  # ctypes array of 8 pointers a call: the function, then its arguments
    input_patches: tuple = ()  # (index in `calls`, position among the run's varying inputs)
    fresh: tuple = ()  # (shape, strides) of each value read after the run, allocated per call
    fresh_patches: tuple = ()  # (index in `calls`, position in `fresh`)
    results: tuple = ()  # (slot, position in `fresh`)
    threads: int = 1  # torch's thread count after the recorded call's last op
    keep: list = field(default_factory=list)  # what the pointers in `calls` point into


class CRun:
    """One run of C-kernel ops and frees (module docstring), an executor instruction."""

    def __init__(self, members: tuple, comm: Any, initial: list):
        self.members = members
        self.comm, self.initial = comm, initial
        self.steps = _straight_line(list(members), comm)  # a call run one instruction at a time
        # one op at a time, as the fast program runs it (specialized, under the thread gate)
        self.recording_steps = [m if isinstance(m, FreeSlots) else _straight_line([m], comm)[0] for m in members]
        made: list[int] = []
        inputs: list[int] = []
        for m in members:
            if isinstance(m, PreparedOp):
                inputs += [s for s in dict.fromkeys(m.ins) if s not in made and s not in inputs]
                made += m.outs
        freed = {s for m in members if isinstance(m, FreeSlots) for s in m.slots}
        self.constant = tuple(s for s in inputs if initial[s] is not None)  # weights: the same tensors every call
        self.varying = tuple(s for s in inputs if initial[s] is None)
        self.leaving = frozenset(s for s in made if s not in freed)  # values read after the run
        self.freed_inputs = tuple(s for s in inputs if s in freed)
        self.run_calls = c_conv.library().sdc_run_calls
        self.plans: dict = {}

    def stepwise(self, vals: list, state: Any) -> None:
        for step in self.steps:
            step(vals, state)

    def __call__(self, vals: list, state: Any) -> None:
        tensors = [vals[s] for s in self.varying]
        key = (state.threads, *[(t.shape, t.stride(), t.dtype) if isinstance(t, torch.Tensor) else None
                                for t in tensors])
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) >= PLANS:
                self.plans.clear()
            self.plans[key] = self._record(vals, state)  # (the recorded call is this call)
            return
        if plan.stepwise:
            return self.stepwise(vals, state)
        if plan.parts:
            for part in plan.parts:
                part(vals, state)
            return
        fresh = [torch.empty_strided(shape, strides, dtype=torch.float32) for shape, strides in plan.fresh]
        calls = plan.calls
        for index, n in plan.input_patches:
            calls[index] = tensors[n].data_ptr()
        for index, n in plan.fresh_patches:
            calls[index] = fresh[n].data_ptr()
        if self.run_calls(plan.count, calls):  # a kernel's scratch not allocated: the ops say what happens
            return self.stepwise(vals, state)
        for slot, n in plan.results:
            vals[slot] = fresh[n]
        for slot in self.freed_inputs:
            vals[slot] = None
        if plan.threads != state.current:
            torch.set_num_threads(plan.threads)
            state.current = plan.threads

    def _record(self, vals: list, state: Any) -> _Plan:
        """Run the call one instruction at a time, recording the kernels' calls; the plan they make, or
        a stepwise one (module docstring)."""
        if len({id(vals[s]) for s in self.varying}) < len(self.varying):
            # one tensor in two of the run's input slots: a record could not tell which slot a call read
            self.stepwise(vals, state)
            return _Plan(stepwise=True)
        source: dict[int, tuple] = {}  # id of a tensor a call may read -> where a later call finds it
        held: list = []  # those tensors, alive while `source` names them by id
        for n, slot in enumerate(self.varying):
            source[id(vals[slot])] = ("input", n)
            held.append(vals[slot])
        for slot in self.constant:
            source[id(vals[slot])] = ("constant", vals[slot])
            held.append(vals[slot])
        recorded = c_conv.start_recording()
        ops: list[tuple[c_conv.KernelCall, int]] = []  # (the op's call, its result's slot)
        frees: list[tuple[int, tuple[int, ...]]] = []  # (calls made before it, the slots a free step drops)
        in_c: list[bool] = []  # per member: an op that made one call of a kernel here (a free step: True)
        try:
            for member, step in zip(self.members, self.recording_steps):
                before = len(recorded)
                step(vals, state)
                if isinstance(member, FreeSlots):
                    frees.append((len(ops), member.slots))
                    in_c.append(True)
                    continue
                made = recorded[before:]
                out = vals[member.outs[0]]
                in_c.append(len(made) == 1 and made[0].y is out and made[0].y.dtype is torch.float32)
                if in_c[-1]:
                    ops.append((made[0], member.outs[0]))
                    source[id(out)] = ("made", len(ops) - 1)
                    held.append(out)
        finally:
            c_conv.stop_recording()
        if all(in_c):
            return self._plan(ops, frees, source, state) or _Plan(stepwise=True)
        return self._split(in_c)

    def _split(self, in_c: list[bool]) -> _Plan:
        """The plan of a call where some ops did not run a kernel here: the run cut before and after
        each of them (`replace_runs` over the members that did), the parts of two or more ops in C runs
        of their own (which record on their first call), the rest one instruction at a time."""
        here = {id(m): flag for m, flag in zip(self.members, in_c)}
        parts = _straight_line(replace_runs(list(self.members), lambda m: here[id(m)],
                                            lambda m: isinstance(m, PreparedOp),
                                            lambda run: CRun(run, self.comm, self.initial)), self.comm)
        return _Plan(parts=parts) if any(isinstance(p, CRun) for p in parts) else _Plan(stepwise=True)

    def _plan(self, ops: list, frees: list, source: dict, state: Any) -> _Plan | None:
        """The arrays of a replay of the recorded `ops`, or None where a call read a tensor the plan
        cannot name."""
        plan = _Plan(count=len(ops), threads=state.current)
        calls = (ctypes.c_void_p * (8 * len(ops)))()
        buffers: list[torch.Tensor | None] = [None] * len(ops)  # a kept buffer per value freed in the run
        fresh_of: dict[int, int] = {}  # op -> its result's position in `fresh`
        spare: list[torch.Tensor] = []  # kept buffers whose values were freed, most recent last
        slot_op = {slot: j for j, (_, slot) in enumerate(ops)}
        fresh, fresh_patches, input_patches, results = [], [], [], []
        free_at = iter(frees)
        pending = next(free_at, None)
        for j, (call, slot) in enumerate(ops):
            while pending is not None and pending[0] <= j:  # the frees before this op: their buffers spare
                spare += [buffers[slot_op[s]] for s in pending[1] if s in slot_op and buffers[slot_op[s]] is not None]
                pending = next(free_at, None)
            base = 8 * j
            calls[base] = ctypes.cast(call.fn, ctypes.c_void_p).value
            for k, t in ((1, call.x), (2, call.w), (3, call.bias), (4, call.res)):
                if t is None:
                    continue
                where = source.get(id(t))
                if where is None and k == 2:  # a kernel's own (packed) weight
                    calls[base + k] = t.data_ptr()
                    plan.keep.append(t)
                    continue
                if where is None:
                    return None
                if where[0] == "input":
                    input_patches.append((base + k, where[1]))
                elif where[0] == "constant":
                    calls[base + k] = t.data_ptr()
                    plan.keep.append(t)
                elif buffers[where[1]] is not None:
                    calls[base + k] = buffers[where[1]].data_ptr()
                else:
                    fresh_patches.append((base + k, fresh_of[where[1]]))
            y = call.y
            if slot in self.leaving:
                fresh_of[j] = len(fresh)
                fresh_patches.append((base + 5, len(fresh)))
                results.append((slot, len(fresh)))
                fresh.append((tuple(y.shape), tuple(y.stride())))
            else:
                buffers[j] = self._take(spare, y)
                calls[base + 5] = buffers[j].data_ptr()
            calls[base + 6] = ctypes.addressof(call.q)
            calls[base + 7] = ctypes.addressof(call.act) if call.act is not None else None
            plan.keep += [call.q, call.act]
        plan.keep += [b for b in buffers if b is not None]
        plan.calls, plan.input_patches, plan.fresh = calls, tuple(input_patches), tuple(fresh)
        plan.fresh_patches, plan.results = tuple(fresh_patches), tuple(results)
        return plan

    @staticmethod
    def _take(spare: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
        """A buffer for a value of `like`'s shape and strides: the most recently freed spare one large
        enough (viewed so), else a new one."""
        need = like.untyped_storage().nbytes()
        for n in range(len(spare) - 1, -1, -1):
            if spare[n].untyped_storage().nbytes() >= need:
                storage = spare.pop(n).untyped_storage()
                return torch.empty(0, dtype=like.dtype).set_(storage, 0, like.shape, like.stride())
        return torch.empty_strided(like.shape, like.stride(), dtype=like.dtype)
