// A result number the parser would size its tables by (found by the fuzzer: ir-text:13:14762, where
// MLIR aborted the process with "LLVM ERROR: out of memory") is refused before MLIR reads the text.
// RUN: sh -c 'sdc-opt %s; echo "exit=$?"' 2>&1 | FileCheck %s

// CHECK: error: {{.*}}result_number_limit.mlir:9: '%a#2147483648' names result 2147483648; an op has at most 65536 results
// CHECK-NEXT: exit=1
// CHECK-NOT: LLVM ERROR
func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a#2147483648 : tensor<2xf32>
}
