// sdc-verify. MLIR verifies every op when it parses, so an invalid sdc op is reported at parse
// time (once: the pipeline never runs); what the pass adds is the check of each `sdc.dims`
// argument annotation against the argument's type, reporting every mismatch, not the first.
// RUN: sdc-opt %s -p sdc-verify --split-input-file --verify-diagnostics | FileCheck %s

// Valid IR goes through unchanged.
// CHECK-LABEL: func.func @valid
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x784xf32> {sdc.dims = #sdc.dims<["B", 784]>}, %[[S:[^:]+]]: tensor<4xi64> {sdc.dims = #sdc.dims<["N"]>})
// CHECK-NEXT: %[[R:.*]] = "sdc.relu"(%[[X]])
// CHECK-NEXT: return %[[R]]
func.func @valid(%x: tensor<?x784xf32> {sdc.dims = #sdc.dims<["B", 784]>}, %s: tensor<4xi64> {sdc.dims = #sdc.dims<["N"]>}) -> tensor<?x784xf32> {
  %0 = "sdc.relu"(%x) : (tensor<?x784xf32>) -> tensor<?x784xf32>
  return %0 : tensor<?x784xf32>
}

// -----

// Every bad annotation of every function is reported: each wrong dim of each argument.
// expected-error @+4 {{argument #0 'sdc.dims' dim 1 is 5, the type says 4}}
// expected-error @+3 {{argument #1 'sdc.dims' has 2 dims, the type has rank 1}}
// expected-error @+2 {{argument #2 'sdc.dims' dim 0 is 2, the type says 3}}
// expected-error @+1 {{argument #2 'sdc.dims' dim 1 is 2, the type says 3}}
func.func @several(%a: tensor<?x4xf32> {sdc.dims = #sdc.dims<["B", 5]>}, %b: tensor<3xf32> {sdc.dims = #sdc.dims<[3, 1]>},
                   %c: tensor<3x3xf32> {sdc.dims = #sdc.dims<[2, 2]>}) {
  return
}
// expected-error @+1 {{argument #0 'sdc.dims' has 1 dims, the type has rank 0}}
func.func @second_function(%a: tensor<f32> {sdc.dims = #sdc.dims<["S"]>}) {
  return
}

// -----

// expected-error @+1 {{argument #0 'sdc.dims' expected #sdc.dims<...>, found ["B", 4]}}
func.func @not_a_dims_attribute(%a: tensor<?x4xf32> {sdc.dims = ["B", 4]}) {
  return
}

// -----

// expected-error @+1 {{argument #0 'sdc.dims' expected an array of ints and symbol names, found "B"}}
func.func @dims_not_a_list(%a: tensor<?xf32> {sdc.dims = #sdc.dims<"B">}) {
  return
}

// -----

// expected-error @+1 {{argument #0 'sdc.dims' expected an int or a symbol name, found 1.500000e+00 : f64}}
func.func @dims_entry_not_a_dim(%a: tensor<?xf32> {sdc.dims = #sdc.dims<[1.5]>}) {
  return
}

// -----

// expected-error @+2 {{argument #0 'sdc.dims' annotates f32, which is not a ranked tensor}}
// expected-error @+1 {{argument #1 'sdc.dims' annotates tensor<*xf32>, which is not a ranked tensor}}
func.func @dims_of_a_non_tensor(%a: f32 {sdc.dims = #sdc.dims<[1]>}, %b: tensor<*xf32> {sdc.dims = #sdc.dims<["N"]>}) {
  return
}

// -----

// An invalid op fails at parse time; sdc-verify does not report it a second time.
func.func @invalid_op(%x: tensor<4xf32> {sdc.dims = #sdc.dims<[5]>}, %i: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.exp' op operand must have float element type, found i32}}
  %0 = "sdc.exp"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %x : tensor<4xf32>
}
