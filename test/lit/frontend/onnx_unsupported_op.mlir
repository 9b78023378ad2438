// An op sdc has no importer for is one user error naming the op, the model's opset and the node,
// before anything is imported: exit 1, no traceback, no output file.
// RUN: %python %S/Inputs/onnx_models.py unsupported_one %t.onnx
// RUN: rm -f %t.mlir
// RUN: sh -c 'sdc import %t.onnx -o %t.mlir; echo "exit=$?"' 2>&1 | FileCheck %s
// RUN: test ! -e %t.mlir

// CHECK: error: unsupported ONNX op (1): GlobalLpPool (opset 17, node 'lp_pool')
// CHECK-NEXT: exit=1
// CHECK-NOT: Traceback
