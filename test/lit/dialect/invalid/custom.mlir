// sdc.custom's checks: the name must be registered in this process, the attributes a JSON object,
// and the declared results those the registered shape rule gives.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @not_registered(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.custom' op custom op 'nope::missing' is not registered in this process}}
  %0 = "sdc.custom"(%x) {name = "nope::missing", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @attributes_not_json(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.custom' op attributes 'scale=2' is not JSON}}
  %0 = "sdc.custom"(%x, %w) {attributes = "scale=2", name = "example::scaled_tanh", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @result_differs(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'sdc.custom' op result #0 dim 0 is 5, expected 4 (inferred type tensor<4xf32>)}}
  %0 = "sdc.custom"(%x, %w) {attributes = "{\"scale\":0.5}", name = "example::scaled_tanh", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @shape_rule_fails(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.custom' op the shape rule of custom op 'example::scaled_tanh' failed: TypeError}}
  %0 = "sdc.custom"(%x, %w) {name = "example::scaled_tanh", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
