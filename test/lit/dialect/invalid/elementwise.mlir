// Shape rules of the elementwise ops (sdc/dialect/ops/elementwise.py): element type categories,
// matching operand types, broadcasting, and sdc.where.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @unary_needs_numeric(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.neg' op operand must have numeric element type, found i1}}
  %0 = "sdc.neg"(%x) : (tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @unary_needs_float(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'sdc.exp' op operand must have float element type, found i32}}
  %0 = "sdc.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @unary_needs_bool(%x: tensor<4xi8>) -> tensor<4xi8> {
  // expected-error @+1 {{'sdc.not' op operand must have bool element type, found i8}}
  %0 = "sdc.not"(%x) : (tensor<4xi8>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

func.func @unary_needs_integer_or_bool(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.bitwise_not' op operand must have integer or bool element type, found f32}}
  %0 = "sdc.bitwise_not"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @predicate_needs_float(%x: tensor<4xi64>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.isnan' op operand must have float element type, found i64}}
  %0 = "sdc.isnan"(%x) : (tensor<4xi64>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @binary_types_differ(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.add' op operand element types differ: lhs is f32, rhs is f16}}
  %0 = "sdc.add"(%a, %b) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary_needs_numeric(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.mul' op operands must have numeric element type, found i1}}
  %0 = "sdc.mul"(%a, %a) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @binary_needs_integer(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.shift_left' op operands must have integer element type, found i1}}
  %0 = "sdc.shift_left"(%a, %a) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @binary_needs_integer_or_bool(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.bitwise_xor' op operands must have integer or bool element type, found f32}}
  %0 = "sdc.bitwise_xor"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @logical_needs_bool(%a: tensor<4xi32>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.and' op operands must have bool element type, found i32}}
  %0 = "sdc.and"(%a, %a) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @comparison_types_differ(%a: tensor<4xi32>, %b: tensor<4xi64>) -> tensor<4xi1> {
  // expected-error @+1 {{'sdc.lt' op operand element types differ: lhs is i32, rhs is i64}}
  %0 = "sdc.lt"(%a, %b) : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @comparison_gives_i1(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.eq' op result #0 element type is f32, expected i1}}
  %0 = "sdc.eq"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @not_broadcastable(%a: tensor<?x4xf32>, %b: tensor<3xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'sdc.add' op operand shapes are not broadcast-compatible: lhs is [?x4], rhs is [3]}}
  %0 = "sdc.add"(%a, %b) : (tensor<?x4xf32>, tensor<3xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @where_condition_not_i1(%c: tensor<4xi8>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.where' op condition must have element type i1, found i8}}
  %0 = "sdc.where"(%c, %x, %x) : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @where_branches_differ(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf64>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.where' op branch element types differ: on_true is f32, on_false is f64}}
  %0 = "sdc.where"(%c, %x, %y) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @where_not_broadcastable(%c: tensor<2x1xi1>, %x: tensor<4xf32>, %y: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'sdc.where' op operand shapes are not broadcast-compatible: condition is [2x1], on_true is [4], on_false is [3]}}
  %0 = "sdc.where"(%c, %x, %y) : (tensor<2x1xi1>, tensor<4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
