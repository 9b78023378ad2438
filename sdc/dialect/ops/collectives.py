"""Collectives over named axes of the device mesh.

The mesh is the enclosing module's `sdc.mesh` attribute, e.g.
`module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>}`; a collective's
`mesh_axes` name the axes whose devices form its group (group size = product of their sizes).
Reference semantics go through `env.comm` (the runtime's process groups, or the interpreter's
simulated ranks); with no communicator every group must have size 1, where each collective
is the identity.
"""

from __future__ import annotations

from sdc.dialect.hooks import OpKind, Precision
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.ops.elementwise import NUMERIC, check_dtype
from sdc.dialect.shapes import ShapeContext, TensorSpec


def group_size(ctx_or_env, axes) -> int:
    mesh = getattr(ctx_or_env, "mesh", None)
    if mesh is None:
        if hasattr(ctx_or_env, "fail"):
            ctx_or_env.fail("needs a device mesh: the enclosing module has no 'sdc.mesh' attribute")
        mesh = {}
    size = 1
    for axis in axes:
        if axis not in mesh:
            known = ", ".join(f"'{a}'" for a in mesh) or "none"
            msg = f"mesh axis '{axis}' is not in the mesh (axes: {known})"
            if hasattr(ctx_or_env, "fail"):
                ctx_or_env.fail(msg)
            raise KeyError(msg)
        size *= mesh[axis]
    return size


def _check_axes(ctx: ShapeContext, attrs: dict) -> int:
    axes = list(attrs["mesh_axes"])
    if not axes:
        ctx.fail("mesh_axes must name at least one mesh axis")
    if len(set(axes)) != len(axes):
        ctx.fail(f"mesh_axes {axes} repeat an axis")
    return group_size(ctx, axes)


def _local(env, a, op: str, x, **kw):
    comm = getattr(env, "comm", None)
    if comm is not None:
        return getattr(comm, op)(x, list(a["mesh_axes"]), **kw)
    size = group_size(env, a["mesh_axes"])
    if size != 1:
        # `op` is the communicator's method, not always the op's name (broadcast_from -> broadcast).
        raise RuntimeError(f"mesh axes {list(a['mesh_axes'])} form a group of {size} devices, "
                           "which needs a communicator")
    return x


_AXES = attr("strs", doc="mesh axes whose devices form the group")
_REDUCTION = attr("enum", "sum", "`sum`, `max`, `min`, `prod` or `avg`", ("sum", "max", "min", "prod", "avg"))


def _all_reduce_rule(ctx, ins, attrs):
    _check_axes(ctx, attrs)
    check_dtype(ctx, NUMERIC, ins[0], "operand")
    return [ins[0]]


def _all_gather_rule(ctx, ins, attrs):
    n = _check_axes(ctx, attrs)
    x = ins[0]
    axis = ctx.axis(attrs["axis"], x.rank)
    return [x.with_shape(x.shape[:axis] + (x.shape[axis] * n,) + x.shape[axis + 1:])]


def _reduce_scatter_rule(ctx, ins, attrs):
    n = _check_axes(ctx, attrs)
    x = ins[0]
    check_dtype(ctx, NUMERIC, x, "operand")
    axis = ctx.axis(attrs["axis"], x.rank)
    ctx.divisible(x.shape[axis], n, f"dim {axis} of size {{a}} is not divisible by the group size {{b}}")
    return [x.with_shape(x.shape[:axis] + (x.shape[axis] // n,) + x.shape[axis + 1:])]


def _all_to_all_rule(ctx, ins, attrs):
    n = _check_axes(ctx, attrs)
    x = ins[0]
    split = ctx.axis(attrs["split_axis"], x.rank, "split_axis")
    concat = ctx.axis(attrs["concat_axis"], x.rank, "concat_axis")
    ctx.divisible(x.shape[split], n, f"split dim {split} of size {{a}} is not divisible by the group size {{b}}")
    shape = list(x.shape)
    shape[split] = shape[split] // n
    shape[concat] = shape[concat] * n
    return [x.with_shape(tuple(shape))]


def _all_slice_rule(ctx, ins, attrs):
    n = _check_axes(ctx, attrs)
    x = ins[0]
    axis = ctx.axis(attrs["axis"], x.rank)
    ctx.divisible(x.shape[axis], n, f"dim {axis} of size {{a}} is not divisible by the group size {{b}}")
    return [x.with_shape(x.shape[:axis] + (x.shape[axis] // n,) + x.shape[axis + 1:])]


def _broadcast_rule(ctx, ins, attrs):
    n = _check_axes(ctx, attrs)
    if not 0 <= attrs["root"] < n:
        ctx.fail(f"root {attrs['root']} is outside the group of {n} devices")
    return [ins[0]]


def _send_rule(ctx, ins, attrs):
    _check_axes(ctx, attrs)
    return []


def _recv_rule(ctx, ins, attrs):
    _check_axes(ctx, attrs)
    return None  # the received type is declared


register(OpDef(
    name="all_reduce", kind=OpKind.COLLECTIVE,
    summary="reduce across the group; every device gets the result",
    doc="Elementwise `reduction` of the operand over the devices of `mesh_axes`; each device gets the full result.",
    operands=("operand",), attrs={"mesh_axes": _AXES, "reduction": _REDUCTION},
    shape=_all_reduce_rule, pure=False,
    ref=lambda env, a, x: _local(env, a, "all_reduce", x, reduction=a["reduction"]),
    example=('%1 = "sdc.all_reduce"(%0) {mesh_axes = ["tp"], reduction = "sum"} '
             ": (tensor<?x768xf32>) -> tensor<?x768xf32>"),
))

register(OpDef(
    name="all_gather", kind=OpKind.COLLECTIVE,
    summary="concatenate every device's operand along an axis",
    doc="Concatenates the operands of the group's devices, in group rank order, along `axis`; all get the result.",
    operands=("operand",), attrs={"mesh_axes": _AXES, "axis": attr("int", doc="the gathered dim")},
    shape=_all_gather_rule, pure=False,
    ref=lambda env, a, x: _local(env, a, "all_gather", x, axis=a["axis"]),
    example='%1 = "sdc.all_gather"(%0) {axis = 0 : i64, mesh_axes = ["dp"]} : (tensor<4x768xf32>) -> tensor<8x768xf32>',
))

register(OpDef(
    name="reduce_scatter", kind=OpKind.COLLECTIVE,
    summary="reduce across the group, each device keeping one slice",
    doc="Reduces the operands elementwise, then device i keeps the i-th of n equal slices along `axis`.",
    operands=("operand",),
    attrs={"mesh_axes": _AXES, "axis": attr("int", doc="the scattered dim"), "reduction": _REDUCTION},
    shape=_reduce_scatter_rule, pure=False,
    ref=lambda env, a, x: _local(env, a, "reduce_scatter", x, axis=a["axis"], reduction=a["reduction"]),
    example=('%1 = "sdc.reduce_scatter"(%0) {axis = 0 : i64, mesh_axes = ["tp"], reduction = "sum"} '
             ": (tensor<8x768xf32>) -> tensor<4x768xf32>"),
))

register(OpDef(
    name="all_to_all", kind=OpKind.COLLECTIVE,
    summary="exchange slices: split one axis across the group, concatenate another",
    doc=("Each device splits its operand into n slices along `split_axis`, sends slice j to device j, and "
         "concatenates what it receives along `concat_axis`."),
    operands=("operand",),
    attrs={"mesh_axes": _AXES, "split_axis": attr("int", doc="the dim cut into n slices"),
           "concat_axis": attr("int", doc="the dim the received slices are joined on")},
    shape=_all_to_all_rule, pure=False,
    ref=lambda env, a, x: _local(env, a, "all_to_all", x, split_axis=a["split_axis"], concat_axis=a["concat_axis"]),
    example=('%1 = "sdc.all_to_all"(%0) {concat_axis = 1 : i64, mesh_axes = ["tp"], split_axis = 0 : i64} '
             ": (tensor<8x4xf32>) -> tensor<4x8xf32>"),
))

register(OpDef(
    name="all_slice", kind=OpKind.COLLECTIVE,
    folds=True,  # a local slice of its operand: no communication
    summary="keep this device's slice of a tensor every device holds whole",
    doc=("The operand is the same on every device of the group; device i keeps the i-th of n equal slices "
         "along `axis`. Nothing is sent: it is how a replicated value becomes a split one (the inverse of "
         "`sdc.all_gather`). An all_slice of a weight is done once, when the plan is built."),
    operands=("operand",), attrs={"mesh_axes": _AXES, "axis": attr("int", doc="the sliced dim")},
    shape=_all_slice_rule, pure=True,
    ref=lambda env, a, x: _local(env, a, "all_slice", x, axis=a["axis"]),
    example='%1 = "sdc.all_slice"(%0) {axis = 1 : i64, mesh_axes = ["tp"]} : (tensor<4x768xf32>) -> tensor<4x384xf32>',
))

register(OpDef(
    name="broadcast_from", kind=OpKind.COLLECTIVE,
    summary="copy one device's operand to the whole group",
    doc="Every device of the group gets the operand of group rank `root`.",
    operands=("operand",), attrs={"mesh_axes": _AXES, "root": attr("int", 0, "group rank of the source")},
    shape=_broadcast_rule, pure=False,
    ref=lambda env, a, x: _local(env, a, "broadcast", x, root=a["root"]),
    example='%1 = "sdc.broadcast_from"(%0) {mesh_axes = ["pp"], root = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>',
))

register(OpDef(
    name="send", kind=OpKind.COLLECTIVE,
    precision=Precision.KEEP,  # a recv's declared type must match what its peer sends
    summary="send a tensor to the device `peer` steps along a mesh axis",
    doc=("Point-to-point: sends the operand to the device whose position along `mesh_axes` is this device's "
         "plus `peer` (modulo the axis size). Pairs with an `sdc.recv` there. No result."),
    operands=("operand",), results=(),
    attrs={"mesh_axes": _AXES, "peer": attr("int", 1, "offset of the receiver along the axis")},
    shape=_send_rule, pure=False,
    ref=lambda env, a, x: (_local(env, a, "send", x, peer=a["peer"]), ())[1],
    example='"sdc.send"(%0) {mesh_axes = ["pp"], peer = 1 : i64} : (tensor<4x768xf32>) -> ()',
))


def _recv_ref(env, a, *ignored):
    comm = getattr(env, "comm", None)
    if comm is None:
        raise RuntimeError("sdc.recv needs a communicator")
    return comm.recv(list(a["mesh_axes"]), peer=a["peer"], spec=env.result_spec)


register(OpDef(
    name="recv", kind=OpKind.COLLECTIVE,
    precision=Precision.KEEP,
    summary="receive a tensor from the device `peer` steps back along a mesh axis",
    doc=("Point-to-point: receives what the device `peer` steps before this one along `mesh_axes` sent "
         "with `sdc.send`. The result type is declared."),
    operands=(),
    attrs={"mesh_axes": _AXES, "peer": attr("int", 1, "offset of the sender, counted backwards")},
    shape=_recv_rule, pure=False, ref=_recv_ref,
    example='%0 = "sdc.recv"() {mesh_axes = ["pp"], peer = 1 : i64} : () -> tensor<4x768xf32>',
))
