// RUN: braid-opt %s | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// Every braid op, in its custom syntax. ops-coverage.test checks that no op
// of the dialect is missing here.

// CHECK: braid.device_group @tp size 4
braid.device_group @tp size 4
// CHECK: braid.device_group @pp size 2
braid.device_group @pp size 2

// A fused QKV weight: this rank's slices of three named parameters, end to
// end along dim 0.
// Matmul epilogues: a bias, a bias then a tanh GELU, a GELU alone, a bias
// then a residual, a residual alone.
// CHECK-LABEL: func.func @matmul_epilogues
// CHECK: braid.matmul %{{.*}}, %{{.*}} bias %{{.*}} {transpose_b} : (tensor<1x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
// CHECK: braid.matmul %{{.*}}, %{{.*}} bias %{{.*}} gelu tanh : (tensor<1x8x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
// CHECK: braid.matmul %{{.*}}, %{{.*}} gelu none : (tensor<1x8x64xf32>, tensor<64x32xf32>) -> tensor<1x8x32xf32>
// CHECK: braid.matmul %{{.*}}, %{{.*}} bias %{{.*}} residual %{{.*}} : (tensor<1x8x64xf32>, tensor<64x32xf32>, tensor<32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
// CHECK: braid.matmul %{{.*}}, %{{.*}} residual %{{.*}} : (tensor<1x8x64xf32>, tensor<64x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
func.func @matmul_epilogues(%x: tensor<1x8x64xf32>, %w: tensor<32x64xf32>, %v: tensor<64x32xf32>, %b: tensor<32xf32>, %r: tensor<1x8x32xf32>) -> (tensor<1x8x32xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>) {
  %0 = braid.matmul %x, %w bias %b {transpose_b} : (tensor<1x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
  %1 = braid.matmul %x, %v bias %b gelu tanh : (tensor<1x8x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
  %2 = braid.matmul %x, %v gelu none : (tensor<1x8x64xf32>, tensor<64x32xf32>) -> tensor<1x8x32xf32>
  %3 = braid.matmul %x, %v bias %b residual %r : (tensor<1x8x64xf32>, tensor<64x32xf32>, tensor<32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %4 = braid.matmul %x, %v residual %r : (tensor<1x8x64xf32>, tensor<64x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  return %0, %1, %2, %3, %4 : tensor<1x8x32xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>
}

// CHECK-LABEL: func.func @parameter_pack
// CHECK: braid.parameter_pack %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1024x4096xbf16>, tensor<256x4096xbf16>, tensor<256x4096xbf16>) -> tensor<1536x4096xbf16>
func.func @parameter_pack() -> tensor<1536x4096xbf16> {
  %q = braid.parameter "q.weight" full [4096, 4096] shard_dim 0 on @tp : tensor<1024x4096xbf16>
  %k = braid.parameter "k.weight" full [1024, 4096] shard_dim 0 on @tp : tensor<256x4096xbf16>
  %v = braid.parameter "v.weight" full [1024, 4096] shard_dim 0 on @tp : tensor<256x4096xbf16>
  %w = braid.parameter_pack %q, %k, %v : (tensor<1024x4096xbf16>, tensor<256x4096xbf16>, tensor<256x4096xbf16>) -> tensor<1536x4096xbf16>
  return %w : tensor<1536x4096xbf16>
}

// CHECK-LABEL: func.func @parameters
func.func @parameters() -> (tensor<1024x4096xbf16>, tensor<768x576xf32>, tensor<128x512xbf16>, tensor<512xbf16>) {
  // CHECK: braid.parameter "model.layers.0.self_attn.q_proj.weight" full [4096, 4096] shard_dim 0 on @tp : tensor<1024x4096xbf16>
  %0 = braid.parameter "model.layers.0.self_attn.q_proj.weight" full [4096, 4096] shard_dim 0 on @tp : tensor<1024x4096xbf16>
  // CHECK: braid.parameter "h.0.attn.c_attn.weight" full [768, 2304] shard_dim 1 on @tp {blocks = 3 : i64} : tensor<768x576xf32>
  %1 = braid.parameter "h.0.attn.c_attn.weight" full [768, 2304] shard_dim 1 on @tp {blocks = 3 : i64} : tensor<768x576xf32>
  // CHECK: braid.parameter "model.layers.0.self_attn.k_proj.weight" full [256, 512] shard_dim 0 on @tp {shards = 2 : i64} : tensor<128x512xbf16>
  %2 = braid.parameter "model.layers.0.self_attn.k_proj.weight" full [256, 512] shard_dim 0 on @tp {shards = 2 : i64} : tensor<128x512xbf16>
  // CHECK: braid.parameter "wte.weight" full [50257, 768] shard_dim 0 on @tp {padded_shape = array<i64: 50260, 768>} : tensor<12565x768xf32>
  %w = braid.parameter "wte.weight" full [50257, 768] shard_dim 0 on @tp {padded_shape = array<i64: 50260, 768>} : tensor<12565x768xf32>
  // CHECK: braid.parameter "model.norm.weight" full [512] : tensor<512xbf16>
  %3 = braid.parameter "model.norm.weight" full [512] : tensor<512xbf16>
  return %0, %1, %2, %3 : tensor<1024x4096xbf16>, tensor<768x576xf32>, tensor<128x512xbf16>, tensor<512xbf16>
}

// CHECK-LABEL: func.func @compute
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x512xbf16>, %[[W:.*]]: tensor<128x512xbf16>, %[[N:.*]]: tensor<512xbf16>, %[[POS:.*]]: tensor<2x16xi32>)
func.func @compute(%x: tensor<2x16x512xbf16>, %w: tensor<128x512xbf16>, %n: tensor<512xbf16>, %pos: tensor<2x16xi32>) -> tensor<2x16x128xbf16> {
  // CHECK: %[[MM:.*]] = braid.matmul %[[X]], %[[W]] {transpose_b} : (tensor<2x16x512xbf16>, tensor<128x512xbf16>) -> tensor<2x16x128xbf16>
  %0 = braid.matmul %x, %w {transpose_b} : (tensor<2x16x512xbf16>, tensor<128x512xbf16>) -> tensor<2x16x128xbf16>
  // CHECK: braid.matmul %{{.*}}, %{{.*}} {transpose_a} : (tensor<512x32xbf16>, tensor<512x128xbf16>) -> tensor<32x128xbf16>
  %xt = braid.reshape %x : tensor<2x16x512xbf16> -> tensor<512x32xbf16>
  %wt = braid.reshape %w : tensor<128x512xbf16> -> tensor<512x128xbf16>
  %1 = braid.matmul %xt, %wt {transpose_a} : (tensor<512x32xbf16>, tensor<512x128xbf16>) -> tensor<32x128xbf16>
  // CHECK: braid.add %[[X]], %[[N]] : (tensor<2x16x512xbf16>, tensor<512xbf16>) -> tensor<2x16x512xbf16>
  %2 = braid.add %x, %n : (tensor<2x16x512xbf16>, tensor<512xbf16>) -> tensor<2x16x512xbf16>
  // CHECK: braid.mul %{{.*}}, %[[X]] : (tensor<2x16x512xbf16>, tensor<2x16x512xbf16>) -> tensor<2x16x512xbf16>
  %3 = braid.mul %2, %x : (tensor<2x16x512xbf16>, tensor<2x16x512xbf16>) -> tensor<2x16x512xbf16>
  // CHECK: braid.rms_norm %{{.*}}, %[[N]] {epsilon = 1.000000e-05 : f64} : (tensor<2x16x512xbf16>, tensor<512xbf16>) -> tensor<2x16x512xbf16>
  %4 = braid.rms_norm %3, %n {epsilon = 1.0e-5 : f64} : (tensor<2x16x512xbf16>, tensor<512xbf16>) -> tensor<2x16x512xbf16>
  // CHECK: braid.layer_norm %{{.*}}, %[[N]], %[[N]] {epsilon = 1.000000e-05 : f64}
  %5 = braid.layer_norm %4, %n, %n {epsilon = 1.0e-5 : f64} : (tensor<2x16x512xbf16>, tensor<512xbf16>, tensor<512xbf16>) -> tensor<2x16x512xbf16>
  // CHECK: %[[R:.*]] = braid.reshape %{{.*}} : tensor<2x16x512xbf16> -> tensor<2x16x8x64xbf16>
  %6 = braid.reshape %5 : tensor<2x16x512xbf16> -> tensor<2x16x8x64xbf16>
  // CHECK: braid.rope %[[R]], %[[POS]] {theta = 5.000000e+05 : f64} : (tensor<2x16x8x64xbf16>, tensor<2x16xi32>) -> tensor<2x16x8x64xbf16>
  %7 = braid.rope %6, %pos {theta = 5.0e5 : f64} : (tensor<2x16x8x64xbf16>, tensor<2x16xi32>) -> tensor<2x16x8x64xbf16>
  // CHECK: braid.silu %{{.*}} : tensor<2x16x128xbf16>
  %8 = braid.silu %0 : tensor<2x16x128xbf16>
  // CHECK: braid.swiglu %{{.*}}, %{{.*}} : tensor<2x16x128xbf16>
  %sw = braid.swiglu %0, %8 : tensor<2x16x128xbf16>
  // CHECK: %{{.*}}, %{{.*}} = braid.add_rms_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<128xbf16>) -> (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>)
  %arw = braid.parameter "arn.weight" full [128] : tensor<128xbf16>
  %ars, %arn = braid.add_rms_norm %0, %8, %arw {epsilon = 1.0e-05 : f64} : (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>, tensor<128xbf16>) -> (tensor<2x16x128xbf16>, tensor<2x16x128xbf16>)
  // CHECK: braid.gelu tanh %{{.*}} : tensor<2x16x128xbf16>
  %9 = braid.gelu tanh %8 : tensor<2x16x128xbf16>
  // CHECK: braid.gelu none %{{.*}} : tensor<2x16x128xbf16>
  %10 = braid.gelu none %9 : tensor<2x16x128xbf16>
  // CHECK: braid.activation relu %{{.*}} : tensor<2x16x128xbf16>
  %act0 = braid.activation relu %9 : tensor<2x16x128xbf16>
  // CHECK: braid.activation quick_gelu %{{.*}} : tensor<2x16x128xbf16>
  %act1 = braid.activation quick_gelu %act0 : tensor<2x16x128xbf16>
  // CHECK: braid.activation hardswish %{{.*}} : tensor<2x16x128xbf16>
  %act2 = braid.activation hardswish %act1 : tensor<2x16x128xbf16>
  // CHECK: braid.softmax %{{.*}} dim 2 : tensor<2x16x128xbf16>
  %11 = braid.softmax %10 dim 2 : tensor<2x16x128xbf16>
  // CHECK: braid.slice %{{.*}} offsets [0, 0, 64] sizes [2, 16, 64] : tensor<2x16x128xbf16> -> tensor<2x16x64xbf16>
  %12 = braid.slice %11 offsets [0, 0, 64] sizes [2, 16, 64] : tensor<2x16x128xbf16> -> tensor<2x16x64xbf16>
  // CHECK: braid.concat %{{.*}}, %{{.*}} dim 2 : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x128xbf16>
  %13 = braid.concat %12, %12 dim 2 : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x128xbf16>
  return %13 : tensor<2x16x128xbf16>
}

// CHECK-LABEL: func.func @embedding
func.func @embedding(%ids: tensor<2x16xi32>, %tab: tensor<2000x512xbf16>, %pos: tensor<2x16xi64>, %wpe: tensor<1024x512xbf16>) -> (tensor<2x16x512xbf16>, tensor<2x16x512xbf16>) {
  // CHECK: braid.embedding %{{.*}}, %{{.*}} {vocab_group = @tp} : (tensor<2x16xi32>, tensor<2000x512xbf16>) -> tensor<2x16x512xbf16>
  %0 = braid.embedding %ids, %tab {vocab_group = @tp} : (tensor<2x16xi32>, tensor<2000x512xbf16>) -> tensor<2x16x512xbf16>
  // CHECK: braid.embedding %{{.*}}, %{{.*}} : (tensor<2x16xi64>, tensor<1024x512xbf16>) -> tensor<2x16x512xbf16>
  %1 = braid.embedding %pos, %wpe : (tensor<2x16xi64>, tensor<1024x512xbf16>) -> tensor<2x16x512xbf16>
  return %0, %1 : tensor<2x16x512xbf16>, tensor<2x16x512xbf16>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x16x8x64xbf16>, %k: tensor<2x16x2x64xbf16>, %q1: tensor<2x1x8x64xbf16>, %k1: tensor<2x1x2x64xbf16>, %kc: tensor<2x128x2x64xbf16>, %vc: tensor<2x128x2x64xbf16>, %p: tensor<2xi32>) -> (tensor<2x16x8x64xbf16>, tensor<2x1x8x64xbf16>, tensor<2x128x2x64xbf16>, tensor<2x128x2x64xbf16>) {
  // CHECK: braid.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, head_dim = 64 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x8x64xbf16>, tensor<2x16x2x64xbf16>, tensor<2x16x2x64xbf16>) -> tensor<2x16x8x64xbf16>
  %0 = braid.attention %q, %k, %k {causal, num_heads = 8 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64} : (tensor<2x16x8x64xbf16>, tensor<2x16x2x64xbf16>, tensor<2x16x2x64xbf16>) -> tensor<2x16x8x64xbf16>
  // CHECK: braid.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, head_dim = 64 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, sliding_window = 4096 : i64}
  %w = braid.attention %q, %k, %k {causal, num_heads = 8 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64, sliding_window = 4096 : i64} : (tensor<2x16x8x64xbf16>, tensor<2x16x2x64xbf16>, tensor<2x16x2x64xbf16>) -> tensor<2x16x8x64xbf16>
  // CHECK: %{{.*}}, %{{.*}}:2 = braid.attention %{{.*}}, %{{.*}}, %{{.*}} cache(%{{.*}}, %{{.*}}) at %{{.*}} {causal, head_dim = 64 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 1.250000e-01 : f64}
  %1, %2, %3 = braid.attention %q1, %k1, %k1 cache(%kc, %vc) at %p {causal, num_heads = 8 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64, scale = 0.125 : f64} : (tensor<2x1x8x64xbf16>, tensor<2x1x2x64xbf16>, tensor<2x1x2x64xbf16>, tensor<2x128x2x64xbf16>, tensor<2x128x2x64xbf16>, tensor<2xi32>) -> (tensor<2x1x8x64xbf16>, tensor<2x128x2x64xbf16>, tensor<2x128x2x64xbf16>)
  return %0, %1, %2, %3 : tensor<2x16x8x64xbf16>, tensor<2x1x8x64xbf16>, tensor<2x128x2x64xbf16>, tensor<2x128x2x64xbf16>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<2x16x512xbf16>, %ids: tensor<2x16xi32>, %h: tensor<1x4x8x64xbf16>) {
  // CHECK: braid.all_reduce sum %{{.*}} on @tp : tensor<2x16x512xbf16> -> tensor<2x16x512xbf16>
  %0 = braid.all_reduce sum %x on @tp : tensor<2x16x512xbf16> -> tensor<2x16x512xbf16>
  // CHECK: braid.all_reduce max
  %1 = braid.all_reduce max %x on @tp : tensor<2x16x512xbf16> -> tensor<2x16x512xbf16>
  // CHECK: braid.all_reduce min
  %2 = braid.all_reduce min %x on @tp : tensor<2x16x512xbf16> -> tensor<2x16x512xbf16>
  // CHECK: braid.all_reduce prod
  %3 = braid.all_reduce prod %x on @tp : tensor<2x16x512xbf16> -> tensor<2x16x512xbf16>
  // CHECK: braid.all_gather %{{.*}} on @tp dim 1 : tensor<2x16x512xbf16> -> tensor<2x64x512xbf16>
  %4 = braid.all_gather %x on @tp dim 1 : tensor<2x16x512xbf16> -> tensor<2x64x512xbf16>
  // CHECK: braid.reduce_scatter sum %{{.*}} on @tp dim 1 : tensor<2x16x512xbf16> -> tensor<2x4x512xbf16>
  %5 = braid.reduce_scatter sum %x on @tp dim 1 : tensor<2x16x512xbf16> -> tensor<2x4x512xbf16>
  // CHECK: braid.all_to_all %{{.*}} on @tp split 2 concat 1 : tensor<1x4x8x64xbf16> -> tensor<1x16x2x64xbf16>
  %6 = braid.all_to_all %h on @tp split 2 concat 1 : tensor<1x4x8x64xbf16> -> tensor<1x16x2x64xbf16>
  // CHECK: braid.broadcast %{{.*}} on @tp root 0 : tensor<2x16xi32> -> tensor<2x16xi32>
  %7 = braid.broadcast %ids on @tp root 0 : tensor<2x16xi32> -> tensor<2x16xi32>
  // CHECK: braid.send %{{.*}} to 1 on @pp : tensor<2x16x512xbf16>
  braid.send %x to 1 on @pp : tensor<2x16x512xbf16>
  // CHECK: braid.recv from 0 on @pp : tensor<2x16x512xbf16>
  %8 = braid.recv from 0 on @pp : tensor<2x16x512xbf16>
  return
}

// CHECK-LABEL: func.func @async_collectives
func.func @async_collectives(%x: tensor<2x16x512xbf16>, %ids: tensor<2x16xi32>, %h: tensor<1x4x8x64xbf16>) {
  // CHECK: %[[H0:.*]] = braid.all_reduce_start sum %{{.*}} on @tp : tensor<2x16x512xbf16> -> !braid.handle<tensor<2x16x512xbf16>>
  // CHECK: braid.wait %[[H0]] : !braid.handle<tensor<2x16x512xbf16>> -> tensor<2x16x512xbf16>
  %h0 = braid.all_reduce_start sum %x on @tp : tensor<2x16x512xbf16> -> !braid.handle<tensor<2x16x512xbf16>>
  %0 = braid.wait %h0 : !braid.handle<tensor<2x16x512xbf16>> -> tensor<2x16x512xbf16>
  // CHECK: braid.all_gather_start %{{.*}} on @tp dim 1 : tensor<2x16x512xbf16> -> !braid.handle<tensor<2x64x512xbf16>>
  %h1 = braid.all_gather_start %x on @tp dim 1 : tensor<2x16x512xbf16> -> !braid.handle<tensor<2x64x512xbf16>>
  %1 = braid.wait %h1 : !braid.handle<tensor<2x64x512xbf16>> -> tensor<2x64x512xbf16>
  // CHECK: braid.reduce_scatter_start sum %{{.*}} on @tp dim 1 : tensor<2x16x512xbf16> -> !braid.handle<tensor<2x4x512xbf16>>
  %h2 = braid.reduce_scatter_start sum %x on @tp dim 1 : tensor<2x16x512xbf16> -> !braid.handle<tensor<2x4x512xbf16>>
  %2 = braid.wait %h2 : !braid.handle<tensor<2x4x512xbf16>> -> tensor<2x4x512xbf16>
  // CHECK: braid.all_to_all_start %{{.*}} on @tp split 2 concat 1 : tensor<1x4x8x64xbf16> -> !braid.handle<tensor<1x16x2x64xbf16>>
  %h3 = braid.all_to_all_start %h on @tp split 2 concat 1 : tensor<1x4x8x64xbf16> -> !braid.handle<tensor<1x16x2x64xbf16>>
  %3 = braid.wait %h3 : !braid.handle<tensor<1x16x2x64xbf16>> -> tensor<1x16x2x64xbf16>
  // CHECK: braid.broadcast_start %{{.*}} on @tp root 3 : tensor<2x16xi32> -> !braid.handle<tensor<2x16xi32>>
  %h4 = braid.broadcast_start %ids on @tp root 3 : tensor<2x16xi32> -> !braid.handle<tensor<2x16xi32>>
  %4 = braid.wait %h4 : !braid.handle<tensor<2x16xi32>> -> tensor<2x16xi32>
  // CHECK: %[[HS:.*]] = braid.send_start %{{.*}} to 1 on @pp : tensor<2x16x512xbf16> -> !braid.handle<none>
  // CHECK: braid.wait %[[HS]] : !braid.handle<none>{{$}}
  %h5 = braid.send_start %x to 1 on @pp : tensor<2x16x512xbf16> -> !braid.handle<none>
  braid.wait %h5 : !braid.handle<none>
  // CHECK: braid.recv_start from 0 on @pp : !braid.handle<tensor<2x16x512xbf16>>
  %h6 = braid.recv_start from 0 on @pp : !braid.handle<tensor<2x16x512xbf16>>
  %6 = braid.wait %h6 : !braid.handle<tensor<2x16x512xbf16>> -> tensor<2x16x512xbf16>
  return
}

// Scheduled IR: every op carries braid.stream; an event orders stream 1
// after stream 0's silu.
// CHECK-LABEL: func.func @streams_and_events
// CHECK: %[[A:.*]] = braid.silu %{{.*}} {braid.stream = 0 : i64} : tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = braid.event_record {braid.stream = 0 : i64}
// CHECK-NEXT: braid.event_wait %[[E]] {braid.stream = 1 : i64}
// CHECK-NEXT: braid.gelu none %[[A]] {braid.stream = 1 : i64} : tensor<4xf32>
func.func @streams_and_events(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = braid.silu %x {braid.stream = 0 : i64} : tensor<4xf32>
  %e = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e {braid.stream = 1 : i64}
  %b = braid.gelu none %a {braid.stream = 1 : i64} : tensor<4xf32>
  return %b : tensor<4xf32>
}
