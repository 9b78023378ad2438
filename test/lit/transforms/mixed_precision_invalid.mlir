// sdc-mixed-precision: what it refuses. An unknown precision is a usage error before any input is
// read; a module that already computes in another precision, and a fused module, are errors at the op.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics -p 'sdc-mixed-precision{precision=bf16}'
// RUN: not sdc-opt %s -p 'sdc-mixed-precision{precision=fp8}' 2>&1 | FileCheck %s --check-prefix=PRECISION
// PRECISION: error: pass 'sdc-mixed-precision' option 'precision': unknown precision 'fp8' (precisions: bf16, f16, tf32, f32)

// expected-error @+1 {{the module already computes in f16, cannot change it to bf16}}
module attributes {sdc.precision = "f16"} {
  func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

func.func @already_fused(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sdc-mixed-precision runs before sdc-fuse: found 'sdc.fusion'}}
  %0 = "sdc.fusion"() ({
    %1 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
