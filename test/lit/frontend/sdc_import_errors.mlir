// sdc import's user errors are one line and exit 1 (a missing file, a file that is not a model);
// a bad command line exits 2.
// RUN: %python %S/Inputs/onnx_models.py mlp %t.onnx
// RUN: printf 'not a model' > %t.garbage.onnx
// RUN: sh -c 'sdc import %t.does-not-exist.onnx; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: sh -c 'sdc import %t.garbage.onnx; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=GARBAGE
// RUN: sh -c 'sdc import %t.onnx --input-shape B=1..64; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: sh -c 'sdc import %t.onnx --input-shape y=1,16; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=NOT-AN-INPUT

// MISSING: error: cannot open '{{.*}}.does-not-exist.onnx': no such file
// MISSING-NEXT: exit=1
// MISSING-NOT: Traceback

// GARBAGE: error: '{{.*}}.garbage.onnx' is not a valid ONNX model (cannot parse: DecodeError)
// GARBAGE-NEXT: exit=1

// RANGE: error: --input-shape B=1..64: sdc import takes an input's dims (x=B,3,224,224); a symbol's value or range is for sdc compile (or sdc-opt's sdc-shape-constraints pass)
// RANGE-NEXT: exit=2

// NOT-AN-INPUT: error: --input-shape names 'y', which is not a model input (inputs: 'x')
// NOT-AN-INPUT-NEXT: exit=1
