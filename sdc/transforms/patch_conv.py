"""sdc-patch-conv: a convolution whose windows tile its input is a matmul over the input's patches.

A vision transformer's patch embedding (and ConvNeXt's stem, Swin's patch merging) is a convolution
whose stride equals its kernel, without padding or dilation: each output pixel reads its own patch,
and the patches cover the input exactly. Then

    y = conv(x, w)                       x [N, C, D1..Dn], w [O, C, K1..Kn], Di = Ei * Ki

is, with P = C * K1 * .. * Kn,

    patches = reshape(transpose(reshape(x, [N, C, E1, K1, .., En, Kn]), [0, 2, 4, .., 1, 3, 5, ..]),
                      [N, E1, .., En, P])
    y = transpose(matmul(patches, reshape(w, [O, P]), transpose_rhs), [0, n + 1, 1, .., n])

The gathering is a pure permutation of the input (no window overlaps, none is padded), so the
convolution's arithmetic is the matmul's, summed in another order. What it buys: the matmul joins
the kernels around it (a CPU matmul kernel with its bias as the epilogue, inside one run of C
launches), where a convolution of an input in row-major order is a call of its own into oneDNN,
whose first call after other work cost 150 us of a 270 us ViT. A per-channel bias add of the
convolution's result (an ONNX Conv's bias: one weight value per output channel, read only there)
is added to the matmul's result before the transpose, so it becomes the matmul's epilogue. The
weight's reshape is of a weight: the planner evaluates it at compile time.

It applies where the convolution has one group, dilations 1, no padding, strides equal to a kernel
of more than one element (a 1x1 convolution is left to the layouts: the CPU's channels-last kernels
take it), static channels and spatial dims that are multiples of the kernel, and a float dtype.
Anything else is left as it is. It emits no errors. Both compile pipelines run it before
sdc-shape-constraints, which names the new values' dims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sdc.diagnostics import DiagnosticSink
from sdc.dialect.ir import read_attrs, tensor_spec
from sdc.dialect.builder import create
from sdc.dialect.opdef import OPS
from sdc.dialect.shapes import is_static
from sdc.mlir import ir
from sdc.transforms.base import ModulePass, walk_ops
from sdc.transforms.fold_conv_batch_norm import WeightValues, per_channel_bias

FLOATS = ("f16", "bf16", "f32", "f64")


def patch_kernel(conv: ir.Operation) -> list[int] | None:
    """The kernel's spatial sizes when `conv` tiles its input with its windows (module docstring)."""
    x, w = (tensor_spec(v.type) for v in conv.operands)
    a = read_attrs(OPS["conv"], conv)
    n = x.rank - 2
    kernel = list(w.shape[2:])
    if n < 1 or x.dtype not in FLOATS or a["groups"] != 1 or not all(is_static(d) for d in (*x.shape[1:], *w.shape)):
        return None
    if math.prod(kernel) < 2 or list(a["strides"] or [1] * n) != kernel:
        return None
    if any(d != 1 for d in a["dilations"] or []) or any(p != 0 for p in a["pads"] or []):
        return None
    if any(size % k for size, k in zip(x.shape[2:], kernel)):
        return None
    return kernel


def rewrite(conv: ir.Operation, kernel: list[int], is_weight: WeightValues) -> None:
    """Replace `conv` (and the bias add that reads it, if any) by the matmul of its patches."""
    x, w = conv.operands
    spec = tensor_spec(x.type)
    n, channels, out_channels = len(kernel), spec.shape[1], tensor_spec(w.type).shape[0]
    tiles = [size // k for size, k in zip(spec.shape[2:], kernel)]
    y = conv.results[0]
    uses = list(y.uses)
    bias_add = uses[0].owner if len(uses) == 1 and uses[0].owner.name == "sdc.add" else None
    bias = (per_channel_bias(bias_add, y, out_channels, spec.dtype, is_weight) if bias_add is not None else None)
    last = bias_add if bias is not None else conv
    with ir.InsertionPoint(last), conv.location:
        split = [-1, channels] + [d for pair in zip(tiles, kernel) for d in pair]
        parts = create("reshape", [x], {"shape": split}).results[0]
        order = [0] + [2 + 2 * i for i in range(n)] + [1] + [3 + 2 * i for i in range(n)]
        grouped = create("transpose", [parts], {"perm": order}).results[0]
        patches = create("reshape", [grouped], {"shape": [-1, *tiles, channels * math.prod(kernel)]}).results[0]
        rows = create("reshape", [w], {"shape": [out_channels, channels * math.prod(kernel)]}).results[0]
        out = create("matmul", [patches, rows], {"transpose_rhs": True}).results[0]
        if bias is not None:
            flat = create("reshape", [bias], {"shape": [math.prod(tensor_spec(bias.type).shape)]}).results[0]
            out = create("add", [out, flat], loc=bias_add.location).results[0]
        result = create("transpose", [out], {"perm": [0, n + 1, *range(1, n + 1)]}).results[0]
    last.results[0].replace_all_uses_with(result)
    if bias is not None:
        bias_add.erase()
    conv.erase()


@dataclass(frozen=True)
class PatchConvPass(ModulePass):
    """No options."""

    name = "sdc-patch-conv"
    summary = "a convolution whose windows tile its input (stride = kernel, no padding) becomes a matmul of patches"

    def run(self, module: ir.Operation, diag: DiagnosticSink) -> None:
        is_weight = WeightValues()
        for conv in walk_ops(module, "sdc.conv"):
            if conv.name != "sdc.conv":  # (a prefix: sdc.conv_transpose, sdc.conv_weight_grad)
                continue
            kernel = patch_kernel(conv)
            if kernel is not None:
                rewrite(conv, kernel, is_weight)
                is_weight.known.clear()  # a new op may take an erased op's address, the memo's key
