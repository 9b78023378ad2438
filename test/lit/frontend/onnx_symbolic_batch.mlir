// A named batch dim (dim_param N) stays a symbol from the input to the result; a dim with
// neither value nor name gets the fresh symbol <input>_<index>. --input-shape renames a dim or
// fixes it, and the static shapes then flow through every op.
// RUN: %python %S/Inputs/onnx_models.py symbolic_batch %t.onnx
// RUN: sdc import %t.onnx | FileCheck %s
// RUN: sdc import %t.onnx --input-shape x=B,5,8 | FileCheck %s --check-prefix=GIVEN

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x8xf32> {sdc.dims = #sdc.dims<["N", "x_1", 8]>, sdc.name = "x"}
// CHECK-SAME: -> (tensor<?x?xf32> {sdc.dims = #sdc.dims<["N", "x_1"]>, sdc.name = "y"})
// CHECK: %[[S:.*]] = "sdc.add"(%[[X]], %[[X]]) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
// CHECK: "sdc.reduce_sum"(%[[S]]) {axes = array<i64: -1>, keepdims = false} : (tensor<?x?x8xf32>) -> tensor<?x?xf32>

// GIVEN-LABEL: func.func @main(
// GIVEN-SAME: tensor<?x5x8xf32> {sdc.dims = #sdc.dims<["B", 5, 8]>, sdc.name = "x"}
// GIVEN-SAME: -> (tensor<?x5xf32> {sdc.dims = #sdc.dims<["B", 5]>, sdc.name = "y"})
// GIVEN: "sdc.reduce_sum"({{.*}}) -> tensor<?x5xf32>
