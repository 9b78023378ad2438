"""The runtime side of the memory plan: one buffer per executable, and views into it.

The planner (sdc/codegen/memory.py) gave each intermediate that crosses steps an offset in the
rank's arena. Here the executor allocates the arena once, on its device, as one uint8 tensor, and
right before the step that makes a placed value (or at its `alloc` step, if the plan has one) binds
the value's slot to a view of its bytes (`ArenaAlloc`): the tensor of the value's shape and dtype at
its offset. A generated
kernel writes its result straight into that view; a reference kernel's torch op makes its result
as usual and the executor copies it into the view (`into`), keeping the result's strides when they
are a dense permutation (a channels-last layout_cast stays channels-last). Views of values with
static shapes are made once, at load; a value with symbolic dims gets its view per call (its bytes
are a prefix of its slot, which was planned at the symbols' upper bounds: checked per call too).

Where it is used: on CUDA by default; on the CPU only with `SDC_ARENA=1`, because there every
planned value is a reference kernel's result, and copying it in costs more than malloc saves
(the encoder example: about 20% slower per call; docs/runtime.md). `SDC_ARENA=0` turns it off
everywhere: `alloc` steps of arena values then do nothing, and every result is the memory torch gave
it (the executor as it was before memory planning). Results are the same either way, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from sdc.diagnostics import SdcError
from sdc.runtime import plan_schema as S
from sdc.runtime.switches import env_switch

ARENA_ENV = "SDC_ARENA"


def arena_enabled(device: torch.device | None) -> bool:
    """SDC_ARENA (read when an artifact is loaded): 1/on or 0/off; unset, on for CUDA only."""
    chosen = env_switch(ARENA_ENV)
    return chosen if chosen is not None else device is not None and device.type == "cuda"


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= max(d, 1)
    return tuple(reversed(strides))


class Arena:
    """One rank's arena on one device, with a typed view of it per dtype."""

    def __init__(self, plan: S.Arena, device: torch.device | None):
        self.plan = plan
        self.buffer = torch.empty(max(plan.size, plan.alignment), dtype=torch.uint8, device=device)
        self.storage_ptr = self.buffer.untyped_storage().data_ptr()
        self._typed: dict[torch.dtype, torch.Tensor] = {}

    def typed(self, dtype: torch.dtype) -> torch.Tensor:
        t = self._typed.get(dtype)
        if t is None:
            t = self._typed[dtype] = self.buffer.view(dtype)
        return t

    def view(self, offset: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        typed = self.typed(dtype)
        return torch.as_strided(typed, shape, _contiguous_strides(shape), offset // typed.element_size())

    def holds(self, t: torch.Tensor) -> bool:
        """True when `t` is a view of the arena (its bytes are overwritten by the next call)."""
        return t.untyped_storage().data_ptr() == self.storage_ptr

    def alloc_step(self, slot: int, value: S.Value, dtype: torch.dtype, where: str) -> "ArenaAlloc":
        offset = self.plan.offsets[value.id]
        static = all(isinstance(d, int) for d in value.shape)
        view = self.view(offset, tuple(value.shape), dtype) if static else None
        return ArenaAlloc(self, slot, value.shape, dtype, offset, self.plan.nbytes[value.id], view, where, value.id)


@dataclass(frozen=True, eq=False)
class ArenaAlloc:
    """An executor instruction: the value's slot becomes its view of the arena."""

    arena: Arena
    slot: int
    shape: tuple  # ints and symbolic dims
    dtype: torch.dtype
    offset: int
    nbytes: int  # the slot's size (at the symbols' upper bounds)
    view: torch.Tensor | None  # made once when the shape is static
    where: str
    value: str

    def __call__(self, vals: list, state: Any) -> None:
        if self.view is not None:
            vals[self.slot] = self.view
            return
        shape = tuple(state.env.dim(d) for d in self.shape)
        need = math.prod(shape) * self.arena.typed(self.dtype).element_size()
        if need > self.nbytes:
            raise SdcError(f"{self.where}: value '{self.value}' needs {need} bytes at these sizes, its arena slot "
                           f"was planned for {self.nbytes} (the symbols' bounds {self.arena.plan.bounds})")
        vals[self.slot] = self.arena.view(self.offset, shape, self.dtype)


def _dense_permutation(t: torch.Tensor) -> bool:
    """True when `t`'s elements fill exactly numel() consecutive elements (any dim order)."""
    n = 1
    for stride, size in sorted((s, d) for s, d in zip(t.stride(), t.shape) if d != 1):
        if stride != n:
            return False
        n *= size
    return True


def into(buffer: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """`t`'s values in `buffer`'s memory; returns the tensor to bind (buffer, or a restrided view of it)."""
    if t.data_ptr() == buffer.data_ptr() and t.stride() == buffer.stride() and t.shape == buffer.shape:
        return t  # an in-place kernel already wrote there
    if t.shape == buffer.shape and not t.is_contiguous() and t.dim() > 1 and _dense_permutation(t):
        buffer = buffer.as_strided(t.shape, t.stride())
    buffer.copy_(t)
    return buffer
