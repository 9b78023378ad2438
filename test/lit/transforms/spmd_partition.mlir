// sdc-spmd-partition: the per-device program. Local types, weights sliced once per rank (an
// all_slice of a parameter), and a collective exactly where an op needs another sharding than its
// operand has, each with the why, the bytes and the tensor, at the location of the op needing it.
// RUN: sdc-opt %s --split-input-file -p 'sdc-sharding-propagation,sdc-spmd-partition,sdc-verify' | FileCheck %s
// Partitioning a partitioned module changes nothing.
// RUN: sdc-opt %s --split-input-file -p 'sdc-sharding-propagation,sdc-spmd-partition,sdc-spmd-partition,sdc-verify' \
// RUN:   | FileCheck %s

// Megatron MLP on tp=2: one all_reduce, between the row-parallel matmul and its bias.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x16xf32>
// CHECK: %[[W1:.*]] = "sdc.parameter"() {name = "w1"
// CHECK-NEXT: %[[W1L:.*]] = "sdc.all_slice"(%[[W1]]) {axis = 0 : i64, mesh_axes = ["tp"], sdc.bytes = "0"{{.*}} : (tensor<32x16xf32>) -> tensor<16x16xf32>
// CHECK: %[[W2:.*]] = "sdc.parameter"() {name = "w2"
// CHECK-NEXT: %[[W2L:.*]] = "sdc.all_slice"(%[[W2]]) {axis = 1 : i64, mesh_axes = ["tp"]{{.*}} : (tensor<4x32xf32>) -> tensor<4x16xf32>
// CHECK: %[[B2:.*]] = "sdc.parameter"() {name = "b2"
// CHECK-NEXT: %[[H:.*]] = "sdc.matmul"(%[[X]], %[[W1L]]) {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: %[[R:.*]] = "sdc.relu"(%[[H]])
// CHECK-NEXT: %[[P:.*]] = "sdc.matmul"(%[[R]], %[[W2L]]) {sdc.sharding = #sdc.sharding<{{\[}}[], []], ["tp"]>{{.*}} -> tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = "sdc.all_reduce"(%[[P]]) {mesh_axes = ["tp"], reduction = "sum", sdc.bytes = "128", sdc.reason = "'sdc.add' at {{.*}} needs operand #0 whole; it is a partial sum over tp: summed"{{.*}}sdc.tensor = "result of 'sdc.matmul' at {{.*}}, f32[8, 4] per device"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[Y:.*]] = "sdc.add"(%[[S]], %[[B2]])
// CHECK-NEXT: return %[[Y]]
module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @mlp(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
    %w1 = "sdc.parameter"() {name = "w1"} : () -> tensor<32x16xf32>
    %w2 = "sdc.parameter"() {name = "w2"} : () -> tensor<4x32xf32>
    %b2 = "sdc.parameter"() {name = "b2"} : () -> tensor<4xf32>
    %0 = "sdc.matmul"(%x, %w1) {transpose_rhs = true} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
    %2 = "sdc.relu"(%0) : (tensor<8x32xf32>) -> tensor<8x32xf32>
    %3 = "sdc.matmul"(%2, %w2) {transpose_rhs = true} : (tensor<8x32xf32>, tensor<4x32xf32>) -> tensor<8x4xf32>
    %4 = "sdc.add"(%3, %b2) : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    return %4 : tensor<8x4xf32>
  }
}

// -----

// Data parallel with a symbolic batch: no collective; the argument is the local block (its
// sdc.dims stay global), shapes name the global symbol, and a guard asks for an even batch.
// CHECK-LABEL: func.func @data_parallel
// CHECK-SAME: (%{{[^:]+}}: tensor<?x16xf32> {sdc.dims = #sdc.dims<["B", 16]>, sdc.sharding = #sdc.sharding<{{\[}}["dp"], []], []>})
// CHECK-SAME: sdc.guards = [#sdc.guard<"B % 2 == 0", "B is split over mesh axis dp (2 devices) in input 'arg0'; it must be a multiple of 2">]
// CHECK-NOT: "sdc.all_
// CHECK: "sdc.reshape"({{.*}}shape = ["B//2", 4, 4]}
// CHECK-NOT: "sdc.all_
// CHECK: return
module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @data_parallel(%x: tensor<?x16xf32> {sdc.dims = #sdc.dims<["B", 16]>}) -> tensor<?x4x4xf32> {
    %0 = "sdc.exp"(%x) : (tensor<?x16xf32>) -> tensor<?x16xf32>
    %1 = "sdc.reshape"(%0) {shape = ["B", 4, 4]} : (tensor<?x16xf32>) -> tensor<?x4x4xf32>
    return %1 : tensor<?x4x4xf32>
  }
}

// -----

// User annotations: split rows, then columns (one all_to_all), then whole (one all_gather).
// CHECK-LABEL: func.func @transitions
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x12xf32>
// CHECK-NEXT: %[[E:.*]] = "sdc.exp"(%[[X]])
// CHECK-NEXT: %[[T:.*]] = "sdc.all_to_all"(%[[E]]) {concat_axis = 0 : i64, mesh_axes = ["dp"], sdc.bytes = "96", sdc.reason = "'sdc.shard' at {{.*}} asks for [-, dp]; dim 0 is split over dp and dim 1 is wanted split instead: exchanged"{{.*}}split_axis = 1 : i64} : (tensor<4x12xf32>) -> tensor<8x6xf32>
// CHECK-NEXT: %[[N:.*]] = "sdc.neg"(%[[T]])
// CHECK-NEXT: %[[G:.*]] = "sdc.all_gather"(%[[N]]) {axis = 1 : i64, mesh_axes = ["dp"], sdc.bytes = "192"{{.*}} : (tensor<8x6xf32>) -> tensor<8x12xf32>
// CHECK-NEXT: return %[[G]]
module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @transitions(%x: tensor<8x12xf32>) -> tensor<8x12xf32> {
    %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["dp"], []], []>} : (tensor<8x12xf32>) -> tensor<8x12xf32>
    %1 = "sdc.exp"(%0) : (tensor<8x12xf32>) -> tensor<8x12xf32>
    %2 = "sdc.shard"(%1) {sharding = #sdc.sharding<[[], ["dp"]], []>} : (tensor<8x12xf32>) -> tensor<8x12xf32>
    %3 = "sdc.neg"(%2) : (tensor<8x12xf32>) -> tensor<8x12xf32>
    %4 = "sdc.shard"(%3) {sharding = #sdc.sharding<[[], []], []>} : (tensor<8x12xf32>) -> tensor<8x12xf32>
    return %4 : tensor<8x12xf32>
  }
}

// -----

// A partial sum wanted split by rows: summed and scattered in one reduce_scatter.
// CHECK-LABEL: func.func @row_parallel_scatter
// CHECK: %[[P:.*]] = "sdc.matmul"({{.*}}sdc.sharding = #sdc.sharding<{{\[}}[], []], ["tp"]>
// CHECK-NEXT: %[[RS:.*]] = "sdc.reduce_scatter"(%[[P]]) {axis = 0 : i64, mesh_axes = ["tp"], reduction = "sum"{{.*}} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[RS]]
module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @row_parallel_scatter(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
    %w = "sdc.parameter"() {name = "w"} : () -> tensor<16x4xf32>
    %a = "sdc.shard"(%x) {sharding = #sdc.sharding<[[], ["tp"]], []>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %0 = "sdc.matmul"(%a, %w) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %1 = "sdc.shard"(%0) {sharding = #sdc.sharding<[["tp"], []], []>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
}

// -----

// An embedding split by vocabulary: each device gathers the ids in its block of rows (the offset of
// its block is an all_slice of a constant, done when the plan is built) and zeroes the rest; one
// all_reduce adds them up.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<4x5xi64>
// CHECK: %[[T:.*]] = "sdc.all_slice"(%{{.*}}) {axis = 0 : i64{{.*}} : (tensor<12x8xf32>) -> tensor<6x8xf32>
// CHECK: %[[OFFSETS:.*]] = "sdc.constant"() {value = dense<[0, 6]> : tensor<2xi64>}
// CHECK-NEXT: %[[OFFSET:.*]] = "sdc.all_slice"(%[[OFFSETS]]) {axis = 0 : i64, mesh_axes = ["tp"]} : (tensor<2xi64>) -> tensor<1xi64>
// CHECK: %[[LOCAL:.*]] = "sdc.sub"(%{{.*}}, %[[OFFSET]])
// CHECK: %[[IN:.*]] = "sdc.and"
// CHECK: %[[G:.*]] = "sdc.gather"(%[[T]], %{{.*}}) {axis = 0 : i64} : (tensor<6x8xf32>, tensor<4x5xi64>) -> tensor<4x5x8xf32>
// CHECK: %[[M:.*]] = "sdc.where"(%{{.*}}, %[[G]], %{{.*}}) {sdc.sharding = #sdc.sharding<{{\[}}[], [], []], ["tp"]>}
// CHECK-NEXT: "sdc.all_reduce"(%[[M]]) {mesh_axes = ["tp"], reduction = "sum"
module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @embedding(%ids: tensor<4x5xi64>) -> tensor<4x5x8xf32> {
    %t = "sdc.parameter"() {name = "table"} : () -> tensor<12x8xf32>
    %0 = "sdc.gather"(%t, %ids) {axis = 0 : i64} : (tensor<12x8xf32>, tensor<4x5xi64>) -> tensor<4x5x8xf32>
    %1 = "sdc.tanh"(%0) : (tensor<4x5x8xf32>) -> tensor<4x5x8xf32>
    return %1 : tensor<4x5x8xf32>
  }
}

// -----

// Without a mesh, sdc.shard ops go away and nothing else changes.
// CHECK-LABEL: func.func @no_mesh
// CHECK-NEXT: "sdc.exp"(%arg0)
// CHECK-NOT: sdc.shard
func.func @no_mesh(%x: tensor<8x3xf32>) -> tensor<8x3xf32> {
  %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["dp"], []], []>} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  %1 = "sdc.exp"(%0) : (tensor<8x3xf32>) -> tensor<8x3xf32>
  return %1 : tensor<8x3xf32>
}

// -----

// Data parallel: a convolution's weight gradient sums over the batch, so each device's is a
// partial sum over dp, all-reduced once.
// CHECK-LABEL: func.func @dp_weight_grad
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x3x8x8xf32> {{.*}}, %[[G:[^:]+]]: tensor<4x4x4x4xf32>
// CHECK: %[[DW:.*]] = "sdc.conv_weight_grad"(%[[X]], %[[G]]) {{.*}} : (tensor<4x3x8x8xf32>, tensor<4x4x4x4xf32>) -> tensor<4x3x3x3xf32>
// CHECK-NEXT: %[[S:.*]] = "sdc.all_reduce"(%[[DW]]) {mesh_axes = ["dp"], reduction = "sum"
// CHECK-NEXT: return %[[S]]
module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @dp_weight_grad(%x: tensor<8x3x8x8xf32>, %g: tensor<8x4x4x4xf32>) -> tensor<4x3x3x3xf32> {
    %0 = "sdc.conv_weight_grad"(%x, %g) {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<8x3x8x8xf32>, tensor<8x4x4x4xf32>) -> tensor<4x3x3x3xf32>
    return %0 : tensor<4x3x3x3xf32>
  }
}
