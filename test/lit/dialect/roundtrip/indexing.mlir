// Round trip of the indexing, scan, sorting, resampling and signal ops: gather_elements, gather_nd,
// scatter_elements, scatter_nd, cumsum, cumprod, topk, resize, grid_sample, roi_align, col2im, dft,
// bitcast, det.
// RUN: sdc-opt %s | sdc-opt | FileCheck %s

// CHECK-LABEL: func.func @gather_scatter
// CHECK-SAME: (%[[D:[^:]+]]: tensor<?x10xf32>, %[[I:[^:]+]]: tensor<?x3xi64>, %[[U:[^:]+]]: tensor<?x3xf32>, %[[C:[^:]+]]: tensor<4x5x6xf32>, %[[T:[^:]+]]: tensor<?x2xi64>, %[[S:[^:]+]]: tensor<?x6xf32>)
// CHECK-NEXT: %[[GE:.*]] = "sdc.gather_elements"(%[[D]], %[[I]]) {axis = 1 : i64} : (tensor<?x10xf32>, tensor<?x3xi64>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[SE:.*]] = "sdc.scatter_elements"(%[[D]], %[[I]], %[[U]]) {axis = -1 : i64, reduction = "max"} : (tensor<?x10xf32>, tensor<?x3xi64>, tensor<?x3xf32>) -> tensor<?x10xf32>
// CHECK-NEXT: %[[GN:.*]] = "sdc.gather_nd"(%[[C]], %[[T]]) : (tensor<4x5x6xf32>, tensor<?x2xi64>) -> tensor<?x6xf32>
// CHECK-NEXT: %[[SN:.*]] = "sdc.scatter_nd"(%[[C]], %[[T]], %[[S]]) {reduction = "add"} : (tensor<4x5x6xf32>, tensor<?x2xi64>, tensor<?x6xf32>) -> tensor<4x5x6xf32>
// CHECK-NEXT: return %[[GE]], %[[SE]], %[[GN]], %[[SN]]
func.func @gather_scatter(%data: tensor<?x10xf32>, %idx: tensor<?x3xi64>, %upd: tensor<?x3xf32>, %cube: tensor<4x5x6xf32>, %tuples: tensor<?x2xi64>, %slices: tensor<?x6xf32>) -> (tensor<?x3xf32>, tensor<?x10xf32>, tensor<?x6xf32>, tensor<4x5x6xf32>) {
  %0 = "sdc.gather_elements"(%data, %idx) {axis = 1 : i64} : (tensor<?x10xf32>, tensor<?x3xi64>) -> tensor<?x3xf32>
  %1 = "sdc.scatter_elements"(%data, %idx, %upd) {axis = -1 : i64, reduction = "max"} : (tensor<?x10xf32>, tensor<?x3xi64>, tensor<?x3xf32>) -> tensor<?x10xf32>
  %2 = "sdc.gather_nd"(%cube, %tuples) : (tensor<4x5x6xf32>, tensor<?x2xi64>) -> tensor<?x6xf32>
  %3 = "sdc.scatter_nd"(%cube, %tuples, %slices) {reduction = "add"} : (tensor<4x5x6xf32>, tensor<?x2xi64>, tensor<?x6xf32>) -> tensor<4x5x6xf32>
  return %0, %1, %2, %3 : tensor<?x3xf32>, tensor<?x10xf32>, tensor<?x6xf32>, tensor<4x5x6xf32>
}

// Batched gather_nd: the leading batch dim of data and indices is matched one to one.
// CHECK-LABEL: func.func @gather_nd_batch
// CHECK-SAME: (%[[D:[^:]+]]: tensor<2x3x4xi32>, %[[I:[^:]+]]: tensor<2x5x1xi32>)
// CHECK-NEXT: %[[G:.*]] = "sdc.gather_nd"(%[[D]], %[[I]]) {batch_dims = 1 : i64} : (tensor<2x3x4xi32>, tensor<2x5x1xi32>) -> tensor<2x5x4xi32>
// CHECK-NEXT: return %[[G]]
func.func @gather_nd_batch(%data: tensor<2x3x4xi32>, %idx: tensor<2x5x1xi32>) -> tensor<2x5x4xi32> {
  %0 = "sdc.gather_nd"(%data, %idx) {batch_dims = 1 : i64} : (tensor<2x3x4xi32>, tensor<2x5x1xi32>) -> tensor<2x5x4xi32>
  return %0 : tensor<2x5x4xi32>
}

// CHECK-LABEL: func.func @scans_and_topk
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x16xf32>)
// CHECK-NEXT: %[[SUM:.*]] = "sdc.cumsum"(%[[X]]) {axis = 1 : i64, exclusive = true} : (tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK-NEXT: %[[PROD:.*]] = "sdc.cumprod"(%[[SUM]]) {axis = -1 : i64, reverse = true} : (tensor<?x16xf32>) -> tensor<?x16xf32>
// CHECK-NEXT: %[[TOP:.*]]:2 = "sdc.topk"(%[[PROD]]) {k = 3 : i64, largest = false} : (tensor<?x16xf32>) -> (tensor<?x3xf32>, tensor<?x3xi64>)
// CHECK-NEXT: return %[[TOP]]#0, %[[TOP]]#1
func.func @scans_and_topk(%x: tensor<?x16xf32>) -> (tensor<?x3xf32>, tensor<?x3xi64>) {
  %0 = "sdc.cumsum"(%x) {axis = 1 : i64, exclusive = true} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  %1 = "sdc.cumprod"(%0) {axis = -1 : i64, reverse = true} : (tensor<?x16xf32>) -> tensor<?x16xf32>
  %2:2 = "sdc.topk"(%1) {k = 3 : i64, largest = false} : (tensor<?x16xf32>) -> (tensor<?x3xf32>, tensor<?x3xi64>)
  return %2#0, %2#1 : tensor<?x3xf32>, tensor<?x3xi64>
}

// `sizes` mixes ints and dim expressions; `scales` and `roi` are f64 arrays.
// CHECK-LABEL: func.func @resize
// CHECK-SAME: (%[[X:[^:]+]]: tensor<1x3x?x32xf32>)
// CHECK-NEXT: %[[UP:.*]] = "sdc.resize"(%[[X]]) {axes = array<i64: 2, 3>, coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "floor", scales = array<f64: 2.000000e+00, 2.000000e+00>, sizes = ["2*H", 64]} : (tensor<1x3x?x32xf32>) -> tensor<1x3x?x64xf32>
// CHECK-NEXT: %[[CROP:.*]] = "sdc.resize"(%[[UP]]) {axes = array<i64: 3>, coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 1.000000e+01 : f64, mode = "linear", roi = array<f64: 2.500000e-01, 7.500000e-01>, sizes = [16]} : (tensor<1x3x?x64xf32>) -> tensor<1x3x?x16xf32>
// CHECK-NEXT: %[[AA:.*]] = "sdc.resize"(%[[CROP]]) {antialias = true, axes = array<i64: 3>, cubic_coeff_a = -5.000000e-01 : f64, exclude_outside = true, mode = "cubic", sizes = [5]} : (tensor<1x3x?x16xf32>) -> tensor<1x3x?x5xf32>
// CHECK-NEXT: return %[[AA]]
func.func @resize(%x: tensor<1x3x?x32xf32>) -> tensor<1x3x?x5xf32> {
  %0 = "sdc.resize"(%x) {axes = array<i64: 2, 3>, coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "floor", scales = array<f64: 2.0, 2.0>, sizes = ["2*H", 64]} : (tensor<1x3x?x32xf32>) -> tensor<1x3x?x64xf32>
  %1 = "sdc.resize"(%0) {axes = array<i64: 3>, coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 10.0 : f64, mode = "linear", roi = array<f64: 0.25, 0.75>, sizes = [16]} : (tensor<1x3x?x64xf32>) -> tensor<1x3x?x16xf32>
  %2 = "sdc.resize"(%1) {antialias = true, axes = array<i64: 3>, cubic_coeff_a = -0.5 : f64, exclude_outside = true, mode = "cubic", sizes = [5]} : (tensor<1x3x?x16xf32>) -> tensor<1x3x?x5xf32>
  return %2 : tensor<1x3x?x5xf32>
}

// CHECK-LABEL: func.func @sampling
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x256x50x50xf32>, %[[G:[^:]+]]: tensor<2x4x5x6x3xf32>, %[[V:[^:]+]]: tensor<2x8x6x7x9xf32>, %[[B:[^:]+]]: tensor<?x4xf32>, %[[BI:[^:]+]]: tensor<?xi64>)
// CHECK-NEXT: %[[GS:.*]] = "sdc.grid_sample"(%[[V]], %[[G]]) {align_corners = true, mode = "nearest", padding_mode = "reflection"} : (tensor<2x8x6x7x9xf32>, tensor<2x4x5x6x3xf32>) -> tensor<2x8x4x5x6xf32>
// CHECK-NEXT: %[[RA:.*]] = "sdc.roi_align"(%[[X]], %[[B]], %[[BI]]) {coordinate_transformation_mode = "output_half_pixel", mode = "max", output_height = 7 : i64, output_width = 7 : i64, spatial_scale = 6.250000e-02 : f64} : (tensor<2x256x50x50xf32>, tensor<?x4xf32>, tensor<?xi64>) -> tensor<?x256x7x7xf32>
// CHECK-NEXT: return %[[GS]], %[[RA]]
func.func @sampling(%x: tensor<2x256x50x50xf32>, %grid: tensor<2x4x5x6x3xf32>, %volume: tensor<2x8x6x7x9xf32>, %boxes: tensor<?x4xf32>, %batch: tensor<?xi64>) -> (tensor<2x8x4x5x6xf32>, tensor<?x256x7x7xf32>) {
  %0 = "sdc.grid_sample"(%volume, %grid) {align_corners = true, mode = "nearest", padding_mode = "reflection"} : (tensor<2x8x6x7x9xf32>, tensor<2x4x5x6x3xf32>) -> tensor<2x8x4x5x6xf32>
  %1 = "sdc.roi_align"(%x, %boxes, %batch) {coordinate_transformation_mode = "output_half_pixel", mode = "max", output_height = 7 : i64, output_width = 7 : i64, spatial_scale = 0.0625 : f64} : (tensor<2x256x50x50xf32>, tensor<?x4xf32>, tensor<?xi64>) -> tensor<?x256x7x7xf32>
  return %0, %1 : tensor<2x8x4x5x6xf32>, tensor<?x256x7x7xf32>
}

// CHECK-LABEL: func.func @col2im
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x10x12xf32>)
// CHECK-NEXT: %[[IM:.*]] = "sdc.col2im"(%[[X]]) {block_shape = array<i64: 1, 1, 5>, dilations = array<i64: 1, 1, 1>, image_shape = array<i64: 3, 4, 5>, pads = array<i64: 0, 0, 0, 0, 0, 0>} : (tensor<?x10x12xf32>) -> tensor<?x2x3x4x5xf32>
// CHECK-NEXT: return %[[IM]]
func.func @col2im(%x: tensor<?x10x12xf32>) -> tensor<?x2x3x4x5xf32> {
  %0 = "sdc.col2im"(%x) {block_shape = array<i64: 1, 1, 5>, dilations = array<i64: 1, 1, 1>, image_shape = array<i64: 3, 4, 5>, pads = array<i64: 0, 0, 0, 0, 0, 0>} : (tensor<?x10x12xf32>) -> tensor<?x2x3x4x5xf32>
  return %0 : tensor<?x2x3x4x5xf32>
}

// A forward real transform, its inverse back to a real signal, then a complex inverse.
// CHECK-LABEL: func.func @dft
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x16x1xf32>)
// CHECK-NEXT: %[[F:.*]] = "sdc.dft"(%[[X]]) {axis = 1 : i64, length = 16 : i64, onesided = true} : (tensor<?x16x1xf32>) -> tensor<?x9x2xf32>
// CHECK-NEXT: %[[R:.*]] = "sdc.dft"(%[[F]]) {axis = 1 : i64, inverse = true, length = 16 : i64, onesided = true} : (tensor<?x9x2xf32>) -> tensor<?x16x1xf32>
// CHECK-NEXT: %[[C:.*]] = "sdc.dft"(%[[F]]) {axis = -2 : i64, inverse = true, length = 12 : i64} : (tensor<?x9x2xf32>) -> tensor<?x12x2xf32>
// CHECK-NEXT: return %[[R]], %[[C]]
func.func @dft(%x: tensor<?x16x1xf32>) -> (tensor<?x16x1xf32>, tensor<?x12x2xf32>) {
  %0 = "sdc.dft"(%x) {axis = 1 : i64, length = 16 : i64, onesided = true} : (tensor<?x16x1xf32>) -> tensor<?x9x2xf32>
  %1 = "sdc.dft"(%0) {axis = 1 : i64, inverse = true, length = 16 : i64, onesided = true} : (tensor<?x9x2xf32>) -> tensor<?x16x1xf32>
  %2 = "sdc.dft"(%0) {axis = -2 : i64, inverse = true, length = 12 : i64} : (tensor<?x9x2xf32>) -> tensor<?x12x2xf32>
  return %1, %2 : tensor<?x16x1xf32>, tensor<?x12x2xf32>
}

// CHECK-LABEL: func.func @bits_and_det
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x3x3xf32>, %[[B:[^:]+]]: tensor<4xi1>)
// CHECK-NEXT: %[[I:.*]] = "sdc.bitcast"(%[[X]]) {dtype = i32} : (tensor<?x3x3xf32>) -> tensor<?x3x3xi32>
// CHECK-NEXT: %[[U:.*]] = "sdc.bitcast"(%[[B]]) {dtype = ui8} : (tensor<4xi1>) -> tensor<4xui8>
// CHECK-NEXT: %[[D:.*]] = "sdc.det"(%[[X]]) : (tensor<?x3x3xf32>) -> tensor<?xf32>
// CHECK-NEXT: return %[[I]], %[[U]], %[[D]]
func.func @bits_and_det(%x: tensor<?x3x3xf32>, %b: tensor<4xi1>) -> (tensor<?x3x3xi32>, tensor<4xui8>, tensor<?xf32>) {
  %0 = "sdc.bitcast"(%x) {dtype = i32} : (tensor<?x3x3xf32>) -> tensor<?x3x3xi32>
  %1 = "sdc.bitcast"(%b) {dtype = ui8} : (tensor<4xi1>) -> tensor<4xui8>
  %2 = "sdc.det"(%x) : (tensor<?x3x3xf32>) -> tensor<?xf32>
  return %0, %1, %2 : tensor<?x3x3xi32>, tensor<4xui8>, tensor<?xf32>
}
