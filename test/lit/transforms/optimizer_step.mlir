// sdc-optimizer-step: the trained parameter becomes a state input (with its momentum buffer and the
// step counter), the rate an input `lr`; the grad.* result is replaced by the new state values,
// each input's sdc.state naming the output that updates it. SGD with momentum: buf = 0.9*buf + g,
// w = w - lr*buf; the step counter is incremented.
// RUN: sdc-opt %s -p "sdc-optimizer-step{optimizer=sgd momentum=0.9},sdc-verify" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x3xf32>, %[[W:[^:]+]]: tensor<3xf32> {sdc.name = "w", sdc.state = "next.w"},
// CHECK-SAME: %[[BUF:[^:]+]]: tensor<3xf32> {sdc.name = "momentum_buffer.w", sdc.state = "next.momentum_buffer.w"},
// CHECK-SAME: %[[STEP:[^:]+]]: tensor<f32> {sdc.name = "step", sdc.state = "next.step"}, %[[LR:[^:]+]]: tensor<f32> {sdc.name = "lr"})
// CHECK-SAME: -> (tensor<f32> {sdc.name = "loss"}, tensor<3xf32> {sdc.name = "next.w"}, tensor<3xf32> {sdc.name = "next.momentum_buffer.w"}, tensor<f32> {sdc.name = "next.step"})
// CHECK-NOT: "sdc.parameter"
// CHECK: %[[LOSS:.*]] = "sdc.reduce_sum"
// CHECK: %[[ONE:.*]] = "sdc.constant"() {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: %[[NEXT_STEP:.*]] = "sdc.add"(%[[STEP]], %[[ONE]])
// CHECK: %[[M:.*]] = "sdc.constant"() {value = dense<0.899999976> : tensor<f32>}
// CHECK: %[[B1:.*]] = "sdc.mul"(%[[BUF]], %[[M]])
// CHECK: %[[NEXT_BUF:.*]] = "sdc.add"(%[[B1]], %[[G:.*]])
// CHECK: %[[D:.*]] = "sdc.mul"(%[[NEXT_BUF]], %[[LR]])
// CHECK: %[[NEXT_W:.*]] = "sdc.sub"(%[[W]], %[[D]])
// CHECK: return %[[LOSS]], %[[NEXT_W]], %[[NEXT_BUF]], %[[NEXT_STEP]]

func.func @main(%x: tensor<4x3xf32>) -> (tensor<f32> {sdc.name = "loss"}, tensor<3xf32> {sdc.name = "grad.w"}) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<3xf32>
  %0 = "sdc.mul"(%x, %w) : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %1 = "sdc.reduce_sum"(%0) : (tensor<4x3xf32>) -> tensor<f32>
  %2 = "sdc.reduce_sum"(%x) {axes = array<i64: 0>, keepdims = false} : (tensor<4x3xf32>) -> tensor<3xf32>
  return %1, %2 : tensor<f32>, tensor<3xf32>
}
