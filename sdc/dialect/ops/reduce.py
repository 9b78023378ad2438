"""Reductions and the normalizations built on them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sdc.dialect import derivatives
from sdc.dialect.hooks import (TRANSCENDENTAL, FusionClass, KernelForm, OpKind, Precision, RowReduce, ShardingRule,
                               per_operand_element,
                               per_result_element)
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.ops.elementwise import ANY, FLOAT, NUMERIC, check_dtype
from sdc.dialect.shapes import ShapeContext, TensorSpec
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
    import torch.nn.functional as F
else:
    torch = lazy_import("torch")
    F = lazy_import("torch.nn.functional")


def reduced_shape(shape, axes, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_rule(category: str, result_dtype: str | None = None):
    def rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
        x = ins[0]
        check_dtype(ctx, category, x, "operand")
        axes = ctx.axes(attrs["axes"], x.rank) if attrs["axes"] else list(range(x.rank))
        return [TensorSpec(reduced_shape(x.shape, axes, attrs["keepdims"]), result_dtype or x.dtype)]

    return rule


def _axes(a, x):
    return tuple(sorted(ax % x.dim() for ax in a["axes"])) if a["axes"] else tuple(range(x.dim()))


def _reduce_with(fn, empty):
    """`empty`: the identity of the reduction, the result over an empty set (None: sum/mean's own)."""

    def ref(env, a, x):
        axes = _axes(a, x)
        if not axes:
            return x.clone()
        if empty is not None and any(x.shape[ax] == 0 for ax in axes):
            shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if a["keepdims"] else [
                d for i, d in enumerate(x.shape) if i not in axes]
            return torch.full(shape, empty(x.dtype), dtype=x.dtype)
        return fn(x, axes, a["keepdims"])

    return ref


def _lowest(dtype):
    if dtype == torch.bool:
        return False
    return -float("inf") if dtype.is_floating_point else torch.iinfo(dtype).min


def _highest(dtype):
    if dtype == torch.bool:
        return True
    return float("inf") if dtype.is_floating_point else torch.iinfo(dtype).max


def _prod(x, axes, keep):
    # dtype: torch widens integer products to int64; the result keeps the operand's type.
    for ax in sorted(axes, reverse=True):
        x = torch.prod(x, dim=ax, keepdim=keep, dtype=x.dtype)
    return x


def _mean(x, axes, keep):
    if x.is_floating_point():
        return torch.mean(x, dim=axes, keepdim=keep)
    return torch.div(torch.sum(x, dim=axes, keepdim=keep), _count(x, axes), rounding_mode="trunc").to(x.dtype)


def _count(x, axes):
    n = 1
    for ax in axes:
        n *= x.shape[ax]
    return n


# name: (function, semantics, value over an empty set, operand category)
REDUCTIONS = {
    "reduce_sum": (lambda x, ax, k: torch.sum(x, dim=ax, keepdim=k, dtype=x.dtype), "sum", None, NUMERIC),
    "reduce_mean": (_mean, "mean", None, NUMERIC),
    "reduce_max": (lambda x, ax, k: torch.amax(x, dim=ax, keepdim=k), "maximum", _lowest, ANY),
    "reduce_min": (lambda x, ax, k: torch.amin(x, dim=ax, keepdim=k), "minimum", _highest, ANY),
    "reduce_prod": (_prod, "product", lambda dt: 1, NUMERIC),
}

_REDUCE_ATTRS = {
    "axes": attr("ints", [], "dims to reduce (empty: all)"),
    "keepdims": attr("bool", False, "keep reduced dims with size 1"),
}



def _row(primitive: str, mean: bool = False) -> dict:
    """A reduction the kernel IR's row template lowers (over the last dim) with this primitive."""
    return {"kernel_form": KernelForm.ROW, "row_reduce": RowReduce(primitive, mean)}


# Sums keep f32 (and so does the elementwise chain feeding them); only a sum's partial sums add up.
_REDUCE_HOOKS = {
    "reduce_sum": {"precision": Precision.KEEP, "accumulates": True, "sharding": ShardingRule("reduction", "unary"),
                   "vjp": derivatives.reduce_sum_vjp, **_row("sum")},
    "reduce_mean": {"precision": Precision.KEEP, "accumulates": True, "vjp": derivatives.reduce_mean_vjp,
                    **_row("sum", mean=True)},
    "reduce_prod": {"precision": Precision.KEEP, "accumulates": True, "vjp": derivatives.reduce_prod_vjp},
    "reduce_max": {"vjp": derivatives.reduce_extreme_vjp, **_row("max")},
    "reduce_min": {"vjp": derivatives.reduce_extreme_vjp, **_row("min")},
}

for _name, (_fn, _sem, _empty, _cat) in REDUCTIONS.items():
    register(OpDef(
        name=_name, kind=OpKind.REDUCTION,
        **{"sharding": ShardingRule("reduction"), **_REDUCE_HOOKS.get(_name, {})},
        summary=f"{_sem} over axes",
        doc=f"The {_sem} of `operand` over `axes` (all dims when empty), dropping them unless `keepdims`.",
        operands=("operand",), attrs=_REDUCE_ATTRS, shape=_reduce_rule(_cat), ref=_reduce_with(_fn, _empty),
        example=(f'%1 = "sdc.{_name}"(%0) {{axes = array<i64: 1>, keepdims = true}} '
                 ": (tensor<?x16xf32>) -> tensor<?x1xf32>"),
    ))


def _arg_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, NUMERIC, x, "operand")
    axis = ctx.axis(attrs["axis"], x.rank)
    return [TensorSpec(reduced_shape(x.shape, [axis], attrs["keepdims"]), "i64")]


def _arg_ref(largest: bool):
    def ref(env, a, x):
        axis = a["axis"] % x.dim()
        if a["select_last_index"]:
            flipped = x.flip(axis)
            idx = (flipped.argmax if largest else flipped.argmin)(dim=axis, keepdim=a["keepdims"])
            return x.shape[axis] - 1 - idx
        return (x.argmax if largest else x.argmin)(dim=axis, keepdim=a["keepdims"])

    return ref


for _name, _largest in (("argmax", True), ("argmin", False)):
    register(OpDef(
        name=_name, kind=OpKind.REDUCTION, sharding=ShardingRule("arg_reduction"), differentiable=False,
        summary=f"index of the {'largest' if _largest else 'smallest'} element along an axis",
        doc=(f"The i64 index of the {'largest' if _largest else 'smallest'} element along `axis`; ties go to "
             "the first index, or the last with `select_last_index`."),
        operands=("operand",),
        attrs={
            "axis": attr("int", 0, "the reduced dim"),
            "keepdims": attr("bool", False, "keep the reduced dim with size 1"),
            "select_last_index": attr("bool", False, "break ties toward the last index"),
        },
        shape=_arg_rule, ref=_arg_ref(_largest),
        example=f'%1 = "sdc.{_name}"(%0) {{axis = 1 : i64}} : (tensor<?x10xf32>) -> tensor<?xi64>',
    ))


def _half_in_f32(fn, x, axis):
    """f16/bf16 softmax accumulates in f32, as GPU kernels do, then rounds once."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return fn(x.float(), dim=axis).to(x.dtype)
    return fn(x, dim=axis)


def _softmax_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    check_dtype(ctx, FLOAT, ins[0], "operand")
    ctx.axis(attrs["axis"], ins[0].rank)
    return [ins[0]]


for _name, _sem, _vjp in (("softmax", "exp(x) / sum(exp(x))", derivatives.softmax_vjp),
                          ("log_softmax", "x - log(sum(exp(x)))", derivatives.log_softmax_vjp)):
    register(OpDef(
        name=_name, kind=OpKind.NORMALIZATION, vjp=_vjp,
        fusion=FusionClass.REDUCTION, cost=per_operand_element(TRANSCENDENTAL), kernel_form=KernelForm.ROW,
        sharding=ShardingRule("blocked_axis", axis="axis"),
        summary=f"{_sem} along an axis",
        doc=f"`{_sem}` along `axis`, computed stably (the maximum is subtracted first).",
        operands=("operand",), attrs={"axis": attr("int", -1, "the normalized dim")},
        shape=_softmax_rule, ref=lambda env, a, x, _fn=_name: _half_in_f32(getattr(F, _fn), x, a["axis"]),
        example=f'%1 = "sdc.{_name}"(%0) {{axis = -1 : i64}} : (tensor<?x12x?x?xf32>) -> tensor<?x12x?x?xf32>',
    ))


def _norm_params_rule(names: tuple[str, ...]):
    def rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
        x = ins[0]
        check_dtype(ctx, FLOAT, x, "input")
        axis = ctx.axis(attrs["axis"], x.rank)
        norm_shape = x.shape[axis:]
        for name, p in zip(names, ins[1:]):
            if p.dtype != x.dtype:
                ctx.fail(f"{name} element type {p.dtype} differs from input element type {x.dtype}")
            if p.rank != len(norm_shape):
                ctx.fail(f"{name} must have the normalized shape (rank {len(norm_shape)}), found rank {p.rank}")
            for i, (d, e) in enumerate(zip(p.shape, norm_shape)):
                ctx.equal(d, e, f"{name} dim {i} is {{a}}, the normalized dim is {{b}}")
        return [x]

    return rule


def _layer_norm_ref(env, a, x, scale, bias):
    axis = a["axis"] % x.dim()
    return F.layer_norm(x, x.shape[axis:], scale, bias, a["epsilon"])


def _rms_norm_ref(env, a, x, scale):
    axis = a["axis"] % x.dim()
    dims = tuple(range(axis, x.dim()))
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    rms = torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + a["epsilon"])
    return (xf * rms).to(x.dtype) * scale


def _trailing_axes(rank: int, attrs: dict) -> tuple[int, ...]:
    """A layer/rms norm reduces dim `axis` and every later one."""
    return tuple(range(attrs["axis"] % rank, rank)) if rank else ()


_NORM_ATTRS = {
    "axis": attr("int", -1, "first normalized dim; normalization runs over it and every later dim"),
    "epsilon": attr("float", 1e-5, "added to the variance"),
}

register(OpDef(
    name="layer_norm", kind=OpKind.NORMALIZATION, vjp=derivatives.layer_norm_vjp,
    fusion=FusionClass.REDUCTION, cost=per_operand_element(TRANSCENDENTAL), reduced_axes=_trailing_axes,
    sharding=ShardingRule("normalization"), kernel_form=KernelForm.ROW, vector_operands={1: -1, 2: -1},
    summary="layer normalization over the trailing dims",
    doc="`(x - mean) / sqrt(var + epsilon) * scale + bias`, statistics over dims `axis`..end.",
    operands=("input", "scale", "bias"), attrs=_NORM_ATTRS,
    shape=_norm_params_rule(("scale", "bias")), ref=_layer_norm_ref,
    example=('%3 = "sdc.layer_norm"(%0, %1, %2) {axis = -1 : i64, epsilon = 1.000000e-05 : f64} '
             ": (tensor<?x?x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<?x?x768xf32>"),
))

register(OpDef(
    name="rms_norm", kind=OpKind.NORMALIZATION, vjp=derivatives.rms_norm_vjp,
    fusion=FusionClass.REDUCTION, cost=per_operand_element(TRANSCENDENTAL), reduced_axes=_trailing_axes,
    sharding=ShardingRule("normalization"), kernel_form=KernelForm.ROW, vector_operands={1: -1},
    summary="root-mean-square normalization over the trailing dims",
    doc="`x / sqrt(mean(x^2) + epsilon) * scale`, the mean over dims `axis`..end (f16/bf16 accumulate in f32).",
    operands=("input", "scale"), attrs=_NORM_ATTRS,
    shape=_norm_params_rule(("scale",)), ref=_rms_norm_ref,
    example=('%2 = "sdc.rms_norm"(%0, %1) {axis = -1 : i64, epsilon = 1.000000e-06 : f64} '
             ": (tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>"),
))


def _batch_norm_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, FLOAT, x, "input")
    if x.rank < 2:
        ctx.fail(f"input must have rank >= 2 (N, C, ...), found rank {x.rank}")
    for name, p in zip(("scale", "bias", "mean", "variance"), ins[1:]):
        if p.dtype != x.dtype:
            ctx.fail(f"{name} element type {p.dtype} differs from input element type {x.dtype}")
        if p.rank != 1:
            ctx.fail(f"{name} must have rank 1 (one value per channel), found rank {p.rank}")
        ctx.equal(p.shape[0], x.shape[1], f"{name} has {{a}} values, the input has {{b}} channels")
    return [x]


register(OpDef(
    name="batch_norm", kind=OpKind.NORMALIZATION, vjp=derivatives.batch_norm_vjp,
    fusion=FusionClass.ELEMENTWISE, cost=per_result_element(2),  # a per-channel affine map
    sharding=ShardingRule("batch_normalization"),
    kernel_form=KernelForm.LOWERED, vector_operands={1: 1, 2: 1, 3: 1, 4: 1},  # per channel (dim 1)
    summary="batch normalization with running statistics (inference)",
    doc="`(x - mean[c]) / sqrt(variance[c] + epsilon) * scale[c] + bias[c]` for channel dim 1.",
    operands=("input", "scale", "bias", "mean", "variance"),
    attrs={"epsilon": attr("float", 1e-5, "added to the variance")},
    shape=_batch_norm_rule,
    ref=lambda env, a, x, s, b, m, v: F.batch_norm(x, m, v, s, b, False, 0.0, a["epsilon"]),
    example=('%5 = "sdc.batch_norm"(%0, %1, %2, %3, %4) {epsilon = 1.000000e-05 : f64} : (tensor<?x64x56x56xf32>, '
             "tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64x56x56xf32>"),
))
