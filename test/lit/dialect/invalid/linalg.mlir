// Shape rules of matmul, conv, conv_weight_grad and pooling (sdc/dialect/ops/linalg.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @matmul_types_differ(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'sdc.matmul' op operand element types differ: lhs is f32, rhs is f16}}
  %0 = "sdc.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul_needs_numeric(%a: tensor<2x2xi1>) -> tensor<2x2xi1> {
  // expected-error @+1 {{'sdc.matmul' op operands must have numeric element type, found i1}}
  %0 = "sdc.matmul"(%a, %a) : (tensor<2x2xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
  return %0 : tensor<2x2xi1>
}

// -----

func.func @matmul_of_a_scalar(%a: tensor<f32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'sdc.matmul' op operands must have rank >= 1, found lhs rank 0, rhs rank 1}}
  %0 = "sdc.matmul"(%a, %b) : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @matmul_contracting_dims(%a: tensor<?x16x64xf32>, %b: tensor<32x64xf32>) -> tensor<?x16x64xf32> {
  // expected-error @+1 {{'sdc.matmul' op contracting dims differ: lhs has 64, rhs has 32}}
  %0 = "sdc.matmul"(%a, %b) : (tensor<?x16x64xf32>, tensor<32x64xf32>) -> tensor<?x16x64xf32>
  return %0 : tensor<?x16x64xf32>
}

// -----

func.func @matmul_batch_dims(%a: tensor<2x4x8xf32>, %b: tensor<3x8x4xf32>) -> tensor<2x4x4xf32> {
  // expected-error @+1 {{'sdc.matmul' op operand shapes are not broadcast-compatible: lhs batch is [2], rhs batch is [3]}}
  %0 = "sdc.matmul"(%a, %b) : (tensor<2x4x8xf32>, tensor<3x8x4xf32>) -> tensor<2x4x4xf32>
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @conv_types_differ(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op operand element types differ: input is f32, weight is f16}}
  %0 = "sdc.conv"(%x, %w) : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_needs_float(%x: tensor<1x3x8x8xi32>, %w: tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32> {
  // expected-error @+1 {{'sdc.conv' op operands must have float element type, found i32}}
  %0 = "sdc.conv"(%x, %w) : (tensor<1x3x8x8xi32>, tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32>
  return %0 : tensor<1x4x6x6xi32>
}

// -----

func.func @conv_input_rank(%x: tensor<3x8xf32>, %w: tensor<4x3xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'sdc.conv' op input must have rank >= 3 (N, C, spatial...), found rank 2}}
  %0 = "sdc.conv"(%x, %w) : (tensor<3x8xf32>, tensor<4x3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @conv_weight_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op weight rank must equal input rank 4, found 3}}
  %0 = "sdc.conv"(%x, %w) : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op groups must be >= 1, found 0}}
  %0 = "sdc.conv"(%x, %w) {groups = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x6x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op input channels (6) must equal weight channels per group (3) times groups (1)}}
  %0 = "sdc.conv"(%x, %w) : (tensor<1x6x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_output_channels(%x: tensor<1x6x8x8xf32>, %w: tensor<5x3x3x3xf32>) -> tensor<1x5x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op output channels (5) must be divisible by groups (2)}}
  %0 = "sdc.conv"(%x, %w) {groups = 2 : i64} : (tensor<1x6x8x8xf32>, tensor<5x3x3x3xf32>) -> tensor<1x5x6x6xf32>
  return %0 : tensor<1x5x6x6xf32>
}

// -----

func.func @conv_strides_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op 'strides' has 1 entries, expected 2 for 2 spatial dims}}
  %0 = "sdc.conv"(%x, %w) {strides = array<i64: 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_pads_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op 'pads' has 2 entries, expected 4 for 2 spatial dims}}
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_zero_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op strides must be >= 1, found [1, 0]}}
  %0 = "sdc.conv"(%x, %w) {strides = array<i64: 1, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_zero_dilation(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op dilations must be >= 1, found [0, 1]}}
  %0 = "sdc.conv"(%x, %w) {dilations = array<i64: 0, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_negative_pad(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'sdc.conv' op pads must be >= 0, found [0, -1, 0, 0]}}
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 0, -1, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_window_too_large(%x: tensor<1x3x4x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x1x6xf32> {
  // expected-error @+1 {{'sdc.conv' op spatial dim 0 of size 4 is smaller than the (dilated) window 5 with pads 0+0}}
  %0 = "sdc.conv"(%x, %w) {dilations = array<i64: 2, 1>} : (tensor<1x3x4x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x6xf32>
  return %0 : tensor<1x4x1x6xf32>
}

// -----

func.func @avg_pool_needs_float(%x: tensor<1x3x8x8xi8>) -> tensor<1x3x4x4xi8> {
  // expected-error @+1 {{'sdc.avg_pool' op operand must have float element type, found i8}}
  %0 = "sdc.avg_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xi8>) -> tensor<1x3x4x4xi8>
  return %0 : tensor<1x3x4x4xi8>
}

// -----

func.func @max_pool_needs_numeric(%x: tensor<1x3x8x8xi1>) -> tensor<1x3x4x4xi1> {
  // expected-error @+1 {{'sdc.max_pool' op operand must have numeric element type, found i1}}
  %0 = "sdc.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xi1>) -> tensor<1x3x4x4xi1>
  return %0 : tensor<1x3x4x4xi1>
}

// -----

func.func @pool_kernel_rank(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  // expected-error @+1 {{'sdc.avg_pool' op input rank 4 does not match a 1-d kernel (expected rank 3)}}
  %0 = "sdc.avg_pool"(%x) {kernel = array<i64: 2>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

func.func @pool_kernel_dims(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'sdc.max_pool' op kernel dims must be >= 1, found [0, 1]}}
  %0 = "sdc.max_pool"(%x) {kernel = array<i64: 0, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @pool_dilations_length(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x7x7xf32> {
  // expected-error @+1 {{'sdc.max_pool' op 'dilations' has 3 entries, expected 2 for 2 spatial dims}}
  %0 = "sdc.max_pool"(%x) {kernel = array<i64: 2, 2>, dilations = array<i64: 1, 1, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x7x7xf32>
  return %0 : tensor<1x3x7x7xf32>
}

// -----

func.func @pool_output_size(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  // expected-error @+1 {{'sdc.avg_pool' op result #0 dim 2 is 4, expected 5 (inferred type tensor<1x3x5x5xf32>)}}
  %0 = "sdc.avg_pool"(%x) {ceil_mode = true, kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

func.func @global_pool_needs_float(%x: tensor<1x3x8x8xi32>) -> tensor<1x3x1x1xi32> {
  // expected-error @+1 {{'sdc.global_max_pool' op operand must have float element type, found i32}}
  %0 = "sdc.global_max_pool"(%x) : (tensor<1x3x8x8xi32>) -> tensor<1x3x1x1xi32>
  return %0 : tensor<1x3x1x1xi32>
}

// -----

func.func @global_pool_rank(%x: tensor<1x3xf32>) -> tensor<1x3xf32> {
  // expected-error @+1 {{'sdc.global_avg_pool' op input must have rank >= 3 (N, C, spatial...), found rank 2}}
  %0 = "sdc.global_avg_pool"(%x) : (tensor<1x3xf32>) -> tensor<1x3xf32>
  return %0 : tensor<1x3xf32>
}

// -----

func.func @conv_weight_grad_types(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x6x6xf16>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op operand element types differ: input is f32, grad is f16}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 3, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf16>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @conv_weight_grad_float(%x: tensor<1x3x8x8xi32>, %g: tensor<1x4x6x6xi32>) -> tensor<4x3x3x3xi32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op operands must have float element type, found i32}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 3, 3>} : (tensor<1x3x8x8xi32>, tensor<1x4x6x6xi32>) -> tensor<4x3x3x3xi32>
  return %0 : tensor<4x3x3x3xi32>
}

// -----

func.func @conv_weight_grad_input_rank(%x: tensor<3x8xf32>, %g: tensor<3x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op input must have rank >= 3 (N, C, spatial...), found rank 2}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64>} : (tensor<3x8xf32>, tensor<3x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @conv_weight_grad_grad_rank(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x6xf32>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op grad rank must equal input rank 4, found 3}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 3, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x6xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @conv_weight_grad_kernel_length(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x6x6xf32>) -> tensor<4x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op 'kernel' has 1 entries, expected 2 for 2 spatial dims}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x3xf32>
  return %0 : tensor<4x3x3xf32>
}

// -----

func.func @conv_weight_grad_kernel_positive(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x6x6xf32>) -> tensor<4x3x0x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op kernel dims must be >= 1, found [0, 3]}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 0, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x0x3xf32>
  return %0 : tensor<4x3x0x3xf32>
}

// -----

func.func @conv_weight_grad_groups(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op groups must be >= 1, found 0}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {groups = 0 : i64, kernel = array<i64: 3, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @conv_weight_grad_batch(%x: tensor<2x3x8x8xf32>, %g: tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op input batch (2) and grad batch (1) differ}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 3, 3>} : (tensor<2x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @conv_weight_grad_input_channels(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x6x6xf32>) -> tensor<4x1x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op input channels (3) must be divisible by groups (2)}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {groups = 2 : i64, kernel = array<i64: 3, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x1x3x3xf32>
  return %0 : tensor<4x1x3x3xf32>
}

// -----

func.func @conv_weight_grad_grad_channels(%x: tensor<1x4x8x8xf32>, %g: tensor<1x5x6x6xf32>) -> tensor<5x2x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op grad channels (5) must be divisible by groups (2)}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {groups = 2 : i64, kernel = array<i64: 3, 3>} : (tensor<1x4x8x8xf32>, tensor<1x5x6x6xf32>) -> tensor<5x2x3x3xf32>
  return %0 : tensor<5x2x3x3xf32>
}

// -----

func.func @conv_weight_grad_grad_spatial(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x8x6xf32>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'sdc.conv_weight_grad' op grad spatial dim 0 is 8, but the convolution's result has 6}}
  %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 3, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x8x6xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}
