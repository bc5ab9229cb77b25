// RUN: braid-opt %s --braid-narrow-gathers --split-input-file | FileCheck %s

braid.device_group @tp size 2

braid.device_group @one size 1

// Slices of an all_gather gather only what they keep: row 7 of 8 is row 3
// of rank 1's piece of 4; rows 1-2 lie in rank 0's. Both narrow gathers
// together move 3 of each rank's 4 rows.
// CHECK-LABEL: func.func @slices_in_one_piece
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x8xf32>
// CHECK-NEXT: %[[L:.*]] = braid.slice %[[X]] offsets [0, 3, 0] sizes [1, 1, 8] : tensor<1x4x8xf32> -> tensor<1x1x8xf32>
// CHECK-NEXT: %[[LG:.*]] = braid.all_gather %[[L]] on @tp dim 1 : tensor<1x1x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[LAST:.*]] = braid.slice %[[LG]] offsets [0, 1, 0] sizes [1, 1, 8] : tensor<1x2x8xf32> -> tensor<1x1x8xf32>
// CHECK-NEXT: %[[F:.*]] = braid.slice %[[X]] offsets [0, 1, 0] sizes [1, 2, 8] : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[FG:.*]] = braid.all_gather %[[F]] on @tp dim 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[FIRST:.*]] = braid.slice %[[FG]] offsets [0, 0, 0] sizes [1, 2, 8] : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: return %[[LAST]], %[[FIRST]]
func.func @slices_in_one_piece(%x: tensor<1x4x8xf32>) -> (tensor<1x1x8xf32>, tensor<1x2x8xf32>) {
  %g = braid.all_gather %x on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  %last = braid.slice %g offsets [0, 7, 0] sizes [1, 1, 8] : tensor<1x8x8xf32> -> tensor<1x1x8xf32>
  %first = braid.slice %g offsets [0, 1, 0] sizes [1, 2, 8] : tensor<1x8x8xf32> -> tensor<1x2x8xf32>
  return %last, %first : tensor<1x1x8xf32>, tensor<1x2x8xf32>
}

// Along another dim (a vocabulary gathered along dim 2): columns 9-10 are
// columns 1-2 of rank 1's piece of 8.
// CHECK-LABEL: func.func @another_dim
// CHECK-NEXT: %[[C:.*]] = braid.slice %arg0 offsets [0, 0, 1] sizes [1, 1, 2] : tensor<1x1x8xf32> -> tensor<1x1x2xf32>
// CHECK-NEXT: %[[G:.*]] = braid.all_gather %[[C]] on @tp dim 2 : tensor<1x1x2xf32> -> tensor<1x1x4xf32>
// CHECK-NEXT: %[[R:.*]] = braid.slice %[[G]] offsets [0, 0, 2] sizes [1, 1, 2]
// CHECK-NEXT: return %[[R]]
func.func @another_dim(%x: tensor<1x1x8xf32>) -> tensor<1x1x2xf32> {
  %g = braid.all_gather %x on @tp dim 2 : tensor<1x1x8xf32> -> tensor<1x1x16xf32>
  %s = braid.slice %g offsets [0, 0, 9] sizes [1, 1, 2] : tensor<1x1x16xf32> -> tensor<1x1x2xf32>
  return %s : tensor<1x1x2xf32>
}

// A gather nothing reads gathers nothing: it goes (every rank of an SPMD
// function skips it alike).
// CHECK-LABEL: func.func @unread
// CHECK-NEXT: return %arg0
func.func @unread(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %g = braid.all_gather %x on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  return %x : tensor<1x4x8xf32>
}

// Left alone where the whole gather stays for another reader (narrow
// gathers beside it would only add collectives), where the slices
// together keep a whole piece, for an empty piece, and for a group of one.
// CHECK-LABEL: func.func @whole_gather_stays
// CHECK-NEXT: %[[G:.*]] = braid.all_gather %arg0 on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
// CHECK-NEXT: braid.slice %[[G]] offsets [0, 7, 0]
// CHECK-NEXT: braid.slice %[[G]] offsets [0, 3, 0] sizes [1, 2, 8]
// CHECK-NEXT: braid.matmul %[[G]]
// CHECK-NEXT: %[[G2:.*]] = braid.all_gather %arg0 on @tp dim 1
// CHECK-NEXT: braid.slice %[[G2]] offsets [0, 0, 0] sizes [1, 2, 8]
// CHECK-NEXT: braid.slice %[[G2]] offsets [0, 2, 0] sizes [1, 2, 8]
// CHECK-NEXT: %[[E:.*]] = braid.all_gather %arg2 on @tp dim 1 : tensor<1x0x8xf32> -> tensor<1x0x8xf32>
// CHECK-NEXT: braid.slice %[[E]]
// CHECK-NEXT: %[[O:.*]] = braid.all_gather %arg0 on @one dim 1 : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: braid.slice %[[O]] offsets [0, 3, 0]
func.func @whole_gather_stays(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>, %z: tensor<1x0x8xf32>) -> (tensor<1x1x8xf32>, tensor<1x2x8xf32>, tensor<1x8x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x0x4xf32>, tensor<1x1x8xf32>) {
  %g = braid.all_gather %x on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  %last = braid.slice %g offsets [0, 7, 0] sizes [1, 1, 8] : tensor<1x8x8xf32> -> tensor<1x1x8xf32>
  %mid = braid.slice %g offsets [0, 3, 0] sizes [1, 2, 8] : tensor<1x8x8xf32> -> tensor<1x2x8xf32>
  %m = braid.matmul %g, %w : (tensor<1x8x8xf32>, tensor<8x8xf32>) -> tensor<1x8x8xf32>
  %g2 = braid.all_gather %x on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  %a = braid.slice %g2 offsets [0, 0, 0] sizes [1, 2, 8] : tensor<1x8x8xf32> -> tensor<1x2x8xf32>
  %b = braid.slice %g2 offsets [0, 2, 0] sizes [1, 2, 8] : tensor<1x8x8xf32> -> tensor<1x2x8xf32>
  %e = braid.all_gather %z on @tp dim 1 : tensor<1x0x8xf32> -> tensor<1x0x8xf32>
  %es = braid.slice %e offsets [0, 0, 0] sizes [1, 0, 4] : tensor<1x0x8xf32> -> tensor<1x0x4xf32>
  %o = braid.all_gather %x on @one dim 1 : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
  %os = braid.slice %o offsets [0, 3, 0] sizes [1, 1, 8] : tensor<1x4x8xf32> -> tensor<1x1x8xf32>
  return %last, %mid, %m, %a, %b, %es, %os : tensor<1x1x8xf32>, tensor<1x2x8xf32>, tensor<1x8x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x0x4xf32>, tensor<1x1x8xf32>
}

// Sequence parallelism's pad rows (7 tokens padded to 8): the slice that
// drops them spans both pieces, and the last-token slice of it (token 6,
// row 2 of rank 1's piece) is read through it; the pad slice goes.
// CHECK-LABEL: func.func @through_the_pad_slice
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x8xf32>)
// CHECK-NEXT: %[[L:.*]] = braid.slice %[[X]] offsets [0, 2, 0] sizes [1, 1, 8]
// CHECK-NEXT: %[[LG:.*]] = braid.all_gather %[[L]] on @tp dim 1 : tensor<1x1x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[LAST:.*]] = braid.slice %[[LG]] offsets [0, 1, 0] sizes [1, 1, 8]
// CHECK-NEXT: return %[[LAST]]
func.func @through_the_pad_slice(%x: tensor<1x4x8xf32>) -> tensor<1x1x8xf32> {
  %g = braid.all_gather %x on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  %real = braid.slice %g offsets [0, 0, 0] sizes [1, 7, 8] : tensor<1x8x8xf32> -> tensor<1x7x8xf32>
  %last = braid.slice %real offsets [0, 6, 0] sizes [1, 1, 8] : tensor<1x7x8xf32> -> tensor<1x1x8xf32>
  return %last : tensor<1x1x8xf32>
}

// Pieces along the batch (a decode step sharded by sequence): a slice of
// every sequence slices each piece and gathers them, nothing after.
// CHECK-LABEL: func.func @all_of_the_gathered_dim
// CHECK-NEXT: %[[L:.*]] = braid.slice %arg0 offsets [0, 0, 2] sizes [2, 1, 4] : tensor<2x1x8xf32> -> tensor<2x1x4xf32>
// CHECK-NEXT: %[[G:.*]] = braid.all_gather %[[L]] on @tp dim 0 : tensor<2x1x4xf32> -> tensor<4x1x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @all_of_the_gathered_dim(%x: tensor<2x1x8xf32>) -> tensor<4x1x4xf32> {
  %g = braid.all_gather %x on @tp dim 0 : tensor<2x1x8xf32> -> tensor<4x1x8xf32>
  %s = braid.slice %g offsets [0, 0, 2] sizes [4, 1, 4] : tensor<4x1x8xf32> -> tensor<4x1x4xf32>
  return %s : tensor<4x1x4xf32>
}

// Left alone: a slice that keeps a whole piece (nothing saved), and a
// scheduled gather (braid-schedule has made it asynchronous).
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT: %[[G:.*]] = braid.all_gather %arg0 on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
// CHECK-NEXT: braid.slice %[[G]] offsets [0, 4, 0] sizes [1, 4, 8]
// CHECK-NEXT: %[[H:.*]] = braid.all_gather_start %arg0
// CHECK-NEXT: %[[W:.*]] = braid.wait %[[H]]
// CHECK-NEXT: braid.slice %[[W]] offsets [0, 7, 0] sizes [1, 1, 8]
func.func @left_alone(%x: tensor<1x4x8xf32>) -> (tensor<1x4x8xf32>, tensor<1x1x8xf32>) {
  %g = braid.all_gather %x on @tp dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
  %piece = braid.slice %g offsets [0, 4, 0] sizes [1, 4, 8] : tensor<1x8x8xf32> -> tensor<1x4x8xf32>
  %h = braid.all_gather_start %x on @tp dim 1 : tensor<1x4x8xf32> -> !braid.handle<tensor<1x8x8xf32>>
  %w = braid.wait %h : !braid.handle<tensor<1x8x8xf32>> -> tensor<1x8x8xf32>
  %last = braid.slice %w offsets [0, 7, 0] sizes [1, 1, 8] : tensor<1x8x8xf32> -> tensor<1x1x8xf32>
  return %piece, %last : tensor<1x4x8xf32>, tensor<1x1x8xf32>
}
