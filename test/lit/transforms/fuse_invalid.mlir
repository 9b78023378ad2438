// The verifier of the kernel-group ops sdc-fuse builds (sdc/dialect/structure.py): sdc.fusion and
// its terminator sdc.yield.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.fusion' op takes no operands (its body reads values from above), found 1}}
  %0 = "sdc.fusion"(%x) ({
    %1 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @result_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.fusion' op has 2 results but its body yields 1 values}}
  %0:2 = "sdc.fusion"() ({
    %1 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0 : tensor<4xf32>
}

// -----

func.func @result_type(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'sdc.fusion' op result #0 has type tensor<8xf32> but the body yields tensor<4xf32>}}
  %0 = "sdc.fusion"() ({
    %1 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.fusion' op kind must be one of elementwise, reduction, contraction, convolution, pooling, layout, attention, found "magic"}}
  %0 = "sdc.fusion"() ({
    %1 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "magic"} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @nested(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.fusion' op cannot hold another 'sdc.fusion'}}
  %0 = "sdc.fusion"() ({
    %1 = "sdc.fusion"() ({
      %2 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
      "sdc.yield"(%2) : (tensor<4xf32>) -> ()
    }) : () -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @foreign_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.fusion' op body holds only sdc ops, found 'arith.addf'}}
  %0 = "sdc.fusion"() ({
    %1 = "arith.addf"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    "sdc.yield"(%1) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @block_arguments(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.fusion' op body block takes no arguments, found 1}}
  %0 = "sdc.fusion"() ({
  ^bb0(%a: tensor<4xf32>):
    "sdc.yield"(%a) : (tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @yield_outside(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.yield' op must be the terminator of an 'sdc.fusion' body}}
  "sdc.yield"(%x) : (tensor<4xf32>) -> ()
}
