// RUN: braid-opt %s --braid-fuse-compute --split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-fuse-compute=matmuls=false --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: braid-opt %s --braid-fuse-compute=epilogues=false --split-input-file | FileCheck %s --check-prefix=NOEPI

// Q, K and V of one token (GQA: K and V narrower): one matmul against the
// pack of the three weights, in their order, and three slices of its
// result; then Q's and K's ropes (adjacent heads, one positions operand,
// one set of attributes) become one rope over both, split by head slices.
// CHECK-LABEL: func.func @qkv_one_token
// CHECK-SAME: (%[[X:.*]]: tensor<1x1x64xf32>, %[[P:.*]]: tensor<1x1xi32>)
// CHECK-DAG: %[[WQ:.*]] = braid.parameter "q_proj.weight" full [64, 64]
// CHECK-DAG: %[[WK:.*]] = braid.parameter "k_proj.weight" full [16, 64]
// CHECK-DAG: %[[WV:.*]] = braid.parameter "v_proj.weight" full [16, 64]
// CHECK: %[[W:.*]] = braid.parameter_pack %[[WQ]], %[[WK]], %[[WV]] : (tensor<64x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<96x64xf32>
// CHECK-NEXT: %[[Y:.*]] = braid.matmul %[[X]], %[[W]] {transpose_b} : (tensor<1x1x64xf32>, tensor<96x64xf32>) -> tensor<1x1x96xf32>
// CHECK-NEXT: %[[V:.*]] = braid.slice %[[Y]] offsets [0, 0, 80] sizes [1, 1, 16]
// CHECK-NEXT: %[[VH:.*]] = braid.reshape %[[V]] : tensor<1x1x16xf32> -> tensor<1x1x1x16xf32>
// CHECK-NEXT: %[[QK:.*]] = braid.slice %[[Y]] offsets [0, 0, 0] sizes [1, 1, 80] : tensor<1x1x96xf32> -> tensor<1x1x80xf32>
// CHECK-NEXT: %[[QKH:.*]] = braid.reshape %[[QK]] : tensor<1x1x80xf32> -> tensor<1x1x5x16xf32>
// CHECK-NEXT: %[[R:.*]] = braid.rope %[[QKH]], %[[P]] {theta = 5.000000e+05 : f64} : (tensor<1x1x5x16xf32>, tensor<1x1xi32>) -> tensor<1x1x5x16xf32>
// CHECK-NEXT: %[[Q:.*]] = braid.slice %[[R]] offsets [0, 0, 0, 0] sizes [1, 1, 4, 16]
// CHECK-NEXT: %[[K:.*]] = braid.slice %[[R]] offsets [0, 0, 4, 0] sizes [1, 1, 1, 16]
// CHECK-NEXT: return %[[Q]], %[[K]], %[[VH]]
// CHECK-NOT: braid.matmul
// OFF-LABEL: func.func @qkv_one_token
// OFF-COUNT-3: braid.matmul
// OFF-COUNT-2: braid.rope
// OFF-NOT: parameter_pack
func.func @qkv_one_token(%x: tensor<1x1x64xf32>, %pos: tensor<1x1xi32>) -> (tensor<1x1x4x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>) {
  %wq = braid.parameter "q_proj.weight" full [64, 64] : tensor<64x64xf32>
  %q = braid.matmul %x, %wq {transpose_b} : (tensor<1x1x64xf32>, tensor<64x64xf32>) -> tensor<1x1x64xf32>
  %wk = braid.parameter "k_proj.weight" full [16, 64] : tensor<16x64xf32>
  %k = braid.matmul %x, %wk {transpose_b} : (tensor<1x1x64xf32>, tensor<16x64xf32>) -> tensor<1x1x16xf32>
  %wv = braid.parameter "v_proj.weight" full [16, 64] : tensor<16x64xf32>
  %v = braid.matmul %x, %wv {transpose_b} : (tensor<1x1x64xf32>, tensor<16x64xf32>) -> tensor<1x1x16xf32>
  %vh = braid.reshape %v : tensor<1x1x16xf32> -> tensor<1x1x1x16xf32>
  %kh = braid.reshape %k : tensor<1x1x16xf32> -> tensor<1x1x1x16xf32>
  %qh = braid.reshape %q : tensor<1x1x64xf32> -> tensor<1x1x4x16xf32>
  %qr = braid.rope %qh, %pos {theta = 5.0e+05 : f64} : (tensor<1x1x4x16xf32>, tensor<1x1xi32>) -> tensor<1x1x4x16xf32>
  %kr = braid.rope %kh, %pos {theta = 5.0e+05 : f64} : (tensor<1x1x1x16xf32>, tensor<1x1xi32>) -> tensor<1x1x1x16xf32>
  return %qr, %kr, %vh : tensor<1x1x4x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>
}

// -----

// Gate and up of one token, bf16, sharded: the pack keeps each weight's own
// shard rule; swiglu reads the two slices.
braid.device_group @tp size 2
// CHECK-LABEL: func.func @gate_up
// CHECK: %[[G:.*]] = braid.parameter "gate_proj.weight" full [128, 32] shard_dim 0 on @tp : tensor<64x32xbf16>
// CHECK-NEXT: %[[U:.*]] = braid.parameter "up_proj.weight" full [128, 32] shard_dim 0 on @tp : tensor<64x32xbf16>
// CHECK-NEXT: %[[W:.*]] = braid.parameter_pack %[[G]], %[[U]] : (tensor<64x32xbf16>, tensor<64x32xbf16>) -> tensor<128x32xbf16>
// CHECK-NEXT: %[[Y:.*]] = braid.matmul %{{.*}}, %[[W]] {transpose_b} : (tensor<1x1x32xbf16>, tensor<128x32xbf16>) -> tensor<1x1x128xbf16>
// CHECK-NEXT: %[[YG:.*]] = braid.slice %[[Y]] offsets [0, 0, 0] sizes [1, 1, 64]
// CHECK-NEXT: %[[YU:.*]] = braid.slice %[[Y]] offsets [0, 0, 64] sizes [1, 1, 64]
// CHECK-NEXT: braid.swiglu %[[YG]], %[[YU]]
func.func @gate_up(%x: tensor<1x1x32xbf16>) -> tensor<1x1x64xbf16> {
  %wg = braid.parameter "gate_proj.weight" full [128, 32] shard_dim 0 on @tp : tensor<64x32xbf16>
  %g = braid.matmul %x, %wg {transpose_b} : (tensor<1x1x32xbf16>, tensor<64x32xbf16>) -> tensor<1x1x64xbf16>
  %wu = braid.parameter "up_proj.weight" full [128, 32] shard_dim 0 on @tp : tensor<64x32xbf16>
  %u = braid.matmul %x, %wu {transpose_b} : (tensor<1x1x32xbf16>, tensor<64x32xbf16>) -> tensor<1x1x64xbf16>
  %y = braid.swiglu %g, %u : tensor<1x1x64xbf16>
  return %y : tensor<1x1x64xbf16>
}

// -----

// Refused: several rows (prefill, or a batch) make the slices strided
// copies that cost more than the launches they save.
// CHECK-LABEL: func.func @several_rows
// CHECK-COUNT-2: braid.matmul
// CHECK-NOT: braid.parameter_pack
func.func @several_rows(%x: tensor<1x8x32xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x16xf32>) {
  %wa = braid.parameter "a.weight" full [16, 32] : tensor<16x32xf32>
  %a = braid.matmul %x, %wa {transpose_b} : (tensor<1x8x32xf32>, tensor<16x32xf32>) -> tensor<1x8x16xf32>
  %wb = braid.parameter "b.weight" full [16, 32] : tensor<16x32xf32>
  %b = braid.matmul %x, %wb {transpose_b} : (tensor<1x8x32xf32>, tensor<16x32xf32>) -> tensor<1x8x16xf32>
  return %a, %b : tensor<1x8x16xf32>, tensor<1x8x16xf32>
}

// -----

// Refused: different inputs; a weight that is not a parameter; a weight
// not transposed (a [K, N] weight is not packed along its rows); one
// weight read twice.
// CHECK-LABEL: func.func @not_projections_of_one_input
// CHECK-COUNT-6: braid.matmul
// CHECK-NOT: braid.parameter_pack
func.func @not_projections_of_one_input(%x: tensor<1x1x32xf32>, %y: tensor<1x1x32xf32>, %w: tensor<16x32xf32>) -> (tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>) {
  %wa = braid.parameter "a.weight" full [16, 32] : tensor<16x32xf32>
  %a = braid.matmul %x, %wa {transpose_b} : (tensor<1x1x32xf32>, tensor<16x32xf32>) -> tensor<1x1x16xf32>
  %wb = braid.parameter "b.weight" full [16, 32] : tensor<16x32xf32>
  %b = braid.matmul %y, %wb {transpose_b} : (tensor<1x1x32xf32>, tensor<16x32xf32>) -> tensor<1x1x16xf32>
  %c = braid.matmul %y, %w {transpose_b} : (tensor<1x1x32xf32>, tensor<16x32xf32>) -> tensor<1x1x16xf32>
  %wd = braid.parameter "d.weight" full [32, 16] : tensor<32x16xf32>
  %d = braid.matmul %x, %wd : (tensor<1x1x32xf32>, tensor<32x16xf32>) -> tensor<1x1x16xf32>
  %wz = braid.parameter "z.weight" full [16, 32] : tensor<16x32xf32>
  %z1 = braid.matmul %y, %wz {transpose_b} : (tensor<1x1x32xf32>, tensor<16x32xf32>) -> tensor<1x1x16xf32>
  %z2 = braid.matmul %y, %wz {transpose_b} : (tensor<1x1x32xf32>, tensor<16x32xf32>) -> tensor<1x1x16xf32>
  return %a, %b, %c, %d, %z1, %z2 : tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>, tensor<1x1x16xf32>
}

// -----

// Refused: scheduled IR (every op on a stream): the pass runs before
// scheduling, whose attributes a fused op would drop.
// CHECK-LABEL: func.func @scheduled
// CHECK-COUNT-2: braid.matmul %{{.*}}, %{{.*}} {braid.stream = 0 : i64, transpose_b}
// CHECK-NOT: braid.parameter_pack
func.func @scheduled(%x: tensor<1x1x32xf32>) -> (tensor<1x1x16xf32>, tensor<1x1x16xf32>) {
  %wa = braid.parameter "a.weight" full [16, 32] : tensor<16x32xf32>
  %a = braid.matmul %x, %wa {transpose_b, braid.stream = 0 : i64} : (tensor<1x1x32xf32>, tensor<16x32xf32>) -> tensor<1x1x16xf32>
  %wb = braid.parameter "b.weight" full [16, 32] : tensor<16x32xf32>
  %b = braid.matmul %x, %wb {transpose_b, braid.stream = 0 : i64} : (tensor<1x1x32xf32>, tensor<16x32xf32>) -> tensor<1x1x16xf32>
  return %a, %b : tensor<1x1x16xf32>, tensor<1x1x16xf32>
}

// -----

// Ropes left apart: different positions operands; heads not adjacent
// (Q and V); and different attributes (theta).
// CHECK-LABEL: func.func @ropes_apart
// CHECK-COUNT-3: braid.rope
func.func @ropes_apart(%x: tensor<1x1x48xf32>, %p: tensor<1x1xi32>, %p2: tensor<1x1xi32>) -> (tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>) {
  %wq = braid.parameter "q.weight" full [16, 48] : tensor<16x48xf32>
  %q = braid.matmul %x, %wq {transpose_b} : (tensor<1x1x48xf32>, tensor<16x48xf32>) -> tensor<1x1x16xf32>
  %wk = braid.parameter "k.weight" full [16, 48] : tensor<16x48xf32>
  %k = braid.matmul %x, %wk {transpose_b} : (tensor<1x1x48xf32>, tensor<16x48xf32>) -> tensor<1x1x16xf32>
  %wv = braid.parameter "v.weight" full [16, 48] : tensor<16x48xf32>
  %v = braid.matmul %x, %wv {transpose_b} : (tensor<1x1x48xf32>, tensor<16x48xf32>) -> tensor<1x1x16xf32>
  %qh = braid.reshape %q : tensor<1x1x16xf32> -> tensor<1x1x1x16xf32>
  %kh = braid.reshape %k : tensor<1x1x16xf32> -> tensor<1x1x1x16xf32>
  %vh = braid.reshape %v : tensor<1x1x16xf32> -> tensor<1x1x1x16xf32>
  %qr = braid.rope %qh, %p {theta = 1.0e+04 : f64} : (tensor<1x1x1x16xf32>, tensor<1x1xi32>) -> tensor<1x1x1x16xf32>
  %kr = braid.rope %kh, %p2 {theta = 1.0e+04 : f64} : (tensor<1x1x1x16xf32>, tensor<1x1xi32>) -> tensor<1x1x1x16xf32>
  %vr = braid.rope %vh, %p {theta = 2.0e+04 : f64} : (tensor<1x1x1x16xf32>, tensor<1x1xi32>) -> tensor<1x1x1x16xf32>
  return %qr, %kr, %vr : tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>
}

// -----

// Qwen2's projection biases: each projection's only reader adds a 1-D bias
// parameter, so the biases pack too, and their one add becomes the fused
// matmul's bias epilogue.
// CHECK-LABEL: func.func @biased
// CHECK: %[[W:.*]] = braid.parameter_pack %{{.*}}, %{{.*}} : (tensor<32x16xf32>, tensor<8x16xf32>) -> tensor<40x16xf32>
// CHECK: %[[BQ:.*]] = braid.parameter "q.bias" full [32]
// CHECK-NEXT: %[[BK:.*]] = braid.parameter "k.bias" full [8]
// CHECK-NEXT: %[[B:.*]] = braid.parameter_pack %[[BQ]], %[[BK]] : (tensor<32xf32>, tensor<8xf32>) -> tensor<40xf32>
// CHECK-NEXT: %[[Y:.*]] = braid.matmul %{{.*}}, %[[W]] bias %[[B]] {transpose_b} : (tensor<1x1x16xf32>, tensor<40x16xf32>, tensor<40xf32>) -> tensor<1x1x40xf32>
// CHECK-NEXT: braid.slice %[[Y]] offsets [0, 0, 0] sizes [1, 1, 32]
// CHECK-NEXT: braid.slice %[[Y]] offsets [0, 0, 32] sizes [1, 1, 8]
// CHECK-NOT: braid.add
// Without epilogues, the packed add stays an add.
// NOEPI-LABEL: func.func @biased
// NOEPI: braid.add %{{.*}}, %{{.*}} : (tensor<1x1x40xf32>, tensor<40xf32>) -> tensor<1x1x40xf32>
func.func @biased(%x: tensor<1x1x16xf32>) -> (tensor<1x1x32xf32>, tensor<1x1x8xf32>) {
  %wq = braid.parameter "q.weight" full [32, 16] : tensor<32x16xf32>
  %q = braid.matmul %x, %wq {transpose_b} : (tensor<1x1x16xf32>, tensor<32x16xf32>) -> tensor<1x1x32xf32>
  %bq = braid.parameter "q.bias" full [32] : tensor<32xf32>
  %qb = braid.add %q, %bq : (tensor<1x1x32xf32>, tensor<32xf32>) -> tensor<1x1x32xf32>
  %wk = braid.parameter "k.weight" full [8, 16] : tensor<8x16xf32>
  %k = braid.matmul %x, %wk {transpose_b} : (tensor<1x1x16xf32>, tensor<8x16xf32>) -> tensor<1x1x8xf32>
  %bk = braid.parameter "k.bias" full [8] : tensor<8xf32>
  %kb = braid.add %k, %bk : (tensor<1x1x8xf32>, tensor<8xf32>) -> tensor<1x1x8xf32>
  return %qb, %kb : tensor<1x1x32xf32>, tensor<1x1x8xf32>
}

// -----

// Only one projection has a bias: the weights still pack, the bias add
// stays on its slice.
// CHECK-LABEL: func.func @one_bias
// CHECK: braid.parameter_pack %{{.*}}, %{{.*}} : (tensor<32x16xf32>, tensor<8x16xf32>) -> tensor<40x16xf32>
// CHECK: %[[Q:.*]] = braid.slice
// CHECK: braid.add %[[Q]], %{{.*}} : (tensor<1x1x32xf32>, tensor<32xf32>)
func.func @one_bias(%x: tensor<1x1x16xf32>) -> (tensor<1x1x32xf32>, tensor<1x1x8xf32>) {
  %wq = braid.parameter "q.weight" full [32, 16] : tensor<32x16xf32>
  %q = braid.matmul %x, %wq {transpose_b} : (tensor<1x1x16xf32>, tensor<32x16xf32>) -> tensor<1x1x32xf32>
  %bq = braid.parameter "q.bias" full [32] : tensor<32xf32>
  %qb = braid.add %q, %bq : (tensor<1x1x32xf32>, tensor<32xf32>) -> tensor<1x1x32xf32>
  %wk = braid.parameter "k.weight" full [8, 16] : tensor<8x16xf32>
  %k = braid.matmul %x, %wk {transpose_b} : (tensor<1x1x16xf32>, tensor<8x16xf32>) -> tensor<1x1x8xf32>
  return %qb, %k : tensor<1x1x32xf32>, tensor<1x1x8xf32>
}
