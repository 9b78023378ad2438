// Round trip of the data-movement ops: reshape, transpose, broadcast, concat, slice, pad, split,
// squeeze, unsqueeze, gather.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// `shape` attributes mix ints, -1 and symbol names.
// CHECK-LABEL: func.func @reshape_transpose
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x128x768xf32>)
// CHECK-NEXT: %[[R:.*]] = "sdc.reshape"(%[[X]]) {shape = ["B", -1, 64]} : (tensor<?x128x768xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[S:.*]] = "sdc.reshape"(%[[R]]) {shape = [-1, 64]} : (tensor<?x?x64xf32>) -> tensor<?x64xf32>
// CHECK-NEXT: %[[T:.*]] = "sdc.transpose"(%[[X]]) {perm = array<i64: 0, 2, 1>} : (tensor<?x128x768xf32>) -> tensor<?x768x128xf32>
// CHECK-NEXT: return %[[S]], %[[T]]
func.func @reshape_transpose(%x: tensor<?x128x768xf32>) -> (tensor<?x64xf32>, tensor<?x768x128xf32>) {
  %0 = "sdc.reshape"(%x) {shape = ["B", -1, 64]} : (tensor<?x128x768xf32>) -> tensor<?x?x64xf32>
  %1 = "sdc.reshape"(%0) {shape = [-1, 64]} : (tensor<?x?x64xf32>) -> tensor<?x64xf32>
  %2 = "sdc.transpose"(%x) {perm = array<i64: 0, 2, 1>} : (tensor<?x128x768xf32>) -> tensor<?x768x128xf32>
  return %1, %2 : tensor<?x64xf32>, tensor<?x768x128xf32>
}

// CHECK-LABEL: func.func @broadcast_concat
// CHECK-SAME: (%[[A:[^:]+]]: tensor<1x1x64xf32>, %[[B:[^:]+]]: tensor<?x64x8x8xf32>, %[[C:[^:]+]]: tensor<?x32x8x8xf32>)
// CHECK-NEXT: %[[BC:.*]] = "sdc.broadcast"(%[[A]]) {shape = ["B", 12, 1, 1]} : (tensor<1x1x64xf32>) -> tensor<?x12x1x64xf32>
// CHECK-NEXT: %[[CAT:.*]] = "sdc.concat"(%[[B]], %[[C]]) {axis = 1 : i64} : (tensor<?x64x8x8xf32>, tensor<?x32x8x8xf32>) -> tensor<?x96x8x8xf32>
// CHECK-NEXT: %[[CAT2:.*]] = "sdc.concat"(%[[CAT]], %[[CAT]]) {axis = -1 : i64} : (tensor<?x96x8x8xf32>, tensor<?x96x8x8xf32>) -> tensor<?x96x8x16xf32>
// CHECK-NEXT: return %[[BC]], %[[CAT2]]
func.func @broadcast_concat(%a: tensor<1x1x64xf32>, %b: tensor<?x64x8x8xf32>, %c: tensor<?x32x8x8xf32>) -> (tensor<?x12x1x64xf32>, tensor<?x96x8x16xf32>) {
  %0 = "sdc.broadcast"(%a) {shape = ["B", 12, 1, 1]} : (tensor<1x1x64xf32>) -> tensor<?x12x1x64xf32>
  %1 = "sdc.concat"(%b, %c) {axis = 1 : i64} : (tensor<?x64x8x8xf32>, tensor<?x32x8x8xf32>) -> tensor<?x96x8x8xf32>
  %2 = "sdc.concat"(%1, %1) {axis = -1 : i64} : (tensor<?x96x8x8xf32>, tensor<?x96x8x8xf32>) -> tensor<?x96x8x16xf32>
  return %0, %2 : tensor<?x12x1x64xf32>, tensor<?x96x8x16xf32>
}

// CHECK-LABEL: func.func @slice_pad
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x10xf32>)
// CHECK-NEXT: %[[S:.*]] = "sdc.slice"(%[[X]]) {axes = array<i64: 1>, ends = array<i64: 9223372036854775807>, starts = array<i64: 1>, steps = array<i64: 2>} : (tensor<?x10xf32>) -> tensor<?x5xf32>
// CHECK-NEXT: %[[REV:.*]] = "sdc.slice"(%[[S]]) {ends = array<i64: -9223372036854775807, -9223372036854775807>, starts = array<i64: -1, -1>, steps = array<i64: -1, -1>} : (tensor<?x5xf32>) -> tensor<?x5xf32>
// CHECK-NEXT: %[[P:.*]] = "sdc.pad"(%[[REV]]) {mode = "constant", pads = array<i64: 0, 1, 0, 1>, value = -1.000000e+00 : f64} : (tensor<?x5xf32>) -> tensor<?x7xf32>
// CHECK-NEXT: %[[CROP:.*]] = "sdc.pad"(%[[P]]) {pads = array<i64: 0, -2, 0, -1>} : (tensor<?x7xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[REFL:.*]] = "sdc.pad"(%[[CROP]]) {mode = "reflect", pads = array<i64: 0, 2, 0, 2>} : (tensor<?x4xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: %[[EDGE:.*]] = "sdc.pad"(%[[REFL]]) {mode = "edge", pads = array<i64: 1, 0, 1, 0>} : (tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: return %[[EDGE]]
func.func @slice_pad(%x: tensor<?x10xf32>) -> tensor<?x8xf32> {
  %0 = "sdc.slice"(%x) {axes = array<i64: 1>, ends = array<i64: 9223372036854775807>, starts = array<i64: 1>, steps = array<i64: 2>} : (tensor<?x10xf32>) -> tensor<?x5xf32>
  %1 = "sdc.slice"(%0) {starts = array<i64: -1, -1>, ends = array<i64: -9223372036854775807, -9223372036854775807>, steps = array<i64: -1, -1>} : (tensor<?x5xf32>) -> tensor<?x5xf32>
  %2 = "sdc.pad"(%1) {mode = "constant", pads = array<i64: 0, 1, 0, 1>, value = -1.0 : f64} : (tensor<?x5xf32>) -> tensor<?x7xf32>
  %3 = "sdc.pad"(%2) {pads = array<i64: 0, -2, 0, -1>} : (tensor<?x7xf32>) -> tensor<?x4xf32>
  %4 = "sdc.pad"(%3) {mode = "reflect", pads = array<i64: 0, 2, 0, 2>} : (tensor<?x4xf32>) -> tensor<?x8xf32>
  %5 = "sdc.pad"(%4) {mode = "edge", pads = array<i64: 1, 0, 1, 0>} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %5 : tensor<?x8xf32>
}

// A split has one result per part; a one-part split prints as a single result.
// CHECK-LABEL: func.func @split_squeeze
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x2304xf32>, %[[Y:[^:]+]]: tensor<?x2048x1x1xf32>)
// CHECK-NEXT: %[[SPLIT:.*]]:3 = "sdc.split"(%[[X]]) {axis = 2 : i64, parts = 3 : i64} : (tensor<?x?x2304xf32>) -> (tensor<?x?x768xf32>, tensor<?x?x768xf32>, tensor<?x?x768xf32>)
// CHECK-NEXT: %[[ONE:.*]] = "sdc.split"(%[[Y]]) {axis = -1 : i64, parts = 1 : i64} : (tensor<?x2048x1x1xf32>) -> tensor<?x2048x1x1xf32>
// CHECK-NEXT: %[[SQ:.*]] = "sdc.squeeze"(%[[ONE]]) {axes = array<i64: 2, -1>} : (tensor<?x2048x1x1xf32>) -> tensor<?x2048xf32>
// CHECK-NEXT: %[[UNSQ:.*]] = "sdc.unsqueeze"(%[[SQ]]) {axes = array<i64: 0, -1>} : (tensor<?x2048xf32>) -> tensor<1x?x2048x1xf32>
// CHECK-NEXT: return %[[SPLIT]]#0, %[[SPLIT]]#2, %[[UNSQ]]
func.func @split_squeeze(%x: tensor<?x?x2304xf32>, %y: tensor<?x2048x1x1xf32>) -> (tensor<?x?x768xf32>, tensor<?x?x768xf32>, tensor<1x?x2048x1xf32>) {
  %0:3 = "sdc.split"(%x) {axis = 2 : i64, parts = 3 : i64} : (tensor<?x?x2304xf32>) -> (tensor<?x?x768xf32>, tensor<?x?x768xf32>, tensor<?x?x768xf32>)
  %1:1 = "sdc.split"(%y) {axis = -1 : i64, parts = 1 : i64} : (tensor<?x2048x1x1xf32>) -> tensor<?x2048x1x1xf32>
  %2 = "sdc.squeeze"(%1#0) {axes = array<i64: 2, -1>} : (tensor<?x2048x1x1xf32>) -> tensor<?x2048xf32>
  %3 = "sdc.unsqueeze"(%2) {axes = array<i64: 0, -1>} : (tensor<?x2048xf32>) -> tensor<1x?x2048x1xf32>
  return %0#0, %0#2, %3 : tensor<?x?x768xf32>, tensor<?x?x768xf32>, tensor<1x?x2048x1xf32>
}

// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[E:[^:]+]]: tensor<50257x768xf32>, %[[IDS:[^:]+]]: tensor<?x?xi64>, %[[I32:[^:]+]]: tensor<3xi32>)
// CHECK-NEXT: %[[EMB:.*]] = "sdc.gather"(%[[E]], %[[IDS]]) {axis = 0 : i64} : (tensor<50257x768xf32>, tensor<?x?xi64>) -> tensor<?x?x768xf32>
// CHECK-NEXT: %[[COLS:.*]] = "sdc.gather"(%[[EMB]], %[[I32]]) {axis = -1 : i64} : (tensor<?x?x768xf32>, tensor<3xi32>) -> tensor<?x?x3xf32>
// CHECK-NEXT: %[[DEF:.*]] = "sdc.gather"(%[[E]], %[[I32]]) : (tensor<50257x768xf32>, tensor<3xi32>) -> tensor<3x768xf32>
// CHECK-NEXT: return %[[COLS]], %[[DEF]]
func.func @gather(%e: tensor<50257x768xf32>, %ids: tensor<?x?xi64>, %i32: tensor<3xi32>) -> (tensor<?x?x3xf32>, tensor<3x768xf32>) {
  %0 = "sdc.gather"(%e, %ids) {axis = 0 : i64} : (tensor<50257x768xf32>, tensor<?x?xi64>) -> tensor<?x?x768xf32>
  %1 = "sdc.gather"(%0, %i32) {axis = -1 : i64} : (tensor<?x?x768xf32>, tensor<3xi32>) -> tensor<?x?x3xf32>
  %2 = "sdc.gather"(%e, %i32) : (tensor<50257x768xf32>, tensor<3xi32>) -> tensor<3x768xf32>
  return %1, %2 : tensor<?x?x3xf32>, tensor<3x768xf32>
}
