// sdc-autodiff{wrt=...}: only the named parameters and inputs get gradients, in the order given;
// cotangents nothing reads (here: the weight's) are not left in the IR.
// RUN: sdc-opt %s -p 'sdc-autodiff{wrt=b,x}' | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {sdc.name = "loss"}, tensor<2xf32> {sdc.name = "grad.b"}, tensor<4x3xf32> {sdc.name = "grad.x"})
// CHECK-NOT: transpose_lhs = true
// CHECK: %[[GX:.*]] = "sdc.matmul"({{.*}}) {transpose_lhs = false, transpose_rhs = true}
// CHECK-NOT: transpose_lhs = true
// CHECK: return %{{.*}}, %{{.*}}, %[[GX]]
func.func @main(%x: tensor<4x3xf32> {sdc.name = "x"}) -> (tensor<f32> {sdc.name = "loss"}) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<3x2xf32>
  %b = "sdc.parameter"() {name = "b"} : () -> tensor<2xf32>
  %0 = "sdc.matmul"(%x, %w) : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %1 = "sdc.add"(%0, %b) : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %2 = "sdc.sigmoid"(%1) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %3 = "sdc.reduce_mean"(%2) : (tensor<4x2xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
