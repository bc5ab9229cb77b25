// RUN: braid-opt %s --braid-decompose="chunks=2" --braid-schedule="min-hidden-us=0" --split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-decompose="chunks=1,2 report=true" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: braid-opt %s --braid-decompose="chunks=2 report=true" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORCED
// RUN: not braid-opt %s --braid-decompose="chunks=0" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not braid-opt %s --braid-decompose="order=zigzag" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-ORDER

// BAD: braid-decompose: chunks must be a list of positive counts, got '0'
// BAD-ORDER: braid-decompose: order must be 'auto', 'side-by-side' or 'skewed', got 'zigzag'

// One tensor-parallel layer cut into 2 chunks of 4 tokens, then scheduled:
// chunk 0's all_reduce starts before chunk 1's first matmul and is waited
// for after it, so the two overlap; chunk 1's all_reduce overlaps chunk
// 0's second matmul, and so on. The output is the chunks concatenated.
// CHECK-LABEL: func.func @layer
// CHECK: %[[X0:.*]] = braid.slice %arg0 offsets [0, 0, 0] sizes [1, 4, 64]
// CHECK-NEXT: %[[X1:.*]] = braid.slice %arg0 offsets [0, 4, 0] sizes [1, 4, 64]
// CHECK: %[[A0:.*]] = braid.matmul %[[X0]]
// CHECK-NEXT: %[[H0:.*]] = braid.all_reduce_start sum %[[A0]]
// CHECK-NEXT: %[[A1:.*]] = braid.matmul %[[X1]]
// CHECK-NEXT: %[[H1:.*]] = braid.all_reduce_start sum %[[A1]]
// CHECK-NEXT: %[[R0:.*]] = braid.wait %[[H0]]
// CHECK-NEXT: %[[S0:.*]] = braid.add %[[R0]], %[[X0]]
// CHECK: %[[M0:.*]] = braid.matmul %[[S0]]
// CHECK-NEXT: braid.all_reduce_start sum %[[M0]]
// CHECK-NEXT: %[[R1:.*]] = braid.wait %[[H1]]
// CHECK-NEXT: %[[S1:.*]] = braid.add %[[R1]], %[[X1]]
// CHECK: %[[Y:.*]] = braid.concat %{{.*}}, %{{.*}} dim 1 : (tensor<1x4x64xf32>, tensor<1x4x64xf32>) -> tensor<1x8x64xf32>
// CHECK-NEXT: return %[[Y]]
// At these sizes the cost model keeps one chunk: two cost more launches
// than they hide, in either order.
// REPORT: remark: braid-decompose: 1 chunk (estimated k=1: 0.026 ms; k=2: 0.048 ms; k=2 skewed: 0.053 ms;)
// REPORT: remark: braid-decompose: 1 chunk (estimated k=1: 0.001 ms; k=2: 0.002 ms; k=2 skewed: 0.002 ms;)
braid.device_group @tp size 2
func.func @layer(%x: tensor<1x8x64xf32> {braid.input = "x"}) -> (tensor<1x8x64xf32> {braid.output = "y"}) {
  %w1 = braid.parameter "w1" full [64, 128] shard_dim 1 on @tp : tensor<64x64xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
  %h = braid.add %ar, %x : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  %w2 = braid.parameter "w2" full [64, 128] shard_dim 1 on @tp : tensor<64x64xf32>
  %m = braid.matmul %h, %w2 {transpose_b} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %mr = braid.all_reduce sum %m on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
  %y = braid.add %mr, %h : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  return %y : tensor<1x8x64xf32>
}

// -----

// Attention over a KV cache: chunk i writes its keys at its own first
// position (the first token of its chunk of the positions) and reads the
// cache chunk i-1 left; the function returns the last chunk's caches. The
// last-token slice comes from the last chunk.
// CHECK-LABEL: func.func @attention
// CHECK-DAG: %[[P0:.*]] = braid.slice %arg1 offsets [0, 0] sizes [1, 2]
// CHECK-DAG: %[[P1:.*]] = braid.slice %arg1 offsets [0, 2] sizes [1, 2]
// CHECK: %[[F0:.*]] = braid.slice %[[P0]] offsets [0, 0] sizes [1, 1]
// CHECK-NEXT: %[[Q0:.*]] = braid.reshape %[[F0]] : tensor<1x1xi32> -> tensor<1xi32>
// CHECK-NEXT: %{{.*}}, %[[C0:.*]]:2 = braid.attention %{{.*}}, %{{.*}}, %{{.*}} cache(%arg2, %arg3) at %[[Q0]]
// CHECK-NEXT: %[[F1:.*]] = braid.slice %[[P1]] offsets [0, 0] sizes [1, 1]
// CHECK-NEXT: %[[Q1:.*]] = braid.reshape %[[F1]]
// CHECK-NEXT: %[[O1:.*]], %[[C1:.*]]:2 = braid.attention %{{.*}}, %{{.*}}, %{{.*}} cache(%[[C0]]#0, %[[C0]]#1) at %[[Q1]]
// CHECK-NEXT: %[[LAST:.*]] = braid.slice %[[O1]] offsets [0, 1, 0, 0] sizes [1, 1, 1, 4]
// CHECK-NEXT: return %[[LAST]], %[[C1]]#0, %[[C1]]#1
func.func @attention(%q: tensor<1x4x1x4xf32> {braid.input = "q"}, %pos: tensor<1x4xi32> {braid.input = "positions"}, %kc: tensor<1x16x1x4xf32> {braid.state = "k"}, %vc: tensor<1x16x1x4xf32> {braid.state = "v"}) -> (tensor<1x1x1x4xf32> {braid.output = "o"}, tensor<1x16x1x4xf32> {braid.state = "k"}, tensor<1x16x1x4xf32> {braid.state = "v"}) {
  %p0 = braid.slice %pos offsets [0, 0] sizes [1, 1] : tensor<1x4xi32> -> tensor<1x1xi32>
  %p = braid.reshape %p0 : tensor<1x1xi32> -> tensor<1xi32>
  %o, %k2, %v2 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {causal, head_dim = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1xi32>) -> (tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>)
  %last = braid.slice %o offsets [0, 3, 0, 0] sizes [1, 1, 1, 4] : tensor<1x4x1x4xf32> -> tensor<1x1x1x4xf32>
  return %last, %k2, %v2 : tensor<1x1x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>
}

// -----

// Refused, with the reason: a softmax along the tokens mixes them; one
// token (a decode step) has nothing to cut.
// CHECK-LABEL: func.func @mixes_tokens
// CHECK-NOT: braid.concat
// REPORT: remark: braid-decompose: 1 chunk; k=2 refused: a softmax along the tokens
// REPORT: remark: braid-decompose: 1 chunk; k=2 refused: one token (a decode step): nothing to cut
// A forced count that is refused leaves the function as it is.
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a softmax along the tokens
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: one token (a decode step): nothing to cut
func.func @mixes_tokens(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x8x4xf32> {braid.output = "y"}) {
  %y = braid.softmax %x dim 1 : tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}
func.func @one_token(%x: tensor<1x1x4xf32> {braid.input = "x"}) -> (tensor<1x1x4xf32> {braid.output = "y"}) {
  %y = braid.silu %x : tensor<1x1x4xf32>
  return %y : tensor<1x1x4xf32>
}

// -----

// An op the chunks cannot pass through after a collective was cut (the
// bucketed prefill's row gather: a reshape that merges batch and tokens)
// joins them: one concat, shared with the token output, then the rest
// once, as it was.
// CHECK-LABEL: func.func @joined_head
// CHECK: braid.all_reduce_start sum
// CHECK: braid.all_reduce_start sum
// CHECK: %[[H0:.*]] = braid.add
// CHECK: %[[H1:.*]] = braid.add
// CHECK-NEXT: %[[H:.*]] = braid.concat %[[H0]], %[[H1]] dim 1 : (tensor<1x4x64xf32>, tensor<1x4x64xf32>) -> tensor<1x8x64xf32>
// CHECK-NEXT: %[[FLAT:.*]] = braid.reshape %[[H]] : tensor<1x8x64xf32> -> tensor<8x64xf32>
// CHECK-NEXT: %[[ROW:.*]] = braid.embedding %arg1, %[[FLAT]]
// CHECK: braid.matmul %[[ROW]]
// CHECK-NOT: braid.concat
// CHECK: return %{{.*}}, %[[H]]
// FORCED: remark: braid-decompose: 2 chunks
braid.device_group @tp size 2
func.func @joined_head(%x: tensor<1x8x64xf32> {braid.input = "x"}, %rows: tensor<1x1xi32> {braid.input = "logit_rows"}) -> (tensor<1x1x64xf32> {braid.output = "y"}, tensor<1x8x64xf32> {braid.output = "h"}) {
  %w1 = braid.parameter "w1" full [64, 128] shard_dim 1 on @tp : tensor<64x64xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
  %h = braid.add %ar, %x : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  %flat = braid.reshape %h : tensor<1x8x64xf32> -> tensor<8x64xf32>
  %row = braid.embedding %rows, %flat : (tensor<1x1xi32>, tensor<8x64xf32>) -> tensor<1x1x64xf32>
  %w2 = braid.parameter "w2" full [64, 128] shard_dim 1 on @tp : tensor<64x64xf32>
  %m = braid.matmul %row, %w2 {transpose_b} : (tensor<1x1x64xf32>, tensor<64x64xf32>) -> tensor<1x1x64xf32>
  %y = braid.all_reduce sum %m on @tp : tensor<1x1x64xf32> -> tensor<1x1x64xf32>
  return %y, %h : tensor<1x1x64xf32>, tensor<1x8x64xf32>
}

// -----

// The tokens per sequence are the `positions` input's: a [1, 1] row index
// bound before the tokens is not a token input (it was taken for one and
// the function refused as a decode step).
// CHECK-LABEL: func.func @rows_bound_first
// CHECK: braid.all_reduce_start sum
// CHECK: braid.all_reduce_start sum
// CHECK: braid.concat
// FORCED: remark: braid-decompose: 2 chunks
braid.device_group @tp size 2
func.func @rows_bound_first(%rows: tensor<1x1xi32> {braid.input = "logit_rows"}, %x: tensor<1x8x64xf32> {braid.input = "x"}, %pos: tensor<1x8xi32> {braid.input = "positions"}) -> (tensor<1x1x64xf32> {braid.output = "y"}) {
  %w1 = braid.parameter "w1" full [64, 128] shard_dim 1 on @tp : tensor<64x64xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
  %h = braid.add %ar, %x : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  %flat = braid.reshape %h : tensor<1x8x64xf32> -> tensor<8x64xf32>
  %row = braid.embedding %rows, %flat : (tensor<1x1xi32>, tensor<8x64xf32>) -> tensor<1x1x64xf32>
  return %row : tensor<1x1x64xf32>
}

// -----

// Before any collective is cut, the same op is refused instead: joining
// there would leave nothing to overlap.
// CHECK-LABEL: func.func @joined_too_early
// CHECK-NOT: braid.concat
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a reshape that moves the token dim
braid.device_group @tp size 2
func.func @joined_too_early(%x: tensor<1x8x64xf32> {braid.input = "x"}) -> (tensor<8x64xf32> {braid.output = "y"}) {
  %w1 = braid.parameter "w1" full [64, 128] shard_dim 1 on @tp : tensor<64x64xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %flat = braid.reshape %a : tensor<1x8x64xf32> -> tensor<8x64xf32>
  %y = braid.all_reduce sum %flat on @tp : tensor<8x64xf32> -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// A reduce_scatter along the tokens splits each chunk over the group:
// rank r holds piece r of each chunk, not of the whole. Such a value
// returned, or sliced along the tokens, is refused; gathered back along
// the tokens over the same group it is whole again. Gathering what no
// reduce_scatter split would interleave the ranks' chunks.
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: an output split along the tokens over a group
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a slice of tokens split over a group
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: an all_gather along the tokens of a value not split along them
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: an all_gather along the tokens over another group than the one that split them
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a 'braid.add' reading token values split along the tokens and whole ones
// FORCED: remark: braid-decompose: 2 chunks
braid.device_group @tp size 2
braid.device_group @other size 2
braid.device_group @one size 1
func.func @split_output(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x4x4xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
  %y = braid.silu %s : tensor<1x4x4xf32>
  return %y : tensor<1x4x4xf32>
}
func.func @split_slice(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x1x4xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
  %y = braid.slice %s offsets [0, 3, 0] sizes [1, 1, 4] : tensor<1x4x4xf32> -> tensor<1x1x4xf32>
  return %y : tensor<1x1x4xf32>
}
func.func @gather_whole(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x16x4xf32> {braid.output = "y"}) {
  %y = braid.all_gather %x on @tp dim 1 : tensor<1x8x4xf32> -> tensor<1x16x4xf32>
  return %y : tensor<1x16x4xf32>
}
func.func @gather_other_group(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x8x4xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
  %y = braid.all_gather %s on @other dim 1 : tensor<1x4x4xf32> -> tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}
// (Over a group of one, split and whole values have one shape.)
func.func @split_and_whole(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x8x4xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @one dim 1 : tensor<1x8x4xf32> -> tensor<1x8x4xf32>
  %a = braid.add %s, %x : (tensor<1x8x4xf32>, tensor<1x8x4xf32>) -> tensor<1x8x4xf32>
  %y = braid.all_gather %a on @one dim 1 : tensor<1x8x4xf32> -> tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}
// CHECK-LABEL: func.func @split_gathered
// CHECK: braid.reduce_scatter sum %{{.*}} : tensor<1x4x4xf32> -> tensor<1x2x4xf32>
// CHECK: braid.reduce_scatter_start sum %{{.*}} : tensor<1x4x4xf32>
// CHECK: braid.all_gather_start %{{.*}} : tensor<1x2x4xf32> -> !braid.handle<tensor<1x4x4xf32>>
// CHECK: braid.all_gather %{{.*}} : tensor<1x2x4xf32> -> tensor<1x4x4xf32>
// CHECK: braid.concat
func.func @split_gathered(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x8x4xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
  %n = braid.silu %s : tensor<1x4x4xf32>
  %y = braid.all_gather %n on @tp dim 1 : tensor<1x4x4xf32> -> tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}

// -----

// Ulysses: an all_to_all concatenating the tokens of a split value gives
// each rank whole chunks of its head shard (the attention runs per chunk,
// threading the cache); one splitting them after the attention splits
// each chunk again. An all_to_all concatenating whole tokens, or
// splitting and concatenating them, is an exchange: only its first piece
// may be read, and returning it is refused.
// CHECK-LABEL: func.func @ulysses
// CHECK-COUNT-2: braid.all_to_all{{(_start)?}} %{{.*}} on @tp split 2 concat 1 {{.*}}: tensor<1x2x4x4xf32> -> {{.*}}tensor<1x4x2x4xf32>
// CHECK: braid.attention
// CHECK: braid.attention
// CHECK: braid.all_to_all{{(_start)?}} %{{.*}} on @tp split 1 concat 2 {{.*}}: tensor<1x4x2x4xf32> -> {{.*}}tensor<1x2x4x4xf32>
// FORCED: remark: braid-decompose: 2 chunks
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: an output of an all_to_all concatenating tokens from every rank
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: an output of an all_to_all concatenating tokens from every rank
braid.device_group @tp size 2
func.func @ulysses(%x: tensor<1x8x4x4xf32> {braid.input = "x"}, %pos: tensor<1x8xi32> {braid.input = "positions"}, %kc: tensor<1x16x2x4xf32> {braid.state = "k"}, %vc: tensor<1x16x2x4xf32> {braid.state = "v"}) -> (tensor<1x8x4x4xf32> {braid.output = "y"}, tensor<1x16x2x4xf32> {braid.state = "k"}, tensor<1x16x2x4xf32> {braid.state = "v"}) {
  %p0 = braid.slice %pos offsets [0, 0] sizes [1, 1] : tensor<1x8xi32> -> tensor<1x1xi32>
  %p = braid.reshape %p0 : tensor<1x1xi32> -> tensor<1xi32>
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x4x4xf32> -> tensor<1x4x4x4xf32>
  %q = braid.all_to_all %s on @tp split 2 concat 1 : tensor<1x4x4x4xf32> -> tensor<1x8x2x4xf32>
  %o, %k2, %v2 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1xi32>) -> (tensor<1x8x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>)
  %back = braid.all_to_all %o on @tp split 1 concat 2 : tensor<1x8x2x4xf32> -> tensor<1x4x4x4xf32>
  %y = braid.all_gather %back on @tp dim 1 : tensor<1x4x4x4xf32> -> tensor<1x8x4x4xf32>
  return %y, %k2, %v2 : tensor<1x8x4x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}
func.func @exchange_whole(%x: tensor<1x8x4x4xf32> {braid.input = "x"}) -> (tensor<1x16x2x4xf32> {braid.output = "y"}) {
  %y = braid.all_to_all %x on @tp split 2 concat 1 : tensor<1x8x4x4xf32> -> tensor<1x16x2x4xf32>
  return %y : tensor<1x16x2x4xf32>
}
func.func @exchange_tokens(%x: tensor<1x8x4xf32> {braid.input = "x"}) -> (tensor<1x8x4xf32> {braid.output = "y"}) {
  %y = braid.all_to_all %x on @tp split 1 concat 1 : tensor<1x8x4xf32> -> tensor<1x8x4xf32>
  return %y : tensor<1x8x4xf32>
}

// -----

// Operands that hold tokens in a role the chunks cannot share join them:
// a rope's positions that are not token values (here the positions input
// through a reshape that moves the tokens: joining an input is the input
// itself), and a matmul of two token values.
// CHECK-LABEL: func.func @rope_whole_positions
// CHECK: %[[P:.*]] = braid.reshape %{{.*}} : tensor<8xi32> -> tensor<1x8xi32>
// CHECK: %[[X:.*]] = braid.concat %{{.*}}, %{{.*}} dim 1 : (tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x8x1x4xf32>
// CHECK-NEXT: braid.rope %[[X]], %[[P]]
// CHECK-LABEL: func.func @token_times_token
// CHECK: %[[A:.*]] = braid.concat %{{.*}}, %{{.*}} dim 1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x8x8xf32>
// CHECK-NEXT: braid.matmul %[[A]], %[[A]] {transpose_b} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// FORCED: remark: braid-decompose: 2 chunks
// FORCED: remark: braid-decompose: 2 chunks
// A collective over the group that split the tokens (other than the
// gather back) would combine other tokens than the whole function's.
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a 'braid.all_reduce' combining tokens split over a group
braid.device_group @tp size 2
func.func @rope_whole_positions(%x: tensor<1x8x1x4xf32> {braid.input = "x"}, %pos: tensor<1x8xi32> {braid.input = "positions"}) -> (tensor<1x8x1x4xf32> {braid.output = "y"}) {
  %a = braid.all_reduce sum %x on @tp : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %p1 = braid.reshape %pos : tensor<1x8xi32> -> tensor<8xi32>
  %p2 = braid.reshape %p1 : tensor<8xi32> -> tensor<1x8xi32>
  %y = braid.rope %a, %p2 {theta = 1.0e+04 : f64} : (tensor<1x8x1x4xf32>, tensor<1x8xi32>) -> tensor<1x8x1x4xf32>
  return %y : tensor<1x8x1x4xf32>
}
func.func @token_times_token(%x: tensor<1x8x8xf32> {braid.input = "x"}) -> (tensor<1x8x8xf32> {braid.output = "y"}) {
  %a = braid.all_reduce sum %x on @tp : tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %y = braid.matmul %a, %a {transpose_b} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
  return %y : tensor<1x8x8xf32>
}
func.func @reduce_split(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x8x16xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %a = braid.all_reduce sum %s on @tp : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
  %y = braid.all_gather %a on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}

// -----

// GPT-2 under sequence parallelism takes its rank's rows of the learned
// position embedding (every rank holds it whole) through an all_to_all
// that splits and concatenates the tokens, then the first piece: rank 0's
// piece r, so piece r. Cut, each chunk does the same and gets piece r of
// the chunk, split like the reduce_scatter's result it is added to. Any
// other read of the exchange is refused.
// CHECK-LABEL: func.func @exchange_first_piece
// CHECK-COUNT-2: braid.all_to_all{{(_start)?}} %{{.*}} on @tp split 1 concat 1 {{.*}}: tensor<1x4x8xf32> -> {{.*}}tensor<1x4x8xf32>
// CHECK-COUNT-2: braid.slice %{{.*}} offsets [0, 0, 0] sizes [1, 2, 8] : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
// FORCED: remark: braid-decompose: 2 chunks
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a 'braid.silu' reading an all_to_all concatenating tokens from every rank other than by its first piece
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: an output of an all_to_all concatenating tokens from every rank
braid.device_group @tp size 2
func.func @exchange_first_piece(%x: tensor<1x8x8xf32> {braid.input = "x"}, %p: tensor<1x8x8xf32> {braid.input = "p"}) -> (tensor<1x8x8xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x8xf32> -> tensor<1x4x8xf32>
  %e = braid.all_to_all %p on @tp split 1 concat 1 : tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %mine = braid.slice %e offsets [0, 0, 0] sizes [1, 4, 8] : tensor<1x8x8xf32> -> tensor<1x4x8xf32>
  %h = braid.add %s, %mine : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %y = braid.all_gather %h on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  return %y : tensor<1x8x8xf32>
}
func.func @exchange_read_whole(%x: tensor<1x8x8xf32> {braid.input = "x"}) -> (tensor<1x8x8xf32> {braid.output = "y"}) {
  %e = braid.all_to_all %x on @tp split 1 concat 1 : tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %y = braid.silu %e : tensor<1x8x8xf32>
  return %y : tensor<1x8x8xf32>
}
func.func @exchange_returned(%x: tensor<1x8x8xf32> {braid.input = "x"}) -> (tensor<1x8x8xf32> {braid.output = "y"}) {
  %e = braid.all_to_all %x on @tp split 1 concat 1 : tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  return %e : tensor<1x8x8xf32>
}

// -----

// Refused (before any collective is cut; after one they join): a
// non-causal attention over a cache (a query would read keys of later
// chunks); an attention whose position is not the first token of the
// `positions` input (chunk c writes at that value's token c*T/k, the whole
// op at its first token + c*T/k: equal only for consecutive positions); a
// token value broadcast from a lower rank (its tokens line up with another
// dim); a matmul whose a holds the tokens in its rows.
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a non-causal attention
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: an attention position that is not the first token's of the positions input
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a 'braid.add' broadcasting a token value of lower rank
// FORCED: remark: braid-decompose: 1 chunk; k=2 refused: a matmul whose a holds the tokens in its rows or contraction
func.func @non_causal(%q: tensor<1x4x1x4xf32> {braid.input = "q"}, %pos: tensor<1x4xi32> {braid.input = "positions"}, %kc: tensor<1x16x1x4xf32> {braid.state = "k"}, %vc: tensor<1x16x1x4xf32> {braid.state = "v"}) -> (tensor<1x4x1x4xf32> {braid.output = "o"}, tensor<1x16x1x4xf32> {braid.state = "k"}, tensor<1x16x1x4xf32> {braid.state = "v"}) {
  %p0 = braid.slice %pos offsets [0, 0] sizes [1, 1] : tensor<1x4xi32> -> tensor<1x1xi32>
  %p = braid.reshape %p0 : tensor<1x1xi32> -> tensor<1xi32>
  %o, %k2, %v2 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {head_dim = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1xi32>) -> (tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>)
  return %o, %k2, %v2 : tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>
}
func.func @position_from_ids(%q: tensor<1x4x1x4xf32> {braid.input = "q"}, %ids: tensor<1x4xi32> {braid.input = "input_ids"}, %kc: tensor<1x16x1x4xf32> {braid.state = "k"}, %vc: tensor<1x16x1x4xf32> {braid.state = "v"}) -> (tensor<1x4x1x4xf32> {braid.output = "o"}, tensor<1x16x1x4xf32> {braid.state = "k"}, tensor<1x16x1x4xf32> {braid.state = "v"}) {
  %p0 = braid.slice %ids offsets [0, 0] sizes [1, 1] : tensor<1x4xi32> -> tensor<1x1xi32>
  %p = braid.reshape %p0 : tensor<1x1xi32> -> tensor<1xi32>
  %o, %k2, %v2 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {causal, head_dim = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64} : (tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1xi32>) -> (tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>)
  return %o, %k2, %v2 : tensor<1x4x1x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>
}
func.func @lower_rank_token(%a: tensor<1x8x8xf32> {braid.input = "a"}, %m: tensor<1x8xf32> {braid.input = "m"}) -> (tensor<1x8x8xf32> {braid.output = "y"}) {
  %y = braid.add %a, %m : (tensor<1x8x8xf32>, tensor<1x8xf32>) -> tensor<1x8x8xf32>
  return %y : tensor<1x8x8xf32>
}
func.func @rows_are_tokens(%a: tensor<1x8xf32> {braid.input = "a"}, %z: tensor<1x8xf32> {braid.input = "z"}) -> (tensor<1x4xf32> {braid.output = "y"}) {
  %w = braid.parameter "w" full [4, 8] : tensor<4x8xf32>
  %y = braid.matmul %a, %w {transpose_b} : (tensor<1x8xf32>, tensor<4x8xf32>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}
