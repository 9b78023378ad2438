"""Fused CPU kernels: how a kernel group of several ops runs on torch with less memory traffic.

The executor prepares each step's ops once, at load time; `specialize` then rewrites them where a
fused form computes the same values:

- a convolution followed by an inference batch norm of its result folds the normalization into the
  convolution's weights and bias (computed once, at load time); a convolution followed by adding a
  per-channel weight (a bias) takes it as its bias. The convolution's own result is never stored.
- an elementwise op (relu, add, mul, clip, ...) whose operand is a float intermediate of the same
  group that nothing else reads runs in place on it, when the op that made it returns a fresh tensor.

Results equal the op-by-op reference up to float rounding (the folded weights round once more).

`kernel(name, ref)` gives the CPU kernel of one op where it differs from the reference semantics:
a `layout_cast`, the identity on values, really moves the bytes here (the result has the strides
of its layout, e.g. torch's channels-last for NHWC), so the ops after it run on that memory order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import torch

from sdc.dialect.opdef import get_op

# Ops whose result never shares memory with an operand (so an in-place op may write into it).
FRESH = {"conv", "layout_cast", "matmul", "batch_norm", "max_pool", "avg_pool", "global_avg_pool", "global_max_pool",
         "softmax", "log_softmax", "layer_norm", "rms_norm", "concat"}

_UNARY_INPLACE = {
    "relu": torch.relu_, "sigmoid": torch.sigmoid_, "tanh": torch.tanh_, "neg": torch.neg_,
    "exp": torch.exp_, "abs": torch.abs_,
}
_BINARY_INPLACE = {"add": "add_", "sub": "sub_", "mul": "mul_", "div": "div_"}
_COMMUTATIVE = {"add", "mul"}


def kernel(name: str, ref):
    """The CPU kernel of op `name` (the reference function `ref` unless the CPU does more)."""
    if name == "layout_cast":
        return _layout_cast
    return ref


def _layout_cast(env, a, x):
    perm = list(a["layout"])
    if perm == list(range(x.dim())):
        return x.contiguous()
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return x.permute(perm).contiguous().permute(inverse)


def specialize(ops: list, uses: dict[int, int], initial: list, add_weight: Callable[[torch.Tensor], int]) -> list:
    """The prepared ops of one kernel group, rewritten into fused forms where they apply.

    `uses[slot]`: how many op inputs (and entry outputs) read a slot in the whole program;
    `initial[slot]`: a weight's tensor, or None; `add_weight(t)`: a new slot holding t.
    """
    if len(ops) < 2:
        return ops
    free = ops[-1].free
    ops = [replace(op, free=()) for op in ops]
    while _fold_into_conv(ops, uses, initial, add_weight):
        pass
    ops = _in_place(ops, uses, initial)
    ops[-1] = replace(ops[-1], free=free)
    return ops


# ---------------------------------------------------------------- conv + batch norm / bias


def _conv_bias(conv_ref):
    def run(env, a, x, w, b):
        return conv_ref(env, a, x, w, b)

    return run


def _fold_into_conv(ops: list, uses: dict[int, int], initial: list, add_weight) -> bool:
    for i, conv in enumerate(ops):
        if conv.name != "conv" or len(conv.outs) != 1 or uses.get(conv.outs[0], 0) != 1:
            continue
        w = initial[conv.ins[1]]
        bias = initial[conv.ins[2]] if len(conv.ins) == 3 else None
        if w is None or not w.is_floating_point() or (len(conv.ins) == 3 and bias is None):
            continue
        y = conv.outs[0]
        for j in range(i + 1, len(ops)):
            nxt = ops[j]
            if y not in nxt.ins:
                continue
            folded = _fold(nxt, y, w, bias, initial)
            if folded is None:
                break
            w2, b2 = folded
            ops[j] = replace(nxt, name="conv", ref=_conv_bias(get_op("conv").ref), attrs=conv.attrs,
                             ins=(conv.ins[0], add_weight(w2), add_weight(b2)))
            del ops[i]
            return True
    return False


def _fold(op, y: int, w: torch.Tensor, bias: torch.Tensor | None, initial: list):
    """(weight, bias) of a convolution that computes `op` applied to its result, or None."""
    channels = w.shape[0]
    if bias is None:
        bias = torch.zeros(channels, dtype=w.dtype)
    if op.name == "batch_norm" and op.ins[0] == y and op.ins.count(y) == 1:
        scale, shift, mean, var = (initial[s] for s in op.ins[1:5])
        if any(t is None or t.dtype != w.dtype or t.shape != (channels,) for t in (scale, shift, mean, var)):
            return None
        inv = scale / torch.sqrt(var + op.attrs["epsilon"])
        return w * inv.reshape(-1, *([1] * (w.dim() - 1))), (bias - mean) * inv + shift
    if op.name == "add" and op.ins.count(y) == 1:
        other = initial[op.ins[1] if op.ins[0] == y else op.ins[0]]
        per_channel = _per_channel(other, channels, w.dim())
        if per_channel is None or other.dtype != w.dtype:
            return None
        return w, bias + per_channel
    return None


def _per_channel(t: torch.Tensor | None, channels: int, rank: int) -> torch.Tensor | None:
    """`t` as one value per channel of an [N, C, spatial...] tensor it is added to, or None."""
    if t is None:
        return None
    if t.numel() == 1 and t.dim() <= rank:
        return t.reshape(1).expand(channels).clone()
    shape = list(t.shape)
    if len(shape) == rank:
        if shape[0] != 1:
            return None
        shape = shape[1:]
    if len(shape) == rank - 1 and shape[0] == channels and all(d == 1 for d in shape[1:]):
        return t.reshape(channels).clone()
    return None


# ---------------------------------------------------------------- in place


def _in_place(ops: list, uses: dict[int, int], initial: list) -> list:
    fresh: set[int] = set()  # slots this group made into memory nobody else holds
    out = []
    for op in ops:
        out.append(_in_place_op(op, fresh, uses, initial) or op)
        if len(op.outs) == 1 and (op.name in FRESH or op.name in _UNARY_INPLACE or op.name in _BINARY_INPLACE
                                  or op.name == "clip"):
            fresh.add(op.outs[0])  # out of place these allocate; in place they write into a fresh slot
    return out


def _owned(slot: int, fresh: set[int], uses: dict[int, int], initial: list) -> bool:
    return slot in fresh and uses.get(slot, 0) == 1 and initial[slot] is None


def _in_place_op(op, fresh: set[int], uses: dict[int, int], initial: list):
    if op.name in _UNARY_INPLACE or op.name == "clip":
        if len(op.ins) == 1 and _owned(op.ins[0], fresh, uses, initial):
            return replace(op, ref=_unary(op.name, op.ref))
        return None
    if op.name in _BINARY_INPLACE and len(op.ins) == 2:
        a, b = op.ins
        if _owned(a, fresh, uses, initial) and a != b:
            return replace(op, ref=_binary(_BINARY_INPLACE[op.name], op.ref))
        if op.name in _COMMUTATIVE and _owned(b, fresh, uses, initial) and a != b:
            return replace(op, ref=_binary(_BINARY_INPLACE[op.name], op.ref), ins=(b, a))
    return None


def _unary(name: str, fallback):
    def run(env, a, x):
        if not x.is_floating_point():
            return fallback(env, a, x)
        if name == "clip":
            return x.clamp_(a["min"], a["max"])
        return _UNARY_INPLACE[name](x)

    return run


def _binary(method: str, fallback):
    def run(env, a, x, y):
        if x.dtype == y.dtype and x.is_floating_point() and torch.broadcast_shapes(x.shape, y.shape) == x.shape:
            return getattr(x, method)(y)
        return fallback(env, a, x, y)

    return run
