// One LLaMA-style decoder layer as rank r of 4 tensor-parallel ranks runs it
// (Megatron layout): hidden 256, 8 query heads and 4 KV heads of dim 32
// (2 and 1 per rank), SwiGLU MLP of 512 (128 per rank), batch 1, 8 tokens.
// QKV and gate/up projections are column-parallel; o_proj and down_proj are
// row-parallel, each followed by an all_reduce over the TP group.
braid.device_group @tp size 4

func.func @layer0(%x: tensor<1x8x256xf32>, %pos: tensor<1x8xi32>) -> tensor<1x8x256xf32> {
  %ln1 = braid.parameter "model.layers.0.input_layernorm.weight" full [256] : tensor<256xf32>
  %wq = braid.parameter "model.layers.0.self_attn.q_proj.weight" full [256, 256] shard_dim 0 on @tp : tensor<64x256xf32>
  %wk = braid.parameter "model.layers.0.self_attn.k_proj.weight" full [128, 256] shard_dim 0 on @tp : tensor<32x256xf32>
  %wv = braid.parameter "model.layers.0.self_attn.v_proj.weight" full [128, 256] shard_dim 0 on @tp : tensor<32x256xf32>
  %wo = braid.parameter "model.layers.0.self_attn.o_proj.weight" full [256, 256] shard_dim 1 on @tp : tensor<256x64xf32>

  %h = braid.rms_norm %x, %ln1 {epsilon = 1.0e-5 : f64} : (tensor<1x8x256xf32>, tensor<256xf32>) -> tensor<1x8x256xf32>
  %q = braid.matmul %h, %wq {transpose_b} : (tensor<1x8x256xf32>, tensor<64x256xf32>) -> tensor<1x8x64xf32>
  %k = braid.matmul %h, %wk {transpose_b} : (tensor<1x8x256xf32>, tensor<32x256xf32>) -> tensor<1x8x32xf32>
  %v = braid.matmul %h, %wv {transpose_b} : (tensor<1x8x256xf32>, tensor<32x256xf32>) -> tensor<1x8x32xf32>
  %q4 = braid.reshape %q : tensor<1x8x64xf32> -> tensor<1x8x2x32xf32>
  %k4 = braid.reshape %k : tensor<1x8x32xf32> -> tensor<1x8x1x32xf32>
  %v4 = braid.reshape %v : tensor<1x8x32xf32> -> tensor<1x8x1x32xf32>
  %qr = braid.rope %q4, %pos {theta = 1.0e4 : f64} : (tensor<1x8x2x32xf32>, tensor<1x8xi32>) -> tensor<1x8x2x32xf32>
  %kr = braid.rope %k4, %pos {theta = 1.0e4 : f64} : (tensor<1x8x1x32xf32>, tensor<1x8xi32>) -> tensor<1x8x1x32xf32>
  %att = braid.attention %qr, %kr, %v4 {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 32 : i64} : (tensor<1x8x2x32xf32>, tensor<1x8x1x32xf32>, tensor<1x8x1x32xf32>) -> tensor<1x8x2x32xf32>
  // Flattened to tokens and back: braid-simplify collapses the chain.
  %att2 = braid.reshape %att : tensor<1x8x2x32xf32> -> tensor<8x64xf32>
  %att3 = braid.reshape %att2 : tensor<8x64xf32> -> tensor<1x8x64xf32>
  %o = braid.matmul %att3, %wo {transpose_b} : (tensor<1x8x64xf32>, tensor<256x64xf32>) -> tensor<1x8x256xf32>
  %o_sum = braid.all_reduce sum %o on @tp : tensor<1x8x256xf32> -> tensor<1x8x256xf32>
  %x1 = braid.add %x, %o_sum : (tensor<1x8x256xf32>, tensor<1x8x256xf32>) -> tensor<1x8x256xf32>

  %ln2 = braid.parameter "model.layers.0.post_attention_layernorm.weight" full [256] : tensor<256xf32>
  %wg = braid.parameter "model.layers.0.mlp.gate_proj.weight" full [512, 256] shard_dim 0 on @tp : tensor<128x256xf32>
  %wu = braid.parameter "model.layers.0.mlp.up_proj.weight" full [512, 256] shard_dim 0 on @tp : tensor<128x256xf32>
  %wd = braid.parameter "model.layers.0.mlp.down_proj.weight" full [256, 512] shard_dim 1 on @tp : tensor<256x128xf32>
  %h2 = braid.rms_norm %x1, %ln2 {epsilon = 1.0e-5 : f64} : (tensor<1x8x256xf32>, tensor<256xf32>) -> tensor<1x8x256xf32>
  %g = braid.matmul %h2, %wg {transpose_b} : (tensor<1x8x256xf32>, tensor<128x256xf32>) -> tensor<1x8x128xf32>
  %u = braid.matmul %h2, %wu {transpose_b} : (tensor<1x8x256xf32>, tensor<128x256xf32>) -> tensor<1x8x128xf32>
  %gs = braid.silu %g : tensor<1x8x128xf32>
  %gu = braid.mul %gs, %u : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  %d = braid.matmul %gu, %wd {transpose_b} : (tensor<1x8x128xf32>, tensor<256x128xf32>) -> tensor<1x8x256xf32>
  %d_sum = braid.all_reduce sum %d on @tp : tensor<1x8x256xf32> -> tensor<1x8x256xf32>
  %x2 = braid.add %x1, %d_sum : (tensor<1x8x256xf32>, tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  return %x2 : tensor<1x8x256xf32>
}
