// sdc-sharding-propagation: every sharding that cannot work is an error at the op (or function)
// that asks for it; the other ops are left alone.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics -p sdc-sharding-propagation

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @indivisible(%x: tensor<7x3xf32>) -> tensor<7x3xf32> {
    // expected-error @+1 {{'sdc.shard' op result cannot be sharded [dp, -]: dim 0 of size 7 is not divisible by mesh axis 'dp' (2 devices)}}
    %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["dp"], []], []>} : (tensor<7x3xf32>) -> tensor<7x3xf32>
    return %0 : tensor<7x3xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @unknown_axis(%x: tensor<8x3xf32>) -> tensor<8x3xf32> {
    // expected-error @+1 {{'sdc.shard' op result cannot be sharded [pp, -]: mesh axis 'pp' is not in the mesh (dp=2)}}
    %0 = "sdc.shard"(%x) {sharding = #sdc.sharding<[["pp"], []], []>} : (tensor<8x3xf32>) -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  // expected-note @+2 {{the sharding of input 'arg0' is here}}
  // expected-note @+1 {{the sharding of input 'arg1' is here}}
  func.func @conflict(%x: tensor<8x8xf32> {sdc.sharding = #sdc.sharding<[["dp"], []], []>}, %y: tensor<8x8xf32> {sdc.sharding = #sdc.sharding<[["tp"], []], []>}) -> tensor<8x8xf32> {
    // expected-error @+1 {{'sdc.add' op conflicting sharding annotations meet at this op: the sharding of input 'arg0' splits a dim over dp, the sharding of input 'arg1' splits it over tp}}
    %0 = "sdc.add"(%x, %y) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  // expected-error @+1 {{input 'arg0' cannot be sharded [dp]: it has 1 dims, the tensor has rank 2}}
  func.func @input_rank(%x: tensor<8x3xf32> {sdc.sharding = #sdc.sharding<[["dp"]], []>}) -> tensor<8x3xf32> {
    return %x : tensor<8x3xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @twice(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error @+1 {{'sdc.exp' op result #0 cannot be sharded [dp, dp]: mesh axis 'dp' is used more than once}}
    %0 = "sdc.exp"(%x) {sdc.sharding = #sdc.sharding<[["dp"], ["dp"]], []>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @count(%x: tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>) {
    // expected-error @+1 {{'sdc.split' op 'sdc.sharding' gives 1 shardings for 2 results}}
    %0:2 = "sdc.split"(%x) {axis = 1 : i64, parts = 2 : i64, sdc.sharding = [#sdc.sharding<[["dp"], []], []>]} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>)
    return %0#0, %0#1 : tensor<8x2xf32>, tensor<8x2xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @malformed(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error @+1 {{'sdc.exp' op result #0: 'sdc.sharding' expected #sdc.sharding<[["dp"], []], []>, found "dp"}}
    %0 = "sdc.exp"(%x) {sdc.sharding = "dp"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], array<i64: 2>>} {
  func.func @already_partitioned(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    // expected-error @+1 {{'sdc.all_reduce' op: the program already has collectives; sharding propagation and partitioning take the program for one device}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["dp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
