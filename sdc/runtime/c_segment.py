"""Runs of C launches called as one: the executor's `CSegment` instruction.

Each C launch (launch/c.py's CLaunch) costs 3-10 us of Python per call: its argument shapes looked up,
its results allocated, its pointers written, one ctypes call. A small transformer has dozens of them
between a few torch ops, so that cost, not the kernels, decides its time. A segment is a maximal run of
consecutive executor instructions that are

- C launches with a compiled kernel;
- free steps (which drop slots; those that keep memory for a later alloc end the run);
- plain view ops of one operand (`VIEW_OPS`: reshape, unsqueeze, squeeze, transpose, broadcast, slice),
  splits and concats,
- plain ops whose value the weights and the symbol values alone decide (`_determined`: iota and
  dim_values, then pure ops of such values: the position ids, masks and shape arithmetic of a
  transformer, and a gather of a constant table by them), which would otherwise split it,

holding at least two launches. A call of the segment makes one ctypes call of `sdc_run_kernels`
(`SEQUENCER`, compiled once per host like the kernels), which calls each kernel with its pointer and
domain arrays in order, and stops at the first that returns nonzero.

What one call derives from the shapes of the values the run reads from before it, and the symbol values
(the `_Plan`, made on the first call of those shapes and kept, up to `PLANS` of them): every launch's
domain (CLaunch._settle on meta tensors), every view's result (the op itself on a meta tensor), and the
value of every determined op (the op itself on the weights and the values computed before it; written
once into the buffer the plan keeps for it, where something the call runs reads it: weights do not
change between calls). A view whose result is all of its operand's elements, dense and in order, is
an alias (the same memory: no work); another (a transpose, a
broadcast, a split's part) becomes a strided copy into a dense buffer (`sdc_strided_copy`), which is
what the launch reading it would have made of it; a concat copies each operand into its slice of a
dense buffer. The values the run makes live in buffers the plan keeps, except those whose memory the
call may hand back (an output, or what an output may be a view of, or memory a later alloc takes:
`_may_outlive_the_call`), which get fresh tensors per call as a launch makes them. The pointers of kept
buffers and of weights are written once; a call writes those of its other inputs and of its fresh
results.

A call runs the instructions one by one instead (what the executor does without segments) when the
plan says a launch does not fit (a run-time broadcast), a launch's work is large while torch has
more than one thread (the launch then runs torch's ops on all of them), a view does not give a view,
or a kernel returned nonzero (the instructions then run from the start: nothing before wrote into
the run's inputs, so the call's error, or its results, are the launches' own). `SDC_C_SEGMENTS=0`
at load turns segments off. No MLIR here.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sdc.dialect.opdef import all_ops
from sdc.limits import check_alloc
from sdc.runtime.arena import ArenaAlloc
from sdc.runtime.launch.c import _MISFIT, CCompileError, CLaunch, _dense_strides, build_library, out_of_memory
from sdc.runtime.instructions import AllocBuffer, EventStep, FreeSlots, PreparedOp, ViewSlot, replace_runs
from sdc.runtime.switches import env_switch

SEGMENTS_ENV = "SDC_C_SEGMENTS"
VIEW_OPS = ("reshape", "unsqueeze", "squeeze", "transpose", "broadcast", "slice")
PLANS = 8  # shapes a segment keeps a plan for (each plan holds the buffers of the run's inner values)
MAX_RANK = 8  # of a strided copy

SEQUENCER = r"""
#include <stdint.h>
#include <string.h>

typedef int (*sdc_kernel)(void **p, const int64_t *d);

/* kernels[i](ps[i], ds[i]) for i < n in order; 0, or 1 + the index of the first that returned nonzero */
int sdc_run_kernels(int64_t n, void *const *kernels, void **const *ps, const int64_t *const *ds)
{
    for (int64_t i = 0; i < n; ++i)
        if (((sdc_kernel)kernels[i])(ps[i], ds[i]))
            return (int)(i + 1);
    return 0;
}

/* one row of `inner` elements of T, `step` apart in the source and `put` apart in the destination */
#define SDC_ROW(T) { const T *restrict s = (const T *)src + at; T *restrict o = (T *)dst + out; \
    if (step == 1 && put == 1) for (int64_t i = 0; i < inner; ++i) o[i] = s[i]; \
    else for (int64_t i = 0; i < inner; ++i) o[i * put] = s[i * step]; }

/* p[0]: the source, p[1]: the destination; d = {rank, element bytes, source offset, destination offset,
   size[rank], source stride[rank], destination stride[rank]} (in elements): element (i0, ..) goes from
   source offset + sum(i_j * source stride[j]) to destination offset + sum(i_j * destination stride[j]).
   The last dim is a row; the one before it steps between rows; the others are counted in `index`. */
int sdc_strided_copy(void **p, const int64_t *d)
{
    const int64_t rank = d[0], bytes = d[1];
    const int64_t *size = d + 4, *from = d + 4 + rank, *to = d + 4 + 2 * rank;
    for (int64_t j = 0; j < rank; ++j)
        if (size[j] == 0) return 0;
    const int64_t inner = rank ? size[rank - 1] : 1, step = rank ? from[rank - 1] : 0, put = rank ? to[rank - 1] : 0;
    const int64_t rows = rank > 1 ? size[rank - 2] : 1, row_step = rank > 1 ? from[rank - 2] : 0,
                  row_put = rank > 1 ? to[rank - 2] : 0, outer = rank > 2 ? rank - 2 : 0;
    const char *src = (const char *)p[0];
    char *dst = (char *)p[1];
    int64_t index[8] = {0};
    for (;;) {
        int64_t at = d[2], out = d[3];
        for (int64_t j = 0; j < outer; ++j) {
            at += index[j] * from[j];
            out += index[j] * to[j];
        }
        for (int64_t r = 0; r < rows; ++r, at += row_step, out += row_put) {
            switch (bytes) {
            case 8: SDC_ROW(int64_t) break;
            case 4: SDC_ROW(int32_t) break;
            case 2: SDC_ROW(int16_t) break;
            case 1: SDC_ROW(int8_t) break;
            default: for (int64_t i = 0; i < inner; ++i)
                memcpy(dst + (out + i * put) * bytes, src + (at + i * step) * bytes, (size_t)bytes);
            }
        }
        int64_t j = outer - 1;
        for (; j >= 0; --j) {
            if (++index[j] < size[j]) break;
            index[j] = 0;
        }
        if (j < 0) return 0;
    }
}
"""


def segments_enabled() -> bool:
    """SDC_C_SEGMENTS (read when an artifact is loaded): unset or 1/on, runs of C launches as one call."""
    return env_switch(SEGMENTS_ENV) is not False


_SEQUENCER_LIB: list = []  # the loaded sequencer library, once per process (None: it did not build)


def _sequencer():
    if not _SEQUENCER_LIB:
        try:
            lib = build_library(SEQUENCER)
        except CCompileError:
            lib = None
        if lib is not None:
            lib.sdc_run_kernels.restype = ctypes.c_int
            lib.sdc_run_kernels.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        _SEQUENCER_LIB.append(lib)
    return _SEQUENCER_LIB[0]


# ---------------------------------------------------------------- finding the runs


def build_segments(program: list[Callable], output_slots: list[int], initial: list) -> list[Callable]:
    """`program` with each run of C launches (module docstring) replaced by one `CSegment`. `initial`:
    the executor's slots before a call (its weights, which every call reads where they lie)."""
    if not segments_enabled() or not any(isinstance(i, CLaunch) and i.fn is not None for i in program):
        return program
    lib = _sequencer()
    if lib is None:
        return program

    # a launch that writes into a buffer bound before it (an alloc step's, a view of one: a concat written
    # in place) keeps its own instruction: a segment gives the values it makes memory of its own
    bound = {i.slot for i in program if isinstance(i, (AllocBuffer, ViewSlot, ArenaAlloc))}

    def member(i: Any) -> bool:
        if isinstance(i, CLaunch):  # (a physical-order launch: this plan takes row-major tensors)
            return i.fn is not None and not i.physical and not bound.intersection(i.result_slots)
        if isinstance(i, FreeSlots):
            return not i.keep
        if not isinstance(i, PreparedOp) or not i.plain(None):
            return False
        return ((i.name in VIEW_OPS and len(i.ins) == 1 and len(i.outs) == 1)
                or (i.name == "split" and len(i.ins) == 1) or (i.name == "concat" and len(i.outs) == 1)
                or (bool(i.outs) and determined.issuperset(i.outs)))

    determined = _determined(program, initial)

    outlive = _may_outlive_the_call(program, output_slots)
    return replace_runs(program, member, lambda i: isinstance(i, CLaunch),
                        lambda run: CSegment(run, outlive, lib, initial, determined))


def _determined(program: list[Callable], initial: list) -> frozenset[int]:
    """The slots whose values the weights and the symbol values alone decide: the weights, and the
    results of C launches and of plain pure ops (no collective, no custom op) of such values, or of none
    (iota, dim_values). A plan computes those once (`CSegment._plan`)."""
    ops = all_ops()
    known = {slot for slot, t in enumerate(initial) if t is not None}
    for i in program:
        if isinstance(i, CLaunch) and i.fn is not None and known.issuperset(i.arg_slots):
            known.update(i.result_slots)
        elif isinstance(i, PreparedOp) and i.plain(None) and known.issuperset(i.ins):
            if i.name in ops and ops[i.name].pure and ops[i.name].family not in ("collective", "custom"):
                known.update(i.outs)
    return frozenset(known)


def _aliases(value: torch.Tensor, of: torch.Tensor) -> bool:
    """`value` is all of `of`'s elements, dense and in order, in `of`'s memory (a reshape's result)."""
    return (value.data_ptr() == of.data_ptr() and value.numel() == of.numel() and value.is_contiguous()
            and of.is_contiguous())


def _may_outlive_the_call(program: list[Callable], output_slots: list[int]) -> frozenset[int] | None:
    """The slots whose memory a call may hand back: the outputs, and every value an instruction reads
    to make one of those (any result may be a view of any operand: a reshape's is), transitively; a
    value whose memory a later alloc takes (a free that keeps it), and what shares memory with an
    alloc's or view's buffer. None: an instruction this does not know, so any may."""
    reach = set(output_slots)
    pairs: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # (operands, results) that may share memory
    for i in program:
        if isinstance(i, CLaunch):
            pairs.append((i.arg_slots, (*i.result_slots, *i.scratch)))
        elif isinstance(i, PreparedOp):
            pairs.append((i.ins, i.outs))
        elif isinstance(i, FreeSlots):
            reach.update(i.keep)
        elif isinstance(i, ViewSlot):
            pairs += [((i.base,), (i.slot,)), ((i.slot,), (i.base,))]
        elif isinstance(i, AllocBuffer):
            if i.reuses is not None:
                pairs += [((i.reuses,), (i.slot,)), ((i.slot,), (i.reuses,))]
        elif not isinstance(i, (ArenaAlloc, EventStep)):
            return None
    changed = True
    while changed:
        changed = False
        for ins, outs in reversed(pairs):
            if any(o in reach for o in outs) and not reach.issuperset(ins):
                reach.update(ins)
                changed = True
    return frozenset(reach)


def _slots(m: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The slots a member of a run reads and those it writes."""
    if isinstance(m, CLaunch):
        return m.arg_slots, m.result_slots
    if isinstance(m, FreeSlots):
        return (), ()
    return m.ins, m.outs


def _concat_meta(parts: list[torch.Tensor], axis: int) -> torch.Tensor | None:
    """The meta result of concatenating `parts` along `axis`, or None where they do not join (the op
    then says why, run on its own)."""
    rank = parts[0].dim() if parts else 0
    if not rank or not -rank <= axis < rank or any(t.dim() != rank or t.dtype != parts[0].dtype for t in parts):
        return None
    axis %= rank
    shape = list(parts[0].shape)
    if any(t.shape[j] != shape[j] for t in parts for j in range(rank) if j != axis):
        return None
    shape[axis] = sum(t.shape[axis] for t in parts)
    return torch.empty(shape, dtype=parts[0].dtype, device="meta")


def _copy(shape, itemsize: int, src_offset: int, src_strides, dst_offset: int, dst_strides):
    """The domain array `d` of one `sdc_strided_copy` (SEQUENCER), over the fewest dims: size-1 dims
    dropped, and a dim merged into the one before it where both sides step over the pair as over one
    dim (a transpose's unmoved neighbours, a slice's whole rows), so its rows are as long as they can be."""
    dims: list[tuple[int, int, int]] = []  # (a 0 among them stays: the copy then copies nothing)
    for n, s, t in zip(shape, src_strides, dst_strides):
        if n == 1:
            continue
        if dims and dims[-1][1] == s * n and dims[-1][2] == t * n:
            dims[-1] = (dims[-1][0] * n, s, t)
        else:
            dims.append((n, s, t))
    sizes, froms, tos = (list(x) for x in zip(*dims)) if dims else ([], [], [])
    rank = len(sizes)
    return (ctypes.c_int64 * (4 + 3 * rank))(rank, itemsize, src_offset, dst_offset, *sizes, *froms, *tos)


# ---------------------------------------------------------------- one segment


@dataclass
class _Plan:
    """What calls of one set of input shapes (and symbol values) run: see the module docstring."""

    stepwise: bool = False  # run the instructions one by one
    large: bool = False  # a launch's work is large: one by one when torch has more than one thread
    count: int = 0
    kernels: Any = None  # ctypes arrays for sdc_run_kernels
    pointer_arrays: Any = None
    domains: Any = None
    ext_patches: tuple = ()  # (pointer array, index, input position)
    fresh: tuple = ()  # (shape, dtype) of each buffer allocated per call
    fresh_patches: tuple = ()  # (pointer array, index, fresh position)
    results: tuple = ()  # (slot, ("fresh", j) or ("input", i), view shape or None)
    kept_results: tuple = ()  # (slot, tensor): values read after the run that live in kept buffers
    keep: list = field(default_factory=list)  # everything the arrays point into or at (the weights: the executor)


class CSegment:
    """One run of C launches, views and frees (module docstring), an executor instruction."""

    def __init__(self, members: tuple, outlive: frozenset[int] | None, lib: Any, initial: list,
                 determined: frozenset[int] = frozenset()):
        self.members = members
        self.determined = determined  # slots whose values a plan computes once (`_determined`)
        self.slot_count = len(initial)
        self.lib = lib
        self.run_kernels = lib.sdc_run_kernels
        self.copy_address = ctypes.cast(lib.sdc_strided_copy, ctypes.c_void_p).value
        self.plans: dict = {}
        self.has_views = any(not isinstance(m, (CLaunch, FreeSlots)) for m in members)
        made: set[int] = set()
        inputs: list[int] = []
        for m in members:
            reads, writes = _slots(m)
            inputs += [slot for slot in dict.fromkeys(reads) if slot not in made and slot not in inputs]
            made.update(writes)
        # the weights among them: dense tensors every call reads where they lie, their pointers written once
        self.constants = frozenset(n for n, slot in enumerate(inputs) if initial[slot] is not None
                                   and initial[slot].is_contiguous())
        self.inputs = tuple(inputs)
        # the others, which a call reads from `vals` and checks: the plan's key is their shapes
        self.varying = tuple(n for n in range(len(inputs)) if n not in self.constants)
        self.varying_slots = tuple(inputs[n] for n in self.varying)
        self.freed = tuple(s for m in members if isinstance(m, FreeSlots) for s in m.slots)
        # what the run makes that is read after it: every value it makes and does not free; of those, the
        # ones whose memory the call may hand back (`_may_outlive_the_call`) get fresh tensors per call
        freed = set(self.freed)
        self.leaving = frozenset(s for s in made if s not in freed)
        # what a call's frees drop from `vals`: the run's inputs (the values it makes inside it are never there)
        self.dropped = tuple(s for s in self.freed if s in self.inputs)
        self.outliving = frozenset(s for s in self.leaving if outlive is None or s in outlive)
        self.where = next(m.where for m in members if isinstance(m, CLaunch))

    def stepwise(self, vals: list, state: Any) -> None:
        for m in self.members:
            m(vals, state)

    def __call__(self, vals: list, state: Any) -> None:
        tensors = [vals[s] for s in self.varying_slots]
        key = tuple([t.shape for t in tensors])
        if self.has_views:
            key = (key, tuple(state.env.symbols.values()))
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) >= PLANS:
                self.plans.clear()
            with torch.inference_mode(False):  # (views of inference-mode tensors do not say they are views)
                plan = self.plans[key] = self._plan([vals[s] for s in self.inputs], state)
        if plan.stepwise or (plan.large and state.threads > 1):
            return self.stepwise(vals, state)
        try:
            for n, t in enumerate(tensors):
                if not t.is_contiguous():
                    need = t.numel() * t.element_size()
                    if need > t.untyped_storage().nbytes():  # more than the bytes it views: a broadcast
                        check_alloc(need, f"{self.where}: an input of a run of C kernels made dense")
                    tensors[n] = t.contiguous()
            fresh = [torch.empty(shape, dtype=dtype) for shape, dtype in plan.fresh]
        except RuntimeError as e:  # the allocator's (the limit is checked above and by the plan)
            raise out_of_memory(self.where, "a run of C kernels", e) from None
        if plan.ext_patches:
            pointers = [t.data_ptr() for t in tensors]
            for array, index, n in plan.ext_patches:
                array[index] = pointers[n]
        for array, index, n in plan.fresh_patches:
            array[index] = fresh[n].data_ptr()
        if self.run_kernels(plan.count, plan.kernels, plan.pointer_arrays, plan.domains):
            return self.stepwise(vals, state)  # the launches decide what this call does
        for slot, (kind, n), shape in plan.results:
            t = fresh[n] if kind == "fresh" else tensors[n]
            vals[slot] = t if shape is None else t.view(shape)
        for slot, t in plan.kept_results:
            vals[slot] = t
        for slot in self.dropped:
            vals[slot] = None

    # ------------------------------------------------------------ planning one set of shapes

    def _plan(self, tensors: list[torch.Tensor], state: Any) -> _Plan:
        plan = _Plan()
        # per slot the run has seen: (meta tensor, storage) where storage is ("input", i) or ("buffer", b)
        meta: dict[int, torch.Tensor] = {}
        storage: dict[int, tuple[str, int]] = {}
        for n, (slot, t) in enumerate(zip(self.inputs, tensors)):
            meta[slot] = torch.empty(t.shape, dtype=t.dtype, device="meta")
            storage[slot] = ("input", n)
        buffers: list[tuple[tuple[int, ...], torch.dtype]] = []  # per buffer: shape, dtype
        held: list[torch.Tensor] = []  # values computed now, each copied into its buffer (`where`)
        calls: list[tuple[int, list, Any]] = []  # (kernel address, [storage per pointer], domain array)
        # the values of the run's determined slots (`_determined`), computed now: the weights it reads, and
        # each op of those alone (a plan is for one set of symbol values). Such a value gets a buffer only
        # where something the call runs reads it (`where`): storage ("value", slot) until then.
        real = {slot: t for slot, t in zip(self.inputs, tensors) if slot in self.determined}
        placed: dict[int, tuple[str, int]] = {}  # a computed value's slot -> its buffer

        def new_buffer(shape, dtype) -> tuple[str, int]:
            buffers.append((tuple(shape), dtype))
            return ("buffer", len(buffers) - 1)

        def computed(slot: int, value: torch.Tensor) -> None:  # a determined slot's value, made now
            real[slot] = value.contiguous()
            meta[slot] = torch.empty(value.shape, dtype=value.dtype, device="meta")
            storage[slot] = ("value", slot)

        def where(slot: int) -> tuple[str, int]:
            kind, n = storage[slot]
            if kind != "value":
                return kind, n
            if n not in placed:  # a copy of the value into a buffer of its own (once, where the plan keeps it)
                value = real[n]
                placed[n] = new_buffer(value.shape, value.dtype)
                held.append(value)
                calls.append((self.copy_address, [("held", len(held) - 1), placed[n]],
                              _copy(value.shape, value.element_size(), 0, _dense_strides(tuple(value.shape)),
                                    0, _dense_strides(tuple(value.shape)))))
            return placed[n]

        try:
            for m in self.members:
                if isinstance(m, FreeSlots):
                    continue
                if isinstance(m, CLaunch) and real.keys() >= set(m.arg_slots):  # its results now
                    scratch = [None] * self.slot_count
                    for slot in m.arg_slots:
                        scratch[slot] = real[slot]
                    with torch.inference_mode():
                        m(scratch, state)
                    for slot in m.result_slots:
                        computed(slot, scratch[slot])
                    continue
                if isinstance(m, CLaunch):
                    known = m._settle([meta[s] for s in m.arg_slots])
                    if known is _MISFIT:
                        return _Plan(stepwise=True)
                    plan.large |= known.large
                    args = [where(s) for s in m.arg_slots]
                    outs = []
                    for slot, (shape, _, dtype, _) in zip(m.result_slots, known.results):
                        meta[slot] = torch.empty(shape, dtype=dtype, device="meta")
                        storage[slot] = new_buffer(shape, dtype)
                        outs.append(storage[slot])
                    calls.append((ctypes.cast(m.fn, ctypes.c_void_p).value, args + outs, known.dims))
                    continue
                if real.keys() >= set(m.ins) and self.determined.issuperset(m.outs):  # its value now
                    with torch.inference_mode():
                        y = m.kernel(state.env, m.attrs, *[real[slot] for slot in m.ins])
                    ys = list(y) if isinstance(y, (tuple, list)) else [y]
                    if len(ys) != len(m.outs) or not all(isinstance(t, torch.Tensor) and t.device.type == "cpu"
                                                          for t in ys):
                        return _Plan(stepwise=True)
                    for slot, value in zip(m.outs, ys):
                        computed(slot, value)
                        if len(m.ins) == 1 and _aliases(real[slot], real[m.ins[0]]):
                            storage[slot] = storage[m.ins[0]]  # a reshape's: the operand's memory
                    continue
                x = [meta[slot] for slot in m.ins]
                if m.name == "concat":  # (torch.cat on meta tensors loads Python meta kernels: 140 MB)
                    y = _concat_meta(x, m.attrs["axis"])
                    if y is None:
                        return _Plan(stepwise=True)
                else:
                    y = m.direct(*x) if m.direct is not None else m.kernel(state.env, m.attrs, *x)
                ys = list(y) if isinstance(y, (tuple, list)) else [y]
                if len(ys) != len(m.outs) or not all(isinstance(t, torch.Tensor) and t.device.type == "meta"
                                                      and t.dim() <= MAX_RANK for t in ys):
                    return _Plan(stepwise=True)
                if m.name == "concat":  # each operand copied into its slice of a dense buffer
                    (dst,), (out,) = m.outs, ys
                    meta[dst] = out
                    storage[dst] = new_buffer(out.shape, out.dtype)
                    axis = m.attrs["axis"] % out.dim()
                    start = 0
                    for slot, part in zip(m.ins, x):
                        calls.append((self.copy_address, [where(slot), storage[dst]],
                                      _copy(part.shape, part.element_size(), 0, _dense_strides(tuple(part.shape)),
                                            start * out.stride()[axis], out.stride())))
                        start += part.shape[axis]
                    continue
                (src,) = m.ins
                for dst, view in zip(m.outs, ys):  # views of one operand (a split: several)
                    if not (view is x[0] or view._is_view()):
                        return _Plan(stepwise=True)
                    if view.is_contiguous() and view.storage_offset() == 0 and view.numel() == x[0].numel():
                        # the same memory: a reshape's, not a slice's (which a result could not view)
                        meta[dst] = view
                        storage[dst] = storage[src]
                        continue
                    meta[dst] = torch.empty(view.shape, dtype=view.dtype, device="meta")
                    storage[dst] = new_buffer(view.shape, view.dtype)
                    calls.append((self.copy_address, [where(src), storage[dst]],
                                  _copy(view.shape, view.element_size(), view.storage_offset(), view.stride(),
                                        0, _dense_strides(tuple(view.shape)))))
        except Exception:  # (a view op on meta tensors raises what it raises on real ones, unwrapped)
            return _Plan(stepwise=True)  # one by one: the instruction that fails says why, in its turn

        # buffers that hold a value the call may hand back are fresh per call; the others the plan keeps
        for slot in self.leaving:
            where(slot)
        leaving = {where(s) for s in self.outliving}
        fresh_index: dict[int, int] = {}
        kept: dict[int, torch.Tensor] = {}
        for b, (shape, dtype) in enumerate(buffers):
            if ("buffer", b) in leaving:
                fresh_index[b] = len(fresh_index)
            else:
                check_alloc(math.prod(shape) * dtype.itemsize,
                            f"{self.where}: a value of a run of C kernels")
                try:
                    kept[b] = torch.empty(shape, dtype=dtype)
                except RuntimeError as e:
                    raise out_of_memory(self.where, "a run of C kernels", e) from None
        plan.fresh = tuple(buffers[b] for b in fresh_index)
        # a held value whose buffer the plan keeps is that buffer's contents, written once, not per call
        per_call = []
        for call in calls:
            (kind, n), (_, b) = call[1][0], call[1][-1]
            if kind == "held" and b in kept:
                kept[b].copy_(held[n])
            else:
                per_call.append(call)
        calls = per_call
        used = {n for _, pointers, _ in calls for kind, n in pointers if kind == "held"}
        held = [t if n in used else None for n, t in enumerate(held)]  # the others are in kept buffers now
        varying = {n: k for k, n in enumerate(self.varying)}
        arrays, ext, fresh = [], [], []
        for _, pointers, _ in calls:
            array = (ctypes.c_void_p * max(1, len(pointers)))()
            for index, (kind, n) in enumerate(pointers):
                if kind == "held":
                    array[index] = held[n].data_ptr()
                elif kind == "input" and n in self.constants:
                    array[index] = tensors[n].data_ptr()
                elif kind == "input":
                    ext.append((array, index, varying[n]))
                elif n in fresh_index:
                    fresh.append((array, index, fresh_index[n]))
                else:
                    array[index] = kept[n].data_ptr()
            arrays.append(array)
        plan.ext_patches, plan.fresh_patches = tuple(ext), tuple(fresh)
        plan.count = len(calls)
        plan.kernels = (ctypes.c_void_p * max(1, len(calls)))(*[address for address, _, _ in calls])
        plan.pointer_arrays = (ctypes.c_void_p * max(1, len(calls)))(*[ctypes.addressof(a) for a in arrays])
        plan.domains = (ctypes.c_void_p * max(1, len(calls)))(*[ctypes.addressof(d) for _, _, d in calls])
        results, kept_results = [], []
        for slot in sorted(self.leaving):
            kind, n = where(slot)
            base_shape = tuple(buffers[n][0]) if kind == "buffer" else tuple(tensors[n].shape)
            shape = tuple(meta[slot].shape)
            if (kind == "buffer" and n in kept) or (kind == "input" and n in self.constants):
                base = kept[n] if kind == "buffer" else tensors[n]  # a view of a kept buffer or a weight:
                kept_results.append((slot, base if shape == base_shape else base.view(shape)))  # made once
                continue
            results.append((slot, ("fresh", fresh_index[n]) if kind == "buffer" else ("input", varying[n]),
                            None if shape == base_shape else shape))
        plan.results, plan.kept_results = tuple(results), tuple(kept_results)
        plan.keep = [arrays, kept, held, [d for _, _, d in calls]]
        return plan
