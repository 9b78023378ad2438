// sdc-spmd-partition reads the same annotations as sdc-sharding-propagation (its errors are tested
// in sharding_propagation_invalid.mlir) and refuses a program it cannot partition.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics -p sdc-spmd-partition

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @fused(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error @+1 {{'sdc.fusion' op: sharding runs before fusion (sdc-fuse); partition the program first}}
    %0 = "sdc.fusion"() ({
      %1 = "sdc.exp"(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
      "sdc.yield"(%1) : (tensor<8x4xf32>) -> ()
    }) {kind = "elementwise"} : () -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @not_sdc(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error @+1 {{'func.call' op: cannot shard an op that is not an sdc op}}
    %0 = func.call @not_sdc(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @indivisible_output(%x: tensor<8x4xf32>) -> (tensor<8x3xf32> {sdc.sharding = #sdc.sharding<[[], ["tp"]], []>}) {
    %0 = "sdc.slice"(%x) {starts = array<i64: 0>, ends = array<i64: 3>, axes = array<i64: 1>} : (tensor<8x4xf32>) -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }
  // expected-error @-4 {{output #0 cannot be sharded [-, tp]: dim 1 of size 3 is not divisible by mesh axis 'tp' (2 devices)}}
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @partial_from_whole(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = "sdc.exp"(%x) {sdc.sharding = #sdc.sharding<[[], []], []>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    // expected-error @+1 {{asks for [-, -] partial(tp), but result of 'sdc.exp'}}
    %1 = "sdc.shard"(%0) {sharding = #sdc.sharding<[[], []], ["tp"]>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
}
