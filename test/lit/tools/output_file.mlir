// -o FILE writes the IR there and nothing to stdout, exiting 0; an unwritable path is an error
// (exit 1) naming the path.
// RUN: sh -c 'sdc-opt %s -o %t; echo "exit=$?"' > %t.stdout
// RUN: echo exit=0 > %t.expected
// RUN: diff %t.stdout %t.expected
// RUN: FileCheck %s --input-file %t
// RUN: sh -c 'sdc-opt %s -o %t.missing-dir/out.mlir; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=UNWRITABLE

// CHECK: func.func @written(%[[X:[^:]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[N:.*]] = "sdc.neg"(%[[X]])
// CHECK-NEXT: return %[[N]]
// Locations are printed with --print-debuginfo only.
// CHECK-NOT: loc(

// UNWRITABLE: error: cannot write '{{.*}}.missing-dir/out.mlir': No such file or directory
// UNWRITABLE-NEXT: exit=1
// UNWRITABLE-NOT: Traceback

func.func @written(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
