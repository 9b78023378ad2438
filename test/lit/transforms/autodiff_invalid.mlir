// sdc-autodiff: a gradient that reaches an op without a derivative rule is an error at that op
// (one per op); so is a rule that cannot handle its case, and a loss that is not one float value.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics -p sdc-autodiff

func.func @no_rule(%x: tensor<2x8x3x3xf32>) -> tensor<f32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<2x8x3x3xf32>
  %0 = "sdc.mul"(%x, %w) : (tensor<2x8x3x3xf32>, tensor<2x8x3x3xf32>) -> tensor<2x8x3x3xf32>
  // expected-error @+1 {{'sdc.lrn' is not differentiable (no derivative rule): a gradient flows through it}}
  %1 = "sdc.lrn"(%0) {size = 3 : i64} : (tensor<2x8x3x3xf32>) -> tensor<2x8x3x3xf32>
  %2 = "sdc.reduce_sum"(%1) : (tensor<2x8x3x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

func.func @unsupported_case(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<2x4xf32>
  %0 = "sdc.mul"(%x, %w) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // expected-error @+1 {{'sdc.pad' is not differentiable: pad mode 'reflect' has no derivative rule yet}}
  %1 = "sdc.pad"(%0) {mode = "reflect", pads = array<i64: 0, 1, 0, 1>} : (tensor<2x4xf32>) -> tensor<2x6xf32>
  %2 = "sdc.reduce_sum"(%1) : (tensor<2x6xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// expected-error @+1 {{sdc-autodiff differentiates a scalar float loss: result 0 ('output0') has type tensor<4xf32>}}
func.func @vector_loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4xf32>
  %0 = "sdc.mul"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A gradient that never reaches the op needs no rule: lrn reads only an input here, so no error.
func.func @no_gradient_no_error(%x: tensor<2x8x3xf32>) -> tensor<f32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<f32>
  %0 = "sdc.lrn"(%x) {size = 3 : i64} : (tensor<2x8x3xf32>) -> tensor<2x8x3xf32>
  %1 = "sdc.reduce_sum"(%0) : (tensor<2x8x3xf32>) -> tensor<f32>
  %2 = "sdc.mul"(%1, %w) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

func.func @scatter_mul(%idx: tensor<2x3xi64>) -> tensor<f32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x3xf32>
  %u = "sdc.parameter"() {name = "u"} : () -> tensor<2x3xf32>
  // expected-error @+1 {{'sdc.scatter_elements' is not differentiable: reduction 'mul' has no derivative rule yet (none and add do)}}
  %0 = "sdc.scatter_elements"(%w, %idx, %u) {axis = 0 : i64, reduction = "mul"} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %1 = "sdc.reduce_sum"(%0) : (tensor<4x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A custom op registered without a derivative (sdc's own example op) is not differentiable.
func.func @custom_without_derivative(%x: tensor<2x8xf32>) -> tensor<f32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8xf32>
  // expected-error @+1 {{'sdc.custom' is not differentiable: custom op 'example::scaled_tanh' has no derivative (register it with sdc.custom_op(..., derivative=...))}}
  %0 = "sdc.custom"(%x, %w) {attributes = "{\"scale\":0.5}", name = "example::scaled_tanh", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %1 = "sdc.reduce_sum"(%0) : (tensor<2x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
