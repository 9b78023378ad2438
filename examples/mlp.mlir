// A two-layer MLP with a dynamic batch dim "B", as the ONNX importer would emit it.
// Try: sdc-opt examples/mlp.mlir -p sdc-verify,sdc-canonicalize,cse
func.func @main(%x: tensor<?x784xf32> {sdc.dims = #sdc.dims<["B", 784]>}) -> tensor<?x10xf32> {
  %w1 = "sdc.parameter"() {name = "fc1.weight"} : () -> tensor<256x784xf32>
  %b1 = "sdc.parameter"() {name = "fc1.bias"} : () -> tensor<256xf32>
  %w2 = "sdc.parameter"() {name = "fc2.weight"} : () -> tensor<10x256xf32>
  %b2 = "sdc.parameter"() {name = "fc2.bias"} : () -> tensor<10xf32>
  %0 = "sdc.matmul"(%x, %w1) {transpose_lhs = false, transpose_rhs = true} : (tensor<?x784xf32>, tensor<256x784xf32>) -> tensor<?x256xf32>
  %1 = "sdc.add"(%0, %b1) : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32>
  %2 = "sdc.gelu"(%1) {approximate = "none"} : (tensor<?x256xf32>) -> tensor<?x256xf32>
  %3 = "sdc.cast"(%2) {dtype = f32} : (tensor<?x256xf32>) -> tensor<?x256xf32>
  %4 = "sdc.matmul"(%3, %w2) {transpose_lhs = false, transpose_rhs = true} : (tensor<?x256xf32>, tensor<10x256xf32>) -> tensor<?x10xf32>
  %5 = "sdc.add"(%4, %b2) : (tensor<?x10xf32>, tensor<10xf32>) -> tensor<?x10xf32>
  %6 = "sdc.softmax"(%5) {axis = -1 : i64} : (tensor<?x10xf32>) -> tensor<?x10xf32>
  return %6 : tensor<?x10xf32>
}
