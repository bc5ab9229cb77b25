// RUN: braid-opt %s -split-input-file -verify-diagnostics

// Every verifier error of the braid dialect, one case each.

func.func @f(%a: tensor<4xbf16>, %b: tensor<4x8xbf16>) {
  // expected-error@+1 {{matmul: operands need rank >= 2, got a [4] and b [4, 8]}}
  %0 = braid.matmul %a, %b : (tensor<4xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x4x8xbf16>, %b: tensor<1x2x8x4xbf16>) {
  // expected-error@+1 {{matmul: b [1, 2, 8, 4] must be rank 2 or have a's rank 3}}
  %0 = braid.matmul %a, %b : (tensor<2x4x8xbf16>, tensor<1x2x8x4xbf16>) -> tensor<2x4x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x4x8xbf16>, %b: tensor<3x8x4xbf16>) {
  // expected-error@+1 {{matmul: batch dim 0 of a is 2 but of b is 3}}
  %0 = braid.matmul %a, %b : (tensor<2x4x8xbf16>, tensor<3x8x4xbf16>) -> tensor<2x4x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x512xbf16>, %b: tensor<256x8xbf16>) {
  // expected-error@+1 {{matmul: contraction size of a (512) does not match that of b (256); a is [4, 512], b is [256, 8]}}
  %0 = braid.matmul %a, %b : (tensor<4x512xbf16>, tensor<256x8xbf16>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %b: tensor<8x4xf32>) {
  // expected-error@+1 {{matmul: b element type 'f32' does not match 'bf16'}}
  %0 = braid.matmul %a, %b : (tensor<4x8xbf16>, tensor<8x4xf32>) -> tensor<4x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) {
  // expected-error@+1 {{matmul: result element type 'f16' does not match 'bf16'}}
  %0 = braid.matmul %a, %b : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>) {
  // expected-error@+1 {{matmul: result shape [8, 8] does not match the expected [4, 4]}}
  %0 = braid.matmul %a, %b {transpose_b} : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<8x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %b: tensor<8xf32>) {
  // expected-error@+1 {{add: rhs element type 'f32' does not match 'bf16'}}
  %0 = braid.add %a, %b : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<8xbf16>, %b: tensor<4x8xbf16>) {
  // expected-error@+1 {{mul: rhs rank 2 exceeds lhs rank 1}}
  %0 = braid.mul %a, %b : (tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<8xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x3x4xbf16>, %b: tensor<3xbf16>) {
  // expected-error@+1 {{add: rhs [3] does not broadcast to lhs [2, 3, 4] (rhs dim 0 is 3, lhs has 4)}}
  %0 = braid.add %a, %b : (tensor<2x3x4xbf16>, tensor<3xbf16>) -> tensor<2x3x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x3x4xbf16>, %b: tensor<4xbf16>) {
  // expected-error@+1 {{add: result type 'tensor<2x3x4xf32>' must equal the lhs type 'tensor<2x3x4xbf16>'}}
  %0 = braid.add %a, %b : (tensor<2x3x4xbf16>, tensor<4xbf16>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @f(%a: tensor<bf16>, %w: tensor<1xbf16>) {
  // expected-error@+1 {{rms_norm: input must have rank >= 1}}
  %0 = braid.rms_norm %a, %w {epsilon = 1.0e-5 : f64} : (tensor<bf16>, tensor<1xbf16>) -> tensor<bf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %w: tensor<4xbf16>) {
  // expected-error@+1 {{rms_norm: weight/bias shape [4] must be [8], the input's last dim}}
  %0 = braid.rms_norm %a, %w {epsilon = 1.0e-5 : f64} : (tensor<4x8xbf16>, tensor<4xbf16>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %w: tensor<8xf32>) {
  // expected-error@+1 {{rms_norm: weight/bias element type 'f32' does not match 'bf16'}}
  %0 = braid.rms_norm %a, %w {epsilon = 1.0e-5 : f64} : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %w: tensor<8xbf16>) {
  // expected-error@+1 {{rms_norm: epsilon must be > 0, got 0}}
  %0 = braid.rms_norm %a, %w {epsilon = 0.0 : f64} : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xbf16>, %w: tensor<8xbf16>) {
  // expected-error@+1 {{rms_norm: result type 'tensor<8x4xbf16>' must equal the input type 'tensor<4x8xbf16>'}}
  %0 = braid.rms_norm %a, %w {epsilon = 1.0e-5 : f64} : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<8x4xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<7xf32>) {
  // expected-error@+1 {{layer_norm: weight/bias shape [7] must be [8], the input's last dim}}
  %0 = braid.layer_norm %a, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<7xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x16x512xbf16>, %p: tensor<2x16xi32>) {
  // expected-error@+1 {{rope: input must be [B, S, H, D], got [2, 16, 512]}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64} : (tensor<2x16x512xbf16>, tensor<2x16xi32>) -> tensor<2x16x512xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x16x8x63xbf16>, %p: tensor<2x16xi32>) {
  // expected-error@+1 {{rope: head dim 63 must be even}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64} : (tensor<2x16x8x63xbf16>, tensor<2x16xi32>) -> tensor<2x16x8x63xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x16x8x64xbf16>, %p: tensor<16xi32>) {
  // expected-error@+1 {{rope: positions shape [16] must be [B, S] = [2, 16]}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64} : (tensor<2x16x8x64xbf16>, tensor<16xi32>) -> tensor<2x16x8x64xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x16x8x64xbf16>, %p: tensor<2x16xi32>) {
  // expected-error@+1 {{rope: theta must be > 0, got -1}}
  %0 = braid.rope %x, %p {theta = -1.0 : f64} : (tensor<2x16x8x64xbf16>, tensor<2x16xi32>) -> tensor<2x16x8x64xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x16x8x64xbf16>, %p: tensor<2x16xi32>) {
  // expected-error@+1 {{rope: result type 'tensor<2x16x8x64xf32>' must equal the input type 'tensor<2x16x8x64xbf16>'}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64} : (tensor<2x16x8x64xbf16>, tensor<2x16xi32>) -> tensor<2x16x8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<1x4x2x4xf32>, %p: tensor<1x4xi32>) {
  // expected-error@+1 {{'braid.rope' op inv_freq has 3 frequencies; the head dim 4 has 2 pairs}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64, inv_freq = array<f64: 1.0, 0.5, 0.25>} : (tensor<1x4x2x4xf32>, tensor<1x4xi32>) -> tensor<1x4x2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<1x4x2x4xf32>, %p: tensor<1x4xi32>) {
  // expected-error@+1 {{'braid.rope' op inv_freq[1] is 0.000000e+00; frequencies must be positive and finite}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64, inv_freq = array<f64: 1.0, 0.0>} : (tensor<1x4x2x4xf32>, tensor<1x4xi32>) -> tensor<1x4x2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<1x4x2x4xf32>, %p: tensor<1x4xi32>) {
  // expected-error@+1 {{'braid.rope' op rotary_dim 3 must be even and in [2, 4], the head dim}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 3 : i64} : (tensor<1x4x2x4xf32>, tensor<1x4xi32>) -> tensor<1x4x2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<1x4x2x8xf32>, %p: tensor<1x4xi32>) {
  // expected-error@+1 {{'braid.rope' op inv_freq has 4 frequencies; the rotary dim 4 has 2 pairs}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64, rotary_dim = 4 : i64, inv_freq = array<f64: 1.0, 0.5, 0.25, 0.125>} : (tensor<1x4x2x8xf32>, tensor<1x4xi32>) -> tensor<1x4x2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<1x4x2x4xf32>, %p: tensor<1x4xi32>) {
  // expected-error@+1 {{'braid.rope' op attention_factor must be positive and finite, got -1.000000e+00}}
  %0 = braid.rope %x, %p {theta = 1.0e4 : f64, attention_factor = -1.0 : f64} : (tensor<1x4x2x4xf32>, tensor<1x4xi32>) -> tensor<1x4x2x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x1x4x8xbf16>, %kc: tensor<1x16x4x8xbf16>, %p: tensor<2xi32>) {
  // expected-error@+1 {{attention: k_cache holds 1 sequences; the step runs 2}}
  %o, %k2, %v2 = braid.attention %q, %q, %q cache(%kc, %kc) at %p {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64} : (tensor<2x1x4x8xbf16>, tensor<2x1x4x8xbf16>, tensor<2x1x4x8xbf16>, tensor<1x16x4x8xbf16>, tensor<1x16x4x8xbf16>, tensor<2xi32>) -> (tensor<2x1x4x8xbf16>, tensor<1x16x4x8xbf16>, tensor<1x16x4x8xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x4x8xbf16>) {
  // expected-error@+1 {{'braid.attention' op sliding_window must be >= 1, got 0}}
  %0 = braid.attention %q, %q, %q {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64, sliding_window = 0 : i64} : (tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>) -> tensor<1x4x4x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x4x8xbf16>) {
  // expected-error@+1 {{'braid.attention' op sliding_window needs causal attention}}
  %0 = braid.attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64, sliding_window = 2 : i64} : (tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>) -> tensor<1x4x4x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x6x8xbf16>, %k: tensor<1x4x4x8xbf16>) {
  // expected-error@+1 {{attention: num_heads 6 is not divisible by num_kv_heads 4}}
  %0 = braid.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64} : (tensor<1x4x6x8xbf16>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>) -> tensor<1x4x6x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x6x8xbf16>, %k: tensor<1x4x4x8xbf16>) {
  // expected-error@+1 {{attention: num_heads (0), num_kv_heads (4) and head_dim (8) must be positive}}
  %0 = braid.attention %q, %k, %k {num_heads = 0 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64} : (tensor<1x4x6x8xbf16>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>) -> tensor<1x4x6x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x4x8xbf16>) {
  // expected-error@+1 {{attention: scale must be > 0, got 0}}
  %0 = braid.attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64, scale = 0.0 : f64} : (tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>, tensor<1x4x4x8xbf16>) -> tensor<1x4x4x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<4x32xbf16>) {
  // expected-error@+1 {{attention: q must be [B, S, H, D], got [4, 32]}}
  %0 = braid.attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 4 : i64, head_dim = 8 : i64} : (tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>) -> tensor<4x32xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x6x8xbf16>, %k: tensor<1x4x3x8xbf16>) {
  // expected-error@+1 {{attention: k shape [1, 4, 3, 8] must be [1, 4, 2, 8]}}
  %0 = braid.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x6x8xbf16>, tensor<1x4x3x8xbf16>, tensor<1x4x3x8xbf16>) -> tensor<1x4x6x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x6x8xbf16>, %k: tensor<1x4x2x8xbf16>, %v: tensor<1x4x2x4xbf16>) {
  // expected-error@+1 {{attention: v shape [1, 4, 2, 4] must be [1, 4, 2, 8]}}
  %0 = braid.attention %q, %k, %v {num_heads = 6 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x6x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x4xbf16>) -> tensor<1x4x6x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x6x8xbf16>, %k: tensor<1x4x2x8xbf16>) {
  // expected-error@+1 {{attention: output shape [1, 4, 2, 8] must be [1, 4, 6, 8]}}
  %0 = braid.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x6x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>) -> tensor<1x4x2x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x6x8xbf16>, %k: tensor<1x4x2x8xf16>) {
  // expected-error@+1 {{attention: k element type 'f16' does not match 'bf16'}}
  %0 = braid.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x6x8xbf16>, tensor<1x4x2x8xf16>, tensor<1x4x2x8xf16>) -> tensor<1x4x6x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>) {
  // expected-error@+1 {{attention: updated caches are returned only with a KV cache}}
  %0:2 = braid.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %c: tensor<1x16x2x8xbf16>) {
  // expected-error@+1 {{attention: a KV cache needs k_cache, v_cache and position}}
  %0:3 = "braid.attention"(%q, %q, %q, %c, %c) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0>, num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64}> : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<1x16x2x8xbf16>, %vc: tensor<1x16x2x8xbf16>, %p: tensor<1xi32>) {
  // expected-error@+1 {{attention: with a KV cache the op returns 3 results (output, k_cache, v_cache)}}
  %0 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1xi32>) -> tensor<1x4x2x8xbf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<16x2x8xbf16>, %vc: tensor<16x2x8xbf16>, %p: tensor<1xi32>) {
  // expected-error@+1 {{attention: k_cache must be [B, max_seq, kv_heads, D], got [16, 2, 8]}}
  %0:3 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<16x2x8xbf16>, tensor<16x2x8xbf16>, tensor<1xi32>) -> (tensor<1x4x2x8xbf16>, tensor<16x2x8xbf16>, tensor<16x2x8xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<1x16x2x8xbf16>, %vc: tensor<1x16x1x8xbf16>, %p: tensor<1xi32>) {
  // expected-error@+1 {{attention: v_cache shape [1, 16, 1, 8] must be [1, 16, 2, 8]}}
  %0:3 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x1x8xbf16>, tensor<1xi32>) -> (tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x1x8xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<1x2x2x8xbf16>, %vc: tensor<1x2x2x8xbf16>, %p: tensor<1xi32>) {
  // expected-error@+1 {{attention: 4 new tokens do not fit a cache of max_seq 2}}
  %0:3 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x2x2x8xbf16>, tensor<1x2x2x8xbf16>, tensor<1xi32>) -> (tensor<1x4x2x8xbf16>, tensor<1x2x2x8xbf16>, tensor<1x2x2x8xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<1x16x2x8xbf16>, %vc: tensor<1x16x2x8xbf16>, %p: tensor<1xi32>) {
  // expected-error@+1 {{attention: updated cache types must equal the cache types}}
  %0:3 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1xi32>) -> (tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<1x16x2x8xbf16>, %vc: tensor<1x16x2x8xbf16>, %p: tensor<1x4xi32>) {
  // expected-error@+1 {{attention: position shape [1, 4] must be [B] = [1]}}
  %0:3 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x4xi32>) -> (tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<1x16x2x8xbf16>, %vc: tensor<1x16x2x8xbf16>, %p: tensor<1xi32>) {
  // expected-error@+1 {{'braid.attention' op returns at most 3 results, got 4}}
  %0:4 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1xi32>) -> (tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xbf16>)
  return
}

// -----

func.func @f(%i: tensor<2x16xi32>, %t: tensor<8000xbf16>) {
  // expected-error@+1 {{embedding: table must be [V, H], got [8000]}}
  %0 = braid.embedding %i, %t : (tensor<2x16xi32>, tensor<8000xbf16>) -> tensor<2x16xbf16>
  return
}

// -----

func.func @f(%i: tensor<2x16xi32>, %t: tensor<8000x64xbf16>) {
  // expected-error@+1 {{embedding: result element type 'f32' does not match 'bf16'}}
  %0 = braid.embedding %i, %t : (tensor<2x16xi32>, tensor<8000x64xbf16>) -> tensor<2x16x64xf32>
  return
}

// -----

func.func @f(%i: tensor<2x16xi32>, %t: tensor<8000x64xbf16>) {
  // expected-error@+1 {{embedding: result shape [2, 64] does not match the expected [2, 16, 64]}}
  %0 = braid.embedding %i, %t : (tensor<2x16xi32>, tensor<8000x64xbf16>) -> tensor<2x64xbf16>
  return
}

// -----

func.func @f(%i: tensor<2x16xi32>, %t: tensor<8000x64xbf16>) {
  // expected-error@+1 {{'braid.embedding' op group @dp does not name a braid.device_group}}
  %0 = braid.embedding %i, %t {vocab_group = @dp} : (tensor<2x16xi32>, tensor<8000x64xbf16>) -> tensor<2x16x64xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x32xf32>) {
  // expected-error@+1 {{softmax: dim 2 is out of range for rank 2}}
  %0 = braid.softmax %x dim 2 : tensor<4x32xf32>
  return
}

// -----

func.func @f(%x: tensor<4x32xf32>) {
  // expected-error@+1 {{slice: offsets (1) and sizes (2) must both have the input rank 2}}
  %0 = braid.slice %x offsets [0] sizes [4, 8] : tensor<4x32xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x32xf32>) {
  // expected-error@+1 {{slice: dim 1 takes [30, 38) which is outside [0, 32)}}
  %0 = braid.slice %x offsets [0, 30] sizes [4, 8] : tensor<4x32xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x32xf32>) {
  // expected-error@+1 {{slice: result element type 'bf16' does not match 'f32'}}
  %0 = braid.slice %x offsets [0, 0] sizes [4, 8] : tensor<4x32xf32> -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x32xf32>) {
  // expected-error@+1 {{slice: result shape [4, 4] does not match the expected [4, 8]}}
  %0 = braid.slice %x offsets [0, 0] sizes [4, 8] : tensor<4x32xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{concat: needs at least one input}}
  %0 = "braid.concat"() {dim = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{concat: dim 2 is out of range for rank 2}}
  %0 = braid.concat %a, %a dim 2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>) {
  // expected-error@+1 {{concat: input element type 'bf16' does not match 'f32'}}
  %0 = braid.concat %a, %b dim 1 : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8x1xf32>) {
  // expected-error@+1 {{concat: input 1 has rank 3 but input 0 has rank 2}}
  %0 = braid.concat %a, %b dim 1 : (tensor<4x8xf32>, tensor<4x8x1xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<3x8xf32>) {
  // expected-error@+1 {{concat: input 1 has size 3 in dim 0 but input 0 has 4}}
  %0 = braid.concat %a, %b dim 1 : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{concat: result element type 'bf16' does not match 'f32'}}
  %0 = braid.concat %a, %a dim 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{concat: result shape [4, 8] does not match the expected [4, 16]}}
  %0 = braid.concat %a, %a dim 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{reshape: result element type 'bf16' does not match 'f32'}}
  %0 = braid.reshape %a : tensor<4x8xf32> -> tensor<32xbf16>
  return
}

// -----

func.func @f(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{reshape: [4, 8] has 32 elements but [4, 4] has 16}}
  %0 = braid.reshape %a : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<?x8xf32>) {
  // expected-error@+1 {{operand #0 must be statically shaped tensor}}
  %0 = braid.reshape %a : tensor<?x8xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{parameter 'w': full shape [0, 8] has a non-positive dim}}
  %0 = braid.parameter "w" full [0, 8] : tensor<0x8xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{parameter 'w': full shape [4, 8] and local shape [32] differ in rank}}
  %0 = braid.parameter "w" full [4, 8] : tensor<32xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{parameter: shard_dim 2 is out of range for rank 2}}
  %0 = braid.parameter "w" full [4, 8] shard_dim 2 on @tp : tensor<4x8xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{parameter 'w': shards 3 must divide the group size 4}}
  %0 = braid.parameter "w" full [6, 8] shard_dim 0 on @tp {shards = 3 : i64} : tensor<2x8xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{parameter 'w': blocks 0 must be in [1, 2147483647]}}
  %0 = braid.parameter "w" full [4, 8] shard_dim 0 on @tp {blocks = 0 : i64} : tensor<1x8xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{parameter 'w': dim 1 of size 8 is not divisible by shards x blocks = 4 x 3}}
  %0 = braid.parameter "w" full [4, 8] shard_dim 1 on @tp {blocks = 3 : i64} : tensor<4x2xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{'braid.parameter' op shards/blocks need 'shard_dim ... on @group'}}
  %0 = braid.parameter "w" full [4, 8] {shards = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{parameter 'w': local shape [4, 8] does not match the slice [1, 8] of full shape [4, 8]}}
  %0 = braid.parameter "w" full [4, 8] shard_dim 0 on @tp : tensor<4x8xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{'braid.parameter' op group @pp does not name a braid.device_group}}
  %0 = braid.parameter "w" full [4, 8] shard_dim 0 on @pp : tensor<1x8xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{parameter 'w': padded shape [4] and full shape [4, 8] differ in rank}}
  %0 = braid.parameter "w" full [4, 8] {padded_shape = array<i64: 4>} : tensor<4x8xf32>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{parameter 'w': padded shape [4, 6] is smaller than the full shape [4, 8] in dim 1}}
  %0 = braid.parameter "w" full [4, 8] {padded_shape = array<i64: 4, 6>} : tensor<4x6xf32>
  return
}

// -----

// expected-error@+1 {{device_group @tp: size must be in [1, 1048576], got 0}}
braid.device_group @tp size 0

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{'braid.all_reduce' op group @dp does not name a braid.device_group}}
  %0 = braid.all_reduce sum %x on @dp : tensor<4x8xbf16> -> tensor<4x8xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{all_reduce: result type 'tensor<4x8xf32>' must equal the input type 'tensor<4x8xbf16>'}}
  %0 = braid.all_reduce max %x on @tp : tensor<4x8xbf16> -> tensor<4x8xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{all_reduce_start: result type 'tensor<8x8xbf16>' must equal the input type 'tensor<4x8xbf16>'}}
  %h = braid.all_reduce_start sum %x on @tp : tensor<4x8xbf16> -> !braid.handle<tensor<8x8xbf16>>
  %0 = braid.wait %h : !braid.handle<tensor<8x8xbf16>> -> tensor<8x8xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{all_gather: result 'tensor<4x16xbf16>' must be [4, 32] (dim 1 = group size 4 x operand size 8) of 'bf16'}}
  %0 = braid.all_gather %x on @tp dim 1 : tensor<4x8xbf16> -> tensor<4x16xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{all_gather: dim 2 is out of range for rank 2}}
  %0 = braid.all_gather %x on @tp dim 2 : tensor<4x8xbf16> -> tensor<4x8xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{all_gather_start: result must be a ranked tensor, got 'none'}}
  %h = braid.all_gather_start %x on @tp dim 0 : tensor<4x8xbf16> -> !braid.handle<none>
  braid.wait %h : !braid.handle<none>
  return
}

// -----

braid.device_group @g3 size 3
func.func @f(%x: tensor<4x4096xbf16>) {
  // expected-error@+1 {{reduce_scatter: dim 1 of size 4096 is not divisible by group size 3}}
  %0 = braid.reduce_scatter sum %x on @g3 dim 1 : tensor<4x4096xbf16> -> tensor<4x1365xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x4096xbf16>) {
  // expected-error@+1 {{reduce_scatter: result 'tensor<4x4096xbf16>' must be [4, 1024] (dim 1 = 4096 / group size 4) of 'bf16'}}
  %0 = braid.reduce_scatter sum %x on @tp dim 1 : tensor<4x4096xbf16> -> tensor<4x4096xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<1x4x6x64xbf16>) {
  // expected-error@+1 {{all_to_all: split_dim 2 of size 6 is not divisible by group size 4}}
  %0 = braid.all_to_all %x on @tp split 2 concat 1 : tensor<1x4x6x64xbf16> -> tensor<1x16x1x64xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<1x4x8x64xbf16>) {
  // expected-error@+1 {{all_to_all: result 'tensor<1x4x8x64xbf16>' must be [1, 16, 2, 64] of 'bf16'}}
  %0 = braid.all_to_all %x on @tp split 2 concat 1 : tensor<1x4x8x64xbf16> -> tensor<1x4x8x64xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<1x4x8x64xbf16>) {
  // expected-error@+1 {{all_to_all: concat_dim 4 is out of range for rank 4}}
  %0 = braid.all_to_all %x on @tp split 2 concat 4 : tensor<1x4x8x64xbf16> -> tensor<1x4x8x64xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<2x16xi32>) {
  // expected-error@+1 {{broadcast: root 4 is not a rank of a group of size 4}}
  %0 = braid.broadcast %x on @tp root 4 : tensor<2x16xi32> -> tensor<2x16xi32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<2x16xbf16>) {
  // expected-error@+1 {{send: peer -1 is not a rank of a group of size 4}}
  braid.send %x to -1 on @tp : tensor<2x16xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{recv: peer 7 is not a rank of a group of size 4}}
  %0 = braid.recv from 7 on @tp : tensor<2x16xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<2x16xbf16>) {
  // expected-error@+1 {{'braid.send_start' op handle payload must be none, got 'tensor<2x16xbf16>'}}
  %h = braid.send_start %x to 1 on @tp : tensor<2x16xbf16> -> !braid.handle<tensor<2x16xbf16>>
  %0 = braid.wait %h : !braid.handle<tensor<2x16xbf16>> -> tensor<2x16xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{'braid.recv_start' op handle payload must be a ranked tensor, got 'none'}}
  %h = braid.recv_start from 1 on @tp : !braid.handle<none>
  braid.wait %h : !braid.handle<none>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) -> !braid.handle<tensor<4x8xbf16>> {
  // expected-error@+1 {{'braid.all_reduce_start' op handle is used by 'func.return'; only braid.wait may consume it}}
  %h = braid.all_reduce_start sum %x on @tp : tensor<4x8xbf16> -> !braid.handle<tensor<4x8xbf16>>
  return %h : !braid.handle<tensor<4x8xbf16>>
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{'braid.all_reduce_start' op handle must be consumed by exactly one braid.wait, found 0}}
  %h = braid.all_reduce_start sum %x on @tp : tensor<4x8xbf16> -> !braid.handle<tensor<4x8xbf16>>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{'braid.broadcast_start' op handle must be consumed by exactly one braid.wait, found 2}}
  %h = braid.broadcast_start %x on @tp root 0 : tensor<4x8xbf16> -> !braid.handle<tensor<4x8xbf16>>
  %0 = braid.wait %h : !braid.handle<tensor<4x8xbf16>> -> tensor<4x8xbf16>
  %1 = braid.wait %h : !braid.handle<tensor<4x8xbf16>> -> tensor<4x8xbf16>
  return
}

// -----

func.func @f(%h: !braid.handle<tensor<4x8xbf16>>) {
  // expected-error@+1 {{'braid.wait' op handle must come from a braid.*_start op}}
  %0 = braid.wait %h : !braid.handle<tensor<4x8xbf16>> -> tensor<4x8xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  %h = braid.send_start %x to 1 on @tp : tensor<4x8xbf16> -> !braid.handle<none>
  // expected-error@+1 {{'braid.wait' op waits on a send and produces no result}}
  %0 = braid.wait %h : !braid.handle<none> -> tensor<4x8xbf16>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  %h = braid.all_to_all_start %x on @tp split 1 concat 0 : tensor<4x8xbf16> -> !braid.handle<tensor<16x2xbf16>>
  // expected-error@+1 {{'braid.wait' op must produce the handle's payload 'tensor<16x2xbf16>'}}
  braid.wait %h : !braid.handle<tensor<16x2xbf16>>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<4x8xbf16>) {
  %h = braid.reduce_scatter_start sum %x on @tp dim 0 : tensor<4x8xbf16> -> !braid.handle<tensor<1x8xbf16>>
  // expected-error@+1 {{'braid.wait' op result type 'tensor<4x8xbf16>' does not match the handle payload 'tensor<1x8xbf16>'}}
  %0 = braid.wait %h : !braid.handle<tensor<1x8xbf16>> -> tensor<4x8xbf16>
  return
}

// -----

// Streams: an i64 in [0, 255], on every scheduled op of a block or none.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'braid.silu' op braid.stream must be an i64 stream number, got "comm"}}
  %a = braid.silu %x {braid.stream = "comm"} : tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'braid.silu' op braid.stream must be in [0, 255], got -1}}
  %a = braid.silu %x {braid.stream = -1 : i64} : tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'braid.silu' op braid.stream must be in [0, 255], got 2000000000}}
  %a = braid.silu %x {braid.stream = 2000000000 : i64} : tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'braid.silu' op braid.stream must be an i64 stream number, got 1 : i32}}
  %a = braid.silu %x {braid.stream = 1 : i32} : tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = braid.silu %x : tensor<4xf32>
  // expected-error@+1 {{'braid.gelu' op has a braid.stream but the previous op 'braid.silu' does not; scheduled IR puts braid.stream on every op except parameters and terminators}}
  %b = braid.gelu none %a {braid.stream = 1 : i64} : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'braid.silu' op has a braid.stream but the next op 'braid.gelu' does not}}
  %a = braid.silu %x {braid.stream = 0 : i64} : tensor<4xf32>
  %b = braid.gelu none %a : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

func.func @f() -> tensor<4xf32> {
  // expected-error@+1 {{'braid.parameter' op launches no work and takes no braid.stream}}
  %w = braid.parameter "w" full [4] {braid.stream = 0 : i64} : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// Events: a wait needs an event value; only event_record makes one.
// expected-note@+1 {{prior use here}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = braid.event_record {braid.stream = 0 : i64}
  // expected-error@+1 {{use of value '%x' expects different type than prior uses: '!braid.event' vs 'tensor<4xf32>'}}
  braid.event_wait %x {braid.stream = 1 : i64}
  return %x : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{operand #0 does not dominate this use}}
  braid.event_wait %e {braid.stream = 1 : i64}
  // expected-note@+1 {{operand defined here}}
  %e = braid.event_record {braid.stream = 0 : i64}
  return %x : tensor<4xf32>
}

// -----

// swiglu does not broadcast: gate, up and the result share one type.
func.func @swiglu_shapes(%g: tensor<4x8xf32>, %u: tensor<8xf32>) {
  // expected-error@+1 {{'braid.swiglu' op requires the same type for all operands and results}}
  %y = "braid.swiglu"(%g, %u) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// add_rms_norm does not broadcast the residual.
func.func @add_rms_norm_residual(%x: tensor<4x8xf32>, %r: tensor<8xf32>, %w: tensor<8xf32>) {
  // expected-error@+1 {{'braid.add_rms_norm' op input, residual and sum must have one type, got 'tensor<4x8xf32>', 'tensor<8xf32>' and 'tensor<4x8xf32>'}}
  %s, %y = braid.add_rms_norm %x, %r, %w {epsilon = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

// The norm's checks apply: the weight is [H].
func.func @add_rms_norm_weight(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>, %w: tensor<4xf32>) {
  // expected-error@+1 {{add_rms_norm}}
  %s, %y = braid.add_rms_norm %x, %r, %w {epsilon = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @pack_of_a_non_parameter(%w: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %p = braid.parameter "p" full [4, 8] : tensor<4x8xf32>
  // expected-error@+1 {{'braid.parameter_pack' op piece 1 is not a braid.parameter result: a pack is made of parameters, which the runtime stores inside it}}
  %0 = braid.parameter_pack %p, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @pack_repeats_a_piece() -> tensor<8x8xf32> {
  %p = braid.parameter "p" full [4, 8] : tensor<4x8xf32>
  // expected-error@+1 {{'braid.parameter_pack' op piece 1 repeats an earlier piece}}
  %0 = braid.parameter_pack %p, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @pack_of_different_widths() -> tensor<8x8xf32> {
  %p = braid.parameter "p" full [4, 8] : tensor<4x8xf32>
  %q = braid.parameter "q" full [4, 6] : tensor<4x6xf32>
  // expected-error@+1 {{parameter_pack: input 1 has size 6 in dim 1 but input 0 has 8}}
  %0 = braid.parameter_pack %p, %q : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @pack_of_two_element_types() -> tensor<8x8xf32> {
  %p = braid.parameter "p" full [4, 8] : tensor<4x8xf32>
  %q = braid.parameter "q" full [4, 8] : tensor<4x8xbf16>
  // expected-error@+1 {{parameter_pack: input element type 'bf16' does not match 'f32'}}
  %0 = braid.parameter_pack %p, %q : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @pack_of_the_wrong_rows() -> tensor<9x8xf32> {
  %p = braid.parameter "p" full [4, 8] : tensor<4x8xf32>
  %q = braid.parameter "q" full [4, 8] : tensor<4x8xf32>
  // expected-error@+1 {{parameter_pack: result shape [9, 8] does not match the expected [8, 8]}}
  %0 = braid.parameter_pack %p, %q : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<9x8xf32>
  return %0 : tensor<9x8xf32>
}

// -----

func.func @matmul_bias_of_the_wrong_width(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{'braid.matmul' op bias must be [4] of 'f32' (the result's last dim and element type), got 'tensor<8xf32>'}}
  %0 = braid.matmul %x, %w bias %b : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul_bias_of_another_type(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xbf16>) -> tensor<2x4xf32> {
  // expected-error@+1 {{'braid.matmul' op bias must be [4] of 'f32' (the result's last dim and element type), got 'tensor<4xbf16>'}}
  %0 = braid.matmul %x, %w bias %b : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xbf16>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul_residual_of_another_shape(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %r: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{'braid.matmul' op residual must be 'tensor<2x4xf32>' (the result's type), got 'tensor<4xf32>'}}
  %0 = braid.matmul %x, %w residual %r : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul_residual_and_gelu(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %r: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{'braid.matmul' op cannot have both a residual and a GELU: cuBLASLt adds the residual before the activation}}
  %0 = braid.matmul %x, %w residual %r gelu tanh : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @activation_of_an_unknown_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{custom op 'braid.activation' expected string or keyword containing one of the following enum values for attribute 'kind' [relu, relu2, relu6, leaky_relu, quick_gelu, sigmoid, tanh, mish, hardswish, gelu_10, laplace, sqrtsoftplus]}}
  %0 = braid.activation prelu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @activation_of_integers(%x: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error@+1 {{'braid.activation' op operand #0 must be}}
  %0 = braid.activation relu %x : tensor<4xi64>
  return %0 : tensor<4xi64>
}
