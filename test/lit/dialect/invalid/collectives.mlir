// Shape rules of the collectives (sdc/dialect/ops/collectives.py) and the module's device mesh
// they read (read_mesh in sdc/dialect/attrs.py).
// RUN: sdc-opt %s --split-input-file --verify-diagnostics

func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sdc.all_reduce' op needs a device mesh: the enclosing module has no 'sdc.mesh' attribute}}
  %0 = "sdc.all_reduce"(%x) {mesh_axes = ["dp"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @axis_not_in_mesh(%x: tensor<4xf32>) {
    // expected-error @+1 {{'sdc.send' op mesh axis 'pp' is not in the mesh (axes: 'dp', 'tp')}}
    "sdc.send"(%x) {mesh_axes = ["pp"]} : (tensor<4xf32>) -> ()
    return
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @no_axes() -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.recv' op mesh_axes must name at least one mesh axis}}
    %0 = "sdc.recv"() {mesh_axes = []} : () -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @axes_repeat(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.broadcast_from' op mesh_axes ['dp', 'dp'] repeat an axis}}
    %0 = "sdc.broadcast_from"(%x) {mesh_axes = ["dp", "dp"]} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @all_reduce_needs_numeric(%x: tensor<4xi1>) -> tensor<4xi1> {
    // expected-error @+1 {{'sdc.all_reduce' op operand must have numeric element type, found i1}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["tp"]} : (tensor<4xi1>) -> tensor<4xi1>
    return %0 : tensor<4xi1>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @reduction_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.all_reduce' op attribute 'reduction' expected one of 'sum', 'max', 'min', 'prod', 'avg', found 'mean'}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["tp"], reduction = "mean"} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @all_gather_axis(%x: tensor<4x3xf32>) -> tensor<8x3xf32> {
    // expected-error @+1 {{'sdc.all_gather' op axis 2 is out of range for rank 2}}
    %0 = "sdc.all_gather"(%x) {axis = 2 : i64, mesh_axes = ["dp"]} : (tensor<4x3xf32>) -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 4>>} {
  func.func @all_gather_group_size(%x: tensor<4x3xf32>) -> tensor<8x3xf32> {
    // expected-error @+1 {{'sdc.all_gather' op result #0 dim 0 is 8, expected 32 (inferred type tensor<32x3xf32>)}}
    %0 = "sdc.all_gather"(%x) {axis = 0 : i64, mesh_axes = ["dp", "tp"]} : (tensor<4x3xf32>) -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @reduce_scatter_needs_numeric(%x: tensor<4xi1>) -> tensor<2xi1> {
    // expected-error @+1 {{'sdc.reduce_scatter' op operand must have numeric element type, found i1}}
    %0 = "sdc.reduce_scatter"(%x) {axis = 0 : i64, mesh_axes = ["tp"]} : (tensor<4xi1>) -> tensor<2xi1>
    return %0 : tensor<2xi1>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @reduce_scatter_uneven(%x: tensor<5x3xf32>) -> tensor<2x3xf32> {
    // expected-error @+1 {{'sdc.reduce_scatter' op dim 0 of size 5 is not divisible by the group size 2}}
    %0 = "sdc.reduce_scatter"(%x) {axis = 0 : i64, mesh_axes = ["tp"]} : (tensor<5x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @all_to_all_split_axis(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{'sdc.all_to_all' op split_axis 2 is out of range for rank 2}}
    %0 = "sdc.all_to_all"(%x) {concat_axis = 1 : i64, mesh_axes = ["tp"], split_axis = 2 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @all_to_all_concat_axis(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{'sdc.all_to_all' op concat_axis -3 is out of range for rank 2}}
    %0 = "sdc.all_to_all"(%x) {concat_axis = -3 : i64, mesh_axes = ["tp"], split_axis = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @all_to_all_uneven(%x: tensor<3x4xf32>) -> tensor<1x8xf32> {
    // expected-error @+1 {{'sdc.all_to_all' op split dim 0 of size 3 is not divisible by the group size 2}}
    %0 = "sdc.all_to_all"(%x) {concat_axis = 1 : i64, mesh_axes = ["tp"], split_axis = 0 : i64} : (tensor<3x4xf32>) -> tensor<1x8xf32>
    return %0 : tensor<1x8xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2, 2>>} {
  func.func @root_outside_group(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.broadcast_from' op root 2 is outside the group of 2 devices}}
    %0 = "sdc.broadcast_from"(%x) {mesh_axes = ["dp"], root = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = "dp"} {
  func.func @mesh_not_a_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.all_reduce' op expected #sdc.mesh<...>, found "dp"}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["dp"]} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<"dp", array<i64: 2>>} {
  func.func @mesh_names_not_a_list(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.all_reduce' op expected mesh axis names (["dp", "tp"]), found "dp"}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["dp"]} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<[0], array<i64: 2>>} {
  func.func @mesh_names_not_strings(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.all_reduce' op expected mesh axis names as strings, found 0 : i64}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["dp"]} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp"], [2]>} {
  func.func @mesh_sizes_not_an_array(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.all_reduce' op expected mesh sizes (array<i64: ...>), found [2]}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["dp"]} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {sdc.mesh = #sdc.mesh<["dp", "tp"], array<i64: 2>>} {
  func.func @mesh_sizes_count(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{'sdc.all_reduce' op mesh has 2 axis names but 1 sizes}}
    %0 = "sdc.all_reduce"(%x) {mesh_axes = ["dp"]} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
