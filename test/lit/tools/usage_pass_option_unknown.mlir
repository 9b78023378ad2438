// An option an sdc pass does not have is a usage error that lists the options it has.
// RUN: sh -c 'sdc-opt %s -p "sdc-canonicalize{fold=false max=3}"; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: pass 'sdc-canonicalize' has no option 'max' (options: fold)
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
