// RUN: braid-opt %s --braid-sequence-parallel=mode=ulysses -split-input-file -verify-diagnostics -o /dev/null

braid.device_group @tp size 2

// GPT-2 / GPT-NeoX style: q, k and v are slices of one fused projection.
// expected-error @+1 {{braid-sequence-parallel: Ulysses: fused q/k/v projections (GPT-2's c_attn, GPT-NeoX's query_key_value) are not supported}}
func.func @fused_qkv(%e: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %x = braid.all_reduce sum %e on @tp : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
  %w = braid.parameter "ln" full [16] : tensor<16xf32>
  %n = braid.rms_norm %x, %w {epsilon = 1.0e-05 : f64} : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %wqkv = braid.parameter "qkv" full [48, 16] shard_dim 0 on @tp {blocks = 3 : i64} : tensor<24x16xf32>
  %qkv = braid.matmul %n, %wqkv {transpose_b} : (tensor<1x4x16xf32>, tensor<24x16xf32>) -> tensor<1x4x24xf32>
  %q = braid.slice %qkv offsets [0, 0, 0] sizes [1, 4, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>
  %k = braid.slice %qkv offsets [0, 0, 8] sizes [1, 4, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>
  %v = braid.slice %qkv offsets [0, 0, 16] sizes [1, 4, 8] : tensor<1x4x24xf32> -> tensor<1x4x8xf32>
  %q4 = braid.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %k4 = braid.reshape %k : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %v4 = braid.reshape %v : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %o = braid.attention %q4, %k4, %v4 {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> tensor<1x4x2x4xf32>
  %o3 = braid.reshape %o : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %wo = braid.parameter "o" full [16, 16] shard_dim 1 on @tp : tensor<16x8xf32>
  %p = braid.matmul %o3, %wo {transpose_b} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %r = braid.all_reduce sum %p on @tp : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
  %h = braid.add %x, %r : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return %h : tensor<1x4x16xf32>
}

// -----

braid.device_group @tp size 2

// One KV head for two ranks (replicated by the TP import): the
// all_to_all cannot split it.
// expected-error @+1 {{braid-sequence-parallel: Ulysses: 'k' has 1 shards for 2 ranks: Ulysses needs the KV heads divisible by tp}}
func.func @one_kv_head(%e: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %x = braid.all_reduce sum %e on @tp : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
  %w = braid.parameter "ln" full [16] : tensor<16xf32>
  %n = braid.rms_norm %x, %w {epsilon = 1.0e-05 : f64} : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %wq = braid.parameter "q" full [16, 16] shard_dim 0 on @tp : tensor<8x16xf32>
  %wk = braid.parameter "k" full [4, 16] shard_dim 0 on @tp {shards = 1 : i64} : tensor<4x16xf32>
  %wv = braid.parameter "v" full [4, 16] shard_dim 0 on @tp {shards = 1 : i64} : tensor<4x16xf32>
  %q = braid.matmul %n, %wq {transpose_b} : (tensor<1x4x16xf32>, tensor<8x16xf32>) -> tensor<1x4x8xf32>
  %k = braid.matmul %n, %wk {transpose_b} : (tensor<1x4x16xf32>, tensor<4x16xf32>) -> tensor<1x4x4xf32>
  %v = braid.matmul %n, %wv {transpose_b} : (tensor<1x4x16xf32>, tensor<4x16xf32>) -> tensor<1x4x4xf32>
  %q4 = braid.reshape %q : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %k4 = braid.reshape %k : tensor<1x4x4xf32> -> tensor<1x4x1x4xf32>
  %v4 = braid.reshape %v : tensor<1x4x4xf32> -> tensor<1x4x1x4xf32>
  %o = braid.attention %q4, %k4, %v4 {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x2x4xf32>
  %o3 = braid.reshape %o : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %wo = braid.parameter "o" full [16, 16] shard_dim 1 on @tp : tensor<16x8xf32>
  %p = braid.matmul %o3, %wo {transpose_b} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %r = braid.all_reduce sum %p on @tp : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
  %h = braid.add %x, %r : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return %h : tensor<1x4x16xf32>
}
