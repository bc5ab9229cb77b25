// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s -emit-bytecode | braid-opt | FileCheck %s

// A printed module parses back to the same module, in text and bytecode.

braid.device_group @tp size 2

// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x64xf32>
func.func @layer(%x: tensor<1x4x64xf32>, %pos: tensor<1x4xi32>, %kc: tensor<1x32x1x16xf32>, %vc: tensor<1x32x1x16xf32>, %p: tensor<1xi32>) -> (tensor<1x4x64xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>) {
  // CHECK: %[[WQ:.*]] = braid.parameter "model.layers.0.self_attn.q_proj.weight" full [64, 64] shard_dim 0 on @tp : tensor<32x64xf32>
  %wq = braid.parameter "model.layers.0.self_attn.q_proj.weight" full [64, 64] shard_dim 0 on @tp : tensor<32x64xf32>
  // CHECK: %[[WK:.*]] = braid.parameter "model.layers.0.self_attn.k_proj.weight" full [16, 64] shard_dim 0 on @tp {shards = 1 : i64} : tensor<16x64xf32>
  %wk = braid.parameter "model.layers.0.self_attn.k_proj.weight" full [16, 64] shard_dim 0 on @tp {shards = 1 : i64} : tensor<16x64xf32>
  // CHECK: %[[Q:.*]] = braid.matmul %[[X]], %[[WQ]] {transpose_b}
  %q = braid.matmul %x, %wq {transpose_b} : (tensor<1x4x64xf32>, tensor<32x64xf32>) -> tensor<1x4x32xf32>
  %k = braid.matmul %x, %wk {transpose_b} : (tensor<1x4x64xf32>, tensor<16x64xf32>) -> tensor<1x4x16xf32>
  %q4 = braid.reshape %q : tensor<1x4x32xf32> -> tensor<1x4x2x16xf32>
  %k4 = braid.reshape %k : tensor<1x4x16xf32> -> tensor<1x4x1x16xf32>
  // CHECK: braid.rope %{{.*}}, %{{.*}} {theta = 1.000000e+04 : f64}
  %qr = braid.rope %q4, %pos {theta = 1.0e4 : f64} : (tensor<1x4x2x16xf32>, tensor<1x4xi32>) -> tensor<1x4x2x16xf32>
  // CHECK: braid.rope %{{.*}}, %{{.*}} {attention_factor = 1.125000e+00 : f64, inv_freq = array<f64: 1.000000e+00, 5.000000e-01, 2.500000e-01, 1.250000e-01, 6.250000e-02, 3.125000e-02, 1.562500e-02, 7.812500e-03>, theta = 1.000000e+04 : f64}
  %qs = braid.rope %q4, %pos {theta = 1.0e4 : f64, inv_freq = array<f64: 1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125>, attention_factor = 1.125 : f64} : (tensor<1x4x2x16xf32>, tensor<1x4xi32>) -> tensor<1x4x2x16xf32>
  // CHECK: %[[O:.*]], %[[C:.*]]:2 = braid.attention %{{.*}}, %{{.*}}, %{{.*}} cache(%{{.*}}, %{{.*}}) at %{{.*}} {causal, head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64}
  %o, %kc2, %vc2 = braid.attention %qr, %k4, %k4 cache(%kc, %vc) at %p {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 16 : i64} : (tensor<1x4x2x16xf32>, tensor<1x4x1x16xf32>, tensor<1x4x1x16xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>, tensor<1xi32>) -> (tensor<1x4x2x16xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>)
  %o3 = braid.reshape %o : tensor<1x4x2x16xf32> -> tensor<1x4x32xf32>
  %wo = braid.parameter "model.layers.0.self_attn.o_proj.weight" full [64, 64] shard_dim 1 on @tp : tensor<64x32xf32>
  %y = braid.matmul %o3, %wo {transpose_b} : (tensor<1x4x32xf32>, tensor<64x32xf32>) -> tensor<1x4x64xf32>
  // CHECK: %[[H:.*]] = braid.all_reduce_start sum %{{.*}} on @tp : tensor<1x4x64xf32> -> !braid.handle<tensor<1x4x64xf32>>
  %h = braid.all_reduce_start sum %y on @tp : tensor<1x4x64xf32> -> !braid.handle<tensor<1x4x64xf32>>
  // CHECK: %[[R:.*]] = braid.wait %[[H]] : !braid.handle<tensor<1x4x64xf32>> -> tensor<1x4x64xf32>
  %r = braid.wait %h : !braid.handle<tensor<1x4x64xf32>> -> tensor<1x4x64xf32>
  // CHECK: return %[[R]], %[[C]]#0, %[[C]]#1
  return %r, %kc2, %vc2 : tensor<1x4x64xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>
}
