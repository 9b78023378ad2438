// Several top-level ops get an implicit builtin.module around them, as in mlir-opt, and an
// empty chunk is an empty module. Diagnostics keep the file's lines and columns.
// RUN: not sdc-opt %s --split-input-file 2>&1 | FileCheck %s

func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// -----
func.func @third(%x: tensor<4xi32>) -> tensor<4xi32> {
  return %x : tensor<4xi32>
}
func.func @fourth(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "sdc.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// CHECK: implicit_module.mlir:20:8: error: 'sdc.exp' op operand must have float element type, found i32
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @first
// CHECK-NEXT: return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @second
// CHECK-NEXT: "sdc.neg"
// CHECK-NEXT: return
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: // -----
// CHECK-NEXT: module {
// CHECK-NEXT: }
// CHECK-NOT: func.func
