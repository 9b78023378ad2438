"""ONNX indexing, scatter/gather, cumulative, sorting and resampling ops (a NodeImporter mixin).

Primitives map to one sdc op each (gather_elements, scatter_nd, cumsum, topk, resize, grid_sample,
dft, ...); the rest decompose: OneHot, Hardmax and EyeLike into comparisons against an iota,
CenterCropPad into slice and pad, ReverseSequence into gather_elements, AffineGrid into a matmul
with a constant base grid, STFT into framing (gather), windowing and sdc.dft. Ops whose result
shape depends on values (Compress, Unique, NonZero, NonMaxSuppression) need those values at
compile time. The ONNX semantics each method follows are the spec's and `onnx.reference`'s.
"""

from __future__ import annotations

import math

import numpy as np

from sdc.dialect import symbolic
from sdc.dialect.shapes import DYN, ShapeError
from sdc.frontend.onnx_common import normalize_axis, onnx_dtype
from sdc.frontend.values import V, is_int, sym_int


def _input(inputs: list, i: int) -> V | None:
    return inputs[i] if len(inputs) > i else None


def _present(v: V | None) -> bool:
    """An optional input that is given and not an empty tensor (how some exporters omit one)."""
    return v is not None and not (v.rank == 1 and is_int(v.sym[0]) and v.sym[0] == 0)


def _prod(dims):
    return sym_int(symbolic.product(dims))


_RESIZE_MODE = {"nearest": "nearest", "linear": "linear", "cubic": "cubic", "bilinear": "linear",
                "bicubic": "cubic", "trilinear": "linear"}


class IndexingOps:
    """Methods `op_<OpType>(self, node, inputs, attrs)`; emitting through `self.b` (sdc/frontend/builder.py)."""

    # ---------------------------------------------------------------- small helpers

    # ---------------------------------------------------------------- gather / scatter

    def op_GatherElements(self, node, inputs, attrs):
        return self.b.emit("gather_elements", inputs[:2], axis=attrs.get("axis", 0))

    def op_GatherND(self, node, inputs, attrs):
        return self.b.emit("gather_nd", inputs[:2], batch_dims=attrs.get("batch_dims", 0))

    def op_ScatterElements(self, node, inputs, attrs):
        return self.b.emit("scatter_elements", inputs[:3], axis=attrs.get("axis", 0),
                           reduction=attrs.get("reduction", "none"))

    def op_Scatter(self, node, inputs, attrs):
        return self.b.emit("scatter_elements", inputs[:3], axis=attrs.get("axis", 0))

    def op_ScatterND(self, node, inputs, attrs):
        return self.b.emit("scatter_nd", inputs[:3], reduction=attrs.get("reduction", "none"))

    def op_TensorScatter(self, node, inputs, attrs):
        cache, update = inputs[0], inputs[1]
        write_indices = _input(inputs, 2)
        axis = attrs.get("axis", -2) % cache.rank
        if axis == 0:
            raise ShapeError("TensorScatter along axis 0 (the batch dim) is unsupported")
        # Position of each update element in the cache: its index along `axis` plus the batch's offset.
        position = self.b.iota(list(update.sym), axis)
        if write_indices is not None:
            offsets = self.b.reshape(self.b.cast(write_indices, "i64"), [write_indices.sym[0]] + [1] * (cache.rank - 1))
            position = self.b.emit("add", [position, offsets])
        if attrs.get("mode", "linear") == "circular":
            length = cache.sym[axis]
            if not is_int(length):
                raise ShapeError("TensorScatter mode 'circular' needs a static cache length")
            position = self.b.emit("mod", [position, self.b.const(np.array(length, np.int64))])
        return self.b.emit("scatter_elements", [cache, position, update], axis=axis)

    def op_Compress(self, node, inputs, attrs):
        x, condition = inputs[0], inputs[1]
        keep = np.nonzero(self.b.const_array(condition, "Compress's condition").reshape(-1).astype(bool))[0]
        if "axis" not in attrs:
            x = self.b.reshape(x, [-1] if DYN in x.sym else [_prod(x.sym)])
            axis = 0
        else:
            axis = normalize_axis(attrs["axis"], x.rank)
        size = x.sym[axis]
        if is_int(size) and keep.size and keep[-1] >= size:
            raise ShapeError(f"Compress's condition selects index {keep[-1]}, beyond dim {axis} of size {size}")
        return self.b.emit("gather", [x, self.b.const(keep.astype(np.int64))], axis=axis)

    def op_ReverseSequence(self, node, inputs, attrs):
        x, lengths = inputs[0], inputs[1]
        batch_axis, time_axis = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
        # Element t of batch b reads t' = len[b] - 1 - t while t < len[b], else stays.
        time = self.b.iota(list(x.sym), time_axis)
        shape = [1] * x.rank
        shape[batch_axis] = lengths.sym[0]
        lens = self.b.reshape(self.b.cast(lengths, "i64"), shape)
        mirrored = self.b.emit("sub", [self.b.emit("sub", [lens, self.b.const(np.array(1, np.int64))]), time])
        index = self.b.emit("where", [self.b.emit("lt", [time, lens]), mirrored, time])
        return self.b.emit("gather_elements", [x, index], axis=time_axis)

    # ---------------------------------------------------------------- scans and sorting

    def _scan(self, name: str, node, inputs, attrs) -> V:
        axis = self.b.int_scalar(inputs[1], f"{node.op_type} axis")
        return self.b.emit(name, [inputs[0]], axis=axis, exclusive=bool(attrs.get("exclusive", 0)),
                           reverse=bool(attrs.get("reverse", 0)))

    def op_CumSum(self, node, inputs, attrs):
        return self._scan("cumsum", node, inputs, attrs)

    def op_CumProd(self, node, inputs, attrs):
        return self._scan("cumprod", node, inputs, attrs)

    def op_TopK(self, node, inputs, attrs):
        x = inputs[0]
        k = self.b.int_scalar(inputs[1], "TopK's K") if self.opset >= 10 else attrs["k"]
        return self.b.emit_all("topk", [x], {"k": k, "axis": attrs.get("axis", -1),
                                             "largest": bool(attrs.get("largest", 1)),
                                             "sorted": bool(attrs.get("sorted", 1))})

    def op_Unique(self, node, inputs, attrs):
        x = inputs[0]
        data = self.b.const_array(x, "Unique's input")
        axis = attrs.get("axis")
        if axis is None:
            data = data.reshape(-1)
            axis = 0
        axis %= max(data.ndim, 1)
        values, first, inverse, counts = np.unique(data, return_index=True, return_inverse=True,
                                                   return_counts=True, axis=axis)
        inverse = inverse.reshape(-1)
        if not attrs.get("sorted", 1):
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            first, counts, inverse = first[order], counts[order], rank[inverse]
            values = np.take(data, first, axis=axis)
        outs = [self.b.const_like(values, x)]
        for extra in (first, inverse, counts):
            outs.append(self.b.const(extra.astype(np.int64)))
        return outs[:max(len(node.output), 1)]

    def op_NonZero(self, node, inputs, attrs):
        data = self.b.const_array(inputs[0], "NonZero's input")
        return self.b.const(np.array(np.nonzero(data), dtype=np.int64).reshape(data.ndim, -1))

    # ---------------------------------------------------------------- one-hot and friends

    def op_OneHot(self, node, inputs, attrs):
        indices, depth_v, values = inputs
        depth = self.b.int_scalar(depth_v, "OneHot's depth")
        rank = indices.rank + 1
        axis = normalize_axis(attrs.get("axis", -1), rank)
        idx = self.b.cast(indices, "i64")
        depth_c = self.b.const(np.array(depth, np.int64))
        idx = self.b.emit("where", [self.b.emit("lt", [idx, self.b.const(np.array(0, np.int64))]),
                                    self.b.emit("add", [idx, depth_c]), idx])
        ramp_shape = [1] * rank
        ramp_shape[axis] = depth
        hot = self.b.emit("eq", [self.b.emit("unsqueeze", [idx], axes=[axis]), self.b.iota(ramp_shape, axis)])
        off = self.b.reshape(self.b.emit("slice", [values], starts=[0], ends=[1], axes=[0], steps=[1]), [])
        on = self.b.reshape(self.b.emit("slice", [values], starts=[1], ends=[2], axes=[0], steps=[1]), [])
        return self.b.emit("where", [hot, on, off])

    def op_EyeLike(self, node, inputs, attrs):
        x = inputs[0]
        dtype = onnx_dtype(attrs["dtype"], "EyeLike dtype") if "dtype" in attrs else x.dtype
        k = attrs.get("k", 0)
        rows, cols = x.sym
        if is_int(rows) and is_int(cols):
            if dtype == "bf16":
                return self.b.cast(self.b.const(np.eye(rows, cols, k, dtype=np.float32)), "bf16")
            return self.b.const(np.eye(rows, cols, k), dtype)
        diagonal = self.b.emit("sub", [self.b.iota([rows, cols], 1), self.b.iota([rows, cols], 0)])
        hot = self.b.emit("eq", [diagonal, self.b.const(np.array(k, np.int64))])
        return self.b.cast(hot, dtype)

    def op_Hardmax(self, node, inputs, attrs):
        x = inputs[0]
        if self.opset >= 13:
            return self._hardmax(x, normalize_axis(attrs.get("axis", -1), x.rank))
        # Before opset 13, Hardmax coerces the input to 2-D at `axis`.
        axis = normalize_axis(attrs.get("axis", 1), x.rank)
        flat = self.b.reshape(x, [_prod(x.sym[:axis]), _prod(x.sym[axis:])])
        return self.b.reshape(self._hardmax(flat, 1), list(x.sym))

    def _hardmax(self, x: V, axis: int) -> V:
        best = self.b.emit("argmax", [x], axis=axis, keepdims=True)
        ramp_shape = [1] * x.rank
        ramp_shape[axis] = x.sym[axis]
        return self.b.cast(self.b.emit("eq", [best, self.b.iota(ramp_shape, axis)]), x.dtype)

    def op_CenterCropPad(self, node, inputs, attrs):
        x = inputs[0]
        target = self.b.static_ints(inputs[1], "CenterCropPad's shape")
        axes = [normalize_axis(a, x.rank, "axes") for a in attrs.get("axes", range(x.rank))]
        if len(target) != len(axes):
            raise ShapeError(f"CenterCropPad's shape has {len(target)} entries for {len(axes)} axes")
        starts, ends, sliced, pads = [], [], [], [0] * (2 * x.rank)
        for axis, want in zip(axes, target):
            have = x.sym[axis]
            if not is_int(have):
                raise ShapeError(f"CenterCropPad of a dynamic dim ({have}) is unsupported")
            if want < have:  # crop, the extra element (odd difference) off the end
                start = (have - want) // 2
                starts.append(start), ends.append(start + want), sliced.append(axis)
            elif want > have:  # pad, the extra element at the end
                pads[axis] = (want - have) // 2
                pads[x.rank + axis] = want - have - pads[axis]
        if sliced:
            x = self.b.emit("slice", [x], starts=starts, ends=ends, axes=sliced, steps=[1] * len(sliced))
        if any(pads):
            x = self.b.emit("pad", [x], pads=pads, mode="constant", value=0.0)
        return x

    # ---------------------------------------------------------------- resampling

    def op_Resize(self, node, inputs, attrs):
        x = inputs[0]
        if self.opset < 11:  # Resize-10: X, scales; sampling as Upsample
            return self._upsample(x, self.b.known_floats(inputs[1], "Resize scales"), attrs.get("mode", "nearest"))
        roi_v, scales_v, sizes_v = _input(inputs, 1), _input(inputs, 2), _input(inputs, 3)
        axes = [normalize_axis(a, x.rank, "axes") for a in attrs.get("axes", range(x.rank))]
        ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
        scales = self.b.known_floats(scales_v, "Resize scales") if _present(scales_v) else []
        sizes = self.b.known_ints(sizes_v, "Resize sizes") if _present(sizes_v) else []
        if not scales and not sizes:
            raise ShapeError("Resize needs scales or sizes")
        if scales and sizes:
            raise ShapeError("Resize takes scales or sizes, not both")
        count = len(scales or sizes)
        if count != len(axes):
            raise ShapeError(f"Resize has {count} scales/sizes for {len(axes)} axes")
        roi = []
        if ctm == "tf_crop_and_resize":
            roi = self.b.known_floats(roi_v, "Resize roi") if _present(roi_v) else []
            if len(roi) == 2 * x.rank and len(axes) != x.rank:
                roi = [roi[a] for a in axes] + [roi[x.rank + a] for a in axes]
            if len(roi) != 2 * len(axes):
                raise ShapeError(f"Resize roi has {len(roi)} entries, expected {2 * len(axes)}")
        if sizes:
            out, coord_scales = self._resize_sizes(x, axes, sizes, attrs.get("keep_aspect_ratio_policy", "stretch"))
        else:
            out, coord_scales = [self._scaled_dim(x.sym[a], s) for a, s in zip(axes, scales)], scales
        # Axes that keep their length at scale 1 (and the whole roi) are left out: resizing them is the identity.
        moved = [i for i, a in enumerate(axes)
                 if not (sym_int(out[i]) == sym_int(x.sym[a])
                         and (not coord_scales or math.isclose(coord_scales[i], 1.0))
                         and (not roi or (math.isclose(roi[i], 0.0) and math.isclose(roi[len(axes) + i], 1.0))))]
        if not moved:
            return x
        if roi:
            roi = [roi[i] for i in moved] + [roi[len(axes) + i] for i in moved]
        axes, out = [axes[i] for i in moved], [out[i] for i in moved]
        coord_scales = [coord_scales[i] for i in moved] if coord_scales else []
        mode = attrs.get("mode", "nearest")
        return self.b.emit("resize", [x], axes=axes, sizes=out, scales=coord_scales, roi=roi,
                           mode=_RESIZE_MODE[mode], coordinate_transformation_mode=ctm,
                           nearest_mode=attrs.get("nearest_mode", "round_prefer_floor"),
                           cubic_coeff_a=float(attrs.get("cubic_coeff_a", -0.75)),
                           exclude_outside=bool(attrs.get("exclude_outside", 0)),
                           extrapolation_value=float(attrs.get("extrapolation_value", 0.0)),
                           antialias=bool(attrs.get("antialias", 0)))

    def op_Upsample(self, node, inputs, attrs):
        x = inputs[0]
        scales = list(attrs["scales"]) if "scales" in attrs else self.b.known_floats(inputs[1], "Upsample scales")
        return self._upsample(x, scales, attrs.get("mode", "nearest"))

    def _upsample(self, x: V, scales: list[float], mode: str) -> V:
        if len(scales) != x.rank:
            raise ShapeError(f"{len(scales)} scales for an input of rank {x.rank}")
        axes = [a for a, s in enumerate(scales) if s != 1.0]
        if not axes:
            return x
        sizes = [self._scaled_dim(x.sym[a], scales[a]) for a in axes]
        return self.b.emit("resize", [x], axes=axes, sizes=sizes, scales=[float(scales[a]) for a in axes],
                           mode=_RESIZE_MODE[mode], coordinate_transformation_mode="asymmetric",
                           nearest_mode="floor")

    @staticmethod
    def _scaled_dim(dim, scale: float):
        """floor(dim * scale), the output length ONNX gives a scaled dim."""
        if is_int(dim):
            return int(math.floor(dim * scale))
        if float(scale).is_integer():
            return sym_int(dim * int(scale))
        raise ShapeError(f"resizing the symbolic dim {dim} by the non-integer scale {scale} is unsupported")

    @staticmethod
    def _resize_sizes(x: V, axes: list[int], sizes: list[int], policy: str):
        if policy == "stretch":
            return list(sizes), []
        dims = [x.sym[a] for a in axes]
        if not all(is_int(d) for d in dims):
            raise ShapeError(f"keep_aspect_ratio_policy '{policy}' on a dynamic dim is unsupported")
        ratios = [s / d for s, d in zip(sizes, dims)]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        return [int(scale * d + 0.5) for d in dims], [scale] * len(axes)

    def op_GridSample(self, node, inputs, attrs):
        return self.b.emit("grid_sample", inputs[:2], mode=_RESIZE_MODE[attrs.get("mode", "linear" if self.opset >= 20
                                                                                  else "bilinear")],
                           padding_mode=attrs.get("padding_mode", "zeros"),
                           align_corners=bool(attrs.get("align_corners", 0)))

    def op_AffineGrid(self, node, inputs, attrs):
        theta = inputs[0]
        size = self.b.static_ints(inputs[1], "AffineGrid's size")
        spatial = size[2:]
        if len(spatial) not in (2, 3) or theta.rank != 3:
            raise ShapeError(f"AffineGrid needs a 2-D or 3-D size and theta [N, n, n+1], found size {size}")
        align = bool(attrs.get("align_corners", 0))
        # Base grid [prod(spatial), n + 1]: (x, y[, z], 1), x running along the last spatial dim.
        axes = []
        for length in reversed(spatial):
            step = np.arange(length, dtype=np.float64)
            if align:
                axes.append(step * 2 / (length - 1) - 1 if length > 1 else np.zeros(1))
            else:
                axes.append((step * 2 + 1) / length - 1)
        mesh = np.meshgrid(*axes[::-1], indexing="ij")[::-1]
        base = np.stack([m.reshape(-1) for m in mesh] + [np.ones(mesh[0].size)], axis=1)
        base_v = self.b.const_like(base, theta)
        grid = self.b.emit("matmul", [base_v, theta], transpose_rhs=True)  # [N, prod(spatial), n]
        return self.b.reshape(grid, [theta.sym[0]] + list(spatial) + [len(spatial)])

    def op_RoiAlign(self, node, inputs, attrs):
        ctm = attrs.get("coordinate_transformation_mode", "half_pixel" if self.opset >= 16 else "output_half_pixel")
        return self.b.emit("roi_align", inputs[:3], output_height=attrs.get("output_height", 1),
                           output_width=attrs.get("output_width", 1), sampling_ratio=attrs.get("sampling_ratio", 0),
                           spatial_scale=float(attrs.get("spatial_scale", 1.0)), mode=attrs.get("mode", "avg"),
                           coordinate_transformation_mode=ctm)

    def op_Col2Im(self, node, inputs, attrs):
        image = self.b.static_ints(inputs[1], "Col2Im's image_shape")
        block = self.b.static_ints(inputs[2], "Col2Im's block_shape")
        return self.b.emit("col2im", [inputs[0]], image_shape=image, block_shape=block,
                           strides=list(attrs.get("strides", [])), dilations=list(attrs.get("dilations", [])),
                           pads=list(attrs.get("pads", [])))

    def op_MaxUnpool(self, node, inputs, attrs):
        x, indices = inputs[0], inputs[1]
        kernel = list(attrs["kernel_shape"])
        n = len(kernel)
        strides = list(attrs.get("strides", [1] * n))
        pads = list(attrs.get("pads", [0] * (2 * n)))
        spatial = [(x.sym[2 + i] - 1) * strides[i] - pads[i] - pads[n + i] + kernel[i] for i in range(n)]
        inferred = [x.sym[0], x.sym[1]] + [sym_int(d) for d in spatial]
        # The indices address the flattened inferred output (batch and channel included).
        zeros = self.b.broadcast(self.b.scalar_like(0, x), [_prod(inferred)])
        flat = self.b.emit("scatter_elements", [zeros, self.b.reshape(indices, [-1]), self.b.reshape(x, [-1])], axis=0)
        y = self.b.reshape(flat, inferred)
        target = _input(inputs, 2)
        if target is None:
            return y
        shape = self.b.static_ints(target, "MaxUnpool's output_shape")
        if len(shape) != len(inferred) or not all(is_int(d) for d in inferred):
            raise ShapeError(f"MaxUnpool output_shape {shape} does not fit the inferred shape {inferred}")
        extra = [want - have for want, have in zip(shape, inferred)]
        if any(e < 0 for e in extra):
            raise ShapeError(f"MaxUnpool output_shape {shape} is smaller than the inferred shape {inferred}")
        return self.b.emit("pad", [y], pads=[0] * len(shape) + extra) if any(extra) else y

    # ---------------------------------------------------------------- signal processing

    def op_DFT(self, node, inputs, attrs):
        x = inputs[0]
        if self.opset >= 20:
            axis = self.b.int_scalar(_input(inputs, 2), "DFT axis", -2)
        else:
            axis = attrs.get("axis", 1)
        axis %= x.rank
        inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
        length = self.b.int_scalar(_input(inputs, 1), "DFT's dft_length")
        if length is None:
            size = x.sym[axis]
            if not is_int(size):
                raise ShapeError(f"DFT along a dynamic dim ({size}) without dft_length is unsupported")
            length = 2 * (size - 1) if inverse and onesided else size
        return self.b.emit("dft", [x], axis=axis, length=length, inverse=inverse, onesided=onesided)

    def op_STFT(self, node, inputs, attrs):
        signal, window = inputs[0], _input(inputs, 2)
        step = self.b.int_scalar(inputs[1], "STFT's frame_step")
        frame = self.b.int_scalar(_input(inputs, 3), "STFT's frame_length")
        if frame is None:
            frame = window.sym[0] if window is not None else signal.sym[1]
        total = signal.sym[1]
        if not (is_int(total) and is_int(frame)):
            raise ShapeError("STFT of a signal of dynamic length is unsupported")
        frames = 1 + (total - frame) // step
        if frames < 1:
            raise ShapeError(f"STFT frame_length {frame} is longer than the signal ({total})")
        starts = np.arange(frames, dtype=np.int64)[:, None] * step + np.arange(frame, dtype=np.int64)[None, :]
        y = self.b.emit("gather", [signal, self.b.const(starts)], axis=1)  # [batch, frames, frame, 1 or 2]
        if window is not None:
            y = self.b.emit("mul", [y, self.b.reshape(self.b.cast(window, signal.dtype), [1, 1, frame, 1])])
        return self.b.emit("dft", [y], axis=2, length=frame, onesided=bool(attrs.get("onesided", 1)))

    def _window(self, node, inputs, attrs, formula) -> V:
        size = self.b.int_scalar(inputs[0], f"{node.op_type}'s size")
        dtype = onnx_dtype(attrs.get("output_datatype", 1), f"{node.op_type} output_datatype")
        denominator = size if attrs.get("periodic", 1) else size - 1
        n = np.arange(size, dtype=np.float64)
        values = formula(2 * np.pi * n / denominator) if size > 1 or attrs.get("periodic", 1) else np.ones(size)
        if dtype == "bf16":
            return self.b.cast(self.b.const(values.astype(np.float32)), "bf16")
        return self.b.const(values, dtype)

    def op_HannWindow(self, node, inputs, attrs):
        return self._window(node, inputs, attrs, lambda t: np.sin(t / 2) ** 2)

    def op_HammingWindow(self, node, inputs, attrs):
        return self._window(node, inputs, attrs, lambda t: 25 / 46 - (21 / 46) * np.cos(t))

    def op_BlackmanWindow(self, node, inputs, attrs):
        return self._window(node, inputs, attrs, lambda t: 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t))

    def op_MelWeightMatrix(self, node, inputs, attrs):
        mel_bins = self.b.int_scalar(inputs[0], "MelWeightMatrix's num_mel_bins")
        dft_length = self.b.int_scalar(inputs[1], "MelWeightMatrix's dft_length")
        sample_rate = self.b.int_scalar(inputs[2], "MelWeightMatrix's sample_rate")
        low = self.b.scalar(inputs[3], "MelWeightMatrix's lower_edge_hertz")
        high = self.b.scalar(inputs[4], "MelWeightMatrix's upper_edge_hertz")
        dtype = onnx_dtype(attrs.get("output_datatype", 1), "MelWeightMatrix output_datatype")
        # Triangular filters between mel-spaced points, on the DFT bins (the ONNX definition).
        low_mel = 2595 * np.log1p(low / 700) / np.log(10)
        high_mel = 2595 * np.log1p(high / 700) / np.log(10)
        points = np.arange(mel_bins + 2) * ((high_mel - low_mel) / (mel_bins + 2)) + low_mel
        hertz = 700 * np.expm1(points / 2595 * np.log(10))
        bins = (((dft_length + 1) * hertz) // sample_rate).astype(np.int64)
        weights = np.zeros((dft_length // 2 + 1, mel_bins))
        for i in range(mel_bins):
            left, centre, right = bins[i:i + 3]
            if centre == left:
                weights[centre, i] = 1
            else:
                weights[left:centre + 1, i] = (np.arange(left, centre + 1) - left) / (centre - left)
            if right > centre:
                weights[centre:right, i] = (right - np.arange(centre, right)) / (right - centre)
        if dtype == "bf16":
            return self.b.cast(self.b.const(weights.astype(np.float32)), "bf16")
        return self.b.const(weights, dtype)

    # ---------------------------------------------------------------- bits and linear algebra

    def op_BitCast(self, node, inputs, attrs):
        return self.b.emit("bitcast", [inputs[0]], dtype=onnx_dtype(attrs["to"], "BitCast to"))

    def op_Det(self, node, inputs, attrs):
        return self.b.emit("det", [inputs[0]])

    def op_NonMaxSuppression(self, node, inputs, attrs):
        boxes = self.b.const_array(inputs[0], "NonMaxSuppression's boxes").astype(np.float64)
        scores = self.b.const_array(inputs[1], "NonMaxSuppression's scores").astype(np.float64)
        limit = self.b.int_scalar(_input(inputs, 2), "max_output_boxes_per_class", 0)
        iou_limit = self.b.scalar(_input(inputs, 3), "iou_threshold", 0.0)
        score_floor = self.b.scalar(_input(inputs, 4), "score_threshold", None)
        if attrs.get("center_point_box", 0):
            centre, half = boxes[..., :2], boxes[..., 2:] / 2
            corners = np.concatenate([centre - half, centre + half], axis=-1)
        else:  # [y1, x1, y2, x2] with either corner first
            corners = np.concatenate([np.minimum(boxes[..., :2], boxes[..., 2:]),
                                      np.maximum(boxes[..., :2], boxes[..., 2:])], axis=-1)
        selected = []
        for b in range(scores.shape[0]):
            area = np.prod(corners[b, :, 2:] - corners[b, :, :2], axis=-1)
            for c in range(scores.shape[1]):
                s = scores[b, c]
                order = [i for i in np.argsort(-s, kind="stable") if score_floor is None or s[i] > score_floor]
                kept: list[int] = []
                for i in order:
                    if len(kept) >= limit:
                        break
                    low = np.maximum(corners[b, kept, :2], corners[b, i, :2])
                    high = np.minimum(corners[b, kept, 2:], corners[b, i, 2:])
                    inter = np.prod(np.clip(high - low, 0, None), axis=-1)
                    union = area[kept] + area[i] - inter
                    iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0)
                    if not np.any(iou > iou_limit):
                        kept.append(int(i))
                selected += [(b, c, i) for i in kept]
        return self.b.const(np.array(selected, dtype=np.int64).reshape(-1, 3))
