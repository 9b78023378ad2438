// Round trip of the reductions and normalizations.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x16x8xf32>, %[[I:[^:]+]]: tensor<4x5xi32>)
// CHECK-NEXT: %[[SUM:.*]] = "sdc.reduce_sum"(%[[X]]) {axes = array<i64: 1>, keepdims = true} : (tensor<?x16x8xf32>) -> tensor<?x1x8xf32>
// CHECK-NEXT: %[[MEAN:.*]] = "sdc.reduce_mean"(%[[SUM]]) {axes = array<i64: -1, 1>} : (tensor<?x1x8xf32>) -> tensor<?xf32>
// CHECK-NEXT: %[[MAX:.*]] = "sdc.reduce_max"(%[[X]]) {axes = array<i64: 0, 2>} : (tensor<?x16x8xf32>) -> tensor<16xf32>
// CHECK-NEXT: %[[MIN:.*]] = "sdc.reduce_min"(%[[MAX]]) : (tensor<16xf32>) -> tensor<f32>
// CHECK-NEXT: %[[PROD:.*]] = "sdc.reduce_prod"(%[[I]]) {axes = array<i64>, keepdims = true} : (tensor<4x5xi32>) -> tensor<1x1xi32>
// CHECK-NEXT: %[[ARGMAX:.*]] = "sdc.argmax"(%[[X]]) {axis = 1 : i64} : (tensor<?x16x8xf32>) -> tensor<?x8xi64>
// CHECK-NEXT: %[[ARGMIN:.*]] = "sdc.argmin"(%[[I]]) {axis = -1 : i64, keepdims = true, select_last_index = true} : (tensor<4x5xi32>) -> tensor<4x1xi64>
// CHECK-NEXT: return %[[MEAN]], %[[MIN]], %[[PROD]], %[[ARGMAX]], %[[ARGMIN]]
func.func @reductions(%x: tensor<?x16x8xf32>, %i: tensor<4x5xi32>)
    -> (tensor<?xf32>, tensor<f32>, tensor<1x1xi32>, tensor<?x8xi64>, tensor<4x1xi64>) {
  %0 = "sdc.reduce_sum"(%x) {axes = array<i64: 1>, keepdims = true} : (tensor<?x16x8xf32>) -> tensor<?x1x8xf32>
  %1 = "sdc.reduce_mean"(%0) {axes = array<i64: -1, 1>} : (tensor<?x1x8xf32>) -> tensor<?xf32>
  %2 = "sdc.reduce_max"(%x) {axes = array<i64: 0, 2>} : (tensor<?x16x8xf32>) -> tensor<16xf32>
  %3 = "sdc.reduce_min"(%2) : (tensor<16xf32>) -> tensor<f32>
  %4 = "sdc.reduce_prod"(%i) {axes = array<i64>, keepdims = true} : (tensor<4x5xi32>) -> tensor<1x1xi32>
  %5 = "sdc.argmax"(%x) {axis = 1 : i64} : (tensor<?x16x8xf32>) -> tensor<?x8xi64>
  %6 = "sdc.argmin"(%i) {axis = -1 : i64, keepdims = true, select_last_index = true} : (tensor<4x5xi32>) -> tensor<4x1xi64>
  return %1, %3, %4, %5, %6 : tensor<?xf32>, tensor<f32>, tensor<1x1xi32>, tensor<?x8xi64>, tensor<4x1xi64>
}

// CHECK-LABEL: func.func @normalizations
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x768xf32>, %[[G:[^:]+]]: tensor<768xf32>, %[[B:[^:]+]]: tensor<768xf32>, %[[G2:[^:]+]]: tensor<?x768xf32>)
// CHECK-NEXT: %[[SM:.*]] = "sdc.softmax"(%[[X]]) {axis = -1 : i64} : (tensor<?x?x768xf32>) -> tensor<?x?x768xf32>
// CHECK-NEXT: %[[LSM:.*]] = "sdc.log_softmax"(%[[SM]]) {axis = 1 : i64} : (tensor<?x?x768xf32>) -> tensor<?x?x768xf32>
// CHECK-NEXT: %[[DEF:.*]] = "sdc.softmax"(%[[LSM]]) : (tensor<?x?x768xf32>) -> tensor<?x?x768xf32>
// CHECK-NEXT: %[[LN:.*]] = "sdc.layer_norm"(%[[DEF]], %[[G]], %[[B]]) {axis = -1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<?x?x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<?x?x768xf32>
// CHECK-NEXT: %[[RMS:.*]] = "sdc.rms_norm"(%[[LN]], %[[G]]) {epsilon = 9.9999999999999995E-7 : f64} : (tensor<?x?x768xf32>, tensor<768xf32>) -> tensor<?x?x768xf32>
// CHECK-NEXT: %[[LN2:.*]] = "sdc.layer_norm"(%[[RMS]], %[[G2]], %[[G2]]) {axis = 1 : i64} : (tensor<?x?x768xf32>, tensor<?x768xf32>, tensor<?x768xf32>) -> tensor<?x?x768xf32>
// CHECK-NEXT: return %[[LN2]]
func.func @normalizations(%x: tensor<?x?x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>, %g2: tensor<?x768xf32>) -> tensor<?x?x768xf32> {
  %0 = "sdc.softmax"(%x) {axis = -1 : i64} : (tensor<?x?x768xf32>) -> tensor<?x?x768xf32>
  %1 = "sdc.log_softmax"(%0) {axis = 1 : i64} : (tensor<?x?x768xf32>) -> tensor<?x?x768xf32>
  %2 = "sdc.softmax"(%1) : (tensor<?x?x768xf32>) -> tensor<?x?x768xf32>
  %3 = "sdc.layer_norm"(%2, %g, %b) {axis = -1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<?x?x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<?x?x768xf32>
  %4 = "sdc.rms_norm"(%3, %g) {epsilon = 1.0e-6 : f64} : (tensor<?x?x768xf32>, tensor<768xf32>) -> tensor<?x?x768xf32>
  %5 = "sdc.layer_norm"(%4, %g2, %g2) {axis = 1 : i64} : (tensor<?x?x768xf32>, tensor<?x768xf32>, tensor<?x768xf32>) -> tensor<?x?x768xf32>
  return %5 : tensor<?x?x768xf32>
}

// CHECK-LABEL: func.func @channels
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x64x56x56xbf16>, %[[P:[^:]+]]: tensor<64xbf16>)
// CHECK-NEXT: %[[BN:.*]] = "sdc.batch_norm"(%[[X]], %[[P]], %[[P]], %[[P]], %[[P]]) {epsilon = 1.000000e-03 : f64} : (tensor<?x64x56x56xbf16>, tensor<64xbf16>, tensor<64xbf16>, tensor<64xbf16>, tensor<64xbf16>) -> tensor<?x64x56x56xbf16>
// CHECK-NEXT: %[[LRN:.*]] = "sdc.lrn"(%[[BN]]) {alpha = 1.000000e-04 : f64, beta = 7.500000e-01 : f64, bias = 2.000000e+00 : f64, size = 5 : i64} : (tensor<?x64x56x56xbf16>) -> tensor<?x64x56x56xbf16>
// CHECK-NEXT: %[[LRN3:.*]] = "sdc.lrn"(%[[LRN]]) {size = 3 : i64} : (tensor<?x64x56x56xbf16>) -> tensor<?x64x56x56xbf16>
// CHECK-NEXT: return %[[LRN3]]
func.func @channels(%x: tensor<?x64x56x56xbf16>, %p: tensor<64xbf16>) -> tensor<?x64x56x56xbf16> {
  %0 = "sdc.batch_norm"(%x, %p, %p, %p, %p) {epsilon = 1.0e-3 : f64} : (tensor<?x64x56x56xbf16>, tensor<64xbf16>, tensor<64xbf16>, tensor<64xbf16>, tensor<64xbf16>) -> tensor<?x64x56x56xbf16>
  %1 = "sdc.lrn"(%0) {alpha = 1.000000e-04 : f64, beta = 7.500000e-01 : f64, bias = 2.0 : f64, size = 5 : i64} : (tensor<?x64x56x56xbf16>) -> tensor<?x64x56x56xbf16>
  %2 = "sdc.lrn"(%1) {size = 3 : i64} : (tensor<?x64x56x56xbf16>) -> tensor<?x64x56x56xbf16>
  return %2 : tensor<?x64x56x56xbf16>
}
