"""sdc ops for ONNX nn coverage that do not decompose into the other families (see docs/dialect.md):
the linear-attention recurrence, transposed and deformable convolution."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdc.dialect import derivatives
from sdc.dialect.hooks import OpKind, Precision, ShardingRule
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.ops.elementwise import FLOAT, check_dtype
from sdc.dialect.ops.linalg import _WINDOW_ATTRS, _spatial_attr, _window_dims, check_conv_operands, window_attrs
from sdc.dialect.shapes import ShapeContext, TensorSpec, is_static
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
    import torch.nn.functional as F
else:
    torch = lazy_import("torch")
    F = lazy_import("torch.nn.functional")

# ---------------------------------------------------------------- linear attention


def _broadcastable(ctx: ShapeContext, spec: TensorSpec, target: tuple, what: str, names: tuple) -> None:
    if spec.rank != len(target):
        ctx.fail(f"{what} must have rank {len(target)} ({', '.join(names)}), found rank {spec.rank}")
    for i, (d, t) in enumerate(zip(spec.shape, target)):
        if is_static(d) and d != 1 and is_static(t) and d != t:
            ctx.fail(f"{what} dim {i} ({names[i]}) is {d}, expected 1 or {t}")


def _linear_attention_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    q, k, v, state, decay, beta = ins
    for name, spec in (("query", q), ("key", k), ("value", v), ("state", state), ("decay", decay), ("beta", beta)):
        check_dtype(ctx, FLOAT, spec, name)
        if spec.rank != 4:
            ctx.fail(f"{name} must have rank 4, found rank {spec.rank}")
    for name, spec in (("key", k), ("value", v), ("decay", decay), ("beta", beta)):
        if spec.dtype != q.dtype:
            ctx.fail(f"{name} element type {spec.dtype} differs from query element type {q.dtype}")
    batch, hq, steps, dk = q.shape
    hkv = k.shape[1]
    batch = ctx.equal(batch, k.shape[0], "query batch is {a}, key batch is {b}")
    batch = ctx.equal(batch, v.shape[0], "query batch is {a}, value batch is {b}")
    batch = ctx.equal(batch, state.shape[0], "query batch is {a}, state batch is {b}")
    hkv = ctx.equal(hkv, v.shape[1], "key has {a} heads, value has {b}")
    hkv = ctx.equal(hkv, state.shape[1], "key has {a} heads, state has {b}")
    ctx.divisible(hq, hkv, "query heads ({a}) must be a multiple of key/value heads ({b})")
    steps = ctx.equal(steps, k.shape[2], "query has {a} steps, key has {b}")
    steps = ctx.equal(steps, v.shape[2], "query has {a} steps, value has {b}")
    dk = ctx.equal(dk, k.shape[3], "query head size is {a}, key head size is {b}")
    dk = ctx.equal(dk, state.shape[2], "key head size is {a}, state dim 2 is {b}")
    dv = ctx.equal(v.shape[3], state.shape[3], "value head size is {a}, state dim 3 is {b}")
    _broadcastable(ctx, decay, (batch, hkv, steps, dk), "decay", ("batch", "heads", "steps", "key dim"))
    _broadcastable(ctx, beta, (batch, hkv, steps, 1), "beta", ("batch", "heads", "steps", "1"))
    return [TensorSpec((batch, hq, steps, dv), q.dtype), TensorSpec((batch, hkv, dk, dv), state.dtype)]


def _linear_attention_ref(env, a, q, k, v, state, decay, beta):
    out_dtype, state_dtype = q.dtype, state.dtype
    # Accumulate in f32 at least (f64 stays f64), as the ONNX reference does.
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    batch, hq, steps, dk = q.shape
    hkv, dv = k.shape[1], v.shape[3]
    group = hq // hkv
    q = q.to(work).reshape(batch, hkv, group, steps, dk)
    k, v = k.to(work), v.to(work)
    gate = torch.exp(decay.to(work)).expand(batch, hkv, steps, dk)
    rate = beta.to(work).expand(batch, hkv, steps, 1)
    s = state.to(work).clone()
    out = torch.empty(batch, hkv, group, steps, dv, dtype=work)
    for t in range(steps):
        s = s * gate[:, :, t, :, None]
        k_t, v_t = k[:, :, t, :], v[:, :, t, :]
        if a["delta"]:
            v_t = rate[:, :, t, :] * (v_t - torch.einsum("bhdm,bhd->bhm", s, k_t))
        s = s + k_t[..., :, None] * v_t[..., None, :]
        out[:, :, :, t, :] = torch.einsum("bhgd,bhdm->bhgm", q[:, :, :, t, :], s)
    out = (out * a["scale"]).reshape(batch, hq, steps, dv)
    return out.to(out_dtype), s.to(state_dtype)


register(OpDef(
    name="linear_attention", kind=OpKind.ATTENTION,
    summary="the linear-attention recurrence (linear, gated, delta and gated-delta rules)",
    doc=("Runs, for t = 0..T-1, the recurrent state update of linear attention on a state S "
         "[B, Hkv, Dk, Dv]: `S = exp(decay_t) * S`; with `delta`, `v_t = beta_t * (v_t - S^T k_t)`; "
         "`S = S + k_t v_t^T`; `out_t = scale * q_t^T S`. Query head h reads the state of key/value head "
         "h / (Hq / Hkv) (grouped-query). Operands are query [B, Hq, T, Dk], key [B, Hkv, T, Dk], value "
         "[B, Hkv, T, Dv], the initial state, `decay` (log-space gate, broadcast to [B, Hkv, T, Dk]: zero "
         "for no gating) and `beta` (update rate, broadcast to [B, Hkv, T, 1], read only with `delta`). "
         "Results are the output [B, Hq, T, Dv] in the query's element type and the final state in the "
         "state's. Accumulates in at least f32. A primitive rather than an unrolled loop: kernels run it "
         "chunk-parallel."),
    operands=("query", "key", "value", "state", "decay", "beta"), results=("output", "present_state"),
    attrs={
        "scale": attr("float", doc="multiplies every output"),
        "delta": attr("bool", False, "apply the delta-rule correction to the written value"),
    },
    shape=_linear_attention_rule, ref=_linear_attention_ref,
    example=('%6:2 = "sdc.linear_attention"(%0, %1, %2, %3, %4, %5) {delta = true, scale = 3.535534e-01 : f64} '
             ": (tensor<?x8x?x8xf32>, tensor<?x4x?x8xf32>, tensor<?x4x?x16xf32>, tensor<?x4x8x16xf32>, "
             "tensor<?x4x?x8xf32>, tensor<?x4x?x1xf32>) -> (tensor<?x8x?x16xf32>, tensor<?x4x8x16xf32>)"),
))

# ---------------------------------------------------------------- transposed convolution


def _conv_transpose_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x, w = ins
    groups = attrs["groups"]
    check_conv_operands(ctx, x, w, groups)
    n = x.rank - 2
    ctx.equal(x.shape[1], w.shape[0], "input has {a} channels, weight dim 0 (input channels) is {b}")
    ctx.divisible(w.shape[0], groups, "input channels ({a}) must be divisible by groups ({b})")
    strides, dilations, pads = window_attrs(ctx, attrs, n)
    extra = _spatial_attr(ctx, attrs, "output_padding", n, 0)
    if any(p < 0 for p in extra):
        ctx.fail(f"output_padding must be >= 0, found {extra}")
    spatial = []
    for i in range(n):
        size, k = x.shape[2 + i], w.shape[2 + i]
        out = (size - 1) * strides[i] + dilations[i] * (k - 1) + 1 - pads[i] - pads[n + i] + extra[i]
        if is_static(out) and out < 1:
            ctx.fail(f"spatial dim {i} of the result would have size {out}")
        spatial.append(out)
    return [TensorSpec((x.shape[0], w.shape[1] * groups, *spatial), x.dtype)]


# Spatial rank -> the torch.nn.functional function, by name (F is imported lazily).
_CONV_TRANSPOSE = {1: "conv_transpose1d", 2: "conv_transpose2d", 3: "conv_transpose3d"}


def _conv_transpose_ref(env, a, x, w):
    n = x.dim() - 2
    if n not in _CONV_TRANSPOSE:
        raise NotImplementedError(f"reference transposed convolution supports 1-3 spatial dims, got {n}")
    strides = a["strides"] or [1] * n
    dilations = a["dilations"] or [1] * n
    pads = a["pads"] or [0] * (2 * n)
    extra = a["output_padding"] or [0] * n
    full = getattr(F, _CONV_TRANSPOSE[n])(x, w, None, strides, 0, 0, a["groups"], dilations)
    # Crop the pads off the full result (negative pads and output_padding extend it with zeros).
    spec = []
    for i in reversed(range(n)):
        spec += [-pads[i], -pads[n + i] + extra[i]]
    return F.pad(full, spec) if any(spec) else full


register(OpDef(
    name="conv_transpose", kind=OpKind.CONVOLUTION, vjp=derivatives.conv_transpose_vjp,
    sharding=ShardingRule("transposed_convolution"),
    summary="N-d transposed convolution (the gradient of conv with respect to its input)",
    doc=("Scatters each element of `input` [N, C, D1..Dn] times `weight` [C, O/groups, K1..Kn] into the result "
         "[N, O, E1..En] at stride `strides` with kernel taps `dilations` apart, then crops `pads` (begins, "
         "then ends) off the full result and extends its end by `output_padding` (negative pads extend with "
         "zeros too): Ei = (Di - 1)*stride_i + dilation_i*(Ki - 1) + 1 - pad_begin_i - pad_end_i + "
         "output_padding_i. Bias is a separate `sdc.add`."),
    operands=("input", "weight"),
    attrs={**_WINDOW_ATTRS,
           "output_padding": attr("ints", [], "extra result elements at the end of each spatial dim (default 0)"),
           "groups": attr("int", 1, "channel groups")},
    shape=_conv_transpose_rule, ref=_conv_transpose_ref,
    example=('%2 = "sdc.conv_transpose"(%0, %1) {dilations = array<i64>, groups = 1 : i64, '
             'output_padding = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} '
             ": (tensor<?x64x28x28xf32>, tensor<64x32x3x3xf32>) -> tensor<?x32x56x56xf32>"),
))

# ---------------------------------------------------------------- deformable convolution


def _deform_conv_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x, w, offset, mask = ins
    for name, spec in (("weight", w), ("offset", offset), ("mask", mask)):
        if spec.dtype != x.dtype:
            ctx.fail(f"{name} element type {spec.dtype} differs from input element type {x.dtype}")
    check_dtype(ctx, FLOAT, x, "input")
    for name, spec in (("input", x), ("weight", w), ("offset", offset), ("mask", mask)):
        if spec.rank != 4:
            ctx.fail(f"{name} must have rank 4 (2-D deformable convolution), found rank {spec.rank}")
    groups, offset_groups = attrs["groups"], attrs["offset_groups"]
    if groups < 1 or offset_groups < 1:
        ctx.fail(f"groups and offset_groups must be >= 1, found {groups} and {offset_groups}")
    c_in, c_w = x.shape[1], w.shape[1]
    if is_static(c_in) and is_static(c_w) and c_in != c_w * groups:
        ctx.fail(f"input channels ({c_in}) must equal weight channels per group ({c_w}) times groups ({groups})")
    ctx.divisible(w.shape[0], groups, "output channels ({a}) must be divisible by groups ({b})")
    ctx.divisible(c_in, offset_groups, "input channels ({a}) must be divisible by offset_groups ({b})")
    kh, kw = w.shape[2], w.shape[3]
    spatial = _window_dims(ctx, x, [kh, kw], attrs)
    taps = kh * kw
    ctx.equal(offset.shape[0], x.shape[0], "offset batch is {a}, input batch is {b}")
    ctx.equal(offset.shape[1], offset_groups * taps * 2,
              "offset has {a} channels, expected offset_groups * kH * kW * 2 = {b}")
    for i in range(2):
        ctx.equal(offset.shape[2 + i], spatial[i], f"offset spatial dim {i} is {{a}}, the output's is {{b}}")
    for i, want in enumerate((x.shape[0], offset_groups * taps, spatial[0], spatial[1])):
        d = mask.shape[i]
        if is_static(d) and d != 1 and is_static(want) and d != want:
            ctx.fail(f"mask dim {i} is {d}, expected 1 or {want}")
    return [TensorSpec((x.shape[0], w.shape[0], *spatial), x.dtype)]


def _deform_conv_ref(env, a, x, w, offset, mask):
    n, c, h, wd = x.shape
    out_c, _, kh, kw = w.shape
    groups, og = a["groups"], a["offset_groups"]
    sh, sw = a["strides"] or [1, 1]
    dh, dw = a["dilations"] or [1, 1]
    ph, pw = (a["pads"] or [0, 0, 0, 0])[:2]
    oh, ow = offset.shape[2], offset.shape[3]
    taps = kh * kw
    off = offset.reshape(n, og, kh, kw, 2, oh, ow)
    rows = (torch.arange(oh) * sh - ph).reshape(1, 1, 1, 1, oh, 1) + (torch.arange(kh) * dh).reshape(1, 1, kh, 1, 1, 1)
    cols = (torch.arange(ow) * sw - pw).reshape(1, 1, 1, 1, 1, ow) + (torch.arange(kw) * dw).reshape(1, 1, 1, kw, 1, 1)
    py = rows.to(x.dtype) + off[:, :, :, :, 0]  # [N, og, kh, kw, oh, ow]: sampling row per tap
    px = cols.to(x.dtype) + off[:, :, :, :, 1]
    y0, x0 = torch.floor(py), torch.floor(px)
    ly, lx = py - y0, px - x0
    y0, x0 = y0.to(torch.int64), x0.to(torch.int64)
    flat = x.reshape(n, og, c // og, h * wd)
    sampled = torch.zeros(n, og, c // og, taps * oh * ow, dtype=x.dtype)
    # Bilinear interpolation; corners outside the image contribute zero.
    for yy, xx, weight in ((y0, x0, (1 - ly) * (1 - lx)), (y0, x0 + 1, (1 - ly) * lx),
                           (y0 + 1, x0, ly * (1 - lx)), (y0 + 1, x0 + 1, ly * lx)):
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < wd)
        index = (yy.clamp(0, h - 1) * wd + xx.clamp(0, wd - 1)).reshape(n, og, 1, -1)
        values = torch.gather(flat, 3, index.expand(n, og, c // og, index.shape[-1]))
        sampled += values * (weight * inside).reshape(n, og, 1, -1)
    sampled = sampled.reshape(n, og, c // og, taps, oh * ow)
    sampled = sampled * mask.expand(n, og * taps, oh, ow).reshape(n, og, 1, taps, oh * ow)
    cols = sampled.reshape(n, groups, (c // groups) * taps, oh * ow)
    kernel = w.reshape(groups, out_c // groups, (c // groups) * taps)
    out = torch.einsum("gok,ngkl->ngol", kernel, cols)
    return out.reshape(n, out_c, oh, ow)


register(OpDef(
    name="deform_conv", kind=OpKind.CONVOLUTION,
    precision=Precision.KEEP,  # its offsets are coordinates
    summary="2-D deformable convolution (sampling positions moved by learned offsets)",
    doc=("Like `sdc.conv` on `input` [N, C, H, W] with `weight` [O, C/groups, kH, kW], but kernel tap k of "
         "output position p samples the input at its regular position plus (offset[n, 2*(g*kH*kW + k)], "
         "offset[n, 2*(g*kH*kW + k) + 1]) at p (rows, then columns) by bilinear interpolation, zero outside "
         "the image, and the sample is scaled by `mask` [N, offset_groups*kH*kW, oH, oW] (broadcast; ones "
         "for DCNv1). g is the offset group of the input channel. `offset` is [N, offset_groups*kH*kW*2, oH, "
         "oW]. Bias is a separate `sdc.add`."),
    operands=("input", "weight", "offset", "mask"),
    attrs={**_WINDOW_ATTRS, "groups": attr("int", 1, "channel groups"),
           "offset_groups": attr("int", 1, "input channel groups that share one set of offsets")},
    shape=_deform_conv_rule, ref=_deform_conv_ref,
    example=('%4 = "sdc.deform_conv"(%0, %1, %2, %3) {dilations = array<i64>, groups = 1 : i64, '
             'offset_groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64>} '
             ": (tensor<?x16x32x32xf32>, tensor<32x16x3x3xf32>, tensor<?x18x32x32xf32>, tensor<1x1x1x1xf32>) "
             "-> tensor<?x32x32x32xf32>"),
))


# ---------------------------------------------------------------- local response normalization


def _lrn_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, FLOAT, x, "operand")
    if x.rank < 3:
        ctx.fail(f"operand must have rank >= 3 (N, C, spatial...), found rank {x.rank}")
    if attrs["size"] < 1:
        ctx.fail(f"size must be >= 1, found {attrs['size']}")
    return [x]


def _lrn_ref(env, a, x):
    # The window sum as `size` shifted slices of the squares zero-padded along C: elementwise passes
    # that keep x's memory format (channels-last stays so), 3.5-4.5x faster on one thread than pooling
    # over C as a spatial dim, which copied a channels-last input to NCHW (AlexNet's and Inception's
    # LRNs, 2026-12-03).
    # A window reaching more than C-1 channels past either end reads only zeros there: the padding is
    # clipped to C-1 a side, so a declared size of 2^40 pads and sums no more than 2C-1 slices.
    size, c = a["size"], x.shape[1]
    before = min((size - 1) // 2, max(c - 1, 0))
    after = min(size - 1 - (size - 1) // 2, max(c - 1, 0))
    sq = F.pad(x * x, [0, 0] * (x.dim() - 2) + [before, after])
    taps = before + after + 1
    window = sq if taps == 1 else sq[:, 0:c] + sq[:, 1:1 + c]
    for k in range(2, taps):
        window += sq[:, k:k + c]
    scale = window.mul_(a["alpha"] / size).add_(a["bias"])
    return x * _negative_power(scale, a["beta"])


def _negative_power(s: torch.Tensor, beta: float) -> torch.Tensor:
    """s ** -beta in place on `s`; the common betas by square roots, which are vectorized (pow is not)."""
    if beta == 0.75:  # AlexNet's, GoogLeNet's: s^-0.75 = 1 / sqrt(s * sqrt(s))
        return s.sqrt().mul_(s).rsqrt_()
    if beta == 0.5:
        return s.rsqrt_()
    if beta == 1.0:
        return s.reciprocal_()
    return s.pow_(-beta)


register(OpDef(
    name="lrn", kind=OpKind.NORMALIZATION,
    sharding=ShardingRule("blocked_axis", axis=1),
    summary="local response normalization across channels",
    doc=("`x / (bias + alpha / size * sum(x^2 over a window of `size` channels))^beta`, the window "
         "centred on each channel ((size-1)//2 before, the rest after), as in AlexNet."),
    operands=("operand",),
    attrs={
        "size": attr("int", doc="channels in the window"),
        "alpha": attr("float", 1e-4), "beta": attr("float", 0.75), "bias": attr("float", 1.0),
    },
    shape=_lrn_rule, ref=_lrn_ref,
    example=('%1 = "sdc.lrn"(%0) {alpha = 1.000000e-04 : f64, beta = 7.500000e-01 : f64, bias = 1.000000e+00 : f64, '
             "size = 5 : i64} : (tensor<?x96x55x55xf32>) -> tensor<?x96x55x55xf32>"),
))
