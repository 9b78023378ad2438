// sdc-shape-constraints: each op's shape rule adds constraints over the symbolic dims; the
// solved dims annotate the ops (sdc.result_dims), static ones go into the types, and what only
// the inputs can tell becomes a guard. The second RUN line runs the pass on its own output:
// the recorded guards are read back and the same conditions come out.
// RUN: sdc-opt %s -p sdc-shape-constraints | FileCheck %s
// RUN: sdc-opt %s -p sdc-shape-constraints | sdc-opt -p sdc-shape-constraints | FileCheck %s
// RUN: sdc-opt %s -p 'sdc-shape-constraints{input-shape="img=B,3,224,224 B=1..64"}' | FileCheck %s --check-prefix=BOUND

// Broadcasting two symbolic dims makes them equal: the later symbol is checked against the first.
// CHECK-LABEL: func.func @broadcast_equal
// CHECK-SAME: -> (tensor<?xf32> {sdc.dims = #sdc.dims<["N"]>})
// CHECK-SAME: sdc.guards = [#sdc.guard<"M == N", "'sdc.add' at {{.*}}: dim 0 of rhs (M) must equal dim 0 of lhs (N){{.*}}">]
// CHECK-SAME: sdc.relations = ["M == N"]
// CHECK: "sdc.add"{{.*}}sdc.result_dims = [#sdc.dims<["N"]>]
func.func @broadcast_equal(%a: tensor<?xf32> {sdc.name = "a", sdc.dims = #sdc.dims<["N"]>},
                           %b: tensor<?xf32> {sdc.name = "b", sdc.dims = #sdc.dims<["M"]>}) -> tensor<?xf32> {
  %0 = "sdc.add"(%a, %b) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// A concatenation adds its operands' dims: a linear relation.
// CHECK-LABEL: func.func @concat_linear
// CHECK-SAME: sdc.guards = [#sdc.guard<"K == M + N", {{.*}}>]
// CHECK: "sdc.concat"{{.*}}sdc.result_dims = [#sdc.dims<["M + N", 4]>]
// CHECK: "sdc.mul"{{.*}}sdc.result_dims = [#sdc.dims<["M + N", 4]>]
func.func @concat_linear(%a: tensor<?x4xf32> {sdc.name = "a", sdc.dims = #sdc.dims<["N", 4]>},
                         %b: tensor<?x4xf32> {sdc.name = "b", sdc.dims = #sdc.dims<["M", 4]>},
                         %c: tensor<?x4xf32> {sdc.name = "c", sdc.dims = #sdc.dims<["K", 4]>}) -> tensor<?x4xf32> {
  %0 = "sdc.concat"(%a, %b) {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = "sdc.mul"(%0, %c) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %1 : tensor<?x4xf32>
}

// A static weight fixes the contracting dim: the input's type becomes static there.
// CHECK-LABEL: func.func @matmul_static
// CHECK-SAME: (%{{.*}}: tensor<?x64xf32> {sdc.dims = #sdc.dims<["B", 64]>, sdc.name = "x"})
// CHECK-NOT: sdc.guards
// CHECK: "sdc.matmul"{{.*}}sdc.result_dims = [#sdc.dims<["B", 10]>]{{.*}} : (tensor<?x64xf32>, tensor<64x10xf32>)
func.func @matmul_static(%x: tensor<?x?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", "K"]>}) -> tensor<?x10xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<64x10xf32>
  %0 = "sdc.matmul"(%x, %w) : (tensor<?x?xf32>, tensor<64x10xf32>) -> tensor<?x10xf32>
  return %0 : tensor<?x10xf32>
}

// Reshapes keep products of dims.
// CHECK-LABEL: func.func @reshape_product
// CHECK-SAME: sdc.guards = [#sdc.guard<"T == B*S", {{.*}}>]
// CHECK: "sdc.reshape"{{.*}}sdc.result_dims = [#sdc.dims<["B*S", 64]>], shape = ["B*S", 64]
func.func @reshape_product(%x: tensor<?x?x64xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["B", "S", 64]>},
                           %y: tensor<?x64xf32> {sdc.name = "y", sdc.dims = #sdc.dims<["T", 64]>}) -> tensor<?x64xf32> {
  %0 = "sdc.reshape"(%x) {shape = ["B*S", 64]} : (tensor<?x?x64xf32>) -> tensor<?x64xf32>
  %1 = "sdc.add"(%0, %y) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %1 : tensor<?x64xf32>
}

// An inferred dim (-1) must divide evenly.
// CHECK-LABEL: func.func @reshape_divisible
// CHECK-SAME: sdc.guards = [#sdc.guard<"N % 2 == 0", "'sdc.reshape' at {{.*}}: cannot reshape N elements into [2, -1]: 2 does not divide it">]
// CHECK: "sdc.reshape"{{.*}}sdc.result_dims = [#sdc.dims<[2, "N//2"]>]
func.func @reshape_divisible(%x: tensor<?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N"]>}) -> tensor<2x?xf32> {
  %0 = "sdc.reshape"(%x) {shape = [2, -1]} : (tensor<?xf32>) -> tensor<2x?xf32>
  return %0 : tensor<2x?xf32>
}

// Convolution arithmetic: (L + 2 - 3)//2 + 1 must be 7 for the weight after it, so L is 13 or 14,
// and the convolution's output is statically 7 long.
// CHECK-LABEL: func.func @conv_window
// CHECK-SAME: sdc.guards = [#sdc.guard<"13 <= L <= 14", "'sdc.matmul' at {{.*}}: contracting dims differ: lhs has (L + 1)//2, rhs has 7">]
// CHECK: "sdc.conv"{{.*}}sdc.result_dims = [#sdc.dims<["N", 8, 7]>]{{.*}} -> tensor<?x8x7xf32>
func.func @conv_window(%x: tensor<?x3x?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N", 3, "L"]>}) -> tensor<?x8x4xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x3x3xf32>
  %v = "sdc.parameter"() {name = "v"} : () -> tensor<7x4xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1>, strides = array<i64: 2>} : (tensor<?x3x?xf32>, tensor<8x3x3xf32>) -> tensor<?x8x?xf32>
  %1 = "sdc.matmul"(%0, %v) : (tensor<?x8x?xf32>, tensor<7x4xf32>) -> tensor<?x8x4xf32>
  return %1 : tensor<?x8x4xf32>
}

// Two branches downsample differently: (H + 1)//2 == H//2 holds exactly for even H, and then
// the convolution's (H + 1)//2 is H//2 as well.
// CHECK-LABEL: func.func @conv_branches
// CHECK-SAME: sdc.guards = [#sdc.guard<"H >= 2", "'sdc.max_pool' at {{.*}}">, #sdc.guard<"H % 2 == 0", "'sdc.add' at {{.*}}">, #sdc.guard<"W >= 2", {{.*}}>, #sdc.guard<"W % 2 == 0", {{.*}}>]
// CHECK-SAME: sdc.relations = ["H >= 2", "H % 2 == 0", "W >= 2", "W % 2 == 0"]
// CHECK: "sdc.conv"{{.*}}sdc.result_dims = [#sdc.dims<["N", 8, "H//2", "W//2"]>]
// CHECK: "sdc.max_pool"{{.*}}sdc.result_dims = [#sdc.dims<["N", 3, "H//2", "W//2"]>]
// CHECK: "sdc.add"{{.*}}sdc.result_dims = [#sdc.dims<["N", 8, "H//2", "W//2"]>]
func.func @conv_branches(%x: tensor<?x3x?x?xf32> {sdc.name = "x", sdc.dims = #sdc.dims<["N", 3, "H", "W"]>}) -> tensor<?x8x?x?xf32> {
  %w = "sdc.parameter"() {name = "w"} : () -> tensor<8x3x3x3xf32>
  %v = "sdc.parameter"() {name = "v"} : () -> tensor<8x3x2x2xf32>
  %0 = "sdc.conv"(%x, %w) {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x3x?x?xf32>, tensor<8x3x3x3xf32>) -> tensor<?x8x?x?xf32>
  %1 = "sdc.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<?x3x?x?xf32>) -> tensor<?x3x?x?xf32>
  %2 = "sdc.conv"(%1, %v) {pads = array<i64: 0, 0, 1, 1>} : (tensor<?x3x?x?xf32>, tensor<8x3x2x2xf32>) -> tensor<?x8x?x?xf32>
  %3 = "sdc.add"(%0, %2) : (tensor<?x8x?x?xf32>, tensor<?x8x?x?xf32>) -> tensor<?x8x?x?xf32>
  return %3 : tensor<?x8x?x?xf32>
}

// Dims without a name get one (input_dim), so that guards can speak of them; a slice from 1 to
// the end is one shorter, and a split in three needs the rest to divide: arg0_1 is 3q + 1, and
// each part (arg0_1 - 1)//3 is arg0_1//3.
// CHECK-LABEL: func.func @slice_and_split
// CHECK-SAME: (%{{.*}}: tensor<?x?xf32> {sdc.dims = #sdc.dims<["arg0_0", "arg0_1"]>})
// CHECK-SAME: -> (tensor<?x?xf32> {sdc.dims = #sdc.dims<["arg0_0", "arg0_1//3"]>})
// CHECK-SAME: #sdc.guard<"arg0_1 % 3 == 1", "'sdc.split' at {{.*}}: dim 1 of size arg0_1 - 1 does not split into 3 equal parts">
// CHECK: "sdc.slice"{{.*}}sdc.result_dims = [#sdc.dims<["arg0_0", "arg0_1 - 1"]>]
func.func @slice_and_split(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = "sdc.slice"(%x) {axes = array<i64: 1>, ends = array<i64: 9223372036854775807>, starts = array<i64: 1>} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %1:3 = "sdc.split"(%0) {axis = 1 : i64, parts = 3 : i64} : (tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>)
  return %1#2 : tensor<?x?xf32>
}

// A static function has nothing to solve and stays as it is.
// CHECK-LABEL: func.func @static_untouched
// CHECK-SAME: (%{{.*}}: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT: "sdc.relu"(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x4xf32>
func.func @static_untouched(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "sdc.relu"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// input-shape names the dims (img=B,3,224,224: dim 1 becomes static) and bounds B.
// CHECK-LABEL: func.func @bounded
// CHECK-SAME: sdc.dims = #sdc.dims<["img_0", "img_1", 224, 224]>
// BOUND-LABEL: func.func @bounded
// BOUND-SAME: (%{{.*}}: tensor<?x3x224x224xf32> {sdc.dims = #sdc.dims<["B", 3, 224, 224]>, sdc.name = "img"})
// BOUND-SAME: sdc.guards = [#sdc.guard<"1 <= B <= 64", "--input-shape B=1..64">]
// BOUND: "sdc.relu"{{.*}}sdc.result_dims = [#sdc.dims<["B", 3, 224, 224]>]{{.*}} : (tensor<?x3x224x224xf32>) -> tensor<?x3x224x224xf32>
func.func @bounded(%x: tensor<?x?x224x224xf32> {sdc.name = "img"}) -> tensor<?x?x224x224xf32> {
  %0 = "sdc.relu"(%x) : (tensor<?x?x224x224xf32>) -> tensor<?x?x224x224xf32>
  return %0 : tensor<?x?x224x224xf32>
}
