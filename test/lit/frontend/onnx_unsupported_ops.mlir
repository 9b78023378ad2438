// Every unsupported op of a model is listed in the one error, in graph order, with its node: ops
// of the default domain with the opset, ops of another domain with that domain and how to register them.
// RUN: %python %S/Inputs/onnx_models.py unsupported_many %t.onnx
// RUN: sh -c 'sdc import %t.onnx; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: unsupported ONNX ops (3): RandomNormalLike (opset 17, node 'noise'); GlobalLpPool (opset 17, node 'lp_pool'); com.example.FancyOp (domain 'com.example', node 'fancy'; register it with sdc.custom_op('com.example::FancyOp', ...))
// CHECK-NEXT: exit=1
// CHECK-NOT: Traceback
