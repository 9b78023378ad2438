"""The executor's instructions: what one step of a rank's plan becomes at load, and how runs of them
are called as one.

`sdc.runtime.executor` turns each plan step into one of these (a `PreparedOp` per op of a reference
kernel group or collective, `FreeSlots`, `AllocBuffer`, `ViewSlot`, `EventStep`); `_straight_line`
specializes the plain ops for an unprofiled call, under the thread gate (`_thread_gate`); and
`replace_runs` is how sdc.runtime.c_segment and c_runs call a run of C kernels as one instruction.
They live here, not in the executor, so that those two modules and the executor import downward only.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sdc import dtypes
from sdc.diagnostics import SdcError
from sdc.dialect.opdef import RefEnv
from sdc.dialect.shapes import TensorSpec
from sdc.runtime import gate
from sdc.runtime.arena import into
from sdc.runtime.kept import kept


@dataclass
class RunState:
    """What one call carries from step to step besides the values."""

    env: RefEnv
    spare: dict[int, torch.Tensor] = field(default_factory=dict)  # freed tensors an alloc will reuse
    events: dict[str, Any] = field(default_factory=dict)  # recorded CUDA events by name
    threads: int = 1  # the caller's torch thread count (`_thread_gate`)
    current: int = 1  # the thread count torch runs with now


@dataclass(frozen=True, eq=False)
class PreparedOp:
    """One op of a launch's reference kernel group, or one collective step, ready to run."""

    name: str
    step: str  # "kernel k3" or "collective c5", for messages
    step_id: str
    loc: str
    kernel: Callable[..., Any]
    attrs: dict
    ins: tuple[int, ...]
    outs: tuple[int, ...]
    declared: TensorSpec | None  # the declared result type (ops whose result type is not inferred)
    communicates: bool  # uses the communicator: tell it which op it runs, for its messages
    waits_for_comm: bool  # reads a collective's result: on CUDA, wait for the collective's stream
    into_buffers: bool  # writes a value an `alloc` step made: copy the result into that buffer
    stream: Any = None  # the CUDA stream it runs on, or None for the current one
    direct: Callable[..., Any] | None = None  # the torch function the kernel equals here (`_direct_kernel`)
    joined: tuple[str, ...] = ()  # the earlier steps whose op this one also runs (a concat chain, a bias add)

    def where(self) -> str:
        return f"{self.loc}: " if self.loc else ""

    def failure(self, e: Exception) -> SdcError:
        return SdcError(f"{self.where()}'sdc.{self.name}' failed in {self.step}: {e}")

    def plain(self, comm: Any) -> bool:
        """True for the common case that `specialized` covers: on the current stream, no declared
        result type, no buffer to copy the result into, and no communicator to tell about the op
        (`comm` None: a world of one, where collectives are reference functions like any other)."""
        return (self.stream is None and self.declared is None and not self.into_buffers
                and (comm is None or not (self.communicates or self.waits_for_comm)))

    def specialized(self, frees: tuple[int, ...]) -> Callable[[list, RunState], None]:
        """This op as one closure that does only what a `plain` op needs, then drops the slots of
        `frees` (the free steps right after it), instead of the generic `__call__`'s checks and a
        separate free instruction per step. With `direct` the torch function is called on the
        operands alone, skipping the reference function's own frame and attribute reads."""
        kernel, attrs, failure, direct = self.kernel, self.attrs, self.failure, self.direct
        n = len(self.ins)
        get = operator.itemgetter(*self.ins) if n else None
        outs = self.outs
        out = outs[0] if len(outs) == 1 else None
        sequence = (tuple, list)

        # The common shapes (one result; one or more operands) each get a closure of their own, one
        # Python frame per op; a direct torch function of a one-result op returns one tensor.
        if out is not None and n and direct is not None:
            if n == 1:
                def run(vals: list, state: RunState) -> None:
                    try:
                        vals[out] = direct(get(vals))
                    except Exception as e:
                        raise failure(e) from e
                    for slot in frees:
                        vals[slot] = None
            else:
                def run(vals: list, state: RunState) -> None:
                    try:
                        vals[out] = direct(*get(vals))
                    except Exception as e:
                        raise failure(e) from e
                    for slot in frees:
                        vals[slot] = None
            return run

        if len(outs) > 1 and n == 1 and direct is not None:  # split: a direct function returns the parts
            def run(vals: list, state: RunState) -> None:
                try:
                    parts = direct(get(vals))
                except Exception as e:
                    raise failure(e) from e
                for slot, t in zip(outs, parts):
                    vals[slot] = t
                for slot in frees:
                    vals[slot] = None
            return run

        if out is not None and n:
            single = n == 1

            def run(vals: list, state: RunState) -> None:
                try:
                    result = kernel(state.env, attrs, get(vals)) if single else kernel(state.env, attrs, *get(vals))
                except SdcError:
                    raise
                except Exception as e:
                    raise failure(e) from e
                vals[out] = result[0] if isinstance(result, sequence) else result
                for slot in frees:
                    vals[slot] = None

            return run

        def run_any(vals: list, state: RunState) -> None:  # no operands, or not one result
            try:
                result = kernel(state.env, attrs, *get(vals)) if n > 1 else (
                    kernel(state.env, attrs, get(vals)) if n else kernel(state.env, attrs))
            except SdcError:
                raise
            except Exception as e:
                raise failure(e) from e
            if out is not None:
                vals[out] = result[0] if isinstance(result, sequence) else result
            elif outs:
                for slot, t in zip(outs, result):
                    vals[slot] = t
            for slot in frees:
                vals[slot] = None

        return run_any

    def __call__(self, vals: list, state: RunState) -> None:
        args = [vals[i] for i in self.ins]
        env = state.env
        comm = env.comm
        if comm is not None:
            if self.waits_for_comm:
                comm.ready(args)
            if self.communicates:
                comm.where = (self.name, self.loc, self.step)
        if self.declared is not None:
            env.result_spec = self.declared
        try:
            if self.stream is None:
                out = self.kernel(env, self.attrs, *args)
            else:
                with torch.cuda.stream(self.stream):
                    out = self.kernel(env, self.attrs, *args)
        except SdcError:
            raise
        except Exception as e:
            raise self.failure(e) from e
        if not self.outs:
            return
        results = [out[0] if isinstance(out, (tuple, list)) else out] if len(self.outs) == 1 else list(out)
        for slot, t in zip(self.outs, results):
            if self.into_buffers and vals[slot] is not None:
                vals[slot] = into(vals[slot], t)
            else:
                vals[slot] = t


@dataclass(frozen=True, eq=False)
class _CountFallback:
    """The first instruction of a C launch's fallback: counts the call (sdc/runtime/counters.py)."""

    fell_back: Callable[[str], None]
    kernel: str

    def __call__(self, vals: list, state: RunState) -> None:
        self.fell_back(self.kernel)


@dataclass(frozen=True, eq=False)
class FreeSlots:
    slots: tuple[int, ...]
    keep: tuple[int, ...]  # slots whose memory a later alloc reuses: moved to `spare[slot]`, not dropped

    def __call__(self, vals: list, state: RunState) -> None:
        for slot in self.keep:
            state.spare[slot] = vals[slot]
        for slot in self.slots:
            vals[slot] = None


@dataclass(frozen=True, eq=False)
class AllocBuffer:
    slot: int
    shape: tuple  # ints and symbolic dims (names, expressions such as "B//2"), evaluated per call
    dtype: torch.dtype
    device: torch.device | None
    reuses: int | None  # the slot of a freed value whose memory to take when it is large enough

    def __call__(self, vals: list, state: RunState) -> None:
        shape = tuple(state.env.dim(d) for d in self.shape)
        old = state.spare.pop(self.reuses, None) if self.reuses is not None else None
        need = dtypes.itemsize(dtypes.from_torch(self.dtype))
        for d in shape:
            need *= d
        if old is not None and old.untyped_storage().nbytes() >= need:
            buffer = torch.empty(0, dtype=self.dtype, device=old.device)
            buffer.set_(old.untyped_storage(), 0, shape)
        else:
            buffer = torch.empty(shape, dtype=self.dtype, device=self.device)
        vals[self.slot] = buffer


@dataclass(frozen=True, eq=False)
class ViewSlot:
    """A `view` step: the value's slot becomes its slice of the base's buffer, for its kernel to write."""

    slot: int
    base: int
    axis: int
    offset: int
    size: int

    def __call__(self, vals: list, state: RunState) -> None:
        vals[self.slot] = vals[self.base].narrow(self.axis, self.offset, self.size)


@dataclass(frozen=True, eq=False)
class EventStep:
    """record (`record=True`) or wait on a CUDA device; nothing on the CPU (plan order is run order)."""

    event: str
    stream: Any  # the CUDA stream, or None for the current one
    record: bool

    def __call__(self, vals: list, state: RunState) -> None:
        events = state.events
        stream = self.stream or torch.cuda.current_stream()
        if self.record:
            event = torch.cuda.Event()
            event.record(stream)
            events[self.event] = event
        else:
            stream.wait_event(events[self.event])


def replace_runs(program: list[Callable[[list, RunState], None]], member: Callable[[Any], bool],
                 counted: Callable[[Any], bool], make: Callable[[tuple], Any], least: int = 2) -> list[Callable]:
    """`program` with each maximal run of consecutive instructions that are `member`s, holding at least
    `least` that are `counted`, replaced by `make(run)` (the runs of C launches and of C-kernel ops that
    sdc.runtime.c_segment and c_runs call as one)."""
    out: list[Callable] = []
    run: list[Any] = []

    def close() -> None:
        if sum(1 for i in run if counted(i)) >= least:
            out.append(make(tuple(run)))
        else:
            out.extend(run)
        run.clear()

    for instruction in program:
        if member(instruction):
            run.append(instruction)
        else:
            close()
            out.append(instruction)
    close()
    return out


def _straight_line(program: list[Callable[[list, RunState], None]],
                   comm: Any) -> tuple[Callable[[list, RunState], None], ...]:
    """`program` with each plain op (`PreparedOp.plain`) replaced by its specialized closure, which
    also does the frees that follow it when none of them keeps memory for a later alloc."""
    out: list[Callable[[list, RunState], None]] = []
    i = 0
    while i < len(program):
        instruction = program[i]
        i += 1
        if not isinstance(instruction, PreparedOp) or not instruction.plain(comm):
            out.append(_gated(instruction))
            continue
        frees: list[int] = []
        while i < len(program) and isinstance(program[i], FreeSlots) and not program[i].keep:
            frees.extend(program[i].slots)
            i += 1
        run = instruction.specialized(tuple(frees))
        out.append(_thread_gate(instruction, run) if instruction.ins else run)
    return tuple(out)


def _gated(instruction: Callable[[list, RunState], None]) -> Callable[[list, RunState], None]:
    """An instruction as it runs unspecialized: an op with operands under `_thread_gate`."""
    return _thread_gate(instruction, instruction) if isinstance(instruction, PreparedOp) and instruction.ins else instruction


def _thread_gate(op: PreparedOp, run: Callable[[list, RunState], None]) -> Callable[[list, RunState], None]:
    """`run` (op's instruction) on one thread when its work is small (sdc.runtime.gate: a product by
    its multiply-adds, `_small_product`; any other op by the elements of its largest operand), else
    on the caller's threads; torch's count is switched only where it changes, and the call restores
    the caller's at its end. The count an op runs with is a function of the operand shapes of the
    call's ops up to it, never of earlier calls: two calls with the same inputs compute the same bits
    (a reduction's sum order can depend on the thread count). On a call with one thread it does
    nothing. torch's thread count is process-wide: during a one-thread stretch, torch work on other
    Python threads gets one thread too."""
    ins = op.ins
    product = (op.name == "matmul" or op.name.startswith("conv")) and len(ins) >= 2
    conv = op.name.startswith("conv")
    attrs = op.attrs

    decided: dict = {}  # a product's decision per operand shapes (2 us a call to derive)

    def small(vals: list) -> bool:
        if product:
            a, b = vals[ins[0]], vals[ins[1]]
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                return _small_product(conv, attrs, a, b)
            return kept(decided, (a.shape, b.shape), _small_product, conv, attrs, a, b)
        limit = gate.SERIAL_OP_ELEMENTS
        return all(not isinstance(t, torch.Tensor) or t.numel() <= limit for t in map(vals.__getitem__, ins))

    def gated(vals: list, state: RunState) -> None:
        if state.threads > 1:
            want = 1 if small(vals) else state.threads
            if want != state.current:
                torch.set_num_threads(want)
                state.current = want
        run(vals, state)

    return gated


def _small_product(conv: bool, attrs: dict, a: Any, b: Any) -> bool:
    """Whether a matmul of `a` by `b` (or a convolution of input `a` with weight `b`) is small enough
    for one thread (sdc.runtime.gate), from the operand shapes alone."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() == 0 or b.dim() == 0:
        return True
    if conv:
        return gate.small_conv(a.shape, b.shape, attrs.get("strides"))
    return gate.small_matmul(a.shape, b.shape, bool(attrs.get("transpose_lhs")), bool(attrs.get("transpose_rhs")))
