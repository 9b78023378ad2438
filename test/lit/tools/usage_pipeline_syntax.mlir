// A pipeline that does not parse (an unclosed option list) is a usage error with MLIR's reason.
// RUN: sh -c 'sdc-opt %s -p "sdc-canonicalize{fold=false"; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: invalid pass pipeline element 'sdc-canonicalize{fold=false': missing closing '}' while processing pass options
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
