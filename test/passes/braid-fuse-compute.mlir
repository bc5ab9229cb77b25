// RUN: braid-opt %s --braid-fuse-compute --split-input-file | FileCheck %s

// LLaMA's MLP: silu(gate) * up becomes one swiglu.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[G:.*]]: tensor<1x8x128xf32>, %[[U:.*]]: tensor<1x8x128xf32>)
// CHECK-NEXT: %[[Y:.*]] = braid.swiglu %[[G]], %[[U]] : tensor<1x8x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @mlp(%g: tensor<1x8x128xf32>, %u: tensor<1x8x128xf32>) -> tensor<1x8x128xf32> {
  %s = braid.silu %g : tensor<1x8x128xf32>
  %y = braid.mul %s, %u : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  return %y : tensor<1x8x128xf32>
}

// -----

// The silu on the right: the product commutes exactly, gate stays first.
// CHECK-LABEL: func.func @silu_on_the_right
// CHECK-SAME: (%[[G:.*]]: tensor<2x64xbf16>, %[[U:.*]]: tensor<2x64xbf16>)
// CHECK-NEXT: braid.swiglu %[[G]], %[[U]] : tensor<2x64xbf16>
func.func @silu_on_the_right(%g: tensor<2x64xbf16>, %u: tensor<2x64xbf16>) -> tensor<2x64xbf16> {
  %s = braid.silu %g : tensor<2x64xbf16>
  %y = braid.mul %u, %s : (tensor<2x64xbf16>, tensor<2x64xbf16>) -> tensor<2x64xbf16>
  return %y : tensor<2x64xbf16>
}

// -----

// Refused: the silu result is read again (and returned): it must exist.
// CHECK-LABEL: func.func @silu_read_twice
// CHECK: braid.silu
// CHECK: braid.mul
// CHECK-NOT: braid.swiglu
func.func @silu_read_twice(%g: tensor<4x32xf32>, %u: tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %s = braid.silu %g : tensor<4x32xf32>
  %y = braid.mul %s, %u : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y, %s : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// Refused: a broadcasting mul (swiglu's operands have one shape).
// CHECK-LABEL: func.func @broadcast
// CHECK: braid.silu
// CHECK: braid.mul
// CHECK-NOT: braid.swiglu
func.func @broadcast(%g: tensor<4x32xf32>, %u: tensor<32xf32>) -> tensor<4x32xf32> {
  %s = braid.silu %g : tensor<4x32xf32>
  %y = braid.mul %s, %u : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// Refused: the silu of a different input than the mul reads is not a
// pattern (a plain mul of two tensors), and ops that already carry a
// stream (scheduled IR) are left alone.
// CHECK-LABEL: func.func @no_silu_or_scheduled
// CHECK: braid.mul %arg0, %arg1 {braid.stream = 0 : i64}
// CHECK: braid.silu
// CHECK: braid.mul
// CHECK-NOT: braid.swiglu
func.func @no_silu_or_scheduled(%g: tensor<4x32xf32>, %u: tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %p = braid.mul %g, %u {braid.stream = 0 : i64} : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %s = braid.silu %g {braid.stream = 1 : i64} : tensor<4x32xf32>
  %y = braid.mul %s, %u {braid.stream = 1 : i64} : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %p, %y : tensor<4x32xf32>, tensor<4x32xf32>
}
