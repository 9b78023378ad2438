"""Ops that index by values, scan, sort and resample: gather/scatter by index tensors, cumulative
sums and products, top-k, resize and grid sampling, ROI align, col2im, the DFT, bitcast and the
determinant."""

from __future__ import annotations

import functools
import itertools
import math
from typing import TYPE_CHECKING

import numpy as np

from sdc import dtypes
from sdc.dialect import derivatives
from sdc.dialect.hooks import OpKind, Precision, ShardingRule, uniform
from sdc.dialect.opdef import OpDef, attr, register
from sdc.dialect.ops.core import shape_attr_dims
from sdc.dialect.ops.elementwise import FLOAT, INT, NUMERIC, check_dtype
from sdc.dialect.shapes import ShapeContext, TensorSpec, is_static, shape_str
from sdc.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")

# ---------------------------------------------------------------- helpers

@functools.cache
def _signed_twins() -> dict[torch.dtype, torch.dtype]:
    """torch's CPU gather/scatter/index kernels lack uint16/32/64: move their bits as the signed twin.

    A function, not a module-level dict: building it reads torch, which this module imports lazily.
    """
    return {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _movable(t: torch.Tensor) -> torch.Tensor:
    """A bit-identical view that torch's data-movement kernels accept."""
    twin = _signed_twins().get(t.dtype)
    return t.view(twin) if twin is not None else t


def _arith(t: torch.Tensor) -> torch.Tensor:
    """The tensor in a type torch's CPU arithmetic kernels accept (wide unsigned -> int64)."""
    return t.to(torch.int64) if t.dtype in _signed_twins() else t


def _wrap_index(idx: torch.Tensor, size) -> torch.Tensor:
    """Indices as int64 with negative ones counted from the end."""
    idx = idx.to(torch.int64)
    return torch.where(idx < 0, idx + size, idx)


def _static_product(dims) -> int:
    p = 1
    for d in dims:
        p *= int(d)
    return p


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    """Interpolating ops compute in f32 (f64 for f64 and integer inputs, which round at the end)."""
    if t.dtype == torch.float64 or not t.is_floating_point():
        return torch.float64
    return torch.float32


def _back_to(y: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An interpolated result in the operand's element type: integers round half to even and saturate."""
    if dtype.is_floating_point:
        return y.to(dtype)
    if dtype == torch.bool:
        return y != 0
    info = torch.iinfo(dtype)
    return torch.round(y).clamp(info.min, info.max).to(dtype)


def _check_same_dtype(ctx: ShapeContext, a: TensorSpec, b: TensorSpec, what_a: str, what_b: str) -> None:
    if a.dtype != b.dtype:
        ctx.fail(f"{what_a} and {what_b} element types differ: {what_a} is {a.dtype}, {what_b} is {b.dtype}")


# ---------------------------------------------------------------- gather_elements


def _gather_elements_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    data, indices = ins
    check_dtype(ctx, INT, indices, "indices")
    if data.rank == 0:
        ctx.fail("data must have rank >= 1, found a scalar")
    if indices.rank != data.rank:
        ctx.fail(f"indices must have data's rank {data.rank}, found rank {indices.rank}")
    axis = ctx.axis(attrs["axis"], data.rank)
    for d in range(data.rank):
        i, n = indices.shape[d], data.shape[d]
        if d != axis and is_static(i) and is_static(n) and i > n:
            ctx.fail(f"indices dim {d} is {i}, larger than data's {n}")
    return [TensorSpec(indices.shape, data.dtype)]


def _gather_elements_ref(env, a, data, indices):
    axis = a["axis"] % data.dim()
    idx = _wrap_index(indices, data.shape[axis])
    return torch.gather(_movable(data), axis, idx).view(data.dtype)


register(OpDef(
    name="gather_elements", kind=OpKind.INDEXING, vjp=derivatives.gather_elements_vjp,
    summary="take one element per index along an axis",
    doc=("`result[i0, ..., ik, ...] = data[i0, ..., indices[i0, ..., ik, ...], ...]` with the index replacing "
         "dim `axis` (numpy `take_along_axis`, torch `gather`). `indices` has data's rank, and the result "
         "has the shape of `indices`; its other dims may be smaller than data's. Negative indices count from "
         "the end."),
    operands=("data", "indices"), attrs={"axis": attr("int", 0, "the indexed dim")},
    shape=_gather_elements_rule, ref=_gather_elements_ref,
    example=('%2 = "sdc.gather_elements"(%0, %1) {axis = 1 : i64} : (tensor<?x10xf32>, tensor<?x1xi64>) '
             "-> tensor<?x1xf32>"),
))

# ---------------------------------------------------------------- gather_nd


def _gather_nd_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    data, indices = ins
    check_dtype(ctx, INT, indices, "indices")
    b = attrs["batch_dims"]
    if data.rank == 0 or indices.rank == 0:
        ctx.fail(f"data and indices must have rank >= 1, found ranks {data.rank} and {indices.rank}")
    if not 0 <= b < min(data.rank, indices.rank):
        ctx.fail(f"batch_dims {b} must be in [0, {min(data.rank, indices.rank)}) for data of rank {data.rank} "
                 f"and indices of rank {indices.rank}")
    k = indices.shape[-1]
    if not is_static(k):
        ctx.fail("the last dim of indices (the index depth) must be static")
    if not 1 <= k <= data.rank - b:
        ctx.fail(f"the last dim of indices is {k}, expected 1 to {data.rank - b} (data rank {data.rank} "
                 f"minus batch_dims {b})")
    lead = []
    for i in range(b):
        lead.append(ctx.equal(data.shape[i], indices.shape[i],
                              f"batch dim {i} differs: data has {{a}}, indices have {{b}}"))
    shape = tuple(lead) + indices.shape[b:-1] + data.shape[b + k:]
    return [TensorSpec(shape, data.dtype)]


def _gather_nd_ref(env, a, data, indices):
    b, k = a["batch_dims"], indices.shape[-1]
    batch = _static_product(data.shape[:b])
    indexed = data.shape[b:b + k]
    flat = _movable(data).reshape((batch,) + tuple(data.shape[b:]))
    idx = indices.reshape(batch, -1, k)
    cols = [_wrap_index(idx[..., j], indexed[j]) for j in range(k)]
    rows = torch.arange(batch).reshape(batch, 1).expand_as(cols[0])
    out = flat[(rows, *cols)]
    return out.reshape(tuple(indices.shape[:-1]) + tuple(data.shape[b + k:])).view(data.dtype)


register(OpDef(
    name="gather_nd", kind=OpKind.INDEXING, vjp=derivatives.gather_nd_vjp,
    summary="take slices addressed by index tuples",
    doc=("The last dim of `indices` holds k-tuples that address data's dims `batch_dims .. batch_dims+k-1`; "
         "each tuple takes the slice of the remaining dims. The leading `batch_dims` dims of data and indices "
         "are batch dims, matched one to one. Result dims: indices' without its last, then data's after the "
         "addressed ones (ONNX GatherND). Negative indices count from the end."),
    operands=("data", "indices"), attrs={"batch_dims": attr("int", 0, "leading dims shared by data and indices")},
    shape=_gather_nd_rule, ref=_gather_nd_ref,
    example=('%2 = "sdc.gather_nd"(%0, %1) {batch_dims = 0 : i64} : (tensor<4x5x6xf32>, tensor<?x2xi64>) '
             "-> tensor<?x6xf32>"),
))

# ---------------------------------------------------------------- scatter_elements / scatter_nd

_REDUCTIONS = ("none", "add", "mul", "max", "min")
_TORCH_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_elements_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    data, indices, updates = ins
    check_dtype(ctx, INT, indices, "indices")
    _check_same_dtype(ctx, data, updates, "data", "updates")
    if data.rank == 0:
        ctx.fail("data must have rank >= 1, found a scalar")
    if indices.rank != data.rank or updates.rank != data.rank:
        ctx.fail(f"indices and updates must have data's rank {data.rank}, found ranks {indices.rank} and "
                 f"{updates.rank}")
    axis = ctx.axis(attrs["axis"], data.rank)
    for d in range(data.rank):
        i = ctx.equal(indices.shape[d], updates.shape[d], f"dim {d} differs: indices have {{a}}, updates have {{b}}")
        n = data.shape[d]
        if d != axis and is_static(i) and is_static(n) and i > n:
            ctx.fail(f"indices dim {d} is {i}, larger than data's {n}")
    if attrs["reduction"] != "none" and data.dtype == "i1":
        ctx.fail(f"reduction '{attrs['reduction']}' needs a numeric element type, found i1")
    return [data]


def _scatter_elements_ref(env, a, data, indices, updates):
    axis = a["axis"] % data.dim()
    idx = _wrap_index(indices, data.shape[axis])
    if a["reduction"] == "none":
        return _movable(data).scatter(axis, idx, _movable(updates)).view(data.dtype)
    out = _arith(data).scatter_reduce(axis, idx, _arith(updates), _TORCH_REDUCE[a["reduction"]], include_self=True)
    return out.to(data.dtype)


register(OpDef(
    name="scatter_elements", kind=OpKind.INDEXING, vjp=derivatives.scatter_elements_vjp,
    precision=Precision.KEEP,  # it may accumulate (reduction = add)
    summary="write (or combine) updates at one index per element along an axis",
    doc=("A copy of `data` where `updates[i0, ..., ik, ...]` goes to `[i0, ..., indices[i0, ..., ik, ...], ...]` "
         "(dim `axis` replaced by the index; torch `scatter`). With `reduction` `add`, `mul`, `max` or `min` "
         "each update combines with the value there, data included, so repeated indices accumulate; with "
         "`none` the order of repeated writes is unspecified. `indices` and `updates` have one shape, of "
         "data's rank. Negative indices count from the end."),
    operands=("data", "indices", "updates"),
    attrs={
        "axis": attr("int", 0, "the indexed dim"),
        "reduction": attr("enum", "none", "`none` (overwrite), `add`, `mul`, `max` or `min`", _REDUCTIONS),
    },
    shape=_scatter_elements_rule, ref=_scatter_elements_ref,
    example=('%3 = "sdc.scatter_elements"(%0, %1, %2) {axis = 1 : i64, reduction = "add"} '
             ": (tensor<?x10xf32>, tensor<?x3xi64>, tensor<?x3xf32>) -> tensor<?x10xf32>"),
))


def _scatter_nd_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    data, indices, updates = ins
    check_dtype(ctx, INT, indices, "indices")
    _check_same_dtype(ctx, data, updates, "data", "updates")
    if data.rank == 0 or indices.rank == 0:
        ctx.fail(f"data and indices must have rank >= 1, found ranks {data.rank} and {indices.rank}")
    k = indices.shape[-1]
    if not is_static(k):
        ctx.fail("the last dim of indices (the index depth) must be static")
    if not 1 <= k <= data.rank:
        ctx.fail(f"the last dim of indices is {k}, expected 1 to data's rank {data.rank}")
    expected = indices.shape[:-1] + data.shape[k:]
    if updates.rank != len(expected):
        ctx.fail(f"updates must have shape {shape_str(expected)} (indices' dims but the last, then data's after "
                 f"the first {k}), found rank {updates.rank}")
    for d, (u, e) in enumerate(zip(updates.shape, expected)):
        ctx.equal(u, e, f"updates dim {d} is {{a}}, expected {{b}}")
    if attrs["reduction"] != "none" and data.dtype == "i1":
        ctx.fail(f"reduction '{attrs['reduction']}' needs a numeric element type, found i1")
    return [data]


def _scatter_nd_ref(env, a, data, indices, updates):
    k = indices.shape[-1]
    lead, rest = tuple(data.shape[:k]), tuple(data.shape[k:])
    idx = indices.reshape(-1, k)
    linear = torch.zeros(idx.shape[0], dtype=torch.int64)
    for j in range(k):
        linear = linear * lead[j] + _wrap_index(idx[:, j], lead[j])
    if a["reduction"] == "none":
        flat = _movable(data).reshape((-1,) + rest).clone()
        flat[linear] = _movable(updates).reshape((-1,) + rest)
        return flat.reshape(data.shape).view(data.dtype)
    flat = _arith(data).reshape((-1,) + rest).clone()
    upd = _arith(updates).reshape((-1,) + rest)
    index = linear.reshape((-1,) + (1,) * len(rest)).expand_as(upd)
    out = flat.scatter_reduce(0, index, upd, _TORCH_REDUCE[a["reduction"]], include_self=True)
    return out.reshape(data.shape).to(data.dtype)


register(OpDef(
    name="scatter_nd", kind=OpKind.INDEXING, vjp=derivatives.scatter_nd_vjp,
    precision=Precision.KEEP,  # it may accumulate (reduction = add)
    summary="write (or combine) slices at index tuples",
    doc=("A copy of `data` where each k-tuple in the last dim of `indices` addresses a slice of data (its "
         "first k dims) that takes the matching slice of `updates`, whose shape is indices' dims but the last "
         "followed by data's after the first k (ONNX ScatterND). `reduction` combines as in "
         "`sdc.scatter_elements`. Negative indices count from the end."),
    operands=("data", "indices", "updates"),
    attrs={"reduction": attr("enum", "none", "`none` (overwrite), `add`, `mul`, `max` or `min`", _REDUCTIONS)},
    shape=_scatter_nd_rule, ref=_scatter_nd_ref,
    example=('%3 = "sdc.scatter_nd"(%0, %1, %2) {reduction = "none"} '
             ": (tensor<4x4x4xf32>, tensor<2x1xi64>, tensor<2x4x4xf32>) -> tensor<4x4x4xf32>"),
))

# ---------------------------------------------------------------- cumsum / cumprod


def _scan_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, NUMERIC, x, "operand")
    if x.rank == 0:
        ctx.fail("operand must have rank >= 1, found a scalar")
    ctx.axis(attrs["axis"], x.rank)
    return [x]


def _scan_ref(scan_name: str, identity: int):
    """The reference of `torch.<scan_name>` (cumsum, cumprod) with sdc's exclusive/reverse options."""

    def ref(env, a, x):
        scan = getattr(torch, scan_name)
        axis = a["axis"] % x.dim()
        y = _arith(x)
        if a["reverse"]:
            y = y.flip(axis)
        y = scan(y, axis, dtype=y.dtype)
        if a["exclusive"] and y.shape[axis] > 0:
            first = torch.full_like(y.narrow(axis, 0, 1), identity)
            y = torch.cat((first, y.narrow(axis, 0, y.shape[axis] - 1)), dim=axis)
        if a["reverse"]:
            y = y.flip(axis)
        return y.to(x.dtype)

    return ref


_SCAN_ATTRS = {
    "axis": attr("int", doc="the scanned dim"),
    "exclusive": attr("bool", False, "leave out each element itself (the first result is the identity)"),
    "reverse": attr("bool", False, "scan from the last element toward the first"),
}

for _name, _identity, _sem, _vjp in (("cumsum", 0, "sum", derivatives.cumsum_vjp),
                                    ("cumprod", 1, "product", derivatives.cumprod_vjp)):
    register(OpDef(
        name=_name, kind=OpKind.SCAN, vjp=_vjp, accumulates=True, sharding=ShardingRule("blocked_axis", axis="axis"),
        summary=f"running {_sem} along an axis",
        doc=(f"Element i along `axis` is the {_sem} of elements 0..i (`exclusive`: 0..i-1, the first being "
             f"{_identity}); `reverse` runs from the end instead (i..n-1). Integers wrap around; the result "
             "has the operand's type."),
        operands=("operand",), attrs=_SCAN_ATTRS, shape=_scan_rule, ref=_scan_ref(_name, _identity),
        example=(f'%1 = "sdc.{_name}"(%0) {{axis = 1 : i64, exclusive = false, reverse = true}} '
                 ": (tensor<?x16xf32>) -> tensor<?x16xf32>"),
    ))

# ---------------------------------------------------------------- topk


def _topk_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, NUMERIC, x, "operand")
    if x.rank == 0:
        ctx.fail("operand must have rank >= 1, found a scalar")
    axis = ctx.axis(attrs["axis"], x.rank)
    k = attrs["k"]
    if k < 0:
        ctx.fail(f"k must be >= 0, found {k}")
    if is_static(x.shape[axis]) and k > x.shape[axis]:
        ctx.fail(f"k is {k}, larger than dim {axis} of size {x.shape[axis]}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [TensorSpec(shape, x.dtype), TensorSpec(shape, "i64")]


def _topk_ref(env, a, x):
    axis = a["axis"] % x.dim()
    # A stable sort keeps equal values in index order, which is the tie rule (lower index first).
    values, indices = torch.sort(x, dim=axis, descending=a["largest"], stable=True)
    return values.narrow(axis, 0, a["k"]).contiguous(), indices.narrow(axis, 0, a["k"]).contiguous()


register(OpDef(
    name="topk", kind=OpKind.SORTING, vjp=derivatives.topk_vjp,
    sharding=ShardingRule("blocked_axis", axis="axis"),
    summary="the k largest (or smallest) elements along an axis, with their indices",
    doc=("`values` holds the `k` largest elements along `axis` (the smallest with `largest = false`) in "
         "descending (ascending) order, `indices` their i64 positions; equal values keep index order. "
         "`sorted = false` allows any order; this definition always sorts."),
    operands=("operand",), results=("values", "indices"),
    attrs={
        "k": attr("int", doc="how many elements to keep"),
        "axis": attr("int", -1, "the searched dim"),
        "largest": attr("bool", True, "keep the largest (true) or smallest (false) elements"),
        "sorted": attr("bool", True, "whether the results must be in sorted order"),
    },
    shape=_topk_rule, ref=_topk_ref,
    example=('%1:2 = "sdc.topk"(%0) {axis = -1 : i64, k = 5 : i64, largest = true, sorted = true} '
             ": (tensor<?x100xf32>) -> (tensor<?x5xf32>, tensor<?x5xi64>)"),
))

# ---------------------------------------------------------------- resize

_RESIZE_MODES = ("nearest", "linear", "cubic")
_COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                     "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, NUMERIC, x, "operand")
    axes = ctx.axes(attrs["axes"], x.rank)
    sizes, scales, roi = list(attrs["sizes"]), list(attrs["scales"]), list(attrs["roi"])
    if len(sizes) != len(axes):
        ctx.fail(f"sizes has {len(sizes)} entries, expected one per resized axis ({len(axes)})")
    if any(isinstance(d, int) and d < 0 for d in sizes):
        ctx.fail(f"sizes {sizes} has a negative entry")
    if scales and len(scales) != len(axes):
        ctx.fail(f"scales has {len(scales)} entries, expected none or one per resized axis ({len(axes)})")
    if any(not s > 0 for s in scales):
        ctx.fail(f"scales {scales} must all be > 0")
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        if len(roi) != 2 * len(axes):
            ctx.fail(f"coordinate_transformation_mode 'tf_crop_and_resize' needs roi with {2 * len(axes)} entries "
                     f"(starts, then ends, per resized axis), found {len(roi)}")
    elif roi:
        ctx.fail("roi applies to coordinate_transformation_mode 'tf_crop_and_resize' only")
    if attrs["antialias"] and attrs["mode"] == "nearest":
        ctx.fail("antialias applies to modes 'linear' and 'cubic', not 'nearest'")
    out = list(x.shape)
    for ax, d in zip(axes, shape_attr_dims(sizes)):
        out[ax] = d
    return [x.with_shape(out)]


def _source_coords(mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float] | None):
    """Where each output position samples the input, and which positions lie outside (tf_crop_and_resize)."""
    y = torch.arange(out_len, dtype=torch.float64)
    width = scale * in_len  # the unrounded output length
    outside = None
    if mode == "align_corners":
        x = torch.zeros_like(y) if width == 1 else y * (in_len - 1) / (width - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_crop_and_resize":
        start, end = roi
        if width == 1:
            x = torch.full_like(y, (end - start) * (in_len - 1) / 2)
        else:
            x = y * (end - start) * (in_len - 1) / (width - 1)
        x = x + start * (in_len - 1)
        outside = (x < 0) | (x > in_len - 1)
    elif mode == "pytorch_half_pixel":
        x = torch.full_like(y, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric: the centre of the input maps to the centre of the output
        offset = in_len / 2 * (1 - out_len / width)
        x = offset + (y + 0.5) / scale - 0.5
    return x, outside


def _cubic_kernel(s: torch.Tensor, a: float) -> torch.Tensor:
    s = s.abs()
    near = ((a + 2) * s - (a + 3)) * s * s + 1
    far = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return torch.where(s <= 1, near, torch.where(s < 2, far, torch.zeros_like(s)))


def resize_taps(a: dict, out_len: int, in_len: int, scale: float, roi):
    """Per output position, the input indices and weights it combines: ([out, n] int64, [out, n] f64), and
    the positions that take `extrapolation_value` (or None)."""
    x, outside = _source_coords(a["coordinate_transformation_mode"], out_len, in_len, scale, roi)
    floor = torch.floor(x)
    # The fraction lies in (0, 1]: an exact input position counts as the right end of the interval before it.
    ratio = torch.where(x == floor, torch.ones_like(x), x - floor)
    mode = a["mode"]
    if mode == "nearest":
        pick_right = {
            "round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
            "floor": ratio == 1, "ceil": torch.ones_like(ratio, dtype=torch.bool),
        }[a["nearest_mode"]]
        weights = torch.stack((~pick_right, pick_right), dim=1).to(torch.float64)
    elif not a["antialias"]:
        if mode == "linear":
            weights = torch.stack((1 - ratio, ratio), dim=1)
        else:
            offsets = torch.tensor([-1.0, 0.0, 1.0, 2.0], dtype=torch.float64)
            weights = _cubic_kernel(offsets[None, :] - ratio[:, None], a["cubic_coeff_a"])
    else:
        # Antialiasing stretches the kernel by 1/scale when downsampling, then normalizes it.
        s = min(scale, 1.0)
        reach = 1 if mode == "linear" else 2
        first = math.floor(-reach / s) + 1
        offsets = torch.arange(first, 2 - first, dtype=torch.float64)
        args = (offsets[None, :] - ratio[:, None]) * s
        weights = (1 - args.abs()).clamp(0, 1) if mode == "linear" else _cubic_kernel(args, a["cubic_coeff_a"])
        weights = weights / weights.sum(dim=1, keepdim=True)
    n = weights.shape[1]
    frac = x - floor
    start = floor.to(torch.int64) - n // 2 + torch.where(frac == 0, 0, 1)
    index = start[:, None] + torch.arange(n)[None, :]
    if a["exclude_outside"] and mode != "nearest":
        weights = torch.where((index < 0) | (index >= in_len), torch.zeros_like(weights), weights)
        total = weights.sum(dim=1, keepdim=True)
        weights = weights / torch.where(total == 0, torch.ones_like(total), total)
    return index.clamp(0, in_len - 1), weights, outside


def _resize_axis(x: torch.Tensor, axis: int, index: torch.Tensor, weights: torch.Tensor, nearest: bool):
    out_len, n = index.shape
    if nearest:
        pick = index.gather(1, weights.argmax(dim=1, keepdim=True)).reshape(-1)
        return torch.index_select(_movable(x), axis, pick).view(x.dtype)
    taps = torch.index_select(x, axis, index.reshape(-1))
    taps = taps.reshape(x.shape[:axis] + (out_len, n) + x.shape[axis + 1:])
    w = weights.to(x.dtype).reshape((out_len, n) + (1,) * (x.dim() - axis - 1))
    return (taps * w).sum(dim=axis + 1)


_INTERPOLATE_MODES = {3: "linear", 4: "bilinear", 5: "trilinear"}


def _interpolated(a: dict, x: torch.Tensor, axes: list[int], sizes: list[int]) -> torch.Tensor | None:
    """`linear` resizing of the spatial dims as one torch `interpolate` call, where its coordinates are
    ONNX's: half_pixel (and pytorch_half_pixel, whose lengths-of-1 rule torch lacks) or align_corners,
    each dim's scale its output/input length, no antialias or exclude_outside; None elsewhere. The
    general path gathers taps and sums them per axis, through int64 indices and f64 weights: 1.2 ms
    where this takes 0.1 ms on the segmentation model's upsampling."""
    if a["mode"] != "linear" or a["antialias"] or a["exclude_outside"] or x.dim() not in _INTERPOLATE_MODES:
        return None
    if x.dtype not in (torch.float32, torch.float64):
        return None
    out = list(x.shape)
    for ax, n in zip(axes, sizes):
        out[ax] = n
    if out[:2] != list(x.shape[:2]) or 0 in out or 0 in x.shape:
        return None
    if a["scales"] and not all(math.isclose(s, out[ax] / x.shape[ax], rel_tol=1e-6)
                               for s, ax in zip(a["scales"], axes)):
        return None
    mode = a["coordinate_transformation_mode"]
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and min(out[2:]) > 1):
        corners = False
    elif mode == "align_corners":
        corners = True
    else:
        return None
    return torch.nn.functional.interpolate(x, size=out[2:], mode=_INTERPOLATE_MODES[x.dim()], align_corners=corners)


def _resize_ref(env, a, x):
    axes = [ax % x.dim() for ax in a["axes"]]
    sizes = [env.dim(d) for d in a["sizes"]]
    fast = _interpolated(a, x, axes, sizes)
    if fast is not None:
        return fast
    roi = a["roi"]
    nearest = a["mode"] == "nearest"
    y = x if nearest else x.to(_compute_dtype(x))
    for i, (axis, out_len) in enumerate(zip(axes, sizes)):
        in_len = y.shape[axis]
        scale = a["scales"][i] if a["scales"] else out_len / in_len
        axis_roi = (roi[i], roi[len(axes) + i]) if roi else None
        if math.isclose(scale, 1.0) and out_len == in_len and (
                axis_roi is None or (math.isclose(axis_roi[0], 0.0) and math.isclose(axis_roi[1], 1.0))):
            continue
        index, weights, outside = resize_taps(a, out_len, in_len, scale, axis_roi)
        y = _resize_axis(y, axis, index, weights, nearest)
        if outside is not None and bool(outside.any()):
            mask = outside.reshape((out_len,) + (1,) * (y.dim() - axis - 1))
            fill = _back_to(torch.tensor(a["extrapolation_value"], dtype=torch.float64), y.dtype)
            y = torch.where(mask, fill, y)
    if nearest:
        return y.clone() if y is x else y
    return _back_to(y, x.dtype)


register(OpDef(
    name="resize", kind=OpKind.RESAMPLING,
    layout=uniform("resizing follows the resized dims wherever they lie"),
    summary="resample along some axes by nearest, linear or cubic interpolation",
    doc=("Resizes each dim in `axes` (in that order) to the length in `sizes` (ints or dim expressions), "
         "as ONNX Resize: output position i samples input coordinate `x(i)` given by "
         "`coordinate_transformation_mode` and the axis' scale (`scales`, or output/input length when empty), "
         "e.g. `half_pixel`: `(i + 0.5) / scale - 0.5`. `nearest` takes one input element (rounded per "
         "`nearest_mode`), `linear` two and `cubic` four (Keys' kernel with `cubic_coeff_a`), clamping at the "
         "edges; `exclude_outside` drops taps beyond the edge and renormalizes; `antialias` widens the "
         "kernel by 1/scale when downsampling. With `tf_crop_and_resize`, `roi` gives the crop (starts, then "
         "ends, normalized) and coordinates outside the input take `extrapolation_value`. Integers round "
         "half to even."),
    operands=("operand",),
    attrs={
        "axes": attr("ints", doc="the resized dims"),
        "sizes": attr("shape", doc="the result's length of each resized dim"),
        "scales": attr("floats", [], "each resized dim's coordinate scale (empty: output/input length)"),
        "mode": attr("enum", "nearest", "`nearest`, `linear` or `cubic`", _RESIZE_MODES),
        "coordinate_transformation_mode": attr(
            "enum", "half_pixel", "how output positions map to input coordinates (the ONNX modes)",
            _COORDINATE_MODES),
        "nearest_mode": attr("enum", "round_prefer_floor", "rounding for mode `nearest`", _NEAREST_MODES),
        "cubic_coeff_a": attr("float", -0.75, "the cubic kernel's parameter"),
        "exclude_outside": attr("bool", False, "linear and cubic: give taps outside the input weight 0 and "
                                "renormalize"),
        "extrapolation_value": attr("float", 0.0, "the value outside the roi for `tf_crop_and_resize`"),
        "antialias": attr("bool", False, "widen the kernel when downsampling (linear and cubic)"),
        "roi": attr("floats", [], "for `tf_crop_and_resize`: starts then ends, normalized, per resized dim"),
    },
    shape=_resize_rule, ref=_resize_ref,
    example=('%1 = "sdc.resize"(%0) {axes = array<i64: 2, 3>, coordinate_transformation_mode = "asymmetric", '
             'mode = "nearest", nearest_mode = "floor", scales = array<f64: 2.0, 2.0>, sizes = ["2*H", 64]} '
             ": (tensor<1x3x?x32xf32>) -> tensor<1x3x?x64xf32>"),
))

# ---------------------------------------------------------------- grid_sample


def _grid_sample_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x, grid = ins
    check_dtype(ctx, FLOAT, x, "input")
    check_dtype(ctx, FLOAT, grid, "grid")
    if x.rank < 3:
        ctx.fail(f"input must have rank >= 3 (N, C, spatial...), found rank {x.rank}")
    n = x.rank - 2
    if grid.rank != x.rank:
        ctx.fail(f"grid must have input's rank {x.rank} (N, output spatial..., {n}), found rank {grid.rank}")
    ctx.equal(grid.shape[-1], n, f"grid's last dim is {{a}}, expected {{b}} (one coordinate per spatial dim)")
    batch = ctx.equal(x.shape[0], grid.shape[0], "batch dims differ: input has {a}, grid has {b}")
    return [TensorSpec((batch, x.shape[1]) + grid.shape[1:-1], x.dtype)]


def _reflect(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """Fold coordinates outside [lo, hi] back in, as a mirror at each border."""
    span = hi - lo
    if span <= 0:
        return torch.full_like(x, lo)
    below, above = x < lo, x > hi
    dist = torch.where(below, lo - x, x - hi)
    folds = torch.trunc(dist / span)
    rest = dist - folds * span
    even = torch.remainder(folds, 2) == 0
    from_below = torch.where(even, lo + rest, hi - rest)
    from_above = torch.where(even, hi - rest, lo + rest)
    return torch.where(below, from_below, torch.where(above, from_above, x))


def _grid_taps(coord: torch.Tensor, size: int, a: dict):
    """For one spatial dim: per sample point, the tap indices, weights and validity ([T, Q] each)."""
    align = a["align_corners"]
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    padding = a["padding_mode"]
    x = (coord + 1) / 2 * (size - 1) if align else ((coord + 1) * size - 1) / 2
    if a["mode"] == "nearest":
        x = torch.round(x)  # half to even
    out = (x < lo) | (x > hi)
    if padding == "border":
        x = torch.where(out, x.clamp(0, size - 1), x)
    elif padding == "reflection":
        x = torch.where(out, _reflect(x, lo, hi), x)
    if a["mode"] == "nearest":
        taps, weights = torch.trunc(x)[None], torch.ones_like(x)[None]
    else:
        base = torch.floor(x)
        t = x - base
        if a["mode"] == "linear":
            taps = torch.stack((base, base + 1))
            weights = torch.stack((1 - t, t))
        else:
            offsets = torch.tensor([-1.0, 0.0, 1.0, 2.0], dtype=x.dtype).reshape(4, 1, 1)
            taps = base[None] + offsets
            weights = _cubic_kernel(offsets - t[None], -0.75)
    if padding == "zeros":
        valid = (taps >= 0) & (taps < size)
    else:
        valid = torch.ones_like(taps, dtype=torch.bool)
        taps = taps.clamp(0, size - 1) if padding == "border" else torch.trunc(_reflect(taps, lo, hi))
    index = taps.clamp(0, size - 1).to(torch.int64)
    return index, weights, valid


def _grid_sample_ref(env, a, x, grid):
    batch, channels = x.shape[:2]
    dims = tuple(x.shape[2:])
    out_spatial = tuple(grid.shape[1:-1])
    cdt = torch.float64 if torch.float64 in (x.dtype, grid.dtype) else torch.float32
    points = grid.to(cdt).reshape(batch, -1, len(dims))
    # The grid lists coordinates fastest dim first: (x, y[, z]) address (..., H, W) from the back.
    per_dim = [_grid_taps(points[..., len(dims) - 1 - i], size, a) for i, size in enumerate(dims)]
    flat = x.to(cdt).reshape(batch, channels, -1)
    strides = [_static_product(dims[i + 1:]) for i in range(len(dims))]
    out = torch.zeros(batch, channels, points.shape[1], dtype=cdt)
    for combo in itertools.product(*[range(p[0].shape[0]) for p in per_dim]):
        index = sum(per_dim[i][0][t] * strides[i] for i, t in enumerate(combo))
        weight = torch.ones_like(points[..., 0])
        for i, t in enumerate(combo):
            weight = weight * torch.where(per_dim[i][2][t], per_dim[i][1][t], torch.zeros_like(weight))
        values = torch.gather(flat, 2, index[:, None, :].expand(batch, channels, -1))
        out += values * weight[:, None, :]
    return out.reshape((batch, channels) + out_spatial).to(x.dtype)


register(OpDef(
    name="grid_sample", kind=OpKind.RESAMPLING,
    summary="sample the input at normalized grid coordinates",
    doc=("For each point of `grid` ([N, out spatial..., n]; the last dim lists coordinates fastest dim "
         "first, (x, y[, z])), samples the input's n spatial dims at that location, normalized to [-1, 1] "
         "(the corner pixels' centres with `align_corners`, their outer edges without). `mode` `nearest` "
         "(round half to even), `linear` or `cubic` (Keys, a = -0.75); `padding_mode` says what lies outside: "
         "`zeros`, the `border` value, or a `reflection` at the borders (ONNX GridSample, torch grid_sample). "
         "The result is [N, C, out spatial...]."),
    operands=("input", "grid"),
    attrs={
        "mode": attr("enum", "linear", "`nearest`, `linear` or `cubic`", _RESIZE_MODES),
        "padding_mode": attr("enum", "zeros", "`zeros`, `border` or `reflection`", ("zeros", "border", "reflection")),
        "align_corners": attr("bool", False, "-1 and 1 are the corner pixels' centres (not their outer edges)"),
    },
    shape=_grid_sample_rule, ref=_grid_sample_ref,
    example=('%2 = "sdc.grid_sample"(%0, %1) {align_corners = false, mode = "linear", padding_mode = "zeros"} '
             ": (tensor<?x3x32x32xf32>, tensor<?x16x16x2xf32>) -> tensor<?x3x16x16xf32>"),
))

# ---------------------------------------------------------------- dft


def _dft_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, FLOAT, x, "operand")
    if x.rank < 2:
        ctx.fail(f"operand must have rank >= 2 (signal dims, then 1 or 2 for real or complex), found rank {x.rank}")
    if not (is_static(x.shape[-1]) and x.shape[-1] in (1, 2)):
        ctx.fail(f"the last dim must be 1 (real) or 2 (real and imaginary parts), found {x.shape[-1]}")
    axis = ctx.axis(attrs["axis"], x.rank)
    if axis == x.rank - 1:
        ctx.fail(f"axis {attrs['axis']} is the real/imaginary dim; the transformed axis must come before it")
    length = attrs["length"]
    if length < 1:
        ctx.fail(f"length must be >= 1, found {length}")
    inverse, onesided = attrs["inverse"], attrs["onesided"]
    out = list(x.shape)
    out[axis] = length // 2 + 1 if onesided and not inverse else length
    out[-1] = 1 if inverse and onesided else 2
    return [x.with_shape(out)]


def _dft_ref(env, a, x):
    # numpy's pocketfft, in the operand's precision (single for f16/bf16/f32): what ONNX's reference runs.
    axis, n = a["axis"] % x.dim(), a["length"]
    single = x.dtype != torch.float64
    parts = x.to(torch.float32 if single else torch.float64).numpy()
    signal = np.empty(parts.shape[:-1], dtype=np.complex64 if single else np.complex128)
    signal.real = parts[..., 0]
    signal.imag = parts[..., 1] if parts.shape[-1] == 2 else 0
    if a["inverse"] and a["onesided"]:
        return torch.from_numpy(np.fft.irfft(signal, n=n, axis=axis)[..., None]).to(x.dtype)
    if a["inverse"]:
        spectrum = np.fft.ifft(signal, n=n, axis=axis)
    else:
        spectrum = np.fft.fft(signal, n=n, axis=axis)
        if a["onesided"]:
            spectrum = np.take(spectrum, np.arange(n // 2 + 1), axis=axis)
    return torch.from_numpy(np.stack((spectrum.real, spectrum.imag), axis=-1)).to(x.dtype)


register(OpDef(
    name="dft", kind=OpKind.SIGNAL,
    summary="discrete Fourier transform along an axis",
    doc=("Complex numbers are pairs in the last dim (size 2: real, imaginary; size 1: real input). The "
         "transform of length `length` runs along `axis` (zero-padded or truncated to it): "
         "`X[k] = sum_n x[n] e^(-2 pi i k n / length)`, or with `inverse` the inverse, scaled by 1/length. "
         "`onesided` keeps the non-redundant half, `length // 2 + 1` bins, of a real signal's transform; "
         "with `inverse` it reads such a half and gives the real signal (last dim 1)."),
    operands=("operand",),
    attrs={
        "axis": attr("int", doc="the transformed dim (not the last)"),
        "length": attr("int", doc="the transform length"),
        "inverse": attr("bool", False, "the inverse transform"),
        "onesided": attr("bool", False, "half spectrum (real signals)"),
    },
    shape=_dft_rule, ref=_dft_ref,
    example=('%1 = "sdc.dft"(%0) {axis = 1 : i64, inverse = false, length = 16 : i64, onesided = true} '
             ": (tensor<?x16x1xf32>) -> tensor<?x9x2xf32>"),
))

# ---------------------------------------------------------------- bitcast


def _bitcast_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x, target = ins[0], attrs["dtype"]
    have, want = dtypes.itemsize(x.dtype) * 8, dtypes.itemsize(target) * 8
    if have != want:
        ctx.fail(f"bitcast needs equal element widths: {x.dtype} has {have} bits, {target} has {want}")
    return [x.with_dtype(target)]


register(OpDef(
    name="bitcast", kind=OpKind.VALUES,
    precision=Precision.KEEP, differentiable=False,
    summary="reinterpret each element's bits as another type of the same width",
    doc=("Each element's bytes, read as `dtype` (same width; i1 is one byte holding 0 or 1). The shape is "
         "unchanged; no value conversion happens (that is `sdc.cast`)."),
    operands=("operand",), attrs={"dtype": attr("dtype", doc="the result element type")},
    shape=_bitcast_rule, ref=lambda env, a, x: x.view(dtypes.to_torch(a["dtype"])).clone(),
    example='%1 = "sdc.bitcast"(%0) {dtype = i32} : (tensor<?x4xf32>) -> tensor<?x4xi32>',
))

# ---------------------------------------------------------------- col2im


def _col2im_geometry(ctx: ShapeContext, attrs: dict):
    image, block = list(attrs["image_shape"]), list(attrs["block_shape"])
    n = len(image)
    if n == 0 or len(block) != n:
        ctx.fail(f"image_shape and block_shape need one entry per spatial dim, found {len(image)} and {len(block)}")
    strides = list(attrs["strides"]) or [1] * n
    dilations = list(attrs["dilations"]) or [1] * n
    pads = list(attrs["pads"]) or [0] * (2 * n)
    if len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        ctx.fail(f"strides, dilations and pads need {n}, {n} and {2 * n} entries, found {len(strides)}, "
                 f"{len(dilations)} and {len(pads)}")
    for what, values in (("image_shape", image), ("block_shape", block), ("strides", strides),
                         ("dilations", dilations)):
        if any(v < 1 for v in values):
            ctx.fail(f"{what} {values} must be >= 1")
    if any(p < 0 for p in pads):
        ctx.fail(f"pads {pads} must be >= 0")
    counts = [(image[i] + pads[i] + pads[n + i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(n)]
    if any(c < 1 for c in counts):
        ctx.fail(f"the block {block} does not fit in the padded image {image}")
    return image, block, strides, dilations, pads, counts


def _col2im_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, NUMERIC, x, "input")
    if x.rank != 3:
        ctx.fail(f"input must have rank 3 (N, C * block size, blocks), found rank {x.rank}")
    image, block, _, _, _, counts = _col2im_geometry(ctx, attrs)
    kernel = _static_product(block)
    ctx.divisible(x.shape[1], kernel, f"input dim 1 of size {{a}} is not a multiple of the block size {{b}}")
    ctx.equal(x.shape[2], _static_product(counts), f"input dim 2 is {{a}}, expected {{b}} blocks ({counts})")
    return [TensorSpec((x.shape[0], x.shape[1] // kernel) + tuple(image), x.dtype)]


def _col2im_ref(env, a, x):
    image, block, strides, dilations, pads, counts = _col2im_geometry(ShapeContext(), a)
    n = len(image)
    # Target pixel of every (block offset, block position) pair; those in the padding go to a spare slot.
    target = torch.zeros([_static_product(block), _static_product(counts)], dtype=torch.int64)
    inside = torch.ones_like(target, dtype=torch.bool)
    for i in range(n):
        offset = torch.arange(block[i]) * dilations[i]
        start = torch.arange(counts[i]) * strides[i] - pads[i]
        pos = offset[:, None] + start[None, :]  # [block_i, count_i]
        view = [1] * (2 * n)
        view[i], view[n + i] = block[i], counts[i]
        pos = pos.reshape(view).expand(block + counts).reshape(target.shape)
        inside &= (pos >= 0) & (pos < image[i])
        target = target * image[i] + pos.clamp(0, image[i] - 1)
    pixels = _static_product(image)
    target = torch.where(inside, target, pixels)
    batch, channels = x.shape[0], x.shape[1] // target.shape[0]
    src = _arith(x).reshape(batch, channels, -1)
    out = torch.zeros(batch, channels, pixels + 1, dtype=src.dtype)
    out.scatter_add_(2, target.reshape(1, 1, -1).expand(batch, channels, -1), src)
    return out[..., :pixels].reshape([batch, channels] + image).to(x.dtype)


register(OpDef(
    name="col2im", kind=OpKind.RESAMPLING,
    summary="sum sliding blocks back into an image (the inverse layout of im2col)",
    doc=("The input [N, C * prod(block_shape), L] holds, per channel and offset inside the block, the values "
         "of L blocks that slide over the padded image with `strides` and `dilations`; each value is added "
         "to the image pixel it covers (values in the padding drop). The result is [N, C, image_shape...]; "
         "`pads` lists all begins, then all ends (torch `fold`, N-d)."),
    operands=("input",),
    attrs={
        "image_shape": attr("ints", doc="the spatial dims of the result"),
        "block_shape": attr("ints", doc="the sliding block's spatial dims"),
        "strides": attr("ints", [], "block step per spatial dim (default 1)"),
        "dilations": attr("ints", [], "spacing of a block's elements per spatial dim (default 1)"),
        "pads": attr("ints", [], "image padding: all begins, then all ends (default 0)"),
    },
    shape=_col2im_rule, ref=_col2im_ref,
    example=('%1 = "sdc.col2im"(%0) {block_shape = array<i64: 3, 3>, image_shape = array<i64: 5, 5>, '
             "strides = array<i64: 2, 2>} : (tensor<?x18x4xf32>) -> tensor<?x2x5x5xf32>"),
))

# ---------------------------------------------------------------- roi_align


def _roi_align_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x, rois, batch_indices = ins
    check_dtype(ctx, FLOAT, x, "input")
    check_dtype(ctx, INT, batch_indices, "batch_indices")
    _check_same_dtype(ctx, x, rois, "input", "rois")
    if x.rank != 4:
        ctx.fail(f"input must have rank 4 (N, C, H, W), found rank {x.rank}")
    if rois.rank != 2:
        ctx.fail(f"rois must have rank 2 (num_rois, 4), found rank {rois.rank}")
    ctx.equal(rois.shape[1], 4, "rois' last dim is {a}, expected {b} (x1, y1, x2, y2)")
    if batch_indices.rank != 1:
        ctx.fail(f"batch_indices must have rank 1, found rank {batch_indices.rank}")
    count = ctx.equal(rois.shape[0], batch_indices.shape[0], "rois has {a} boxes, batch_indices has {b}")
    height, width = attrs["output_height"], attrs["output_width"]
    if height < 1 or width < 1:
        ctx.fail(f"output_height and output_width must be >= 1, found {height} and {width}")
    if attrs["sampling_ratio"] < 0:
        ctx.fail(f"sampling_ratio must be >= 0, found {attrs['sampling_ratio']}")
    return [TensorSpec((count, x.shape[1], height, width), x.dtype)]


def _roi_axis(start: float, length: float, bins: int, grid: int, size: int):
    """Bilinear taps of a box's sample points along one axis: low/high indices and weights [bins, grid]."""
    step = length / bins
    pos = start + torch.arange(bins, dtype=torch.float64)[:, None] * step + \
        (torch.arange(grid, dtype=torch.float64)[None, :] + 0.5) * step / grid
    outside = (pos < -1.0) | (pos > size)
    pos = pos.clamp(min=0)
    low = torch.floor(pos).to(torch.int64)
    at_edge = low >= size - 1
    low = torch.where(at_edge, size - 1, low)
    high = torch.where(at_edge, low, low + 1)
    pos = torch.where(at_edge, low.to(torch.float64), pos)
    frac = pos - low
    zero = torch.zeros_like(frac)
    return low, high, torch.where(outside, zero, 1 - frac), torch.where(outside, zero, frac)


def _roi_align_ref(env, a, x, rois, batch_indices):
    channels, height, width = x.shape[1:]
    oh, ow = a["output_height"], a["output_width"]
    half_pixel = a["coordinate_transformation_mode"] == "half_pixel"
    out = torch.empty(rois.shape[0], channels, oh, ow, dtype=torch.float64)
    data = x.to(torch.float64)
    for r, (box, b) in enumerate(zip(rois.to(torch.float64).tolist(), batch_indices.tolist())):
        shift = 0.5 if half_pixel else 0.0
        x1, y1, x2, y2 = (v * a["spatial_scale"] - shift for v in box)
        roi_w, roi_h = x2 - x1, y2 - y1
        if not half_pixel:  # malformed boxes count as 1x1
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        gh = a["sampling_ratio"] or math.ceil(roi_h / oh)
        gw = a["sampling_ratio"] or math.ceil(roi_w / ow)
        if gh < 1 or gw < 1:  # an empty box (half_pixel allows them) has no samples
            out[r] = 0
            continue
        ylo, yhi, wylo, wyhi = _roi_axis(y1, roi_h, oh, gh, height)
        xlo, xhi, wxlo, wxhi = _roi_axis(x1, roi_w, ow, gw, width)
        image = data[b]
        if a["mode"] == "avg":
            # Bilinear sampling is separable: a [oh, H] and a [ow, W] weight matrix, summed over the samples.
            wy = torch.zeros(oh, height, dtype=torch.float64)
            wy.scatter_add_(1, ylo.reshape(oh, -1), wylo.reshape(oh, -1))
            wy.scatter_add_(1, yhi.reshape(oh, -1), wyhi.reshape(oh, -1))
            wx = torch.zeros(ow, width, dtype=torch.float64)
            wx.scatter_add_(1, xlo.reshape(ow, -1), wxlo.reshape(ow, -1))
            wx.scatter_add_(1, xhi.reshape(ow, -1), wxhi.reshape(ow, -1))
            out[r] = torch.matmul(torch.matmul(wy, image), wx.T) / (gh * gw)
        else:
            # Max pooling takes, per sample, the largest of the four weighted corners (as onnxruntime does).
            best = None
            for yi, wy in ((ylo, wylo), (yhi, wyhi)):
                for xi, wx in ((xlo, wxlo), (xhi, wxhi)):
                    vals = image[:, yi[:, :, None, None], xi[None, None, :, :]]  # [C, oh, gh, ow, gw]
                    vals = vals * (wy[:, :, None, None] * wx[None, None, :, :])
                    best = vals if best is None else torch.maximum(best, vals)
            out[r] = best.amax(dim=(2, 4))
    return out.to(x.dtype)


register(OpDef(
    name="roi_align", kind=OpKind.RESAMPLING,
    summary="pool each region of interest to a fixed size by bilinear sampling",
    doc=("For box r of `rois` ([R, 4]: x1, y1, x2, y2 in input pixels times `spatial_scale`) on image "
         "`batch_indices[r]`, splits the box into output_height x output_width bins, samples each bin on a "
         "`sampling_ratio` x `sampling_ratio` grid (0: ceil(bin size)) by bilinear interpolation, and "
         "averages the samples (`avg`) or takes the largest weighted corner value (`max`). `half_pixel` "
         "shifts the box by -0.5 pixel; `output_half_pixel` does not, and stretches boxes smaller than one "
         "pixel to one (ONNX RoiAlign). The result is [R, C, output_height, output_width]."),
    operands=("input", "rois", "batch_indices"),
    attrs={
        "output_height": attr("int", 1, "bins per box vertically"),
        "output_width": attr("int", 1, "bins per box horizontally"),
        "sampling_ratio": attr("int", 0, "samples per bin and axis (0: adaptive)"),
        "spatial_scale": attr("float", 1.0, "box coordinates' scale to input pixels"),
        "mode": attr("enum", "avg", "`avg` or `max`", ("avg", "max")),
        "coordinate_transformation_mode": attr("enum", "half_pixel", "`half_pixel` or `output_half_pixel`",
                                               ("half_pixel", "output_half_pixel")),
    },
    shape=_roi_align_rule, ref=_roi_align_ref,
    example=('%3 = "sdc.roi_align"(%0, %1, %2) {output_height = 7 : i64, output_width = 7 : i64, '
             "sampling_ratio = 2 : i64, spatial_scale = 6.250000e-02 : f64} "
             ": (tensor<1x256x50x50xf32>, tensor<?x4xf32>, tensor<?xi64>) -> tensor<?x256x7x7xf32>"),
))

# ---------------------------------------------------------------- det


def _det_rule(ctx: ShapeContext, ins: list[TensorSpec], attrs: dict) -> list[TensorSpec]:
    x = ins[0]
    check_dtype(ctx, FLOAT, x, "operand")
    if x.rank < 2:
        ctx.fail(f"operand must have rank >= 2 (batch..., M, M), found rank {x.rank}")
    ctx.equal(x.shape[-2], x.shape[-1], "matrices must be square, found {a}x{b}")
    return [x.with_shape(x.shape[:-2])]


def _det_ref(env, a, x):
    wide = x.to(torch.float64) if x.dtype != torch.float32 else x
    return torch.linalg.det(wide).to(x.dtype)


register(OpDef(
    name="det", kind=OpKind.LINEAR_ALGEBRA,
    summary="determinant of square matrices",
    doc="The determinant of each [M, M] matrix in the trailing two dims; leading dims are batch dims.",
    operands=("operand",), shape=_det_rule, ref=_det_ref,
    example='%1 = "sdc.det"(%0) : (tensor<?x3x3xf32>) -> tensor<?xf32>',
))
