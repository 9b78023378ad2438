// Round trip of sdc.random_uniform (sdc/dialect/ops/random.py): static and symbolic shapes, f32 and bf16.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// CHECK-LABEL: func.func @uniform
// CHECK-SAME: (%[[SEED:[^:]+]]: tensor<i64>, %[[OFF:[^:]+]]: tensor<i64>)
// CHECK-NEXT: %[[U:.*]] = "sdc.random_uniform"(%[[SEED]], %[[OFF]]) {dtype = f32, shape = [4, 8]} : (tensor<i64>, tensor<i64>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[V:.*]] = "sdc.random_uniform"(%[[SEED]], %[[OFF]]) {dtype = bf16, shape = ["B", 3]} : (tensor<i64>, tensor<i64>) -> tensor<?x3xbf16>
// CHECK-NEXT: return %[[U]], %[[V]]
func.func @uniform(%seed: tensor<i64>, %offset: tensor<i64>) -> (tensor<4x8xf32>, tensor<?x3xbf16>) {
  %0 = "sdc.random_uniform"(%seed, %offset) {dtype = f32, shape = [4, 8]} : (tensor<i64>, tensor<i64>) -> tensor<4x8xf32>
  %1 = "sdc.random_uniform"(%seed, %offset) {dtype = bf16, shape = ["B", 3]} : (tensor<i64>, tensor<i64>) -> tensor<?x3xbf16>
  return %0, %1 : tensor<4x8xf32>, tensor<?x3xbf16>
}
