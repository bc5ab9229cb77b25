// RUN: braid-opt %s --braid-sequence-parallel=force=true --split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-sequence-parallel='force=true report=true' --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// Without force the cost model decides: these toy layers do not pay.
// RUN: braid-opt %s --braid-sequence-parallel=report=true --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRICED
// RUN: braid-opt %s --braid-sequence-parallel=mode=off --split-input-file | FileCheck %s --check-prefix=OFF
// RUN: braid-opt %s --braid-sequence-parallel='force=true pad=false report=true' --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOPAD
// RUN: not braid-opt %s --braid-sequence-parallel=mode=ring --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=MODE

braid.device_group @tp size 2

// One layer: the embedding's all_reduce and the attention output's become
// reduce_scatters along the tokens; the residual add and the norms run on
// 4 of 8 tokens; the norms' readers (a matmul, the last-token slice) read
// all_gathers placed right before them.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[E:.*]]: tensor<1x8x16xf32>, %[[O:.*]]: tensor<1x8x16xf32>)
// CHECK: %[[W1:.*]] = braid.parameter "ln1"
// CHECK-NEXT: %[[X:.*]] = braid.reduce_scatter sum %[[E]] on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[N:.*]] = braid.rms_norm %[[X]], %[[W1]] {{.*}} : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[WQ:.*]] = braid.parameter "wq"
// CHECK-NEXT: %[[NG:.*]] = braid.all_gather %[[N]] on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[Q:.*]] = braid.matmul %[[NG]], %[[WQ]]
// CHECK-NEXT: %[[P:.*]] = braid.add %[[Q]], %[[O]]
// CHECK-NEXT: %[[R:.*]] = braid.reduce_scatter sum %[[P]] on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[H:.*]] = braid.add %[[X]], %[[R]] : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[B:.*]] = braid.parameter "bias" full [16]
// CHECK-NEXT: %[[HB:.*]] = braid.add %[[H]], %[[B]] : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[G:.*]] = braid.silu %[[HB]] : tensor<1x4x16xf32>
// CHECK-NEXT: %[[GG:.*]] = braid.all_gather %[[G]] on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[L:.*]] = braid.slice %[[GG]] offsets [0, 7, 0] sizes [1, 1, 16]
// CHECK-NEXT: return %[[L]]
func.func @layer(%e: tensor<1x8x16xf32>, %o: tensor<1x8x16xf32>) -> tensor<1x1x16xf32> {
  %w1 = braid.parameter "ln1" full [16] : tensor<16xf32>
  %x = braid.all_reduce sum %e on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %n = braid.rms_norm %x, %w1 {epsilon = 1.0e-05 : f64} : (tensor<1x8x16xf32>, tensor<16xf32>) -> tensor<1x8x16xf32>
  %wq = braid.parameter "wq" full [16, 32] shard_dim 1 on @tp : tensor<16x16xf32>
  %q = braid.matmul %n, %wq : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %p = braid.add %q, %o : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %r = braid.all_reduce sum %p on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = braid.add %x, %r : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %b = braid.parameter "bias" full [16] : tensor<16xf32>
  %hb = braid.add %h, %b : (tensor<1x8x16xf32>, tensor<16xf32>) -> tensor<1x8x16xf32>
  %g = braid.silu %hb : tensor<1x8x16xf32>
  %l = braid.slice %g offsets [0, 7, 0] sizes [1, 1, 16] : tensor<1x8x16xf32> -> tensor<1x1x16xf32>
  return %l : tensor<1x1x16xf32>
}
// REPORT: braid-sequence-parallel: @layer: 2 all_reduces -> reduce_scatter + all_gather over tp (dim 1), 4 ops on 1/2 of the tokens (forced)
// PRICED: braid-sequence-parallel: @layer: left alone: does not pay: step {{[0-9.]+}} ms -> {{[0-9.]+}} ms on h100-sxm-x8
// OFF-LABEL: func.func @layer
// OFF: braid.all_reduce
// OFF-NOT: braid.reduce_scatter
// MODE: error: braid-sequence-parallel: mode must be 'megatron', 'ulysses' or 'off', got 'ring'

// -----

braid.device_group @tp size 2
braid.device_group @tp8 size 8

// Refusals. Batch 2, with a token-wise reader whose other operand is a
// function argument (not known to be the same on every rank) and one
// whose operand is a sharded parameter: the add stays whole, so the
// reduction's only token-wise reader is the norm.
// CHECK-LABEL: func.func @batch_and_unknown_operands
// CHECK: %[[X:.*]] = braid.reduce_scatter sum %arg0 on @tp dim 1 : tensor<2x6x8xf32> -> tensor<2x3x8xf32>
// CHECK: %[[N:.*]] = braid.layer_norm %[[X]], {{.*}} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
// CHECK: %[[XG:.*]] = braid.all_gather %[[X]] on @tp dim 1 : tensor<2x3x8xf32> -> tensor<2x6x8xf32>
// CHECK-NEXT: %[[A:.*]] = braid.add %[[XG]], %arg1 : (tensor<2x6x8xf32>, tensor<2x6x8xf32>)
// CHECK: braid.mul %[[XG]], %{{.*}} : (tensor<2x6x8xf32>, tensor<8xf32>)
// CHECK: braid.all_gather %[[N]] on @tp dim 1
func.func @batch_and_unknown_operands(%e: tensor<2x6x8xf32>, %f: tensor<2x6x8xf32>) -> (tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>) {
  %x = braid.all_reduce sum %e on @tp : tensor<2x6x8xf32> -> tensor<2x6x8xf32>
  %g = braid.parameter "g" full [8] : tensor<8xf32>
  %b = braid.parameter "b" full [8] : tensor<8xf32>
  %n = braid.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<2x6x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x6x8xf32>
  %a = braid.add %x, %f : (tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x6x8xf32>
  %s = braid.parameter "s" full [16] shard_dim 0 on @tp : tensor<8xf32>
  %m = braid.mul %x, %s : (tensor<2x6x8xf32>, tensor<8xf32>) -> tensor<2x6x8xf32>
  return %n, %a, %m : tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>
}

// Neither the tokens nor the batch divide by the group size: the tokens
// are padded to 8 with a copy of the first row, and the pad rows dropped
// after the all_gather.
// CHECK-LABEL: func.func @odd_tokens
// CHECK-NEXT: %[[H:.*]] = braid.slice %arg0 offsets [0, 0, 0] sizes [1, 1, 8] : tensor<1x7x8xf32> -> tensor<1x1x8xf32>
// CHECK-NEXT: %[[P:.*]] = braid.concat %arg0, %[[H]] dim 1 : (tensor<1x7x8xf32>, tensor<1x1x8xf32>) -> tensor<1x8x8xf32>
// CHECK-NEXT: %[[X:.*]] = braid.reduce_scatter sum %[[P]] on @tp dim 1 : tensor<1x8x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = braid.silu %[[X]] : tensor<1x4x8xf32>
// CHECK-NEXT: %[[G:.*]] = braid.all_gather %[[Y]] on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
// CHECK-NEXT: %[[R:.*]] = braid.slice %[[G]] offsets [0, 0, 0] sizes [1, 7, 8] : tensor<1x8x8xf32> -> tensor<1x7x8xf32>
// CHECK-NEXT: return %[[R]]
// REPORT: braid-sequence-parallel: @odd_tokens: 1 all_reduces -> reduce_scatter + all_gather over tp (dim 1), 1 ops on 1/2 of the tokens (padded from 7 to 8) (forced)
// NOPAD: braid-sequence-parallel: @odd_tokens: left alone: neither the 7 tokens nor the batch of 1 divide by the group size 2, and padding is off
func.func @odd_tokens(%e: tensor<1x7x8xf32>, %w: tensor<8xf32>) -> tensor<1x7x8xf32> {
  %x = braid.all_reduce sum %e on @tp : tensor<1x7x8xf32> -> tensor<1x7x8xf32>
  %y = braid.silu %x : tensor<1x7x8xf32>
  return %y : tensor<1x7x8xf32>
}

// A whole replicated operand (a step input here; GPT-2's position
// embeddings in a model) joins the region through this rank's rows of it:
// an all_to_all along the tokens leaves rank r n copies of its piece, and
// a slice keeps one.
// CHECK-LABEL: func.func @replicated_operand
// CHECK-NEXT: %[[X:.*]] = braid.reduce_scatter sum %arg0 on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[A:.*]] = braid.all_to_all %arg1 on @tp split 1 concat 1 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[P:.*]] = braid.slice %[[A]] offsets [0, 0, 0] sizes [1, 4, 16] : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[H:.*]] = braid.add %[[X]], %[[P]] : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
// CHECK-NEXT: %[[G:.*]] = braid.silu %[[H]]
// CHECK-NEXT: braid.all_gather %[[G]] on @tp dim 1
func.func @replicated_operand(%e: tensor<1x8x16xf32>, %pe: tensor<1x8x16xf32> {braid.input = "pos_emb"}) -> tensor<1x8x16xf32> {
  %x = braid.all_reduce sum %e on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = braid.add %x, %pe : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %g = braid.silu %h : tensor<1x8x16xf32>
  return %g : tensor<1x8x16xf32>
}

// One token per sequence (decode) but 4 sequences: the shards cut the
// batch; a bias that broadcasts over both stays whole.
// CHECK-LABEL: func.func @decode_batch
// CHECK-NEXT: %[[X:.*]] = braid.reduce_scatter sum %arg0 on @tp dim 0 : tensor<4x1x8xf32> -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[B:.*]] = braid.parameter "bias"
// CHECK-NEXT: %[[Y:.*]] = braid.add %[[X]], %[[B]] : (tensor<2x1x8xf32>, tensor<1x8xf32>) -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[G:.*]] = braid.all_gather %[[Y]] on @tp dim 0 : tensor<2x1x8xf32> -> tensor<4x1x8xf32>
// CHECK-NEXT: return %[[G]]
// REPORT: braid-sequence-parallel: @decode_batch: 1 all_reduces -> reduce_scatter + all_gather over tp (dim 0), 1 ops on 1/2 of the sequences (forced)
func.func @decode_batch(%e: tensor<4x1x8xf32>) -> tensor<4x1x8xf32> {
  %x = braid.all_reduce sum %e on @tp : tensor<4x1x8xf32> -> tensor<4x1x8xf32>
  %b = braid.parameter "bias" full [1, 8] : tensor<1x8xf32>
  %y = braid.add %x, %b : (tensor<4x1x8xf32>, tensor<1x8xf32>) -> tensor<4x1x8xf32>
  return %y : tensor<4x1x8xf32>
}

// A pad longer than the input (3 tokens at tp 8): three copies, cut to 8.
// CHECK-LABEL: func.func @short_prompt_tp8
// CHECK-NEXT: %[[C:.*]] = braid.concat %arg0, %arg0, %arg0 dim 1 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x9x8xf32>
// CHECK-NEXT: %[[P:.*]] = braid.slice %[[C]] offsets [0, 0, 0] sizes [1, 8, 8] : tensor<1x9x8xf32> -> tensor<1x8x8xf32>
// CHECK-NEXT: braid.reduce_scatter sum %[[P]] on @tp8 dim 1 : tensor<1x8x8xf32> -> tensor<1x1x8xf32>
func.func @short_prompt_tp8(%e: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %x = braid.all_reduce sum %e on @tp8 : tensor<1x3x8xf32> -> tensor<1x3x8xf32>
  %y = braid.silu %x : tensor<1x3x8xf32>
  return %y : tensor<1x3x8xf32>
}

// A max is not a sum a reduce_scatter could share out.
// CHECK-LABEL: func.func @max_reduction
// CHECK-NEXT: braid.all_reduce max
// REPORT: braid-sequence-parallel: @max_reduction: left alone: an all_reduce is not a sum
func.func @max_reduction(%e: tensor<1x8x8xf32>) -> tensor<1x8x8xf32> {
  %x = braid.all_reduce max %e on @tp : tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %y = braid.silu %x : tensor<1x8x8xf32>
  return %y : tensor<1x8x8xf32>
}

// Nothing token-wise reads the reduction: a reduce_scatter + all_gather
// would only add a collective.
// CHECK-LABEL: func.func @nothing_to_shard
// CHECK-NEXT: braid.all_reduce sum
// REPORT: braid-sequence-parallel: @nothing_to_shard: left alone: no token-wise op reads an all_reduce (nothing to run on a token shard)
func.func @nothing_to_shard(%e: tensor<1x8x8xf32>, %w: tensor<8x8xf32>) -> tensor<1x8x8xf32> {
  %x = braid.all_reduce sum %e on @tp : tensor<1x8x8xf32> -> tensor<1x8x8xf32>
  %y = braid.matmul %x, %w : (tensor<1x8x8xf32>, tensor<8x8xf32>) -> tensor<1x8x8xf32>
  return %y : tensor<1x8x8xf32>
}

// -----

braid.device_group @tp size 2
braid.device_group @dp size 2

// With two groups, a reduction over @dp leaves the ranks of one @dp
// instance alike, not those of @tp: its result is not taken as replicated
// over @tp, so the add reads the gathered tokens and stays whole.
// CHECK-LABEL: func.func @other_group_is_not_replicated
// CHECK: %[[X:.*]] = braid.reduce_scatter sum %arg0 on @tp dim 1
// CHECK: %[[D:.*]] = braid.all_reduce sum %arg1 on @dp
// CHECK-NOT: braid.all_to_all
// CHECK: %[[XG:.*]] = braid.all_gather %[[X]] on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: braid.add %[[XG]], %[[D]] : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
func.func @other_group_is_not_replicated(%e: tensor<1x8x16xf32>, %f: tensor<1x8x16xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x16xf32>) {
  %x = braid.all_reduce sum %e on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %s = braid.silu %x : tensor<1x8x16xf32>
  %d = braid.all_reduce sum %f on @dp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = braid.add %x, %d : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return %s, %h : tensor<1x8x16xf32>, tensor<1x8x16xf32>
}
