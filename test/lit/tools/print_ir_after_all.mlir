// --print-ir-after-all prints the IR to stderr after every pass of the pipeline, sdc's and
// upstream ones alike; stdout (here -o) still gets the final IR only.
// RUN: sdc-opt %s -p 'sdc-verify,sdc-canonicalize,cse' --print-ir-after-all -o %t 2>&1 | FileCheck %s
// RUN: FileCheck %s --input-file %t --check-prefix=FINAL

// CHECK: IR Dump After sdc-verify
// CHECK: %[[C:.*]] = "sdc.cast"(%[[X:.*]]) {dtype = f32}
// CHECK: "sdc.neg"(%[[C]])
// CHECK: "sdc.neg"(%[[C]])
// CHECK: IR Dump After sdc-canonicalize
// CHECK-NOT: "sdc.cast"
// CHECK: "sdc.neg"
// CHECK: "sdc.neg"
// CHECK: IR Dump After {{.*}}cse
// CHECK-COUNT-1: "sdc.neg"
// CHECK-NOT: "sdc.neg"
// CHECK-NOT: IR Dump

// FINAL-NOT: IR Dump
// FINAL: %[[N:.*]] = "sdc.neg"
// FINAL-NEXT: "sdc.add"(%[[N]], %[[N]])

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "sdc.cast"(%x) {dtype = f32} : (tensor<4xf32>) -> tensor<4xf32>
  %0 = "sdc.neg"(%c) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "sdc.neg"(%c) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "sdc.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
