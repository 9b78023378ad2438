// sdc-canonicalize: every pattern of sdc/transforms/canonicalize.py, each with a case it must
// leave alone; then the same input with constant folding switched off.
// RUN: sdc-opt %s -p sdc-canonicalize | FileCheck %s
// RUN: sdc-opt %s -p 'sdc-canonicalize{fold=false}' | FileCheck %s --check-prefix=NOFOLD

// CHECK-LABEL: func.func @cast_to_same_type
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
// Without folding the other patterns still run.
// NOFOLD-LABEL: func.func @cast_to_same_type
// NOFOLD-NEXT: return
func.func @cast_to_same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.cast"(%x) {dtype = f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// f16 -> f32 loses nothing, so f16 -> f32 -> i32 is one cast f16 -> i32.
// CHECK-LABEL: func.func @cast_of_lossless_cast
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf16>)
// CHECK-NEXT: %[[C:.*]] = "sdc.cast"(%[[X]]) {dtype = i32} : (tensor<4xf16>) -> tensor<4xi32>
// CHECK-NEXT: return %[[C]]
func.func @cast_of_lossless_cast(%x: tensor<4xf16>) -> tensor<4xi32> {
  %0 = "sdc.cast"(%x) {dtype = f32} : (tensor<4xf16>) -> tensor<4xf32>
  %1 = "sdc.cast"(%0) {dtype = i32} : (tensor<4xf32>) -> tensor<4xi32>
  return %1 : tensor<4xi32>
}

// A lossless cast there and back is no cast at all (the two patterns together).
// CHECK-LABEL: func.func @cast_round_trip
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xi16>)
// CHECK-NEXT: return %[[X]]
func.func @cast_round_trip(%x: tensor<4xi16>) -> tensor<4xi16> {
  %0 = "sdc.cast"(%x) {dtype = i64} : (tensor<4xi16>) -> tensor<4xi64>
  %1 = "sdc.cast"(%0) {dtype = i16} : (tensor<4xi64>) -> tensor<4xi16>
  return %1 : tensor<4xi16>
}

// f32 -> f16 rounds: the chain stays.
// CHECK-LABEL: func.func @cast_of_lossy_cast
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[H:.*]] = "sdc.cast"(%[[X]]) {dtype = f16} : (tensor<4xf32>) -> tensor<4xf16>
// CHECK-NEXT: %[[F:.*]] = "sdc.cast"(%[[H]]) {dtype = f32} : (tensor<4xf16>) -> tensor<4xf32>
// CHECK-NEXT: return %[[F]]
func.func @cast_of_lossy_cast(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.cast"(%x) {dtype = f16} : (tensor<4xf32>) -> tensor<4xf16>
  %1 = "sdc.cast"(%0) {dtype = f32} : (tensor<4xf16>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x6xf32>)
// CHECK-NEXT: %[[R:.*]] = "sdc.reshape"(%[[X]]) {shape = ["B", 3, 2]} : (tensor<?x6xf32>) -> tensor<?x3x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<?x6xf32>) -> tensor<?x3x2xf32> {
  %0 = "sdc.reshape"(%x) {shape = [-1]} : (tensor<?x6xf32>) -> tensor<?xf32>
  %1 = "sdc.reshape"(%0) {shape = ["B", 3, 2]} : (tensor<?xf32>) -> tensor<?x3x2xf32>
  return %1 : tensor<?x3x2xf32>
}

// CHECK-LABEL: func.func @reshape_to_same_static_type
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x6xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_to_same_static_type(%x: tensor<2x6xf32>) -> tensor<2x6xf32> {
  %0 = "sdc.reshape"(%x) {shape = [2, 6]} : (tensor<2x6xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// The pattern trusts static types only: a reshape between equal dynamic types stays.
// CHECK-LABEL: func.func @reshape_to_same_dynamic_type
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x6xf32>)
// CHECK-NEXT: %[[R:.*]] = "sdc.reshape"(%[[X]]) {shape = ["B", 6]} : (tensor<?x6xf32>) -> tensor<?x6xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_to_same_dynamic_type(%x: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %0 = "sdc.reshape"(%x) {shape = ["B", 6]} : (tensor<?x6xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// A channel shuffle: dim 1 split in [2, 3], the halves swapped, joined again. Position j = i_b * 2 + i_a
// reads i_a * 3 + i_b, so the gather's indices are [0, 3, 1, 4, 2, 5] (fold=false keeps the pattern:
// it folds no constant, it makes one).
// CHECK-LABEL: func.func @block_transpose_gather
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x6x5x5xf32>)
// CHECK-NEXT: %[[I:.*]] = "sdc.constant"() {value = dense<[0, 3, 1, 4, 2, 5]> : tensor<6xi64>}
// CHECK-NEXT: %[[G:.*]] = "sdc.gather"(%[[X]], %[[I]]) {axis = 1 : i64} : (tensor<?x6x5x5xf32>, tensor<6xi64>) -> tensor<?x6x5x5xf32>
// CHECK-NEXT: return %[[G]]
// NOFOLD-LABEL: func.func @block_transpose_gather
// NOFOLD: "sdc.gather"
// NOFOLD-NEXT: return
func.func @block_transpose_gather(%x: tensor<?x6x5x5xf32>) -> tensor<?x6x5x5xf32> {
  %0 = "sdc.reshape"(%x) {shape = ["N", 2, 3, 5, 5]} : (tensor<?x6x5x5xf32>) -> tensor<?x2x3x5x5xf32>
  %1 = "sdc.transpose"(%0) {perm = array<i64: 0, 2, 1, 3, 4>} : (tensor<?x2x3x5x5xf32>) -> tensor<?x3x2x5x5xf32>
  %2 = "sdc.reshape"(%1) {shape = ["N", 6, 5, 5]} : (tensor<?x3x2x5x5xf32>) -> tensor<?x6x5x5xf32>
  return %2 : tensor<?x6x5x5xf32>
}

// The transpose swaps a split part with a dim that was not split: a true transpose, which stays.
// CHECK-LABEL: func.func @block_transpose_of_other_dims
// CHECK: "sdc.transpose"
// CHECK-NOT: "sdc.gather"
// CHECK: return
func.func @block_transpose_of_other_dims(%x: tensor<2x6x5xf32>) -> tensor<2x6x5xf32> {
  %0 = "sdc.reshape"(%x) {shape = [2, 2, 3, 5]} : (tensor<2x6x5xf32>) -> tensor<2x2x3x5xf32>
  %1 = "sdc.transpose"(%0) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x3x5xf32>) -> tensor<2x2x5x3xf32>
  %2 = "sdc.reshape"(%1) {shape = [2, 6, 5]} : (tensor<2x2x5x3xf32>) -> tensor<2x6x5xf32>
  return %2 : tensor<2x6x5xf32>
}

// Two dynamic dims besides the split one: the reshapes could trade a factor between them, so it stays.
// CHECK-LABEL: func.func @block_transpose_two_dynamic_dims
// CHECK: "sdc.transpose"
// CHECK-NOT: "sdc.gather"
// CHECK: return
func.func @block_transpose_two_dynamic_dims(%x: tensor<?x6x?xf32>) -> tensor<?x6x?xf32> {
  %0 = "sdc.reshape"(%x) {shape = ["B", 2, 3, "T"]} : (tensor<?x6x?xf32>) -> tensor<?x2x3x?xf32>
  %1 = "sdc.transpose"(%0) {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x2x3x?xf32>) -> tensor<?x3x2x?xf32>
  %2 = "sdc.reshape"(%1) {shape = ["B", 6, "T"]} : (tensor<?x3x2x?xf32>) -> tensor<?x6x?xf32>
  return %2 : tensor<?x6x?xf32>
}

// The split result has a second use: the three ops stay (the gather would not remove them).
// CHECK-LABEL: func.func @block_transpose_shared_split
// CHECK: "sdc.transpose"
// CHECK-NOT: "sdc.gather"
// CHECK: return
func.func @block_transpose_shared_split(%x: tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<2x3x4xf32>) {
  %0 = "sdc.reshape"(%x) {shape = [2, 3, 4]} : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  %1 = "sdc.transpose"(%0) {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %2 = "sdc.reshape"(%1) {shape = [6, 4]} : (tensor<3x2x4xf32>) -> tensor<6x4xf32>
  return %2, %0 : tensor<6x4xf32>, tensor<2x3x4xf32>
}

// perm [1, 0, 2] then [2, 1, 0] is the single perm [2, 0, 1].
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = "sdc.transpose"(%[[X]]) {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[T]]
// NOFOLD-LABEL: func.func @transpose_of_transpose
// NOFOLD-NEXT: "sdc.transpose"(%{{.*}}) {perm = array<i64: 2, 0, 1>}
// NOFOLD-NEXT: return
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = "sdc.transpose"(%x) {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = "sdc.transpose"(%0) {perm = array<i64: 2, 1, 0>} : (tensor<3x2x4xf32>) -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// CHECK-LABEL: func.func @transpose_there_and_back
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_there_and_back(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "sdc.transpose"(%x) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "sdc.transpose"(%0) {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @identity_transpose
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_transpose(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "sdc.transpose"(%x) {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// Ops on constants are evaluated, and the constants they used go away once dead.
// CHECK-LABEL: func.func @fold_binary
// CHECK-NEXT: %[[C:.*]] = "sdc.constant"() {value = dense<[4.000000e+00, 6.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT: return %[[C]]
// NOFOLD-LABEL: func.func @fold_binary
// NOFOLD-NEXT: %[[A:.*]] = "sdc.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
// NOFOLD-NEXT: %[[B:.*]] = "sdc.constant"() {value = dense<[3.000000e+00, 4.000000e+00]> : tensor<2xf32>}
// NOFOLD-NEXT: %[[S:.*]] = "sdc.add"(%[[A]], %[[B]])
// NOFOLD-NEXT: return %[[S]]
func.func @fold_binary() -> tensor<2xf32> {
  %0 = "sdc.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %1 = "sdc.constant"() {value = dense<[3.0, 4.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %2 = "sdc.add"(%0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %2 : tensor<2xf32>
}

// Shape arithmetic of exported graphs folds in a chain: gather -> mul -> cast.
// CHECK-LABEL: func.func @fold_chain
// CHECK-NEXT: %[[C:.*]] = "sdc.constant"() {value = dense<[6, 8]> : tensor<2xi32>} : () -> tensor<2xi32>
// CHECK-NEXT: return %[[C]]
// NOFOLD-LABEL: func.func @fold_chain
// NOFOLD: "sdc.gather"
// NOFOLD: "sdc.mul"
// NOFOLD: "sdc.cast"
func.func @fold_chain() -> tensor<2xi32> {
  %shape = "sdc.constant"() {value = dense<[2, 3, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %idx = "sdc.constant"() {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %two = "sdc.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %0 = "sdc.gather"(%shape, %idx) : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %1 = "sdc.mul"(%0, %two) : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %2 = "sdc.cast"(%1) {dtype = i32} : (tensor<2xi64>) -> tensor<2xi32>
  return %2 : tensor<2xi32>
}

// Every result of a multi-result op becomes its own constant.
// CHECK-LABEL: func.func @fold_split
// CHECK-DAG: %[[A:.*]] = "sdc.constant"() {value = dense<[1, 2]> : tensor<2xi64>}
// CHECK-DAG: %[[B:.*]] = "sdc.constant"() {value = dense<[3, 4]> : tensor<2xi64>}
// CHECK-NOT: "sdc.split"
// CHECK: return %[[A]], %[[B]]
func.func @fold_split() -> (tensor<2xi64>, tensor<2xi64>) {
  %0 = "sdc.constant"() {value = dense<[1, 2, 3, 4]> : tensor<4xi64>} : () -> tensor<4xi64>
  %1:2 = "sdc.split"(%0) {axis = 0 : i64, parts = 2 : i64} : (tensor<4xi64>) -> (tensor<2xi64>, tensor<2xi64>)
  return %1#0, %1#1 : tensor<2xi64>, tensor<2xi64>
}

// Results over the fold limit (4096 elements) stay ops: the IR must not fill up with data.
// CHECK-LABEL: func.func @no_fold_large
// CHECK-NEXT: %[[C:.*]] = "sdc.constant"() {value = dense<1.000000e+00> : tensor<8192xf32>}
// CHECK-NEXT: %[[N:.*]] = "sdc.neg"(%[[C]])
// CHECK-NEXT: return %[[N]]
func.func @no_fold_large() -> tensor<8192xf32> {
  %0 = "sdc.constant"() {value = dense<1.0> : tensor<8192xf32>} : () -> tensor<8192xf32>
  %1 = "sdc.neg"(%0) : (tensor<8192xf32>) -> tensor<8192xf32>
  return %1 : tensor<8192xf32>
}

// Only ops whose operands are all constants fold; parameters are not constants, and
// collectives (not pure) never fold.
// CHECK-LABEL: func.func @no_fold_non_constant
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2xf32>)
// CHECK-NEXT: %[[C:.*]] = "sdc.constant"()
// CHECK-NEXT: %[[A:.*]] = "sdc.add"(%[[X]], %[[C]])
// CHECK-NEXT: %[[P:.*]] = "sdc.parameter"() {name = "w"}
// CHECK-NEXT: %[[N:.*]] = "sdc.neg"(%[[P]])
// CHECK-NEXT: return %[[A]], %[[N]]
func.func @no_fold_non_constant(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = "sdc.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %1 = "sdc.add"(%x, %0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = "sdc.parameter"() {name = "w"} : () -> tensor<2xf32>
  %3 = "sdc.neg"(%2) : (tensor<2xf32>) -> tensor<2xf32>
  return %1, %3 : tensor<2xf32>, tensor<2xf32>
}

// CHECK-LABEL: func.func @no_fold_collective
// CHECK: "sdc.all_reduce"
// NOFOLD-LABEL: func.func @no_fold_collective
// NOFOLD: "sdc.all_reduce"
module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 1>>} {
  func.func @no_fold_collective() -> tensor<2xf32> {
    %0 = "sdc.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %1 = "sdc.all_reduce"(%0) {mesh_axes = ["dp"]} : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}

// -----

// A bmm between reshapes that flatten and restore the same batch dims (torch.export's 4-D matmul) is
// the 4-D matmul; one whose reshapes regroup the batch dims stays.
// CHECK-LABEL: func.func @unflatten_batch_matmul
// CHECK: %[[M:.*]] = "sdc.matmul"(%arg0, %arg1) {transpose_lhs = false, transpose_rhs = true} : (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>) -> tensor<2x3x5x7xf32>
// CHECK-NOT: "sdc.reshape"
// CHECK: return %[[M]]
func.func @unflatten_batch_matmul(%a: tensor<2x3x5x8xf32>, %b: tensor<2x3x7x8xf32>) -> tensor<2x3x5x7xf32> {
  %a3 = "sdc.reshape"(%a) {shape = [6, 5, 8]} : (tensor<2x3x5x8xf32>) -> tensor<6x5x8xf32>
  %b3 = "sdc.reshape"(%b) {shape = [6, 7, 8]} : (tensor<2x3x7x8xf32>) -> tensor<6x7x8xf32>
  %m = "sdc.matmul"(%a3, %b3) {transpose_lhs = false, transpose_rhs = true} : (tensor<6x5x8xf32>, tensor<6x7x8xf32>) -> tensor<6x5x7xf32>
  %r = "sdc.reshape"(%m) {shape = [2, 3, 5, 7]} : (tensor<6x5x7xf32>) -> tensor<2x3x5x7xf32>
  return %r : tensor<2x3x5x7xf32>
}

// -----

// CHECK-LABEL: func.func @regrouped_batch_stays
// CHECK: "sdc.matmul"({{.*}}) {{.*}} -> tensor<6x5x7xf32>
func.func @regrouped_batch_stays(%a: tensor<3x2x5x8xf32>, %b: tensor<3x2x8x7xf32>) -> tensor<2x3x5x7xf32> {
  %a3 = "sdc.reshape"(%a) {shape = [6, 5, 8]} : (tensor<3x2x5x8xf32>) -> tensor<6x5x8xf32>
  %b3 = "sdc.reshape"(%b) {shape = [6, 8, 7]} : (tensor<3x2x8x7xf32>) -> tensor<6x8x7xf32>
  %m = "sdc.matmul"(%a3, %b3) : (tensor<6x5x8xf32>, tensor<6x8x7xf32>) -> tensor<6x5x7xf32>
  %r = "sdc.reshape"(%m) {shape = [2, 3, 5, 7]} : (tensor<6x5x7xf32>) -> tensor<2x3x5x7xf32>
  return %r : tensor<2x3x5x7xf32>
}
