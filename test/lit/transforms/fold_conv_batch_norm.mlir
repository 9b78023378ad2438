// sdc-fold-conv-batch-norm: a batch norm after a convolution (with or without a per-channel bias add)
// becomes a convolution with a folded weight plus one bias add, both computed from the parameters;
// anything it cannot fold stays as it is.
// RUN: sdc-opt %s --split-input-file -p sdc-fold-conv-batch-norm,sdc-verify | FileCheck %s

// CHECK-LABEL: func.func @conv_then_batch_norm
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4x8x8xf32>)
// CHECK-DAG: %[[W:.*]] = "sdc.parameter"() {name = "w"}
// CHECK-DAG: %[[G:.*]] = "sdc.parameter"() {name = "gamma"}
// CHECK-DAG: %[[B:.*]] = "sdc.parameter"() {name = "beta"}
// CHECK-DAG: %[[M:.*]] = "sdc.parameter"() {name = "mean"}
// CHECK-DAG: %[[V:.*]] = "sdc.parameter"() {name = "var"}
// CHECK: %[[EPS:.*]] = "sdc.constant"() {value = dense<1.000000e-03> : tensor<1xf32>}
// CHECK: %[[VE:.*]] = "sdc.add"(%[[V]], %[[EPS]])
// CHECK: %[[SD:.*]] = "sdc.sqrt"(%[[VE]])
// CHECK: %[[SCALE:.*]] = "sdc.div"(%[[G]], %[[SD]])
// CHECK: %[[MS:.*]] = "sdc.mul"(%[[M]], %[[SCALE]])
// CHECK: %[[SHIFT:.*]] = "sdc.sub"(%[[B]], %[[MS]])
// CHECK: %[[COL:.*]] = "sdc.reshape"(%[[SCALE]]) {shape = [4, 1, 1, 1]}
// CHECK: %[[ROW:.*]] = "sdc.reshape"(%[[SHIFT]]) {shape = [1, 4, 1, 1]}
// CHECK: %[[W2:.*]] = "sdc.mul"(%[[W]], %[[COL]])
// CHECK: %[[Y:.*]] = "sdc.conv"(%[[X]], %[[W2]]) {{.*}}pads = array<i64: 1, 1, 1, 1>
// CHECK: %[[Z:.*]] = "sdc.add"(%[[Y]], %[[ROW]])
// CHECK-NOT: sdc.batch_norm
// CHECK: return %[[Z]]
func.func @conv_then_batch_norm(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x3x3xf32>
  %g = "sdc.parameter"() {name = "gamma"} : () -> tensor<4xf32>
  %b = "sdc.parameter"() {name = "beta"} : () -> tensor<4xf32>
  %m = "sdc.parameter"() {name = "mean"} : () -> tensor<4xf32>
  %v = "sdc.parameter"() {name = "var"} : () -> tensor<4xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %1 = "sdc.batch_norm"(%0, %g, %b, %m, %v) {epsilon = 1.0e-3 : f64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %1 : tensor<2x4x8x8xf32>
}

// -----

// An ONNX Conv's bias (an add of a [1, C, 1, 1] weight) joins the shift: (bias - mean) * scale + beta.
// CHECK-LABEL: func.func @conv_bias_then_batch_norm
// CHECK: %[[BIAS:.*]] = "sdc.parameter"() {name = "bias"}
// CHECK: %[[SCALE:.*]] = "sdc.div"
// CHECK: %[[SHIFT:.*]] = "sdc.sub"
// CHECK: %[[FLAT:.*]] = "sdc.reshape"(%[[BIAS]]) {shape = [4]}
// CHECK: %[[BS:.*]] = "sdc.mul"(%[[FLAT]], %[[SCALE]])
// CHECK: %[[TOTAL:.*]] = "sdc.add"(%[[BS]], %[[SHIFT]])
// CHECK: %[[ROW:.*]] = "sdc.reshape"(%[[TOTAL]]) {shape = [1, 4, 1, 1]}
// CHECK: %[[Y:.*]] = "sdc.conv"
// CHECK: %[[Z:.*]] = "sdc.add"(%[[Y]], %[[ROW]])
// CHECK-NOT: sdc.batch_norm
// CHECK: return %[[Z]]
func.func @conv_bias_then_batch_norm(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x1x1xf32>
  %bias = "sdc.parameter"() {name = "bias"} : () -> tensor<1x4x1x1xf32>
  %g = "sdc.parameter"() {name = "gamma"} : () -> tensor<4xf32>
  %b = "sdc.parameter"() {name = "beta"} : () -> tensor<4xf32>
  %m = "sdc.parameter"() {name = "mean"} : () -> tensor<4xf32>
  %v = "sdc.parameter"() {name = "var"} : () -> tensor<4xf32>
  %0 = "sdc.conv"(%x, %w) : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %1 = "sdc.add"(%0, %bias) : (tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %2 = "sdc.batch_norm"(%1, %g, %b, %m, %v) : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %2 : tensor<2x4x8x8xf32>
}

// -----

// The convolution's result is read twice: folding into it would compute the convolution twice. The
// batch norm becomes a per-channel scale and shift of the one result instead.
// CHECK-LABEL: func.func @conv_result_read_twice
// CHECK: %[[Y:.*]] = "sdc.conv"
// CHECK: %[[S:.*]] = "sdc.mul"(%[[Y]], %{{.*}})
// CHECK: %[[Z:.*]] = "sdc.add"(%[[S]], %{{.*}})
// CHECK-NOT: sdc.batch_norm
// CHECK: return %[[Y]], %[[Z]]
func.func @conv_result_read_twice(%x: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x1x1xf32>
  %g = "sdc.parameter"() {name = "gamma"} : () -> tensor<4xf32>
  %b = "sdc.parameter"() {name = "beta"} : () -> tensor<4xf32>
  %m = "sdc.parameter"() {name = "mean"} : () -> tensor<4xf32>
  %v = "sdc.parameter"() {name = "var"} : () -> tensor<4xf32>
  %0 = "sdc.conv"(%x, %w) : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %1 = "sdc.batch_norm"(%0, %g, %b, %m, %v) : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %0, %1 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Statistics computed from an input are not weights: folding them would add run-time work. Left alone.
// CHECK-LABEL: func.func @statistics_from_an_input
// CHECK: "sdc.conv"
// CHECK: "sdc.batch_norm"
func.func @statistics_from_an_input(%x: tensor<2x4x8x8xf32>, %m: tensor<4xf32>) -> tensor<2x4x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x1x1xf32>
  %g = "sdc.parameter"() {name = "gamma"} : () -> tensor<4xf32>
  %b = "sdc.parameter"() {name = "beta"} : () -> tensor<4xf32>
  %v = "sdc.parameter"() {name = "var"} : () -> tensor<4xf32>
  %0 = "sdc.conv"(%x, %w) : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %1 = "sdc.batch_norm"(%0, %g, %b, %m, %v) : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %1 : tensor<2x4x8x8xf32>
}

// -----

// A batch norm of something other than a convolution: x * scale + shift, by per-channel weights
// computed from the parameters.
// CHECK-LABEL: func.func @batch_norm_of_an_input
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4x8x8xf32>)
// CHECK-DAG: %[[G:.*]] = "sdc.parameter"() {name = "gamma"}
// CHECK-DAG: %[[B:.*]] = "sdc.parameter"() {name = "beta"}
// CHECK-DAG: %[[M:.*]] = "sdc.parameter"() {name = "mean"}
// CHECK-DAG: %[[V:.*]] = "sdc.parameter"() {name = "var"}
// CHECK: %[[EPS:.*]] = "sdc.constant"() {value = dense<9.99999974E-6> : tensor<1xf32>}
// CHECK: %[[VE:.*]] = "sdc.add"(%[[V]], %[[EPS]])
// CHECK: %[[SD:.*]] = "sdc.sqrt"(%[[VE]])
// CHECK: %[[SCALE:.*]] = "sdc.div"(%[[G]], %[[SD]])
// CHECK: %[[MS:.*]] = "sdc.mul"(%[[M]], %[[SCALE]])
// CHECK: %[[SHIFT:.*]] = "sdc.sub"(%[[B]], %[[MS]])
// CHECK: %[[ROW:.*]] = "sdc.reshape"(%[[SCALE]]) {shape = [1, 4, 1, 1]}
// CHECK: %[[XS:.*]] = "sdc.mul"(%[[X]], %[[ROW]])
// CHECK: %[[ROW2:.*]] = "sdc.reshape"(%[[SHIFT]]) {shape = [1, 4, 1, 1]}
// CHECK: %[[Z:.*]] = "sdc.add"(%[[XS]], %[[ROW2]])
// CHECK-NOT: sdc.batch_norm
// CHECK: return %[[Z]]
func.func @batch_norm_of_an_input(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %g = "sdc.parameter"() {name = "gamma"} : () -> tensor<4xf32>
  %b = "sdc.parameter"() {name = "beta"} : () -> tensor<4xf32>
  %m = "sdc.parameter"() {name = "mean"} : () -> tensor<4xf32>
  %v = "sdc.parameter"() {name = "var"} : () -> tensor<4xf32>
  %1 = "sdc.batch_norm"(%x, %g, %b, %m, %v) : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  return %1 : tensor<2x4x8x8xf32>
}

// -----

// Inception-v2's export: conv + BN, then a per-channel Mul and Add by weights. The scale folds into
// the convolution's weight and the bias, the shift into the bias: one convolution and one bias add.
// CHECK-LABEL: func.func @conv_bn_then_scale_and_shift
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4x8x8xf32>)
// CHECK-DAG: %[[S:.*]] = "sdc.parameter"() {name = "s"}
// CHECK-DAG: %[[T:.*]] = "sdc.parameter"() {name = "t"}
// CHECK: %[[FS:.*]] = "sdc.reshape"(%[[S]]) {shape = [4]}
// CHECK: %[[COL:.*]] = "sdc.reshape"(%[[FS]]) {shape = [4, 1, 1, 1]}
// CHECK: %[[W2:.*]] = "sdc.mul"(%{{.*}}, %[[COL]])
// CHECK: %[[BS:.*]] = "sdc.mul"(%{{.*}}, %[[FS]])
// CHECK: %[[ROW:.*]] = "sdc.reshape"(%[[BS]]) {shape = [1, 4, 1, 1]}
// CHECK: %[[Y:.*]] = "sdc.conv"(%[[X]], %[[W2]])
// CHECK: %[[FT:.*]] = "sdc.reshape"(%[[T]]) {shape = [4]}
// CHECK: %[[B2:.*]] = "sdc.add"(%{{.*}}, %[[FT]])
// CHECK: %[[ROW2:.*]] = "sdc.reshape"(%[[B2]]) {shape = [1, 4, 1, 1]}
// CHECK: %[[Z:.*]] = "sdc.add"(%[[Y]], %[[ROW2]])
// CHECK-NOT: "sdc.add"
// CHECK-NOT: "sdc.mul"
// CHECK: return %[[Z]]
func.func @conv_bn_then_scale_and_shift(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x3x3xf32>
  %g = "sdc.parameter"() {name = "gamma"} : () -> tensor<4xf32>
  %b = "sdc.parameter"() {name = "beta"} : () -> tensor<4xf32>
  %m = "sdc.parameter"() {name = "mean"} : () -> tensor<4xf32>
  %v = "sdc.parameter"() {name = "var"} : () -> tensor<4xf32>
  %s = "sdc.parameter"() {name = "s"} : () -> tensor<4x1x1xf32>
  %t = "sdc.parameter"() {name = "t"} : () -> tensor<1x4x1x1xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32>
  %1 = "sdc.batch_norm"(%0, %g, %b, %m, %v) : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %2 = "sdc.mul"(%1, %s) : (tensor<2x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %3 = "sdc.add"(%t, %2) : (tensor<1x4x1x1xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %3 : tensor<2x4x8x8xf32>
}

// -----

// A scale of a bare convolution goes into its weight; no bias appears.
// CHECK-LABEL: func.func @conv_then_scale
// CHECK: %[[W2:.*]] = "sdc.mul"
// CHECK: %[[Y:.*]] = "sdc.conv"(%{{.*}}, %[[W2]])
// CHECK-NOT: "sdc.add"
// CHECK: return %[[Y]]
func.func @conv_then_scale(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x1x1xf32>
  %s = "sdc.parameter"() {name = "s"} : () -> tensor<1x4x1x1xf32>
  %0 = "sdc.conv"(%x, %w) : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %1 = "sdc.mul"(%s, %0) : (tensor<1x4x1x1xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %1 : tensor<2x4x8x8xf32>
}

// -----

// Not per channel (a scale over the width), a scale from an input, a conv result read twice: left alone.
// CHECK-LABEL: func.func @scales_that_do_not_fold
// CHECK: %[[Y:.*]] = "sdc.conv"
// CHECK: "sdc.mul"(%[[Y]], %{{.*}}) : (tensor<2x4x8x8xf32>, tensor<8xf32>)
// CHECK: %[[Y2:.*]] = "sdc.conv"
// CHECK: "sdc.mul"(%[[Y2]], %{{.*}}) : (tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32>)
// CHECK: %[[Y3:.*]] = "sdc.conv"
// CHECK: "sdc.mul"(%[[Y3]], %{{.*}}) : (tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32>)
func.func @scales_that_do_not_fold(%x: tensor<2x4x8x8xf32>, %r: tensor<1x4x1x1xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<4x4x1x1xf32>
  %q = "sdc.parameter"() {name = "q"} : () -> tensor<8xf32>
  %s = "sdc.parameter"() {name = "s"} : () -> tensor<1x4x1x1xf32>
  %0 = "sdc.conv"(%x, %w) : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %1 = "sdc.mul"(%0, %q) : (tensor<2x4x8x8xf32>, tensor<8xf32>) -> tensor<2x4x8x8xf32>
  %2 = "sdc.conv"(%x, %w) : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %3 = "sdc.mul"(%2, %r) : (tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %4 = "sdc.conv"(%x, %w) : (tensor<2x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  %5 = "sdc.mul"(%4, %s) : (tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x8x8xf32>
  return %1, %3, %4, %5 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}
