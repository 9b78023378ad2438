// Input from stdin, named `-` or (when something is piped in) left out; diagnostics name the
// input <stdin>. The exit status is that of the second chunk's error.
// RUN: sh -c 'sdc-opt - --split-input-file < %s; echo "exit=$?"' 2>&1 | FileCheck %s
// RUN: sh -c 'cat %s | sdc-opt --split-input-file; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: <stdin>:18:8: error: 'sdc.exp' op operand must have float element type, found i32
// CHECK: func.func @from_stdin
// CHECK-NEXT: "sdc.neg"
// CHECK: exit=1
// CHECK-NOT: Traceback

func.func @from_stdin(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// -----
func.func @invalid(%i: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "sdc.exp"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
