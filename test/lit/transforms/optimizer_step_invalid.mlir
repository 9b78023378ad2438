// sdc-optimizer-step: it needs grad.* results (sdc-autodiff first), each of a parameter, and the
// input names it adds (lr, step, the state names) must be free.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics -p "sdc-optimizer-step{optimizer=adamw}"

// expected-error @+1 {{sdc-optimizer-step runs after sdc-autodiff: the entry function has no 'grad.*' results}}
func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
  %0 = "sdc.reduce_sum"(%x) : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// expected-error @+1 {{sdc-optimizer-step: result 'grad.q' has no sdc.parameter named 'q' (only parameters are trained)}}
func.func @main(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32> {sdc.name = "grad.q"}) {
  %0 = "sdc.reduce_sum"(%x) : (tensor<3xf32>) -> tensor<f32>
  return %0, %x : tensor<f32>, tensor<3xf32>
}

// -----

// expected-error @+1 {{sdc-optimizer-step: the entry function already has an input named 'lr'}}
func.func @main(%x: tensor<3xf32> {sdc.name = "lr"}) -> (tensor<f32>, tensor<3xf32> {sdc.name = "grad.w"}) {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<3xf32>
  %0 = "sdc.reduce_sum"(%w) : (tensor<3xf32>) -> tensor<f32>
  return %0, %x : tensor<f32>, tensor<3xf32>
}
