// RUN: braid-opt %s --braid-decompose="chunks=1,2,4 report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: braid-opt %s --braid-decompose="chunks=4 order=skewed" | grep -o -E "braid\.(reduce_scatter|all_gather) " | FileCheck %s --check-prefix=SKEW
// RUN: braid-opt %s --braid-decompose="chunks=4 order=side-by-side" | grep -o -E "braid\.(reduce_scatter|all_gather) " | FileCheck %s --check-prefix=SIDE
// RUN: braid-opt %s --braid-decompose="chunks=4" --braid-schedule --braid-assign-streams --braid-insert-events --braid-verify-schedule -o /dev/null

// Two MLP layers under sequence parallelism at Llama-3-70B tp 8 widths:
// each layer's reduce_scatter feeds a norm and an all_gather, with almost
// no compute between the two collectives. Collectives keep their program
// order on their stream, so side by side (the 4 chunks' copies of each
// collective together) chunk 0's all_gather queues behind every chunk's
// reduce_scatter, the last of which waits for the last chunk's down
// projection: the pair is exposed in every layer. Skewed, chunk c runs
// one collective behind chunk c-1 and the chunks' collectives interleave.
// The cost model prices both orders and picks the skewed one at 4 chunks.
// The output is gathered back: a value each chunk split over the ranks
// holds other tokens than the whole function's (braid-decompose refuses
// to return one).
// REPORT: remark: braid-decompose: 4 chunks, skewed (estimated k=1: [[K1:[0-9.]+]] ms; k=2: {{[0-9.]+}} ms; k=2 skewed: {{[0-9.]+}} ms; k=4: [[SIDE4:[0-9.]+]] ms; k=4 skewed: [[SKEW4:[0-9.]+]] ms;)
//
// Side by side: the input's 4 reduce_scatters, layer 0's 4 all_gathers
// and 4 reduce_scatters, layer 1's.
// SIDE-COUNT-4: braid.reduce_scatter
// SIDE-NEXT: braid.all_gather
// SIDE-NEXT: braid.all_gather
// SIDE-NEXT: braid.all_gather
// SIDE-NEXT: braid.all_gather
// SIDE-NEXT: braid.reduce_scatter
// SIDE-NEXT: braid.reduce_scatter
// SIDE-NEXT: braid.reduce_scatter
// SIDE-NEXT: braid.reduce_scatter
// SIDE-NEXT: braid.all_gather
//
// Skewed, the chunks' collectives alternate: chunk 0's input
// reduce_scatter and its all_gather, chunk 1's input reduce_scatter,
// chunk 0's down projection's reduce_scatter, chunk 1's all_gather, chunk
// 2's input reduce_scatter, chunk 0's second all_gather, ...
// SKEW: braid.reduce_scatter
// SKEW-NEXT: braid.all_gather
// SKEW-NEXT: braid.reduce_scatter
// SKEW-NEXT: braid.reduce_scatter
// SKEW-NEXT: braid.all_gather
// SKEW-NEXT: braid.reduce_scatter
// SKEW-NEXT: braid.all_gather
// SKEW-NEXT: braid.reduce_scatter
// SKEW-NEXT: braid.all_gather
// SKEW-NEXT: braid.reduce_scatter
braid.device_group @tp size 8
func.func @sequence_parallel(%x: tensor<1x4096x8192xbf16> {braid.input = "x"}) -> (tensor<1x4096x8192xbf16> {braid.output = "y"}) {
  %g = braid.parameter "g" full [8192] : tensor<8192xbf16>
  %up = braid.parameter "up" full [28672, 8192] shard_dim 0 on @tp : tensor<3584x8192xbf16>
  %down = braid.parameter "down" full [8192, 28672] shard_dim 1 on @tp : tensor<8192x3584xbf16>
  %h0 = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x4096x8192xbf16> -> tensor<1x512x8192xbf16>
  %n0 = braid.rms_norm %h0, %g {epsilon = 1.0e-05 : f64} : (tensor<1x512x8192xbf16>, tensor<8192xbf16>) -> tensor<1x512x8192xbf16>
  %a0 = braid.all_gather %n0 on @tp dim 1 : tensor<1x512x8192xbf16> -> tensor<1x4096x8192xbf16>
  %u0 = braid.matmul %a0, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d0 = braid.matmul %u0, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r0 = braid.reduce_scatter sum %d0 on @tp dim 1 : tensor<1x4096x8192xbf16> -> tensor<1x512x8192xbf16>
  %h1 = braid.add %r0, %h0 : (tensor<1x512x8192xbf16>, tensor<1x512x8192xbf16>) -> tensor<1x512x8192xbf16>
  %n1 = braid.rms_norm %h1, %g {epsilon = 1.0e-05 : f64} : (tensor<1x512x8192xbf16>, tensor<8192xbf16>) -> tensor<1x512x8192xbf16>
  %a1 = braid.all_gather %n1 on @tp dim 1 : tensor<1x512x8192xbf16> -> tensor<1x4096x8192xbf16>
  %u1 = braid.matmul %a1, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d1 = braid.matmul %u1, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r1 = braid.reduce_scatter sum %d1 on @tp dim 1 : tensor<1x4096x8192xbf16> -> tensor<1x512x8192xbf16>
  %h2 = braid.add %r1, %h1 : (tensor<1x512x8192xbf16>, tensor<1x512x8192xbf16>) -> tensor<1x512x8192xbf16>
  %y = braid.all_gather %h2 on @tp dim 1 : tensor<1x512x8192xbf16> -> tensor<1x4096x8192xbf16>
  return %y : tensor<1x4096x8192xbf16>
}
