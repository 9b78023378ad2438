// A pass that fails stops the pipeline: its errors are printed at their locations, no IR is
// written, the later passes do not run, and sdc-opt exits 1 without MLIR's generic
// "Failure while executing pass pipeline" line.
// RUN: sh -c 'sdc-opt %s -p sdc-verify,cse --print-ir-after-all; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: IR Dump After sdc-verify Failed
// CHECK-NOT: IR Dump After
// CHECK: pass_failure.mlir:14:1: error: argument #0 'sdc.dims' dim 0 is 8, the type says 4
// CHECK-NEXT: pass_failure.mlir:14:1: error: argument #1 'sdc.dims' has 0 dims, the type has rank 1
// CHECK-NEXT: exit=1
// CHECK-NOT: Failure while executing
// CHECK-NOT: Traceback

func.func @f(%x: tensor<4xf32> {sdc.dims = #sdc.dims<[8]>}, %y: tensor<4xf32> {sdc.dims = #sdc.dims<[]>}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
