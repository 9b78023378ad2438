"""The reference backend's executor: runs one rank's plan (plan.json v2) with torch ops.

The plan arrives checked and typed (`sdc.runtime.plan_schema.RankProgram`). Everything it says is
resolved once, at load time: value ids become list slots, weights are bound (viewed back in logical
order when stored in another layout), each op of a reference kernel group becomes its kernel
(`sdc.runtime.reference_kernels`: its reference semantics, in place where the planner said so, or the
layout_cast that moves bytes) with its attributes decoded, and each collective step becomes a call of
the op's reference semantics through the communicator. The planner decided everything else at
compile time; the executor only honours it. A call is then a loop over prepared instructions, under
`torch.inference_mode()`, with no JSON or name lookups in it: an unprofiled call runs them
specialized (`_straight_line`: one closure per ordinary op, which also drops the slots freed after
it, and calls the torch function itself where the op's reference function is just that call), since
on small models the executor's own Python was a fifth of a call. On the CPU a call whose ops are all
small runs on one thread (`_thread_gate`): OpenMP's fan-out costs such ops more than it saves.
The instruction classes and those helpers live in sdc/runtime/instructions.py, which the runs of C
kernels (sdc.runtime.c_segment, c_runs) import too: they import downward, never this module.

Each launch runs the kernel plan.json names for it (`kernel.runs`, sdc/runtime/kernel_choice.py: this
module builds sdc's C kernel library or oneDNN only for the ops the plan gives them), and what ran is
counted, fallbacks included (`counters`, sdc/runtime/counters.py).

Streams and events: on the CPU everything runs in plan order, so `record` and `wait` do nothing (the
schema checked that each wait follows its record). On a CUDA device each stream of the plan is a CUDA
stream (stream 0 the current one), steps run on theirs, and record/wait are CUDA events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
import time
from typing import Any, Callable

import torch

from sdc import custom_ops, dtypes
from sdc.diagnostics import SdcError
from sdc.dialect.dense import DenseValue
from sdc.dialect.opdef import RefEnv, get_op
from sdc.dialect.ops.custom import CUSTOM
from sdc.dialect import symexpr
from sdc.dialect.shapes import DYN, TensorSpec, broadcast_shapes
from sdc.runtime import c_conv, kernel_choice, plan_schema as S
from sdc.runtime.launch.c import c_kernels_enabled
from sdc.runtime.counters import Counters
from sdc.runtime.format import decode_value
from sdc.runtime.profile import Profiler, StepInfo
from sdc.runtime.arena import Arena, arena_enabled
from sdc.runtime.instructions import (AllocBuffer, EventStep, FreeSlots, PreparedOp, RunState, ViewSlot,  # noqa: F401
                                      _CountFallback, _gated, _small_product, _straight_line, _thread_gate,
                                      replace_runs)
from sdc.runtime.format import C_CONV, FALLBACKS, GENERATED_C, ONEDNN, REFERENCE, TORCH
from sdc.runtime.reference_kernels import built_kernel, fuse_epilogues, reference_kernel

ErrorFactory = Callable[[str], SdcError]


@contextlib.contextmanager
def fp32_math(tf32: bool):
    """cuBLAS and cuDNN compute f32 products in TF32 only when the artifact's precision is tf32.
    torch's own default lets cuDNN convolutions use TF32, which would make an f32 artifact's
    convolutions (reference kernels on cuda) lose 13 bits of mantissa. Set through torch's
    `fp32_precision` flags, not the legacy `allow_tf32` (mixing the two APIs is an error in torch),
    and restored afterwards: the caller's own torch code keeps its settings."""
    flags = [f for f in (getattr(torch.backends.cudnn, "conv", None), getattr(torch.backends.cuda, "matmul", None))
             if f is not None and hasattr(f, "fp32_precision")]
    before = [f.fp32_precision for f in flags]
    for f in flags:
        f.fp32_precision = "tf32" if tf32 else "ieee"
    try:
        yield
    finally:
        for f, value in zip(flags, before):
            f.fp32_precision = value


class _TorchOpsContext:
    """What reference kernels on a device run under: torch's default-device mode (the tensors they
    make land on the device) and `fp32_math`, entered and left together."""

    def __init__(self, device: torch.device, tf32: bool):
        self.device, self.tf32 = device, tf32
        self.stack: contextlib.ExitStack | None = None

    def __enter__(self) -> None:
        stack = contextlib.ExitStack()
        stack.enter_context(torch.device(self.device))
        stack.enter_context(fp32_math(self.tf32))
        self.stack = stack

    def __exit__(self, *exc: Any) -> None:
        stack, self.stack = self.stack, None
        if stack is not None:
            stack.__exit__(*exc)


class ReferenceExecutor:
    """Runs one rank's plan; build it once per loaded artifact, call `run` per inference."""

    def __init__(self, program: S.RankProgram, weights: dict[str, torch.Tensor], mesh: dict[str, int],
                 error: ErrorFactory, comm: Any = None, device: torch.device | None = None, kernels: Any = None,
                 tf32: bool = False):
        """`error(message)` makes the SdcError for a plan that does not fit its weights (naming the
        artifact and plan.json). `comm` runs the collectives (sdc.runtime.distributed); `device` is
        where the tensors live; `kernels` reads the artifact's generated kernel sources
        (`sdc.runtime.launch.triton.KernelSources`), for launches whose backend is triton, cuda or c. `tf32`:
        the artifact's precision is tf32, so torch's f32 matmuls and convolutions may use TF32 on
        cuda (`fp32_math`); otherwise they compute in full f32."""
        self.mesh = dict(mesh)
        self.tf32 = tf32
        # what ran, per launch step (sdc/runtime/counters.py); `loaded` collects each op's prepared kernel
        self.counters = Counters()
        self.loaded: dict[str, list[tuple[str, str]]] = {}  # step id -> (planned, prepared) per op
        self.launch_steps: dict[int, str] = {}  # id of a kernel launch instruction -> its step's id
        self.comm = comm
        self.device = device
        cuda = device is not None and device.type == "cuda"
        self.streams = [None] + [torch.cuda.Stream(device) if cuda else None for _ in program.streams[1:]]
        self.slots = {vid: i for i, vid in enumerate(program.values)}
        self.specs = {vid: _spec(v) for vid, v in program.values.items()}
        self.initial: list[torch.Tensor | None] = [None] * len(self.slots)
        for vid, v in program.values.items():
            if v.weight is not None:
                self.initial[self.slots[vid]] = _weight(weights, v, error)
        self.input_slots = [self.slots[vid] for vid in program.inputs]
        self.output_slots = [self.slots[vid] for vid in program.outputs]
        _check_custom_ops(program, error)
        reused = {s.reuses for s in program.steps if isinstance(s, S.Alloc) and s.reuses is not None}
        view_bases = {s.of for s in program.steps if isinstance(s, S.View)}
        # The memory plan's arena (sdc/runtime/arena.py); with SDC_ARENA=0 its values get torch's memory.
        planned = program.arena.offsets if program.arena is not None else {}
        use_arena = arena_enabled(device)  # (read for every plan: a bad value is an error for all of them)
        self.arena = Arena(program.arena, device) if planned and use_arena else None
        allocated = {s.value for s in program.steps
                     if isinstance(s, S.Alloc) and (self.arena is not None or s.value not in planned)}
        if self.arena is not None:  # a placed value's slot is bound to its view before the step that makes it
            allocated |= set(planned)
        bound: set[str] = set()
        from_comm: set[str] = set()
        self.program: list[Callable[[list, RunState], None]] = []
        # The same instructions cut at step boundaries, each launch/collective with its StepInfo: what a
        # profiled call runs (`run(..., profiler=...)`); the ordinary call runs `program`, untouched.
        self.segments: list[tuple[StepInfo | None, tuple[Callable[[list, RunState], None], ...]]] = []
        self.kernel_count = 0
        view_slots = frozenset(self.slots[s.value] for s in program.steps if isinstance(s, S.View))
        c_libraries = None  # the compiled C sources (launch/c.py's CLibraries), once the first c launch needs them
        for step in program.steps:
            first = len(self.program)
            if self.arena is not None and isinstance(step, (S.Launch, S.Collective, S.Alloc)):
                for vid in (step.value,) if isinstance(step, S.Alloc) else step.outputs:
                    if vid in planned and vid not in bound:
                        bound.add(vid)
                        value = program.values[vid]
                        self.program.append(self.arena.alloc_step(self.slots[vid], value,
                                                                  dtypes.to_torch(value.dtype), step.where))
            if isinstance(step, S.Launch) and step.triton is not None:
                from sdc.runtime.launch.triton import prepare_launch

                self.kernel_count += 1
                self.program.append(prepare_launch(step, self.slots, program.values, kernels, device,
                                                   self.streams[step.stream], error, view_slots))
            elif isinstance(step, S.Launch) and step.cuda is not None:
                from sdc.runtime.launch.cuda import prepare_cuda_launch

                self.kernel_count += 1
                self.program.append(prepare_cuda_launch(step, self.slots, program.values, kernels, device,
                                                        self.streams[step.stream], error))
            elif isinstance(step, S.Launch) and step.c is not None:
                from sdc.runtime.launch.c import CLibraries, prepare_c_launch

                self.kernel_count += 1
                if c_libraries is None:
                    c_libraries = CLibraries()
                # the group's reference instructions, which a call runs where the C kernel does not
                fallback = _straight_line(_fuse_bias_adds(
                    [self._op(step, entry, weights, error, allocated, from_comm) for entry in fuse_epilogues(step.ops)],
                    self.initial), comm)
                self.loaded.pop(step.id, None)  # (its ops are the fallback's; the launch is the C kernel)
                counted = (_CountFallback(self.counters.hook(step.id, GENERATED_C), step.fallback or TORCH), *fallback)
                launch = prepare_c_launch(step, self.slots, program.values, kernels, error, list(counted),
                                          c_libraries, device, self.initial)
                self.loaded[step.id] = [(step.runs, GENERATED_C if launch.fn is not None else TORCH)]
                self.program.append(launch)
            elif isinstance(step, S.Launch):
                self.kernel_count += 1
                # a convolution takes the relu/add after it: oneDNN post-ops on the CPU, one fused cuDNN
                # call on cuda (reference_kernels.fused_conv)
                for entry in fuse_epilogues(step.ops):
                    self.program.append(self._op(step, entry, weights, error, allocated, from_comm))
            elif isinstance(step, S.Collective):
                self.program.append(self._collective(step, weights, error, allocated, from_comm))
                from_comm.update(step.outputs)
            elif isinstance(step, S.Free):
                self.program.append(FreeSlots(tuple(self.slots[v] for v in step.values),
                                              tuple(self.slots[v] for v in step.values if v in reused)))
            elif isinstance(step, S.View):
                self.program.append(ViewSlot(self.slots[step.value], self.slots[step.of], step.axis, step.offset,
                                             int(program.values[step.value].shape[step.axis])))
            elif isinstance(step, S.Alloc) and step.value in planned and (self.arena is not None
                                                                          or step.value not in view_bases):
                pass  # bound above (or, with the arena off, torch's memory; a view's base needs a buffer)
            elif isinstance(step, S.Alloc):
                v = program.values[step.value]
                self.program.append(AllocBuffer(self.slots[step.value], v.shape,
                                                dtypes.to_torch(v.dtype), device,
                                                self.slots[step.reuses] if step.reuses is not None else None))
            elif isinstance(step, (S.Record, S.Wait)) and cuda:
                self.program.append(EventStep(step.event, self.streams[step.stream], isinstance(step, S.Record)))
            if len(self.program) > first:
                # a profiled call runs the unspecialized instructions, with the same thread gate
                self.segments.append((_step_info(step), tuple(map(_gated, self.program[first:]))))
            if isinstance(step, S.Launch):
                self._count(step)
                for instruction in self.program[first:]:  # (a generated kernel's launch, and its arena views)
                    self.launch_steps[id(instruction)] = step.id
        # What an unprofiled call runs: the same instructions, plain ops specialized with their frees.
        program_now = self.program
        if c_libraries is not None and (device is None or device.type == "cpu"):
            from sdc.runtime.c_segment import build_segments  # runs of C launches as one call

            program_now = build_segments(program_now, self.output_slots, self.initial)
        program_now = _join_concat_chains(_fuse_bias_adds(program_now, self.initial), self.output_slots)
        if device is None or device.type == "cpu":
            from sdc.runtime.c_runs import build_runs  # runs of C-kernel ops replayed as one call

            program_now = build_runs(program_now, comm, self.initial)
        self.fast_program = _straight_line(program_now, comm)
        self.fast_steps = self._steps_of(program_now)
        self.fast_runs = tuple(i for i in program_now if hasattr(i, "members"))
        # Reference kernels (torch ops) make tensors without naming a device and compute f32 products
        # through cuBLAS/cuDNN, so on a device they run under torch's default-device mode and
        # `fp32_math`. A plan of generated kernels alone needs neither: every tensor they make names
        # its device. Skipping them matters for such plans: the mode sends every tensor method call of
        # the Triton launcher through Python (about 5x slower each), `fp32_math` costs ~15 us a call.
        from sdc.runtime.launch.c import CLaunch

        # A C launch counts: its group may run through torch (CLaunch.fallback).
        self.torch_ops = any(isinstance(i, (PreparedOp, CLaunch)) for i in self.program)
        on_cpu = device is None or device.type == "cpu"
        self.gated = on_cpu and self.torch_ops  # small ops on one thread (`_thread_gate`)
        from sdc.runtime.cuda_graphs import GraphRunner, static_reason

        self.graph_reason = static_reason(program, device)  # why calls are not captured, or None
        self.graphs = GraphRunner(self._run_eager, device) if self.graph_reason is None else None

    def runs_as_one(self) -> list[tuple[str, tuple[str, ...]]]:
        """The runs of steps an unprofiled call makes as one instruction: (kind, step ids), in order.
        test_kernel_choice.py checks they are the plan's `calls_as_one`, which the planner found the
        same way (sdc/codegen/calls_as_one.py)."""
        from sdc.runtime.c_runs import CRun
        from sdc.runtime.c_segment import CSegment

        return [("c_segment" if isinstance(i, CSegment) else "c_run", self._steps_of(list(i.members)))
                for i in self.fast_runs if isinstance(i, (CSegment, CRun))]

    def _steps_of(self, program: list) -> tuple[str, ...]:
        """The ids of the launch and collective steps that the instructions of `program` run, in order
        (a run of C kernels: its members'), each once: what an unprofiled call executes."""
        out: list[str] = []
        for instruction in program:
            members = getattr(instruction, "members", None)
            if members is not None:
                out += self._steps_of(list(members))
            elif isinstance(instruction, PreparedOp):
                out += [*instruction.joined, instruction.step_id]
            elif id(instruction) in self.launch_steps:
                out.append(self.launch_steps[id(instruction)])
        return tuple(dict.fromkeys(out))

    def executed_steps(self) -> tuple[str, ...]:
        """The launch and collective steps an unprofiled call runs, in order (test_kernel_choice.py
        checks they are the plan's)."""
        return self.fast_steps

    def _count(self, step: S.Launch) -> None:
        """The step's entry in the counters: the plan's kernel, and the one load prepared (the planned
        one, unless an op's kernel cannot run on this host: then what it was prepared with instead)."""
        ops = self.loaded.pop(step.id, [])
        names = tuple(e.op for e in step.ops)
        runs, fallback = step.runs, step.fallback
        if step.backend == REFERENCE and ops and all(e.runs is None for e in step.ops):  # a plan that does not say
            runs = kernel_choice.step_kernel([planned for planned, _ in ops])
            fallback = kernel_choice.step_fallback(runs, names)
        loaded = runs
        if any(planned != prepared for planned, prepared in ops):
            loaded = kernel_choice.step_kernel([prepared for _, prepared in ops])
        self.counters.add_step(step.id, runs, fallback, loaded, names, tuple(prepared for _, prepared in ops))

    def _op(self, step: S.Launch, entry: S.OpEntry, weights: dict, error: ErrorFactory, allocated: set[str],
            from_comm: set[str]) -> PreparedOp:
        opdef = _opdef(entry.op, step, error)
        attrs = self._attrs(entry.attrs, weights, step.where, error)
        on_cpu = self.device is None or self.device.type == "cpu"
        constants = tuple(self.initial[self.slots[v]] for v in entry.inputs) if on_cpu else ()
        operands = tuple(self.specs[v] for v in entry.inputs)
        # the planner's choice of kernel (a plan that does not say: the same rule, now)
        planned = entry.runs or kernel_choice.op_kernel(opdef.name, attrs, operands, constants, entry.in_place,
                                                        on_cpu, c_kernels_enabled())
        fell_back = self.counters.hook(step.id, planned) if planned in FALLBACKS else None
        try:
            first = self.specs[entry.inputs[0]].shape if entry.inputs else None
            kernel = reference_kernel(opdef.name, opdef.ref, entry.in_place, constants, attrs,
                                      tuple(d if isinstance(d, int) else None for d in first) if first else None,
                                      kernel=planned, fell_back=fell_back)
        except ValueError as e:
            raise error(f"{step.where}: {e}") from None
        direct = None
        if kernel is opdef.ref:
            direct = _direct_kernel(opdef.name, attrs, operands, constants, on_cpu, c_library=planned == C_CONV,
                                    fell_back=fell_back)
            # a broadcast may return a strided view where its readers are torch ops and no caller owns it
            view = on_cpu and self.comm is None and not any(self.slots[v] in self.output_slots for v in entry.outputs)
            kernel = _shape_kernel(opdef.name, attrs, kernel, view) if direct is None else kernel
        elif entry.in_place is not None and not attrs:
            direct = _direct_in_place(opdef.name, entry.in_place, operands)
        if planned in (C_CONV, ONEDNN):  # where this host cannot, it runs what it fell back to, every call
            prepared = built_kernel(kernel) or getattr(direct, "sdc_kernel", None) or TORCH
        else:
            prepared = planned
        self.loaded.setdefault(step.id, []).append((planned, prepared))
        return PreparedOp(
            name=opdef.name, step=f"kernel {step.id}", step_id=step.id, loc=entry.loc, kernel=kernel, attrs=attrs,
            ins=tuple(self.slots[v] for v in entry.inputs), outs=tuple(self.slots[v] for v in entry.outputs),
            declared=self._declared(opdef, entry.outputs), communicates=opdef.family == "collective",
            waits_for_comm=any(v in from_comm for v in entry.inputs),
            into_buffers=any(v in allocated for v in entry.outputs), stream=self.streams[step.stream], direct=direct)

    def _collective(self, step: S.Collective, weights: dict, error: ErrorFactory, allocated: set[str],
                    from_comm: set[str]) -> PreparedOp:
        opdef = _opdef(step.op, step, error)
        if opdef.family != "collective":
            raise error(f"{step.where}: 'sdc.{opdef.name}' is not a collective")
        attrs = self._attrs(step.attrs, weights, step.where, error)
        attrs["mesh_axes"] = list(step.mesh_axes)
        return PreparedOp(
            name=opdef.name, step=f"collective {step.id}", step_id=step.id, loc=step.loc, kernel=opdef.ref,
            attrs=opdef.with_defaults(attrs), ins=tuple(self.slots[v] for v in step.inputs),
            outs=tuple(self.slots[v] for v in step.outputs), declared=self._declared(opdef, step.outputs),
            communicates=True, waits_for_comm=any(v in from_comm for v in step.inputs),
            into_buffers=any(v in allocated for v in step.outputs), stream=self.streams[step.stream])

    def _attrs(self, raw: dict, weights: dict, where: str, error: ErrorFactory) -> dict:
        try:
            return {k: decode_value(v, lambda w: _dense(weights, w)) for k, v in raw.items()}
        except ValueError as e:
            raise error(f"{where}: {e}") from None

    def _declared(self, opdef, outputs: tuple[str, ...]) -> TensorSpec | None:
        return self.specs[outputs[0]] if opdef.shape is None and outputs else None

    def run(self, inputs: list[torch.Tensor], symbols: dict[str, int],
            profiler: Profiler | None = None) -> list[torch.Tensor]:
        """One call. With a `profiler`, each launch and collective step is timed (sdc.runtime.profile);
        on CUDA without one, calls are captured into CUDA graphs and replayed (sdc.runtime.cuda_graphs)."""
        self.counters.calls += 1
        if self.graphs is not None and profiler is None:
            return self.graphs.run(inputs, symbols)
        return self._run_eager(inputs, symbols, profiler)

    def _run_eager(self, inputs: list[torch.Tensor], symbols: dict[str, int],
                   profiler: Profiler | None = None) -> list[torch.Tensor]:
        state = RunState(RefEnv(symbols=symbols, mesh=self.mesh, comm=self.comm))
        vals = self.initial.copy()
        for slot, t in zip(self.input_slots, inputs):
            vals[slot] = t
        if self.gated:
            state.threads = state.current = torch.get_num_threads()
        with torch.inference_mode(), self._device_context():
            try:
                if profiler is None:
                    for instruction in self.fast_program:
                        instruction(vals, state)
                else:
                    self._run_profiled(vals, state, profiler)
            finally:
                if state.current != state.threads:
                    torch.set_num_threads(state.threads)
            outputs = [vals[i] for i in self.output_slots]
            # The memory plan never places an output in the arena, nor anything an output may view
            # (sdc/codegen/memory.py): outputs are the caller's without a copy. A plan written before
            # that rule may still hand out an arena view, which the next call would overwrite.
            if self.arena is not None and any(self.arena.holds(t) for t in outputs):
                return [t.clone() if self.arena.holds(t) else t for t in outputs]
        return outputs

    def _device_context(self) -> Any:
        """What a call runs under on its device (`torch_ops` in __init__ says why it varies)."""
        device = self.device
        if device is None or device.type == "cpu":
            return contextlib.nullcontext()
        if not self.torch_ops:
            return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
        return _TorchOpsContext(device, self.tf32)

    def _run_profiled(self, vals: list, state: RunState, profiler: Profiler) -> None:
        """The program step by step, reading the clock around each timed step. On CUDA the device is
        synchronized before and after one, so its time is its own."""
        clock = time.perf_counter_ns
        sync = torch.cuda.synchronize if self.device is not None and self.device.type == "cuda" else None
        profiler.start_run()
        for info, instructions in self.segments:
            if info is None:
                for instruction in instructions:
                    instruction(vals, state)
                continue
            if sync is not None:
                sync(self.device)
            start = clock()
            for instruction in instructions:
                instruction(vals, state)
            if sync is not None:
                sync(self.device)
            profiler.record(info, start, clock())


def _fuse_bias_adds(program: list[Callable[[list, RunState], None]],
                    initial: list[torch.Tensor | None]) -> list[Callable[[list, RunState], None]]:
    """`program` with each matmul by a 2-d weight whose result only a following add of a 1-d weight
    (a bias) reads made one `torch.addmm`, which writes the product into a copy of the bias: one torch
    call and one result buffer instead of two (about 5 us of 12 on a small linear layer). The add must
    be the next op and the product's last reader (`_last_read`)."""
    out = list(program)
    for i, mm in enumerate(out):
        if not (isinstance(mm, PreparedOp) and mm.name == "matmul" and mm.direct is torch.matmul
                and len(mm.ins) == 2 and len(mm.outs) == 1):
            continue
        j = i + 1
        while j < len(out) and isinstance(out[j], FreeSlots):
            j += 1
        add = out[j] if j < len(out) else None
        if not (isinstance(add, PreparedOp) and add.name == "add" and len(add.ins) == 2 and mm.outs[0] in add.ins
                and add.ins.count(mm.outs[0]) == 1 and add.stream is mm.stream and len(add.outs) == 1
                and not (mm.into_buffers or add.into_buffers or mm.declared or add.declared)):
            continue
        bias_slot = add.ins[1] if add.ins[0] == mm.outs[0] else add.ins[0]
        weight, bias = initial[mm.ins[1]], initial[bias_slot]
        if (weight is None or bias is None or weight.dim() != 2 or bias.dim() != 1
                or bias.shape[0] != weight.shape[1] or weight.dtype != bias.dtype
                or weight.dtype not in (torch.float32, torch.float64) or not _last_read(out, j, mm.outs[0])):
            continue
        out[i] = dataclasses.replace(mm, ins=(mm.ins[0], mm.ins[1], bias_slot), outs=add.outs, direct=_linear,
                                     kernel=_linear_kernel, waits_for_comm=mm.waits_for_comm or add.waits_for_comm,
                                     joined=(*mm.joined, *(() if add.step_id == mm.step_id else (add.step_id,)),
                                             *add.joined))
        out[j] = FreeSlots((), ())
    return [step for step in out if not (isinstance(step, FreeSlots) and not step.slots)]


def _join_concat_chains(program: list[Callable[[list, RunState], None]],
                        output_slots: list[int]) -> list[Callable[[list, RunState], None]]:
    """`program` with each left-leaning chain of 2-way concats along one axis (how an n-way concat is
    written: the sdc dialect's ops have fixed arity) made one `torch.cat` of all the parts, where each
    inner result is read by the next concat only, right after it (only frees between them), and then
    freed: an Inception block's 4-way concat copied its first parts three times (Inception-v2's 28
    concats took 0.9 ms at 2 threads, onnxruntime's 10 0.46). The frees of the inner concats'
    operands move after the joined one, which reads them."""
    out = list(program)
    j = -1
    while j + 1 < len(out):
        j += 1
        outer = out[j]
        if not (_plain_concat(outer) and len(outer.ins) == 2):
            continue
        i = j - 1
        while i >= 0 and isinstance(out[i], FreeSlots):
            i -= 1
        inner = out[i] if i >= 0 else None
        inner_slot = outer.ins[0]
        if not (_plain_concat(inner) and inner.outs == (inner_slot,) and inner.attrs["axis"] == outer.attrs["axis"]
                and inner_slot != outer.ins[1] and inner_slot not in output_slots
                and not any(inner_slot in f.slots for f in out[i + 1:j]) and _last_read(out, j, inner_slot)):
            continue
        between = [f for f in out[i + 1:j] if f.slots]
        parts = inner.ins + outer.ins[1:]
        axis = outer.attrs["axis"]
        # (a concat along the channels in C takes up to c_conv.CONCAT_PARTS parts)
        in_c = getattr(outer.direct, "c_run_member", False) and len(parts) <= c_conv.CONCAT_PARTS
        out[j] = dataclasses.replace(outer, ins=parts, kernel=_concat_kernel,
                                     direct=outer.direct if in_c else _concat(axis),
                                     waits_for_comm=inner.waits_for_comm or outer.waits_for_comm,
                                     joined=(*inner.joined, inner.step_id, *outer.joined))
        out[i] = FreeSlots((), ())
        for k in range(i + 1, j):
            out[k] = FreeSlots((), ())
        out.insert(j + 1, FreeSlots(tuple(s for f in between for s in f.slots), tuple(s for f in between for s in f.keep)))
    return [step for step in out if not (isinstance(step, FreeSlots) and not step.slots)]


def _plain_concat(op: Any) -> bool:
    return (isinstance(op, PreparedOp) and op.name == "concat" and len(op.outs) == 1 and op.plain(None)
            and not op.communicates and isinstance(op.attrs.get("axis"), int))


def _concat_kernel(env: RefEnv, a: dict, *parts: torch.Tensor) -> torch.Tensor:
    return torch.cat(parts, a["axis"])


def _last_read(program: list[Callable[[list, RunState], None]], reader: int, slot: int) -> bool:
    """Whether `program[reader]` is the last instruction that reads `slot`: the ops after it up to the
    free of `slot` read other slots (a free comes after a whole kernel group, not after each op)."""
    for step in program[reader + 1:]:
        if isinstance(step, FreeSlots) and slot in step.slots:
            return slot not in step.keep
        if not isinstance(step, (PreparedOp, FreeSlots)) or (isinstance(step, PreparedOp) and slot in step.ins):
            return False
    return False


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x @ weight + bias as one addmm (over x's rows folded into one dim, as torch.matmul folds them)."""
    if x.dim() == 2:
        return torch.addmm(bias, x, weight)
    return torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight).view(*x.shape[:-1], weight.shape[1])


def _linear_kernel(env: RefEnv, attrs: dict, x: torch.Tensor, weight: torch.Tensor,
                   bias: torch.Tensor) -> torch.Tensor:
    return _linear(x, weight, bias)


# Ops whose reference function, on operands of element types other than the wide unsigned ones (which
# it computes in int64) and with default attributes, is exactly one torch call on the operands.
_WIDE_UNSIGNED = frozenset({"ui16", "ui32", "ui64"})
_DIRECT: dict[str, str] = {
    "add": "add", "sub": "sub", "mul": "mul", "max": "maximum", "min": "minimum",  # pow: its ref takes scalars
    "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "and": "logical_and", "or": "logical_or", "xor": "logical_xor",
    "neg": "neg", "abs": "abs", "sign": "sign", "exp": "exp", "log": "log", "sqrt": "sqrt",
    "reciprocal": "reciprocal", "tanh": "tanh", "sigmoid": "sigmoid", "erf": "erf", "sin": "sin",
    "isnan": "isnan", "isinf": "isinf",
}


def _direct_kernel(name: str, attrs: dict, operands: tuple[TensorSpec, ...],
                   constants: tuple[torch.Tensor | None, ...] = (), on_cpu: bool = False, c_library: bool | None = None,
                   fell_back: Callable[[str], None] | None = None) -> Callable[..., Any] | None:
    """The torch function that op `name`'s reference semantics reduce to for these operand types and
    attributes, or None (then the reference function runs). `constants` holds, per operand, the weight it
    is bound to at load (or None); `on_cpu`: the plan runs on the CPU, where every reader of a value is a
    torch op that takes strides (a generated kernel on a device may not). test_executor_direct.py checks
    each one against the op's reference function. `c_library`: the plan chose sdc's C kernel library
    for the op (None: wherever it applies); `fell_back` counts the calls that C kernel does not take."""
    if any(spec.dtype in _WIDE_UNSIGNED for spec in operands):
        return None
    in_c = on_cpu and (c_kernels_enabled() if c_library is None else c_library)
    if name == "mul" and in_c and not attrs:
        scale = _channel_scale(operands)
        if scale is not None:
            return c_conv.scale_channels_kernel(scale, fell_back)
    if name in _DIRECT and not attrs:
        return getattr(torch, _DIRECT[name])
    if name == "div" and not attrs and operands and all(dtypes.is_float(spec.dtype) for spec in operands):
        return torch.div
    if name == "where" and not attrs:
        return torch.where
    if name == "matmul" and attrs.get("transpose_lhs") is False and attrs.get("transpose_rhs") is False:
        return torch.matmul
    if name == "reshape" and isinstance(attrs.get("shape"), list):
        shape = _static_reshape(attrs["shape"])
        return functools.partial(torch.reshape, shape=shape) if shape is not None else None
    if name == "layer_norm" and len(operands) == 3 and isinstance(attrs.get("axis"), int) and operands[0].rank:
        normalized = operands[0].shape[attrs["axis"] % operands[0].rank:]
        if all(d != DYN for d in normalized) and isinstance(attrs.get("epsilon"), float):
            return _layer_norm(tuple(normalized), attrs["epsilon"])
    if name == "cast" and len(operands) == 1 and isinstance(attrs.get("dtype"), str):
        return _cast(operands[0].dtype, attrs["dtype"])
    if not operands or not all(isinstance(v, (int, list)) for v in attrs.values()):
        return None
    return _direct_shape_op(name, attrs, operands, constants, on_cpu, in_c, fell_back)


_IN_PLACE_METHODS = {"add": torch.Tensor.add_, "sub": torch.Tensor.sub_, "mul": torch.Tensor.mul_,
                     "div": torch.Tensor.div_}


_channel_scale = kernel_choice.channel_scale  # which operand of a mul scales the other's channels, or None


def _direct_in_place(name: str, in_place: int, operands: tuple[TensorSpec, ...]) -> Callable[..., Any] | None:
    """A binary op the planner runs in place on operand `in_place`, as the torch method itself where the
    operand types settle at load what `reference_kernels._binary` tests per call: both of one float
    type, and the other operand's static dims broadcasting into the written one's (1, or its static
    size)."""
    if name not in _IN_PLACE_METHODS or len(operands) != 2 or in_place not in (0, 1) or (
            in_place == 1 and name not in ("add", "mul")):
        return None
    target, other = operands[in_place], operands[1 - in_place]
    if target.dtype != other.dtype or not dtypes.is_float(target.dtype) or other.rank > target.rank:
        return None
    if any(o == DYN or (o != 1 and o != t) for o, t in zip(reversed(other.shape), reversed(target.shape))):
        return None
    method = _IN_PLACE_METHODS[name]
    if in_place == 0:
        return method

    def swapped(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # add and mul commute: into y
        return method(y, x)

    return swapped


def _static_reshape(dims: list) -> tuple[int, ...] | None:
    """A reshape's dims as torch takes them, where they need no per-call evaluation: all ints, or all
    ints but one symbolic dim (neither -1 nor a zero among the others), which is then the one dim
    torch infers from the element count (-1). That count is the symbolic dim's value on every input
    the shape guards admit, so the result is the reference's."""
    symbolic = [i for i, d in enumerate(dims) if type(d) is not int]
    if not symbolic:
        return tuple(dims)
    if len(symbolic) > 1 or any(d in (-1, 0) for d in dims if type(d) is int) or not isinstance(dims[symbolic[0]], str):
        return None
    return tuple(-1 if i == symbolic[0] else d for i, d in enumerate(dims))


def _direct_shape_op(name: str, attrs: dict, operands: tuple[TensorSpec, ...],
                     constants: tuple[torch.Tensor | None, ...], on_cpu: bool, in_c: bool = False,
                     fell_back: Callable[[str], None] | None = None) -> Callable[..., Any] | None:
    """`_direct_kernel` for the shape, indexing and normalization ops whose reference function reads
    its attributes and the operand's rank on every call (split, gather, unsqueeze, ...): the same torch
    call with what it reads fixed at load. Their results are views exactly where the reference's are,
    except split's parts on the CPU (the planner counts every shape op's result as one that may view
    its operand, so nothing writes into them in place)."""
    x = operands[0]
    axis = attrs.get("axis")
    if isinstance(axis, int) and x.rank and not -x.rank <= axis < x.rank and name != "unsqueeze":
        return None  # the reference reports the bad axis
    if name == "transpose" and sorted(attrs.get("perm", ())) == list(range(x.rank)):
        return functools.partial(torch.permute, dims=tuple(attrs["perm"]))
    if name == "unsqueeze" and attrs.get("axes"):
        rank = x.rank + len(attrs["axes"])
        axes = sorted({ax % rank for ax in attrs["axes"] if -rank <= ax < rank})
        if len(axes) != len(attrs["axes"]):
            return None
        return functools.partial(torch.unsqueeze, dim=axes[0]) if len(axes) == 1 else _unsqueeze(tuple(axes))
    if name == "squeeze" and attrs.get("axes"):
        axes = {ax % x.rank for ax in attrs["axes"] if -x.rank <= ax < x.rank}
        # torch.squeeze keeps a dim whose size is not 1, where the reference's reshape fails: only dims
        # the operand's type says are 1
        if len(axes) != len(attrs["axes"]) or any(x.shape[ax] != 1 for ax in axes):
            return None
        return functools.partial(torch.squeeze, dim=tuple(sorted(axes)))
    if name == "gather" and len(operands) == 2 and operands[1].dtype == "i64":
        # the reference's own indexing (negative indices from the end, out-of-range ones an IndexError),
        # without its per-call dtype test and index tuple
        blocks = _block_transpose(constants[1] if len(constants) > 1 else None, x.shape[axis % x.rank])
        if blocks is not None:
            return _block_transpose_at(axis % x.rank, *blocks, in_c=in_c, fell_back=fell_back)
        if axis % x.rank == 0:
            return operator.getitem
        return _gather_at(axis % x.rank)
    if (name == "gather_elements" and x.rank and len(operands) == 2 and operands[1].dtype == "i64"
            and operands[1].rank == x.rank):
        return _gather_elements(axis % x.rank, attrs)
    if name == "split" and on_cpu and isinstance(attrs.get("parts"), int) and attrs["parts"] > 0:
        size = x.shape[axis % x.rank]
        if size == DYN or size % attrs["parts"]:
            return None
        # split_with_sizes: torch.split's own kernel, without its Python wrapper (2.6 us against 5.3)
        return functools.partial(torch.Tensor.split_with_sizes, split_sizes=[size // attrs["parts"]] * attrs["parts"],
                                 dim=axis % x.rank)
    if name in ("softmax", "log_softmax") and x.dtype in ("f32", "f64"):
        return functools.partial(getattr(torch, name), dim=axis)
    if name == "concat" and len(operands) == 2:
        if in_c and kernel_choice.concat_in_c(axis, operands):
            return c_conv.concat_channels_kernel(fell_back)
        return _concat(axis)
    if name in ("reduce_mean", "reduce_sum") and x.rank and isinstance(attrs.get("axes"), list):
        return _reduction(name, x, attrs["axes"], bool(attrs.get("keepdims")))
    if name == "pow" and on_cpu and len(operands) == 2 and len(constants) == 2:
        return _pow_constant(x, operands[1], constants[1])
    return None


def _reduction(name: str, x: TensorSpec, axes: list[int], keepdims: bool) -> Callable[..., Any] | None:
    """A mean of floats, or a sum in the operand's own type, over axes fixed at load (none listed: all)."""
    if any(not -x.rank <= ax < x.rank for ax in axes):
        return None
    dims = tuple(sorted({ax % x.rank for ax in axes})) if axes else tuple(range(x.rank))
    if name == "reduce_mean":
        return functools.partial(torch.mean, dim=dims, keepdim=keepdims) if dtypes.is_float(x.dtype) else None
    return functools.partial(torch.sum, dim=dims, keepdim=keepdims, dtype=dtypes.to_torch(x.dtype))


def _cast(source: str, target: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """cast as the reference computes it for a known source type: a test for non-zero to i1 (against a
    zero of the operand's type made once, which skips wrapping a Python 0 per call), `Tensor.to`
    otherwise (the operand itself when the type already matches). Float to integer too: the conversion
    truncates toward zero, which is what the reference's `trunc` then `to` computes (where the truncated
    value is out of the target's range, NaN included, the op's result is undefined)."""
    if target == "i1":
        zero, ne = torch.zeros((), dtype=dtypes.to_torch(source)), torch.ne

        def nonzero(x: torch.Tensor) -> torch.Tensor:
            return ne(x, zero)

        return nonzero
    dtype = dtypes.to_torch(target)

    def convert(x: torch.Tensor) -> torch.Tensor:
        return x.to(dtype)

    return convert


def _unsqueeze(axes: tuple[int, ...]) -> Callable[[torch.Tensor], torch.Tensor]:
    """Size-1 dims inserted at `axes` (ascending result positions): one at a time, lowest first, so each
    lands where the result has it."""
    unsqueeze = torch.unsqueeze

    def run(x: torch.Tensor) -> torch.Tensor:
        for axis in axes:
            x = unsqueeze(x, axis)
        return x

    return run


def _gather_elements(axis: int, attrs: dict) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """gather_elements by int64 indices as one `torch.gather`, which rejects a negative index: then the
    reference runs (it counts them from the end, or raises its error); the common call does not pay
    for the reference's wrapping (`where(idx < 0, idx + n, idx)`: three torch calls)."""
    gather, reference, env = torch.gather, get_op("gather_elements").ref, RefEnv()

    def run(data: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        try:
            return gather(data, axis, indices)
        except RuntimeError:
            return reference(env, attrs, data, indices)

    return run


def _gather_at(axis: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    leading = (slice(None),) * axis

    def run(data: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return data[(*leading, indices)]

    return run


_block_transpose = kernel_choice.block_transpose  # (a, b) of a channel shuffle's indices, or None


def _block_transpose_at(axis: int, a: int, b: int, in_c: bool = True,
                        fell_back: Callable[[str], None] | None = None) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The gather of a channel shuffle as one copy in the operand's memory order: the dim is split in
    [a, b] and the two swapped where it lies (so a channels-last operand gives a channels-last result,
    which torch's indexing does not), against an index_select that reads each element by its index.
    With `in_c` a channels-last image is shuffled by sdc's C kernel; `fell_back` counts the calls it
    does not take."""
    in_library = c_conv.block_transpose_kernel(a, b) if in_c else None

    def run(data: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        if data.dim() == 4 and axis == 1 and data.is_contiguous(memory_format=torch.channels_last) \
                and not data.is_contiguous():
            shuffled = in_library(data) if in_library is not None else None  # small transposes, 2-4x torch's copy
            if shuffled is not None:
                return shuffled
            if in_library is not None and fell_back is not None:
                fell_back(TORCH)
            lying = data.permute(0, 2, 3, 1)
            return lying.unflatten(3, (a, b)).transpose(3, 4).reshape(lying.shape).permute(0, 3, 1, 2)
        if in_library is not None and fell_back is not None:
            fell_back(TORCH)
        return data.unflatten(axis, (a, b)).transpose(axis, axis + 1).reshape(data.shape)

    if in_library is not None:
        run.c_run_member = True  # (sdc.runtime.c_runs takes it into a run of C kernels)
        run.sdc_kernel = C_CONV
    return run


def _concat(axis: int) -> Callable[..., torch.Tensor]:
    cat = torch.cat

    def run(*parts: torch.Tensor) -> torch.Tensor:
        return cat(parts, axis)

    return run


def _pow_constant(x: TensorSpec, y: TensorSpec, exponent: torch.Tensor | None) -> Callable[..., Any] | None:
    """pow by a one-element weight: the reference reads it as a Python number on every call (`_pow` in
    sdc/dialect/ops/elementwise.py says why); here once, at load. The same conditions as there."""
    if (exponent is None or exponent.numel() != 1 or y.rank > x.rank or y.dtype != x.dtype
            or not dtypes.is_float(x.dtype) or exponent.device.type != "cpu"):
        return None
    value, pow_ = exponent.item(), torch.pow

    def run(base: torch.Tensor, _exponent: torch.Tensor) -> torch.Tensor:
        return pow_(base, value)

    return run


def _layer_norm(normalized: tuple[int, ...], epsilon: float) -> Callable[..., Any]:
    """torch's layer_norm over static trailing dims: what `F.layer_norm` calls, without its wrapper."""
    layer_norm, cudnn = torch.layer_norm, torch.backends.cudnn

    def run(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, normalized, scale, bias, epsilon, cudnn.enabled)

    return run


# The ops whose `shape` (dim_values: `dims`) attribute may name symbolic dims, which their reference
# functions evaluate per dim on every call (`RefEnv.dim`)
_SHAPED = {"reshape": "shape", "broadcast": "shape", "iota": "shape", "dim_values": "dims"}

# Distinct symbol values a shape op remembers its dims for; past that it starts over (a server fed
# ever new sequence lengths must not grow without bound)
_SHAPE_CACHE_SIZE = 64


def _dims_per_call(dims: list) -> Callable[[dict], tuple[int, ...] | None] | None:
    """The dims of a shape attribute as a function of the call's symbols: evaluated once per value of
    the symbols they read (a dict lookup keyed by those values on later calls, instead of evaluating
    every expression), None where a dim does not evaluate (an unbound symbol: the reference reports
    it). None for an attribute that does not parse."""
    try:
        trees = [d if isinstance(d, int) else symexpr.parse(d) for d in dims]
    except ValueError:
        return None
    parts = [d if isinstance(d, int) else symexpr.evaluator(d) for d in trees]
    names = tuple(dict.fromkeys(n for d in trees if not isinstance(d, int) for n in symexpr.free_symbols(d)))
    if not names:
        constant = tuple(parts)
        return lambda symbols: constant
    read = operator.itemgetter(*names)
    known: dict[Any, tuple[int, ...]] = {}

    def dims_for(symbols: dict) -> tuple[int, ...] | None:
        try:
            key = read(symbols)
        except KeyError:
            return None
        shape = known.get(key)
        if shape is not None:
            return shape
        try:
            shape = tuple(d if type(d) is int else int(d(symbols)) for d in parts)
        except Exception:
            return None
        if len(known) >= _SHAPE_CACHE_SIZE:
            known.clear()
        known[key] = shape
        return shape

    return dims_for


def _shape_kernel(name: str, attrs: dict, ref: Callable[..., Any], view: bool = False) -> Callable[..., Any]:
    """A reshape, broadcast, iota or dim_values whose dims are worked out once per value of the
    symbols they read (`_dims_per_call`), not per call. Where one does not evaluate, the reference
    function runs and reports it as it always has. Other ops: `ref` itself.

    `view`: the result may be a view of the operand with strides of 0 (a plan on the CPU, a value that
    is not an output): then a broadcast is `Tensor.expand` alone, without the copy the reference makes.
    Nothing writes into such a value: the planner writes in place only into values that ops of
    `FRESH_RESULT` made, and counts a broadcast's result as one that may view its operand."""
    dims = attrs.get(_SHAPED[name]) if name in _SHAPED else None
    if not isinstance(dims, list) or not all(isinstance(d, (int, str)) for d in dims):
        return ref
    dims_for = _dims_per_call(dims)
    if dims_for is None:
        return ref

    if name == "reshape":
        reshape = torch.reshape

        def run(env: RefEnv, a: dict, x: torch.Tensor) -> torch.Tensor:
            shape = dims_for(env.symbols)
            return ref(env, a, x) if shape is None else reshape(x, shape)
    elif name == "broadcast":
        run = _broadcast_kernel(dims_for, ref, view)
    elif name == "iota" and isinstance(attrs.get("dtype"), str) and isinstance(attrs.get("dimension"), int):
        run = _iota_kernel(dims_for, ref, attrs["dimension"], dtypes.to_torch(attrs["dtype"]))
    elif name == "dim_values":
        run = _dim_values_kernel(dims_for, ref)
    else:
        return ref
    return run


def _broadcast_kernel(dims_for: Callable[[dict], tuple[int, ...] | None], ref: Callable[..., Any],
                      view: bool) -> Callable[..., Any]:
    """broadcast with the result shape remembered per (symbol values, operand shape): `broadcast_shapes`
    runs once per pair (and raises the reference's error where they do not broadcast)."""
    known: dict[tuple, tuple[int, ...]] = {}

    def run(env: RefEnv, a: dict, x: torch.Tensor) -> torch.Tensor:
        target = dims_for(env.symbols)
        if target is None:
            return ref(env, a, x)
        key = (target, x.shape)
        shape = known.get(key)
        if shape is None:
            shape = broadcast_shapes(x.shape, target)
            if len(known) >= _SHAPE_CACHE_SIZE:
                known.clear()
            known[key] = shape
        return x.expand(shape) if view else x.expand(shape).contiguous()

    return run


def _iota_kernel(dims_for: Callable[[dict], tuple[int, ...] | None], ref: Callable[..., Any], dimension: int,
                 dtype: torch.dtype) -> Callable[..., Any]:
    """iota made fresh on each call (a cached tensor could be an output, which the caller owns): one
    `torch.arange` for one dim, the reference's ramp expanded over the others for more."""
    arange = torch.arange

    def run(env: RefEnv, a: dict) -> torch.Tensor:
        shape = dims_for(env.symbols)
        if not shape:  # unbound, or no dims: the reference reports it
            return ref(env, a)
        if len(shape) == 1:
            return arange(shape[0], dtype=dtype)
        dim = dimension % len(shape)
        ramp = [1] * len(shape)
        ramp[dim] = shape[dim]
        return arange(shape[dim], dtype=dtype).reshape(ramp).expand(shape).contiguous()

    return run


def _dim_values_kernel(dims_for: Callable[[dict], tuple[int, ...] | None], ref: Callable[..., Any]) -> Callable[..., Any]:
    """dim_values as a copy of a tensor made once per symbol values: `clone` costs a third of
    `torch.tensor` on a list. A copy, since the caller may own the result (an output)."""
    known: dict[tuple[int, ...], torch.Tensor] = {}
    tensor, int64 = torch.tensor, torch.int64

    def run(env: RefEnv, a: dict) -> torch.Tensor:
        values = dims_for(env.symbols)
        if values is None:
            return ref(env, a)
        made = known.get(values)
        if made is None:
            made = tensor(values, dtype=int64)
            if len(known) >= _SHAPE_CACHE_SIZE:
                known.clear()
            known[values] = made
        return made.clone()

    return run


def _step_info(step: S.Step) -> StepInfo | None:
    """What the profile reports about a launch or collective step; None for the steps it does not time."""
    if isinstance(step, S.Launch):
        return StepInfo(step.id, "launch", step.backend, tuple(e.op for e in step.ops),
                        next((e.loc for e in step.ops if e.loc), ""), step.stream, step.runs)
    if isinstance(step, S.Collective):
        return StepInfo(step.id, "collective", "collective", (step.op,), step.loc, step.stream)
    return None


def _check_custom_ops(program: S.RankProgram, error: ErrorFactory) -> None:
    """Every `sdc.custom` op of the plan must be registered in this process (sdc.custom_op): one
    error naming all that are not, at load time rather than at the first call."""
    names = {str(entry.attrs.get("name")) for step in program.steps if isinstance(step, S.Launch)
             for entry in step.ops if entry.op == CUSTOM}
    missing = sorted(n for n in names if not custom_ops.is_registered(n))
    if missing:
        raise error(f"the plan uses {custom_ops.not_registered_message(missing)}")


def _opdef(name: str, step: S.Step, error: ErrorFactory):
    try:
        return get_op(name)
    except KeyError:
        raise error(f"{step.where}: unknown op {name!r}") from None


def _spec(v: S.Value) -> TensorSpec:
    return TensorSpec(tuple(d if isinstance(d, int) else DYN for d in v.shape), v.dtype)


def _weight(weights: dict, v: S.Value, error: ErrorFactory) -> torch.Tensor:
    if v.weight not in weights:
        raise error(f"value '{v.id}' refers to weight {v.weight!r}, which is not in the weights file")
    t = weights[v.weight]
    if v.layout is not None:  # stored in physical order `layout`: view it in logical order
        if len(v.layout) != t.dim():
            raise error(f"value '{v.id}' has layout {list(v.layout)!r}, which is not a permutation of its "
                        f"weight's {t.dim()} dims")
        inverse = [0] * len(v.layout)
        for i, p in enumerate(v.layout):
            inverse[p] = i
        t = t.permute(inverse)
    got = dtypes.from_torch(t.dtype)
    spec = _spec(v)
    if got != spec.dtype or len(t.shape) != spec.rank or any(
            isinstance(want, int) and want != size for size, want in zip(t.shape, spec.shape)):
        raise error(f"weight '{v.weight}' is {got}{list(t.shape)} in the weights file, value '{v.id}' is {spec}")
    return t


def _dense(weights: dict, name: str) -> DenseValue:
    if name not in weights:
        raise ValueError(f"attribute refers to weight '{name}', which is not in the weights file")
    t = weights[name]
    return DenseValue(t, dtypes.from_torch(t.dtype))
