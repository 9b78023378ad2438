// sdc-fuse: one sdc.fusion region per kernel group; what joins a group and what never does.
// RUN: sdc-opt %s --split-input-file -p 'sdc-fuse{target=cuda},sdc-verify' | FileCheck %s
// The regions print in generic form and read back the same (sdc.fusion and sdc.yield round-trip).
// RUN: sdc-opt %s --split-input-file -p 'sdc-fuse{target=cuda}' | sdc-opt --split-input-file | FileCheck %s

// An elementwise chain is one group, its last value its only result.
// CHECK-LABEL: func.func @elementwise_chain
// CHECK-NEXT: %[[G:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.mul"
// CHECK-NEXT: "sdc.exp"
// CHECK-NEXT: "sdc.add"
// CHECK-NEXT: %[[T:.*]] = "sdc.tanh"
// CHECK-NEXT: "sdc.yield"(%[[T]])
// CHECK-NEXT: }) {kind = "elementwise"} : () -> tensor<8x128xf32>
// CHECK-NEXT: return %[[G]]
func.func @elementwise_chain(%x: tensor<8x128xf32>, %y: tensor<8x128xf32>) -> tensor<8x128xf32> {
  %0 = "sdc.mul"(%x, %y) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
  %1 = "sdc.exp"(%0) : (tensor<8x128xf32>) -> tensor<8x128xf32>
  %2 = "sdc.add"(%1, %x) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
  %3 = "sdc.tanh"(%2) : (tensor<8x128xf32>) -> tensor<8x128xf32>
  return %3 : tensor<8x128xf32>
}

// -----

// A softmax written out (max, subtract, exp, sum, divide) is one group around its reductions.
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT: %[[G:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.reduce_max"
// CHECK-NEXT: "sdc.sub"
// CHECK-NEXT: "sdc.exp"
// CHECK-NEXT: "sdc.reduce_sum"
// CHECK-NEXT: %[[D:.*]] = "sdc.div"
// CHECK-NEXT: "sdc.yield"(%[[D]])
// CHECK-NEXT: }) {kind = "reduction"}
// CHECK-NEXT: return %[[G]]
func.func @softmax(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
  %0 = "sdc.reduce_max"(%x) {axes = array<i64: 1>, keepdims = true} : (tensor<8x128xf32>) -> tensor<8x1xf32>
  %1 = "sdc.sub"(%x, %0) : (tensor<8x128xf32>, tensor<8x1xf32>) -> tensor<8x128xf32>
  %2 = "sdc.exp"(%1) : (tensor<8x128xf32>) -> tensor<8x128xf32>
  %3 = "sdc.reduce_sum"(%2) {axes = array<i64: 1>, keepdims = true} : (tensor<8x128xf32>) -> tensor<8x1xf32>
  %4 = "sdc.div"(%2, %3) : (tensor<8x128xf32>, tensor<8x1xf32>) -> tensor<8x128xf32>
  return %4 : tensor<8x128xf32>
}

// -----

// So is a layer norm: two reductions over the same rows, their prologue and epilogue, the scale
// and shift (weights read from outside the group).
// CHECK-LABEL: func.func @layernorm
// CHECK-COUNT-3: "sdc.{{parameter|constant}}"
// CHECK-NEXT: %[[G:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.reduce_mean"
// CHECK-NEXT: "sdc.sub"
// CHECK-NEXT: "sdc.mul"
// CHECK-NEXT: "sdc.reduce_mean"
// CHECK-NEXT: "sdc.add"
// CHECK-NEXT: "sdc.rsqrt"
// CHECK-NEXT: "sdc.mul"
// CHECK-NEXT: "sdc.mul"
// CHECK-NEXT: %[[O:.*]] = "sdc.add"
// CHECK-NEXT: "sdc.yield"(%[[O]])
// CHECK-NEXT: }) {kind = "reduction"}
// CHECK-NEXT: return %[[G]]
func.func @layernorm(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
  %g = "sdc.parameter"() {name = "ln.scale"} : () -> tensor<128xf32>
  %b = "sdc.parameter"() {name = "ln.bias"} : () -> tensor<128xf32>
  %eps = "sdc.constant"() {value = dense<1.0e-05> : tensor<f32>} : () -> tensor<f32>
  %0 = "sdc.reduce_mean"(%x) {axes = array<i64: 1>, keepdims = true} : (tensor<8x128xf32>) -> tensor<8x1xf32>
  %1 = "sdc.sub"(%x, %0) : (tensor<8x128xf32>, tensor<8x1xf32>) -> tensor<8x128xf32>
  %2 = "sdc.mul"(%1, %1) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
  %3 = "sdc.reduce_mean"(%2) {axes = array<i64: 1>, keepdims = true} : (tensor<8x128xf32>) -> tensor<8x1xf32>
  %4 = "sdc.add"(%3, %eps) : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %5 = "sdc.rsqrt"(%4) : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %6 = "sdc.mul"(%1, %5) : (tensor<8x128xf32>, tensor<8x1xf32>) -> tensor<8x128xf32>
  %7 = "sdc.mul"(%6, %g) : (tensor<8x128xf32>, tensor<128xf32>) -> tensor<8x128xf32>
  %8 = "sdc.add"(%7, %b) : (tensor<8x128xf32>, tensor<128xf32>) -> tensor<8x128xf32>
  return %8 : tensor<8x128xf32>
}

// -----

// A matmul with its epilogue: bias and gelu.
// CHECK-LABEL: func.func @matmul_bias_gelu
// CHECK: %[[G:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.matmul"
// CHECK-NEXT: "sdc.add"
// CHECK-NEXT: %[[O:.*]] = "sdc.gelu"
// CHECK-NEXT: "sdc.yield"(%[[O]])
// CHECK-NEXT: }) {kind = "contraction"}
// CHECK-NEXT: return %[[G]]
func.func @matmul_bias_gelu(%x: tensor<8x64xf32>) -> tensor<8x256xf32> {
  %w = "sdc.parameter"() {name = "fc.weight"} : () -> tensor<256x64xf32>
  %b = "sdc.parameter"() {name = "fc.bias"} : () -> tensor<256xf32>
  %0 = "sdc.matmul"(%x, %w) {transpose_rhs = true} : (tensor<8x64xf32>, tensor<256x64xf32>) -> tensor<8x256xf32>
  %1 = "sdc.add"(%0, %b) : (tensor<8x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
  %2 = "sdc.gelu"(%1) : (tensor<8x256xf32>) -> tensor<8x256xf32>
  return %2 : tensor<8x256xf32>
}

// -----

// A collective is a boundary: it joins no group, and no group holds ops on both sides of it.
// CHECK-LABEL: func.func @collective
// CHECK-NEXT: %[[A:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"
// CHECK-NEXT: "sdc.neg"
// CHECK-NEXT: "sdc.yield"
// CHECK-NEXT: })
// CHECK-NEXT: %[[R:.*]] = "sdc.all_reduce"(%[[A]])
// CHECK-NEXT: %[[B:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"(%[[R]])
// CHECK-NEXT: "sdc.add"(%{{.*}}, %[[A]])
module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @collective(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
    %0 = "sdc.exp"(%x) : (tensor<8x128xf32>) -> tensor<8x128xf32>
    %1 = "sdc.neg"(%0) : (tensor<8x128xf32>) -> tensor<8x128xf32>
    %2 = "sdc.all_reduce"(%1) {mesh_axes = ["dp"]} : (tensor<8x128xf32>) -> tensor<8x128xf32>
    %3 = "sdc.exp"(%2) : (tensor<8x128xf32>) -> tensor<8x128xf32>
    %4 = "sdc.add"(%3, %1) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
    return %4 : tensor<8x128xf32>
  }
}

// -----

// Ops of different pipeline stages (or devices, or ranks) never share a group.
// CHECK-LABEL: func.func @stages
// CHECK-NEXT: "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"({{.*}}sdc.stage = 0
// CHECK-NEXT: "sdc.neg"({{.*}}sdc.stage = 0
// CHECK-NEXT: "sdc.yield"
// CHECK-NEXT: })
// CHECK-NEXT: "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"({{.*}}sdc.stage = 1
// CHECK-NEXT: "sdc.neg"({{.*}}sdc.stage = 1
func.func @stages(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
  %0 = "sdc.exp"(%x) {sdc.stage = 0 : i64} : (tensor<8x128xf32>) -> tensor<8x128xf32>
  %1 = "sdc.neg"(%0) {sdc.stage = 0 : i64} : (tensor<8x128xf32>) -> tensor<8x128xf32>
  %2 = "sdc.exp"(%1) {sdc.stage = 1 : i64} : (tensor<8x128xf32>) -> tensor<8x128xf32>
  %3 = "sdc.neg"(%2) {sdc.stage = 1 : i64} : (tensor<8x128xf32>) -> tensor<8x128xf32>
  return %3 : tensor<8x128xf32>
}

// -----

// Ops whose results lie in different layouts never share a group.
// CHECK-LABEL: func.func @layouts
// CHECK-NEXT: "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"({{.*}}array<i64: 0, 2, 3, 1>
// CHECK-NEXT: "sdc.neg"({{.*}}array<i64: 0, 2, 3, 1>
// CHECK-NEXT: "sdc.yield"
// CHECK-NEXT: })
// CHECK-NEXT: "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"({{.*}}array<i64: 0, 1, 2, 3>
// CHECK-NEXT: "sdc.neg"({{.*}}array<i64: 0, 1, 2, 3>
func.func @layouts(%x: tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %0 = "sdc.exp"(%x) {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %1 = "sdc.neg"(%0) {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %2 = "sdc.exp"(%1) {sdc.layout = #sdc.layout<array<i64: 0, 1, 2, 3>>} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %3 = "sdc.neg"(%2) {sdc.layout = #sdc.layout<array<i64: 0, 1, 2, 3>>} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  return %3 : tensor<2x8x4x4xf32>
}

// -----

// Recomputation: the exp feeds a reduction and a matmul's epilogue. Storing it costs a write and a
// read of 4 KiB; computing it again in the matmul's group costs 1024 exps: it is copied there.
// CHECK-LABEL: func.func @recompute
// CHECK: %[[S:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"(%arg0)
// CHECK-NEXT: %[[SUM:.*]] = "sdc.reduce_sum"
// CHECK-NEXT: "sdc.yield"(%[[SUM]]) : (tensor<8x1xf32>) -> ()
// CHECK: %[[R:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: %[[E:.*]] = "sdc.exp"(%arg0)
// CHECK-NEXT: %[[M:.*]] = "sdc.matmul"
// CHECK-NEXT: %[[O:.*]] = "sdc.add"(%[[M]], %[[E]])
// CHECK-NEXT: "sdc.yield"(%[[O]])
// CHECK: return %[[S]], %[[R]]
func.func @recompute(%x: tensor<8x128xf32>, %a: tensor<8x64xf32>) -> (tensor<8x1xf32>, tensor<8x128xf32>) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<64x128xf32>
  %e = "sdc.exp"(%x) : (tensor<8x128xf32>) -> tensor<8x128xf32>
  %s = "sdc.reduce_sum"(%e) {axes = array<i64: 1>, keepdims = true} : (tensor<8x128xf32>) -> tensor<8x1xf32>
  %m = "sdc.matmul"(%a, %w) : (tensor<8x64xf32>, tensor<64x128xf32>) -> tensor<8x128xf32>
  %r = "sdc.add"(%m, %e) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
  return %s, %r : tensor<8x1xf32>, tensor<8x128xf32>
}

// -----

// No recomputation where it saves nothing: computing the sum again would read both its operands
// instead of the one result, so the sum is stored once and read by the matmul's group.
// CHECK-LABEL: func.func @no_recompute
// CHECK: %[[A:.*]]:2 = "sdc.fusion"() ({
// CHECK-NEXT: %[[E:.*]] = "sdc.add"(%arg0, %arg1)
// CHECK-NEXT: %[[F:.*]] = "sdc.exp"(%[[E]])
// CHECK-NEXT: "sdc.yield"(%[[E]], %[[F]])
// CHECK: "sdc.fusion"() ({
// CHECK-NEXT: %[[M:.*]] = "sdc.matmul"
// CHECK-NEXT: "sdc.add"(%[[M]], %[[A]]#0)
// CHECK-NEXT: "sdc.yield"
func.func @no_recompute(%x: tensor<8x128xf32>, %y: tensor<8x128xf32>, %a: tensor<8x64xf32>) -> (tensor<8x128xf32>, tensor<8x128xf32>) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<64x128xf32>
  %e = "sdc.add"(%x, %y) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
  %f = "sdc.exp"(%e) : (tensor<8x128xf32>) -> tensor<8x128xf32>
  %m = "sdc.matmul"(%a, %w) : (tensor<8x64xf32>, tensor<64x128xf32>) -> tensor<8x128xf32>
  %r = "sdc.add"(%m, %e) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32>
  return %f, %r : tensor<8x128xf32>, tensor<8x128xf32>
}

// -----

// After sdc-layout-constraints: the entry cast folds into the group of the convolution that reads
// it (the kernel reads NCHW and computes NHWC), the exit cast into the group that produces its
// operand (the kernel writes NCHW); convolution, batch norm and relu are one group.
// CHECK-LABEL: func.func @conv_block_with_casts
// CHECK: %[[A:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: %[[IN:.*]] = "sdc.layout_cast"(%arg0)
// CHECK-NEXT: "sdc.conv"(%[[IN]]
// CHECK-NEXT: "sdc.batch_norm"
// CHECK-NEXT: %[[R:.*]] = "sdc.relu"
// CHECK-NEXT: "sdc.yield"(%[[R]])
// CHECK-NEXT: }) {kind = "convolution"}
// CHECK-NEXT: %[[B:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.conv"(%[[A]]
// CHECK-NEXT: "sdc.relu"
// CHECK-NEXT: %[[OUT:.*]] = "sdc.layout_cast"
// CHECK-NEXT: "sdc.yield"(%[[OUT]])
// CHECK-NEXT: }) {kind = "convolution"}
// CHECK-NEXT: return %[[B]]
func.func @conv_block_with_casts(%x: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> {
  %w = "sdc.parameter"() {name = "w", sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : () -> tensor<16x16x3x3xf32>
  %s = "sdc.parameter"() {name = "s"} : () -> tensor<16xf32>
  %0 = "sdc.layout_cast"(%x) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %1 = "sdc.conv"(%0, %w) {pads = array<i64: 1, 1, 1, 1>, sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x8x8xf32>
  %2 = "sdc.batch_norm"(%1, %s, %s, %s, %s) {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<1x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
  %3 = "sdc.relu"(%2) {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %4 = "sdc.conv"(%3, %w) {pads = array<i64: 1, 1, 1, 1>, sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x8x8xf32>
  %5 = "sdc.relu"(%4) {sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %6 = "sdc.layout_cast"(%5) {layout = #sdc.layout<array<i64: 0, 1, 2, 3>>} : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  return %6 : tensor<1x16x8x8xf32>
}

// -----

// Ops the fusion cannot generate code for (shape ops, gathers, ...) stay on their own, and a
// second run changes nothing: an existing group is left as it is.
// CHECK-LABEL: func.func @opaque_and_rerun
// CHECK-NEXT: %[[G:.*]] = "sdc.fusion"() ({
// CHECK-NEXT: "sdc.exp"
// CHECK-NEXT: "sdc.neg"
// CHECK-NEXT: "sdc.yield"
// CHECK-NEXT: })
// CHECK-NEXT: %[[R:.*]] = "sdc.reshape"(%[[G]])
// CHECK-NEXT: %[[T:.*]] = "sdc.tanh"(%[[R]])
// CHECK-NEXT: return %[[T]]
func.func @opaque_and_rerun(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %0 = "sdc.fusion"() ({
    %1 = "sdc.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = "sdc.neg"(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "sdc.yield"(%2) : (tensor<4x8xf32>) -> ()
  }) {kind = "elementwise"} : () -> tensor<4x8xf32>
  %3 = "sdc.reshape"(%0) {shape = [32]} : (tensor<4x8xf32>) -> tensor<32xf32>
  %4 = "sdc.tanh"(%3) : (tensor<32xf32>) -> tensor<32xf32>
  return %4 : tensor<32xf32>
}
