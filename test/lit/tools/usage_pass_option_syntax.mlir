// Pass options are key=value pairs; anything else is a usage error.
// RUN: sh -c 'sdc-opt %s -p "sdc-canonicalize{fold}"; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: pass option 'fold' is not of the form key=value
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
