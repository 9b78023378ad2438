// --verify-diagnostics reports each diagnostic nothing expected ("unexpected error") and each
// expectation nothing met ("... was not produced", at the line it expected), and exits 1.
// Checks are at the bottom: the line numbers above must not move.
// RUN: sh -c 'sdc-opt %s --split-input-file --verify-diagnostics; echo "exit=$?"' 2>&1 | FileCheck %s

func.func @unexpected(%i: tensor<4xi32>) -> tensor<4xi32> {
  %0 = "sdc.exp"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @not_produced(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{this op is fine}}
  %0 = "sdc.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @wrong_line(%i: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+2 {{'sdc.log' op operand must have float element type}}
  %0 = "sdc.log"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @wrong_text(%i: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{must have integer element type}}
  %0 = "sdc.sin"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @wrong_severity(%i: tensor<4xi32>) -> tensor<4xi32> {
  // expected-warning @+1 {{'sdc.cos' op}}
  %0 = "sdc.cos"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @other_severities(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note @+2 {{a note}}
  // expected-remark @+1 {{a remark}}
  return %x : tensor<4xf32>
}

// -----

func.func @all_met(%i: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'sdc.tanh' op}}
  %0 = "sdc.tanh"(%i) : (tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// CHECK: verify_diagnostics_mismatch.mlir:7:8: error: unexpected error: 'sdc.exp' op operand must have float element type, found i32
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:15:1: error: expected error "this op is fine" was not produced
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:23:8: error: unexpected error: 'sdc.log' op operand must have float element type, found i32
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:24:1: error: expected error "'sdc.log' op operand must have float element type" was not produced
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:31:8: error: unexpected error: 'sdc.sin' op operand must have float element type, found i32
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:31:1: error: expected error "must have integer element type" was not produced
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:39:8: error: unexpected error: 'sdc.cos' op operand must have float element type, found i32
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:39:1: error: expected warning "'sdc.cos' op" was not produced
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:48:1: error: expected note "a note" was not produced
// CHECK-NEXT: verify_diagnostics_mismatch.mlir:48:1: error: expected remark "a remark" was not produced
// The chunks that parsed are printed, as without the flag.
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @not_produced
// CHECK: // -----
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @other_severities
// CHECK: exit=1
// CHECK-NOT: Traceback
