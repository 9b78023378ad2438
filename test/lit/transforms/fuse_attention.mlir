// sdc-fuse on a target with a Triton backend: an attention's three groups (QK^T with its scale and
// mask, the softmax, PV) become one sdc.fusion of kind "attention"; on cpu they stay three.
// RUN: sdc-opt %s --split-input-file -p 'sdc-fuse{target=cuda},sdc-verify' | FileCheck %s
// RUN: sdc-opt %s --split-input-file -p 'sdc-fuse{target=cpu}' | FileCheck %s --check-prefix=CPU

// CHECK-LABEL: func.func @padding_mask
// CHECK: "sdc.fusion"
// CHECK: "sdc.matmul"
// CHECK: "sdc.mul"
// CHECK: "sdc.where"
// CHECK: "sdc.softmax"
// CHECK: "sdc.matmul"
// CHECK: "sdc.yield"
// CHECK-NEXT: }) {kind = "attention"}
// CPU-LABEL: func.func @padding_mask
// CPU-NOT: "attention"
// CPU: {kind = "contraction"}
// CPU-NEXT: "sdc.softmax"
func.func @padding_mask(%q: tensor<2x4x9x32xf32>, %k: tensor<2x4x11x32xf32>, %v: tensor<2x4x11x32xf32>,
                        %pad: tensor<2x1x1x11xi1>) -> tensor<2x4x9x32xf32> {
  %c = "sdc.constant"() {value = dense<0.17677669> : tensor<f32>} : () -> tensor<f32>
  %fill = "sdc.constant"() {value = dense<-1.0e9> : tensor<f32>} : () -> tensor<f32>
  %s = "sdc.matmul"(%q, %k) {transpose_lhs = false, transpose_rhs = true} : (tensor<2x4x9x32xf32>, tensor<2x4x11x32xf32>) -> tensor<2x4x9x11xf32>
  %t = "sdc.mul"(%s, %c) : (tensor<2x4x9x11xf32>, tensor<f32>) -> tensor<2x4x9x11xf32>
  %u = "sdc.where"(%pad, %fill, %t) : (tensor<2x1x1x11xi1>, tensor<f32>, tensor<2x4x9x11xf32>) -> tensor<2x4x9x11xf32>
  %p = "sdc.softmax"(%u) {axis = -1 : i64} : (tensor<2x4x9x11xf32>) -> tensor<2x4x9x11xf32>
  %o = "sdc.matmul"(%p, %v) : (tensor<2x4x9x11xf32>, tensor<2x4x11x32xf32>) -> tensor<2x4x9x32xf32>
  return %o : tensor<2x4x9x32xf32>
}

// -----

// The probabilities are also returned: the kernel would have to write them, so nothing merges.
// CHECK-LABEL: func.func @probabilities_returned
// CHECK-NOT: "attention"
// CHECK: return
// CPU-LABEL: func.func @probabilities_returned
func.func @probabilities_returned(%q: tensor<4x9x32xf32>, %k: tensor<4x11x32xf32>, %v: tensor<4x11x32xf32>)
    -> (tensor<4x9x32xf32>, tensor<4x9x11xf32>) {
  %s = "sdc.matmul"(%q, %k) {transpose_lhs = false, transpose_rhs = true} : (tensor<4x9x32xf32>, tensor<4x11x32xf32>) -> tensor<4x9x11xf32>
  %p = "sdc.softmax"(%s) {axis = -1 : i64} : (tensor<4x9x11xf32>) -> tensor<4x9x11xf32>
  %o = "sdc.matmul"(%p, %v) : (tensor<4x9x11xf32>, tensor<4x11x32xf32>) -> tensor<4x9x32xf32>
  return %o, %p : tensor<4x9x32xf32>, tensor<4x9x11xf32>
}
