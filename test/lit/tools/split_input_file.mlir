// --split-input-file: each `// -----` chunk is parsed and run on its own. A failing chunk does
// not stop the others; the outputs of the chunks that succeed are printed, `// -----` between
// them; the exit status is 1 when any chunk failed.
// RUN: sh -c 'sdc-opt %s --split-input-file -p sdc-canonicalize; echo "exit=$?"' 2>&1 | FileCheck %s
// Without the flag the markers are comments and the file is one module.
// RUN: not sdc-opt %s -p sdc-canonicalize 2>&1 | FileCheck %s --check-prefix=WHOLE

// CHECK: split_input_file.mlir:29:8: error: 'sdc.neg' op expects 1 operand, found 2
// CHECK: module {
// CHECK-NEXT: func.func @first
// CHECK-NEXT: return
// CHECK: // -----
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @third
// CHECK: exit=1

// WHOLE: split_input_file.mlir:29:8: error: 'sdc.neg' op expects 1 operand, found 2
// WHOLE-NOT: func.func

func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.cast"(%x) {dtype = f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  // The only invalid op of the file.
  %0 = "sdc.neg"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @third(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
