// A bad option of an upstream pass is a usage error; MLIR's multi-line reason becomes one line.
// RUN: sh -c 'sdc-opt %s -p "canonicalize{no-such-option=1}"; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: invalid pass pipeline element 'canonicalize{no-such-option=1}': {{.*}}no such option no-such-option; failed to add `canonicalize` with options `no-such-option=1`
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
