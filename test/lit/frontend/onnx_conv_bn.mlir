// A Conv with a bias then an inference-mode BatchNormalization: sdc.conv carries the ONNX pads,
// strides and dilations, the bias is added broadcast over [1, C, 1, 1], and batch_norm keeps its
// four per-channel operands and epsilon.
// RUN: %python %S/Inputs/onnx_models.py conv_bn %t.onnx
// RUN: sdc import %t.onnx | FileCheck %s

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<1x3x8x8xf32> {sdc.dims = #sdc.dims<[1, 3, 8, 8]>, sdc.name = "x"}
// CHECK: %[[W:.*]] = "sdc.constant"() {value = dense<{{.*}}> : tensor<4x3x3x3xf32>}
// CHECK: %[[C:.*]] = "sdc.conv"(%[[X]], %[[W]]) {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK-SAME: -> tensor<1x4x4x4xf32>
// CHECK: %[[B:.*]] = "sdc.constant"() {value = dense<{{.*}}> : tensor<1x4x1x1xf32>}
// CHECK: %[[CB:.*]] = "sdc.add"(%[[C]], %[[B]])
// CHECK: %[[Y:.*]] = "sdc.batch_norm"(%[[CB]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {epsilon = 0.0010000000474974513 : f64}
// CHECK-SAME: (tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
// CHECK: return %[[Y]]
