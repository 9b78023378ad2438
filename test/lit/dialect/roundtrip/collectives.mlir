// Round trip of the collectives. They read the device mesh from the enclosing module's
// `sdc.mesh` attribute, which survives the round trip too.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// CHECK: module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>}
module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  // CHECK-LABEL: func.func @collectives
  // CHECK-SAME: (%[[X:[^:]+]]: tensor<?x768xf32>, %[[Y:[^:]+]]: tensor<8x4xf32>)
  // CHECK-NEXT: %[[AR:.*]] = "sdc.all_reduce"(%[[X]]) {mesh_axes = ["tp"], reduction = "sum"} : (tensor<?x768xf32>) -> tensor<?x768xf32>
  // CHECK-NEXT: %[[AR2:.*]] = "sdc.all_reduce"(%[[AR]]) {mesh_axes = ["dp", "tp"], reduction = "max"} : (tensor<?x768xf32>) -> tensor<?x768xf32>
  // CHECK-NEXT: %[[AR3:.*]] = "sdc.all_reduce"(%[[AR2]]) {mesh_axes = ["dp"]} : (tensor<?x768xf32>) -> tensor<?x768xf32>
  // CHECK-NEXT: %[[AG:.*]] = "sdc.all_gather"(%[[Y]]) {axis = 0 : i64, mesh_axes = ["dp"]} : (tensor<8x4xf32>) -> tensor<16x4xf32>
  // CHECK-NEXT: %[[AG4:.*]] = "sdc.all_gather"(%[[Y]]) {axis = -1 : i64, mesh_axes = ["dp", "tp"]} : (tensor<8x4xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %[[RS:.*]] = "sdc.reduce_scatter"(%[[AG]]) {axis = 0 : i64, mesh_axes = ["tp"], reduction = "avg"} : (tensor<16x4xf32>) -> tensor<8x4xf32>
  // CHECK-NEXT: %[[A2A:.*]] = "sdc.all_to_all"(%[[RS]]) {concat_axis = 1 : i64, mesh_axes = ["tp"], split_axis = 0 : i64} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[BC:.*]] = "sdc.broadcast_from"(%[[A2A]]) {mesh_axes = ["dp"], root = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: "sdc.send"(%[[BC]]) {mesh_axes = ["dp"], peer = 1 : i64} : (tensor<4x8xf32>) -> ()
  // CHECK-NEXT: %[[RECV:.*]] = "sdc.recv"() {mesh_axes = ["dp"], peer = 1 : i64} : () -> tensor<4x8xf32>
  // CHECK-NEXT: "sdc.send"(%[[RECV]]) {mesh_axes = ["tp"]} : (tensor<4x8xf32>) -> ()
  // CHECK-NEXT: %[[RECV2:.*]] = "sdc.recv"() {mesh_axes = ["tp"]} : () -> tensor<?x8xf32>
  // CHECK-NEXT: return %[[AR3]], %[[AG4]], %[[RECV2]]
  func.func @collectives(%x: tensor<?x768xf32>, %y: tensor<8x4xf32>) -> (tensor<?x768xf32>, tensor<8x16xf32>, tensor<?x8xf32>) {
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["tp"], reduction = "sum"} : (tensor<?x768xf32>) -> tensor<?x768xf32>
    %1 = "sdc.all_reduce"(%0) {mesh_axes = ["dp", "tp"], reduction = "max"} : (tensor<?x768xf32>) -> tensor<?x768xf32>
    %2 = "sdc.all_reduce"(%1) {mesh_axes = ["dp"]} : (tensor<?x768xf32>) -> tensor<?x768xf32>
    %3 = "sdc.all_gather"(%y) {axis = 0 : i64, mesh_axes = ["dp"]} : (tensor<8x4xf32>) -> tensor<16x4xf32>
    %4 = "sdc.all_gather"(%y) {axis = -1 : i64, mesh_axes = ["dp", "tp"]} : (tensor<8x4xf32>) -> tensor<8x16xf32>
    %5 = "sdc.reduce_scatter"(%3) {axis = 0 : i64, mesh_axes = ["tp"], reduction = "avg"} : (tensor<16x4xf32>) -> tensor<8x4xf32>
    %6 = "sdc.all_to_all"(%5) {concat_axis = 1 : i64, mesh_axes = ["tp"], split_axis = 0 : i64} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %7 = "sdc.broadcast_from"(%6) {mesh_axes = ["dp"], root = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "sdc.send"(%7) {mesh_axes = ["dp"], peer = 1 : i64} : (tensor<4x8xf32>) -> ()
    %8 = "sdc.recv"() {mesh_axes = ["dp"], peer = 1 : i64} : () -> tensor<4x8xf32>
    "sdc.send"(%8) {mesh_axes = ["tp"]} : (tensor<4x8xf32>) -> ()
    %9 = "sdc.recv"() {mesh_axes = ["tp"]} : () -> tensor<?x8xf32>
    return %2, %4, %9 : tensor<?x768xf32>, tensor<8x16xf32>, tensor<?x8xf32>
  }
}
