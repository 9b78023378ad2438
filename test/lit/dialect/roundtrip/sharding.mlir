// Round trip of the sharding op and of all_slice (which reads the module's mesh).
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// CHECK: module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>}
module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  // CHECK-LABEL: func.func @sharding
  // CHECK-SAME: (%[[X:[^:]+]]: tensor<8x768xf32>)
  // CHECK-NEXT: %[[S:.*]] = "sdc.shard"(%[[X]]) {sharding = #sdc.sharding<{{\[}}["dp"], ["tp"]], []>} : (tensor<8x768xf32>) -> tensor<8x768xf32>
  // CHECK-NEXT: %[[P:.*]] = "sdc.shard"(%[[S]]) {sharding = #sdc.sharding<{{\[}}[], []], ["dp", "tp"]>} : (tensor<8x768xf32>) -> tensor<8x768xf32>
  // CHECK-NEXT: %[[A:.*]] = "sdc.all_slice"(%[[P]]) {axis = 1 : i64, mesh_axes = ["tp"]} : (tensor<8x768xf32>) -> tensor<8x384xf32>
  // CHECK-NEXT: %[[B:.*]] = "sdc.all_slice"(%[[A]]) {axis = 0 : i64, mesh_axes = ["tp", "dp"]} : (tensor<8x384xf32>) -> tensor<2x384xf32>
  // CHECK-NEXT: return %[[B]]
  func.func @sharding(%x: tensor<8x768xf32>) -> tensor<2x384xf32> {
    %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["dp"], ["tp"]], []>} : (tensor<8x768xf32>) -> tensor<8x768xf32>
    %1 = "sdc.shard"(%0) {sharding = #sdc.sharding<[[], []], ["dp", "tp"]>} : (tensor<8x768xf32>) -> tensor<8x768xf32>
    %2 = "sdc.all_slice"(%1) {axis = 1 : i64, mesh_axes = ["tp"]} : (tensor<8x768xf32>) -> tensor<8x384xf32>
    %3 = "sdc.all_slice"(%2) {axis = 0 : i64, mesh_axes = ["tp", "dp"]} : (tensor<8x384xf32>) -> tensor<2x384xf32>
    return %3 : tensor<2x384xf32>
  }
}
