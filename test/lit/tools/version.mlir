// --version prints sdc's version and the MLIR bindings' and exits 0 without reading any input.
// RUN: sdc-opt --version | FileCheck %s
// RUN: sdc-opt --version %s.missing | FileCheck %s
// CHECK: {{^}}sdc {{[0-9]+\.[0-9]+\.[0-9]+}}{{$}}
// CHECK-NEXT: {{^}}MLIR Python bindings: torch-mlir {{[0-9]+}}
