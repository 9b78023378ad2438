"""Values that come from outside the dataflow: constants, parameters, iota; casts."""

from __future__ import annotations

from typing import TYPE_CHECKING
import numpy as np

from sdc import dtypes
from sdc.dialect import derivatives
from sdc.dialect.hooks import ELEMENTWISE_LAYOUT, FusionClass, KernelForm, OpKind, Precision, ShardingRule
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.shapes import DYN, ShapeContext, TensorSpec
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")


def _constant_rule(ctx: ShapeContext, ins, attrs):
    value = attrs["value"]
    return [TensorSpec(tuple(value.shape), value.dtype_name)]


def _constant_ref(env, a):
    return a["value"].to_torch()


register(OpDef(
    name="constant", kind=OpKind.VALUES,
    weight=True, sharding=ShardingRule("generator"),
    summary="a tensor literal",
    doc=("A small tensor literal held in the IR as a dense elements attribute. Weights do not go here: "
         "they are `sdc.parameter`s, referenced by name."),
    operands=(), attrs={"value": attr("dense", doc="the literal, a dense elements attribute")},
    shape=_constant_rule, ref=_constant_ref,
    example='%0 = "sdc.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>',
))


def _parameter_ref(env, a):
    params = env.params
    name = a["name"]
    if name not in params:
        raise KeyError(f"parameter '{name}' has no value")
    return params[name]


register(OpDef(
    name="parameter", kind=OpKind.VALUES,
    weight=True, sharding=ShardingRule("generator"),
    summary="a named weight, stored outside the IR",
    doc=("A model weight, referenced by `name`; its value lives in the artifact's weights (or the "
         "interpreter's `params`), never in the IR text. The result type is declared, not inferred."),
    operands=(), attrs={"name": attr("str", doc="the weight's name in the weights file")},
    shape=None, ref=_parameter_ref,
    example='%0 = "sdc.parameter"() {name = "fc1.weight"} : () -> tensor<512x784xf32>',
))


def _cast_rule(ctx: ShapeContext, ins, attrs):
    return [ins[0].with_dtype(attrs["dtype"])]


def _cast_ref(env, a, x):
    target = dtypes.to_torch(a["dtype"])
    if target == torch.bool:
        return x != 0
    if x.is_floating_point() and not target.is_floating_point:
        # Float to integer truncates toward zero; NaN and out-of-range values are undefined (as in C).
        return torch.trunc(x).to(target)
    return x.to(target)


register(OpDef(
    name="cast", kind=OpKind.VALUES, vjp=derivatives.cast_vjp,
    precision=Precision.KEEP, fusion=FusionClass.ELEMENTWISE, layout=ELEMENTWISE_LAYOUT,
    sharding=ShardingRule("conversion"), flash_score=True, kernel_form=KernelForm.LOWERED,
    summary="convert the element type",
    doc=("Converts each element to `dtype`. Float to integer truncates toward zero; anything to i1 "
         "tests for non-zero; the shape is unchanged."),
    operands=("operand",), attrs={"dtype": attr("dtype", doc="the result element type")},
    shape=_cast_rule, ref=_cast_ref,
    example='%1 = "sdc.cast"(%0) {dtype = f16} : (tensor<?x4xf32>) -> tensor<?x4xf16>',
))


def _layout_cast_rule(ctx: ShapeContext, ins, attrs):
    perm = attrs["layout"]
    if sorted(perm) != list(range(ins[0].rank)):
        ctx.fail(f"layout {list(perm)} is not a permutation of the operand's {ins[0].rank} dims")
    return [ins[0]]


register(OpDef(
    name="layout_cast", kind=OpKind.LAYOUT, vjp=derivatives.layout_cast_vjp,
    sharding=ShardingRule("identity"), kernel_form=KernelForm.LOWERED,
    summary="change a tensor's physical layout, keeping its logical value",
    doc=("Returns the same logical tensor stored in the physical dimension order `layout` (a permutation: "
         "`layout[i]` is the logical dim stored at physical position i; NCHW -> NHWC is [0, 2, 3, 1]). "
         "Types stay logical, so the reference semantics is the identity; codegen moves the bytes."),
    operands=("operand",), attrs={"layout": attr("layout", doc="the result's physical dim order")},
    shape=_layout_cast_rule, ref=lambda env, a, x: x,
    example=('%1 = "sdc.layout_cast"(%0) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} '
             ": (tensor<?x3x8x8xf32>) -> tensor<?x3x8x8xf32>"),
))


def shape_attr_dims(shape) -> tuple:
    """A `shape` attribute's dims as shape-rule dims: names in the IR text and -1 are dynamic;
    symbolic dim objects (what importers pass while building) stay as they are."""
    return tuple(d if (isinstance(d, int) and d >= 0) or not isinstance(d, (int, str)) else DYN for d in shape)


def _iota_rule(ctx: ShapeContext, ins, attrs):
    shape = shape_attr_dims(attrs["shape"])
    if any(isinstance(d, int) and d < 0 for d in attrs["shape"]):
        ctx.fail("iota shape cannot infer a dim (-1): give every dim")
    ctx.axis(attrs["dimension"], len(shape), "dimension")
    if attrs["dtype"] == "i1":
        ctx.fail("iota dtype must be numeric, found i1")
    return [TensorSpec(shape, attrs["dtype"])]


def _iota_ref(env, a):
    shape = [env.dim(d) for d in a["shape"]]
    dim = a["dimension"] % len(shape)
    ramp = torch.arange(shape[dim], dtype=dtypes.to_torch(a["dtype"]))
    view = [1] * len(shape)
    view[dim] = shape[dim]
    return ramp.reshape(view).expand(shape).contiguous()


register(OpDef(
    name="iota", kind=OpKind.VALUES,
    sharding=ShardingRule("generator"),
    summary="0, 1, 2, ... along one dimension",
    doc=("A tensor of `shape` whose elements count 0, 1, 2, ... along `dimension` and repeat along the "
         "others. `arange(start, limit, delta)` is an iota times delta plus start."),
    operands=(),
    attrs={
        "shape": attr("shape", doc="result dims: ints, or symbol names bound by the inputs"),
        "dimension": attr("int", doc="the counting dimension"),
        "dtype": attr("dtype", doc="result element type"),
    },
    shape=_iota_rule, ref=_iota_ref,
    example='%0 = "sdc.iota"() {dimension = 0 : i64, dtype = i64, shape = ["S"]} : () -> tensor<?xi64>',
))


def dense_from_numpy(array: np.ndarray):
    """Plain-Python view of a constant, as the `dense` attribute kind (see sdc.dialect.attrs)."""
    from sdc.dialect.dense import DenseValue

    return DenseValue.from_numpy(array)


def _dim_values_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    shape_attr_dims(attrs["dims"])
    if any(isinstance(d, int) and d < 0 for d in attrs["dims"]):
        ctx.fail(f"dims {list(attrs['dims'])} has a negative entry")
    return [TensorSpec((len(attrs["dims"]),), "i64")]


register(OpDef(
    name="dim_values", kind=OpKind.VALUES,
    sharding=ShardingRule("generator"),
    summary="a 1-D i64 tensor of dims, some symbolic",
    doc=("The values of `dims` at run time: ints as they are, symbol names and dim expressions (`B*S`) "
         "evaluated from the entry inputs' shapes. What a model's run-time shape arithmetic folds to."),
    operands=(), attrs={"dims": attr("shape", doc="ints or dim expressions")},
    shape=_dim_values_rule, ref=lambda env, a: torch.tensor([env.dim(d) for d in a["dims"]], dtype=torch.int64),
    example='%0 = "sdc.dim_values"() {dims = ["B", "S*12", 64]} : () -> tensor<3xi64>',
))
