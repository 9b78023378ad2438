// Shape rules of the value ops and casts (sdc/dialect/ops/core.py, sdc.dim_values in misc.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @constant_type_differs() -> tensor<3xf32> {
  // expected-error @+1 {{'sdc.constant' op result #0 dim 0 is 3, expected 2 (inferred type tensor<2xf32>)}}
  %0 = "sdc.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @constant_without_value() -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.constant' op requires attribute 'value'}}
  %0 = "sdc.constant"() : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @cast_result_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.cast' op result #0 element type is f32, expected f16}}
  %0 = "sdc.cast"(%x) {dtype = f16} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @layout_not_a_permutation(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'sdc.layout_cast' op layout [0, 2, 3] is not a permutation of the operand's 4 dims}}
  %0 = "sdc.layout_cast"(%x) {layout = #sdc.layout<array<i64: 0, 2, 3>>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @iota_inferred_dim() -> tensor<?xi64> {
  // expected-error @+1 {{'sdc.iota' op iota shape cannot infer a dim (-1): give every dim}}
  %0 = "sdc.iota"() {dimension = 0 : i64, dtype = i64, shape = [-1]} : () -> tensor<?xi64>
  return %0 : tensor<?xi64>
}

// -----

func.func @iota_dimension() -> tensor<4xi64> {
  // expected-error @+1 {{'sdc.iota' op dimension 1 is out of range for rank 1}}
  %0 = "sdc.iota"() {dimension = 1 : i64, dtype = i64, shape = [4]} : () -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @iota_of_bools() -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.iota' op iota dtype must be numeric, found i1}}
  %0 = "sdc.iota"() {dimension = 0 : i64, dtype = i1, shape = [4]} : () -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @dim_values_negative() -> tensor<2xi64> {
  // expected-error @+1 {{'sdc.dim_values' op dims ['B', -1] has a negative entry}}
  %0 = "sdc.dim_values"() {dims = ["B", -1]} : () -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @dim_values_length() -> tensor<3xi64> {
  // expected-error @+1 {{'sdc.dim_values' op result #0 dim 0 is 3, expected 2 (inferred type tensor<2xi64>)}}
  %0 = "sdc.dim_values"() {dims = ["B", 4]} : () -> tensor<3xi64>
  return %0 : tensor<3xi64>
}
