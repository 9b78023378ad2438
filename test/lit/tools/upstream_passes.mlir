// Upstream passes mix with sdc's in one pipeline. sdc ops (collectives aside) are pure, so
// `cse` merges identical ones and dead ones go; collectives have effects: identical or unused,
// they stay. A nested pipeline (`func.func(cse)`) works too.
// RUN: sdc-opt %s -p 'sdc-verify,canonicalize,cse' | FileCheck %s
// RUN: sdc-opt %s -p 'func.func(cse)' | FileCheck %s --check-prefix=NESTED

module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  // CHECK-LABEL: func.func @f
  // CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
  // CHECK-NEXT: %[[N:.*]] = "sdc.neg"(%[[X]])
  // CHECK-NEXT: %[[A:.*]] = "sdc.add"(%[[N]], %[[N]])
  // CHECK-NEXT: %[[R1:.*]] = "sdc.all_reduce"(%[[A]])
  // CHECK-NEXT: %[[R2:.*]] = "sdc.all_reduce"(%[[A]])
  // CHECK-NEXT: "sdc.all_reduce"(%[[A]])
  // CHECK-NEXT: %[[S:.*]] = "sdc.add"(%[[R1]], %[[R2]])
  // CHECK-NEXT: return %[[S]]
  // NESTED-LABEL: func.func @f
  // NESTED-NEXT: %[[N:.*]] = "sdc.neg"
  // NESTED-NEXT: "sdc.add"(%[[N]], %[[N]])
  // NESTED-NEXT: "sdc.all_reduce"
  // NESTED-NEXT: "sdc.all_reduce"
  // NESTED-NEXT: "sdc.all_reduce"
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %2 = "sdc.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %dead = "sdc.exp"(%2) : (tensor<4xf32>) -> tensor<4xf32>
    %3 = "sdc.all_reduce"(%2) {mesh_axes = ["tp"]} : (tensor<4xf32>) -> tensor<4xf32>
    %4 = "sdc.all_reduce"(%2) {mesh_axes = ["tp"]} : (tensor<4xf32>) -> tensor<4xf32>
    %unused = "sdc.all_reduce"(%2) {mesh_axes = ["tp"]} : (tensor<4xf32>) -> tensor<4xf32>
    %5 = "sdc.add"(%3, %4) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %5 : tensor<4xf32>
  }
}
