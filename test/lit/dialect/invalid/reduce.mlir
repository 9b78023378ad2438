// Shape rules of reductions and normalizations (sdc/dialect/ops/reduce.py, sdc.lrn in misc.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @sum_needs_numeric(%x: tensor<4xi1>) -> tensor<i1> {
  // expected-error @+1 {{'sdc.reduce_sum' op operand must have numeric element type, found i1}}
  %0 = "sdc.reduce_sum"(%x) : (tensor<4xi1>) -> tensor<i1>
  return %0 : tensor<i1>
}

// -----

func.func @axis_out_of_range(%x: tensor<4x5xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.reduce_mean' op axis 2 is out of range for rank 2}}
  %0 = "sdc.reduce_mean"(%x) {axes = array<i64: 2>} : (tensor<4x5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @axes_repeat(%x: tensor<4x5xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.reduce_max' op axes [1, -1] repeat an axis}}
  %0 = "sdc.reduce_max"(%x) {axes = array<i64: 1, -1>} : (tensor<4x5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @keepdims_in_the_type(%x: tensor<4x5xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.reduce_min' op result #0 has rank 1, expected 2 (tensor<4x1xf32>)}}
  %0 = "sdc.reduce_min"(%x) {axes = array<i64: 1>, keepdims = true} : (tensor<4x5xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @argmax_needs_numeric(%x: tensor<4xi1>) -> tensor<i64> {
  // expected-error @+1 {{'sdc.argmax' op operand must have numeric element type, found i1}}
  %0 = "sdc.argmax"(%x) : (tensor<4xi1>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

func.func @argmin_axis(%x: tensor<4x5xf32>) -> tensor<4xi64> {
  // expected-error @+1 {{'sdc.argmin' op axis -3 is out of range for rank 2}}
  %0 = "sdc.argmin"(%x) {axis = -3 : i64} : (tensor<4x5xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @argmax_gives_i64(%x: tensor<4x5xf32>) -> tensor<4xi32> {
  // expected-error @+1 {{'sdc.argmax' op result #0 element type is i32, expected i64}}
  %0 = "sdc.argmax"(%x) {axis = 1 : i64} : (tensor<4x5xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @softmax_needs_float(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'sdc.softmax' op operand must have float element type, found i32}}
  %0 = "sdc.softmax"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @log_softmax_axis(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'sdc.log_softmax' op axis 2 is out of range for rank 2}}
  %0 = "sdc.log_softmax"(%x) {axis = 2 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @layer_norm_needs_float(%x: tensor<2x8xi32>, %g: tensor<8xi32>) -> tensor<2x8xi32> {
  // expected-error @+1 {{'sdc.layer_norm' op input must have float element type, found i32}}
  %0 = "sdc.layer_norm"(%x, %g, %g) : (tensor<2x8xi32>, tensor<8xi32>, tensor<8xi32>) -> tensor<2x8xi32>
  return %0 : tensor<2x8xi32>
}

// -----

func.func @layer_norm_scale_type(%x: tensor<2x8xf32>, %g: tensor<8xf16>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sdc.layer_norm' op scale element type f16 differs from input element type f32}}
  %0 = "sdc.layer_norm"(%x, %g, %b) : (tensor<2x8xf32>, tensor<8xf16>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @layer_norm_bias_rank(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<1x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sdc.layer_norm' op bias must have the normalized shape (rank 1), found rank 2}}
  %0 = "sdc.layer_norm"(%x, %g, %b) : (tensor<2x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_scale_dim(%x: tensor<2x3x8xf32>, %g: tensor<3x4xf32>) -> tensor<2x3x8xf32> {
  // expected-error @+1 {{'sdc.rms_norm' op scale dim 1 is 4, the normalized dim is 8}}
  %0 = "sdc.rms_norm"(%x, %g) {axis = 1 : i64} : (tensor<2x3x8xf32>, tensor<3x4xf32>) -> tensor<2x3x8xf32>
  return %0 : tensor<2x3x8xf32>
}

// -----

func.func @rms_norm_axis(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sdc.rms_norm' op axis 2 is out of range for rank 2}}
  %0 = "sdc.rms_norm"(%x, %g) {axis = 2 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @batch_norm_needs_float(%x: tensor<2x3xi8>, %p: tensor<3xi8>) -> tensor<2x3xi8> {
  // expected-error @+1 {{'sdc.batch_norm' op input must have float element type, found i8}}
  %0 = "sdc.batch_norm"(%x, %p, %p, %p, %p) : (tensor<2x3xi8>, tensor<3xi8>, tensor<3xi8>, tensor<3xi8>, tensor<3xi8>) -> tensor<2x3xi8>
  return %0 : tensor<2x3xi8>
}

// -----

func.func @batch_norm_input_rank(%x: tensor<3xf32>, %p: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'sdc.batch_norm' op input must have rank >= 2 (N, C, ...), found rank 1}}
  %0 = "sdc.batch_norm"(%x, %p, %p, %p, %p) : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @batch_norm_mean_type(%x: tensor<2x3xf32>, %p: tensor<3xf32>, %m: tensor<3xf64>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'sdc.batch_norm' op mean element type f64 differs from input element type f32}}
  %0 = "sdc.batch_norm"(%x, %p, %p, %m, %p) : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf64>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @batch_norm_variance_rank(%x: tensor<2x3xf32>, %p: tensor<3xf32>, %v: tensor<1x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'sdc.batch_norm' op variance must have rank 1 (one value per channel), found rank 2}}
  %0 = "sdc.batch_norm"(%x, %p, %p, %p, %v) : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @batch_norm_channels(%x: tensor<2x3xf32>, %p: tensor<3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'sdc.batch_norm' op bias has 4 values, the input has 3 channels}}
  %0 = "sdc.batch_norm"(%x, %p, %b, %p, %p) : (tensor<2x3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @lrn_needs_float(%x: tensor<1x4x2x2xi32>) -> tensor<1x4x2x2xi32> {
  // expected-error @+1 {{'sdc.lrn' op operand must have float element type, found i32}}
  %0 = "sdc.lrn"(%x) {size = 3 : i64} : (tensor<1x4x2x2xi32>) -> tensor<1x4x2x2xi32>
  return %0 : tensor<1x4x2x2xi32>
}

// -----

func.func @lrn_rank(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{'sdc.lrn' op operand must have rank >= 3 (N, C, spatial...), found rank 2}}
  %0 = "sdc.lrn"(%x) {size = 3 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

func.func @lrn_size(%x: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  // expected-error @+1 {{'sdc.lrn' op size must be >= 1, found 0}}
  %0 = "sdc.lrn"(%x) {size = 0 : i64} : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  return %0 : tensor<1x4x2x2xf32>
}
