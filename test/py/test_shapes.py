"""Shape rules: static and dynamic dims, the errors they report, and properties checked against
numpy broadcasting, Python slicing and torch's window arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from refcheck import foundation_ops
from sdc.dialect.dense import DenseValue
from sdc.dialect.op_classes import VerifyContext
from sdc.dialect.opdef import all_ops, get_op
from sdc.dialect.shapes import DYN, ShapeContext, ShapeError, TensorSpec, is_static

BIG = 2 ** 63 - 1
MESH = {"dp": 2, "tp": 4}


def T(text: str) -> TensorSpec:
    """A spec from tensor-type shorthand: "?x4xf32", "f32" (a scalar)."""
    *dims, dtype = text.split("x")
    return TensorSpec(tuple(DYN if d == "?" else int(d) for d in dims), dtype)


def infer(name: str, inputs: list[str], attrs: dict, mesh: dict | None = None) -> list[TensorSpec] | None:
    op = get_op(name)
    ctx = VerifyContext(mesh) if op.family == "collective" else ShapeContext()
    return op.shape(ctx, [T(s) for s in inputs], op.with_defaults(attrs))


# ---------------------------------------------------------------- inferred results

# (op, operand types, attributes, result types)
INFERRED = [
    ("neg", ["?x4xf32"], {}, ["?x4xf32"]),
    ("abs", ["3xi32"], {}, ["3xi32"]),
    ("exp", ["2x?xf16"], {}, ["2x?xf16"]),
    ("isnan", ["?xf32"], {}, ["?xi1"]),
    ("gelu", ["?x?xbf16"], {"approximate": "tanh"}, ["?x?xbf16"]),
    ("clip", ["?x3xi64"], {"min": 0.0}, ["?x3xi64"]),
    ("add", ["?x1xf32", "3xf32"], {}, ["?x3xf32"]),
    ("add", ["?x4xf32", "?x4xf32"], {}, ["?x4xf32"]),
    ("add", ["?xf32", "4xf32"], {}, ["4xf32"]),
    ("add", ["1xf32", "?xf32"], {}, ["?xf32"]),
    ("mul", ["f32", "2x3xf32"], {}, ["2x3xf32"]),
    ("shift_left", ["2x?xi32", "i32"], {}, ["2x?xi32"]),
    ("eq", ["?x3xi32", "3xi32"], {}, ["?x3xi1"]),
    ("and", ["?xi1", "1xi1"], {}, ["?xi1"]),
    ("where", ["?x1xi1", "4xf32", "f32"], {}, ["?x4xf32"]),
    ("cast", ["?x4xf32"], {"dtype": "i8"}, ["?x4xi8"]),
    ("matmul", ["?x16x64xf32", "32x64xf32"], {"transpose_rhs": True}, ["?x16x32xf32"]),
    ("matmul", ["4x3xf32", "4x5xf32"], {"transpose_lhs": True}, ["3x5xf32"]),
    ("matmul", ["4xf32", "4xf32"], {}, ["f32"]),
    ("matmul", ["?xf32", "?x?x3xf32"], {}, ["?x3xf32"]),
    ("matmul", ["2x3x4xf32", "4xf32"], {}, ["2x3xf32"]),
    ("matmul", ["2x1x3x4xf32", "5x4x2xf32"], {}, ["2x5x3x2xf32"]),
    ("matmul", ["?x?xf32", "?x?xf32"], {}, ["?x?xf32"]),
    ("conv", ["?x3x224x224xf32", "64x3x7x7xf32"], {"strides": [2, 2], "pads": [3, 3, 3, 3]}, ["?x64x112x112xf32"]),
    ("conv", ["1x4x?x8xf32", "8x2x3x3xf32"], {"groups": 2}, ["1x8x?x6xf32"]),
    ("conv", ["1x?x8xf32", "4x2x3xf32"], {"dilations": [2]}, ["1x4x4xf32"]),
    ("conv", ["1x2x9x9xf32", "4x2x?x3xf32"], {"pads": [1, 0, 2, 0]}, ["1x4x?x7xf32"]),
    ("conv_weight_grad", ["8x3x224x224xf32", "8x64x112x112xf32"],
     {"strides": [2, 2], "pads": [3, 3, 3, 3], "kernel": [7, 7]}, ["64x3x7x7xf32"]),
    ("conv_weight_grad", ["1x4x8x8xf32", "1x8x6x6xf32"], {"groups": 2, "kernel": [3, 3]}, ["8x2x3x3xf32"]),
    ("max_pool", ["?x64x112x112xf32"], {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, ["?x64x56x56xf32"]),
    ("max_pool", ["1x1x7xf32"], {"kernel": [2], "strides": [2], "ceil_mode": True}, ["1x1x4xf32"]),
    ("avg_pool", ["1x1x?x5xf32"], {"kernel": [2, 2]}, ["1x1x?x4xf32"]),
    ("global_avg_pool", ["?x8x?x?xf32"], {}, ["?x8x1x1xf32"]),
    ("global_max_pool", ["2x8x5xf16"], {}, ["2x8x1xf16"]),
    ("reduce_sum", ["?x4x5xf32"], {"axes": [1], "keepdims": True}, ["?x1x5xf32"]),
    ("reduce_max", ["?x4x5xi32"], {}, ["i32"]),
    ("reduce_mean", ["?x4x5xf32"], {"axes": [-1, 0]}, ["4xf32"]),
    ("reduce_min", ["?x4x5xf16"], {"axes": [0], "keepdims": True}, ["1x4x5xf16"]),
    ("reduce_prod", ["?x4x?xi64"], {"axes": [2]}, ["?x4xi64"]),
    ("argmax", ["?x10xf32"], {"axis": 1}, ["?xi64"]),
    ("argmin", ["?x10xi8"], {"axis": 0, "keepdims": True}, ["1x10xi64"]),
    ("softmax", ["?x?xf16"], {"axis": 0}, ["?x?xf16"]),
    ("log_softmax", ["2x?xf64"], {}, ["2x?xf64"]),
    ("layer_norm", ["?x?x8xf32", "8xf32", "8xf32"], {}, ["?x?x8xf32"]),
    ("layer_norm", ["?x?xf32", "8xf32", "8xf32"], {}, ["?x?xf32"]),
    ("rms_norm", ["2x?x8xf32", "?x8xf32"], {"axis": 1}, ["2x?x8xf32"]),
    ("batch_norm", ["?x?x4x4xf32"] + ["3xf32"] * 4, {}, ["?x?x4x4xf32"]),
    ("reshape", ["2x3x4xf32"], {"shape": [-1, 4]}, ["6x4xf32"]),
    ("reshape", ["?x3x4xf32"], {"shape": [-1, 12]}, ["?x12xf32"]),
    ("reshape", ["?x128x768xf32"], {"shape": ["B", -1, 64]}, ["?x?x64xf32"]),
    ("reshape", ["1xf32"], {"shape": []}, ["f32"]),
    ("transpose", ["?x3x4xf32"], {"perm": [2, 0, 1]}, ["4x?x3xf32"]),
    ("broadcast", ["1x1x64xf32"], {"shape": ["B", 12, 1, 1]}, ["?x12x1x64xf32"]),
    ("broadcast", ["3x1xf32"], {"shape": [2, 1, 4]}, ["2x3x4xf32"]),
    ("concat", ["?x2xf32", "?x3xf32"], {"axis": 1}, ["?x5xf32"]),
    ("concat", ["?x2xf32", "4x2xf32"], {"axis": 0}, ["?x2xf32"]),
    ("concat", ["?x2xf32", "4x?xf32"], {"axis": -1}, ["4x?xf32"]),
    ("slice", ["?x10xf32"], {"starts": [1], "ends": [BIG], "axes": [1], "steps": [2]}, ["?x5xf32"]),
    ("slice", ["?x10xf32"], {"starts": [0], "ends": [2]}, ["?x10xf32"]),
    ("slice", ["8x10xf32"], {"starts": [-1, 2], "ends": [-BIG, -2], "steps": [-3, 1]}, ["3x6xf32"]),
    ("pad", ["?x4xf32"], {"pads": [0, 1, 0, 1]}, ["?x6xf32"]),
    ("pad", ["5x5xf32"], {"pads": [-1, 0, 0, -2]}, ["4x3xf32"]),
    ("pad", ["5x?xi32"], {"pads": [1, 2, 3, 4], "mode": "reflect"}, ["9x?xi32"]),
    ("split", ["?x6xf32"], {"axis": 1, "parts": 3}, ["?x2xf32"] * 3),
    ("split", ["?x?xf32"], {"axis": -1, "parts": 2}, ["?x?xf32"] * 2),
    ("squeeze", ["?x1x3xf32"], {"axes": [1]}, ["?x3xf32"]),
    ("squeeze", ["?x3xf32"], {"axes": [0]}, ["3xf32"]),
    ("unsqueeze", ["?x?xi64"], {"axes": [1, 2]}, ["?x1x1x?xi64"]),
    ("unsqueeze", ["f32"], {"axes": [0, -1]}, ["1x1xf32"]),
    ("gather", ["50257x768xf32", "?x?xi64"], {"axis": 0}, ["?x?x768xf32"]),
    ("gather", ["3x?x5xf32", "2xi32"], {"axis": -1}, ["3x?x2xf32"]),
    ("gather", ["3x4xf32", "i64"], {"axis": 1}, ["3xf32"]),
    ("iota", [], {"shape": ["S", 4], "dimension": 1, "dtype": "i64"}, ["?x4xi64"]),
    ("dim_values", [], {"dims": ["B", "S*12", 64]}, ["3xi64"]),
    ("lrn", ["?x96x55x55xf32"], {"size": 5}, ["?x96x55x55xf32"]),
    ("layout_cast", ["?x3x8x8xf32"], {"layout": [0, 2, 3, 1]}, ["?x3x8x8xf32"]),
    ("all_reduce", ["?x8xf32"], {"mesh_axes": ["tp"]}, ["?x8xf32"]),
    ("all_gather", ["?x8xf32"], {"mesh_axes": ["dp", "tp"], "axis": 1}, ["?x64xf32"]),
    ("all_slice", ["?x64xf32"], {"mesh_axes": ["dp", "tp"], "axis": 1}, ["?x8xf32"]),
    ("reduce_scatter", ["?x8xf32"], {"mesh_axes": ["tp"], "axis": 1}, ["?x2xf32"]),
    ("reduce_scatter", ["?x8xf32"], {"mesh_axes": ["tp"], "axis": 0}, ["?x8xf32"]),
    ("all_to_all", ["8x4xf32"], {"mesh_axes": ["tp"], "split_axis": 0, "concat_axis": 1}, ["2x16xf32"]),
    ("broadcast_from", ["?xf32"], {"mesh_axes": ["tp"], "root": 3}, ["?xf32"]),
    ("send", ["4xf32"], {"mesh_axes": ["dp"]}, []),
]


@pytest.mark.parametrize("name,inputs,attrs,results", INFERRED,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(INFERRED)])
def test_inferred_results(name, inputs, attrs, results):
    assert infer(name, inputs, attrs, MESH) == [T(r) for r in results]


def test_constant_takes_its_literal_type():
    value = DenseValue.from_numpy(np.ones((2, 3), np.int16))
    assert infer("constant", [], {"value": value}) == [T("2x3xi16")]


def test_declared_results_are_not_inferred():
    assert get_op("parameter").shape is None
    assert infer("recv", [], {"mesh_axes": ["dp"]}, MESH) is None


def test_every_structured_op_has_an_inferred_case():
    # The elementwise tables share one rule per arity, covered above; every other op has its own rule.
    shared = {"elementwise unary", "elementwise binary", "comparison", "logical"}
    covered = {case[0] for case in INFERRED} | {"constant", "parameter", "recv"}
    families = {op.family for op in all_ops().values()} - shared
    missing = sorted(n for n in foundation_ops(families) if n not in covered)
    assert not missing, f"ops without a shape-rule case: {missing}"


# ---------------------------------------------------------------- errors

# (op, operand types, attributes, expected message (a regex))
ERRORS = [
    ("exp", ["3xi32"], {}, r"operand must have float element type, found i32"),
    ("not", ["3xf32"], {}, r"operand must have bool element type, found f32"),
    ("neg", ["3xi1"], {}, r"operand must have numeric element type, found i1"),
    ("bitwise_not", ["3xf32"], {}, r"operand must have integer or bool element type, found f32"),
    ("isinf", ["3xi32"], {}, r"operand must have float element type, found i32"),
    ("add", ["3xf32", "3xf16"], {}, r"operand element types differ: lhs is f32, rhs is f16"),
    ("add", ["2x3xf32", "4xf32"], {}, r"operand shapes are not broadcast-compatible: lhs is \[2x3\], rhs is \[4\]"),
    ("sub", ["?x3xf32", "2x4xf32"], {}, r"not broadcast-compatible: lhs is \[\?x3\], rhs is \[2x4\]"),
    ("shift_left", ["3xf32", "3xf32"], {}, r"operands must have integer element type, found f32"),
    ("and", ["3xf32", "3xf32"], {}, r"operands must have bool element type, found f32"),
    ("lt", ["3xf32", "3xi32"], {}, r"operand element types differ: lhs is f32, rhs is i32"),
    ("where", ["3xf32", "3xf32", "3xf32"], {}, r"condition must have element type i1, found f32"),
    ("where", ["3xi1", "3xf32", "3xi32"], {}, r"branch element types differ: on_true is f32, on_false is i32"),
    ("where", ["2xi1", "3xf32", "3xf32"], {}, r"condition is \[2\], on_true is \[3\], on_false is \[3\]"),
    ("matmul", ["3x4xf32", "5x6xf32"], {}, r"contracting dims differ: lhs has 4, rhs has 5"),
    ("matmul", ["3x4xf32", "5x4xf32"], {"transpose_lhs": True}, r"contracting dims differ: lhs has 3, rhs has 5"),
    ("matmul", ["f32", "3xf32"], {}, r"operands must have rank >= 1, found lhs rank 0, rhs rank 1"),
    ("matmul", ["2x3x4xf32", "3x4x5xf32"], {}, r"not broadcast-compatible: lhs batch is \[2\], rhs batch is \[3\]"),
    ("matmul", ["3x4xf32", "4x5xf16"], {}, r"operand element types differ: lhs is f32, rhs is f16"),
    ("matmul", ["3x4xi1", "4x5xi1"], {}, r"operands must have numeric element type, found i1"),
    ("conv", ["1x4x8x8xf32", "8x3x3x3xf32"], {},
     r"input channels \(4\) must equal weight channels per group \(3\) times groups \(1\)"),
    ("conv", ["1x4x8x8xf32", "6x1x3x3xf32"], {"groups": 4}, r"output channels \(6\) must be divisible by groups \(4\)"),
    ("conv", ["1x4x8x8xf32", "6x4x3x3xf32"], {"groups": 0}, r"groups must be >= 1, found 0"),
    ("conv", ["1x4xf32", "1x4xf32"], {}, r"input must have rank >= 3 \(N, C, spatial...\), found rank 2"),
    ("conv", ["1x4x8x8xf32", "6x4x3xf32"], {}, r"weight rank must equal input rank 4, found 3"),
    ("conv", ["1x1x2x2xf32", "1x1x3x3xf32"], {},
     r"spatial dim 0 of size 2 is smaller than the \(dilated\) window 3 with pads 0\+0"),
    ("conv", ["1x1x5x5xf32", "1x1x3x3xf32"], {"dilations": [3, 1]}, r"smaller than the \(dilated\) window 7"),
    ("conv", ["1x1x8x8xf32", "1x1x3x3xf32"], {"strides": [2]}, r"'strides' has 1 entries, expected 2 for 2 spatial dims"),
    ("conv", ["1x1x8x8xf32", "1x1x3x3xf32"], {"pads": [1, 1]}, r"'pads' has 2 entries, expected 4 for 2 spatial dims"),
    ("conv", ["1x1x8x8xf32", "1x1x3x3xf32"], {"strides": [1, 0]}, r"strides must be >= 1, found \[1, 0\]"),
    ("conv", ["1x1x8x8xf32", "1x1x3x3xf32"], {"dilations": [0, 1]}, r"dilations must be >= 1, found \[0, 1\]"),
    ("conv", ["1x1x8x8xf32", "1x1x3x3xf32"], {"pads": [0, -1, 0, 0]}, r"pads must be >= 0, found \[0, -1, 0, 0\]"),
    ("conv", ["1x1x8x8xi32", "1x1x3x3xi32"], {}, r"operands must have float element type, found i32"),
    ("conv", ["1x1x8x8xf32", "1x1x3x3xf16"], {}, r"operand element types differ: input is f32, weight is f16"),
    ("max_pool", ["1x1x4x4xf32"], {"kernel": [2]}, r"input rank 4 does not match a 1-d kernel \(expected rank 3\)"),
    ("max_pool", ["1x1x4x4xf32"], {"kernel": [2, 0]}, r"kernel dims must be >= 1, found \[2, 0\]"),
    ("avg_pool", ["1x1x4x4xi32"], {"kernel": [2, 2]}, r"operand must have float element type, found i32"),
    ("avg_pool", ["1x1x1x4xf32"], {"kernel": [2, 2]}, r"spatial dim 0 of size 1 is smaller than"),
    ("global_avg_pool", ["2x3xf32"], {}, r"input must have rank >= 3"),
    ("reduce_sum", ["3x4xf32"], {"axes": [2]}, r"axis 2 is out of range for rank 2"),
    ("reduce_sum", ["3x4xf32"], {"axes": [0, -2]}, r"axes \[0, -2\] repeat an axis"),
    ("reduce_prod", ["3x4xi1"], {}, r"operand must have numeric element type, found i1"),
    ("argmax", ["3x4xf32"], {"axis": -3}, r"axis -3 is out of range for rank 2"),
    ("softmax", ["3x4xi32"], {}, r"operand must have float element type, found i32"),
    ("log_softmax", ["3x4xf32"], {"axis": 2}, r"axis 2 is out of range for rank 2"),
    ("layer_norm", ["?x8xf32", "4xf32", "8xf32"], {}, r"scale dim 0 is 4, the normalized dim is 8"),
    ("layer_norm", ["2x8xf32", "2x8xf32", "8xf32"], {}, r"scale must have the normalized shape \(rank 1\), found rank 2"),
    ("layer_norm", ["2x8xf32", "8xf32", "8xf16"], {}, r"bias element type f16 differs from input element type f32"),
    ("rms_norm", ["2x3x8xf32", "8xf32"], {"axis": 1}, r"scale must have the normalized shape \(rank 2\), found rank 1"),
    ("batch_norm", ["2x3x4xf32"] + ["4xf32"] * 4, {}, r"scale has 4 values, the input has 3 channels"),
    ("batch_norm", ["3xf32"] * 5, {}, r"input must have rank >= 2 \(N, C, ...\), found rank 1"),
    ("batch_norm", ["2x3xf32", "3xf32", "3xf32", "1x3xf32", "3xf32"], {}, r"mean must have rank 1"),
    ("reshape", ["2x3xf32"], {"shape": [-1, -1]}, r"shape \[-1, -1\] has more than one -1"),
    ("reshape", ["2x3xf32"], {"shape": [4, 2]}, r"cannot reshape 6 elements into \[4, 2\] \(8 elements\)"),
    ("reshape", ["2x3xf32"], {"shape": [4, -1]}, r"cannot reshape 6 elements into \[4, -1\]: 4 does not divide it"),
    ("reshape", ["2x3xf32"], {"shape": [-2, -3]}, r"has a negative dim other than -1"),
    ("transpose", ["2x3xf32"], {"perm": [0, 0]}, r"perm \[0, 0\] is not a permutation of the operand's 2 dims"),
    ("transpose", ["2x3xf32"], {"perm": [1, 0, 2]}, r"is not a permutation of the operand's 2 dims"),
    ("broadcast", ["3xf32"], {"shape": [4]}, r"not broadcast-compatible: operand is \[3\], shape is \[4\]"),
    ("broadcast", ["3xf32"], {"shape": [-1, 3]}, r"shape \[-1, 3\] has a negative dim"),
    ("concat", ["2x3xf32", "2x3xf16"], {"axis": 0}, r"operand element types differ: lhs is f32, rhs is f16"),
    ("concat", ["2x3xf32", "3xf32"], {"axis": 0}, r"operand ranks differ: lhs has rank 2, rhs has rank 1"),
    ("concat", ["2x3xf32", "2x4xf32"], {"axis": 0}, r"dim 1 differs: lhs has 3, rhs has 4"),
    ("concat", ["2x3xf32", "2x3xf32"], {"axis": 2}, r"axis 2 is out of range for rank 2"),
    ("slice", ["4xf32"], {"starts": [0], "ends": [2], "steps": [0]}, r"a step of 0 is not allowed"),
    ("slice", ["4x4xf32"], {"starts": [0], "ends": [2, 3]}, r"starts, ends, axes and steps differ in length: 1, 2, 1, 1"),
    ("slice", ["4x4xf32"], {"starts": [0, 0], "ends": [2, 3], "axes": [1, -1]}, r"axes \[1, -1\] repeat an axis"),
    ("slice", ["4x4xf32"], {"starts": [0], "ends": [2], "axes": [2]}, r"axis 2 is out of range for rank 2"),
    ("pad", ["2x3xf32"], {"pads": [1, 1]}, r"pads has 2 entries, expected 4 \(begins then ends\) for rank 2"),
    ("pad", ["2x3xf32"], {"pads": [-1, 0, 0, 0], "mode": "reflect"}, r"negative pads need mode 'constant', found mode 'reflect'"),
    ("pad", ["2x3xf32"], {"pads": [-2, 0, -1, 0]}, r"dim 0 of size 2 cannot be cropped by 2\+1"),
    ("split", ["?x7xf32"], {"axis": 1, "parts": 2}, r"dim 1 of size 7 does not split into 2 equal parts"),
    ("split", ["?x8xf32"], {"axis": 1, "parts": 0}, r"parts must be >= 1, found 0"),
    ("split", ["?x8xf32"], {"axis": 2, "parts": 2}, r"axis 2 is out of range for rank 2"),
    ("squeeze", ["2x3xf32"], {"axes": [0]}, r"cannot squeeze dim 0 of size 2"),
    ("squeeze", ["1x3xf32"], {"axes": [0, -2]}, r"axes \[0, -2\] repeat an axis"),
    ("unsqueeze", ["3xf32"], {"axes": [2]}, r"axis 2 is out of range for rank 2"),
    ("gather", ["3x4xf32", "2xf32"], {}, r"indices must have integer element type, found f32"),
    ("gather", ["f32", "2xi64"], {}, r"data must have rank >= 1, found a scalar"),
    ("gather", ["3x4xf32", "2xi64"], {"axis": 2}, r"axis 2 is out of range for rank 2"),
    ("iota", [], {"shape": [-1, 3], "dimension": 0, "dtype": "i64"}, r"iota shape cannot infer a dim \(-1\)"),
    ("iota", [], {"shape": [2, 3], "dimension": 0, "dtype": "i1"}, r"iota dtype must be numeric, found i1"),
    ("iota", [], {"shape": [2, 3], "dimension": 2, "dtype": "i64"}, r"dimension 2 is out of range for rank 2"),
    ("lrn", ["2x3xf32"], {"size": 3}, r"operand must have rank >= 3 \(N, C, spatial...\), found rank 2"),
    ("lrn", ["2x3x4xf32"], {"size": 0}, r"size must be >= 1, found 0"),
    ("layout_cast", ["?x3xf32"], {"layout": [0, 2]}, r"layout \[0, 2\] is not a permutation of the operand's 2 dims"),
    ("all_reduce", ["3xf32"], {"mesh_axes": ["pp"]}, r"mesh axis 'pp' is not in the mesh \(axes: 'dp', 'tp'\)"),
    ("all_reduce", ["3xf32"], {"mesh_axes": []}, r"mesh_axes must name at least one mesh axis"),
    ("all_reduce", ["3xf32"], {"mesh_axes": ["tp", "tp"]}, r"mesh_axes \['tp', 'tp'\] repeat an axis"),
    ("all_reduce", ["3xi1"], {"mesh_axes": ["tp"]}, r"operand must have numeric element type, found i1"),
    ("all_gather", ["3xf32"], {"mesh_axes": ["tp"], "axis": 1}, r"axis 1 is out of range for rank 1"),
    ("all_slice", ["3x5xf32"], {"mesh_axes": ["tp"], "axis": 1}, r"dim 1 of size 5 is not divisible by the group size"),
    ("reduce_scatter", ["6xf32"], {"mesh_axes": ["tp"], "axis": 0}, r"dim 0 of size 6 is not divisible by the group size 4"),
    ("all_to_all", ["6x4xf32"], {"mesh_axes": ["tp"], "split_axis": 0, "concat_axis": 1},
     r"split dim 0 of size 6 is not divisible by the group size 4"),
    ("all_to_all", ["8x4xf32"], {"mesh_axes": ["tp"], "split_axis": 2, "concat_axis": 1},
     r"split_axis 2 is out of range for rank 2"),
    ("broadcast_from", ["3xf32"], {"mesh_axes": ["tp"], "root": 4}, r"root 4 is outside the group of 4 devices"),
    ("send", ["3xf32"], {"mesh_axes": ["x"]}, r"mesh axis 'x' is not in the mesh"),
]


@pytest.mark.parametrize("name,inputs,attrs,message", ERRORS, ids=[f"{c[0]}-{i}" for i, c in enumerate(ERRORS)])
def test_shape_errors(name, inputs, attrs, message):
    with pytest.raises(ShapeError, match=message):
        infer(name, inputs, attrs, MESH)


@pytest.mark.parametrize("name", ["all_reduce", "send", "recv"])
def test_collectives_need_a_mesh(name):
    inputs = [] if name == "recv" else ["4xf32"]
    with pytest.raises(ShapeError, match="needs a device mesh: the enclosing module has no 'sdc.mesh' attribute"):
        infer(name, inputs, {"mesh_axes": ["dp"]}, None)


# Checks between a static and a dynamic dim are left to run time: none of these fail.
DEFERRED = [
    ("add", ["?x3xf32", "2x3xf32"], {}),
    ("matmul", ["3x?xf32", "5x6xf32"], {}),
    ("conv", ["1x?x8x8xf32", "8x3x3x3xf32"], {"groups": 2}),
    ("conv", ["1x1x?x8xf32", "1x1x3x3xf32"], {}),
    ("layer_norm", ["2x?xf32", "8xf32", "8xf32"], {}),
    ("reshape", ["?x3xf32"], {"shape": [4, -1]}),
    ("reshape", ["?x3xf32"], {"shape": [5, 7]}),
    ("concat", ["2x?xf32", "3x4xf32"], {"axis": 0}),
    ("split", ["?x?xf32"], {"axis": 1, "parts": 3}),
    ("squeeze", ["?x3xf32"], {"axes": [0]}),
    ("reduce_scatter", ["?xf32"], {"mesh_axes": ["tp"], "axis": 0}),
]


@pytest.mark.parametrize("name,inputs,attrs", DEFERRED, ids=[f"{c[0]}-{i}" for i, c in enumerate(DEFERRED)])
def test_dynamic_dims_defer_checks(name, inputs, attrs):
    infer(name, inputs, attrs, MESH)


# ---------------------------------------------------------------- properties

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)
PROPERTY = settings(max_examples=60, deadline=None)


def _broadcastable_pair():
    """Two shapes made broadcast-compatible most of the time, by sharing dims or using 1."""
    def build(base, picks):
        lhs, rhs = [], []
        for d, (a, b) in zip(base, picks):
            lhs.append(d if a else 1)
            rhs.append(d if b else 1)
        return tuple(lhs), tuple(rhs)

    return st.lists(st.integers(1, 4), max_size=4).flatmap(
        lambda base: st.tuples(st.just(base), st.lists(st.tuples(st.booleans(), st.booleans()),
                                                        min_size=len(base), max_size=len(base)))
    ).map(lambda bp: build(*bp))


@PROPERTY
@given(st.one_of(st.tuples(shapes, shapes), _broadcastable_pair()), st.integers(0, 2), st.integers(0, 2))
def test_broadcast_matches_numpy(pair, drop_lhs, drop_rhs):
    lhs, rhs = pair[0][drop_lhs:], pair[1][drop_rhs:]
    try:
        want = np.broadcast_shapes(lhs, rhs)
    except ValueError:
        with pytest.raises(ShapeError, match="not broadcast-compatible"):
            ShapeContext().broadcast(lhs, rhs)
        return
    assert ShapeContext().broadcast(lhs, rhs) == want


@PROPERTY
@given(_broadcastable_pair(), st.data())
def test_broadcast_with_dynamic_dims_is_sound(pair, data):
    """Forgetting some dims never contradicts the static answer: each dim the rule still knows is right."""
    lhs, rhs = pair
    want = np.broadcast_shapes(lhs, rhs)
    mask_l = data.draw(st.lists(st.booleans(), min_size=len(lhs), max_size=len(lhs)))
    mask_r = data.draw(st.lists(st.booleans(), min_size=len(rhs), max_size=len(rhs)))
    dyn_l = tuple(DYN if m else d for d, m in zip(lhs, mask_l))
    dyn_r = tuple(DYN if m else d for d, m in zip(rhs, mask_r))
    got = ShapeContext().broadcast(dyn_l, dyn_r)
    assert len(got) == len(want)
    assert all(not is_static(g) or g == w for g, w in zip(got, want))


@PROPERTY
@given(st.integers(0, 12), st.integers(-20, 20) | st.just(BIG) | st.just(-BIG), st.integers(-20, 20) | st.just(BIG) | st.just(-BIG),
       st.integers(-4, 4).filter(bool))
def test_slice_length_matches_python(size, start, end, step):
    (result,) = get_op("slice").shape(ShapeContext(), [TensorSpec((size,), "f32")],
                                      {"starts": [start], "ends": [end], "axes": [], "steps": [step]})
    assert result.shape == (len(list(range(size))[start:end:step]),)


@PROPERTY
@given(st.integers(1, 20), st.integers(1, 5), st.integers(1, 4), st.integers(0, 2), st.integers(1, 3), st.booleans())
def test_max_pool_size_matches_torch(size, kernel, stride, pad, dilation, ceil_mode):
    assume(pad <= kernel // 2)  # torch's limit for pooling pads
    assume(size + 2 * pad >= dilation * (kernel - 1) + 1)
    attrs = {"kernel": [kernel], "strides": [stride], "pads": [pad, pad], "dilations": [dilation], "ceil_mode": ceil_mode}
    (result,) = get_op("max_pool").shape(ShapeContext(), [TensorSpec((1, 1, size), "f32")], attrs)
    want = F.max_pool1d(torch.ones(1, 1, size), kernel, stride, pad, dilation, ceil_mode).shape
    assert result.shape == tuple(want)


@PROPERTY
@given(st.integers(1, 20), st.integers(1, 5), st.integers(1, 4), st.integers(0, 2), st.booleans())
def test_avg_pool_size_matches_torch(size, kernel, stride, pad, ceil_mode):
    assume(pad <= kernel // 2)
    assume(size + 2 * pad >= kernel)
    attrs = {"kernel": [kernel], "strides": [stride], "pads": [pad, pad], "ceil_mode": ceil_mode}
    (result,) = get_op("avg_pool").shape(ShapeContext(), [TensorSpec((1, 1, size), "f32")], get_op("avg_pool").with_defaults(attrs))
    want = F.avg_pool1d(torch.ones(1, 1, size), kernel, stride, pad, ceil_mode).shape
    assert result.shape == tuple(want)


@PROPERTY
@given(st.integers(1, 16), st.integers(1, 5), st.integers(1, 4), st.integers(0, 3), st.integers(0, 3), st.integers(1, 3))
def test_conv_size_matches_torch(size, kernel, stride, pad_begin, pad_end, dilation):
    assume(size + pad_begin + pad_end >= dilation * (kernel - 1) + 1)
    attrs = {"strides": [stride], "pads": [pad_begin, pad_end], "dilations": [dilation], "groups": 1}
    (result,) = get_op("conv").shape(ShapeContext(), [TensorSpec((1, 2, size), "f32"), TensorSpec((3, 2, kernel), "f32")], attrs)
    x = F.pad(torch.ones(1, 2, size), [pad_begin, pad_end])
    want = F.conv1d(x, torch.ones(3, 2, kernel), stride=stride, dilation=dilation).shape
    assert result.shape == tuple(want)


@PROPERTY
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reshape_infers_like_numpy(dims, data):
    total = int(np.prod(dims))
    target = data.draw(st.permutations(dims).map(list))
    target[data.draw(st.integers(0, len(target) - 1))] = -1
    (result,) = get_op("reshape").shape(ShapeContext(), [TensorSpec(tuple(dims), "f32")], {"shape": target})
    assert result.shape == np.empty(total).reshape(target).shape


@PROPERTY
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.lists(st.integers(1, 3), min_size=0, max_size=2),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.booleans(), st.booleans())
def test_matmul_shape_matches_numpy(batch_l, batch_r, m, k, n, lhs_vector, rhs_vector):
    lhs = (k,) if lhs_vector else (*batch_l, m, k)
    rhs = (k,) if rhs_vector else (*batch_r, k, n)
    try:
        want = np.matmul(np.empty(lhs), np.empty(rhs)).shape
    except ValueError:
        with pytest.raises(ShapeError):
            get_op("matmul").shape(ShapeContext(), [TensorSpec(lhs, "f32"), TensorSpec(rhs, "f32")],
                                   get_op("matmul").with_defaults({}))
        return
    (result,) = get_op("matmul").shape(ShapeContext(), [TensorSpec(lhs, "f32"), TensorSpec(rhs, "f32")],
                                       get_op("matmul").with_defaults({}))
    assert result.shape == want
