// --print-debuginfo prints each op's location: the file, line and column it was parsed from.
// (Without the flag there are none: tools/output_file.mlir checks that.) Checks are at the
// bottom so that the locations above do not move.
// RUN: sdc-opt %s --print-debuginfo | FileCheck %s

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "sdc.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK: func.func @f(%{{.*}}: tensor<4xf32> loc("{{.*}}print_debuginfo.mlir":6:14))
// CHECK: "sdc.neg"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32> loc([[NEG:#loc[0-9]*]])
// CHECK: [[NEG]] = loc("{{.*}}print_debuginfo.mlir":7:8)
