// --help lists every flag and exits 0 without reading any input.
// RUN: sdc-opt --help | FileCheck %s
// CHECK: usage: sdc-opt
// CHECK-DAG: input file, or - for stdin
// CHECK-DAG: -p PASS_PIPELINE, --pass-pipeline PASS_PIPELINE
// CHECK-DAG: -o OUTPUT
// CHECK-DAG: --split-input-file
// CHECK-DAG: --verify-diagnostics
// CHECK-DAG: --print-ir-after-all
// CHECK-DAG: --print-debuginfo
// CHECK-DAG: --list-passes
// CHECK-DAG: --debug
// CHECK-DAG: --version
