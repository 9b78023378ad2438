// Round trip of the value ops (constant, parameter, iota, dim_values), cast and layout_cast, and of
// sdc's attributes where they annotate builtin IR: symbolic dims and shardings on function
// arguments, guards on a function, the mesh on a module.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// Constants of every element-type kind, splat and not, rank 0 and higher.
// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %[[F32:.*]] = "sdc.constant"() {value = dense<[1.000000e+00, 2.500000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT: %[[SPLAT:.*]] = "sdc.constant"() {value = dense<0.000000e+00> : tensor<2x3xf16>} : () -> tensor<2x3xf16>
// CHECK-NEXT: %[[BF16:.*]] = "sdc.constant"() {value = dense<[1.000000e+00, -2.000000e+00]> : tensor<2xbf16>} : () -> tensor<2xbf16>
// CHECK-NEXT: %[[I64:.*]] = "sdc.constant"() {value = dense<7> : tensor<i64>} : () -> tensor<i64>
// CHECK-NEXT: %[[I1:.*]] = "sdc.constant"() {value = dense<[true, false]> : tensor<2xi1>} : () -> tensor<2xi1>
// CHECK-NEXT: %[[U8:.*]] = "sdc.constant"() {value = dense<[0, 255]> : tensor<2xui8>} : () -> tensor<2xui8>
// CHECK-NEXT: return %[[F32]], %[[SPLAT]], %[[BF16]], %[[I64]], %[[I1]], %[[U8]]
func.func @constants() -> (tensor<2xf32>, tensor<2x3xf16>, tensor<2xbf16>, tensor<i64>, tensor<2xi1>, tensor<2xui8>) {
  %0 = "sdc.constant"() {value = dense<[1.0, 2.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %1 = "sdc.constant"() {value = dense<0.0> : tensor<2x3xf16>} : () -> tensor<2x3xf16>
  %2 = "sdc.constant"() {value = dense<[1.0, -2.0]> : tensor<2xbf16>} : () -> tensor<2xbf16>
  %3 = "sdc.constant"() {value = dense<7> : tensor<i64>} : () -> tensor<i64>
  %4 = "sdc.constant"() {value = dense<[true, false]> : tensor<2xi1>} : () -> tensor<2xi1>
  %5 = "sdc.constant"() {value = dense<[0, 255]> : tensor<2xui8>} : () -> tensor<2xui8>
  return %0, %1, %2, %3, %4, %5 : tensor<2xf32>, tensor<2x3xf16>, tensor<2xbf16>, tensor<i64>, tensor<2xi1>, tensor<2xui8>
}

// Parameters declare their type; iota and dim_values take symbolic dims.
// CHECK-LABEL: func.func @generated
// CHECK-NEXT: %[[W:.*]] = "sdc.parameter"() {name = "fc1.weight"} : () -> tensor<512x784xf32>
// CHECK-NEXT: %[[IOTA:.*]] = "sdc.iota"() {dimension = 0 : i64, dtype = i64, shape = ["S"]} : () -> tensor<?xi64>
// CHECK-NEXT: %[[IOTA2:.*]] = "sdc.iota"() {dimension = -1 : i64, dtype = f32, shape = [2, "S", 4]} : () -> tensor<2x?x4xf32>
// CHECK-NEXT: %[[DIMS:.*]] = "sdc.dim_values"() {dims = ["B", "S*12", 64]} : () -> tensor<3xi64>
// CHECK-NEXT: return %[[W]], %[[IOTA]], %[[IOTA2]], %[[DIMS]]
func.func @generated() -> (tensor<512x784xf32>, tensor<?xi64>, tensor<2x?x4xf32>, tensor<3xi64>) {
  %0 = "sdc.parameter"() {name = "fc1.weight"} : () -> tensor<512x784xf32>
  %1 = "sdc.iota"() {dimension = 0 : i64, dtype = i64, shape = ["S"]} : () -> tensor<?xi64>
  %2 = "sdc.iota"() {dimension = -1 : i64, dtype = f32, shape = [2, "S", 4]} : () -> tensor<2x?x4xf32>
  %3 = "sdc.dim_values"() {dims = ["B", "S*12", 64]} : () -> tensor<3xi64>
  return %0, %1, %2, %3 : tensor<512x784xf32>, tensor<?xi64>, tensor<2x?x4xf32>, tensor<3xi64>
}

// CHECK-LABEL: func.func @casts
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x3x8x8xf32>)
// CHECK-NEXT: %[[H:.*]] = "sdc.cast"(%[[X]]) {dtype = f16} : (tensor<?x3x8x8xf32>) -> tensor<?x3x8x8xf16>
// CHECK-NEXT: %[[I:.*]] = "sdc.cast"(%[[H]]) {dtype = i8} : (tensor<?x3x8x8xf16>) -> tensor<?x3x8x8xi8>
// CHECK-NEXT: %[[B:.*]] = "sdc.cast"(%[[I]]) {dtype = i1} : (tensor<?x3x8x8xi8>) -> tensor<?x3x8x8xi1>
// CHECK-NEXT: %[[U:.*]] = "sdc.cast"(%[[B]]) {dtype = ui32} : (tensor<?x3x8x8xi1>) -> tensor<?x3x8x8xui32>
// CHECK-NEXT: %[[NHWC:.*]] = "sdc.layout_cast"(%[[X]]) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<?x3x8x8xf32>) -> tensor<?x3x8x8xf32>
// CHECK-NEXT: return %[[U]], %[[NHWC]]
func.func @casts(%x: tensor<?x3x8x8xf32>) -> (tensor<?x3x8x8xui32>, tensor<?x3x8x8xf32>) {
  %0 = "sdc.cast"(%x) {dtype = f16} : (tensor<?x3x8x8xf32>) -> tensor<?x3x8x8xf16>
  %1 = "sdc.cast"(%0) {dtype = i8} : (tensor<?x3x8x8xf16>) -> tensor<?x3x8x8xi8>
  %2 = "sdc.cast"(%1) {dtype = i1} : (tensor<?x3x8x8xi8>) -> tensor<?x3x8x8xi1>
  %3 = "sdc.cast"(%2) {dtype = ui32} : (tensor<?x3x8x8xi1>) -> tensor<?x3x8x8xui32>
  %4 = "sdc.layout_cast"(%x) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<?x3x8x8xf32>) -> tensor<?x3x8x8xf32>
  return %3, %4 : tensor<?x3x8x8xui32>, tensor<?x3x8x8xf32>
}

// CHECK: module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 4>>}
module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 4>>} {
  // CHECK-LABEL: func.func @annotated
  // CHECK-SAME: (%[[X:[^:]+]]: tensor<?x3x?x?xf32> {sdc.dims = #sdc.dims<["B", 3, "H", "W"]>, sdc.sharding = #sdc.sharding<{{\[\[}}"dp"], [], [], []], []>},
  // CHECK-SAME: %[[Y:[^:]+]]: tensor<4xf32> {sdc.sharding = #sdc.sharding<{{\[\[}}]], ["dp"]>})
  // CHECK-SAME: attributes {sdc.guards = [#sdc.guard<"H % 2 == 0", "H must be even">, #sdc.guard<"W >= 8", "W is at least 8">]}
  // CHECK-NEXT: %[[L:.*]] = "sdc.layout_cast"(%[[X]]) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<?x3x?x?xf32>) -> tensor<?x3x?x?xf32>
  // CHECK-NEXT: %[[N:.*]] = "sdc.neg"(%[[Y]]) {sdc.note = "a discardable attribute"} : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: return %[[L]], %[[N]]
  func.func @annotated(%x: tensor<?x3x?x?xf32> {sdc.dims = #sdc.dims<["B", 3, "H", "W"]>, sdc.sharding = #sdc.sharding<[["dp"], [], [], []], []>},
                       %y: tensor<4xf32> {sdc.sharding = #sdc.sharding<[[]], ["dp"]>}) -> (tensor<?x3x?x?xf32>, tensor<4xf32>)
      attributes {sdc.guards = [#sdc.guard<"H % 2 == 0", "H must be even">, #sdc.guard<"W >= 8", "W is at least 8">]} {
    %0 = "sdc.layout_cast"(%x) {layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<?x3x?x?xf32>) -> tensor<?x3x?x?xf32>
    %1 = "sdc.neg"(%y) {sdc.note = "a discardable attribute"} : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1 : tensor<?x3x?x?xf32>, tensor<4xf32>
  }
}
