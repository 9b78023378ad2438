// --list-passes lists sdc's passes with their one-line summaries, needs no input, exits 0.
// RUN: sdc-opt --list-passes | FileCheck %s
// CHECK: sdc passes:
// CHECK-DAG: sdc-verify {{ +}}check every sdc op's operands, attributes and shape rule, reporting all errors
// CHECK-DAG: sdc-canonicalize {{ +}}fold cast/reshape/transpose chains and small constant expressions
// CHECK-DAG: sdc-shape-constraints {{ +}}solve symbolic dims: static types where provable, relations and run-time guards as attributes
// CHECK-DAG: sdc-sharding-propagation {{ +}}shard every value over the module's mesh: user annotations, dp/tp defaults, propagation
// CHECK-DAG: sdc-spmd-partition {{ +}}rewrite into the per-device program: local shapes, collectives where shardings change
