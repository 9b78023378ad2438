// Round trip of the elementwise ops (unary, binary with numpy broadcasting, and sdc.where):
// print, parse the printed IR, print again. Both prints must be identical, and the second must
// keep every op with its operands, attributes and types.
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// Float ops chained, so each CHECK also pins the operand: a reordering or a dropped op fails.
// CHECK-LABEL: func.func @float_chain
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x4xf32>)
// CHECK-NEXT: %[[NEG:.*]] = "sdc.neg"(%[[X]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ABS:.*]] = "sdc.abs"(%[[NEG]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SIGN:.*]] = "sdc.sign"(%[[ABS]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[EXP:.*]] = "sdc.exp"(%[[SIGN]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[LOG:.*]] = "sdc.log"(%[[EXP]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SQRT:.*]] = "sdc.sqrt"(%[[LOG]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[RSQRT:.*]] = "sdc.rsqrt"(%[[SQRT]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[RECIPROCAL:.*]] = "sdc.reciprocal"(%[[RSQRT]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[TANH:.*]] = "sdc.tanh"(%[[RECIPROCAL]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SIGMOID:.*]] = "sdc.sigmoid"(%[[TANH]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ERF:.*]] = "sdc.erf"(%[[SIGMOID]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SIN:.*]] = "sdc.sin"(%[[ERF]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[COS:.*]] = "sdc.cos"(%[[SIN]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[TAN:.*]] = "sdc.tan"(%[[COS]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ASIN:.*]] = "sdc.asin"(%[[TAN]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ACOS:.*]] = "sdc.acos"(%[[ASIN]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ATAN:.*]] = "sdc.atan"(%[[ACOS]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SINH:.*]] = "sdc.sinh"(%[[ATAN]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[COSH:.*]] = "sdc.cosh"(%[[SINH]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ASINH:.*]] = "sdc.asinh"(%[[COSH]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ACOSH:.*]] = "sdc.acosh"(%[[ASINH]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ATANH:.*]] = "sdc.atanh"(%[[ACOSH]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[FLOOR:.*]] = "sdc.floor"(%[[ATANH]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[CEIL:.*]] = "sdc.ceil"(%[[FLOOR]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ROUND:.*]] = "sdc.round"(%[[CEIL]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[RELU:.*]] = "sdc.relu"(%[[ROUND]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SILU:.*]] = "sdc.silu"(%[[RELU]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SOFTPLUS:.*]] = "sdc.softplus"(%[[SILU]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SOFTSIGN:.*]] = "sdc.softsign"(%[[SOFTPLUS]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[MISH:.*]] = "sdc.mish"(%[[SOFTSIGN]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[HARD_SWISH:.*]] = "sdc.hard_swish"(%[[MISH]]) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[GELU:.*]] = "sdc.gelu"(%[[HARD_SWISH]]) {approximate = "tanh"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[LEAKY_RELU:.*]] = "sdc.leaky_relu"(%[[GELU]]) {alpha = 2.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[ELU:.*]] = "sdc.elu"(%[[LEAKY_RELU]]) {alpha = 5.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[SELU:.*]] = "sdc.selu"(%[[ELU]]) {alpha = 1.500000e+00 : f64, gamma = 1.250000e+00 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[HARD_SIGMOID:.*]] = "sdc.hard_sigmoid"(%[[SELU]]) {alpha = 2.500000e-01 : f64, beta = 5.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[CLIP:.*]] = "sdc.clip"(%[[HARD_SIGMOID]]) {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: return %[[CLIP]] : tensor<?x4xf32>
func.func @float_chain(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
%0 = "sdc.neg"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = "sdc.abs"(%0) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %2 = "sdc.sign"(%1) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %3 = "sdc.exp"(%2) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %4 = "sdc.log"(%3) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %5 = "sdc.sqrt"(%4) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %6 = "sdc.rsqrt"(%5) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %7 = "sdc.reciprocal"(%6) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %8 = "sdc.tanh"(%7) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %9 = "sdc.sigmoid"(%8) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %10 = "sdc.erf"(%9) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %11 = "sdc.sin"(%10) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %12 = "sdc.cos"(%11) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %13 = "sdc.tan"(%12) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %14 = "sdc.asin"(%13) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %15 = "sdc.acos"(%14) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %16 = "sdc.atan"(%15) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %17 = "sdc.sinh"(%16) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %18 = "sdc.cosh"(%17) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %19 = "sdc.asinh"(%18) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %20 = "sdc.acosh"(%19) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %21 = "sdc.atanh"(%20) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %22 = "sdc.floor"(%21) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %23 = "sdc.ceil"(%22) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %24 = "sdc.round"(%23) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %25 = "sdc.relu"(%24) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %26 = "sdc.silu"(%25) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %27 = "sdc.softplus"(%26) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %28 = "sdc.softsign"(%27) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %29 = "sdc.mish"(%28) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %30 = "sdc.hard_swish"(%29) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %31 = "sdc.gelu"(%30) {approximate = "tanh"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %32 = "sdc.leaky_relu"(%31) {alpha = 2.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %33 = "sdc.elu"(%32) {alpha = 5.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %34 = "sdc.selu"(%33) {alpha = 1.500000e+00 : f64, gamma = 1.250000e+00 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %35 = "sdc.hard_sigmoid"(%34) {alpha = 2.500000e-01 : f64, beta = 5.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %36 = "sdc.clip"(%35) {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %36 : tensor<?x4xf32>
}

// Optional attributes left out stay left out (the verifier fills in their defaults); a value equal
// to the default that was written stays written.
// CHECK-LABEL: func.func @defaults
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8xf32>)
// CHECK-NEXT: %[[G:.*]] = "sdc.gelu"(%[[X]]) : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[GN:.*]] = "sdc.gelu"(%[[G]]) {approximate = "none"} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[C:.*]] = "sdc.clip"(%[[GN]]) {max = 1.000000e+00 : f64} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[C]]
func.func @defaults(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "sdc.gelu"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %1 = "sdc.gelu"(%0) {approximate = "none"} : (tensor<8xf32>) -> tensor<8xf32>
  %2 = "sdc.clip"(%1) {max = 1.0 : f64} : (tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}

// Predicates give i1; `not` takes i1; integer operands for the ops that accept them.
// CHECK-LABEL: func.func @non_float
// CHECK-SAME: (%[[F:[^:]+]]: tensor<2x3xf16>, %[[I:[^:]+]]: tensor<2x3xi32>, %[[U:[^:]+]]: tensor<3xui8>)
// CHECK-NEXT: %[[NAN:.*]] = "sdc.isnan"(%[[F]]) : (tensor<2x3xf16>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[INF:.*]] = "sdc.isinf"(%[[F]]) : (tensor<2x3xf16>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[NOT:.*]] = "sdc.not"(%[[NAN]]) : (tensor<2x3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[BNOT1:.*]] = "sdc.bitwise_not"(%[[INF]]) : (tensor<2x3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[BNOT:.*]] = "sdc.bitwise_not"(%[[I]]) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %[[INEG:.*]] = "sdc.neg"(%[[BNOT]]) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %[[IABS:.*]] = "sdc.abs"(%[[INEG]]) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %[[ISIGN:.*]] = "sdc.sign"(%[[IABS]]) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %[[IRELU:.*]] = "sdc.relu"(%[[ISIGN]]) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %[[ICLIP:.*]] = "sdc.clip"(%[[IRELU]]) {max = 1.000000e+01 : f64, min = -1.000000e+01 : f64} : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %[[UCLIP:.*]] = "sdc.clip"(%[[U]]) {max = 2.000000e+02 : f64} : (tensor<3xui8>) -> tensor<3xui8>
// CHECK-NEXT: return %[[NOT]], %[[BNOT1]], %[[ICLIP]], %[[UCLIP]]
func.func @non_float(%f: tensor<2x3xf16>, %i: tensor<2x3xi32>, %u: tensor<3xui8>)
    -> (tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi32>, tensor<3xui8>) {
  %nan = "sdc.isnan"(%f) : (tensor<2x3xf16>) -> tensor<2x3xi1>
  %inf = "sdc.isinf"(%f) : (tensor<2x3xf16>) -> tensor<2x3xi1>
  %not = "sdc.not"(%nan) : (tensor<2x3xi1>) -> tensor<2x3xi1>
  %bnot1 = "sdc.bitwise_not"(%inf) : (tensor<2x3xi1>) -> tensor<2x3xi1>
  %bnot = "sdc.bitwise_not"(%i) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %neg = "sdc.neg"(%bnot) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %abs = "sdc.abs"(%neg) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %sign = "sdc.sign"(%abs) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %relu = "sdc.relu"(%sign) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %clip = "sdc.clip"(%relu) {min = -10.0 : f64, max = 10.0 : f64} : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %uclip = "sdc.clip"(%u) {max = 200.0 : f64} : (tensor<3xui8>) -> tensor<3xui8>
  return %not, %bnot1, %clip, %uclip : tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi32>, tensor<3xui8>
}

// CHECK-LABEL: func.func @arithmetic
// CHECK-SAME: (%[[A:[^:]+]]: tensor<?x1xf32>, %[[B:[^:]+]]: tensor<3xf32>)
// CHECK-NEXT: %[[ADD:.*]] = "sdc.add"(%[[A]], %[[B]]) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[SUB:.*]] = "sdc.sub"(%[[ADD]], %[[B]]) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[MUL:.*]] = "sdc.mul"(%[[A]], %[[SUB]]) : (tensor<?x1xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[DIV:.*]] = "sdc.div"(%[[MUL]], %[[ADD]]) : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[POW:.*]] = "sdc.pow"(%[[DIV]], %[[B]]) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[MAX:.*]] = "sdc.max"(%[[POW]], %[[A]]) : (tensor<?x3xf32>, tensor<?x1xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[MIN:.*]] = "sdc.min"(%[[MAX]], %[[B]]) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[MOD:.*]] = "sdc.mod"(%[[MIN]], %[[B]]) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[FMOD:.*]] = "sdc.mod"(%[[MOD]], %[[B]]) {fmod = true} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: return %[[FMOD]]
func.func @arithmetic(%a: tensor<?x1xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %0 = "sdc.add"(%a, %b) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %1 = "sdc.sub"(%0, %b) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %2 = "sdc.mul"(%a, %1) : (tensor<?x1xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  %3 = "sdc.div"(%2, %0) : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  %4 = "sdc.pow"(%3, %b) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %5 = "sdc.max"(%4, %a) : (tensor<?x3xf32>, tensor<?x1xf32>) -> tensor<?x3xf32>
  %6 = "sdc.min"(%5, %b) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %7 = "sdc.mod"(%6, %b) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %8 = "sdc.mod"(%7, %b) {fmod = true} : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  return %8 : tensor<?x3xf32>
}

// Bitwise ops on integers and on i1; shifts on integers only. A rank-0 operand broadcasts.
// CHECK-LABEL: func.func @bitwise
// CHECK-SAME: (%[[I:[^:]+]]: tensor<2x4xi32>, %[[S:[^:]+]]: tensor<i32>, %[[P:[^:]+]]: tensor<4xi1>)
// CHECK-NEXT: %[[AND:.*]] = "sdc.bitwise_and"(%[[I]], %[[S]]) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
// CHECK-NEXT: %[[OR:.*]] = "sdc.bitwise_or"(%[[AND]], %[[I]]) : (tensor<2x4xi32>, tensor<2x4xi32>) -> tensor<2x4xi32>
// CHECK-NEXT: %[[XOR:.*]] = "sdc.bitwise_xor"(%[[OR]], %[[S]]) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
// CHECK-NEXT: %[[SHL:.*]] = "sdc.shift_left"(%[[XOR]], %[[S]]) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
// CHECK-NEXT: %[[SHR:.*]] = "sdc.shift_right"(%[[SHL]], %[[S]]) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
// CHECK-NEXT: %[[PAND:.*]] = "sdc.bitwise_and"(%[[P]], %[[P]]) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
// CHECK-NEXT: return %[[SHR]], %[[PAND]]
func.func @bitwise(%i: tensor<2x4xi32>, %s: tensor<i32>, %p: tensor<4xi1>) -> (tensor<2x4xi32>, tensor<4xi1>) {
  %0 = "sdc.bitwise_and"(%i, %s) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
  %1 = "sdc.bitwise_or"(%0, %i) : (tensor<2x4xi32>, tensor<2x4xi32>) -> tensor<2x4xi32>
  %2 = "sdc.bitwise_xor"(%1, %s) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
  %3 = "sdc.shift_left"(%2, %s) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
  %4 = "sdc.shift_right"(%3, %s) : (tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xi32>
  %5 = "sdc.bitwise_and"(%p, %p) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %4, %5 : tensor<2x4xi32>, tensor<4xi1>
}

// Integer arithmetic. `?x3` broadcast with `5x1` infers `5x3` (the dynamic dim meets a static 5).
// CHECK-LABEL: func.func @integers
// CHECK-SAME: (%[[A:[^:]+]]: tensor<5x1xi64>, %[[B:[^:]+]]: tensor<?x3xi64>)
// CHECK-NEXT: %[[ADD:.*]] = "sdc.add"(%[[A]], %[[B]]) : (tensor<5x1xi64>, tensor<?x3xi64>) -> tensor<5x3xi64>
// CHECK-NEXT: %[[DIV:.*]] = "sdc.div"(%[[ADD]], %[[A]]) : (tensor<5x3xi64>, tensor<5x1xi64>) -> tensor<5x3xi64>
// CHECK-NEXT: return %[[DIV]]
func.func @integers(%a: tensor<5x1xi64>, %b: tensor<?x3xi64>) -> tensor<5x3xi64> {
  %0 = "sdc.add"(%a, %b) : (tensor<5x1xi64>, tensor<?x3xi64>) -> tensor<5x3xi64>
  %1 = "sdc.div"(%0, %a) : (tensor<5x3xi64>, tensor<5x1xi64>) -> tensor<5x3xi64>
  return %1 : tensor<5x3xi64>
}

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[C:[^:]+]]: tensor<?x4xi1>, %[[T:[^:]+]]: tensor<?x4xf32>, %[[F:[^:]+]]: tensor<1xf32>)
// CHECK-NEXT: %[[W:.*]] = "sdc.where"(%[[C]], %[[T]], %[[F]]) : (tensor<?x4xi1>, tensor<?x4xf32>, tensor<1xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: return %[[W]]
func.func @select(%c: tensor<?x4xi1>, %t: tensor<?x4xf32>, %f: tensor<1xf32>) -> tensor<?x4xf32> {
  %0 = "sdc.where"(%c, %t, %f) : (tensor<?x4xi1>, tensor<?x4xf32>, tensor<1xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
