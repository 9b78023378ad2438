// Shape rules of the data-movement ops (sdc/dialect/ops/shape_ops.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @reshape_two_inferred_dims(%x: tensor<4x6xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'sdc.reshape' op shape [-1, -1] has more than one -1}}
  %0 = "sdc.reshape"(%x) {shape = [-1, -1]} : (tensor<4x6xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @reshape_negative_dim(%x: tensor<4x6xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'sdc.reshape' op shape [-2, 12] has a negative dim other than -1}}
  %0 = "sdc.reshape"(%x) {shape = [-2, 12]} : (tensor<4x6xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @reshape_inferred_dim_not_whole(%x: tensor<4x6xf32>) -> tensor<5x?xf32> {
  // expected-error @+1 {{'sdc.reshape' op cannot reshape 24 elements into [5, -1]: 5 does not divide it}}
  %0 = "sdc.reshape"(%x) {shape = [5, -1]} : (tensor<4x6xf32>) -> tensor<5x?xf32>
  return %0 : tensor<5x?xf32>
}

// -----

func.func @reshape_element_count(%x: tensor<4x6xf32>) -> tensor<5x5xf32> {
  // expected-error @+1 {{'sdc.reshape' op cannot reshape 24 elements into [5, 5] (25 elements)}}
  %0 = "sdc.reshape"(%x) {shape = [5, 5]} : (tensor<4x6xf32>) -> tensor<5x5xf32>
  return %0 : tensor<5x5xf32>
}

// -----

func.func @transpose_not_a_permutation(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'sdc.transpose' op perm [0, 0] is not a permutation of the operand's 2 dims}}
  %0 = "sdc.transpose"(%x) {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @broadcast_negative_dim(%x: tensor<3xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{'sdc.broadcast' op shape [-1, 3] has a negative dim}}
  %0 = "sdc.broadcast"(%x) {shape = [-1, 3]} : (tensor<3xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @broadcast_incompatible(%x: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'sdc.broadcast' op operand shapes are not broadcast-compatible: operand is [3], shape is [2x4]}}
  %0 = "sdc.broadcast"(%x) {shape = [2, 4]} : (tensor<3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'sdc.concat' op axis 2 is out of range for rank 2}}
  %0 = "sdc.concat"(%a, %a) {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_types_differ(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'sdc.concat' op operand element types differ: lhs is f32, rhs is f16}}
  %0 = "sdc.concat"(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_ranks_differ(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'sdc.concat' op operand ranks differ: lhs has rank 2, rhs has rank 1}}
  %0 = "sdc.concat"(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_other_dim_differs(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'sdc.concat' op dim 0 differs: lhs has 2, rhs has 4}}
  %0 = "sdc.concat"(%a, %b) {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @slice_lengths(%x: tensor<10xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'sdc.slice' op starts, ends, axes and steps differ in length: 1, 2, 1, 1}}
  %0 = "sdc.slice"(%x) {starts = array<i64: 0>, ends = array<i64: 5, 5>} : (tensor<10xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @slice_axis(%x: tensor<10xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'sdc.slice' op axis 1 is out of range for rank 1}}
  %0 = "sdc.slice"(%x) {axes = array<i64: 1>, starts = array<i64: 0>, ends = array<i64: 5>} : (tensor<10xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @slice_step_zero(%x: tensor<10xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'sdc.slice' op a step of 0 is not allowed}}
  %0 = "sdc.slice"(%x) {starts = array<i64: 0>, ends = array<i64: 5>, steps = array<i64: 0>} : (tensor<10xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @pad_length(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'sdc.pad' op pads has 2 entries, expected 4 (begins then ends) for rank 2}}
  %0 = "sdc.pad"(%x) {pads = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @pad_negative_reflect(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'sdc.pad' op negative pads need mode 'constant', found mode 'reflect'}}
  %0 = "sdc.pad"(%x) {mode = "reflect", pads = array<i64: 0, 0, 0, -1>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @pad_crop_too_much(%x: tensor<2x3xf32>) -> tensor<2x0xf32> {
  // expected-error @+1 {{'sdc.pad' op dim 1 of size 3 cannot be cropped by 2+2}}
  %0 = "sdc.pad"(%x) {pads = array<i64: 0, -2, 0, -2>} : (tensor<2x3xf32>) -> tensor<2x0xf32>
  return %0 : tensor<2x0xf32>
}

// -----

func.func @pad_mode(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'sdc.pad' op attribute 'mode' expected one of 'constant', 'reflect', 'edge', found 'wrap'}}
  %0 = "sdc.pad"(%x) {mode = "wrap", pads = array<i64: 0, 0, 0, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @split_axis(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.split' op axis -2 is out of range for rank 1}}
  %0:2 = "sdc.split"(%x) {axis = -2 : i64, parts = 2 : i64} : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return %0#0 : tensor<2xf32>
}

// -----

func.func @split_no_parts(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.split' op parts must be >= 1, found 0}}
  %0:1 = "sdc.split"(%x) {axis = 0 : i64, parts = 0 : i64} : (tensor<4xf32>) -> (tensor<4xf32>)
  return %0#0 : tensor<4xf32>
}

// -----

func.func @split_uneven(%x: tensor<5xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.split' op dim 0 of size 5 does not split into 2 equal parts}}
  %0:2 = "sdc.split"(%x) {axis = 0 : i64, parts = 2 : i64} : (tensor<5xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  return %0#0 : tensor<2xf32>
}

// -----

func.func @squeeze_not_one(%x: tensor<2x1x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+1 {{'sdc.squeeze' op cannot squeeze dim 0 of size 2}}
  %0 = "sdc.squeeze"(%x) {axes = array<i64: 0>} : (tensor<2x1x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

func.func @squeeze_axis(%x: tensor<2x1xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.squeeze' op axis 2 is out of range for rank 2}}
  %0 = "sdc.squeeze"(%x) {axes = array<i64: 2>} : (tensor<2x1xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @unsqueeze_axis(%x: tensor<2xf32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'sdc.unsqueeze' op axis 2 is out of range for rank 2}}
  %0 = "sdc.unsqueeze"(%x) {axes = array<i64: 2>} : (tensor<2xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

func.func @unsqueeze_axes_repeat(%x: tensor<2xf32>) -> tensor<1x1x2xf32> {
  // expected-error @+1 {{'sdc.unsqueeze' op axes [0, -3] repeat an axis}}
  %0 = "sdc.unsqueeze"(%x) {axes = array<i64: 0, -3>} : (tensor<2xf32>) -> tensor<1x1x2xf32>
  return %0 : tensor<1x1x2xf32>
}

// -----

func.func @gather_float_indices(%d: tensor<10x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'sdc.gather' op indices must have integer element type, found f32}}
  %0 = "sdc.gather"(%d, %i) : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @gather_from_a_scalar(%d: tensor<f32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{'sdc.gather' op data must have rank >= 1, found a scalar}}
  %0 = "sdc.gather"(%d, %i) : (tensor<f32>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @gather_axis(%d: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'sdc.gather' op axis 2 is out of range for rank 2}}
  %0 = "sdc.gather"(%d, %i) {axis = 2 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
