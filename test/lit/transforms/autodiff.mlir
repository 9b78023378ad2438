// sdc-autodiff: the entry keeps its results and returns the gradients after them, named
// grad.<parameter>; the backward ops follow the forward ones: a seed of ones, the cotangents of a
// value used twice added, a broadcast bias's cotangent summed over the rows, matmul's transposed.
// RUN: sdc-opt %s --split-input-file -p sdc-autodiff,sdc-verify | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x3xf32>) -> (tensor<f32> {sdc.name = "loss"}, tensor<3x2xf32> {sdc.name = "grad.w"}, tensor<2xf32> {sdc.name = "grad.b"})
// CHECK: %[[W:.*]] = "sdc.parameter"() {name = "w"}
// CHECK: %[[B:.*]] = "sdc.parameter"() {name = "b"}
// CHECK: %[[Y:.*]] = "sdc.add"
// CHECK: %[[LOSS:.*]] = "sdc.reduce_sum"
// CHECK: %[[ONE:.*]] = "sdc.constant"() {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: %[[SEED:.*]] = "sdc.broadcast"({{.*}}) {shape = [4, 2]}
// CHECK: %[[G1:.*]] = "sdc.mul"(%[[SEED]], %[[Y]])
// CHECK: %[[G2:.*]] = "sdc.mul"(%[[SEED]], %[[Y]])
// CHECK: %[[GY:.*]] = "sdc.add"(%[[G1]], %[[G2]])
// CHECK: %[[GB1:.*]] = "sdc.reduce_sum"(%[[GY]]) {axes = array<i64: 0>, keepdims = true}
// CHECK: %[[GB:.*]] = "sdc.reshape"(%[[GB1]]) {shape = [2]}
// CHECK: %[[GW:.*]] = "sdc.matmul"(%[[X]], %[[GY]]) {transpose_lhs = true, transpose_rhs = false}
// CHECK: return %[[LOSS]], %[[GW]], %[[GB]] : tensor<f32>, tensor<3x2xf32>, tensor<2xf32>

func.func @main(%x: tensor<4x3xf32>) -> (tensor<f32> {sdc.name = "loss"}) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<3x2xf32>
  %b = "sdc.parameter"() {name = "b"} : () -> tensor<2xf32>
  %0 = "sdc.matmul"(%x, %w) : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %1 = "sdc.add"(%0, %b) : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %2 = "sdc.mul"(%1, %1) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %3 = "sdc.reduce_sum"(%2) : (tensor<4x2xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// An embedding's gradient is a scatter-add of the rows' cotangents into zeros; the indices get none.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[IDX:[^:]+]]: tensor<2x3xi64>) -> (tensor<f32>, tensor<10x4xf32> {sdc.name = "grad.wte"})
// CHECK-DAG: %[[ZERO:.*]] = "sdc.constant"() {value = dense<0.000000e+00> : tensor<f32>}
// CHECK-DAG: %[[ZEROS:.*]] = "sdc.broadcast"(%[[ZERO]]) {shape = [10, 4]}
// CHECK-DAG: %[[FLAT:.*]] = "sdc.reshape"(%[[IDX]]) {shape = [6, 1]}
// CHECK: %[[GW:.*]] = "sdc.scatter_nd"(%[[ZEROS]], %[[FLAT]], %{{.*}}) {reduction = "add"}
// CHECK: return %{{.*}}, %[[GW]]
func.func @embedding(%idx: tensor<2x3xi64>) -> tensor<f32> {
  %w = "sdc.parameter"() {name = "wte"} : () -> tensor<10x4xf32>
  %0 = "sdc.gather"(%w, %idx) {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %1 = "sdc.reduce_sum"(%0) : (tensor<2x3x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A convolution's input cotangent is the transposed convolution with the same weight (the
// output padding restores the row the stride-2 windows never reached); the weight's is one
// sdc.conv_weight_grad of the input and the cotangent with the convolution's attributes.
// CHECK-LABEL: func.func @conv
// CHECK-SAME: () -> (tensor<f32>, tensor<2x3x8x8xf32> {sdc.name = "grad.x"}, tensor<4x3x3x3xf32> {sdc.name = "grad.w"})
// CHECK: %[[X:.*]] = "sdc.parameter"() {name = "x"}
// CHECK: %[[W:.*]] = "sdc.parameter"() {name = "w"}
// CHECK: %[[G:.*]] = "sdc.broadcast"({{.*}}) {shape = [2, 4, 4, 4]}
// CHECK: %[[GX:.*]] = "sdc.conv_transpose"(%[[G]], %[[W]]) {dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
// CHECK-NEXT: %[[GW:.*]] = "sdc.conv_weight_grad"(%[[X]], %[[G]]) {dilations = array<i64: 1, 1>, groups = 1 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
// CHECK: return %{{.*}}, %[[GX]], %[[GW]]
func.func @conv() -> tensor<f32> {
  %x = "sdc.parameter"() {name = "x"} : () -> tensor<2x3x8x8xf32>
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x3x3x3xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  %1 = "sdc.reduce_sum"(%0) : (tensor<2x4x4x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
