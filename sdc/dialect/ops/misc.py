"""Ops the model importers need that fit no larger family: LRN and symbolic dim values."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.ops.core import shape_attr_dims
from sdc.dialect.ops.elementwise import FLOAT, check_dtype
from sdc.dialect.shapes import ShapeContext, TensorSpec


def _lrn_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, FLOAT, x, "operand")
    if x.rank < 3:
        ctx.fail(f"operand must have rank >= 3 (N, C, spatial...), found rank {x.rank}")
    if attrs["size"] < 1:
        ctx.fail(f"size must be >= 1, found {attrs['size']}")
    return [x]


def _lrn_ref(env, a, x):
    size = a["size"]
    if size % 2 == 1:  # a centred window: pool over channels with implicit zero padding, no copies
        sq = (x * x).reshape(x.shape[0], 1, x.shape[1], -1)
        summed = F.avg_pool2d(sq, (size, 1), stride=1, padding=(size // 2, 0), count_include_pad=True)
        summed = summed.reshape(x.shape).mul_(a["alpha"]).add_(a["bias"]).pow_(a["beta"])
        return x / summed
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = (x * x).unsqueeze(1)  # [N, 1, C, spatial...]: pool over C as a spatial dim
    sq = F.pad(sq, [0, 0] * (x.dim() - 2) + [before, after])
    flat = sq.reshape(sq.shape[0], 1, sq.shape[2], -1)
    summed = F.avg_pool2d(flat, (size, 1), stride=1) * size
    summed = summed.reshape(x.shape)
    return x / torch.pow(a["bias"] + a["alpha"] / size * summed, a["beta"])


register(OpDef(
    name="lrn", family="normalization",
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


def _dim_values_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    shape_attr_dims(attrs["dims"])
    if any(isinstance(d, int) and d < 0 for d in attrs["dims"]):
        ctx.fail(f"dims {list(attrs['dims'])} has a negative entry")
    return [TensorSpec((len(attrs["dims"]),), "i64")]


register(OpDef(
    name="dim_values", family="values",
    summary="a 1-D i64 tensor of dims, some symbolic",
    doc=("The values of `dims` at run time: ints as they are, symbol names and dim expressions (`B*S`) "
         "evaluated from the entry inputs' shapes. What a model's run-time shape arithmetic folds to."),
    operands=(), attrs={"dims": attr("shape", doc="ints or dim expressions")},
    shape=_dim_values_rule, ref=lambda env, a: torch.tensor([env.dim(d) for d in a["dims"]], dtype=torch.int64),
    example='%0 = "sdc.dim_values"() {dims = ["B", "S*12", 64]} : () -> tensor<3xi64>',
))
