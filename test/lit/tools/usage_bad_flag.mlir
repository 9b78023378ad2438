// An unknown command-line flag is a usage error: argparse's usage line, then one error line.
// RUN: sh -c 'sdc-opt %s --no-such-flag; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: usage: sdc-opt
// CHECK: error: unrecognized arguments: --no-such-flag
// CHECK-NEXT: exit=2
// CHECK-NOT: module
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
