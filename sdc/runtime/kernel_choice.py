"""Which kernel runs each op of a reference kernel group: the planner's choice, recorded in plan.json.

A launch step of plan.json names the kernel that runs it (`kernel.runs`, docs/artifact.md) and, where
that kernel may not take a call at run time, the planned fallback (`kernel.fallback`). The kernels:

- `c`, `triton`, `cuda_cpp`: a kernel sdc generated (kernels/ of the artifact); `c` falls back to
  `torch` where a call does not fit it (a run-time broadcast, a large product on several threads);
- `c_conv`: sdc's hand-written C kernel library (sdc/runtime/c_conv.c: convolutions, pooling, LRN,
  linear resize, channel shuffle and scaling, channel concat, the channels-last copy of an image),
  over channels-last float32 tensors; a call of another layout falls back (`onednn` for a
  convolution, `torch` for the others);
- `onednn`: a convolution on a weight oneDNN reordered once (reference_kernels.packed_conv), through
  torch; falls back to `torch` on an input that is not a float32 image;
- `cudnn`, `cudnn_fused`, `cublas`: torch's calls of the vendor libraries on cuda (a convolution, one
  with its epilogue in one call, a matmul);
- `torch`: the ops' reference semantics, torch's own kernels.

A reference group runs each of its ops by the op's own choice (`OpEntry.runs`); the step's kernel is
the most specific among them (`step_kernel`). `op_kernel` is the rule: the planner applies it at
compile time, with what it knows of the operands (types, and the weights' values); the executor
honours what the plan says, and applies the same rule only to a plan written without choices.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from sdc.dialect.shapes import DYN, TensorSpec, block_transpose_indices
from sdc.runtime.format import C_CONV, CUBLAS, CUDNN, CUDNN_FUSED, FALLBACKS, KERNELS, ONEDNN, TORCH  # noqa: F401

# the ops c_conv.c computes, besides the direct kernels of `_direct_c_conv`
_POOLS = ("max_pool", "avg_pool", "global_avg_pool", "lrn", "resize")


def step_kernel(op_kernels: Sequence[str]) -> str:
    """A reference group's kernel: the most specific of its ops' (`KERNELS`' order)."""
    order = list(KERNELS)
    return min(op_kernels, key=order.index, default=TORCH)


def step_fallback(kernel: str, op_names: Sequence[str] = ()) -> str | None:
    """What a step of `kernel` may fall back to at run time: c_conv's convolutions to oneDNN, its
    other kernels and the others that may fall back to torch (`FALLBACKS`); None where it takes every call."""
    if kernel not in FALLBACKS:
        return None
    if kernel == C_CONV and "conv" in op_names:
        return ONEDNN
    return TORCH


def op_kernel(name: str, attrs: dict, operands: Sequence[TensorSpec], constants: Sequence[torch.Tensor | None],
              in_place: int | None, on_cpu: bool, c_library: bool) -> str:
    """The kernel that runs op `name` of a reference group: from its attributes, its operands' types,
    the weights among its operands (`constants`, None for the others), whether it runs in place, and
    whether the plan runs on the CPU with sdc's C kernels (`c_library`: the target's C backend is on)."""
    if not on_cpu:
        if name == "conv":
            return CUDNN
        if name == "matmul":
            return CUBLAS
        return TORCH
    if name == "conv":
        return _conv_kernel(attrs, operands, constants, in_place, c_library)
    if not c_library or in_place is not None:
        return TORCH
    from sdc.runtime import c_conv

    x = operands[0] if operands else None
    if name in _POOLS:
        if x is None or x.rank != 4 or x.dtype != "f32":
            return TORCH
        fits = {"max_pool": c_conv.pool_fits, "avg_pool": c_conv.pool_fits, "lrn": c_conv.lrn_fits,
                "resize": c_conv.resize_fits}.get(name)
        return C_CONV if fits is None or fits(attrs) else TORCH
    if name == "layout_cast":  # an RGB image made channels-last (c_conv.channels_last_kernel)
        if (x is not None and list(attrs.get("layout") or ()) == [0, 2, 3, 1] and x.rank == 4 and x.dtype == "f32"
                and x.shape[1] != DYN and 2 <= x.shape[1] <= 4
                and (DYN in x.shape or math.prod(x.shape) >= c_conv.TO_CHANNELS_LAST_MIN)):
            return C_CONV
        return TORCH
    return C_CONV if _direct_c_conv(name, attrs, operands, constants) else TORCH


def _conv_kernel(attrs: dict, operands: Sequence[TensorSpec], constants: Sequence[torch.Tensor | None],
                 in_place: int | None, c_library: bool) -> str:
    """A CPU convolution of a float32 weight of the plan over a 4-d input of static channels: c_conv
    where its kernels take it, else oneDNN (reference_kernels.packed_conv); any other: torch."""
    from sdc.runtime.reference_kernels import PACK_MAX_DIM

    weight = constants[1] if len(constants) > 1 else None
    x = operands[0] if operands else None
    if (in_place is not None or weight is None or weight.dim() != 4 or weight.dtype != torch.float32
            or x is None or x.rank != 4 or x.shape[1] == DYN or any(d != DYN and d > PACK_MAX_DIM for d in x.shape)):
        return TORCH
    from sdc.runtime import c_conv

    if c_library and c_conv.conv_fits(tuple(weight.shape), "f32", attrs):
        return C_CONV
    return ONEDNN if torch.backends.mkldnn.is_available() else TORCH


def channel_scale(operands: Sequence[TensorSpec]) -> int | None:
    """Which operand of a float32 `mul` of two 4-d operands scales the other's channels (a [N, C, 1, 1]
    against a [N, C, H, W] whose image is not statically one pixel: a squeeze-excite block's), or None."""
    if len(operands) != 2 or any(o.dtype != "f32" or o.rank != 4 for o in operands):
        return None
    for scale in (1, 0):
        s, x = operands[scale], operands[1 - scale]
        if s.shape[2] == s.shape[3] == 1 and (x.shape[2], x.shape[3]) != (1, 1) and s.shape[1] in (x.shape[1], DYN):
            return scale
    return None


def block_transpose(indices: torch.Tensor | None, size: int) -> tuple[int, int] | None:
    """(a, b) where `indices` (a weight) is the permutation of a dim of `size` = a*b split into [a, b],
    transposed and joined (`shapes.block_transpose_indices`: a channel shuffle), else None."""
    if (indices is None or indices.dim() != 1 or indices.dtype != torch.int64 or size == DYN
            or indices.numel() != size or size < 4 or indices.device.type != "cpu"):
        return None
    b = int(indices[1])
    if b < 2 or size % b or size // b < 2:
        return None
    a = size // b
    return (a, b) if torch.equal(indices, torch.tensor(block_transpose_indices(a, b))) else None


def concat_in_c(axis: Any, operands: Sequence[TensorSpec]) -> bool:
    """Whether a concat of these operands along `axis` is c_conv's channel concat (float32 images)."""
    return (isinstance(axis, int) and len(operands) == 2 and operands[0].rank == 4 and axis % 4 == 1
            and all(o.dtype == "f32" and o.rank == 4 for o in operands))


def _direct_c_conv(name: str, attrs: dict, operands: Sequence[TensorSpec],
                   constants: Sequence[torch.Tensor | None]) -> bool:
    """Whether the executor's direct kernel of this op is one of c_conv's (executor._direct_kernel):
    a squeeze-excite scaling, a concat along the channels, a channel shuffle."""
    if name == "mul":
        return not attrs and channel_scale(operands) is not None
    if name == "concat":
        return concat_in_c(attrs.get("axis"), operands)
    if name == "gather" and len(operands) == 2 and operands[1].dtype == "i64" and operands[0].rank:
        axis = attrs.get("axis")
        x = operands[0]
        if not isinstance(axis, int) or not -x.rank <= axis < x.rank:
            return False
        return block_transpose(constants[1] if len(constants) > 1 else None, x.shape[axis % x.rank]) is not None
    return False


def cudnn_fuses(ops: Sequence[dict], values: dict) -> bool:
    """Whether the executor runs this reference group's convolution with its epilogue as one fused
    cuDNN call on cuda (reference_kernels.fused_conv), judged from plan.json's ops as the executor
    judges it: its epilogue merged (`fuse_epilogues`) and one torch has a fused call for."""
    from sdc.runtime.plan_schema import OpEntry
    from sdc.runtime.reference_kernels import EPILOGUE, cudnn_fused_call, fuse_epilogues

    entries = [OpEntry(op.get("op", "?"), dict(op.get("attrs") or {}), tuple(op.get("inputs") or ()),
                       tuple(op.get("outputs") or ()), in_place=op.get("in_place")) for op in ops]
    for entry in fuse_epilogues(entries):
        if entry.op == "conv" and EPILOGUE in entry.attrs and entry.inputs:
            dtype = (values.get(entry.inputs[0]) or {}).get("dtype", "")
            if cudnn_fused_call(entry.attrs[EPILOGUE], dtype) is not None:
                return True
    return False
