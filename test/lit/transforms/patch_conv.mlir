// sdc-patch-conv: a convolution whose windows tile its input (stride = kernel, no padding, one group)
// becomes a matmul of the input's patches, its per-channel bias added before the transpose back;
// any other convolution stays as it is.
// RUN: sdc-opt %s --split-input-file -p sdc-patch-conv,sdc-verify | FileCheck %s

// CHECK-LABEL: func.func @patch_embedding
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x3x32x32xf32>)
// CHECK: %[[W:.*]] = "sdc.parameter"() {name = "w"}
// CHECK: %[[B:.*]] = "sdc.parameter"() {name = "b"}
// CHECK: %[[P:.*]] = "sdc.reshape"(%[[X]]) {shape = [-1, 3, 4, 8, 4, 8]}
// CHECK: %[[T:.*]] = "sdc.transpose"(%[[P]]) {perm = array<i64: 0, 2, 4, 1, 3, 5>}
// CHECK: %[[ROWS:.*]] = "sdc.reshape"(%[[T]]) {shape = [-1, 4, 4, 192]}
// CHECK: %[[WM:.*]] = "sdc.reshape"(%[[W]]) {shape = [16, 192]}
// CHECK: %[[M:.*]] = "sdc.matmul"(%[[ROWS]], %[[WM]]) {transpose_lhs = false, transpose_rhs = true} : (tensor<?x4x4x192xf32>, tensor<16x192xf32>) -> tensor<?x4x4x16xf32>
// CHECK: %[[FB:.*]] = "sdc.reshape"(%[[B]]) {shape = [16]}
// CHECK: %[[S:.*]] = "sdc.add"(%[[M]], %[[FB]])
// CHECK: %[[Y:.*]] = "sdc.transpose"(%[[S]]) {perm = array<i64: 0, 3, 1, 2>} : (tensor<?x4x4x16xf32>) -> tensor<?x16x4x4xf32>
// CHECK-NOT: sdc.conv
// CHECK: return %[[Y]]
func.func @patch_embedding(%x: tensor<?x3x32x32xf32>) -> tensor<?x16x4x4xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<16x3x8x8xf32>
  %b = "sdc.parameter"() {name = "b"} : () -> tensor<1x16x1x1xf32>
  %0 = "sdc.conv"(%x, %w) {strides = array<i64: 8, 8>} : (tensor<?x3x32x32xf32>, tensor<16x3x8x8xf32>) -> tensor<?x16x4x4xf32>
  %1 = "sdc.add"(%0, %b) : (tensor<?x16x4x4xf32>, tensor<1x16x1x1xf32>) -> tensor<?x16x4x4xf32>
  return %1 : tensor<?x16x4x4xf32>
}

// -----

// 1-d, no bias: [N, C, E, K] -> [N, E, C, K] -> [N, E, C*K].
// CHECK-LABEL: func.func @one_dim
// CHECK: "sdc.reshape"(%{{.*}}) {shape = [-1, 4, 6, 3]}
// CHECK: "sdc.transpose"(%{{.*}}) {perm = array<i64: 0, 2, 1, 3>}
// CHECK: "sdc.reshape"(%{{.*}}) {shape = [-1, 6, 12]}
// CHECK: %[[M:.*]] = "sdc.matmul"
// CHECK: %[[Y:.*]] = "sdc.transpose"(%[[M]]) {perm = array<i64: 0, 2, 1>}
// CHECK: return %[[Y]]
func.func @one_dim(%x: tensor<2x4x18xf32>) -> tensor<2x5x6xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<5x4x3xf32>
  %0 = "sdc.conv"(%x, %w) {strides = array<i64: 3>} : (tensor<2x4x18xf32>, tensor<5x4x3xf32>) -> tensor<2x5x6xf32>
  return %0 : tensor<2x5x6xf32>
}

// -----

// Overlapping windows, padding, a ragged edge, groups, a 1x1 kernel: convolutions still. A bias add that
// something else reads too stays after the transpose.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: "sdc.conv"
// CHECK-NOT: "sdc.conv"
// CHECK: %[[M:.*]] = "sdc.matmul"
// CHECK: %[[T:.*]] = "sdc.transpose"(%[[M]])
// CHECK: "sdc.add"(%[[T]], %{{.*}})
func.func @kept(%x: tensor<2x4x16x16xf32>, %r: tensor<2x4x18x16xf32>) -> (tensor<2x4x7x7xf32>, tensor<2x4x5x5xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x16x16xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x4x4xf32>
  %g = "sdc.parameter"() {name = "g"} : () -> tensor<4x2x4x4xf32>
  %p = "sdc.parameter"() {name = "p"} : () -> tensor<4x4x1x1xf32>
  %b = "sdc.parameter"() {name = "b"} : () -> tensor<1x4x1x1xf32>
  %0 = "sdc.conv"(%x, %w) {strides = array<i64: 2, 2>} : (tensor<2x4x16x16xf32>, tensor<4x4x4x4xf32>) -> tensor<2x4x7x7xf32>
  %1 = "sdc.conv"(%x, %w) {strides = array<i64: 4, 4>, pads = array<i64: 2, 2, 2, 2>} : (tensor<2x4x16x16xf32>, tensor<4x4x4x4xf32>) -> tensor<2x4x5x5xf32>
  %2 = "sdc.conv"(%r, %w) {strides = array<i64: 4, 4>} : (tensor<2x4x18x16xf32>, tensor<4x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %3 = "sdc.conv"(%x, %g) {strides = array<i64: 4, 4>, groups = 2 : i64} : (tensor<2x4x16x16xf32>, tensor<4x2x4x4xf32>) -> tensor<2x4x4x4xf32>
  %4 = "sdc.conv"(%x, %p) : (tensor<2x4x16x16xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x16x16xf32>
  %5 = "sdc.conv"(%x, %w) {strides = array<i64: 4, 4>} : (tensor<2x4x16x16xf32>, tensor<4x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %6 = "sdc.add"(%5, %b) : (tensor<2x4x4x4xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x4x4xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x4x7x7xf32>, tensor<2x4x5x5xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x16x16xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>
}
