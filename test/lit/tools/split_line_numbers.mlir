// With --split-input-file every diagnostic carries the line and column of the whole file, not
// of its chunk: parse errors, verifier errors, notes and pass errors alike. (Checks are at the
// bottom so that editing them moves no line above.)
// RUN: not sdc-opt %s --split-input-file -p sdc-verify 2>&1 | FileCheck %s

func.func @valid(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----



func.func @parse_error(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.nope"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
func.func @right_after_the_marker(%x: tensor<4xi32>) -> tensor<4xi32> {
    %0 = "sdc.sqrt"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @multi_line_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 =
    "sdc.transpose"(%x) {perm = array<i64: 1>}
      : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @with_a_note(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.neg"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @pass_error(%x: tensor<4xf32> {sdc.dims = #sdc.dims<[5]>}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// CHECK: split_line_numbers.mlir:15:8: error: unregistered operation 'sdc.nope'
// CHECK-NEXT: split_line_numbers.mlir:21:10: error: 'sdc.sqrt' op operand must have float element type, found i32
// CHECK-NEXT: split_line_numbers.mlir:29:5: error: 'sdc.transpose' op perm [1] is not a permutation of the operand's 1 dims
// CHECK-NEXT: split_line_numbers.mlir:37:8: error: operand #0 does not dominate this use
// CHECK-NEXT: split_line_numbers.mlir:38:8: note: operand defined here
// CHECK-NEXT: split_line_numbers.mlir:44:1: error: argument #0 'sdc.dims' dim 0 is 5, the type says 4
// CHECK-NOT: error
