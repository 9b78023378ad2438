// Shape -> Gather -> Mul -> Concat -> Reshape, as exporters write a dynamic flatten, is evaluated
// over the symbolic dims at import: the Reshape gets shape ["batch*seq", 64] and no shape op is
// left at run time; Shape -> Slice -> Concat splits the heads likewise.
// RUN: %python %S/Inputs/onnx_models.py reshape_arith %t.onnx
// RUN: sdc import %t.onnx | FileCheck %s

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32> {sdc.dims = #sdc.dims<["batch", "seq", 64]>, sdc.name = "x"}
// CHECK-SAME: -> (tensor<?x64xf32> {sdc.dims = #sdc.dims<["batch*seq", 64]>, sdc.name = "flat"},
// CHECK-SAME: tensor<?x?x4x16xf32> {sdc.dims = #sdc.dims<["batch", "seq", 4, 16]>, sdc.name = "split"})
// CHECK-NOT: "sdc.dim_values"
// CHECK-NOT: "sdc.gather"
// CHECK-NOT: "sdc.concat"
// CHECK-DAG: %[[SPLIT:.*]] = "sdc.reshape"(%[[X]]) {shape = ["batch", "seq", 4, 16]} : (tensor<?x?x64xf32>) -> tensor<?x?x4x16xf32>
// CHECK-DAG: %[[FLAT:.*]] = "sdc.reshape"(%[[X]]) {shape = ["batch*seq", 64]} : (tensor<?x?x64xf32>) -> tensor<?x64xf32>
// CHECK-NOT: "sdc.dim_values"
// CHECK: return %[[FLAT]], %[[SPLIT]]
