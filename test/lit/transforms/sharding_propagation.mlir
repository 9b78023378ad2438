// sdc-sharding-propagation: user annotations first, then the defaults (data parallel on dp, Megatron
// tensor parallel on tp), spread forward and backward; every op gets its result's `sdc.sharding`.
// RUN: sdc-opt %s --split-input-file -p sdc-sharding-propagation | FileCheck %s
// Running it again changes nothing: what it wrote reads back as annotations that agree.
// RUN: sdc-opt %s --split-input-file -p sdc-sharding-propagation,sdc-sharding-propagation | FileCheck %s

// An MLP on dp=2,tp=2: the batch over dp; fc1 column-parallel and fc2 row-parallel over tp, so fc2's
// result is a partial sum over tp; the bias add after it needs it whole.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: sdc.sharding = #sdc.sharding<{{\[}}["dp"], []], []>
// CHECK-SAME: sdc.sharding_notes = ["input 'arg0': dim 0 split over dp (data parallel)", "'sdc.matmul' at {{.*}}: column-parallel over tp, paired with row-parallel 'sdc.matmul' at {{.*}}"]
// CHECK: "sdc.parameter"() {name = "w1", sdc.sharding = #sdc.sharding<{{\[}}["tp"], []], []>}
// CHECK: "sdc.parameter"() {name = "b1", sdc.sharding = #sdc.sharding<{{\[}}["tp"]], []>}
// CHECK: "sdc.parameter"() {name = "w2", sdc.sharding = #sdc.sharding<{{\[}}[], ["tp"]], []>}
// CHECK: "sdc.parameter"() {name = "b2", sdc.sharding = #sdc.sharding<{{\[}}[]], []>}
// CHECK: "sdc.matmul"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}["dp"], ["tp"]], []>
// CHECK: "sdc.add"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}["dp"], ["tp"]], []>
// CHECK: "sdc.relu"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}["dp"], ["tp"]], []>
// CHECK: "sdc.matmul"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}["dp"], []], ["tp"]>
// CHECK: "sdc.add"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}["dp"], []], []>
module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @mlp(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
    %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<32x16xf32>
    %b1 = "sdc.parameter"() {name = "b1"} : () -> tensor<32xf32>
    %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<4x32xf32>
    %b2 = "sdc.parameter"() {name = "b2"} : () -> tensor<4xf32>
    %0 = "sdc.matmul"(%x, %w1) {transpose_rhs = true} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
    %1 = "sdc.add"(%0, %b1) : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    %2 = "sdc.relu"(%1) : (tensor<8x32xf32>) -> tensor<8x32xf32>
    %3 = "sdc.matmul"(%2, %w2) {transpose_rhs = true} : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
    %4 = "sdc.add"(%3, %b2) : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    return %4 : tensor<8x4xf32>
  }
}

// -----

// Attention by heads: q/k/v column-parallel, the heads dim (the major part of 64 = 4 x 16) split
// over tp through reshape, transpose, both batch matmuls and the softmax; the output projection is
// row-parallel.
// CHECK-LABEL: func.func @attention
// CHECK: "sdc.reshape"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], [], ["tp"], []], []>
// CHECK: "sdc.transpose"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], ["tp"], [], []], []>
// CHECK: "sdc.softmax"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], ["tp"], [], []], []>
// CHECK: "sdc.matmul"(%{{.*}}, %[[WO:.*]]) {{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], [], []], ["tp"]>
module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @attention(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
    %wq = "sdc.parameter"() {name = "wq"} : () -> tensor<64x64xf32>
    %wk = "sdc.parameter"() {name = "wk"} : () -> tensor<64x64xf32>
    %wv = "sdc.parameter"() {name = "wv"} : () -> tensor<64x64xf32>
    %wo = "sdc.parameter"() {name = "wo"} : () -> tensor<64x64xf32>
    %q = "sdc.matmul"(%x, %wq) : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
    %k = "sdc.matmul"(%x, %wk) : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
    %v = "sdc.matmul"(%x, %wv) : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
    %q4 = "sdc.reshape"(%q) {shape = [2, 8, 4, 16]} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
    %k4 = "sdc.reshape"(%k) {shape = [2, 8, 4, 16]} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
    %v4 = "sdc.reshape"(%v) {shape = [2, 8, 4, 16]} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
    %qt = "sdc.transpose"(%q4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
    %kt = "sdc.transpose"(%k4) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
    %vt = "sdc.transpose"(%v4) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
    %s = "sdc.matmul"(%qt, %kt) : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
    %p = "sdc.softmax"(%s) {axis = -1 : i64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    %a = "sdc.matmul"(%p, %vt) : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    %at = "sdc.transpose"(%a) {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
    %a3 = "sdc.reshape"(%at) {shape = [2, 8, 64]} : (tensor<2x8x4x16xf32>) -> tensor<2x8x64xf32>
    %o = "sdc.matmul"(%a3, %wo) : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
    return %o : tensor<2x8x64xf32>
  }
}

// -----

// A user annotation beats the defaults: the batch is split over tp here, so data parallel on dp
// splits nothing else, and the first matmul cannot split its columns over tp any more.
// CHECK-LABEL: func.func @user_first
// CHECK: "sdc.matmul"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}["tp"], []], []>
// CHECK: "sdc.relu"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}["tp"], []], []>
module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @user_first(%x: tensor<8x16xf32> {sdc.sharding = #sdc.sharding<[["tp"], []], []>}) -> tensor<8x16xf32> {
    %w = "sdc.parameter"() {name = "w"} : () -> tensor<16x16xf32>
    %0 = "sdc.matmul"(%x, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %1 = "sdc.relu"(%0) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}

// -----

// An embedding table split by vocabulary: the gather's result is a partial sum over tp.
// CHECK-LABEL: func.func @embedding
// CHECK: "sdc.parameter"() {name = "table", sdc.sharding = #sdc.sharding<{{\[}}["tp"], []], []>}
// CHECK: "sdc.gather"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], [], []], ["tp"]>
// CHECK: "sdc.tanh"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], [], []], []>
module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @embedding(%ids: tensor<4x5xi64>) -> tensor<4x5x8xf32> {
    %t = "sdc.parameter"() {name = "table"} : () -> tensor<12x8xf32>
    %0 = "sdc.gather"(%t, %ids) {axis = 0 : i64} : (tensor<12x8xf32>, tensor<4x5xi64>) -> tensor<4x5x8xf32>
    %1 = "sdc.tanh"(%0) : (tensor<4x5x8xf32>) -> tensor<4x5x8xf32>
    return %1 : tensor<4x5x8xf32>
  }
}

// -----

// A dim the mesh axis does not divide stays whole, and so does everything it reaches.
// CHECK-LABEL: func.func @indivisible
// CHECK: "sdc.exp"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], []], []>
module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @indivisible(%x: tensor<7x3xf32>) -> tensor<7x3xf32> {
    %0 = "sdc.exp"(%x) : (tensor<7x3xf32>) -> tensor<7x3xf32>
    return %0 : tensor<7x3xf32>
  }
}

// -----

// Without a mesh the pass does nothing.
// CHECK-LABEL: func.func @no_mesh
// CHECK-NOT: sdc.sharding
func.func @no_mesh(%x: tensor<8x3xf32>) -> tensor<8x3xf32> {
  %0 = "sdc.exp"(%x) : (tensor<8x3xf32>) -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

// A fused q/k/v projection split right after is written as one projection per part (each with its
// block of the weight's columns and of the bias), so each is column-parallel and the heads split.
// CHECK-LABEL: func.func @fused_qkv
// CHECK: %[[W:.*]] = "sdc.parameter"() {name = "wqkv"
// CHECK: %[[W0:.*]] = "sdc.slice"(%[[W]]) {axes = array<i64: 1>, ends = array<i64: 8>, {{.*}}starts = array<i64: 0>{{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: "sdc.matmul"(%{{.*}}, %[[W0]]) {{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], ["tp"]], []>
// CHECK: "sdc.slice"(%{{.*}}) {axes = array<i64: 0>, ends = array<i64: 8>
// CHECK: %[[W1:.*]] = "sdc.slice"(%[[W]]) {axes = array<i64: 1>, ends = array<i64: 16>, {{.*}}starts = array<i64: 8>
// CHECK: %[[W2:.*]] = "sdc.slice"(%[[W]]) {axes = array<i64: 1>, ends = array<i64: 24>, {{.*}}starts = array<i64: 16>
// CHECK-NOT: "sdc.split"
// CHECK: "sdc.matmul"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], []], ["tp"]>
module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @fused_qkv(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %w = "sdc.parameter"() {name = "wqkv"} : () -> tensor<8x24xf32>
    %b = "sdc.constant"() {value = dense<0.5> : tensor<24xf32>} : () -> tensor<24xf32>
    %wo = "sdc.parameter"() {name = "wo"} : () -> tensor<8x8xf32>
    %0 = "sdc.matmul"(%x, %w) : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
    %1 = "sdc.add"(%b, %0) : (tensor<24xf32>, tensor<4x24xf32>) -> tensor<4x24xf32>
    %q, %k, %v = "sdc.split"(%1) {axis = 1 : i64, parts = 3 : i64} : (tensor<4x24xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
    %2 = "sdc.mul"(%q, %k) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = "sdc.mul"(%2, %v) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %4 = "sdc.matmul"(%3, %wo) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    return %4 : tensor<4x8xf32>
  }
}
