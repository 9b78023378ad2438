"""The indexing, scan, sorting, resampling and signal ops (sdc/dialect/ops/indexing.py): reference
semantics against independent numpy (or torch / onnxruntime) implementations on random inputs,
shape-rule errors, and the ONNX importer's decompositions (sdc/frontend/onnx_ops_indexing.py)
end to end against onnxruntime."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from refcheck import assert_matches, call, random, rng  # noqa: F401 (rng: fixture)
from sdc.dialect.opdef import get_op
from sdc.dialect.shapes import ShapeContext, ShapeError, TensorSpec

# ---------------------------------------------------------------- gather / scatter


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis, rng):
    data = random(rng, (4, 5, 3))
    shape = [4, 5, 3]
    shape[axis] = 6
    size = data.shape[axis]
    indices = random(rng, shape, "i64", -size, size - 1)
    want = np.take_along_axis(data, np.where(indices < 0, indices + size, indices), axis=axis)
    assert_matches(call("gather_elements", data, indices, axis=axis), want, "f32")


def test_gather_elements_wide_unsigned(rng):
    data = random(rng, (3, 4), "ui64", 0, 2**40)
    indices = random(rng, (3, 2), "i32", 0, 3)
    assert_matches(call("gather_elements", data, indices, axis=1), np.take_along_axis(data, indices, 1), "ui64")


def _gather_nd(data, indices, batch_dims):
    """GatherND by its definition: loop over batch positions and index tuples."""
    batch_shape = data.shape[:batch_dims]
    out = []
    for b in np.ndindex(*batch_shape):
        for tup in indices[b].reshape(-1, indices.shape[-1]):
            out.append(data[b + tuple(int(t) for t in tup)])
    return np.array(out).reshape(indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:])


@pytest.mark.parametrize("batch_dims,depth", [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (2, 1)])
def test_gather_nd(batch_dims, depth, rng):
    data = random(rng, (2, 3, 4, 5))
    lead = list(data.shape[:batch_dims])
    indices = np.stack([random(rng, lead + [3], "i64", -data.shape[batch_dims + j], data.shape[batch_dims + j] - 1)
                        for j in range(depth)], axis=-1)
    got = call("gather_nd", data, indices, batch_dims=batch_dims)
    assert_matches(got, _gather_nd(data, indices, batch_dims), "f32")


_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, -1])
def test_scatter_elements(reduction, axis, rng):
    data = random(rng, (4, 5))
    shape = [4, 5]
    shape[axis] = 3
    size = data.shape[axis]
    if reduction == "none":  # distinct targets per line: repeated writes have no defined order
        picks = np.stack([rng.permutation(size)[:3] for _ in range(4 if axis else 5)])
        indices = picks.T if axis == 0 else picks
    else:
        indices = random(rng, shape, "i64", -size, size - 1)
    updates = random(rng, shape)
    want = data.copy()
    for pos in np.ndindex(*shape):
        target = list(pos)
        target[axis] = indices[pos] % size
        target = tuple(target)
        want[target] = updates[pos] if reduction == "none" else _UFUNC[reduction](want[target], updates[pos])
    got = call("scatter_elements", data, indices, updates, axis=axis, reduction=reduction)
    assert_matches(got, want, "f32")


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("depth", [1, 2])
def test_scatter_nd(reduction, depth, rng):
    data = random(rng, (4, 3, 2), "i32", -9, 9)
    count = 5 if reduction != "none" else 3
    if reduction == "none":
        flat = rng.permutation(int(np.prod(data.shape[:depth])))[:count]
        indices = np.stack(np.unravel_index(flat, data.shape[:depth]), axis=-1).astype(np.int64)
    else:
        indices = np.stack([random(rng, (count,), "i64", 0, data.shape[j] - 1) for j in range(depth)], axis=-1)
    updates = random(rng, (count,) + data.shape[depth:], "i32", -9, 9)
    want = data.copy()
    for i, tup in enumerate(indices):
        t = tuple(tup)
        want[t] = updates[i] if reduction == "none" else _UFUNC[reduction](want[t], updates[i])
    assert_matches(call("scatter_nd", data, indices, updates, reduction=reduction), want, "i32")


def test_scatter_nd_negative_indices(rng):
    data = random(rng, (4, 3))
    updates = random(rng, (1, 3))
    want = data.copy()
    want[-1] = updates[0]
    assert_matches(call("scatter_nd", data, np.array([[-1]]), updates), want, "f32")


# ---------------------------------------------------------------- scans and top-k


@pytest.mark.parametrize("name,fn", [("cumsum", np.cumsum), ("cumprod", np.cumprod)])
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_scans(name, fn, exclusive, reverse, dtype, rng):
    x = random(rng, (3, 5), dtype, -2, 2)
    axis = 1
    y = np.flip(x, axis) if reverse else x
    scanned = fn(y, axis=axis, dtype=y.dtype)
    if exclusive:
        identity = np.full((3, 1), 0 if name == "cumsum" else 1, dtype=y.dtype)
        scanned = np.concatenate([identity, scanned[:, :-1]], axis=axis)
    want = np.flip(scanned, axis) if reverse else scanned
    got = call(name, x, axis=axis, exclusive=exclusive, reverse=reverse)
    assert_matches(got, want, dtype)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("axis", [0, -1])
def test_topk(largest, axis, rng):
    x = random(rng, (6, 7), "i32", 0, 4)  # many ties: lower indices come first
    k = 3
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    want_idx = np.take(order, np.arange(k), axis=axis)
    values, indices = call("topk", x, k=k, axis=axis, largest=largest)
    assert_matches(indices, want_idx, "i64")
    assert_matches(values, np.take_along_axis(x, want_idx, axis), "i32")


# ---------------------------------------------------------------- resize


def _source(mode, i, out_len, in_len, scale, roi):
    """ONNX Resize's coordinate transformations, one output position at a time."""
    width = scale * in_len
    if mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if width != 1 else -0.5
    if mode == "align_corners":
        return 0.0 if width == 1 else i * (in_len - 1) / (width - 1)
    if mode == "asymmetric":
        return i / scale
    start, end = roi  # tf_crop_and_resize
    if width == 1:
        return (end - start) * (in_len - 1) / 2 + start * (in_len - 1)
    return i * (end - start) * (in_len - 1) / (width - 1) + start * (in_len - 1)


def _keys(s, a):
    s = abs(s)
    if s <= 1:
        return (a + 2) * s**3 - (a + 3) * s**2 + 1
    if s < 2:
        return a * s**3 - 5 * a * s**2 + 8 * a * s - 4 * a
    return 0.0


def _resize_axis(x, axis, out_len, scale, mode, ctm, roi, a, extrapolation):
    """Resize along one axis by explicit loops (the interpolation is separable)."""
    x = np.moveaxis(x, axis, -1)
    in_len = x.shape[-1]
    out = np.empty(x.shape[:-1] + (out_len,))
    for i in range(out_len):
        src = _source(ctm, i, out_len, in_len, scale, roi)
        if ctm == "tf_crop_and_resize" and not 0 <= src <= in_len - 1:
            out[..., i] = extrapolation
            continue
        if mode == "nearest":  # round_prefer_floor
            j = math.ceil(src - 0.5)
            out[..., i] = x[..., min(max(j, 0), in_len - 1)]
            continue
        base = math.floor(src)
        taps = range(base, base + 2) if mode == "linear" else range(base - 1, base + 3)
        total = 0.0
        for t in taps:
            w = max(0.0, 1 - abs(src - t)) if mode == "linear" else _keys(src - t, a)
            total = total + w * x[..., min(max(t, 0), in_len - 1)]
        out[..., i] = total
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                 "tf_crop_and_resize"])
def test_resize(mode, ctm, rng):
    x = random(rng, (2, 5, 4))
    axes, sizes = [1, 2], [8, 3]
    roi = [0.1, 0.2, 0.9, 1.1] if ctm == "tf_crop_and_resize" else []
    want = x.astype(np.float64)
    for n, (axis, size) in enumerate(zip(axes, sizes)):
        pair = (roi[n], roi[2 + n]) if roi else None
        want = _resize_axis(want, axis, size, size / x.shape[axis], mode, ctm, pair, -0.75, 2.5)
    got = call("resize", x, axes=axes, sizes=sizes, mode=mode, coordinate_transformation_mode=ctm, roi=roi,
               extrapolation_value=2.5)
    assert_matches(got, want.astype(np.float32), "f32")


@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners"])
@pytest.mark.parametrize("shape,sizes", [((2, 3, 5, 4), [8, 3]), ((1, 2, 6, 5), [1, 9]), ((2, 3, 7), [16]),
                                         ((1, 2, 3, 4, 5), [6, 2, 5])])
def test_resize_linear_of_spatial_dims(ctm, shape, sizes, rng):
    # Linear resizing of every spatial dim (what upsampling layers export) runs as one torch interpolate
    # call (indexing._interpolated); lengths of 1 and unchanged dims included.
    x = random(rng, shape)
    axes = list(range(2, len(shape)))
    want = x.astype(np.float64)
    for axis, size in zip(axes, sizes):
        want = _resize_axis(want, axis, size, size / x.shape[axis], "linear", ctm, None, -0.75, 0.0)
    for given in (x, np.ascontiguousarray(np.moveaxis(x, 1, -1)).transpose(0, x.ndim - 1, *range(1, x.ndim - 1))):
        got = call("resize", given, axes=axes, sizes=sizes, mode="linear", coordinate_transformation_mode=ctm)
        assert_matches(got, want.astype(np.float32), "f32")


def test_resize_given_scales_drive_the_coordinates(rng):
    # scale 0.6 on 5 elements gives 3 outputs, sampled at (i + 0.5) / 0.6 - 0.5, not at 5/3 steps.
    x = random(rng, (1, 5))
    want = _resize_axis(x.astype(np.float64), 1, 3, 0.6, "linear", "half_pixel", None, -0.75, 0.0)
    got = call("resize", x, axes=[1], sizes=[3], scales=[0.6], mode="linear")
    assert_matches(got, want.astype(np.float32), "f32")


def test_resize_integers_round_half_to_even(rng):
    x = random(rng, (1, 4), "ui8", 0, 255)
    want = _resize_axis(x.astype(np.float64), 1, 7, 7 / 4, "linear", "half_pixel", None, -0.75, 0.0)
    got = call("resize", x, axes=[1], sizes=[7], mode="linear")
    assert_matches(got, np.clip(np.round(want), 0, 255).astype(np.uint8), "ui8")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_against_onnx_reference(mode, rng):
    from onnx.reference import ReferenceEvaluator

    x = random(rng, (1, 1, 9, 7))
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=1)
    (want,) = ReferenceEvaluator(node).run(None, {"x": x, "sizes": np.array([1, 1, 4, 3], np.int64)})
    got = call("resize", x, axes=[2, 3], sizes=[4, 3], mode=mode, antialias=True)
    assert_matches(got, want, "f32")


# ---------------------------------------------------------------- grid_sample


@pytest.mark.parametrize("mode,padding", [("linear", "zeros"), ("linear", "border"), ("linear", "reflection"),
                                          ("nearest", "zeros"), ("nearest", "border"), ("cubic", "zeros")])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d_against_torch(mode, padding, align_corners, rng):
    x = random(rng, (2, 3, 5, 6))
    grid = random(rng, (2, 4, 3, 2), low=-1.3, high=1.3)
    torch_mode = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}[mode]
    want = F.grid_sample(torch.from_numpy(x), torch.from_numpy(grid), mode=torch_mode, padding_mode=padding,
                         align_corners=align_corners).numpy()
    got = call("grid_sample", x, grid, mode=mode, padding_mode=padding, align_corners=align_corners)
    assert_matches(got, want, "f32")


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_3d_against_torch(mode, rng):
    x = random(rng, (1, 2, 3, 4, 5))
    grid = random(rng, (1, 2, 3, 2, 3), low=-1.2, high=1.2)
    want = F.grid_sample(torch.from_numpy(x), torch.from_numpy(grid), mode="bilinear" if mode == "linear" else mode,
                         align_corners=False).numpy()
    assert_matches(call("grid_sample", x, grid, mode=mode), want, "f32")


# ---------------------------------------------------------------- roi_align, col2im


def _bilinear(image, y, x):
    """RoiAlign's bilinear sample: clamp at the far edge, zero beyond one pixel outside."""
    height, width = image.shape[-2:]
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return np.zeros(image.shape[:-2])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = min(int(y), height - 1), min(int(x), width - 1)
    y = float(y0) if y0 == height - 1 else y
    x = float(x0) if x0 == width - 1 else x
    y1, x1 = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * image[..., y0, x0] + (1 - ly) * lx * image[..., y0, x1]
            + ly * (1 - lx) * image[..., y1, x0] + ly * lx * image[..., y1, x1])


@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_avg(ctm, sampling_ratio, rng):
    x = random(rng, (2, 3, 7, 8))
    rois = np.sort(random(rng, (3, 4), low=0.0, high=12.0).reshape(3, 2, 2), axis=1).transpose(0, 2, 1).reshape(3, 4)
    rois = rois[:, [0, 2, 1, 3]].copy()  # x1, y1, x2, y2 with x1 <= x2, y1 <= y2
    batch = np.array([1, 0, 1], np.int64)
    oh, ow, scale = 3, 2, 0.5
    want = np.zeros((3, 3, oh, ow))
    shift = 0.5 if ctm == "half_pixel" else 0.0
    for r in range(3):
        x1, y1, x2, y2 = (float(v) * scale - shift for v in rois[r])
        rw, rh = x2 - x1, y2 - y1
        if ctm == "output_half_pixel":
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = sampling_ratio or math.ceil(rh / oh)
        gw = sampling_ratio or math.ceil(rw / ow)
        for ph, pw in itertools.product(range(oh), range(ow)):
            acc = np.zeros(3)
            for iy, ix in itertools.product(range(gh), range(gw)):
                yy = y1 + ph * rh / oh + (iy + 0.5) * rh / oh / gh
                xx = x1 + pw * rw / ow + (ix + 0.5) * rw / ow / gw
                acc += _bilinear(x[batch[r]].astype(np.float64), yy, xx)
            want[r, :, ph, pw] = acc / max(gh * gw, 1)
    got = call("roi_align", x, rois, batch, output_height=oh, output_width=ow, sampling_ratio=sampling_ratio,
               spatial_scale=scale, coordinate_transformation_mode=ctm)
    assert_matches(got, want.astype(np.float32), "f32")


def test_roi_align_max_against_onnxruntime(rng):
    ort = pytest.importorskip("onnxruntime")
    x = random(rng, (1, 2, 6, 6))
    rois = np.array([[0.5, 1.0, 4.0, 5.5], [1.0, 0.0, 5.0, 3.0]], np.float32)
    batch = np.zeros(2, np.int64)
    attrs = dict(output_height=2, output_width=3, sampling_ratio=2, mode="max",
                 coordinate_transformation_mode="output_half_pixel")
    model = _model([helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], **attrs)],
                   [("x", x), ("r", rois), ("b", batch)], 16)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "r": rois, "b": batch})
    assert_matches(call("roi_align", x, rois, batch, **attrs), want, "f32")


@pytest.mark.parametrize("image,block,strides,dilations,pads", [
    ([5, 5], [2, 3], [1, 1], [1, 1], [0, 0, 0, 0]),
    ([6, 5], [3, 2], [2, 1], [1, 2], [1, 0, 0, 1]),
    ([3, 4, 5], [1, 2, 2], [1, 1, 2], [1, 1, 1], [0, 0, 1, 0, 1, 0]),
])
def test_col2im(image, block, strides, dilations, pads, rng):
    n = len(image)
    counts = [(image[i] + pads[i] + pads[n + i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(n)]
    x = random(rng, (2, 2 * int(np.prod(block)), int(np.prod(counts))))
    want = np.zeros([2, 2] + image)
    cols = x.reshape([2, 2] + block + counts)
    for k in np.ndindex(*block):
        for c in np.ndindex(*counts):
            pos = [c[i] * strides[i] - pads[i] + k[i] * dilations[i] for i in range(n)]
            if all(0 <= p < s for p, s in zip(pos, image)):
                want[(slice(None), slice(None)) + tuple(pos)] += cols[(slice(None), slice(None)) + k + c]
    got = call("col2im", x, image_shape=image, block_shape=block, strides=strides, dilations=dilations, pads=pads)
    assert_matches(got, want.astype(np.float32), "f32")


# ---------------------------------------------------------------- dft, bitcast, det


@pytest.mark.parametrize("inverse,onesided,complex_in", [
    (False, False, False), (False, False, True), (False, True, False), (True, False, True), (True, True, True)])
@pytest.mark.parametrize("length", [8, 5, 11])
def test_dft(inverse, onesided, complex_in, length, rng):
    x = random(rng, (2, 8, 3, 2 if complex_in else 1))
    signal = x[..., 0] + 1j * x[..., 1] if complex_in else x[..., 0].astype(np.complex128)
    if inverse and onesided:
        want = np.fft.irfft(signal, n=length, axis=1)[..., None]
    else:
        spectrum = (np.fft.ifft if inverse else np.fft.fft)(signal, n=length, axis=1)
        if onesided:
            spectrum = spectrum[:, :length // 2 + 1]
        want = np.stack([spectrum.real, spectrum.imag], axis=-1)
    got = call("dft", x, axis=1, length=length, inverse=inverse, onesided=onesided)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("src,dst", [("f32", "i32"), ("i64", "f64"), ("ui16", "i16"), ("i1", "ui8"), ("f16", "ui16")])
def test_bitcast(src, dst, rng):
    from sdc import dtypes

    x = random(rng, (3, 4), src, -100, 100) if src[0] != "u" else random(rng, (3, 4), src, 0, 60000)
    assert_matches(call("bitcast", x, dtype=dst), x.view(dtypes.to_numpy(dst)), dst)


def test_det(rng):
    x = random(rng, (3, 4, 4), "f64")
    assert_matches(call("det", x), np.linalg.det(x), "f64")


# ---------------------------------------------------------------- shape rules


@pytest.mark.parametrize("op,inputs,attrs,message", [
    ("gather_elements", [((4, 5), "f32"), ((6, 2), "i64")], {"axis": 1}, "indices dim 0 is 6, larger than data's 4"),
    ("gather_nd", [((2, 3), "f32"), ((4, 3), "i64")], {}, "the last dim of indices is 3, expected 1 to 2"),
    ("scatter_nd", [((4, 5), "f32"), ((2, 1), "i64"), ((2, 4), "f32")], {}, "updates dim 1 is 4, expected 5"),
    ("topk", [((3, 4), "f32")], {"k": 4, "axis": 0}, "k is 4, larger than dim 0 of size 3"),
    ("resize", [((4, 4), "f32")], {"axes": [1], "sizes": [2], "antialias": True},
     "antialias applies to modes 'linear' and 'cubic', not 'nearest'"),
    ("grid_sample", [((1, 1, 4, 4), "f32"), ((1, 2, 2, 3), "f32")], {},
     "grid's last dim is 3, expected 2 (one coordinate per spatial dim)"),
    ("dft", [((4, 2), "f32")], {"axis": -1, "length": 4}, "axis -1 is the real/imaginary dim"),
    ("bitcast", [((4,), "f32")], {"dtype": "f16"}, "bitcast needs equal element widths: f32 has 32 bits, f16 has 16"),
    ("col2im", [((1, 4, 5), "f32")], {"image_shape": [3, 3], "block_shape": [2, 2]},
     "input dim 2 is 5, expected 4 blocks ([2, 2])"),
    ("det", [((2, 3, 4), "f32")], {}, "matrices must be square, found 3x4"),
])
def test_shape_rule_errors(op, inputs, attrs, message):
    opdef = get_op(op)
    specs = [TensorSpec(shape, dtype) for shape, dtype in inputs]
    with pytest.raises(ShapeError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        opdef.shape(ShapeContext(), specs, opdef.with_defaults(attrs))


# ---------------------------------------------------------------- the importer's decompositions


_ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
               np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


def _model(nodes, feeds, opset, outputs=("y",)):
    """A model of `nodes`; outputs are float unless named as (name, ONNX element type)."""
    inputs = [helper.make_tensor_value_info(name, _ONNX_TYPES[np.asarray(v).dtype], np.asarray(v).shape)
              for name, v in feeds]
    outs = [(o, TensorProto.FLOAT) if isinstance(o, str) else o for o in outputs]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, t, None) for o, t in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _against_onnxruntime(nodes, feeds, opset, outputs=("y",)):
    ort = pytest.importorskip("onnxruntime")
    from sdc import onnx_backend

    model = _model(nodes, feeds, opset, outputs)
    named = dict(feeds)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, named)
    got = onnx_backend.prepare(model).run([v for _, v in feeds])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{g.dtype}{g.shape}, expected {w.dtype}{w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_onnx_one_hot_and_hardmax(rng):
    indices = random(rng, (2, 3), "i64", -4, 3)
    x = random(rng, (2, 3, 4))
    _against_onnxruntime([
        helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=1),
        helper.make_node("Hardmax", ["x"], ["h"], axis=1),
    ], [("i", indices), ("depth", np.array(4, np.int64)), ("values", np.array([-1.5, 2.0], np.float32)), ("x", x)],
        13, outputs=("y", "h"))


def test_onnx_reverse_sequence_and_center_crop_pad(rng):
    x = random(rng, (5, 3, 4))
    _against_onnxruntime([
        helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0),
        helper.make_node("CenterCropPad", ["x", "shape"], ["c"], axes=[0, 2]),
    ], [("x", x), ("lens", np.array([5, 1, 3], np.int64)), ("shape", np.array([2, 7], np.int64))], 18,
        outputs=("y", "c"))


def test_onnx_affine_grid_and_grid_sample(rng):
    theta = random(rng, (2, 2, 3), low=-1.0, high=1.0)
    x = random(rng, (2, 3, 5, 4))
    _against_onnxruntime([
        helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0),
        helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="border"),
    ], [("theta", theta), ("size", np.array([2, 3, 6, 3], np.int64)), ("x", x)], 20)


def test_onnx_tensor_scatter_circular(rng):
    cache = random(rng, (2, 3, 6, 4))
    update = random(rng, (2, 3, 3, 4))
    _against_onnxruntime([helper.make_node("TensorScatter", ["cache", "update", "pos"], ["y"], mode="circular")],
                         [("cache", cache), ("update", update), ("pos", np.array([1, 5], np.int64))], 24)


def test_onnx_stft_with_window(rng):
    signal = random(rng, (2, 40, 1))
    _against_onnxruntime([
        helper.make_node("HannWindow", ["size"], ["window"]),
        helper.make_node("STFT", ["signal", "step", "window"], ["y"]),
    ], [("signal", signal), ("size", np.array(8, np.int64)), ("step", np.array(4, np.int64))], 17)


def test_onnx_compress_and_unique_of_constants(rng):
    x = random(rng, (3, 4))
    _against_onnxruntime([
        helper.make_node("Compress", ["x", "keep"], ["y"], axis=1),
        helper.make_node("Unique", ["values"], ["u", "first", "inverse", "counts"], sorted=0),
    ], [("x", x), ("keep", np.array([True, False, True], np.bool_)),
        ("values", np.array([3, 1, 3, 2, 1, 5], np.int64))], 11,
        outputs=("y",) + tuple((o, TensorProto.INT64) for o in ("u", "first", "inverse", "counts")))


def test_onnx_max_unpool_with_output_shape(rng):
    x = random(rng, (1, 2, 2, 2))
    indices = np.array([[[[0, 3], [9, 14]], [[17, 18], [24, 31]]]], np.int64)
    _against_onnxruntime([helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2],
                                           strides=[2, 2])],
                         [("x", x), ("i", indices), ("shape", np.array([1, 2, 4, 4], np.int64))], 11)


def test_onnx_data_dependent_shapes_need_constants():
    from sdc.diagnostics import SdcError
    from sdc.frontend.onnx import import_onnx

    model = _model([helper.make_node("NonZero", ["x"], ["y"])], [("x", np.ones((2, 3), np.float32))], 13)
    with pytest.raises(SdcError, match="NonZero's input must be known at compile time"):
        import_onnx(model)
