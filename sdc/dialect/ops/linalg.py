"""Contractions and windows: matmul, convolution, pooling."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sdc.dialect import derivatives
from sdc.dialect.hooks import (FusionClass, OpKind, Precision, ShardingRule, conv_cost, conv_weight_grad_cost,
                               per_operand_element)
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.ops.elementwise import NUMERIC, FLOAT, check_dtype
from sdc.dialect.shapes import ShapeContext, TensorSpec, is_static, window_out  # noqa: F401 (window_out: public here too)
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
    import torch.nn.functional as F
else:
    torch = lazy_import("torch")
    F = lazy_import("torch.nn.functional")

# ---------------------------------------------------------------- matmul


def _matmul_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    lhs, rhs = ins
    if lhs.dtype != rhs.dtype:
        ctx.fail(f"operand element types differ: lhs is {lhs.dtype}, rhs is {rhs.dtype}")
    check_dtype(ctx, NUMERIC, lhs, "operands")
    if lhs.rank == 0 or rhs.rank == 0:
        ctx.fail(f"operands must have rank >= 1, found lhs rank {lhs.rank}, rhs rank {rhs.rank}")
    a, b = list(lhs.shape), list(rhs.shape)
    if len(a) >= 2 and attrs["transpose_lhs"]:
        a[-1], a[-2] = a[-2], a[-1]
    if len(b) >= 2 and attrs["transpose_rhs"]:
        b[-1], b[-2] = b[-2], b[-1]
    k_lhs = a[-1]
    k_rhs = b[0] if len(b) == 1 else b[-2]
    ctx.equal(k_lhs, k_rhs, "contracting dims differ: lhs has {a}, rhs has {b}")
    batch = ctx.broadcast(a[:-2], b[:-2], names=("lhs batch", "rhs batch"))
    out = list(batch)
    if len(a) >= 2:
        out.append(a[-2])
    if len(b) >= 2:
        out.append(b[-1])
    return [TensorSpec(tuple(out), lhs.dtype)]


def _matmul_ref(env, a, x, y):
    if x.dim() >= 2 and a["transpose_lhs"]:
        x = x.transpose(-1, -2)
    if y.dim() >= 2 and a["transpose_rhs"]:
        y = y.transpose(-1, -2)
    return torch.matmul(x, y)


register(OpDef(
    name="matmul", kind=OpKind.CONTRACTION, vjp=derivatives.matmul_vjp,
    sharding=ShardingRule("contraction"),
    summary="matrix product with batch broadcasting and optional transposes",
    doc=("numpy `matmul`: contracts the last dim of `lhs` with the second-to-last of `rhs` (the only dim "
         "of a 1-D operand), broadcasting leading batch dims, so it is also the batch matmul. "
         "`transpose_lhs`/`transpose_rhs` swap an operand's last two dims first."),
    operands=("lhs", "rhs"),
    attrs={
        "transpose_lhs": attr("bool", False, "use lhs with its last two dims swapped"),
        "transpose_rhs": attr("bool", False, "use rhs with its last two dims swapped"),
    },
    shape=_matmul_rule, ref=_matmul_ref,
    example=('%2 = "sdc.matmul"(%0, %1) {transpose_rhs = true} : (tensor<?x16x64xf32>, tensor<32x64xf32>) '
             "-> tensor<?x16x32xf32>"),
))

# ---------------------------------------------------------------- windows


def _spatial_attr(ctx: ShapeContext, attrs: dict, key: str, n: int, default: int, factor: int = 1) -> list[int]:
    value = list(attrs.get(key) or [])
    if not value:
        return [default] * (n * factor)
    if len(value) != n * factor:
        ctx.fail(f"'{key}' has {len(value)} entries, expected {n * factor} for {n} spatial dims")
    return value


def window_attrs(ctx: ShapeContext, attrs: dict, n: int) -> tuple[list[int], list[int], list[int]]:
    """(strides, dilations, pads) of an n-d window op, defaults filled in, strides and dilations >= 1."""
    strides = _spatial_attr(ctx, attrs, "strides", n, 1)
    dilations = _spatial_attr(ctx, attrs, "dilations", n, 1)
    pads = _spatial_attr(ctx, attrs, "pads", n, 0, 2)
    if any(s < 1 for s in strides):
        ctx.fail(f"strides must be >= 1, found {strides}")
    if any(d < 1 for d in dilations):
        ctx.fail(f"dilations must be >= 1, found {dilations}")
    return strides, dilations, pads


def _window_dims(ctx: ShapeContext, x: TensorSpec, kernel, attrs, ceil_mode=False) -> list:
    n = len(kernel)
    strides, dilations, pads = window_attrs(ctx, attrs, n)
    if any(p < 0 for p in pads):
        ctx.fail(f"pads must be >= 0, found {pads}")
    out = []
    for i in range(n):
        k = kernel[i]
        size = x.shape[2 + i]
        o = ctx.window(size, k, strides[i], pads[i], pads[n + i], dilations[i], ceil_mode)
        if is_static(o) and is_static(k) and o < 1:
            ctx.fail(f"spatial dim {i} of size {size} is smaller than the (dilated) window {dilations[i] * (k - 1) + 1} "
                     f"with pads {pads[i]}+{pads[n + i]}")
        out.append(o)
    return out


def check_conv_operands(ctx: ShapeContext, x: TensorSpec, w: TensorSpec, groups: int, second: str = "weight"
                        ) -> None:
    """What every convolution (forward, transposed, or its weight gradient, whose second operand is
    the `grad`) requires of its input, second operand and groups."""
    if x.dtype != w.dtype:
        ctx.fail(f"operand element types differ: input is {x.dtype}, {second} is {w.dtype}")
    check_dtype(ctx, FLOAT, x, "operands")
    if x.rank < 3:
        ctx.fail(f"input must have rank >= 3 (N, C, spatial...), found rank {x.rank}")
    if w.rank != x.rank:
        ctx.fail(f"{second} rank must equal input rank {x.rank}, found {w.rank}")
    if groups < 1:
        ctx.fail(f"groups must be >= 1, found {groups}")


def _conv_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x, w = ins
    groups = attrs["groups"]
    check_conv_operands(ctx, x, w, groups)
    c_in, c_w = x.shape[1], w.shape[1]
    if is_static(c_in) and is_static(c_w) and c_in != c_w * groups:
        ctx.fail(f"input channels ({c_in}) must equal weight channels per group ({c_w}) times groups ({groups})")
    ctx.divisible(w.shape[0], groups, "output channels ({a}) must be divisible by groups ({b})")
    spatial = _window_dims(ctx, x, list(w.shape[2:]), attrs)
    return [TensorSpec((x.shape[0], w.shape[0], *spatial), x.dtype)]


def _explicit_pad(x: torch.Tensor, pads: list[int], n: int, value: float, extra_end=None) -> torch.Tensor:
    # F.pad takes (last-dim begin, last-dim end, second-to-last begin, ...).
    spec = []
    for i in reversed(range(n)):
        spec += [pads[i], pads[n + i] + (extra_end[i] if extra_end else 0)]
    if not any(spec):
        return x
    return F.pad(x, spec, value=value)


# Spatial rank -> the torch.nn.functional function, by name (F is imported lazily).
_CONV = {1: "conv1d", 2: "conv2d", 3: "conv3d"}
_MAXPOOL = {1: "max_pool1d", 2: "max_pool2d", 3: "max_pool3d"}
_AVGPOOL = {1: "avg_pool1d", 2: "avg_pool2d", 3: "avg_pool3d"}


def _conv_ref(env, a, x, w, bias=None):
    """`bias` (one value per output channel) is for the CPU runtime's fused conv + bias kernels."""
    n = x.dim() - 2
    if n not in _CONV:
        raise NotImplementedError(f"reference convolution supports 1-3 spatial dims, got {n}")
    strides = a["strides"] or [1] * n
    dilations = a["dilations"] or [1] * n
    pads = a["pads"] or [0] * (2 * n)
    if pads[:n] == pads[n:]:  # symmetric: the convolution pads for free
        return getattr(F, _CONV[n])(x, w, bias, strides, pads[:n], dilations, a["groups"])
    x = _explicit_pad(x, pads, n, 0.0)
    return getattr(F, _CONV[n])(x, w, bias, strides, 0, dilations, a["groups"])


_WINDOW_ATTRS = {
    "strides": attr("ints", [], "step per spatial dim (default 1)"),
    "pads": attr("ints", [], "padding: all begins, then all ends (default 0)"),
    "dilations": attr("ints", [], "kernel dilation per spatial dim (default 1)"),
}

register(OpDef(
    name="conv", kind=OpKind.CONVOLUTION, vjp=derivatives.conv_vjp,
    cost=conv_cost, sharding=ShardingRule("convolution"),
    summary="N-d convolution with groups, strides, dilations and asymmetric pads",
    doc=("Cross-correlation of `input` [N, C, D1..Dn] with `weight` [O, C/groups, K1..Kn] giving "
         "[N, O, E1..En], Ei = floor((Di + pad_begin_i + pad_end_i - dilation_i*(Ki-1) - 1)/stride_i) + 1. "
         "Bias is a separate `sdc.add` (fusion puts it back in the kernel)."),
    operands=("input", "weight"),
    attrs={**_WINDOW_ATTRS, "groups": attr("int", 1, "channel groups")},
    shape=_conv_rule, ref=_conv_ref,
    example=('%2 = "sdc.conv"(%0, %1) {dilations = array<i64>, groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, '
             'strides = array<i64: 2, 2>} : (tensor<?x3x224x224xf32>, tensor<64x3x3x3xf32>) -> tensor<?x64x112x112xf32>'),
))


def _conv_weight_grad_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x, g = ins
    groups = attrs["groups"]
    check_conv_operands(ctx, x, g, groups, "grad")
    kernel = list(attrs["kernel"])
    if len(kernel) != x.rank - 2:
        ctx.fail(f"'kernel' has {len(kernel)} entries, expected {x.rank - 2} for {x.rank - 2} spatial dims")
    if any(k < 1 for k in kernel):
        ctx.fail(f"kernel dims must be >= 1, found {kernel}")
    ctx.equal(x.shape[0], g.shape[0], "input batch ({a}) and grad batch ({b}) differ")
    per_group = ctx.exact_div(x.shape[1], groups, "input channels ({a}) must be divisible by groups ({b})")
    ctx.divisible(g.shape[1], groups, "grad channels ({a}) must be divisible by groups ({b})")
    spatial = _window_dims(ctx, x, kernel, attrs)
    for i, (have, want) in enumerate(zip(g.shape[2:], spatial)):
        ctx.equal(have, want, f"grad spatial dim {i} is {{a}}, but the convolution's result has {{b}}")
    return [TensorSpec((g.shape[1], per_group, *kernel), x.dtype)]


def _conv_weight_grad_ref(env, a, x, g):
    """One `convolution_backward` that computes the weight gradient only. It reads the weight's
    sizes, dtype and memory format, never its values, so an uninitialized tensor stands in (laid
    out like `x`: cuDNN and oneDNN pick their channels-last kernels from either operand)."""
    n = x.dim() - 2
    strides = a["strides"] or [1] * n
    dilations = a["dilations"] or [1] * n
    pads = a["pads"] or [0] * (2 * n)
    if pads[:n] != pads[n:]:  # asymmetric: pad explicitly, as the forward convolution does
        x = _explicit_pad(x, pads, n, 0.0)
        pads = [0] * (2 * n)
    groups = a["groups"]
    shape = (g.shape[1], x.shape[1] // groups, *a["kernel"])
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    if fmt is None or x.is_contiguous() or not x.is_contiguous(memory_format=fmt):
        fmt = torch.contiguous_format
    w = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=fmt)
    return torch.ops.aten.convolution_backward(g, x, w, None, strides, pads[:n], dilations, False, [0] * n, groups,
                                               [False, True, False])[1]


register(OpDef(
    name="conv_weight_grad", kind=OpKind.CONVOLUTION, vjp=derivatives.conv_weight_grad_vjp,
    cost=conv_weight_grad_cost, sharding=ShardingRule("convolution_weight_grad"),
    summary="the gradient of sdc.conv with respect to its weight",
    doc=("For `y = sdc.conv(input, w)` with `w` [O, C/groups, K1..Kn] and a cotangent `grad` of `y`'s shape "
         "[N, O, E1..En], the cotangent of `w`: dw[o, c, k] = sum over n, e of grad[n, o, e] * "
         "input[n, g*C/groups + c, e*stride + k*dilation - pad_begin] (g the group of o; positions in the "
         "pads read 0). `kernel` is K1..Kn; the attributes are the convolution's. A kernel of its own "
         "because, written as a convolution over the batch, it runs on cuDNN's slowest algorithms."),
    operands=("input", "grad"),
    attrs={**_WINDOW_ATTRS, "kernel": attr("ints", doc="the weight's spatial dims K1..Kn"),
           "groups": attr("int", 1, "channel groups")},
    shape=_conv_weight_grad_rule, ref=_conv_weight_grad_ref,
    example=('%2 = "sdc.conv_weight_grad"(%0, %1) {dilations = array<i64>, groups = 1 : i64, '
             'kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} '
             ": (tensor<8x3x224x224xf32>, tensor<8x64x112x112xf32>) -> tensor<64x3x3x3xf32>"),
))


def _pool_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, FLOAT if "count_include_pad" in attrs else NUMERIC, x, "operand")
    kernel = list(attrs["kernel"])
    if x.rank != len(kernel) + 2:
        ctx.fail(f"input rank {x.rank} does not match a {len(kernel)}-d kernel (expected rank {len(kernel) + 2})")
    if any(k < 1 for k in kernel):
        ctx.fail(f"kernel dims must be >= 1, found {kernel}")
    spatial = _window_dims(ctx, x, kernel, attrs, attrs["ceil_mode"])
    return [TensorSpec((x.shape[0], x.shape[1], *spatial), x.dtype)]


def _pool_geometry(a, x):
    n = x.dim() - 2
    kernel = list(a["kernel"])
    strides = a["strides"] or [1] * n
    dilations = a.get("dilations") or [1] * n
    pads = a["pads"] or [0] * (2 * n)
    extra = []
    for i in range(n):
        out = window_out(x.shape[2 + i], kernel[i], strides[i], pads[i], pads[n + i], dilations[i], a["ceil_mode"])
        needed = (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
        extra.append(max(0, needed - (x.shape[2 + i] + pads[i] + pads[n + i])))
    return n, kernel, strides, dilations, pads, extra


def _native_padding(n: int, kernel, pads) -> list[int] | None:
    """The padding to hand torch's own pooling, which pads implicitly (no padded copy of the input),
    or None where the window needs the explicit padding: pads differ at the two ends, or one is wider
    than torch takes (half the kernel). With equal pads torch's output size, ceil_mode included, is
    `window_out`'s, and a ceil_mode window that runs past the pad reads nothing there, as the explicit
    form's `extra` (-inf for max; for avg neither divisor counts those cells)."""
    begin, end = list(pads[:n]), list(pads[n:])
    if n not in _MAXPOOL or begin != end or any(2 * p > k for p, k in zip(begin, kernel)):
        return None
    return begin


def _max_pool_ref(env, a, x):
    if not x.is_floating_point():  # integer max pooling, exact in f64 for up to 53-bit values
        return _max_pool_ref(env, a, x.to(torch.float64)).to(x.dtype)
    n, kernel, strides, dilations, pads, extra = _pool_geometry(a, x)
    padding = _native_padding(n, kernel, pads)
    if padding is not None:  # torch pads with -inf itself
        return getattr(F, _MAXPOOL[n])(x, kernel, strides, padding, dilations, bool(a["ceil_mode"]))
    xp = _explicit_pad(x, pads, n, -math.inf, extra)
    return getattr(F, _MAXPOOL[n])(xp, kernel, strides, 0, dilations)


def _window_sum(x: torch.Tensor, kernel, strides, dilations) -> torch.Tensor:
    """Sum over dilated windows of the (already padded) spatial dims, for any number of them."""
    n = len(kernel)
    for i in range(n):
        span = dilations[i] * (kernel[i] - 1) + 1
        x = x.unfold(2 + i, span, strides[i])  # appends the window as a trailing dim
    taps = tuple(slice(None, None, d) for d in dilations)
    return x[(Ellipsis, *taps)].sum(dim=tuple(range(-n, 0)))


def _avg_pool_ref(env, a, x):
    n, kernel, strides, dilations, pads, extra = _pool_geometry(a, x)
    padding = _native_padding(n, kernel, pads)
    if padding is not None and all(d == 1 for d in dilations):
        # one pooling call, whose divisor (the window within the pads, or its cells in the input) is
        # the op's; the explicit form below pads a copy and pools a mask too
        return getattr(F, _AVGPOOL[n])(x, kernel, strides, padding, bool(a["ceil_mode"]),
                                       bool(a["count_include_pad"]))
    xp = _explicit_pad(x, pads, n, 0.0, extra)
    ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    if a["count_include_pad"]:
        mask = _explicit_pad(ones, pads, n, 1.0)
        mask = _explicit_pad(mask, [0] * n + [0] * n, n, 0.0, extra)
    else:
        mask = _explicit_pad(ones, pads, n, 0.0, extra)
    if any(d != 1 for d in dilations) or n not in _AVGPOOL:
        return _window_sum(xp, kernel, strides, dilations) / _window_sum(mask, kernel, strides, dilations)
    total = getattr(F, _AVGPOOL[n])(xp, kernel, strides, 0)
    count = getattr(F, _AVGPOOL[n])(mask, kernel, strides, 0)
    return total / count


_POOL_ATTRS = {
    "kernel": attr("ints", doc="window size per spatial dim"),
    "strides": _WINDOW_ATTRS["strides"],
    "pads": _WINDOW_ATTRS["pads"],
    "ceil_mode": attr("bool", False, "round the output size up (windows starting in the padded input only)"),
}

register(OpDef(
    name="max_pool", kind=OpKind.POOLING, vjp=derivatives.max_pool_vjp,
    sharding=ShardingRule("window"),
    summary="N-d max pooling",
    doc=("Maximum over each window of `input` [N, C, D1..Dn]; padding never wins (it is -inf). "
         "Output dims follow the convolution formula, rounded up with `ceil_mode`."),
    operands=("input",), attrs={**_POOL_ATTRS, "dilations": _WINDOW_ATTRS["dilations"]},
    shape=_pool_rule, ref=_max_pool_ref,
    example=('%1 = "sdc.max_pool"(%0) {ceil_mode = false, dilations = array<i64>, kernel = array<i64: 3, 3>, '
             'pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x64x112x112xf32>) -> tensor<?x64x56x56xf32>'),
))

register(OpDef(
    name="avg_pool", kind=OpKind.POOLING, vjp=derivatives.avg_pool_vjp,
    precision=Precision.KEEP, accumulates=True, sharding=ShardingRule("window", "unary"),
    summary="N-d average pooling",
    doc=("Mean over each window of `input` [N, C, D1..Dn]. With `count_include_pad` the explicit pads count "
         "in the divisor; the extra cells `ceil_mode` adds never do."),
    operands=("input",),
    attrs={**_POOL_ATTRS, "count_include_pad": attr("bool", False, "count explicit padding in the divisor"),
           "dilations": _WINDOW_ATTRS["dilations"]},
    shape=_pool_rule, ref=_avg_pool_ref,
    example=('%1 = "sdc.avg_pool"(%0) {ceil_mode = false, count_include_pad = false, kernel = array<i64: 2, 2>, '
             'pads = array<i64>, strides = array<i64: 2, 2>} : (tensor<?x64x56x56xf32>) -> tensor<?x64x28x28xf32>'),
))


def _global_pool_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, FLOAT, x, "operand")
    if x.rank < 3:
        ctx.fail(f"input must have rank >= 3 (N, C, spatial...), found rank {x.rank}")
    return [TensorSpec((x.shape[0], x.shape[1]) + (1,) * (x.rank - 2), x.dtype)]


for _name, _fn, _sem, _vjp in (
    ("global_avg_pool", lambda env, a, x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True), "mean",
     derivatives.global_avg_pool_vjp),
    ("global_max_pool", lambda env, a, x: x.amax(dim=tuple(range(2, x.dim())), keepdim=True), "maximum",
     derivatives.global_max_pool_vjp),
):
    register(OpDef(
        name=_name, kind=OpKind.POOLING, vjp=_vjp, fusion=FusionClass.REDUCTION, cost=per_operand_element(),
        **({"precision": Precision.KEEP, "accumulates": True, "sharding": ShardingRule("window", "unary")}
           if _name == "global_avg_pool" else {"sharding": ShardingRule("window")}),
        summary=f"{_sem} over all spatial dims",
        doc=f"The {_sem} of `input` [N, C, D1..Dn] over D1..Dn, giving [N, C, 1, .., 1].",
        operands=("input",), shape=_global_pool_rule, ref=_fn,
        example=f'%1 = "sdc.{_name}"(%0) : (tensor<?x2048x7x7xf32>) -> tensor<?x2048x1x1xf32>',
    ))
