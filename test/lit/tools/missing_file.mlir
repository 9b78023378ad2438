// An input that cannot be read is a user error: one line naming it, exit 1, no traceback. A bad
// pipeline is a usage error reported before the input is read.
// RUN: sh -c 'sdc-opt %t.does-not-exist.mlir; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: sh -c 'sdc-opt %S; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=DIRECTORY
// RUN: sh -c 'sdc-opt %t.does-not-exist.mlir -p nope; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=PIPELINE

// MISSING: error: cannot open '{{.*}}.does-not-exist.mlir': no such file
// MISSING-NEXT: exit=1
// MISSING-NOT: Traceback

// DIRECTORY: error: cannot open '{{.*}}tools': is a directory
// DIRECTORY-NEXT: exit=1
// DIRECTORY-NOT: Traceback

// PIPELINE: error: invalid pass pipeline element 'nope'
// PIPELINE-NEXT: exit=2
