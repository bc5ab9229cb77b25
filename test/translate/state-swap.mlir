// RUN: braid-opt %s --braid-plan-memory --braid-verify-schedule | braid-translate --braid-to-plan | braid-translate --plan-to-text | FileCheck %s

// Two state slots returned swapped: each binding names the other slot's
// input, and the runtime assigns both at once (test/unit/StateScheduleTest
// runs it). The schedule check counts the copy-back as a write to each slot
// at the end, after every read.
// CHECK-LABEL: func "swap"
// CHECK: %[[A:[0-9]+]] state 0 f32 4
// CHECK-NEXT: %[[B:[0-9]+]] state 1 f32 4
// CHECK: state 0 %[[A]] -> %[[B]]
// CHECK-NEXT: state 1 %[[B]] -> %[[A]]
func.func @swap(%a: tensor<4xf32> {braid.state = "a"}, %b: tensor<4xf32> {braid.state = "b"}) -> (tensor<4xf32> {braid.state = "a"}, tensor<4xf32> {braid.state = "b"}) {
  return %b, %a : tensor<4xf32>, tensor<4xf32>
}
