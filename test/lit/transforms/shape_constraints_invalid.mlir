// sdc-shape-constraints: every error the pass reports. A contradiction is an error at the op
// whose constraint closed it, with a note at each op (or input) whose constraint takes part.
// RUN: sdc-opt %s -p sdc-shape-constraints --split-input-file --verify-diagnostics

// N + M == N needs M == 0, but M is a size (>= 1).
// expected-note @+1 {{conflicting constraint: M >= 1 (input 'b' dim 0 is a size)}}
func.func @concat_then_add(%a: tensor<?xf32> {sdc.name = "a", sdc.dims = #sdc.dims<["N"]>},
                           %b: tensor<?xf32> {sdc.name = "b", sdc.dims = #sdc.dims<["M"]>}) -> tensor<?xf32> {
  %0 = "sdc.concat"(%a, %b) {axis = 0 : i64} : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  // expected-error @+1 {{'sdc.add' op shape constraints contradict: dim 0 of rhs (N) must equal dim 0 of lhs (M + N) to broadcast (a symbolic dim never stretches); M >= 1 is false with M = 0}}
  %1 = "sdc.add"(%0, %a) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %1 : tensor<?xf32>
}

// -----

// Two weights want different contracting dims of the same input.
func.func @two_weights(%x: tensor<?x?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", "K"]>}) -> tensor<?x10xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<64x10xf32>
  %v = "sdc.parameter"() {name = "v"} : () -> tensor<32x10xf32>
  // expected-note @+1 {{conflicting constraint: K == 64 (contracting dims differ: lhs has K, rhs has 64)}}
  %0 = "sdc.matmul"(%x, %w) : (tensor<?x?xf32>, tensor<64x10xf32>) -> tensor<?x10xf32>
  // expected-error @+1 {{'sdc.matmul' op shape constraints contradict: contracting dims differ: lhs has K, rhs has 32; K == 32 is false with K = 64}}
  %1 = "sdc.matmul"(%x, %v) : (tensor<?x?xf32>, tensor<32x10xf32>) -> tensor<?x10xf32>
  %2 = "sdc.add"(%0, %1) : (tensor<?x10xf32>, tensor<?x10xf32>) -> tensor<?x10xf32>
  return %2 : tensor<?x10xf32>
}

// -----

// Halving N and halving N - 1: N cannot be both even and odd.
func.func @odd_and_even(%x: tensor<?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N"]>}) -> tensor<?xf32> {
  // expected-note @+1 {{conflicting constraint: N % 2 == 0 (dim 0 of size N does not split into 2 equal parts)}}
  %0:2 = "sdc.split"(%x) {axis = 0 : i64, parts = 2 : i64} : (tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  %1 = "sdc.slice"(%x) {ends = array<i64: 9223372036854775807>, starts = array<i64: 1>} : (tensor<?xf32>) -> tensor<?xf32>
  // expected-error @+1 {{'sdc.split' op shape constraints contradict: dim 0 of size N - 1 does not split into 2 equal parts; N cannot be 0 modulo 2 and 1 modulo 2}}
  %2:2 = "sdc.split"(%1) {axis = 0 : i64, parts = 2 : i64} : (tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>)
  return %2#0 : tensor<?xf32>
}

// -----

// A window of 9 over a dim a recorded guard keeps at most 4 long.
// expected-note @+1 {{conflicting constraint: L <= 4 (L is at most 4)}}
func.func @window_too_big(%x: tensor<?x3x?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N", 3, "L"]>}) -> tensor<?x8x?xf32>
    attributes {sdc.guards = [#sdc.guard<"L <= 4", "L is at most 4">]} {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x3x9xf32>
  // expected-error @+1 {{'sdc.conv' op shape constraints contradict: the window (kernel 9, dilation 1) must fit in the input of size L padded by 0+0; L would have to be at least 9 and at most 4}}
  %0 = "sdc.conv"(%x, %w) : (tensor<?x3x?xf32>, tensor<8x3x9xf32>) -> tensor<?x8x?xf32>
  return %0 : tensor<?x8x?xf32>
}

// -----

// Declared result types are constraints too: 3 + N == 7 makes N 4, and then N//2 is 2, not 3.
func.func @declared_result(%x: tensor<?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N"]>}) -> tensor<3xf32> {
  // expected-note @+1 {{conflicting constraint: N//2 == 3 (result #0 dim 0 is declared 3)}}
  %0:2 = "sdc.split"(%x) {axis = 0 : i64, parts = 2 : i64} : (tensor<?xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  // expected-error @+1 {{'sdc.concat' op shape constraints contradict: result #0 dim 0 is declared 7; N//2 == 3 is false with N = 4}}
  %1 = "sdc.concat"(%0#0, %x) {axis = 0 : i64} : (tensor<3xf32>, tensor<?xf32>) -> tensor<7xf32>
  return %0#0 : tensor<3xf32>
}

// -----

// Only a conjunction of guards: two of them that cannot both hold.
// expected-error @+2 {{shape constraints contradict: the second; B would have to be at least 9 and at most 4}}
// expected-note @+1 {{conflicting constraint: B <= 4 (the first)}}
func.func @guards_only(%x: tensor<?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B"]>}) -> tensor<?xf32>
    attributes {sdc.guards = [#sdc.guard<"B <= 4", "the first">, #sdc.guard<"B >= 9", "the second">]} {
  return %x : tensor<?xf32>
}

// -----

// expected-error @+1 {{input 'x' dim 0: 'N ** 2' is not a dim expression (allowed: ints, names, + - * // % and parentheses)}}
func.func @bad_dims_text(%x: tensor<?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N ** 2"]>}) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}

// -----

func.func @bad_shape_attr(%x: tensor<?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N"]>}) -> tensor<?xf32> {
  // expected-error @+1 {{'sdc.reshape' op 'N / 2' is not a dim expression (allowed: ints, names, + - * // % and parentheses)}}
  %0 = "sdc.reshape"(%x) {shape = ["N / 2"]} : (tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
