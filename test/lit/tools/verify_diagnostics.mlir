// --verify-diagnostics: each expected-error/-note names a diagnostic by its line (the comment's
// own line, @+N, @-N, @above, @below) and a substring of its message. When every diagnostic is
// expected and every expectation met, sdc-opt exits 0 (lit fails this test otherwise).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics -p sdc-verify

func.func @same_line(%i: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "sdc.exp"(%i) : (tensor<4xi32>) -> tensor<4xi32> // expected-error {{must have float element type}}
  return %0 : tensor<4xi32>
}

// -----

func.func @next_lines(%i: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+3 {{'sdc.log' op operand must have float element type, found i32}}


  %0 = "sdc.log"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @previous_line(%i: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "sdc.sin"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  // expected-error @-1 {{'sdc.sin' op}}
  return %0 : tensor<4xi32>
}

// -----

func.func @above(%i: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "sdc.cos"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  // expected-error @above {{'sdc.cos' op}}
  return %0 : tensor<4xi32>
}

// -----

func.func @below(%i: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @below {{'sdc.tan' op}}
  %0 = "sdc.tan"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// An error and its note, each on its own line.
func.func @note(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operand #0 does not dominate this use}}
  %0 = "sdc.neg"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-note @+1 {{operand defined here}}
  %1 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Several diagnostics on one line, from a pass: one expectation each.
// expected-error @+2 {{argument #0 'sdc.dims' dim 0 is 5, the type says 4}}
// expected-error @+1 {{argument #1 'sdc.dims' has 2 dims, the type has rank 1}}
func.func @two_on_one_line(%a: tensor<4xf32> {sdc.dims = #sdc.dims<[5]>}, %b: tensor<4xf32> {sdc.dims = #sdc.dims<[4, 1]>}) {
  return
}

// -----

// A chunk with no diagnostic and no expectation passes too.
func.func @clean(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
