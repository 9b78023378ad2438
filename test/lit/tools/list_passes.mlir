// --list-passes lists sdc's passes with their one-line summaries, needs no input, exits 0.
// RUN: sdc-opt --list-passes | FileCheck %s
// CHECK: sdc passes:
// CHECK-DAG: sdc-verify {{ +}}check every sdc op's operands, attributes and shape rule, reporting all errors
// CHECK-DAG: sdc-canonicalize {{ +}}fold cast/reshape/transpose chains and small constant expressions
