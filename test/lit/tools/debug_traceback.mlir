// Errors print no Python traceback unless --debug or SDC_DEBUG (not "0") asks for one.
// RUN: sh -c 'sdc-opt %t.missing.mlir; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=QUIET
// RUN: sh -c 'SDC_DEBUG=0 sdc-opt %t.missing.mlir; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=QUIET
// RUN: sh -c 'sdc-opt %t.missing.mlir --debug; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=LOUD
// RUN: sh -c 'SDC_DEBUG=1 sdc-opt %t.missing.mlir; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=LOUD

// QUIET-NOT: Traceback
// QUIET: error: cannot open '{{.*}}.missing.mlir': no such file
// QUIET-NEXT: exit=1

// LOUD: Traceback (most recent call last):
// LOUD: error: cannot open '{{.*}}.missing.mlir': no such file
// LOUD-NEXT: exit=1
