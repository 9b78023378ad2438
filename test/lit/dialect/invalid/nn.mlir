// Shape rules of sdc/dialect/ops/nn.py: linear_attention, conv_transpose, deform_conv.
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @query_not_float(%q: tensor<2x4x3x8xi32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xi32> {
  // expected-error @+1 {{'sdc.linear_attention' op query must have float element type, found i32}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xi32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xi32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xi32>
}

// -----

func.func @beta_not_float(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xi8>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op beta must have float element type, found i8}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xi8>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @value_rank(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op value must have rank 4, found rank 3}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @key_type(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf16>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op key element type f16 differs from query element type f32}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf16>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @key_batch(%q: tensor<2x4x3x8xf32>, %k: tensor<3x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op query batch is 2, key batch is 3}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<3x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @value_batch(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<1x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op query batch is 2, value batch is 1}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<1x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @state_batch(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<4x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op query batch is 2, state batch is 4}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<4x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @value_heads(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x3x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op key has 2 heads, value has 3}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x3x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @state_heads(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x1x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op key has 2 heads, state has 1}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x1x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @grouped_heads(%q: tensor<2x4x3x8xf32>, %k: tensor<2x3x3x8xf32>, %v: tensor<2x3x3x16xf32>, %s: tensor<2x3x8x16xf32>, %d: tensor<2x3x3x8xf32>, %b: tensor<2x3x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op query heads (4) must be a multiple of key/value heads (3)}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x3x3x8xf32>, tensor<2x3x3x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x3x8xf32>, tensor<2x3x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x3x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @key_steps(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op query has 3 steps, key has 5}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @value_steps(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x2x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op query has 3 steps, value has 2}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x2x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @key_head_size(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x4xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op query head size is 8, key head size is 4}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @state_key_dim(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x6x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op key head size is 8, state dim 2 is 6}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @state_value_dim(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x12xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op value head size is 16, state dim 3 is 12}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x12xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x12xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @decay_dim(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x4xf32>, %b: tensor<2x2x3x1xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op decay dim 3 (key dim) is 4, expected 1 or 8}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x1xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @beta_dim(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x3x8xf32>, %v: tensor<2x2x3x16xf32>, %s: tensor<2x2x8x16xf32>, %d: tensor<2x2x3x8xf32>, %b: tensor<2x2x3x2xf32>) -> tensor<2x4x3x16xf32> {
  // expected-error @+1 {{'sdc.linear_attention' op beta dim 3 (1) is 2, expected 1 or 1}}
  %0:2 = "sdc.linear_attention"(%q, %k, %v, %s, %d, %b) {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x3x8xf32>, tensor<2x2x3x2xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x2x8x16xf32>)
  return %0#0 : tensor<2x4x3x16xf32>
}

// -----

func.func @conv_transpose_types(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf16>) -> tensor<1x2x7x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op operand element types differ: input is f32, weight is f16}}
  %0 = "sdc.conv_transpose"(%x, %w) : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf16>) -> tensor<1x2x7x7xf32>
  return %0 : tensor<1x2x7x7xf32>
}

// -----

func.func @conv_transpose_float(%x: tensor<1x4x5x5xi32>, %w: tensor<4x2x3x3xi32>) -> tensor<1x2x7x7xi32> {
  // expected-error @+1 {{'sdc.conv_transpose' op operands must have float element type, found i32}}
  %0 = "sdc.conv_transpose"(%x, %w) : (tensor<1x4x5x5xi32>, tensor<4x2x3x3xi32>) -> tensor<1x2x7x7xi32>
  return %0 : tensor<1x2x7x7xi32>
}

// -----

func.func @conv_transpose_input_rank(%x: tensor<1x4xf32>, %w: tensor<4x2xf32>) -> tensor<1x2xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op input must have rank >= 3 (N, C, spatial...), found rank 2}}
  %0 = "sdc.conv_transpose"(%x, %w) : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  return %0 : tensor<1x2xf32>
}

// -----

func.func @conv_transpose_weight_rank(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x2x7x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op weight rank must equal input rank 4, found 3}}
  %0 = "sdc.conv_transpose"(%x, %w) : (tensor<1x4x5x5xf32>, tensor<4x2x3xf32>) -> tensor<1x2x7x7xf32>
  return %0 : tensor<1x2x7x7xf32>
}

// -----

func.func @conv_transpose_groups(%x: tensor<1x4x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x2x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op groups must be >= 1, found 0}}
  %0 = "sdc.conv_transpose"(%x, %w) {groups = 0 : i64} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x2x7xf32>
  return %0 : tensor<1x2x7xf32>
}

// -----

func.func @conv_transpose_channels(%x: tensor<1x6x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x2x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op input has 6 channels, weight dim 0 (input channels) is 4}}
  %0 = "sdc.conv_transpose"(%x, %w) : (tensor<1x6x5xf32>, tensor<4x2x3xf32>) -> tensor<1x2x7xf32>
  return %0 : tensor<1x2x7xf32>
}

// -----

func.func @conv_transpose_groups_divide(%x: tensor<1x4x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x6x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op input channels (4) must be divisible by groups (3)}}
  %0 = "sdc.conv_transpose"(%x, %w) {groups = 3 : i64} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x6x7xf32>
  return %0 : tensor<1x6x7xf32>
}

// -----

func.func @conv_transpose_output_padding_length(%x: tensor<1x4x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x2x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op 'output_padding' has 2 entries, expected 1 for 1 spatial dims}}
  %0 = "sdc.conv_transpose"(%x, %w) {output_padding = array<i64: 0, 0>} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x2x7xf32>
  return %0 : tensor<1x2x7xf32>
}

// -----

func.func @conv_transpose_strides(%x: tensor<1x4x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x2x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op strides must be >= 1, found [0]}}
  %0 = "sdc.conv_transpose"(%x, %w) {strides = array<i64: 0>} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x2x7xf32>
  return %0 : tensor<1x2x7xf32>
}

// -----

func.func @conv_transpose_dilations(%x: tensor<1x4x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x2x7xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op dilations must be >= 1, found [-1]}}
  %0 = "sdc.conv_transpose"(%x, %w) {dilations = array<i64: -1>} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x2x7xf32>
  return %0 : tensor<1x2x7xf32>
}

// -----

func.func @conv_transpose_output_padding(%x: tensor<1x4x5xf32>, %w: tensor<4x2x3xf32>) -> tensor<1x2x6xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op output_padding must be >= 0, found [-1]}}
  %0 = "sdc.conv_transpose"(%x, %w) {output_padding = array<i64: -1>} : (tensor<1x4x5xf32>, tensor<4x2x3xf32>) -> tensor<1x2x6xf32>
  return %0 : tensor<1x2x6xf32>
}

// -----

func.func @conv_transpose_cropped_away(%x: tensor<1x4x1xf32>, %w: tensor<4x2x1xf32>) -> tensor<1x2x1xf32> {
  // expected-error @+1 {{'sdc.conv_transpose' op spatial dim 0 of the result would have size 0}}
  %0 = "sdc.conv_transpose"(%x, %w) {pads = array<i64: 1, 0>} : (tensor<1x4x1xf32>, tensor<4x2x1xf32>) -> tensor<1x2x1xf32>
  return %0 : tensor<1x2x1xf32>
}

// -----

func.func @deform_conv_types(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x18x3x3xf16>, %m: tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op offset element type f16 differs from input element type f32}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x18x3x3xf16>, tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_float(%x: tensor<1x2x5x5xi32>, %w: tensor<4x2x3x3xi32>, %o: tensor<1x18x3x3xi32>, %m: tensor<1x9x3x3xi32>) -> tensor<1x4x3x3xi32> {
  // expected-error @+1 {{'sdc.deform_conv' op input must have float element type, found i32}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x5x5xi32>, tensor<4x2x3x3xi32>, tensor<1x18x3x3xi32>, tensor<1x9x3x3xi32>) -> tensor<1x4x3x3xi32>
  return %0 : tensor<1x4x3x3xi32>
}

// -----

func.func @deform_conv_rank(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x18x3x3xf32>, %m: tensor<9x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op mask must have rank 4 (2-D deformable convolution), found rank 3}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x18x3x3xf32>, tensor<9x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_groups(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x18x3x3xf32>, %m: tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op groups and offset_groups must be >= 1, found 1 and 0}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) {offset_groups = 0 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x18x3x3xf32>, tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_channels(%x: tensor<1x3x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x18x3x3xf32>, %m: tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op input channels (3) must equal weight channels per group (2) times groups (1)}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x3x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x18x3x3xf32>, tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_output_channels(%x: tensor<1x4x5x5xf32>, %w: tensor<5x2x3x3xf32>, %o: tensor<1x18x3x3xf32>, %m: tensor<1x9x3x3xf32>) -> tensor<1x5x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op output channels (5) must be divisible by groups (2)}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) {groups = 2 : i64} : (tensor<1x4x5x5xf32>, tensor<5x2x3x3xf32>, tensor<1x18x3x3xf32>, tensor<1x9x3x3xf32>) -> tensor<1x5x3x3xf32>
  return %0 : tensor<1x5x3x3xf32>
}

// -----

func.func @deform_conv_offset_groups(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x54x3x3xf32>, %m: tensor<1x27x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op input channels (2) must be divisible by offset_groups (3)}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) {offset_groups = 3 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x54x3x3xf32>, tensor<1x27x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_window(%x: tensor<1x2x2x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x18x1x3xf32>, %m: tensor<1x9x1x3xf32>) -> tensor<1x4x1x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op spatial dim 0 of size 2 is smaller than the (dilated) window 3 with pads 0+0}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x2x5xf32>, tensor<4x2x3x3xf32>, tensor<1x18x1x3xf32>, tensor<1x9x1x3xf32>) -> tensor<1x4x1x3xf32>
  return %0 : tensor<1x4x1x3xf32>
}

// -----

func.func @deform_conv_offset_batch(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<2x18x3x3xf32>, %m: tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op offset batch is 2, input batch is 1}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<2x18x3x3xf32>, tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_offset_channels(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x9x3x3xf32>, %m: tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op offset has 9 channels, expected offset_groups * kH * kW * 2 = 18}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x9x3x3xf32>, tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_offset_spatial(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x18x3x4xf32>, %m: tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op offset spatial dim 1 is 4, the output's is 3}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x18x3x4xf32>, tensor<1x9x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @deform_conv_mask(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x18x3x3xf32>, %m: tensor<1x8x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'sdc.deform_conv' op mask dim 1 is 8, expected 1 or 9}}
  %0 = "sdc.deform_conv"(%x, %w, %o, %m) : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>, tensor<1x18x3x3xf32>, tensor<1x8x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}
