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

// Refused: a residual add (the result's shape, not [N]); a matmul result
// that something else reads too (it must exist); a bias of another
// element type cannot occur (the add's types agree), but a [1] bias that
// broadcasts is not [N].
// CHECK-LABEL: func.func @not_epilogues
// CHECK-NOT: bias
// CHECK: braid.matmul %arg0, %arg1 :
// CHECK-NEXT: braid.add
// CHECK-NEXT: braid.matmul %arg0, %arg1 :
// CHECK-NEXT: braid.add
// CHECK-NEXT: braid.matmul %arg0, %arg1 :
// CHECK-NEXT: braid.add
// CHECK-NEXT: return
func.func @not_epilogues(%x: tensor<2x32xf32>, %w: tensor<32x16xf32>, %r: tensor<2x16xf32>, %b: tensor<16xf32>, %one: tensor<1xf32>) -> (tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>) {
  %a = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %ar = braid.add %a, %r : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %c = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %cb = braid.add %c, %b : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %d = braid.matmul %x, %w : (tensor<2x32xf32>, tensor<32x16xf32>) -> tensor<2x16xf32>
  %d1 = braid.add %d, %one : (tensor<2x16xf32>, tensor<1xf32>) -> tensor<2x16xf32>
  return %ar, %cb, %c, %d1 : tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>
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
