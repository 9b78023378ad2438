// sdc-shape-constraints{input-shape=...}: each way a binding can be wrong, as an error at the
// function (or a usage error, exit 2, when the option does not parse).
// RUN: sh -c 'sdc-opt %s -p "sdc-shape-constraints{input-shape=x=2,3}"; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: sh -c 'sdc-opt %s -p "sdc-shape-constraints{input-shape=y=5}"; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=STATIC
// RUN: sh -c 'sdc-opt %s -p "sdc-shape-constraints{input-shape=nope=2,3}"; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: sh -c 'sdc-opt %s -p "sdc-shape-constraints{input-shape=in:0=8}"; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: sh -c 'sdc-opt %s -p "sdc-shape-constraints{input-shape=\"x=2 z=3\"}"; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=RULE
// RUN: sh -c 'sdc-opt %s -p "sdc-shape-constraints{input-shape=\"N=8 N=..4\"}"; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=BOUNDS
// RUN: sh -c 'sdc-opt %s -p "sdc-shape-constraints{input-shape=B=5..2}"; echo "exit=$?"' 2>&1 | FileCheck %s --check-prefix=USAGE
// RUN: sdc-opt %s -p 'sdc-shape-constraints{input-shape="N=3;z=?"}' | FileCheck %s --check-prefix=OK

// RANK: shape_constraints_input_shape.mlir:{{[0-9]+}}:1: error: --input-shape x=2,3 has 2 dims, input 'x' has rank 1
// RANK-NEXT: exit=1

// STATIC: error: --input-shape y=5: input 'y' dim 0 is 4, not 5
// STATIC-NEXT: exit=1

// UNKNOWN: error: --input-shape nope=2,3: no input is named 'nope' (inputs: 'x', 'y', 'z')
// UNKNOWN-NEXT: exit=1

// NAME: error: --input-shape in:0=8: 'in:0' is neither an input nor a symbol name

// Bindings make dims static before the rules run: a static mismatch is the rule's own error.
// RULE: {{[0-9]+}}:8: error: 'sdc.add' op operand shapes are not broadcast-compatible: lhs is [2], rhs is [3]

// BOUNDS: error: shape constraints contradict: --input-shape N=..4; N <= 4 is false with N = 8
// BOUNDS-NEXT: note: conflicting constraint: N == 8 (--input-shape N=8)

// USAGE: error: pass 'sdc-shape-constraints' option 'input-shape': 'B=5..2': the range is empty (5 > 2)
// USAGE-NEXT: exit=2

// A symbol fixed to a value makes every dim it names static (z's dim 0 through the add).
// OK: func.func @main(%{{.*}}: tensor<3xf32> {sdc.dims = #sdc.dims<[3]>, sdc.name = "x"}, %{{.*}}: tensor<4xf32> {sdc.name = "y"}, %{{.*}}: tensor<3xf32> {sdc.name = "z"}) -> tensor<3xf32>
// OK-SAME: sdc.relations = ["N == 3", "z_0 == 3"]
// OK-NOT: sdc.guards
func.func @main(%x: tensor<?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N"]>}, %y: tensor<4xf32> {sdc.name = "y"},
                %z: tensor<?xf32> {sdc.name = "z"}) -> tensor<?xf32> {
  %0 = "sdc.add"(%x, %z) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
