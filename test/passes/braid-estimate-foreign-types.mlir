// RUN: braid-opt %s --braid-estimate -o /dev/null | FileCheck %s
//
// A tensor of another dialect with an element type the runtime does not run
// (here `index`) crashed tensorBytes() in the cost model (issue 15). Such a
// value has no braid size: it costs no bytes, and the estimate goes on.
// CHECK: braid-estimate @f on h100-sxm-x8 (graph launch), 1 ranks, 1 streams
// CHECK: step time (T)
func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  %c = arith.constant dense<1> : tensor<4xindex>
  %d = arith.addi %c, %c : tensor<4xindex>
  %y = braid.silu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
