// RUN: braid-opt %s --braid-fuse-collectives --split-input-file | FileCheck %s

braid.device_group @tp size 2
braid.device_group @dp size 2

// GPT-NeoX's parallel residual: both halves reduced, biased, then added.
// CHECK-LABEL: func.func @parallel_block
// CHECK-SAME: (%[[A:.*]]: tensor<1x8x64xf32>, %[[B:.*]]: tensor<1x8x64xf32>, %[[P:.*]]: tensor<64xf32>, %[[Q:.*]]: tensor<64xf32>, %[[X:.*]]: tensor<1x8x64xf32>)
// CHECK-NEXT: %[[AB:.*]] = braid.add %[[A]], %[[B]]
// CHECK-NEXT: %[[R:.*]] = braid.all_reduce sum %[[AB]] on @tp
// CHECK-NEXT: %[[PQ:.*]] = braid.add %[[P]], %[[Q]] : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
// CHECK-NEXT: %[[S:.*]] = braid.add %[[R]], %[[PQ]]
// CHECK-NEXT: %[[Y:.*]] = braid.add %[[S]], %[[X]]
// CHECK-NEXT: return %[[Y]]
func.func @parallel_block(%a: tensor<1x8x64xf32>, %b: tensor<1x8x64xf32>, %p: tensor<64xf32>, %q: tensor<64xf32>, %x: tensor<1x8x64xf32>) -> tensor<1x8x64xf32> {
  %ra = braid.all_reduce sum %a on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
  %xa = braid.add %ra, %p : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
  %xb = braid.add %rb, %q : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  %s = braid.add %xa, %xb : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  %y = braid.add %s, %x : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  return %y : tensor<1x8x64xf32>
}

// Two plain reductions; and one biased, one not.
// CHECK-LABEL: func.func @plain
// CHECK: %[[AB:.*]] = braid.add %arg0, %arg1
// CHECK-NEXT: %[[R:.*]] = braid.all_reduce sum %[[AB]] on @tp
// CHECK-NEXT: return %[[R]]
func.func @plain(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %ra, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @one_biased
// CHECK: %[[AB:.*]] = braid.add %arg0, %arg1
// CHECK-NEXT: %[[R:.*]] = braid.all_reduce sum %[[AB]] on @tp
// CHECK-NEXT: %[[S:.*]] = braid.add %[[R]], %arg2
// CHECK-NEXT: return %[[S]]
func.func @one_biased(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %p: tensor<8xf32>) -> tensor<4x8xf32> {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %xa = braid.add %ra, %p : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %xa, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

braid.device_group @tp size 2
braid.device_group @dp size 2

// Refusals: each leaves both reductions in place.
// CHECK-LABEL: func.func @second_use
// CHECK-COUNT-2: braid.all_reduce
func.func @second_use(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %ra, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %ra : tensor<4x8xf32>, tensor<4x8xf32>
}
// CHECK-LABEL: func.func @other_group
// CHECK-COUNT-2: braid.all_reduce
func.func @other_group(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @dp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %ra, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @max_is_not_a_sum
// CHECK-COUNT-2: braid.all_reduce
func.func @max_is_not_a_sum(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ra = braid.all_reduce max %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %ra, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
// The bias used twice: moving it would change the other use's value.
// CHECK-LABEL: func.func @shared_partial
// CHECK-COUNT-2: braid.all_reduce
func.func @shared_partial(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %p: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %xa = braid.add %ra, %p : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %xa, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %xa : tensor<4x8xf32>, tensor<4x8xf32>
}
// A third collective of any group between the two: folding would move the
// first reduction past it (hang safety: collectives keep their order).
// CHECK-LABEL: func.func @collective_between
// CHECK-COUNT-3: braid.all_reduce
func.func @collective_between(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %rc = braid.all_reduce sum %c on @dp : tensor<4x8xf32> -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %ra, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %rc : tensor<4x8xf32>, tensor<4x8xf32>
}
// A reduction that feeds the other (here through a value used twice) is
// left alone: every matched link must have this add as its only use.
// CHECK-LABEL: func.func @dependent
// CHECK-COUNT-2: braid.all_reduce
func.func @dependent(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %m = braid.mul %ra, %ra : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %m on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = braid.add %rb, %rb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

braid.device_group @tp size 2
braid.device_group @dp size 2

// all_gather(reduce_scatter(x)) along one dim of one group: all_reduce(x).
// CHECK-LABEL: func.func @gather_of_scatter
// CHECK-NEXT: %[[R:.*]] = braid.all_reduce sum %arg0 on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @gather_of_scatter(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = braid.reduce_scatter sum %x on @tp dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %g = braid.all_gather %s on @tp dim 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}
// Refused: the shard read elsewhere (sequence parallelism wants it), another
// dim, another group.
// CHECK-LABEL: func.func @shard_used
// CHECK: braid.reduce_scatter
// CHECK: braid.all_gather
func.func @shard_used(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<2x8xf32>) {
  %s = braid.reduce_scatter sum %x on @tp dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %g = braid.all_gather %s on @tp dim 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  return %g, %s : tensor<4x8xf32>, tensor<2x8xf32>
}
// CHECK-LABEL: func.func @other_dim
// CHECK: braid.reduce_scatter
// CHECK: braid.all_gather
func.func @other_dim(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  %s = braid.reduce_scatter sum %x on @tp dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %g = braid.all_gather %s on @tp dim 1 : tensor<2x8xf32> -> tensor<2x16xf32>
  return %g : tensor<2x16xf32>
}
// CHECK-LABEL: func.func @other_group_gather
// CHECK: braid.reduce_scatter
// CHECK: braid.all_gather
func.func @other_group_gather(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = braid.reduce_scatter sum %x on @tp dim 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %g = braid.all_gather %s on @dp dim 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}
