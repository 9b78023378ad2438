// An unknown upstream pass is a usage error too, with MLIR's reason on one line.
// RUN: sh -c 'sdc-opt %s -p "cse,nope"; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: invalid pass pipeline element 'nope': 'nope' does not refer to a registered pass or pass pipeline
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
