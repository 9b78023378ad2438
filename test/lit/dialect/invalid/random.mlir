// Shape rule of sdc.random_uniform (sdc/dialect/ops/random.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @seed_not_rank_0(%seed: tensor<2xi64>, %offset: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.random_uniform' op seed must be a rank-0 integer tensor, found tensor<2xi64>}}
  %0 = "sdc.random_uniform"(%seed, %offset) {shape = [4]} : (tensor<2xi64>, tensor<i64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @float_offset(%seed: tensor<i64>, %offset: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.random_uniform' op offset must be a rank-0 integer tensor, found tensor<f32>}}
  %0 = "sdc.random_uniform"(%seed, %offset) {shape = [4]} : (tensor<i64>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @integer_dtype(%seed: tensor<i64>, %offset: tensor<i64>) -> tensor<4xi32> {
  // expected-error @+1 {{'sdc.random_uniform' op dtype must be a float type, found i32}}
  %0 = "sdc.random_uniform"(%seed, %offset) {shape = [4], dtype = i32} : (tensor<i64>, tensor<i64>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @negative_dim(%seed: tensor<i64>, %offset: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.random_uniform' op shape [-1] has a negative entry}}
  %0 = "sdc.random_uniform"(%seed, %offset) {shape = [-1]} : (tensor<i64>, tensor<i64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
