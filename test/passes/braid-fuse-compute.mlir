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

// -----

// A LLaMA residual step: the sum goes on to the next add, the norm feeds
// the next layer. The fused op takes the norm's place.
// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x64xbf16>, %[[R:.*]]: tensor<1x4x64xbf16>, %[[M:.*]]: tensor<1x4x64xbf16>)
// CHECK: %[[W:.*]] = braid.parameter "model.layers.0.input_layernorm.weight"
// CHECK-NEXT: %[[S:.*]], %[[N:.*]] = braid.add_rms_norm %[[X]], %[[R]], %[[W]] {epsilon = 1.000000e-05 : f64} : (tensor<1x4x64xbf16>, tensor<1x4x64xbf16>, tensor<64xbf16>) -> (tensor<1x4x64xbf16>, tensor<1x4x64xbf16>)
// CHECK-NEXT: %[[T:.*]] = braid.add %[[S]], %[[M]]
// CHECK-NEXT: return %[[N]], %[[T]]
func.func @residual(%x: tensor<1x4x64xbf16>, %r: tensor<1x4x64xbf16>, %m: tensor<1x4x64xbf16>) -> (tensor<1x4x64xbf16>, tensor<1x4x64xbf16>) {
  %s = braid.add %x, %r : (tensor<1x4x64xbf16>, tensor<1x4x64xbf16>) -> tensor<1x4x64xbf16>
  %w = braid.parameter "model.layers.0.input_layernorm.weight" full [64] : tensor<64xbf16>
  %n = braid.rms_norm %s, %w {epsilon = 1.0e-05 : f64} : (tensor<1x4x64xbf16>, tensor<64xbf16>) -> tensor<1x4x64xbf16>
  %t = braid.add %s, %m : (tensor<1x4x64xbf16>, tensor<1x4x64xbf16>) -> tensor<1x4x64xbf16>
  return %n, %t : tensor<1x4x64xbf16>, tensor<1x4x64xbf16>
}

// -----

// Another reader of the sum before the norm: the fused op takes the add's
// place (the weight is defined before it).
// CHECK-LABEL: func.func @reader_first
// CHECK-NEXT: %[[W:.*]] = braid.parameter
// CHECK-NEXT: %[[S:.*]], %[[N:.*]] = braid.add_rms_norm
// CHECK-NEXT: braid.silu %[[S]]
// CHECK-NEXT: return
func.func @reader_first(%x: tensor<2x32xf32>, %r: tensor<2x32xf32>) -> (tensor<2x32xf32>, tensor<2x32xf32>) {
  %w = braid.parameter "norm.weight" full [32] : tensor<32xf32>
  %s = braid.add %x, %r : (tensor<2x32xf32>, tensor<2x32xf32>) -> tensor<2x32xf32>
  %u = braid.silu %s : tensor<2x32xf32>
  %n = braid.rms_norm %s, %w {epsilon = 1.0e-06 : f64} : (tensor<2x32xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  return %n, %u : tensor<2x32xf32>, tensor<2x32xf32>
}

// -----

// Refused: a reader of the sum before the norm and the weight defined
// after the add (neither place works); and an add that broadcasts.
// CHECK-LABEL: func.func @refused
// CHECK-NOT: braid.add_rms_norm
// CHECK: return
func.func @refused(%x: tensor<2x32xf32>, %r: tensor<2x32xf32>, %b: tensor<32xf32>) -> (tensor<2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>) {
  %s = braid.add %x, %r : (tensor<2x32xf32>, tensor<2x32xf32>) -> tensor<2x32xf32>
  %u = braid.silu %s : tensor<2x32xf32>
  %w = braid.parameter "norm.weight" full [32] : tensor<32xf32>
  %n = braid.rms_norm %s, %w {epsilon = 1.0e-06 : f64} : (tensor<2x32xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  %sb = braid.add %x, %b : (tensor<2x32xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  %nb = braid.rms_norm %sb, %w {epsilon = 1.0e-06 : f64} : (tensor<2x32xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  return %n, %u, %nb : tensor<2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>
}
