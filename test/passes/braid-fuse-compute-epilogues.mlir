// RUN: braid-opt %s --braid-fuse-compute --split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-fuse-compute=epilogues=false --split-input-file | FileCheck %s --check-prefix=OFF

// GPT-2's MLP: c_fc's bias add and tanh GELU become its epilogue, c_proj's
// bias add its own.
// CHECK-LABEL: func.func @gpt2_mlp
// CHECK-SAME: (%[[X:.*]]: tensor<1x8x64xf32>)
// CHECK: %[[H:.*]] = braid.matmul %[[X]], %{{.*}} bias %{{.*}} gelu tanh : (tensor<1x8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<1x8x256xf32>
// CHECK: %[[Y:.*]] = braid.matmul %[[H]], %{{.*}} bias %{{.*}} : (tensor<1x8x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: braid.add
// CHECK-NOT: braid.gelu
// OFF-LABEL: func.func @gpt2_mlp
// OFF-COUNT-2: braid.add
// OFF: braid.gelu
func.func @gpt2_mlp(%x: tensor<1x8x64xf32>) -> tensor<1x8x64xf32> {
  %w1 = braid.parameter "h.0.mlp.c_fc.weight" full [64, 256] : tensor<64x256xf32>
  %b1 = braid.parameter "h.0.mlp.c_fc.bias" full [256] : tensor<256xf32>
  %w2 = braid.parameter "h.0.mlp.c_proj.weight" full [256, 64] : tensor<256x64xf32>
  %b2 = braid.parameter "h.0.mlp.c_proj.bias" full [64] : tensor<64xf32>
  %h = braid.matmul %x, %w1 : (tensor<1x8x64xf32>, tensor<64x256xf32>) -> tensor<1x8x256xf32>
  %hb = braid.add %h, %b1 : (tensor<1x8x256xf32>, tensor<256xf32>) -> tensor<1x8x256xf32>
  %g = braid.gelu tanh %hb : tensor<1x8x256xf32>
  %y = braid.matmul %g, %w2 : (tensor<1x8x256xf32>, tensor<256x64xf32>) -> tensor<1x8x64xf32>
  %yb = braid.add %y, %b2 : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  return %yb : tensor<1x8x64xf32>
}

// -----

// A tanh GELU straight after the matmul (no bias).
// CHECK-LABEL: func.func @gelu_only
// CHECK: braid.matmul %{{.*}}, %{{.*}} gelu tanh {transpose_b}
// CHECK-NOT: braid.gelu
func.func @gelu_only(%x: tensor<2x32xbf16>, %w: tensor<16x32xbf16>) -> tensor<2x16xbf16> {
  %h = braid.matmul %x, %w {transpose_b} : (tensor<2x32xbf16>, tensor<16x32xbf16>) -> tensor<2x16xbf16>
  %g = braid.gelu tanh %h : tensor<2x16xbf16>
  return %g : tensor<2x16xbf16>
}

// -----

// Partly refused: an exact (erf) GELU has no cuBLASLt epilogue, so only the
// bias joins the matmul; the GELU stays.
// CHECK-LABEL: func.func @erf_gelu
// CHECK: %[[H:.*]] = braid.matmul %{{.*}}, %{{.*}} bias %{{.*}} :
// CHECK-NEXT: braid.gelu none %[[H]]
func.func @erf_gelu(%x: tensor<2x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> tensor<2x16xf32> {
  %h = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %hb = braid.add %h, %b : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %g = braid.gelu none %hb : tensor<2x16xf32>
  return %g : tensor<2x16xf32>
}

// -----

// A residual add after the bias (GPT-2's c_proj at tp 1, before the next
// layer_norm): bias and residual both join (cuBLASLt's C with beta 1).
// CHECK-LABEL: func.func @bias_then_residual
// CHECK-SAME: (%[[X:.*]]: tensor<2x32xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[B:.*]]: tensor<16xf32>, %[[R:.*]]: tensor<2x16xf32>
// CHECK-NEXT: %[[Y:.*]] = braid.matmul %[[X]], %[[W]] bias %[[B]] residual %[[R]] : (tensor<2x32xf32>, tensor<32x16xf32>, tensor<16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
// CHECK-NEXT: braid.layer_norm %[[Y]]
func.func @bias_then_residual(%x: tensor<2x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>, %r: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  %h = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %hb = braid.add %h, %b : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  // The residual on the left: additions commute exactly.
  %s = braid.add %r, %hb : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %n = braid.layer_norm %s, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %n : tensor<2x16xf32>
}

// -----

// A residual add an rms_norm reads is add_rms_norm's (LLaMA at tp 1): the
// norm joins too, which the epilogue could not do.
// CHECK-LABEL: func.func @residual_into_a_norm
// CHECK: %[[O:.*]] = braid.matmul %{{.*}}, %{{.*}} {transpose_b} :
// CHECK-NEXT: braid.add_rms_norm %{{.*}}, %[[O]], %{{.*}}
func.func @residual_into_a_norm(%x: tensor<1x4x32xf32>, %w: tensor<32x32xf32>, %r: tensor<1x4x32xf32>, %g: tensor<32xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x32xf32>) {
  %o = braid.matmul %x, %w {transpose_b} : (tensor<1x4x32xf32>, tensor<32x32xf32>) -> tensor<1x4x32xf32>
  %s = braid.add %r, %o : (tensor<1x4x32xf32>, tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
  %n = braid.rms_norm %s, %g {epsilon = 1.0e-5 : f64} : (tensor<1x4x32xf32>, tensor<32xf32>) -> tensor<1x4x32xf32>
  return %s, %n : tensor<1x4x32xf32>, tensor<1x4x32xf32>
}

// -----

// Refused: a matmul result that something else reads too (it must exist);
// a [1] bias that broadcasts is not [N]; a tanh GELU after a residual
// (cuBLASLt would apply it before): the residual joins, the GELU stays.
// CHECK-LABEL: func.func @not_epilogues
// CHECK-NOT: bias
// CHECK: braid.matmul %arg0, %arg1 :
// CHECK-NEXT: braid.add
// CHECK-NEXT: braid.matmul %arg0, %arg1 :
// CHECK-NEXT: braid.add
// CHECK-NEXT: %[[R:.*]] = braid.matmul %arg0, %arg1 residual %arg2 :
// CHECK-NEXT: braid.gelu tanh %[[R]]
// CHECK-NEXT: return
func.func @not_epilogues(%x: tensor<2x32xf32>, %w: tensor<32x16xf32>, %r: tensor<2x16xf32>, %b: tensor<16xf32>, %one: tensor<1xf32>) -> (tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>) {
  %c = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %cb = braid.add %c, %b : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %d = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %d1 = braid.add %d, %one : (tensor<2x16xf32>, tensor<1xf32>) -> tensor<2x16xf32>
  %e = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %er = braid.add %e, %r : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %eg = braid.gelu tanh %er : tensor<2x16xf32>
  return %cb, %c, %d1, %eg : tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>
}

// -----

// Refused: scheduled IR (every op on a stream).
// CHECK-LABEL: func.func @scheduled
// CHECK: braid.matmul %{{.*}}, %{{.*}} {braid.stream = 0 : i64}
// CHECK-NEXT: braid.add
func.func @scheduled(%x: tensor<2x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> tensor<2x16xf32> {
  %h = braid.matmul %x, %w {braid.stream = 0 : i64} : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %hb = braid.add %h, %b {braid.stream = 0 : i64} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %hb : tensor<2x16xf32>
}
