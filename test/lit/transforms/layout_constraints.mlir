// sdc-layout-constraints: one layout per tensor for the whole function, casts only where needed.
// RUN: sdc-opt %s --split-input-file -p 'sdc-layout-constraints{target=cuda}' | FileCheck %s
// Running it twice changes nothing (the layouts it wrote pin the same answer).
// RUN: sdc-opt %s --split-input-file -p 'sdc-layout-constraints{target=cuda},sdc-layout-constraints{target=cuda}' \
// RUN:   | FileCheck %s

// A ResNet-style block given NCHW input: one cast in, one cast out, every convolution NHWC, the
// weights stored OHWI (no cast), the residual add reads the same NHWC copy of the input.
// CHECK-LABEL: func.func @resnet_block
// CHECK-SAME: (%[[X:[^:]+]]: tensor<1x64x56x56xf32>)
// CHECK-DAG: "sdc.parameter"() {name = "w1", sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>}
// CHECK-DAG: "sdc.parameter"() {name = "w2", sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>}
// CHECK: %[[IN:.*]] = "sdc.layout_cast"(%[[X]]) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>, sdc.reason = "operand #0 of 'sdc.conv'{{.*}}"}
// CHECK-NOT: "sdc.layout_cast"
// CHECK: "sdc.conv"(%[[IN]], %{{.*}}) {{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK-NOT: "sdc.layout_cast"
// CHECK: "sdc.batch_norm"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK-NOT: "sdc.layout_cast"
// CHECK: "sdc.conv"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK-NOT: "sdc.layout_cast"
// CHECK: "sdc.add"(%{{.*}}, %[[IN]]) {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>}
// CHECK-NEXT: %[[R:.*]] = "sdc.relu"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK-NEXT: %[[OUT:.*]] = "sdc.layout_cast"(%[[R]]) {layout = #sdc.layout<array<i64: 0, 1, 2, 3>>, sdc.reason = "function result #0 is returned in [0, 1, 2, 3]{{.*}}"}
// CHECK-NEXT: return %[[OUT]]
func.func @resnet_block(%x: tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32> {
  %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<64x64x3x3xf32>
  %s = "sdc.parameter"() {name = "bn.scale"} : () -> tensor<64xf32>
  %b = "sdc.parameter"() {name = "bn.bias"} : () -> tensor<64xf32>
  %m = "sdc.parameter"() {name = "bn.mean"} : () -> tensor<64xf32>
  %v = "sdc.parameter"() {name = "bn.var"} : () -> tensor<64xf32>
  %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<64x64x3x3xf32>
  %b2 = "sdc.parameter"() {name = "b2"} : () -> tensor<64x1x1xf32>
  %0 = "sdc.conv"(%x, %w1) {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32>
  %1 = "sdc.batch_norm"(%0, %s, %b, %m, %v) : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  %2 = "sdc.relu"(%1) : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  %3 = "sdc.conv"(%2, %w2) {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32>
  %4 = "sdc.add"(%3, %b2) : (tensor<1x64x56x56xf32>, tensor<64x1x1xf32>) -> tensor<1x64x56x56xf32>
  %5 = "sdc.add"(%4, %x) : (tensor<1x64x56x56xf32>, tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  %6 = "sdc.relu"(%5) : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  return %6 : tensor<1x64x56x56xf32>
}

// -----

// Dynamic dims do not turn the pass off: the same answer with every size unknown.
// CHECK-LABEL: func.func @dynamic
// CHECK: "sdc.layout_cast"({{.*}}) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK: "sdc.conv"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK: "sdc.conv"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK: "sdc.layout_cast"({{.*}}) {layout = #sdc.layout<array<i64: 0, 1, 2, 3>>
// CHECK-NEXT: return
func.func @dynamic(%x: tensor<?x16x?x?xf32>) -> tensor<?x16x?x?xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<16x16x3x3xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>} : (tensor<?x16x?x?xf32>, tensor<16x16x3x3xf32>) -> tensor<?x16x?x?xf32>
  %1 = "sdc.relu"(%0) : (tensor<?x16x?x?xf32>) -> tensor<?x16x?x?xf32>
  %2 = "sdc.conv"(%1, %w) {pads = array<i64: 1, 1, 1, 1>} : (tensor<?x16x?x?xf32>, tensor<16x16x3x3xf32>) -> tensor<?x16x?x?xf32>
  return %2 : tensor<?x16x?x?xf32>
}

// -----

// Layout-agnostic ops carry NHWC through: a concat along channels (the remapped axis), a pooling
// window, a softmax over channels; a mean over the spatial axes leaves [N, C], row-major in
// either layout, so no cast is needed at the exit.
// CHECK-LABEL: func.func @agnostic
// CHECK: "sdc.layout_cast"
// CHECK-NOT: "sdc.layout_cast"
// CHECK: "sdc.concat"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK: "sdc.max_pool"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK: "sdc.softmax"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>
// CHECK: "sdc.reduce_mean"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 1>>
// CHECK-NOT: "sdc.layout_cast"
// CHECK: return
func.func @agnostic(%x: tensor<2x8x16x16xf32>) -> tensor<2x16xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x8x3x3xf32>
  %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<16x16x1x1xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x16x16xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x16x16xf32>
  %1 = "sdc.concat"(%0, %0) {axis = 1 : i64} : (tensor<2x8x16x16xf32>, tensor<2x8x16x16xf32>) -> tensor<2x16x16x16xf32>
  %2 = "sdc.max_pool"(%1) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x16x16x16xf32>) -> tensor<2x16x8x8xf32>
  %3 = "sdc.conv"(%2, %w2) : (tensor<2x16x8x8xf32>, tensor<16x16x1x1xf32>) -> tensor<2x16x8x8xf32>
  %4 = "sdc.softmax"(%3) {axis = 1 : i64} : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %5 = "sdc.reduce_mean"(%4) {axes = array<i64: 2, 3>, keepdims = false} : (tensor<2x16x8x8xf32>) -> tensor<2x16xf32>
  return %5 : tensor<2x16xf32>
}

// -----

// Without convolutions nothing pays for NHWC: everything stays row-major, no casts. Casts that
// undo each other (and any cast already in the input) are gone.
// CHECK-LABEL: func.func @no_reason_to_move
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x3x4x5xf32>)
// CHECK-NOT: "sdc.layout_cast"
// CHECK: %[[E:.*]] = "sdc.exp"(%[[X]]) {sdc.layout = #sdc.layout<array<i64: 0, 1, 2, 3>>}
// CHECK-NEXT: return %[[E]]
func.func @no_reason_to_move(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  %0 = "sdc.layout_cast"(%x) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %1 = "sdc.layout_cast"(%0) {layout = #sdc.layout<array<i64: 0, 1, 2, 3>>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %2 = "sdc.exp"(%1) : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  return %2 : tensor<2x3x4x5xf32>
}

// -----

// Matmul reads a transposed weight as it is: no cast for transpose_rhs, the weight stays row-major.
// CHECK-LABEL: func.func @matmul_transposed
// CHECK-NOT: "sdc.layout_cast"
// CHECK: "sdc.parameter"() {name = "fc", sdc.layout = #sdc.layout<array<i64: 0, 1>>}
// CHECK: "sdc.matmul"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 1>>
func.func @matmul_transposed(%x: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %w = "sdc.parameter"() {name = "fc"} : () -> tensor<32x64xf32>
  %0 = "sdc.matmul"(%x, %w) {transpose_rhs = true} : (tensor<4x64xf32>, tensor<32x64xf32>) -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----

// Requests: the caller passes NHWC and wants NHWC back, so no cast at all.
// CHECK-LABEL: func.func @pinned_signature
// CHECK-NOT: "sdc.layout_cast"
// CHECK: return
func.func @pinned_signature(%x: tensor<1x8x8x8xf32> {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>})
    -> (tensor<1x8x8x8xf32> {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>}) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x8x3x3xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x8x8xf32>
  return %0 : tensor<1x8x8x8xf32>
}

// -----

// A request on an op wins over the table: this convolution runs NCHW, so the weight stays OIHW
// and nothing is cast.
// CHECK-LABEL: func.func @pinned_op
// CHECK-NOT: "sdc.layout_cast"
// CHECK: "sdc.parameter"() {name = "w", sdc.layout = #sdc.layout<array<i64: 0, 1, 2, 3>>}
// CHECK: "sdc.conv"({{.*}}sdc.layout = #sdc.layout<array<i64: 0, 1, 2, 3>>
func.func @pinned_op(%x: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x8x3x3xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>, sdc.layout = #sdc.layout<array<i64: 0, 1, 2, 3>>} : (tensor<1x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x8x8xf32>
  return %0 : tensor<1x8x8x8xf32>
}

// -----

// A weight two consumers read in different layouts is stored twice, once per layout (the NHWC
// convolution reads OHWI, the result is returned row-major).
// CHECK-LABEL: func.func @weight_two_ways
// CHECK-NOT: "sdc.layout_cast"
// CHECK-DAG: "sdc.parameter"() {name = "w", sdc.layout = #sdc.layout<array<i64: 0, 1, 2, 3>>}
// CHECK-DAG: "sdc.parameter"() {name = "w", sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>}
func.func @weight_two_ways(%x: tensor<1x8x3x3xf32> {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>})
    -> (tensor<1x8x1x1xf32>, tensor<8x8x3x3xf32>) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x8x3x3xf32>
  %0 = "sdc.conv"(%x, %w) : (tensor<1x8x3x3xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x1x1xf32>
  %1 = "sdc.neg"(%w) : (tensor<8x8x3x3xf32>) -> tensor<8x8x3x3xf32>
  return %0, %1 : tensor<1x8x1x1xf32>, tensor<8x8x3x3xf32>
}
