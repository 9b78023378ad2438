// Shape rules of the indexing, scan, sorting, resampling, signal and linear-algebra ops
// (sdc/dialect/ops/indexing.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @gather_elements_float_indices(%d: tensor<4x5xf32>, %i: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'sdc.gather_elements' op indices must have integer element type, found f32}}
  %0 = "sdc.gather_elements"(%d, %i) {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @gather_elements_scalar(%d: tensor<f32>, %i: tensor<i64>) -> tensor<f32> {
  // expected-error @+1 {{'sdc.gather_elements' op data must have rank >= 1, found a scalar}}
  %0 = "sdc.gather_elements"(%d, %i) : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @gather_elements_rank(%d: tensor<4x5xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.gather_elements' op indices must have data's rank 2, found rank 1}}
  %0 = "sdc.gather_elements"(%d, %i) : (tensor<4x5xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gather_elements_axis(%d: tensor<4x5xf32>, %i: tensor<4x2xi64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'sdc.gather_elements' op axis 2 is out of range for rank 2}}
  %0 = "sdc.gather_elements"(%d, %i) {axis = 2 : i64} : (tensor<4x5xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @gather_elements_larger(%d: tensor<4x5xf32>, %i: tensor<6x2xi64>) -> tensor<6x2xf32> {
  // expected-error @+1 {{'sdc.gather_elements' op indices dim 0 is 6, larger than data's 4}}
  %0 = "sdc.gather_elements"(%d, %i) {axis = 1 : i64} : (tensor<4x5xf32>, tensor<6x2xi64>) -> tensor<6x2xf32>
  return %0 : tensor<6x2xf32>
}

// -----

func.func @gather_nd_float_indices(%d: tensor<4x5xf32>, %i: tensor<3x1xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'sdc.gather_nd' op indices must have integer element type, found f32}}
  %0 = "sdc.gather_nd"(%d, %i) : (tensor<4x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @gather_nd_scalar(%d: tensor<4x5xf32>, %i: tensor<i64>) -> tensor<5xf32> {
  // expected-error @+1 {{'sdc.gather_nd' op data and indices must have rank >= 1, found ranks 2 and 0}}
  %0 = "sdc.gather_nd"(%d, %i) : (tensor<4x5xf32>, tensor<i64>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @gather_nd_batch_dims(%d: tensor<4x5xf32>, %i: tensor<4x1xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.gather_nd' op batch_dims 2 must be in [0, 2) for data of rank 2 and indices of rank 2}}
  %0 = "sdc.gather_nd"(%d, %i) {batch_dims = 2 : i64} : (tensor<4x5xf32>, tensor<4x1xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gather_nd_dynamic_depth(%d: tensor<4x5xf32>, %i: tensor<3x?xi64>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'sdc.gather_nd' op the last dim of indices (the index depth) must be static}}
  %0 = "sdc.gather_nd"(%d, %i) : (tensor<4x5xf32>, tensor<3x?xi64>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @gather_nd_depth(%d: tensor<4x5xf32>, %i: tensor<3x3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{'sdc.gather_nd' op the last dim of indices is 3, expected 1 to 2 (data rank 2 minus batch_dims 0)}}
  %0 = "sdc.gather_nd"(%d, %i) : (tensor<4x5xf32>, tensor<3x3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @gather_nd_batch_differs(%d: tensor<4x5xf32>, %i: tensor<3x1xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{'sdc.gather_nd' op batch dim 0 differs: data has 4, indices have 3}}
  %0 = "sdc.gather_nd"(%d, %i) {batch_dims = 1 : i64} : (tensor<4x5xf32>, tensor<3x1xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @scatter_elements_updates_type(%d: tensor<4x5xf32>, %i: tensor<4x2xi64>, %u: tensor<4x2xf16>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_elements' op data and updates element types differ: data is f32, updates is f16}}
  %0 = "sdc.scatter_elements"(%d, %i, %u) {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xi64>, tensor<4x2xf16>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_elements_scalar(%d: tensor<f32>, %i: tensor<i64>, %u: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'sdc.scatter_elements' op data must have rank >= 1, found a scalar}}
  %0 = "sdc.scatter_elements"(%d, %i, %u) : (tensor<f32>, tensor<i64>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @scatter_elements_rank(%d: tensor<4x5xf32>, %i: tensor<4x2xi64>, %u: tensor<8xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_elements' op indices and updates must have data's rank 2, found ranks 2 and 1}}
  %0 = "sdc.scatter_elements"(%d, %i, %u) {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xi64>, tensor<8xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_elements_updates_shape(%d: tensor<4x5xf32>, %i: tensor<4x2xi64>, %u: tensor<4x3xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_elements' op dim 1 differs: indices have 2, updates have 3}}
  %0 = "sdc.scatter_elements"(%d, %i, %u) {axis = 1 : i64} : (tensor<4x5xf32>, tensor<4x2xi64>, tensor<4x3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_elements_larger(%d: tensor<4x5xf32>, %i: tensor<6x2xi64>, %u: tensor<6x2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_elements' op indices dim 0 is 6, larger than data's 4}}
  %0 = "sdc.scatter_elements"(%d, %i, %u) {axis = 1 : i64} : (tensor<4x5xf32>, tensor<6x2xi64>, tensor<6x2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_elements_bool_reduction(%d: tensor<4xi1>, %i: tensor<2xi64>, %u: tensor<2xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.scatter_elements' op reduction 'add' needs a numeric element type, found i1}}
  %0 = "sdc.scatter_elements"(%d, %i, %u) {reduction = "add"} : (tensor<4xi1>, tensor<2xi64>, tensor<2xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @scatter_nd_scalar(%d: tensor<f32>, %i: tensor<1xi64>, %u: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'sdc.scatter_nd' op data and indices must have rank >= 1, found ranks 0 and 1}}
  %0 = "sdc.scatter_nd"(%d, %i, %u) : (tensor<f32>, tensor<1xi64>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @scatter_nd_dynamic_depth(%d: tensor<4x5xf32>, %i: tensor<2x?xi64>, %u: tensor<2x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_nd' op the last dim of indices (the index depth) must be static}}
  %0 = "sdc.scatter_nd"(%d, %i, %u) : (tensor<4x5xf32>, tensor<2x?xi64>, tensor<2x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_nd_depth(%d: tensor<4x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_nd' op the last dim of indices is 3, expected 1 to data's rank 2}}
  %0 = "sdc.scatter_nd"(%d, %i, %u) : (tensor<4x5xf32>, tensor<2x3xi64>, tensor<2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_nd_updates_rank(%d: tensor<4x5xf32>, %i: tensor<2x1xi64>, %u: tensor<2xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_nd' op updates must have shape [2, 5] (indices' dims but the last, then data's after the first 1), found rank 1}}
  %0 = "sdc.scatter_nd"(%d, %i, %u) : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_nd_updates_dim(%d: tensor<4x5xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.scatter_nd' op updates dim 1 is 4, expected 5}}
  %0 = "sdc.scatter_nd"(%d, %i, %u) : (tensor<4x5xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @scatter_nd_bool_reduction(%d: tensor<4xi1>, %i: tensor<2x1xi64>, %u: tensor<2xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.scatter_nd' op reduction 'max' needs a numeric element type, found i1}}
  %0 = "sdc.scatter_nd"(%d, %i, %u) {reduction = "max"} : (tensor<4xi1>, tensor<2x1xi64>, tensor<2xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @cumsum_needs_numeric(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.cumsum' op operand must have numeric element type, found i1}}
  %0 = "sdc.cumsum"(%x) {axis = 0 : i64} : (tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @cumprod_scalar(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'sdc.cumprod' op operand must have rank >= 1, found a scalar}}
  %0 = "sdc.cumprod"(%x) {axis = 0 : i64} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @cumsum_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.cumsum' op axis 1 is out of range for rank 1}}
  %0 = "sdc.cumsum"(%x) {axis = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @topk_needs_numeric(%x: tensor<4xi1>) -> (tensor<2xi1>, tensor<2xi64>) {
  // expected-error @+1 {{'sdc.topk' op operand must have numeric element type, found i1}}
  %0:2 = "sdc.topk"(%x) {k = 2 : i64} : (tensor<4xi1>) -> (tensor<2xi1>, tensor<2xi64>)
  return %0#0, %0#1 : tensor<2xi1>, tensor<2xi64>
}

// -----

func.func @topk_scalar(%x: tensor<f32>) -> (tensor<f32>, tensor<i64>) {
  // expected-error @+1 {{'sdc.topk' op operand must have rank >= 1, found a scalar}}
  %0:2 = "sdc.topk"(%x) {k = 1 : i64} : (tensor<f32>) -> (tensor<f32>, tensor<i64>)
  return %0#0, %0#1 : tensor<f32>, tensor<i64>
}

// -----

func.func @topk_negative_k(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi64>) {
  // expected-error @+1 {{'sdc.topk' op k must be >= 0, found -1}}
  %0:2 = "sdc.topk"(%x) {k = -1 : i64} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi64>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi64>
}

// -----

func.func @topk_k_too_large(%x: tensor<4xf32>) -> (tensor<5xf32>, tensor<5xi64>) {
  // expected-error @+1 {{'sdc.topk' op k is 5, larger than dim 0 of size 4}}
  %0:2 = "sdc.topk"(%x) {k = 5 : i64} : (tensor<4xf32>) -> (tensor<5xf32>, tensor<5xi64>)
  return %0#0, %0#1 : tensor<5xf32>, tensor<5xi64>
}

// -----

func.func @topk_indices_type(%x: tensor<4xf32>) -> (tensor<2xf32>, tensor<2xi32>) {
  // expected-error @+1 {{'sdc.topk' op result #1 element type is i32, expected i64}}
  %0:2 = "sdc.topk"(%x) {k = 2 : i64} : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<2xf32>, tensor<2xi32>
}

// -----

func.func @resize_needs_numeric(%x: tensor<1x1x4xi1>) -> tensor<1x1x8xi1> {
  // expected-error @+1 {{'sdc.resize' op operand must have numeric element type, found i1}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2>, sizes = [8]} : (tensor<1x1x4xi1>) -> tensor<1x1x8xi1>
  return %0 : tensor<1x1x8xi1>
}

// -----

func.func @resize_axes(%x: tensor<1x1x4xf32>) -> tensor<1x1x8xf32> {
  // expected-error @+1 {{'sdc.resize' op axes [2, -1] repeat an axis}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2, -1>, sizes = [8, 8]} : (tensor<1x1x4xf32>) -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

func.func @resize_sizes_count(%x: tensor<1x1x4xf32>) -> tensor<1x1x8xf32> {
  // expected-error @+1 {{'sdc.resize' op sizes has 2 entries, expected one per resized axis (1)}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2>, sizes = [8, 8]} : (tensor<1x1x4xf32>) -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

func.func @resize_negative_size(%x: tensor<1x1x4xf32>) -> tensor<1x1x?xf32> {
  // expected-error @+1 {{'sdc.resize' op sizes [-8] has a negative entry}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2>, sizes = [-8]} : (tensor<1x1x4xf32>) -> tensor<1x1x?xf32>
  return %0 : tensor<1x1x?xf32>
}

// -----

func.func @resize_scales_count(%x: tensor<1x1x4xf32>) -> tensor<1x1x8xf32> {
  // expected-error @+1 {{'sdc.resize' op scales has 2 entries, expected none or one per resized axis (1)}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2>, scales = array<f64: 2.0, 2.0>, sizes = [8]} : (tensor<1x1x4xf32>) -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

func.func @resize_scales_positive(%x: tensor<1x1x4xf32>) -> tensor<1x1x8xf32> {
  // expected-error @+1 {{'sdc.resize' op scales [0.0] must all be > 0}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2>, scales = array<f64: 0.0>, sizes = [8]} : (tensor<1x1x4xf32>) -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

func.func @resize_crop_needs_roi(%x: tensor<1x1x4xf32>) -> tensor<1x1x8xf32> {
  // expected-error @+1 {{'sdc.resize' op coordinate_transformation_mode 'tf_crop_and_resize' needs roi with 2 entries (starts, then ends, per resized axis), found 0}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2>, coordinate_transformation_mode = "tf_crop_and_resize", sizes = [8]} : (tensor<1x1x4xf32>) -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

func.func @resize_roi_without_crop(%x: tensor<1x1x4xf32>) -> tensor<1x1x8xf32> {
  // expected-error @+1 {{'sdc.resize' op roi applies to coordinate_transformation_mode 'tf_crop_and_resize' only}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 2>, roi = array<f64: 0.0, 1.0>, sizes = [8]} : (tensor<1x1x4xf32>) -> tensor<1x1x8xf32>
  return %0 : tensor<1x1x8xf32>
}

// -----

func.func @resize_antialias_nearest(%x: tensor<1x1x8xf32>) -> tensor<1x1x4xf32> {
  // expected-error @+1 {{'sdc.resize' op antialias applies to modes 'linear' and 'cubic', not 'nearest'}}
  %0 = "sdc.resize"(%x) {antialias = true, axes = array<i64: 2>, sizes = [4]} : (tensor<1x1x8xf32>) -> tensor<1x1x4xf32>
  return %0 : tensor<1x1x4xf32>
}

// -----

func.func @grid_sample_input_float(%x: tensor<1x1x4x4xi32>, %g: tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xi32> {
  // expected-error @+1 {{'sdc.grid_sample' op input must have float element type, found i32}}
  %0 = "sdc.grid_sample"(%x, %g) : (tensor<1x1x4x4xi32>, tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xi32>
  return %0 : tensor<1x1x2x2xi32>
}

// -----

func.func @grid_sample_grid_float(%x: tensor<1x1x4x4xf32>, %g: tensor<1x2x2x2xi32>) -> tensor<1x1x2x2xf32> {
  // expected-error @+1 {{'sdc.grid_sample' op grid must have float element type, found i32}}
  %0 = "sdc.grid_sample"(%x, %g) : (tensor<1x1x4x4xf32>, tensor<1x2x2x2xi32>) -> tensor<1x1x2x2xf32>
  return %0 : tensor<1x1x2x2xf32>
}

// -----

func.func @grid_sample_input_rank(%x: tensor<1x4xf32>, %g: tensor<1x2xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{'sdc.grid_sample' op input must have rank >= 3 (N, C, spatial...), found rank 2}}
  %0 = "sdc.grid_sample"(%x, %g) : (tensor<1x4xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

func.func @grid_sample_grid_rank(%x: tensor<1x1x4x4xf32>, %g: tensor<1x2x2xf32>) -> tensor<1x1x2xf32> {
  // expected-error @+1 {{'sdc.grid_sample' op grid must have input's rank 4 (N, output spatial..., 2), found rank 3}}
  %0 = "sdc.grid_sample"(%x, %g) : (tensor<1x1x4x4xf32>, tensor<1x2x2xf32>) -> tensor<1x1x2xf32>
  return %0 : tensor<1x1x2xf32>
}

// -----

func.func @grid_sample_coordinates(%x: tensor<1x1x4x4xf32>, %g: tensor<1x2x2x3xf32>) -> tensor<1x1x2x2xf32> {
  // expected-error @+1 {{'sdc.grid_sample' op grid's last dim is 3, expected 2 (one coordinate per spatial dim)}}
  %0 = "sdc.grid_sample"(%x, %g) : (tensor<1x1x4x4xf32>, tensor<1x2x2x3xf32>) -> tensor<1x1x2x2xf32>
  return %0 : tensor<1x1x2x2xf32>
}

// -----

func.func @grid_sample_batch(%x: tensor<1x1x4x4xf32>, %g: tensor<2x2x2x2xf32>) -> tensor<1x1x2x2xf32> {
  // expected-error @+1 {{'sdc.grid_sample' op batch dims differ: input has 1, grid has 2}}
  %0 = "sdc.grid_sample"(%x, %g) : (tensor<1x1x4x4xf32>, tensor<2x2x2x2xf32>) -> tensor<1x1x2x2xf32>
  return %0 : tensor<1x1x2x2xf32>
}

// -----

func.func @dft_needs_float(%x: tensor<8x1xi32>) -> tensor<8x2xi32> {
  // expected-error @+1 {{'sdc.dft' op operand must have float element type, found i32}}
  %0 = "sdc.dft"(%x) {axis = 0 : i64, length = 8 : i64} : (tensor<8x1xi32>) -> tensor<8x2xi32>
  return %0 : tensor<8x2xi32>
}

// -----

func.func @dft_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'sdc.dft' op operand must have rank >= 2 (signal dims, then 1 or 2 for real or complex), found rank 1}}
  %0 = "sdc.dft"(%x) {axis = 0 : i64, length = 8 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @dft_last_dim(%x: tensor<8x3xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{'sdc.dft' op the last dim must be 1 (real) or 2 (real and imaginary parts), found 3}}
  %0 = "sdc.dft"(%x) {axis = 0 : i64, length = 8 : i64} : (tensor<8x3xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

func.func @dft_axis_range(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{'sdc.dft' op axis 2 is out of range for rank 2}}
  %0 = "sdc.dft"(%x) {axis = 2 : i64, length = 8 : i64} : (tensor<8x2xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

func.func @dft_axis_is_complex_dim(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{'sdc.dft' op axis -1 is the real/imaginary dim; the transformed axis must come before it}}
  %0 = "sdc.dft"(%x) {axis = -1 : i64, length = 8 : i64} : (tensor<8x2xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

func.func @dft_length(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{'sdc.dft' op length must be >= 1, found 0}}
  %0 = "sdc.dft"(%x) {axis = 0 : i64, length = 0 : i64} : (tensor<8x2xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

func.func @bitcast_widths(%x: tensor<4xf32>) -> tensor<4xi64> {
  // expected-error @+1 {{'sdc.bitcast' op bitcast needs equal element widths: f32 has 32 bits, i64 has 64}}
  %0 = "sdc.bitcast"(%x) {dtype = i64} : (tensor<4xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @col2im_needs_numeric(%x: tensor<1x4x4xi1>) -> tensor<1x1x3x3xi1> {
  // expected-error @+1 {{'sdc.col2im' op input must have numeric element type, found i1}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2, 2>, image_shape = array<i64: 3, 3>} : (tensor<1x4x4xi1>) -> tensor<1x1x3x3xi1>
  return %0 : tensor<1x1x3x3xi1>
}

// -----

func.func @col2im_rank(%x: tensor<4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op input must have rank 3 (N, C * block size, blocks), found rank 2}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2, 2>, image_shape = array<i64: 3, 3>} : (tensor<4x4xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @col2im_shapes(%x: tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op image_shape and block_shape need one entry per spatial dim, found 2 and 1}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2>, image_shape = array<i64: 3, 3>} : (tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @col2im_window_attrs(%x: tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op strides, dilations and pads need 2, 2 and 4 entries, found 1, 2 and 4}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2, 2>, image_shape = array<i64: 3, 3>, strides = array<i64: 1>} : (tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @col2im_dilations(%x: tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op dilations [1, 0] must be >= 1}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2, 2>, dilations = array<i64: 1, 0>, image_shape = array<i64: 3, 3>} : (tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @col2im_pads(%x: tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op pads [0, 0, -1, 0] must be >= 0}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2, 2>, image_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, -1, 0>} : (tensor<1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @col2im_block_too_large(%x: tensor<1x16x1xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op the block [4, 4] does not fit in the padded image [3, 3]}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 4, 4>, image_shape = array<i64: 3, 3>} : (tensor<1x16x1xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @col2im_channels(%x: tensor<1x6x4xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op input dim 1 of size 6 is not a multiple of the block size 4}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2, 2>, image_shape = array<i64: 3, 3>} : (tensor<1x6x4xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @col2im_block_count(%x: tensor<1x4x5xf32>) -> tensor<1x1x3x3xf32> {
  // expected-error @+1 {{'sdc.col2im' op input dim 2 is 5, expected 4 blocks ([2, 2])}}
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 2, 2>, image_shape = array<i64: 3, 3>} : (tensor<1x4x5xf32>) -> tensor<1x1x3x3xf32>
  return %0 : tensor<1x1x3x3xf32>
}

// -----

func.func @roi_align_input_float(%x: tensor<1x2x8x8xi32>, %r: tensor<3x4xi32>, %b: tensor<3xi64>) -> tensor<3x2x1x1xi32> {
  // expected-error @+1 {{'sdc.roi_align' op input must have float element type, found i32}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<1x2x8x8xi32>, tensor<3x4xi32>, tensor<3xi64>) -> tensor<3x2x1x1xi32>
  return %0 : tensor<3x2x1x1xi32>
}

// -----

func.func @roi_align_batch_indices_int(%x: tensor<1x2x8x8xf32>, %r: tensor<3x4xf32>, %b: tensor<3xf32>) -> tensor<3x2x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op batch_indices must have integer element type, found f32}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<1x2x8x8xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<3x2x1x1xf32>
  return %0 : tensor<3x2x1x1xf32>
}

// -----

func.func @roi_align_rois_type(%x: tensor<1x2x8x8xf32>, %r: tensor<3x4xf16>, %b: tensor<3xi64>) -> tensor<3x2x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op input and rois element types differ: input is f32, rois is f16}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<1x2x8x8xf32>, tensor<3x4xf16>, tensor<3xi64>) -> tensor<3x2x1x1xf32>
  return %0 : tensor<3x2x1x1xf32>
}

// -----

func.func @roi_align_input_rank(%x: tensor<2x8x8xf32>, %r: tensor<3x4xf32>, %b: tensor<3xi64>) -> tensor<3x8x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op input must have rank 4 (N, C, H, W), found rank 3}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<2x8x8xf32>, tensor<3x4xf32>, tensor<3xi64>) -> tensor<3x8x1x1xf32>
  return %0 : tensor<3x8x1x1xf32>
}

// -----

func.func @roi_align_rois_rank(%x: tensor<1x2x8x8xf32>, %r: tensor<4xf32>, %b: tensor<1xi64>) -> tensor<1x2x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op rois must have rank 2 (num_rois, 4), found rank 1}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<1x2x8x8xf32>, tensor<4xf32>, tensor<1xi64>) -> tensor<1x2x1x1xf32>
  return %0 : tensor<1x2x1x1xf32>
}

// -----

func.func @roi_align_box(%x: tensor<1x2x8x8xf32>, %r: tensor<3x5xf32>, %b: tensor<3xi64>) -> tensor<3x2x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op rois' last dim is 5, expected 4 (x1, y1, x2, y2)}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<1x2x8x8xf32>, tensor<3x5xf32>, tensor<3xi64>) -> tensor<3x2x1x1xf32>
  return %0 : tensor<3x2x1x1xf32>
}

// -----

func.func @roi_align_batch_indices_rank(%x: tensor<1x2x8x8xf32>, %r: tensor<3x4xf32>, %b: tensor<3x1xi64>) -> tensor<3x2x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op batch_indices must have rank 1, found rank 2}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<1x2x8x8xf32>, tensor<3x4xf32>, tensor<3x1xi64>) -> tensor<3x2x1x1xf32>
  return %0 : tensor<3x2x1x1xf32>
}

// -----

func.func @roi_align_counts(%x: tensor<1x2x8x8xf32>, %r: tensor<3x4xf32>, %b: tensor<2xi64>) -> tensor<3x2x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op rois has 3 boxes, batch_indices has 2}}
  %0 = "sdc.roi_align"(%x, %r, %b) : (tensor<1x2x8x8xf32>, tensor<3x4xf32>, tensor<2xi64>) -> tensor<3x2x1x1xf32>
  return %0 : tensor<3x2x1x1xf32>
}

// -----

func.func @roi_align_output_size(%x: tensor<1x2x8x8xf32>, %r: tensor<3x4xf32>, %b: tensor<3xi64>) -> tensor<3x2x0x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op output_height and output_width must be >= 1, found 0 and 1}}
  %0 = "sdc.roi_align"(%x, %r, %b) {output_height = 0 : i64} : (tensor<1x2x8x8xf32>, tensor<3x4xf32>, tensor<3xi64>) -> tensor<3x2x0x1xf32>
  return %0 : tensor<3x2x0x1xf32>
}

// -----

func.func @roi_align_sampling_ratio(%x: tensor<1x2x8x8xf32>, %r: tensor<3x4xf32>, %b: tensor<3xi64>) -> tensor<3x2x1x1xf32> {
  // expected-error @+1 {{'sdc.roi_align' op sampling_ratio must be >= 0, found -1}}
  %0 = "sdc.roi_align"(%x, %r, %b) {sampling_ratio = -1 : i64} : (tensor<1x2x8x8xf32>, tensor<3x4xf32>, tensor<3xi64>) -> tensor<3x2x1x1xf32>
  return %0 : tensor<3x2x1x1xf32>
}

// -----

func.func @det_needs_float(%x: tensor<3x3xi32>) -> tensor<i32> {
  // expected-error @+1 {{'sdc.det' op operand must have float element type, found i32}}
  %0 = "sdc.det"(%x) : (tensor<3x3xi32>) -> tensor<i32>
  return %0 : tensor<i32>
}

// -----

func.func @det_rank(%x: tensor<3xf32>) -> tensor<f32> {
  // expected-error @+1 {{'sdc.det' op operand must have rank >= 2 (batch..., M, M), found rank 1}}
  %0 = "sdc.det"(%x) : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @det_square(%x: tensor<2x3xf32>) -> tensor<f32> {
  // expected-error @+1 {{'sdc.det' op matrices must be square, found 2x3}}
  %0 = "sdc.det"(%x) : (tensor<2x3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
