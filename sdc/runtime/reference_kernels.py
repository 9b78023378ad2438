"""The reference backend's kernels: how each op of a reference kernel group runs on torch.

Most ops run their reference semantics as they are (`OpDef.ref`). Two kinds of op run differently:

- `layout_cast`, the identity on values, really moves the bytes here: its result has the strides of
  its layout (torch's channels-last for NHWC), so the ops after it run on that memory order.
- an op the planner marked `"in_place": i` (sdc/codegen/plan.py decides it, at compile time) writes
  its result into operand i, which nothing else reads: relu, sigmoid, tanh, neg, exp, abs and clip
  on their operand; add, sub, mul and div on an operand of the result's shape and dtype. Where the
  tensors at run time do not allow it (an integer dtype, an operand that broadcasts), the op runs
  out of place, with the same result.

The planner reads `IN_PLACE_OPS` and `FRESH_RESULT` to decide; the executor calls `reference_kernel`.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

Kernel = Callable[..., Any]

_UNARY_IN_PLACE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu_, "sigmoid": torch.sigmoid_, "tanh": torch.tanh_, "neg": torch.neg_,
    "exp": torch.exp_, "abs": torch.abs_,
}
_BINARY_IN_PLACE = {"add": "add_", "sub": "sub_", "mul": "mul_", "div": "div_"}

# Ops that can write their result into an operand, and which operands: a commutative op either one.
IN_PLACE_OPS: dict[str, tuple[int, ...]] = {
    **{name: (0,) for name in _UNARY_IN_PLACE}, "clip": (0,),
    "add": (0, 1), "mul": (0, 1), "sub": (0,), "div": (0,),
}

# Ops whose result never shares memory with an operand (so a later op may write into it), and the
# in-place-capable ops themselves (out of place they allocate; in place they write into such memory).
FRESH_RESULT = frozenset({"conv", "layout_cast", "matmul", "batch_norm", "max_pool", "avg_pool", "global_avg_pool",
                          "global_max_pool", "softmax", "log_softmax", "layer_norm", "rms_norm", "concat",
                          *IN_PLACE_OPS})


def reference_kernel(name: str, ref: Kernel, in_place: int | None = None) -> Kernel:
    """The kernel that runs op `name` (reference semantics `ref`), writing into operand `in_place` if set."""
    if name == "layout_cast":
        return layout_cast
    if in_place is None:
        return ref
    if name not in IN_PLACE_OPS or in_place not in IN_PLACE_OPS[name]:
        raise ValueError(f"'{name}' cannot run in place on operand {in_place}")
    if name in _BINARY_IN_PLACE:
        return _binary(_BINARY_IN_PLACE[name], ref, swapped=in_place == 1)
    return _unary(name, ref)


def layout_cast(env, a: dict, x: torch.Tensor) -> torch.Tensor:
    """The same values, with the strides of layout `a["layout"]` (a permutation: the physical dim order)."""
    perm = list(a["layout"])
    if perm == list(range(x.dim())):
        return x.contiguous()
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return x.permute(perm).contiguous().permute(inverse)


def _unary(name: str, fallback: Kernel) -> Kernel:
    def run(env, a, x):
        if not x.is_floating_point():
            return fallback(env, a, x)
        if name == "clip":
            return x.clamp_(a["min"], a["max"])
        return _UNARY_IN_PLACE[name](x)

    return run


def _binary(method: str, fallback: Kernel, swapped: bool) -> Kernel:
    """`x.method_(y)`; `swapped`: the result goes into the second operand (add and mul commute)."""

    def run(env, a, x, y):
        target, other = (y, x) if swapped else (x, y)
        if target.dtype == other.dtype and target.is_floating_point() and _broadcasts_into(other, target):
            return getattr(target, method)(other)
        return fallback(env, a, x, y)

    return run


def _broadcasts_into(other: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether `other` broadcasts to `target`'s shape (so the result has target's shape)."""
    if other.dim() > target.dim():
        return False
    for o, t in zip(reversed(other.shape), reversed(target.shape)):
        if o != t and o != 1:
            return False
    return True
