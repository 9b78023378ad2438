// Op attributes: unknown and missing ones (read_attrs in sdc/dialect/dialect.py) and one case per
// attribute kind given the wrong kind of value (to_python in sdc/dialect/attrs.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @unknown_none_known(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.neg' op has unknown attribute 'alpha' (known: none)}}
  %0 = "sdc.neg"(%x) {alpha = 1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unknown_some_known(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.gelu' op has unknown attribute 'approx' (known: 'approximate')}}
  %0 = "sdc.gelu"(%x) {approx = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @missing_required(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{'sdc.transpose' op requires attribute 'perm'}}
  %0 = "sdc.transpose"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @int_given_float(%x: tensor<4x5xf32>) -> tensor<4xi64> {
  // expected-error @+1 {{'sdc.argmax' op attribute 'axis' expected an integer attribute, found 1.000000e+00 : f64}}
  %0 = "sdc.argmax"(%x) {axis = 1.0 : f64} : (tensor<4x5xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @int_given_bool(%x: tensor<4x5xf32>) -> tensor<4xi64> {
  // expected-error @+1 {{'sdc.argmax' op attribute 'axis' expected an integer attribute, found true}}
  %0 = "sdc.argmax"(%x) {axis = true} : (tensor<4x5xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @float_given_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.leaky_relu' op attribute 'alpha' expected a float attribute, found "0.1"}}
  %0 = "sdc.leaky_relu"(%x) {alpha = "0.1"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @bool_given_int(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'sdc.matmul' op attribute 'transpose_rhs' expected true or false, found 1 : i64}}
  %0 = "sdc.matmul"(%a, %a) {transpose_rhs = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @str_given_int() -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.parameter' op attribute 'name' expected a string attribute, found 3 : i64}}
  %0 = "sdc.parameter"() {name = 3 : i64} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @enum_not_a_choice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.gelu' op attribute 'approximate' expected one of 'none', 'tanh', found 'fast'}}
  %0 = "sdc.gelu"(%x) {approximate = "fast"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @ints_given_array(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{'sdc.transpose' op attribute 'perm' expected array<i64: ...>, found [1, 0]}}
  %0 = "sdc.transpose"(%x) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @ints_given_i32_array(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{'sdc.transpose' op attribute 'perm' expected array<i64: ...>, found array<i32: 1, 0>}}
  %0 = "sdc.transpose"(%x) {perm = array<i32: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @strs_given_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.all_reduce' op attribute 'mesh_axes' expected an array of strings (["a", "b"]), found "tp"}}
  %0 = "sdc.all_reduce"(%x) {mesh_axes = "tp"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @strs_given_ints(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.all_reduce' op attribute 'mesh_axes' expected an array of strings (["a", "b"]), found 1 : i64}}
  %0 = "sdc.all_reduce"(%x) {mesh_axes = [1]} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @dtype_given_string(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'sdc.cast' op attribute 'dtype' expected an element type (f32, i64, ...), found "f16"}}
  %0 = "sdc.cast"(%x) {dtype = "f16"} : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @dtype_unsupported(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.cast' op attribute 'dtype' expected an element type (one of f16, bf16, f32, f64, i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64), found index}}
  %0 = "sdc.cast"(%x) {dtype = index} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @shape_given_dense_array(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'sdc.reshape' op attribute 'shape' expected an array of ints and symbol names, found array<i64: 2, 2>}}
  %0 = "sdc.reshape"(%x) {shape = array<i64: 2, 2>} : (tensor<4xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @shape_given_float_dim(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.reshape' op attribute 'shape' expected an int or a symbol name, found 4.000000e+00 : f64}}
  %0 = "sdc.reshape"(%x) {shape = [4.0 : f64]} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @dense_given_array() -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.constant' op attribute 'value' expected a dense elements attribute, found [1.000000e+00, 2.000000e+00]}}
  %0 = "sdc.constant"() {value = [1.0, 2.0]} : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dense_unsupported_element_type() -> tensor<2xf32> {
  // expected-error @+1 {{'sdc.constant' op attribute 'value' unsupported constant element type index}}
  %0 = "sdc.constant"() {value = dense<1> : tensor<2xindex>} : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @layout_given_array(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'sdc.layout_cast' op attribute 'layout' expected #sdc.layout<array<i64: ...>>, found array<i64: 1, 0>}}
  %0 = "sdc.layout_cast"(%x) {layout = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @layout_of_a_list(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'sdc.layout_cast' op attribute 'layout' expected #sdc.layout<array<i64: ...>>, found #sdc.layout<[1, 0]>}}
  %0 = "sdc.layout_cast"(%x) {layout = #sdc.layout<[1, 0]>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @floats_given_i64_array(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x16xf32> {
  // expected-error @+1 {{'sdc.resize' op attribute 'scales' expected array<f64: ...>, found array<i64: 2>}}
  %0 = "sdc.resize"(%x) {axes = array<i64: 3>, scales = array<i64: 2>, sizes = [16]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x16xf32>
  return %0 : tensor<1x3x8x16xf32>
}
