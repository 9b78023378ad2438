// Errors the MLIR parser reports before any sdc verifier runs: unknown ops and attributes of the
// sdc dialect, and malformed sdc attributes (IRDL checks their parameters).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{unregistered operation 'sdc.nope' found in dialect ('sdc') that does not allow unknown operations}}
  %0 = "sdc.nope"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unknown_dialect(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operation being parsed with an unregistered dialect}}
  %0 = "nope.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unknown_sdc_attribute(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected dynamic attribute}}
  %0 = "sdc.neg"(%x) {sdc.tag = #sdc.nope<1>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @layout_parameter_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected 1 type arguments, but had 2}}
  %0 = "sdc.layout_cast"(%x) {layout = #sdc.layout<array<i64: 0>, array<i64: 0>>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @undefined_value() -> tensor<4xf32> {
  // expected-error @+1 {{use of undeclared SSA value name}}
  %0 = "sdc.neg"(%nope) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @operand_type_mismatch(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @-1 {{prior use here}}
  // expected-error @+1 {{use of value '%x' expects different type than prior uses: 'tensor<4xf16>' vs 'tensor<4xf32>'}}
  %0 = "sdc.neg"(%x) : (tensor<4xf16>) -> tensor<4xf16>
  return %x : tensor<4xf32>
}
