// sdc-mixed-precision: matmuls and elementwise ops compute in the low dtype, softmax, norms and
// sum-like reductions (with the elementwise chain feeding them) in f32, casts at the boundaries,
// each value cast once; the signature stays f32.
// RUN: sdc-opt %s --split-input-file -p 'sdc-mixed-precision{precision=bf16},sdc-verify' | FileCheck %s
// RUN: sdc-opt %s --split-input-file -p 'sdc-mixed-precision{precision=f16},sdc-verify' | FileCheck %s --check-prefix=F16
// RUN: sdc-opt %s --split-input-file -p 'sdc-mixed-precision{precision=tf32},sdc-verify' | FileCheck %s --check-prefix=TF32

// CHECK: module attributes {sdc.precision = "bf16"}
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[XL:.*]] = "sdc.cast"(%[[X]]) {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: %[[W:.*]] = "sdc.parameter"() {name = "w"} : () -> tensor<8x16xf32>
// CHECK-NEXT: %[[WL:.*]] = "sdc.cast"(%[[W]]) {dtype = bf16} : (tensor<8x16xf32>) -> tensor<8x16xbf16>
// CHECK: %[[S:.*]] = "sdc.matmul"(%[[XL]], %[[WL]]) {{.*}} -> tensor<4x16xbf16>
// CHECK: %[[SF:.*]] = "sdc.cast"(%[[S]]) {dtype = f32} : (tensor<4x16xbf16>) -> tensor<4x16xf32>
// CHECK: %[[P:.*]] = "sdc.softmax"(%[[SF]]) {{.*}} -> tensor<4x16xf32>
// CHECK: %[[PL:.*]] = "sdc.cast"(%[[P]]) {dtype = bf16}
// The weight's low version is shared by both matmuls.
// CHECK: %[[O:.*]] = "sdc.matmul"(%[[PL]], %[[WL]]) {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[OF:.*]] = "sdc.cast"(%[[O]]) {dtype = f32}
// CHECK-NOT: "sdc.cast"
// CHECK: return %[[OF]] : tensor<4x8xf32>

// F16: module attributes {sdc.precision = "f16"}
// F16-LABEL: func.func @attention
// F16: "sdc.matmul"{{.*}} -> tensor<4x16xf16>
// F16: "sdc.softmax"{{.*}} -> tensor<4x16xf32>

// TF32: module attributes {sdc.precision = "tf32"}
// TF32-LABEL: func.func @attention
// TF32-NOT: "sdc.cast"
// TF32: "sdc.matmul"{{.*}} -> tensor<4x16xf32>
func.func @attention(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x16xf32>
  %0 = "sdc.matmul"(%x, %w) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = "sdc.softmax"(%0) {axis = -1 : i64} : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = "sdc.matmul"(%1, %w) {transpose_rhs = true} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// A hand-written log-sum-exp: the max, the subtraction and the exp feeding the sum stay f32, back
// to the matmul (cast once, read twice); the log after the sum is low again.
// CHECK-LABEL: func.func @log_sum_exp
// CHECK: %[[Y:.*]] = "sdc.matmul"{{.*}} -> tensor<4x16xbf16>
// CHECK-NEXT: %[[YF:.*]] = "sdc.cast"(%[[Y]]) {dtype = f32}
// CHECK-NEXT: %[[M:.*]] = "sdc.reduce_max"(%[[YF]]) {{.*}} -> tensor<4x1xf32>
// CHECK-NEXT: %[[D:.*]] = "sdc.sub"(%[[YF]], %[[M]]) {{.*}} -> tensor<4x16xf32>
// CHECK: %[[E:.*]] = "sdc.exp"(%[[D]]) {{.*}} -> tensor<4x16xf32>
// CHECK: %[[S:.*]] = "sdc.reduce_sum"(%[[E]]) {{.*}} -> tensor<4x1xf32>
// CHECK: %[[SL:.*]] = "sdc.cast"(%[[S]]) {dtype = bf16}
// CHECK: "sdc.log"(%[[SL]]) {{.*}} -> tensor<4x1xbf16>
func.func @log_sum_exp(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x16xf32>
  %0 = "sdc.matmul"(%x, %w) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = "sdc.reduce_max"(%0) {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %2 = "sdc.sub"(%0, %1) : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %3 = "sdc.exp"(%2) : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %4 = "sdc.reduce_sum"(%3) {axes = array<i64: 1>, keepdims = true} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %5 = "sdc.log"(%4) : (tensor<4x1xf32>) -> tensor<4x1xf32>
  return %5 : tensor<4x1xf32>
}

// -----

// Layer norm computes its statistics in f32, with its f32 scale and bias as they are; a constant
// read by a low op becomes a low constant (f16: clipped to the finite range, so -1e9 stays finite).
// CHECK-LABEL: func.func @norm_and_constants
// CHECK: %[[G:.*]] = "sdc.parameter"() {name = "gamma"} : () -> tensor<8xf32>
// CHECK: %[[C:.*]] = "sdc.constant"() {value = dense<-9.982440e+08> : tensor<bf16>}
// CHECK: %[[A:.*]] = "sdc.add"({{.*}}, %[[C]]) {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[AF:.*]] = "sdc.cast"(%[[A]]) {dtype = f32}
// CHECK: "sdc.layer_norm"(%[[AF]], %[[G]], %[[G]]) {{.*}} -> tensor<4x8xf32>
// F16-LABEL: func.func @norm_and_constants
// F16: "sdc.constant"() {value = dense<-6.550400e+04> : tensor<f16>}
// F16-NOT: "sdc.constant"() {value = dense<-1.000000e+09>
func.func @norm_and_constants(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %g = "sdc.parameter"() {name = "gamma"} : () -> tensor<8xf32>
  %c = "sdc.constant"() {value = dense<-1.0e9> : tensor<f32>} : () -> tensor<f32>
  %0 = "sdc.tanh"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "sdc.add"(%0, %c) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = "sdc.layer_norm"(%1, %g, %g) {axis = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// Ops on weights alone (a batch norm folded into a convolution's weight) stay f32: the planner
// evaluates them, and then the cast, at compile time. The convolution runs in bf16.
// CHECK-LABEL: func.func @folded_weight
// CHECK: %[[W:.*]] = "sdc.parameter"() {name = "w"}
// CHECK: %[[S:.*]] = "sdc.parameter"() {name = "scale"}
// CHECK: %[[WS:.*]] = "sdc.mul"(%[[W]], %[[S]]) : (tensor<4x3x3x3xf32>, tensor<4x1x1x1xf32>) -> tensor<4x3x3x3xf32>
// CHECK: %[[WL:.*]] = "sdc.cast"(%[[WS]]) {dtype = bf16}
// CHECK: %[[Y:.*]] = "sdc.conv"({{.*}}, %[[WL]]) {{.*}} -> tensor<1x4x8x8xbf16>
// CHECK: "sdc.relu"(%[[Y]]) {{.*}} -> tensor<1x4x8x8xbf16>
func.func @folded_weight(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x3x3x3xf32>
  %s = "sdc.parameter"() {name = "scale"} : () -> tensor<4x1x1x1xf32>
  %0 = "sdc.mul"(%w, %s) : (tensor<4x3x3x3xf32>, tensor<4x1x1x1xf32>) -> tensor<4x3x3x3xf32>
  %1 = "sdc.conv"(%x, %0) {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %2 = "sdc.relu"(%1) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %2 : tensor<1x4x8x8xf32>
}

// -----

// Movement ops follow their operands; when those differ they meet at f32 (exact), so a concat of a
// low and an f32 value is f32. The program's own f32 -> bf16 -> f32 pair rounds on purpose and stays.
// CHECK-LABEL: func.func @movement_and_own_casts
// CHECK: %[[T:.*]] = "sdc.transpose"({{.*}}) {{.*}} -> tensor<8x4xbf16>
// CHECK: %[[TF:.*]] = "sdc.cast"(%[[T]]) {dtype = f32}
// CHECK: "sdc.concat"(%[[TF]], %{{.*}}) {{.*}} -> tensor<16x4xf32>
// CHECK: %[[R:.*]] = "sdc.cast"(%{{.*}}) {dtype = bf16} : (tensor<16x4xf32>) -> tensor<16x4xbf16>
// CHECK: "sdc.cast"(%[[R]]) {dtype = f32} : (tensor<16x4xbf16>) -> tensor<16x4xf32>
func.func @movement_and_own_casts(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> tensor<16x4xf32> {
  %0 = "sdc.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "sdc.transpose"(%0) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %2 = "sdc.concat"(%1, %y) {axis = 0 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %3 = "sdc.cast"(%2) {dtype = bf16} : (tensor<16x4xf32>) -> tensor<16x4xbf16>
  %4 = "sdc.cast"(%3) {dtype = f32} : (tensor<16x4xbf16>) -> tensor<16x4xf32>
  return %4 : tensor<16x4xf32>
}
