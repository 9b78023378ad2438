// Round trip of sdc.custom: a user-registered op (sdc.custom_op), here sdc's own example op, whose
// operands of different types sit in optional slots sized by operandSegmentSizes.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// CHECK-LABEL: func.func @scaled_tanh
// CHECK-NEXT: %[[Y:.*]] = "sdc.custom"(%{{.*}}, %{{.*}}) {attributes = "{\22scale\22:0.5}", name = "example::scaled_tanh", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @scaled_tanh(%x: tensor<?x8xf32>, %w: tensor<8xf32>) -> tensor<?x8xf32> {
  %0 = "sdc.custom"(%x, %w) {attributes = "{\"scale\":0.5}", name = "example::scaled_tanh", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}
