// Round trip of the contraction and window ops: matmul, conv, conv_weight_grad, max/avg pooling, global pooling.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:[^:]+]]: tensor<?x16x64xf32>, %[[W:[^:]+]]: tensor<32x64xf32>, %[[V:[^:]+]]: tensor<32xf32>)
// CHECK-NEXT: %[[MM:.*]] = "sdc.matmul"(%[[A]], %[[W]]) {transpose_rhs = true} : (tensor<?x16x64xf32>, tensor<32x64xf32>) -> tensor<?x16x32xf32>
// CHECK-NEXT: %[[MV:.*]] = "sdc.matmul"(%[[MM]], %[[V]]) : (tensor<?x16x32xf32>, tensor<32xf32>) -> tensor<?x16xf32>
// CHECK-NEXT: %[[TT:.*]] = "sdc.matmul"(%[[A]], %[[A]]) {transpose_lhs = true, transpose_rhs = false} : (tensor<?x16x64xf32>, tensor<?x16x64xf32>) -> tensor<?x64x64xf32>
// CHECK-NEXT: return %[[MV]], %[[TT]]
func.func @matmul(%a: tensor<?x16x64xf32>, %w: tensor<32x64xf32>, %v: tensor<32xf32>) -> (tensor<?x16xf32>, tensor<?x64x64xf32>) {
  %0 = "sdc.matmul"(%a, %w) {transpose_rhs = true} : (tensor<?x16x64xf32>, tensor<32x64xf32>) -> tensor<?x16x32xf32>
  %1 = "sdc.matmul"(%0, %v) : (tensor<?x16x32xf32>, tensor<32xf32>) -> tensor<?x16xf32>
  %2 = "sdc.matmul"(%a, %a) {transpose_lhs = true, transpose_rhs = false} : (tensor<?x16x64xf32>, tensor<?x16x64xf32>) -> tensor<?x64x64xf32>
  return %1, %2 : tensor<?x16xf32>, tensor<?x64x64xf32>
}

// CHECK-LABEL: func.func @conv
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x3x224x224xf32>, %[[W:[^:]+]]: tensor<64x3x7x7xf32>, %[[DW:[^:]+]]: tensor<64x1x3x3xf32>)
// CHECK-NEXT: %[[C:.*]] = "sdc.conv"(%[[X]], %[[W]]) {dilations = array<i64>, groups = 1 : i64, pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>} : (tensor<?x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<?x64x112x112xf32>
// CHECK-NEXT: %[[D:.*]] = "sdc.conv"(%[[C]], %[[DW]]) {dilations = array<i64: 2, 2>, groups = 64 : i64, pads = array<i64: 2, 2, 2, 2>} : (tensor<?x64x112x112xf32>, tensor<64x1x3x3xf32>) -> tensor<?x64x112x112xf32>
// CHECK-NEXT: %[[P:.*]] = "sdc.conv"(%[[D]], %[[DW]]) {groups = 64 : i64} : (tensor<?x64x112x112xf32>, tensor<64x1x3x3xf32>) -> tensor<?x64x110x110xf32>
// CHECK-NEXT: return %[[P]]
func.func @conv(%x: tensor<?x3x224x224xf32>, %w: tensor<64x3x7x7xf32>, %dw: tensor<64x1x3x3xf32>) -> tensor<?x64x110x110xf32> {
  %0 = "sdc.conv"(%x, %w) {dilations = array<i64>, groups = 1 : i64, pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>} : (tensor<?x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<?x64x112x112xf32>
  %1 = "sdc.conv"(%0, %dw) {groups = 64 : i64, dilations = array<i64: 2, 2>, pads = array<i64: 2, 2, 2, 2>} : (tensor<?x64x112x112xf32>, tensor<64x1x3x3xf32>) -> tensor<?x64x112x112xf32>
  %2 = "sdc.conv"(%1, %dw) {groups = 64 : i64} : (tensor<?x64x112x112xf32>, tensor<64x1x3x3xf32>) -> tensor<?x64x110x110xf32>
  return %2 : tensor<?x64x110x110xf32>
}

// CHECK-LABEL: func.func @conv1d
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4x10xf16>, %[[W:[^:]+]]: tensor<8x4x3xf16>)
// CHECK-NEXT: %[[C:.*]] = "sdc.conv"(%[[X]], %[[W]]) {pads = array<i64: 0, 2>, strides = array<i64: 3>} : (tensor<2x4x10xf16>, tensor<8x4x3xf16>) -> tensor<2x8x4xf16>
func.func @conv1d(%x: tensor<2x4x10xf16>, %w: tensor<8x4x3xf16>) -> tensor<2x8x4xf16> {
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 0, 2>, strides = array<i64: 3>} : (tensor<2x4x10xf16>, tensor<8x4x3xf16>) -> tensor<2x8x4xf16>
  return %0 : tensor<2x8x4xf16>
}

// CHECK-LABEL: func.func @pool
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x64x112x112xf32>)
// CHECK-NEXT: %[[MAX:.*]] = "sdc.max_pool"(%[[X]]) {ceil_mode = false, dilations = array<i64>, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x64x112x112xf32>) -> tensor<?x64x56x56xf32>
// CHECK-NEXT: %[[AVG:.*]] = "sdc.avg_pool"(%[[MAX]]) {ceil_mode = false, count_include_pad = false, kernel = array<i64: 2, 2>, pads = array<i64>, strides = array<i64: 2, 2>} : (tensor<?x64x56x56xf32>) -> tensor<?x64x28x28xf32>
// CHECK-NEXT: %[[CEIL:.*]] = "sdc.max_pool"(%[[AVG]]) {ceil_mode = true, kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<?x64x28x28xf32>) -> tensor<?x64x14x14xf32>
// CHECK-NEXT: %[[PAD:.*]] = "sdc.avg_pool"(%[[CEIL]]) {count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<?x64x14x14xf32>) -> tensor<?x64x14x14xf32>
// CHECK-NEXT: %[[GAVG:.*]] = "sdc.global_avg_pool"(%[[PAD]]) : (tensor<?x64x14x14xf32>) -> tensor<?x64x1x1xf32>
// CHECK-NEXT: %[[GMAX:.*]] = "sdc.global_max_pool"(%[[PAD]]) : (tensor<?x64x14x14xf32>) -> tensor<?x64x1x1xf32>
// CHECK-NEXT: return %[[GAVG]], %[[GMAX]]
func.func @pool(%x: tensor<?x64x112x112xf32>) -> (tensor<?x64x1x1xf32>, tensor<?x64x1x1xf32>) {
  %0 = "sdc.max_pool"(%x) {ceil_mode = false, dilations = array<i64>, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x64x112x112xf32>) -> tensor<?x64x56x56xf32>
  %1 = "sdc.avg_pool"(%0) {ceil_mode = false, count_include_pad = false, kernel = array<i64: 2, 2>, pads = array<i64>, strides = array<i64: 2, 2>} : (tensor<?x64x56x56xf32>) -> tensor<?x64x28x28xf32>
  %2 = "sdc.max_pool"(%1) {ceil_mode = true, kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<?x64x28x28xf32>) -> tensor<?x64x14x14xf32>
  %3 = "sdc.avg_pool"(%2) {count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<?x64x14x14xf32>) -> tensor<?x64x14x14xf32>
  %4 = "sdc.global_avg_pool"(%3) : (tensor<?x64x14x14xf32>) -> tensor<?x64x1x1xf32>
  %5 = "sdc.global_max_pool"(%3) : (tensor<?x64x14x14xf32>) -> tensor<?x64x1x1xf32>
  return %4, %5 : tensor<?x64x1x1xf32>, tensor<?x64x1x1xf32>
}

// CHECK-LABEL: func.func @conv_weight_grad
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x4x9x8xf32>, %[[G:[^:]+]]: tensor<8x6x8x4xf32>)
// CHECK-NEXT: %[[D:.*]] = "sdc.conv_weight_grad"(%[[X]], %[[G]]) {dilations = array<i64: 2, 1>, groups = 2 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 0, 2, 1>, strides = array<i64: 1, 2>} : (tensor<8x4x9x8xf32>, tensor<8x6x8x4xf32>) -> tensor<6x2x3x3xf32>
// CHECK-NEXT: return %[[D]]
func.func @conv_weight_grad(%x: tensor<8x4x9x8xf32>, %g: tensor<8x6x8x4xf32>) -> tensor<6x2x3x3xf32> {
  %0 = "sdc.conv_weight_grad"(%x, %g) {groups = 2 : i64, kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, pads = array<i64: 1, 0, 2, 1>, dilations = array<i64: 2, 1>} : (tensor<8x4x9x8xf32>, tensor<8x6x8x4xf32>) -> tensor<6x2x3x3xf32>
  return %0 : tensor<6x2x3x3xf32>
}
