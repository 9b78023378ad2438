// An MLP (Gemm, Relu, Gemm) imports as matmul + add + relu; the weight over 256 values becomes an
// sdc.parameter named after its initializer, and --params writes its value; every op carries the
// location of its ONNX node.
// RUN: %python %S/Inputs/onnx_models.py mlp %t.onnx
// RUN: sdc import %t.onnx -o %t.mlir --params %t.safetensors --print-debuginfo
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=LOC < %t.mlir
// RUN: %python -c "from safetensors.numpy import load_file; [print(k, v.shape) for k, v in sorted(load_file('%t.safetensors').items())]" | FileCheck %s --check-prefix=PARAMS

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<?x16xf32> {sdc.dims = #sdc.dims<["batch", 16]>, sdc.name = "x"}
// CHECK-SAME: -> (tensor<?x4xf32> {sdc.dims = #sdc.dims<["batch", 4]>, sdc.name = "y"})
// CHECK: %[[W1:.*]] = "sdc.parameter"() {name = "fc1.weight"} : () -> tensor<32x16xf32>
// CHECK: %[[H:.*]] = "sdc.matmul"(%[[X]], %[[W1]]) {transpose_lhs = false, transpose_rhs = true}
// CHECK-SAME: -> tensor<?x32xf32>
// CHECK: %[[B1:.*]] = "sdc.constant"() {value = dense<{{.*}}> : tensor<32xf32>}
// CHECK: %[[H1:.*]] = "sdc.add"(%[[H]], %[[B1]])
// CHECK: %[[A:.*]] = "sdc.relu"(%[[H1]])
// CHECK: %[[W2:.*]] = "sdc.constant"() {value = dense<{{.*}}> : tensor<4x32xf32>}
// CHECK: "sdc.matmul"(%[[A]], %[[W2]]) {transpose_lhs = false, transpose_rhs = true}
// CHECK-SAME: -> tensor<?x4xf32>
// CHECK: return

// PARAMS: fc1.weight (32, 16)
// PARAMS-NOT: fc2

// LOC: "sdc.matmul"{{.*}} loc(#[[FC1:loc[0-9]+]])
// LOC: "sdc.relu"{{.*}} loc(#[[RELU:loc[0-9]+]])
// LOC: #[[FC1]] = loc("fc1"(#{{loc[0-9]+}}))
// LOC: #[[RELU]] = loc("relu"(#{{loc[0-9]+}}))
