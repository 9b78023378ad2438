// Round trip of the nn ops that decompose into no other family: linear_attention, conv_transpose,
// deform_conv.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// Grouped-query attention (8 query heads over 4 key/value heads) with the delta rule, then a
// plain one on static shapes whose decay broadcasts.
// CHECK-LABEL: func.func @linear_attention
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x8x?x8xf32>, %[[K:[^:]+]]: tensor<?x4x?x8xf32>, %[[V:[^:]+]]: tensor<?x4x?x16xf32>, %[[S:[^:]+]]: tensor<?x4x8x16xf32>, %[[D:[^:]+]]: tensor<?x4x?x8xf32>, %[[B:[^:]+]]: tensor<?x4x?x1xf32>,
// CHECK-SAME: %[[Q2:[^:]+]]: tensor<2x4x3x8xf16>, %[[K2:[^:]+]]: tensor<2x2x3x8xf16>, %[[V2:[^:]+]]: tensor<2x2x3x16xf16>, %[[S2:[^:]+]]: tensor<2x2x8x16xf16>, %[[D2:[^:]+]]: tensor<1x1x1x8xf16>, %[[B2:[^:]+]]: tensor<2x2x3x1xf16>)
// CHECK-NEXT: %[[A:.*]]:2 = "sdc.linear_attention"(%[[Q]], %[[K]], %[[V]], %[[S]], %[[D]], %[[B]]) {delta = true, scale = 5.000000e-01 : f64} : (tensor<?x8x?x8xf32>, tensor<?x4x?x8xf32>, tensor<?x4x?x16xf32>, tensor<?x4x8x16xf32>, tensor<?x4x?x8xf32>, tensor<?x4x?x1xf32>) -> (tensor<?x8x?x16xf32>, tensor<?x4x8x16xf32>)
// CHECK-NEXT: %[[A2:.*]]:2 = "sdc.linear_attention"(%[[Q2]], %[[K2]], %[[V2]], %[[S2]], %[[D2]], %[[B2]]) {scale = 1.250000e-01 : f64} : (tensor<2x4x3x8xf16>, tensor<2x2x3x8xf16>, tensor<2x2x3x16xf16>, tensor<2x2x8x16xf16>, tensor<1x1x1x8xf16>, tensor<2x2x3x1xf16>) -> (tensor<2x4x3x16xf16>, tensor<2x2x8x16xf16>)
// CHECK-NEXT: return %[[A]]#0, %[[A]]#1, %[[A2]]#0
func.func @linear_attention(%q: tensor<?x8x?x8xf32>, %k: tensor<?x4x?x8xf32>, %v: tensor<?x4x?x16xf32>, %s: tensor<?x4x8x16xf32>, %d: tensor<?x4x?x8xf32>, %b: tensor<?x4x?x1xf32>,
                            %q2: tensor<2x4x3x8xf16>, %k2: tensor<2x2x3x8xf16>, %v2: tensor<2x2x3x16xf16>, %s2: tensor<2x2x8x16xf16>, %d2: tensor<1x1x1x8xf16>, %b2: tensor<2x2x3x1xf16>)
    -> (tensor<?x8x?x16xf32>, tensor<?x4x8x16xf32>, tensor<2x4x3x16xf16>) {
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {delta = true, scale = 5.000000e-01 : f64} : (tensor<?x8x?x8xf32>, tensor<?x4x?x8xf32>, tensor<?x4x?x16xf32>, tensor<?x4x8x16xf32>, tensor<?x4x?x8xf32>, tensor<?x4x?x1xf32>) -> (tensor<?x8x?x16xf32>, tensor<?x4x8x16xf32>)
  %1:2 = "sdc.linear_attention"(%q2, %k2, %v2, %s2, %d2, %b2) {scale = 0.125 : f64} : (tensor<2x4x3x8xf16>, tensor<2x2x3x8xf16>, tensor<2x2x3x16xf16>, tensor<2x2x8x16xf16>, tensor<1x1x1x8xf16>, tensor<2x2x3x1xf16>) -> (tensor<2x4x3x16xf16>, tensor<2x2x8x16xf16>)
  return %0#0, %0#1, %1#0 : tensor<?x8x?x16xf32>, tensor<?x4x8x16xf32>, tensor<2x4x3x16xf16>
}

// CHECK-LABEL: func.func @conv_transpose
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x64x28x28xf32>, %[[W:[^:]+]]: tensor<64x32x3x3xf32>, %[[X1:[^:]+]]: tensor<1x4x5xf32>, %[[W1:[^:]+]]: tensor<4x2x3xf32>)
// CHECK-NEXT: %[[UP:.*]] = "sdc.conv_transpose"(%[[X]], %[[W]]) {dilations = array<i64>, groups = 1 : i64, output_padding = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x64x28x28xf32>, tensor<64x32x3x3xf32>) -> tensor<?x32x56x56xf32>
// CHECK-NEXT: %[[G:.*]] = "sdc.conv_transpose"(%[[X1]], %[[W1]]) {groups = 2 : i64} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x4x7xf32>
// CHECK-NEXT: return %[[UP]], %[[G]]
func.func @conv_transpose(%x: tensor<?x64x28x28xf32>, %w: tensor<64x32x3x3xf32>, %x1: tensor<1x4x5xf32>, %w1: tensor<4x2x3xf32>) -> (tensor<?x32x56x56xf32>, tensor<1x4x7xf32>) {
  %0 = "sdc.conv_transpose"(%x, %w) {dilations = array<i64>, groups = 1 : i64, output_padding = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x64x28x28xf32>, tensor<64x32x3x3xf32>) -> tensor<?x32x56x56xf32>
  %1 = "sdc.conv_transpose"(%x1, %w1) {groups = 2 : i64} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x4x7xf32>
  return %0, %1 : tensor<?x32x56x56xf32>, tensor<1x4x7xf32>
}

// CHECK-LABEL: func.func @deform_conv
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x16x32x32xf32>, %[[W:[^:]+]]: tensor<32x16x3x3xf32>, %[[O:[^:]+]]: tensor<?x18x32x32xf32>, %[[M:[^:]+]]: tensor<1x1x1x1xf32>,
// CHECK-SAME: %[[X2:[^:]+]]: tensor<1x8x9x9xf32>, %[[W2:[^:]+]]: tensor<4x4x3x3xf32>, %[[O2:[^:]+]]: tensor<1x36x4x4xf32>, %[[M2:[^:]+]]: tensor<1x18x4x4xf32>)
// CHECK-NEXT: %[[D:.*]] = "sdc.deform_conv"(%[[X]], %[[W]], %[[O]], %[[M]]) {dilations = array<i64>, groups = 1 : i64, offset_groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64>} : (tensor<?x16x32x32xf32>, tensor<32x16x3x3xf32>, tensor<?x18x32x32xf32>, tensor<1x1x1x1xf32>) -> tensor<?x32x32x32xf32>
// CHECK-NEXT: %[[D2:.*]] = "sdc.deform_conv"(%[[X2]], %[[W2]], %[[O2]], %[[M2]]) {groups = 2 : i64, offset_groups = 2 : i64, strides = array<i64: 2, 2>} : (tensor<1x8x9x9xf32>, tensor<4x4x3x3xf32>, tensor<1x36x4x4xf32>, tensor<1x18x4x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: return %[[D]], %[[D2]]
func.func @deform_conv(%x: tensor<?x16x32x32xf32>, %w: tensor<32x16x3x3xf32>, %o: tensor<?x18x32x32xf32>, %m: tensor<1x1x1x1xf32>,
                       %x2: tensor<1x8x9x9xf32>, %w2: tensor<4x4x3x3xf32>, %o2: tensor<1x36x4x4xf32>, %m2: tensor<1x18x4x4xf32>) -> (tensor<?x32x32x32xf32>, tensor<1x4x4x4xf32>) {
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) {dilations = array<i64>, groups = 1 : i64, offset_groups = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64>} : (tensor<?x16x32x32xf32>, tensor<32x16x3x3xf32>, tensor<?x18x32x32xf32>, tensor<1x1x1x1xf32>) -> tensor<?x32x32x32xf32>
  %1 = "sdc.deform_conv"(%x2, %w2, %o2, %m2) {groups = 2 : i64, offset_groups = 2 : i64, strides = array<i64: 2, 2>} : (tensor<1x8x9x9xf32>, tensor<4x4x3x3xf32>, tensor<1x36x4x4xf32>, tensor<1x18x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %0, %1 : tensor<?x32x32x32xf32>, tensor<1x4x4x4xf32>
}
