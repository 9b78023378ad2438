// The verifier of sdc.shard (sdc/dialect/ops/sharding.py) and of sdc.all_slice (collectives.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sdc.shard' op sharding [dp] has 1 dims, the operand has rank 2}}
  %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["dp"]], []>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @repeated(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sdc.shard' op sharding [dp, -] partial(dp) uses mesh axis 'dp' more than once}}
  %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["dp"], []], ["dp"]>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @not_a_sharding(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sdc.shard' op attribute 'sharding' expected #sdc.sharding<[["dp"], []], []>, found ["dp"]}}
  %0 = "sdc.shard"(%x) {sharding = ["dp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 4>>} {
  func.func @indivisible(%x: tensor<6x4xf32>) -> tensor<6x1xf32> {
    // expected-error @+1 {{'sdc.all_slice' op dim 0 of size 6 is not divisible by the group size 4}}
    %0 = "sdc.all_slice"(%x) {axis = 0 : i64, mesh_axes = ["tp"]} : (tensor<6x4xf32>) -> tensor<6x1xf32>
    return %0 : tensor<6x1xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["tp"], array<i64: 2>>} {
  func.func @wrong_result(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error @+1 {{'sdc.all_slice' op result #0 dim 1 is 4, expected 2}}
    %0 = "sdc.all_slice"(%x) {axis = 1 : i64, mesh_axes = ["tp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
