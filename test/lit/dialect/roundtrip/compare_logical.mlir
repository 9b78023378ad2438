// Round trip of the comparisons (any element type in, i1 out) and the logical ops (i1 only).
// RUN: sdc-opt %s -o %t.first
// RUN: sdc-opt %t.first -o %t.second
// RUN: diff %t.first %t.second
// RUN: FileCheck %s --input-file %t.second

// CHECK-LABEL: func.func @compare
// CHECK-SAME: (%[[A:[^:]+]]: tensor<?x1xf32>, %[[B:[^:]+]]: tensor<3xf32>, %[[I:[^:]+]]: tensor<3xi8>)
// CHECK-NEXT: %[[EQ:.*]] = "sdc.eq"(%[[A]], %[[B]]) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xi1>
// CHECK-NEXT: %[[NE:.*]] = "sdc.ne"(%[[B]], %[[A]]) : (tensor<3xf32>, tensor<?x1xf32>) -> tensor<?x3xi1>
// CHECK-NEXT: %[[LT:.*]] = "sdc.lt"(%[[A]], %[[B]]) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xi1>
// CHECK-NEXT: %[[LE:.*]] = "sdc.le"(%[[A]], %[[B]]) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xi1>
// CHECK-NEXT: %[[GT:.*]] = "sdc.gt"(%[[I]], %[[I]]) : (tensor<3xi8>, tensor<3xi8>) -> tensor<3xi1>
// CHECK-NEXT: %[[GE:.*]] = "sdc.ge"(%[[EQ]], %[[NE]]) : (tensor<?x3xi1>, tensor<?x3xi1>) -> tensor<?x3xi1>
// CHECK-NEXT: %[[AND:.*]] = "sdc.and"(%[[EQ]], %[[LT]]) : (tensor<?x3xi1>, tensor<?x3xi1>) -> tensor<?x3xi1>
// CHECK-NEXT: %[[OR:.*]] = "sdc.or"(%[[AND]], %[[GT]]) : (tensor<?x3xi1>, tensor<3xi1>) -> tensor<?x3xi1>
// CHECK-NEXT: %[[XOR:.*]] = "sdc.xor"(%[[OR]], %[[LE]]) : (tensor<?x3xi1>, tensor<?x3xi1>) -> tensor<?x3xi1>
// CHECK-NEXT: return %[[XOR]], %[[GE]]
func.func @compare(%a: tensor<?x1xf32>, %b: tensor<3xf32>, %i: tensor<3xi8>) -> (tensor<?x3xi1>, tensor<?x3xi1>) {
  %eq = "sdc.eq"(%a, %b) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xi1>
  %ne = "sdc.ne"(%b, %a) : (tensor<3xf32>, tensor<?x1xf32>) -> tensor<?x3xi1>
  %lt = "sdc.lt"(%a, %b) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xi1>
  %le = "sdc.le"(%a, %b) : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xi1>
  %gt = "sdc.gt"(%i, %i) : (tensor<3xi8>, tensor<3xi8>) -> tensor<3xi1>
  %ge = "sdc.ge"(%eq, %ne) : (tensor<?x3xi1>, tensor<?x3xi1>) -> tensor<?x3xi1>
  %and = "sdc.and"(%eq, %lt) : (tensor<?x3xi1>, tensor<?x3xi1>) -> tensor<?x3xi1>
  %or = "sdc.or"(%and, %gt) : (tensor<?x3xi1>, tensor<3xi1>) -> tensor<?x3xi1>
  %xor = "sdc.xor"(%or, %le) : (tensor<?x3xi1>, tensor<?x3xi1>) -> tensor<?x3xi1>
  return %xor, %ge : tensor<?x3xi1>, tensor<?x3xi1>
}
