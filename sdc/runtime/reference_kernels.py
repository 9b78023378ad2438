"""The reference backend's kernels: how each op of a reference kernel group runs on torch.

Most ops run their reference semantics as they are (`OpDef.ref`). Two kinds of op run differently:

- `layout_cast`, the identity on values, really moves the bytes here: its result has the strides of
  its layout (torch's channels-last for NHWC), so the ops after it run on that memory order.
- an op the planner marked `"in_place": i` (sdc/codegen/plan.py decides it, at compile time) writes
  its result into operand i, which nothing else reads: relu, sigmoid, tanh, neg, exp, abs, clip,
  hard_swish and hard_sigmoid on their operand; add, sub, mul and div on an operand of the result's
  shape and dtype. Where the tensors at run time do not allow it (an integer dtype, an operand that broadcasts), the op runs
  out of place, with the same result.

A convolution whose weight is a constant of the plan runs on a copy of that weight that oneDNN
reordered once, at load time, into the blocked layout its kernels read (`packed_conv`): torch's
`conv2d` reorders a plain weight on every call, which cost 30-40% of a 3x3 convolution on 512
channels (and about a fifth of ResNet-50's CPU time). Anything the packed kernel does not cover (not
float32, not 2-d, a CUDA tensor, torch without oneDNN) keeps the reference convolution; a small 1x1
convolution runs as a BLAS product instead (`_product_is_cheaper`). And an `add`, a unary op of
`EPILOGUE_UNARY` (relu, clip, sigmoid, tanh, hard_swish, hard_sigmoid) or an `add` then one of those,
that the planner put in place on a convolution's result, merges into the convolution
(`fuse_epilogues`): oneDNN applies them while it writes the result (after an add, relu only; any
other unary op then runs in place on the result).

On cuda the same merged convolution runs either as one cuDNN call where torch has the fused one
(`fused_conv`): `relu(conv + bias)` as `torch.cudnn_convolution_relu`, `relu(conv + bias + other)` as
`torch.cudnn_convolution_add_relu`, f16 and f32; or split, as the plain cuDNN convolution with its
epilogue applied in place after it. Neither wins everywhere (on an H200 the fused call of one
ResNet-50 layer took 2.3x the plain convolution's time alone), so with `SDC_CUDNN_CHOICE=1` the first
call of each convolution shape times both and keeps the faster (`CudnnChoice`), a choice cached on
disk beside the Triton autotuning results. In the whole of ResNet-50 the fused call won for every
convolution, so the timing is off by default.

The planner reads `IN_PLACE_OPS` and `FRESH_RESULT` to decide; the executor calls `reference_kernel`.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

import torch
import torch.nn.functional as F

from sdc.runtime import c_conv
from sdc.runtime.format import C_CONV, EPILOGUE, EPILOGUE_ATTRS, ONEDNN
from sdc.runtime.launch.c import c_kernels_enabled
from sdc.runtime.gate import small_conv
from sdc.runtime.kept import kept

Kernel = Callable[..., Any]

def _hard_sigmoid_(x: torch.Tensor, a: dict) -> torch.Tensor:
    if _torch_hard_sigmoid(a):
        return F.hardsigmoid(x, inplace=True)
    return x.mul_(a["alpha"]).add_(a["beta"]).clamp_(0, 1)


def _torch_hard_sigmoid(a: dict) -> bool:
    """Whether a hard_sigmoid's constants are torch's (and oneDNN's): x / 6 + 1/2."""
    return math.isclose(a["alpha"], 1 / 6, rel_tol=1e-6) and a["beta"] == 0.5


# Float unary ops in place on their operand, with their decoded attributes.
_UNARY_IN_PLACE: dict[str, Callable[[torch.Tensor, dict], torch.Tensor]] = {
    "relu": lambda x, a: x.relu_(), "sigmoid": lambda x, a: x.sigmoid_(), "tanh": lambda x, a: x.tanh_(),
    "neg": lambda x, a: x.neg_(), "exp": lambda x, a: x.exp_(), "abs": lambda x, a: x.abs_(),
    "clip": lambda x, a: x.clamp_(a["min"], a["max"]), "hard_swish": lambda x, a: F.hardswish(x, inplace=True),
    "hard_sigmoid": _hard_sigmoid_,
}
_BINARY_IN_PLACE = {"add": "add_", "sub": "sub_", "mul": "mul_", "div": "div_"}

# Ops that can write their result into an operand, and which operands: a commutative op either one.
IN_PLACE_OPS: dict[str, tuple[int, ...]] = {
    **{name: (0,) for name in _UNARY_IN_PLACE},
    "add": (0, 1), "mul": (0, 1), "sub": (0,), "div": (0,),
}

# Ops whose result never shares memory with an operand (so a later op may write into it), and the
# in-place-capable ops themselves (out of place they allocate; in place they write into such memory).
FRESH_RESULT = frozenset({"conv", "conv_weight_grad", "layout_cast", "matmul", "batch_norm", "max_pool", "avg_pool",
                          "global_avg_pool", "global_max_pool", "softmax", "log_softmax", "layer_norm", "rms_norm",
                          "concat", *IN_PLACE_OPS})


def reference_kernel(name: str, ref: Kernel, in_place: int | None = None,
                     constants: tuple[torch.Tensor | None, ...] = (), attrs: dict | None = None,
                     input_shape: tuple[int | None, ...] | None = None, kernel: str | None = None,
                     fell_back: Callable[[str], None] | None = None) -> Kernel:
    """The kernel that runs op `name` (reference semantics `ref`), writing into operand `in_place` if set.

    `constants` holds, per operand, the tensor it is bound to at load time (a weight of the plan) or
    None; with the op's decoded `attrs` and its first operand's `input_shape` (None for a symbolic
    dim), a kernel can prepare work that depends only on those once, instead of on every call.
    `kernel`: the planner's choice for the op (sdc/runtime/kernel_choice.py): sdc's C kernel library
    (`c_conv`) and oneDNN only where it says so (None: wherever they apply). `fell_back(kernel)` is
    called on each call that runs the planned fallback instead (sdc/runtime/counters.py)."""
    in_c = kernel in (None, C_CONV)
    if name == "layout_cast":
        return layout_cast_kernel(in_c, fell_back)
    if in_c and in_place is None and attrs is not None and name in ("max_pool", "avg_pool", "lrn", "resize"):
        # a channels-last float32 CPU operand: C, else `ref`
        counted = c_conv.counting(ref, fell_back)
        made = {"lrn": c_conv.lrn_kernel, "resize": c_conv.resize_kernel}.get(name)
        return made(counted, attrs) if made is not None else c_conv.pool_kernel(name, counted, attrs)
    if in_c and name == "global_avg_pool" and in_place is None:
        return c_conv.global_avg_pool_kernel(c_conv.counting(ref, fell_back))  # likewise
    if name == "conv" and in_place is None and attrs is not None:
        weight = constants[1] if len(constants) > 1 else None
        packed = None
        if weight is not None and kernel in (None, C_CONV, ONEDNN):
            packed = packed_conv(ref, attrs, weight, input_shape, own_kernel=in_c, fell_back=fell_back)
        if packed is not None:
            return packed
        if attrs.get(EPILOGUE):
            return fused_conv(ref, attrs)
    if in_place is None:
        return ref
    if name not in IN_PLACE_OPS or in_place not in IN_PLACE_OPS[name]:
        raise ValueError(f"'{name}' cannot run in place on operand {in_place}")
    if name in _BINARY_IN_PLACE:
        return _binary(_BINARY_IN_PLACE[name], ref, swapped=in_place == 1)
    return _unary(name, ref)


def built_kernel(kernel: Kernel) -> str | None:
    """What a kernel `reference_kernel` made runs (sdc/runtime/kernel_choice.py's names), where it is
    one of sdc's C kernel library or oneDNN; None for the others."""
    return getattr(kernel, "sdc_kernel", None)


def layout_cast_kernel(in_c: bool = True, fell_back: Callable[[str], None] | None = None) -> Kernel:
    """`layout_cast` that makes an image channels-last in C (`c_conv.channels_last_kernel`) where it can
    (with `in_c`: the plan chose sdc's C kernel for it)."""
    if not in_c:
        return layout_cast
    to_channels_last = c_conv.channels_last_kernel()
    fallback = c_conv.counting(layout_cast, fell_back)

    def run(env, a: dict, x: torch.Tensor) -> torch.Tensor:
        if list(a["layout"]) == [0, 2, 3, 1]:  # an image's channels-last copy: its channels interleaved in C
            lying = to_channels_last(x)
            if lying is not None:
                return lying
        return fallback(env, a, x)

    if c_kernels_enabled():
        run.sdc_kernel = C_CONV
    return run


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
    in_place = _UNARY_IN_PLACE[name]

    def run(env, a, x):
        if not x.is_floating_point():
            return fallback(env, a, x)
        return in_place(x, a)

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


PACK_MAX_DIM = 2**31 - 1


def packed_conv(ref: Kernel, attrs: dict, weight: torch.Tensor,
                input_shape: tuple[int | None, ...] | None, own_kernel: bool = True,
                fell_back: Callable[[str], None] | None = None) -> Kernel | None:
    """A 2-d float32 CPU convolution: sdc's C kernel (`c_conv`) where it takes a call, else oneDNN's on
    `weight` reordered once (below), or a small product; None where it does not apply.

    oneDNN picks the weight's blocked format for one input shape, mostly by its channels and the
    kernel: a symbolic batch is taken as 1 here, a symbolic image size as `GUESSED_IMAGE_SIZE`, and
    symbolic channels keep the reference convolution. Where a call's shape wants another format,
    oneDNN reorders the packed weight itself for that call (what the reference convolution does on
    every call), so results stay right and only that call pays. Measured: the segmentation model of
    the bench (symbolic image size, run at 96x64) 7% faster packed with the guess than unpacked.
    `attrs[EPILOGUE]` (see `fuse_epilogues`) names the ops oneDNN applies to the result in the same pass.
    `own_kernel`: the planner chose sdc's C kernel where it takes the convolution (else oneDNN alone);
    `fell_back(kernel)` counts the calls that run oneDNN instead of it, or the reference instead of
    oneDNN (sdc/runtime/counters.py). The kernel's `sdc_kernel` says which it prepared."""
    if (weight.dim() != 4 or weight.dtype != torch.float32 or weight.device.type != "cpu"
            or not torch.backends.mkldnn.is_available()):
        return None
    n = 2
    strides = list(attrs["strides"] or [1] * n)
    dilations = list(attrs["dilations"] or [1] * n)
    pads = list(attrs["pads"] or [0] * (2 * n))
    groups = int(attrs["groups"])
    symmetric = pads[:n] == pads[n:]
    padding = pads[:n] if symmetric else [0] * n
    if input_shape is None or len(input_shape) != 4 or input_shape[1] is None:
        return None
    shape = [1 if input_shape[0] is None else int(input_shape[0]), int(input_shape[1]),
             *(GUESSED_IMAGE_SIZE if d is None else int(d) for d in input_shape[2:])]
    if not symmetric:  # the kernel pads explicitly first, so oneDNN sees the padded input
        shape = [shape[0], shape[1], *(shape[2 + i] + pads[i] + pads[n + i] for i in range(n))]
    if any(d > PACK_MAX_DIM for d in shape):  # oneDNN's descriptors hold int32 dims: a declared 2^32 fails
        return None

    def pack(shape: list[int], pack_threads: int) -> torch.Tensor | None:
        """The weight reordered for oneDNN calls on inputs of `shape` on `pack_threads` threads, or None
        where oneDNN cannot describe the shape (the reference convolution then says what is wrong)."""
        threads = torch.get_num_threads()
        try:
            if pack_threads != threads:
                torch.set_num_threads(pack_threads)
            with torch.inference_mode():
                return torch._C._nn.mkldnn_reorder_conv2d_weight(weight.contiguous().to_mkldnn(), padding, strides,
                                                                 dilations, groups, shape)
        except RuntimeError:
            return None
        finally:
            if pack_threads != threads:
                torch.set_num_threads(threads)

    # grouped, depthwise, 1x1...: sdc's C kernels
    own = c_conv.prepare(weight, attrs, *_epilogue_unary(attrs)) if own_kernel else None
    # Where sdc's C kernel takes the convolution, oneDNN runs only calls on other inputs (not channels-last
    # float32: few or none), so its weight is packed at the first such call, for that call's shape and
    # the thread count the gate gave it (not a second copy of every weight held for nothing: VGG-19's
    # 548 MB). Otherwise now, for the thread count the executor's gate will run it with (sdc.runtime.gate
    # says why).
    packed_once: list = []
    if own is None:
        packed_once.append(pack(shape, 1 if small_conv(shape, weight.shape, strides) else torch.get_num_threads()))
        if packed_once[0] is None:
            return None

    def packed_for(x: torch.Tensor) -> torch.Tensor | None:
        if not packed_once:
            packed_once.append(pack(list(x.shape), torch.get_num_threads()))
        return packed_once[0]

    adds, finish = _epilogue(attrs)
    post_op, post_scalars = _onednn_post_op(attrs)
    convolution = torch.ops.mkldnn._convolution_pointwise
    fallback = c_conv.counting(_with_epilogue(ref, attrs) if attrs.get(EPILOGUE) else ref, fell_back)
    to_onednn = fell_back if own is not None else None  # counts the calls sdc's C kernel does not take

    kernel = [int(k) for k in weight.shape[2:]]
    # A 1x1 convolution is a matrix product over the pixels; a small one runs as one BLAS call (on a view
    # of the plain weight: no copy), which skips oneDNN's fixed cost per call (`_product_is_cheaper`).
    # So is one whose windows tile the image (kernel = strides, no pads: a ViT's patch embedding), over
    # the image cut into patches (`_patch_matmul`).
    tiles = kernel == strides and pads == [0] * 4 and dilations == [1, 1] and groups == 1
    pointwise = tiles and kernel == [1, 1]
    matrix = weight.detach().reshape(weight.shape[0], -1).t() if tiles else None

    def cheap_at(shape: torch.Size) -> bool:
        """Whether a call on an input of `shape` is a small product (`_product_is_cheaper`)."""
        return matrix is not None and len(shape) == 4 and _product_is_cheaper(
            shape[0] * (shape[2] // kernel[0]) * (shape[3] // kernel[1]), matrix.numel())

    cheap_shapes: dict = {}  # cheap_at per input shape

    def run(env, a, x, w, *rest):
        bias, other = _split_operands(rest, adds)
        # (the C kernel checks the call: None where it does not run there)
        if own is not None:
            out = own(x, bias, other)
            if out is not None:
                return out if own.applies_unary else finish(out)
        cheap = kept(cheap_shapes, x.shape, cheap_at, x.shape)
        if not _plain_f32(x) or (bias is not None and bias.dtype != torch.float32) or (adds and not _plain_f32(other)):
            return fallback(env, a, x, w, *rest)
        if to_onednn is not None:
            to_onednn(ONEDNN)
        if cheap:
            out = _pointwise_matmul(x, matrix, bias) if pointwise else _patch_matmul(x, matrix, kernel, bias)
            if adds:
                out = out.add_(other) if other.shape == out.shape else out + other
            return finish(out)
        given = x
        if not symmetric:
            x = F.pad(x, [pads[1], pads[3], pads[0], pads[2]])
        packed = packed_for(x)
        if packed is None:
            return fallback(env, a, given, w, *rest)
        if adds and tuple(other.shape) == (x.shape[0], weight.shape[0], *(
                (x.shape[2 + i] + 2 * padding[i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
                for i in range(n))):  # oneDNN's binary post-op wants the result's shape: no broadcast
            # after its binary add oneDNN applies relu only ("Unary Fusion behavior undefined" otherwise)
            relu = post_op == "relu"
            out = convolution(x, other, packed, bias, padding, strides, dilations, groups, "add", 1.0,
                              "relu" if relu else None, [], "")
            return out if relu else finish(out)
        if not adds:
            if post_op is not None:
                return convolution(x, packed, bias, padding, strides, dilations, groups, post_op, post_scalars, "")
            return finish(convolution(x, packed, bias, padding, strides, dilations, groups, "none", [], ""))
        out = convolution(x, packed, bias, padding, strides, dilations, groups, "none", [], "") + other
        return finish(out)

    run.sdc_kernel = C_CONV if own is not None else ONEDNN
    return run


# The height and width a convolution's weight is packed for where the IR leaves them symbolic.
GUESSED_IMAGE_SIZE = 64

# A 1x1 convolution over at most this many pixels (batch x height x width), or of at most this many
# multiply-adds, runs as a matrix product, not through oneDNN, whose call costs some 40 us more (1
# thread, on this project's Xeon): a squeeze-excite convolution on one pixel 70 us in oneDNN, 25 us as
# a product; 48 pixels x 160 x 960 channels 141 and 131 us; at 49 x 512 x 2048 (51M) oneDNN is faster.
# Whole models, same process, alternating calls: LRASPP-MobileNet-v3 (the bench's segmentation model)
# -23% CPU time; Inception-v2, ResNet-50, SqueezeNet, DenseNet-121 unchanged within 2% (8M instead of
# 4M cost Inception-v2 3%).
POINTWISE_MATMUL_MACS = 4_000_000
POINTWISE_MATMUL_PIXELS = 64


def _product_is_cheaper(pixels: int, weights: int) -> bool:
    """Whether a 1x1 convolution over `pixels` (batch x height x width) with `weights` (in x out
    channels) runs faster as a matrix product than through oneDNN (see POINTWISE_MATMUL_MACS)."""
    return pixels <= POINTWISE_MATMUL_PIXELS or pixels * weights <= POINTWISE_MATMUL_MACS


def _pointwise_matmul(x: torch.Tensor, matrix: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """A 1x1 convolution of `x` [N, C, H, W] with `matrix` [C, O] (the weight, transposed) plus `bias`,
    in `x`'s memory order: channels-last in and out as one product over the pixels, otherwise per image."""
    n, c, h, w = x.shape
    o = matrix.shape[1]
    if x.is_contiguous(memory_format=torch.channels_last):
        rows = x.permute(0, 2, 3, 1).reshape(n * h * w, c)
        flat = torch.addmm(bias, rows, matrix) if bias is not None else torch.mm(rows, matrix)
        return flat.view(n, h, w, o).permute(0, 3, 1, 2)
    out = torch.matmul(matrix.t(), x.reshape(n, c, h * w))
    if bias is not None:
        out = out.add_(bias.view(o, 1))
    return out.view(n, o, h, w)

def _patch_matmul(x: torch.Tensor, matrix: torch.Tensor, kernel: list[int], bias: torch.Tensor | None) -> torch.Tensor:
    """A convolution whose windows tile `x` [N, C, H, W] (strides = `kernel`, no pads; rows and columns
    past the last whole window are not read) with `matrix` [C*KH*KW, O] (the weight, flattened and
    transposed) plus `bias`: the patches as rows of one product. The result is in `x`'s memory order."""
    n, c = x.shape[0], x.shape[1]
    (kh, kw), (h, w) = kernel, (x.shape[2] // kernel[0], x.shape[3] // kernel[1])
    o = matrix.shape[1]
    patches = (x[:, :, :h * kh, :w * kw].reshape(n, c, h, kh, w, kw).permute(0, 2, 4, 1, 3, 5)
               .reshape(n * h * w, c * kh * kw))
    flat = torch.addmm(bias, patches, matrix) if bias is not None else torch.mm(patches, matrix)
    out = flat.view(n, h, w, o).permute(0, 3, 1, 2)
    return out if x.is_contiguous(memory_format=torch.channels_last) else out.contiguous()


# `fuse_epilogues` adds EPILOGUE and EPILOGUE_ATTRS (sdc.runtime.format) to a convolution: the ops after
# it that its kernel applies (an `add`, then one unary op, each optional), and that unary op's
# attributes as [name, value] pairs.

# The unary ops a convolution's kernel applies as it writes its result: oneDNN's post-op for each
# (`_onednn_post_op`), in place after the convolution where it has none for the op's attributes.
EPILOGUE_UNARY = ("relu", "clip", "sigmoid", "tanh", "hard_swish", "hard_sigmoid")


def fuse_epilogues(ops: tuple[Any, ...]) -> list[Any]:
    """A kernel group's ops (plan_schema.OpEntry) with each convolution that is followed by `add`,
    one op of `EPILOGUE_UNARY`, or `add` then one of those, written into its own result, merged with
    them into one convolution entry, whose kernel (oneDNN's post-ops, `packed_conv`) applies them as
    it writes the result: MobileNet-v3's hard_swish and hard_sigmoid, a relu6 as `clip`.

    Only where the planner marked the followers in place on the convolution's result: then nothing
    else reads the intermediate values, so no slot misses them. The merged entry takes the last
    follower's outputs, and the add's other operand as its last input."""
    from dataclasses import replace

    out: list[Any] = []
    i = 0
    while i < len(ops):
        entry = ops[i]
        i += 1
        if entry.op != "conv" or entry.in_place is not None or len(entry.outputs) != 1 or EPILOGUE in entry.attrs:
            out.append(entry)
            continue
        value, names, extra, last, unary_attrs = entry.outputs[0], [], [], entry, None
        while i < len(ops) and unary_attrs is None:
            follower = ops[i]
            if len(follower.outputs) != 1 or follower.in_place is None:
                break
            if follower.op in EPILOGUE_UNARY and follower.in_place == 0 and follower.inputs == (value,):
                names.append(follower.op)
                unary_attrs = [[k, v] for k, v in sorted(follower.attrs.items())]
            elif (follower.op == "add" and not names and len(follower.inputs) == 2
                  and follower.inputs[follower.in_place] == value and follower.inputs[1 - follower.in_place] != value):
                names.append("add")
                extra.append(follower.inputs[1 - follower.in_place])
            else:
                break
            value, last = follower.outputs[0], follower
            i += 1
        if not names:
            out.append(entry)
            continue
        merged = {**entry.attrs, EPILOGUE: names, **({EPILOGUE_ATTRS: unary_attrs} if unary_attrs else {})}
        out.append(replace(entry, attrs=merged, inputs=(*entry.inputs, *extra), outputs=last.outputs))
    return out


def _epilogue_unary(attrs: dict) -> tuple[str | None, dict]:
    """A merged convolution's unary op (None without one) and its decoded attributes, defaults filled."""
    names = [n for n in attrs.get(EPILOGUE, ()) if n != "add"]
    if not names:
        return None, {}
    from sdc.dialect.opdef import get_op

    return names[0], get_op(names[0]).with_defaults(dict(attrs.get(EPILOGUE_ATTRS) or []))


def _epilogue(attrs: dict) -> tuple[bool, Callable[[torch.Tensor], torch.Tensor]]:
    """Whether a merged convolution adds an operand, and what applies its unary op in place on a
    float result it owns (the identity without one)."""
    name, unary_attrs = _epilogue_unary(attrs)
    adds = "add" in attrs.get(EPILOGUE, ())
    if name is None:
        return adds, lambda y: y
    in_place = _UNARY_IN_PLACE[name]
    return adds, lambda y: in_place(y, unary_attrs)


def _onednn_post_op(attrs: dict) -> tuple[str | None, list[float]]:
    """oneDNN's eltwise post-op (its name in `mkldnn._convolution_pointwise`, and its scalars) for a
    merged convolution's unary op, or (None, []) where it has none: no unary op, a hard_sigmoid of
    other constants than torch's, a clip with an infinite bound other than relu's."""
    name, a = _epilogue_unary(attrs)
    if name in ("relu", "sigmoid", "tanh"):
        return name, []
    if name == "hard_swish":
        return "hardswish", []
    if name == "hard_sigmoid" and _torch_hard_sigmoid(a):
        return "hardsigmoid", []
    if name == "clip" and a["min"] == 0 and a["max"] == math.inf:
        return "relu", []
    if name == "clip" and math.isfinite(a["min"]) and math.isfinite(a["max"]):
        return "hardtanh", [float(a["min"]), float(a["max"])]
    return None, []


def _split_operands(rest: tuple, adds: bool) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """A merged convolution's operands after input and weight: (bias or None, the add's other or None)."""
    if adds:
        return (rest[0] if len(rest) > 1 else None), rest[-1]
    return (rest[0] if rest else None), None


def _plain_f32(t: torch.Tensor) -> bool:
    return t.dim() == 4 and t.dtype == torch.float32 and t.device.type == "cpu"


def _with_epilogue(ref: Kernel, attrs: dict) -> Kernel:
    """The reference convolution, then the merged ops' own reference semantics, one after the other."""
    from sdc.dialect.opdef import get_op

    add = get_op("add").ref
    adds = "add" in attrs[EPILOGUE]
    name, unary_attrs = _epilogue_unary(attrs)
    unary = get_op(name).ref if name is not None else None

    def run(env, a, x, w, *rest):
        bias, other = _split_operands(rest, adds)
        y = ref(env, a, x, w, bias)
        if adds:
            y = add(env, {}, y, other)
        return unary(env, unary_attrs, y) if unary is not None else y

    return run


# ---------------------------------------------------------------- cuda: one fused cuDNN call

# A merged convolution's epilogue -> torch's cuDNN function that computes conv, bias and it in one call.
CUDNN_FUSED = {("relu",): "cudnn_convolution_relu", ("add", "relu"): "cudnn_convolution_add_relu"}
# The dtypes torch's fused cuDNN calls take (its cudnn_convolution_relu / _add_relu, torch 2.11-2.13).
CUDNN_FUSED_DTYPES = frozenset({"f16", "f32"})


def cudnn_fused_call(epilogue: list[str] | tuple[str, ...], dtype: str) -> str | None:
    """The name of torch's fused cuDNN function for a convolution of `dtype` with `epilogue` merged
    into it (see `fuse_epilogues`), or None where there is none: the convolution then runs in cuDNN
    and its epilogue as torch calls after it. `sdc inspect` names the groups this returns a call for."""
    if dtype not in CUDNN_FUSED_DTYPES:
        return None
    return CUDNN_FUSED.get(tuple(epilogue))


def _cudnn_applies(x: torch.Tensor) -> bool:
    """Whether a call on `x` can go to cuDNN (a CUDA tensor, with cuDNN enabled in this torch)."""
    return x.is_cuda and torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled


def fused_conv(ref: Kernel, attrs: dict) -> Kernel:
    """A merged convolution (conv + `attrs[EPILOGUE]`) that is not a packed CPU one: on cuda one fused
    cuDNN call where torch has it for the tensors of the call (`cudnn_fused_call`: the dtype, a 2-d
    convolution, an `add` operand of the result's shape and dtype); everywhere else the reference
    convolution, then the epilogue written into its result in place (the convolution's result is
    fresh memory nothing else reads). A fused call that cuDNN refuses (a configuration its fused
    engine lacks) is not tried again by this kernel."""
    epilogue = list(attrs[EPILOGUE])
    adds, finish = _epilogue(attrs)
    fallback = _with_epilogue(ref, attrs)
    refused: list[str] = []
    choice = CudnnChoice()

    def split(env, a, x, w, bias, other, rest):
        y = ref(env, a, x, w, bias)
        if adds:
            if other.shape != y.shape or other.dtype != y.dtype:
                return fallback(env, a, x, w, *rest)
            y = y.add_(other)
        return finish(y)

    def run(env, a, x, w, *rest):
        bias, other = _split_operands(rest, adds)
        name = cudnn_fused_call(epilogue, _DTYPE_NAMES.get(x.dtype, ""))
        if name is not None and not refused and _cudnn_applies(x):
            args = _cudnn_arguments(a, x, w, bias, other)
            if args is not None:
                fused = getattr(torch, name)
                try:
                    if choice.fused(a, x, w, other, lambda: fused(*args),
                                    lambda: split(env, a, x, w, bias, other, rest)):
                        return fused(*args)
                except RuntimeError as e:  # cuDNN has no fused engine for this configuration
                    refused.append(str(e))
        return split(env, a, x, w, bias, other, rest)

    run.cudnn_refused = refused  # what cuDNN said when it refused the fused call, for benchmarks and debugging
    run.cudnn_choice = choice
    return run


# "1": time the fused cuDNN call against the plain convolution per signature (`CudnnChoice`). Off by
# default: on the H200 the fused call won for all 46 of ResNet-50's merged convolutions (2026-12-02),
# and the timing cost 1.3 s of its first call.
CUDNN_CHOICE_ENV = "SDC_CUDNN_CHOICE"


class CudnnChoice:
    """Per convolution signature (operand shapes, strides and dtype, the attributes), whether the
    fused cuDNN call is faster than the plain convolution with its epilogue after it: timed once
    (CUDA events, `launch.triton.measure`) at the first call of a signature outside a CUDA-graph
    capture, then remembered here and on disk (`launch.base.Autotuner`, keyed by cuDNN's version
    and the device), when `SDC_CUDNN_CHOICE=1`; otherwise, or with `SDC_AUTOTUNE=0`, the fused call. During a capture
    a signature not yet timed takes the fused call."""

    FUSED, SPLIT = "fused", "split"

    def __init__(self):
        self.chosen: dict[tuple, bool] = {}
        self.timed = 0  # signatures this object timed (tests and reports read it)

    def fused(self, a: dict, x: torch.Tensor, w: torch.Tensor, other: torch.Tensor | None,
              run_fused: Callable[[], Any], run_split: Callable[[], Any]) -> bool:
        key = (tuple(x.shape), x.stride(), tuple(w.shape), w.stride(), x.dtype, other is not None,
               None if other is None else other.stride(),
               *(tuple(a.get(k) or ()) for k in ("strides", "pads", "dilations")), int(a.get("groups", 1)))
        known = self.chosen.get(key)
        if known is not None:
            return known
        from sdc.runtime.launch import triton as T

        if os.environ.get(CUDNN_CHOICE_ENV, "").strip() != "1":
            return True
        if (x.is_cuda and torch.cuda.is_current_stream_capturing()) or not T.tuning_enabled(x.device):
            return True
        configs = [T.LaunchConfig({"cudnn": v}, 0, ()) for v in (self.FUSED, self.SPLIT)]
        runs = {self.FUSED: run_fused, self.SPLIT: run_split}
        tuner = T.Autotuner(f"cudnn-conv-{torch.backends.cudnn.version()}", T.device_name(x.device))
        before = tuner.tunes
        best = tuner.choose(repr(key), configs, lambda c: T.measure(runs[c.constexprs["cudnn"]], x.device))
        self.timed += tuner.tunes > before
        self.chosen[key] = best.constexprs["cudnn"] == self.FUSED
        return self.chosen[key]


_DTYPE_NAMES = {torch.float16: "f16", torch.float32: "f32", torch.bfloat16: "bf16"}


def _cudnn_arguments(a: dict, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
                     other: torch.Tensor | None) -> tuple | None:
    """The positional arguments of `torch.cudnn_convolution_relu` (other None) or `_add_relu` for
    this call, or None where they cannot express it (not 2-d, mixed dtypes, asymmetric pads, an
    `add` operand that broadcasts)."""
    if x.dim() != 4 or w.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        return None
    strides = list(a["strides"] or [1, 1])
    dilations = list(a["dilations"] or [1, 1])
    pads = list(a["pads"] or [0] * 4)
    if pads[:2] != pads[2:]:
        return None
    groups = int(a["groups"])
    if bias is not None:
        bias = bias.reshape(-1)
    if other is None:
        return x, w, bias, strides, pads[:2], dilations, groups
    out = [x.shape[0], w.shape[0], *((x.shape[2 + i] + 2 * pads[i] - dilations[i] * (w.shape[2 + i] - 1) - 1)
                                      // strides[i] + 1 for i in range(2))]
    if list(other.shape) != out or other.dtype != x.dtype:
        return None
    return x, w, other, 1.0, bias, strides, pads[:2], dilations, groups
