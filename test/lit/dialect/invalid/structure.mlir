// The verifier's structural checks (sdc/dialect/dialect.py, verify_op): operand and result
// counts, operand and result types, and result counts against the shape rule.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @too_many_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.neg' op expects 1 operand, found 2}}
  %0 = "sdc.neg"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @too_few_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.add' op expects 2 operands, found 1}}
  %0 = "sdc.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @no_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{'sdc.neg' op expects 1 result, found 0}}
  "sdc.neg"(%x) : (tensor<4xf32>) -> ()
  return
}

// -----

func.func @send_has_no_result(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.send' op expects 0 results, found 1}}
  %0 = "sdc.send"(%x) {mesh_axes = ["pp"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @operand_not_a_tensor(%x: f32) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.neg' op operand #0 must be a ranked tensor, found f32}}
  %0 = "sdc.neg"(%x) : (f32) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @operand_unranked(%x: tensor<*xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.neg' op operand #0 must be a ranked tensor, found tensor<*xf32>}}
  %0 = "sdc.neg"(%x) : (tensor<*xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @result_not_a_tensor(%x: tensor<4xf32>) -> memref<4xf32> {
  // expected-error @+1 {{'sdc.neg' op result #0 must be a ranked tensor, found memref<4xf32>}}
  %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> memref<4xf32>
  return %0 : memref<4xf32>
}

// -----

func.func @operand_element_type(%x: tensor<4xindex>) -> tensor<4xindex> {
  // expected-error @+1 {{'sdc.neg' op operand #0 has unsupported element type index (supported: f16, bf16, f32, f64, i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64)}}
  %0 = "sdc.neg"(%x) : (tensor<4xindex>) -> tensor<4xindex>
  return %0 : tensor<4xindex>
}

// -----

func.func @result_element_type(%x: tensor<4xf32>) -> tensor<4xcomplex<f32>> {
  // expected-error @+1 {{'sdc.cast' op result #0 has unsupported element type complex<f32>}}
  %0 = "sdc.cast"(%x) {dtype = f32} : (tensor<4xf32>) -> tensor<4xcomplex<f32>>
  return %0 : tensor<4xcomplex<f32>>
}

// -----

func.func @split_result_count(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.split' op has 3 results, the shape rule gives 2}}
  %0:3 = "sdc.split"(%x) {axis = 0 : i64, parts = 2 : i64} : (tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
  return %0#0 : tensor<2xf32>
}

// -----

func.func @recv_without_result() {
  // expected-error @+1 {{'sdc.recv' op expects 1 result, found 0}}
  "sdc.recv"() {mesh_axes = ["pp"]} : () -> ()
  return
}

// -----

func.func @result_element_type_differs(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'sdc.neg' op result #0 element type is f16, expected f32}}
  %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @result_rank_differs(%x: tensor<4xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{'sdc.neg' op result #0 has rank 2, expected 1 (tensor<4xf32>)}}
  %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

func.func @result_dim_differs(%x: tensor<?x4xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'sdc.neg' op result #0 dim 1 is 5, expected 4 (inferred type tensor<?x4xf32>)}}
  %0 = "sdc.neg"(%x) : (tensor<?x4xf32>) -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @second_result_differs(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.split' op result #1 dim 0 is 3, expected 2}}
  %0:2 = "sdc.split"(%x) {axis = 0 : i64, parts = 2 : i64} : (tensor<4xf32>) -> (tensor<2xf32>, tensor<3xf32>)
  return %0#0 : tensor<2xf32>
}
