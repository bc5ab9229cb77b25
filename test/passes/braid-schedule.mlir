// RUN: braid-opt %s --braid-schedule --split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-schedule="report=true" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: braid-opt %s --braid-schedule="max-extra-live-bytes=0" --split-input-file | FileCheck %s --check-prefix=TIGHT
// RUN: braid-opt %s --braid-schedule="min-hidden-us=0" --split-input-file | FileCheck %s --check-prefix=ANY
// Any other negative, NaN or infinity used to mean the default silently.
// RUN: not braid-opt %s --braid-schedule="max-extra-live-bytes=-7" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-LIVE
// RUN: not braid-opt %s --braid-schedule="min-hidden-us=nan" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-HIDDEN
// RUN: not braid-opt %s --braid-schedule="min-hidden-us=-5" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-HIDDEN
// RUN: not braid-opt %s --braid-schedule="min-hidden-us=inf" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-HIDDEN
// BAD-LIVE: braid-schedule: max-extra-live-bytes must be a byte count, 0 or more (-1: a tenth of the target GPU's memory), got -7
// BAD-HIDDEN: braid-schedule: min-hidden-us must be a time in us, 0 or more (-1: two graph launches of the target), got

// A parallel attention/MLP block (GPT-NeoX): the first all_reduce starts as
// soon as its operand exists, the MLP runs while it flies, its wait comes
// only when nothing else is ready. The second could hide only the silu
// (one kernel: less than the two graph launches an async pair costs), so it
// stays synchronous, still after the first start (collective order); with
// min-hidden-us=0 it starts early too.
// CHECK-LABEL: func.func @parallel_block
// CHECK: %[[A:.*]] = braid.matmul %arg0, %arg1
// CHECK-NEXT: %[[HA:.*]] = braid.all_reduce_start sum %[[A]] on @tp
// CHECK-NEXT: %[[M:.*]] = braid.matmul %arg0, %arg2
// CHECK-NEXT: %[[G:.*]] = braid.gelu tanh %[[M]]
// CHECK-NEXT: %[[RM:.*]] = braid.all_reduce sum %[[G]] on @tp
// CHECK-NEXT: %[[RA:.*]] = braid.wait %[[HA]]
// CHECK-NEXT: %[[S:.*]] = braid.silu %[[RA]]
// CHECK-NEXT: braid.add %[[S]], %[[RM]]
// ANY-LABEL: func.func @parallel_block
// ANY: braid.gelu
// ANY-NEXT: %[[HM:.*]] = braid.all_reduce_start sum %{{.*}} on @tp
// ANY-NEXT: braid.wait
// ANY-NEXT: braid.silu
// ANY-NEXT: braid.wait %[[HM]]
// REPORT: remark: braid-schedule: 1 of 2 collectives async, 0 extra bytes live at the peak (bound 8589934592)
braid.device_group @tp size 2
func.func @parallel_block(%x: tensor<16x64xf32>, %w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> tensor<16x64xf32> {
  %a = braid.matmul %x, %w1 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<16x64xf32> -> tensor<16x64xf32>
  %ab = braid.silu %ar : tensor<16x64xf32>
  %m = braid.matmul %x, %w2 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %mg = braid.gelu tanh %m : tensor<16x64xf32>
  %mr = braid.all_reduce sum %mg on @tp : tensor<16x64xf32> -> tensor<16x64xf32>
  %y = braid.add %ab, %mr : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// A plain tensor-parallel layer: each all_reduce feeds the very next op, so
// nothing can hide it and the function stays as it was.
// CHECK-LABEL: func.func @plain_layer
// CHECK: braid.all_reduce sum
// CHECK-NOT: _start
// CHECK: braid.all_reduce sum
// REPORT: remark: braid-schedule: 0 of 2 collectives async
braid.device_group @tp size 2
func.func @plain_layer(%x: tensor<16x64xf32>, %w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> tensor<16x64xf32> {
  %a = braid.matmul %x, %w1 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<16x64xf32> -> tensor<16x64xf32>
  %h = braid.add %ar, %x : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %m = braid.matmul %h, %w2 : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %mr = braid.all_reduce sum %m on @tp : tensor<16x64xf32> -> tensor<16x64xf32>
  %y = braid.add %mr, %h : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// Collectives of one communicator keep their order: %b's operand is ready
// first, but its start waits for %a's, which comes first in the program.
// CHECK-LABEL: func.func @same_group_order
// CHECK: %[[B:.*]] = braid.silu %arg1
// CHECK: %[[A:.*]] = braid.matmul
// CHECK-NEXT: braid.all_reduce_start sum %[[A]]
// CHECK: braid.all_gather_start %[[B]]
braid.device_group @tp size 2
func.func @same_group_order(%x: tensor<16x64xf32>, %y: tensor<16x64xf32>, %w: tensor<64x64xf32>) -> (tensor<16x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) {
  %b = braid.silu %y : tensor<16x64xf32>
  %a = braid.matmul %x, %w : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<16x64xf32> -> tensor<16x64xf32>
  %bg = braid.all_gather %b on @tp dim 0 : tensor<16x64xf32> -> tensor<32x64xf32>
  %c = braid.gelu tanh %x : tensor<16x64xf32>
  %d = braid.silu %c : tensor<16x64xf32>
  return %ar, %bg, %d : tensor<16x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>
}

// -----

// The memory bound: starting the all_reduce early keeps its 256 KiB operand
// live beside the small silus (4 KiB more at the peak). The default bound
// allows it; a bound of 0 keeps the all_reduce synchronous.
// CHECK-LABEL: func.func @memory
// CHECK: braid.all_reduce_start
// REPORT: remark: braid-schedule: 1 of 1 collectives async, 4096 extra bytes live at the peak
// TIGHT-LABEL: func.func @memory
// TIGHT: braid.all_reduce sum
// TIGHT-NOT: _start
braid.device_group @tp size 2
func.func @memory(%x: tensor<256x8xf32>, %w: tensor<8x256xf32>, %v: tensor<4x256xf32>) -> (tensor<256x256xf32>, tensor<4x256xf32>) {
  %a = braid.matmul %x, %w : (tensor<256x8xf32>, tensor<8x256xf32>) -> tensor<256x256xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<256x256xf32> -> tensor<256x256xf32>
  %s = braid.silu %v : tensor<4x256xf32>
  %t = braid.silu %s : tensor<4x256xf32>
  %y = braid.silu %ar : tensor<256x256xf32>
  return %y, %t : tensor<256x256xf32>, tensor<4x256xf32>
}

// -----

// Already scheduled (streams): left alone.
// CHECK-LABEL: func.func @scheduled
// CHECK: braid.all_reduce sum %{{.*}} on @tp {braid.stream = 0 : i64}
// CHECK-NOT: _start
braid.device_group @tp size 2
func.func @scheduled(%x: tensor<16x64xf32>, %y: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>) {
  %ar = braid.all_reduce sum %x on @tp {braid.stream = 0 : i64} : tensor<16x64xf32> -> tensor<16x64xf32>
  %s = braid.silu %y {braid.stream = 0 : i64} : tensor<16x64xf32>
  return %ar, %s : tensor<16x64xf32>, tensor<16x64xf32>
}
