// A pipeline naming an sdc pass that does not exist is a usage error: exit 2, no IR.
// RUN: sh -c 'sdc-opt %s -p "canonicalize,sdc-nope"; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: unknown pass 'sdc-nope' (sdc-opt --list-passes lists them)
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
