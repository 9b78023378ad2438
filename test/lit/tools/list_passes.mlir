// RUN: sdc-opt --list-passes | FileCheck %s
// CHECK: sdc passes:
// CHECK-DAG: sdc-verify
// CHECK-DAG: sdc-canonicalize
