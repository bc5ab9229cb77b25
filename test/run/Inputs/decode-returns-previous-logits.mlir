module attributes {braid.model_type = "llama"} {
  braid.device_group @tp size 1
  func.func @prefill(%arg0: tensor<1x16xi32> {braid.input = "input_ids"}, %arg1: tensor<1x16xi32> {braid.input = "positions"}, %arg2: tensor<1x64x4x8xf32> {braid.state = "layers.0.k_cache"}, %arg3: tensor<1x64x4x8xf32> {braid.state = "layers.0.v_cache"}, %arg4: tensor<1x64x4x8xf32> {braid.state = "layers.1.k_cache"}, %arg5: tensor<1x64x4x8xf32> {braid.state = "layers.1.v_cache"}) -> (tensor<1x1x256xf32> {braid.output = "logits"}, tensor<1x64x4x8xf32> {braid.state = "layers.0.k_cache"}, tensor<1x64x4x8xf32> {braid.state = "layers.0.v_cache"}, tensor<1x64x4x8xf32> {braid.state = "layers.1.k_cache"}, tensor<1x64x4x8xf32> {braid.state = "layers.1.v_cache"}) {
    %0 = braid.slice %arg1 offsets [0, 0] sizes [1, 1] : tensor<1x16xi32> -> tensor<1x1xi32>
    %1 = braid.reshape %0 : tensor<1x1xi32> -> tensor<1xi32>
    %2 = braid.parameter "model.embed_tokens.weight" full [256, 64] shard_dim 0 on @tp : tensor<256x64xf32>
    %3 = braid.embedding %arg0, %2 : (tensor<1x16xi32>, tensor<256x64xf32>) -> tensor<1x16x64xf32>
    %4 = braid.parameter "model.layers.0.input_layernorm.weight" full [64] : tensor<64xf32>
    %5 = braid.rms_norm %3, %4 {epsilon = 1.000000e-05 : f64} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
    %6 = braid.parameter "model.layers.0.self_attn.q_proj.weight" full [64, 64] shard_dim 0 on @tp : tensor<64x64xf32>
    %7 = braid.matmul %5, %6 {transpose_b} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
    %8 = braid.parameter "model.layers.0.self_attn.k_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %9 = braid.matmul %5, %8 {transpose_b} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
    %10 = braid.parameter "model.layers.0.self_attn.v_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %11 = braid.matmul %5, %10 {transpose_b} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
    %12 = braid.reshape %11 : tensor<1x16x32xf32> -> tensor<1x16x4x8xf32>
    %13 = braid.reshape %9 : tensor<1x16x32xf32> -> tensor<1x16x4x8xf32>
    %14 = braid.reshape %7 : tensor<1x16x64xf32> -> tensor<1x16x8x8xf32>
    %15 = braid.rope %14, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x16x8x8xf32>, tensor<1x16xi32>) -> tensor<1x16x8x8xf32>
    %16 = braid.rope %13, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x16x4x8xf32>, tensor<1x16xi32>) -> tensor<1x16x4x8xf32>
    %output, %updated_cache:2 = braid.attention %15, %16, %12 cache(%arg2, %arg3) at %1 {causal, head_dim = 8 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64} : (tensor<1x16x8x8xf32>, tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1xi32>) -> (tensor<1x16x8x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>)
    %17 = braid.reshape %output : tensor<1x16x8x8xf32> -> tensor<1x16x64xf32>
    %18 = braid.parameter "model.layers.0.self_attn.o_proj.weight" full [64, 64] shard_dim 1 on @tp : tensor<64x64xf32>
    %19 = braid.matmul %17, %18 {transpose_b} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
    %20 = braid.add %3, %19 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %21 = braid.parameter "model.layers.0.post_attention_layernorm.weight" full [64] : tensor<64xf32>
    %22 = braid.rms_norm %20, %21 {epsilon = 1.000000e-05 : f64} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
    %23 = braid.parameter "model.layers.0.mlp.gate_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %24 = braid.matmul %22, %23 {transpose_b} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
    %25 = braid.parameter "model.layers.0.mlp.up_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %26 = braid.matmul %22, %25 {transpose_b} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
    %27 = braid.silu %24 : tensor<1x16x128xf32>
    %28 = braid.mul %27, %26 : (tensor<1x16x128xf32>, tensor<1x16x128xf32>) -> tensor<1x16x128xf32>
    %29 = braid.parameter "model.layers.0.mlp.down_proj.weight" full [64, 128] shard_dim 1 on @tp : tensor<64x128xf32>
    %30 = braid.matmul %28, %29 {transpose_b} : (tensor<1x16x128xf32>, tensor<64x128xf32>) -> tensor<1x16x64xf32>
    %31 = braid.add %20, %30 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %32 = braid.parameter "model.layers.1.input_layernorm.weight" full [64] : tensor<64xf32>
    %33 = braid.rms_norm %31, %32 {epsilon = 1.000000e-05 : f64} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
    %34 = braid.parameter "model.layers.1.self_attn.q_proj.weight" full [64, 64] shard_dim 0 on @tp : tensor<64x64xf32>
    %35 = braid.matmul %33, %34 {transpose_b} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
    %36 = braid.parameter "model.layers.1.self_attn.k_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %37 = braid.matmul %33, %36 {transpose_b} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
    %38 = braid.parameter "model.layers.1.self_attn.v_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %39 = braid.matmul %33, %38 {transpose_b} : (tensor<1x16x64xf32>, tensor<32x64xf32>) -> tensor<1x16x32xf32>
    %40 = braid.reshape %39 : tensor<1x16x32xf32> -> tensor<1x16x4x8xf32>
    %41 = braid.reshape %37 : tensor<1x16x32xf32> -> tensor<1x16x4x8xf32>
    %42 = braid.reshape %35 : tensor<1x16x64xf32> -> tensor<1x16x8x8xf32>
    %43 = braid.rope %42, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x16x8x8xf32>, tensor<1x16xi32>) -> tensor<1x16x8x8xf32>
    %44 = braid.rope %41, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x16x4x8xf32>, tensor<1x16xi32>) -> tensor<1x16x4x8xf32>
    %output_0, %updated_cache_1:2 = braid.attention %43, %44, %40 cache(%arg4, %arg5) at %1 {causal, head_dim = 8 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64} : (tensor<1x16x8x8xf32>, tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1xi32>) -> (tensor<1x16x8x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>)
    %45 = braid.reshape %output_0 : tensor<1x16x8x8xf32> -> tensor<1x16x64xf32>
    %46 = braid.parameter "model.layers.1.self_attn.o_proj.weight" full [64, 64] shard_dim 1 on @tp : tensor<64x64xf32>
    %47 = braid.matmul %45, %46 {transpose_b} : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
    %48 = braid.add %31, %47 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %49 = braid.parameter "model.layers.1.post_attention_layernorm.weight" full [64] : tensor<64xf32>
    %50 = braid.rms_norm %48, %49 {epsilon = 1.000000e-05 : f64} : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
    %51 = braid.parameter "model.layers.1.mlp.gate_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %52 = braid.matmul %50, %51 {transpose_b} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
    %53 = braid.parameter "model.layers.1.mlp.up_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %54 = braid.matmul %50, %53 {transpose_b} : (tensor<1x16x64xf32>, tensor<128x64xf32>) -> tensor<1x16x128xf32>
    %55 = braid.silu %52 : tensor<1x16x128xf32>
    %56 = braid.mul %55, %54 : (tensor<1x16x128xf32>, tensor<1x16x128xf32>) -> tensor<1x16x128xf32>
    %57 = braid.parameter "model.layers.1.mlp.down_proj.weight" full [64, 128] shard_dim 1 on @tp : tensor<64x128xf32>
    %58 = braid.matmul %56, %57 {transpose_b} : (tensor<1x16x128xf32>, tensor<64x128xf32>) -> tensor<1x16x64xf32>
    %59 = braid.add %48, %58 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %60 = braid.slice %59 offsets [0, 15, 0] sizes [1, 1, 64] : tensor<1x16x64xf32> -> tensor<1x1x64xf32>
    %61 = braid.parameter "model.norm.weight" full [64] : tensor<64xf32>
    %62 = braid.rms_norm %60, %61 {epsilon = 1.000000e-05 : f64} : (tensor<1x1x64xf32>, tensor<64xf32>) -> tensor<1x1x64xf32>
    %63 = braid.parameter "lm_head.weight" full [256, 64] shard_dim 0 on @tp : tensor<256x64xf32>
    %64 = braid.matmul %62, %63 {transpose_b} : (tensor<1x1x64xf32>, tensor<256x64xf32>) -> tensor<1x1x256xf32>
    return %64, %updated_cache#0, %updated_cache#1, %updated_cache_1#0, %updated_cache_1#1 : tensor<1x1x256xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>
  }
  // decode returns as "logits" the previous step's logits (state "prev_logits", read at entry)
  // and stores this step's logits into that slot.
  func.func @decode(%arg0: tensor<1x1xi32> {braid.input = "input_ids"}, %arg1: tensor<1x1xi32> {braid.input = "positions"}, %arg2: tensor<1x64x4x8xf32> {braid.state = "layers.0.k_cache"}, %arg3: tensor<1x64x4x8xf32> {braid.state = "layers.0.v_cache"}, %arg4: tensor<1x64x4x8xf32> {braid.state = "layers.1.k_cache"}, %arg5: tensor<1x64x4x8xf32> {braid.state = "layers.1.v_cache"}, %prev: tensor<1x1x256xf32> {braid.state = "prev_logits"}) -> (tensor<1x1x256xf32> {braid.output = "logits"}, tensor<1x64x4x8xf32> {braid.state = "layers.0.k_cache"}, tensor<1x64x4x8xf32> {braid.state = "layers.0.v_cache"}, tensor<1x64x4x8xf32> {braid.state = "layers.1.k_cache"}, tensor<1x64x4x8xf32> {braid.state = "layers.1.v_cache"}, tensor<1x1x256xf32> {braid.state = "prev_logits"}) {
    %0 = braid.slice %arg1 offsets [0, 0] sizes [1, 1] : tensor<1x1xi32> -> tensor<1x1xi32>
    %1 = braid.reshape %0 : tensor<1x1xi32> -> tensor<1xi32>
    %2 = braid.parameter "model.embed_tokens.weight" full [256, 64] shard_dim 0 on @tp : tensor<256x64xf32>
    %3 = braid.embedding %arg0, %2 : (tensor<1x1xi32>, tensor<256x64xf32>) -> tensor<1x1x64xf32>
    %4 = braid.parameter "model.layers.0.input_layernorm.weight" full [64] : tensor<64xf32>
    %5 = braid.rms_norm %3, %4 {epsilon = 1.000000e-05 : f64} : (tensor<1x1x64xf32>, tensor<64xf32>) -> tensor<1x1x64xf32>
    %6 = braid.parameter "model.layers.0.self_attn.q_proj.weight" full [64, 64] shard_dim 0 on @tp : tensor<64x64xf32>
    %7 = braid.matmul %5, %6 {transpose_b} : (tensor<1x1x64xf32>, tensor<64x64xf32>) -> tensor<1x1x64xf32>
    %8 = braid.parameter "model.layers.0.self_attn.k_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %9 = braid.matmul %5, %8 {transpose_b} : (tensor<1x1x64xf32>, tensor<32x64xf32>) -> tensor<1x1x32xf32>
    %10 = braid.parameter "model.layers.0.self_attn.v_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %11 = braid.matmul %5, %10 {transpose_b} : (tensor<1x1x64xf32>, tensor<32x64xf32>) -> tensor<1x1x32xf32>
    %12 = braid.reshape %11 : tensor<1x1x32xf32> -> tensor<1x1x4x8xf32>
    %13 = braid.reshape %9 : tensor<1x1x32xf32> -> tensor<1x1x4x8xf32>
    %14 = braid.reshape %7 : tensor<1x1x64xf32> -> tensor<1x1x8x8xf32>
    %15 = braid.rope %14, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x1x8x8xf32>, tensor<1x1xi32>) -> tensor<1x1x8x8xf32>
    %16 = braid.rope %13, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1xi32>) -> tensor<1x1x4x8xf32>
    %output, %updated_cache:2 = braid.attention %15, %16, %12 cache(%arg2, %arg3) at %1 {causal, head_dim = 8 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64} : (tensor<1x1x8x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1xi32>) -> (tensor<1x1x8x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>)
    %17 = braid.reshape %output : tensor<1x1x8x8xf32> -> tensor<1x1x64xf32>
    %18 = braid.parameter "model.layers.0.self_attn.o_proj.weight" full [64, 64] shard_dim 1 on @tp : tensor<64x64xf32>
    %19 = braid.matmul %17, %18 {transpose_b} : (tensor<1x1x64xf32>, tensor<64x64xf32>) -> tensor<1x1x64xf32>
    %20 = braid.add %3, %19 : (tensor<1x1x64xf32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
    %21 = braid.parameter "model.layers.0.post_attention_layernorm.weight" full [64] : tensor<64xf32>
    %22 = braid.rms_norm %20, %21 {epsilon = 1.000000e-05 : f64} : (tensor<1x1x64xf32>, tensor<64xf32>) -> tensor<1x1x64xf32>
    %23 = braid.parameter "model.layers.0.mlp.gate_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %24 = braid.matmul %22, %23 {transpose_b} : (tensor<1x1x64xf32>, tensor<128x64xf32>) -> tensor<1x1x128xf32>
    %25 = braid.parameter "model.layers.0.mlp.up_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %26 = braid.matmul %22, %25 {transpose_b} : (tensor<1x1x64xf32>, tensor<128x64xf32>) -> tensor<1x1x128xf32>
    %27 = braid.silu %24 : tensor<1x1x128xf32>
    %28 = braid.mul %27, %26 : (tensor<1x1x128xf32>, tensor<1x1x128xf32>) -> tensor<1x1x128xf32>
    %29 = braid.parameter "model.layers.0.mlp.down_proj.weight" full [64, 128] shard_dim 1 on @tp : tensor<64x128xf32>
    %30 = braid.matmul %28, %29 {transpose_b} : (tensor<1x1x128xf32>, tensor<64x128xf32>) -> tensor<1x1x64xf32>
    %31 = braid.add %20, %30 : (tensor<1x1x64xf32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
    %32 = braid.parameter "model.layers.1.input_layernorm.weight" full [64] : tensor<64xf32>
    %33 = braid.rms_norm %31, %32 {epsilon = 1.000000e-05 : f64} : (tensor<1x1x64xf32>, tensor<64xf32>) -> tensor<1x1x64xf32>
    %34 = braid.parameter "model.layers.1.self_attn.q_proj.weight" full [64, 64] shard_dim 0 on @tp : tensor<64x64xf32>
    %35 = braid.matmul %33, %34 {transpose_b} : (tensor<1x1x64xf32>, tensor<64x64xf32>) -> tensor<1x1x64xf32>
    %36 = braid.parameter "model.layers.1.self_attn.k_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %37 = braid.matmul %33, %36 {transpose_b} : (tensor<1x1x64xf32>, tensor<32x64xf32>) -> tensor<1x1x32xf32>
    %38 = braid.parameter "model.layers.1.self_attn.v_proj.weight" full [32, 64] shard_dim 0 on @tp : tensor<32x64xf32>
    %39 = braid.matmul %33, %38 {transpose_b} : (tensor<1x1x64xf32>, tensor<32x64xf32>) -> tensor<1x1x32xf32>
    %40 = braid.reshape %39 : tensor<1x1x32xf32> -> tensor<1x1x4x8xf32>
    %41 = braid.reshape %37 : tensor<1x1x32xf32> -> tensor<1x1x4x8xf32>
    %42 = braid.reshape %35 : tensor<1x1x64xf32> -> tensor<1x1x8x8xf32>
    %43 = braid.rope %42, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x1x8x8xf32>, tensor<1x1xi32>) -> tensor<1x1x8x8xf32>
    %44 = braid.rope %41, %arg1 {theta = 1.000000e+04 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1xi32>) -> tensor<1x1x4x8xf32>
    %output_0, %updated_cache_1:2 = braid.attention %43, %44, %40 cache(%arg4, %arg5) at %1 {causal, head_dim = 8 : i64, num_heads = 8 : i64, num_kv_heads = 4 : i64} : (tensor<1x1x8x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1xi32>) -> (tensor<1x1x8x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>)
    %45 = braid.reshape %output_0 : tensor<1x1x8x8xf32> -> tensor<1x1x64xf32>
    %46 = braid.parameter "model.layers.1.self_attn.o_proj.weight" full [64, 64] shard_dim 1 on @tp : tensor<64x64xf32>
    %47 = braid.matmul %45, %46 {transpose_b} : (tensor<1x1x64xf32>, tensor<64x64xf32>) -> tensor<1x1x64xf32>
    %48 = braid.add %31, %47 : (tensor<1x1x64xf32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
    %49 = braid.parameter "model.layers.1.post_attention_layernorm.weight" full [64] : tensor<64xf32>
    %50 = braid.rms_norm %48, %49 {epsilon = 1.000000e-05 : f64} : (tensor<1x1x64xf32>, tensor<64xf32>) -> tensor<1x1x64xf32>
    %51 = braid.parameter "model.layers.1.mlp.gate_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %52 = braid.matmul %50, %51 {transpose_b} : (tensor<1x1x64xf32>, tensor<128x64xf32>) -> tensor<1x1x128xf32>
    %53 = braid.parameter "model.layers.1.mlp.up_proj.weight" full [128, 64] shard_dim 0 on @tp : tensor<128x64xf32>
    %54 = braid.matmul %50, %53 {transpose_b} : (tensor<1x1x64xf32>, tensor<128x64xf32>) -> tensor<1x1x128xf32>
    %55 = braid.silu %52 : tensor<1x1x128xf32>
    %56 = braid.mul %55, %54 : (tensor<1x1x128xf32>, tensor<1x1x128xf32>) -> tensor<1x1x128xf32>
    %57 = braid.parameter "model.layers.1.mlp.down_proj.weight" full [64, 128] shard_dim 1 on @tp : tensor<64x128xf32>
    %58 = braid.matmul %56, %57 {transpose_b} : (tensor<1x1x128xf32>, tensor<64x128xf32>) -> tensor<1x1x64xf32>
    %59 = braid.add %48, %58 : (tensor<1x1x64xf32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
    %60 = braid.parameter "model.norm.weight" full [64] : tensor<64xf32>
    %61 = braid.rms_norm %59, %60 {epsilon = 1.000000e-05 : f64} : (tensor<1x1x64xf32>, tensor<64xf32>) -> tensor<1x1x64xf32>
    %62 = braid.parameter "lm_head.weight" full [256, 64] shard_dim 0 on @tp : tensor<256x64xf32>
    %63 = braid.matmul %61, %62 {transpose_b} : (tensor<1x1x64xf32>, tensor<256x64xf32>) -> tensor<1x1x256xf32>
    %prev_flat = braid.reshape %prev : tensor<1x1x256xf32> -> tensor<1x256xf32>
    %prev_copy = braid.reshape %prev_flat : tensor<1x256xf32> -> tensor<1x1x256xf32>
    return %prev_copy, %updated_cache#0, %updated_cache#1, %updated_cache_1#0, %updated_cache_1#1, %63 : tensor<1x1x256xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x64x4x8xf32>, tensor<1x1x256xf32>
  }
}
