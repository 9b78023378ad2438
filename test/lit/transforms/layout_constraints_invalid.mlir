// sdc-layout-constraints: every request it cannot honour is an error at the op (or function) that
// made it; a bad target is a usage error before any input is read.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics -p 'sdc-layout-constraints{target=cuda}'
// RUN: not sdc-opt %s -p 'sdc-layout-constraints{target=tpu}' 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: error: pass 'sdc-layout-constraints' option 'target': unknown target 'tpu' (targets: cpu, cuda)

// A reshape reads and writes row-major tensors only.
func.func @reshape_nhwc(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  // expected-error @+1 {{'sdc.reshape' cannot produce layout [0, 2, 3, 1] on target cuda (it produces [0, 1, 2, 3])}}
  %0 = "sdc.reshape"(%x) {shape = [2, 3, 4, 5], sdc.layout = #sdc.layout<array<i64: 0, 2, 3, 1>>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

// A convolution runs NCHW or NHWC, nothing else.
func.func @conv_other_order(%x: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x8x1x1xf32>
  // expected-error @+1 {{'sdc.conv' cannot produce layout [0, 3, 1, 2] on target cuda (it produces [0, 1, 2, 3] or [0, 2, 3, 1])}}
  %0 = "sdc.conv"(%x, %w) {sdc.layout = #sdc.layout<array<i64: 0, 3, 1, 2>>} : (tensor<1x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x8x8xf32>
  return %0 : tensor<1x8x8x8xf32>
}

// -----

func.func @not_a_permutation(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  // expected-error @+1 {{requested layout [0, 2, 1] of result #0 is not a permutation of its 4 dims}}
  %0 = "sdc.exp"(%x) {sdc.layout = #sdc.layout<array<i64: 0, 2, 1>>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

func.func @not_a_layout(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32> {
  // expected-error @+1 {{'sdc.layout' of result #0 expected #sdc.layout<array<i64: ...>>, found "nhwc"}}
  %0 = "sdc.exp"(%x) {sdc.layout = "nhwc"} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

func.func @layouts_for_results(%x: tensor<2x4x4x4xf32>) -> tensor<2x2x4x4xf32> {
  // expected-error @+1 {{'sdc.layout' has 3 layouts, the op has 2 results}}
  %0:2 = "sdc.split"(%x) {axis = 1 : i64, parts = 2 : i64, sdc.layout = [#sdc.layout<array<i64: 0, 1, 2, 3>>, #sdc.layout<array<i64: 0, 1, 2, 3>>, #sdc.layout<array<i64: 0, 1, 2, 3>>]} : (tensor<2x4x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>)
  return %0#0 : tensor<2x2x4x4xf32>
}

// -----

// expected-error @+1 {{requested layout [1, 0] of argument #0 is not a permutation of its 4 dims}}
func.func @argument_request(%x: tensor<2x3x4x5xf32> {sdc.layout = #sdc.layout<array<i64: 1, 0>>}) -> tensor<2x3x4x5xf32> {
  return %x : tensor<2x3x4x5xf32>
}

// -----

// expected-error @+1 {{requested layout [0, 1, 2] of result #0 is not a permutation of its 4 dims}}
func.func @result_request(%x: tensor<2x3x4x5xf32>) -> (tensor<2x3x4x5xf32> {sdc.layout = #sdc.layout<array<i64: 0, 1, 2>>}) {
  return %x : tensor<2x3x4x5xf32>
}

// -----

// Layouts are chosen before fusion: the pass does not look inside kernel groups.
func.func @after_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sdc-layout-constraints runs before sdc-fuse: found 'sdc.fusion'}}
  %0 = "sdc.fusion"() ({
    %1 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
