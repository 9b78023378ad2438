// An sdc pass option with a value of the wrong type is a usage error.
// RUN: sh -c 'sdc-opt %s -p "sdc-canonicalize{fold=maybe}"; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: pass 'sdc-canonicalize' option 'fold' expects a bool, found 'maybe'
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
