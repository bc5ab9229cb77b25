// RUN: braid-opt %s --braid-assign-streams --split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-schedule --braid-assign-streams --braid-insert-events --braid-plan-memory --braid-verify-schedule --split-input-file | FileCheck %s --check-prefix=PIPE

// Async starts on their group's stream (1 + the group's index), waits and
// compute on stream 0; a synchronous collective of the function becomes a
// start and its wait, so the group keeps one communicator.
// CHECK-LABEL: func.func @streams
// CHECK: braid.matmul {{.*}}braid.stream = 0 : i64
// CHECK: braid.all_reduce_start sum %{{.*}} on @tp {braid.stream = 2 : i64}
// CHECK: braid.silu {{.*}}braid.stream = 0 : i64
// CHECK: braid.wait {{.*}}braid.stream = 0 : i64
// CHECK: braid.all_gather_start %{{.*}} on @dp dim 0 {braid.stream = 1 : i64}
// CHECK-NEXT: braid.wait {{.*}}braid.stream = 0 : i64
// After braid-insert-events the start waits for its operand's producer.
// PIPE-LABEL: func.func @streams
// PIPE: braid.matmul
// PIPE-NEXT: %[[E:.*]] = braid.event_record {braid.stream = 0 : i64}
// PIPE-NEXT: braid.event_wait %[[E]] {braid.stream = 2 : i64}
// PIPE-NEXT: braid.all_reduce_start
braid.device_group @dp size 2
braid.device_group @tp size 2
func.func @streams(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<32x64xf32>) {
  %a = braid.matmul %x, %w : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
  %h = braid.all_reduce_start sum %a on @tp : tensor<16x64xf32> -> !braid.handle<tensor<16x64xf32>>
  %s = braid.silu %x : tensor<16x64xf32>
  %r = braid.wait %h : !braid.handle<tensor<16x64xf32>> -> tensor<16x64xf32>
  %g = braid.all_gather %r on @dp dim 0 : tensor<16x64xf32> -> tensor<32x64xf32>
  return %r, %s, %g : tensor<16x64xf32>, tensor<16x64xf32>, tensor<32x64xf32>
}

// -----

// No async collective: nothing to overlap, the function stays on one
// stream (no braid.stream at all).
// CHECK-LABEL: func.func @sync_only
// CHECK-NOT: braid.stream
// PIPE-LABEL: func.func @sync_only
// PIPE-NOT: braid.stream
braid.device_group @tp size 2
func.func @sync_only(%x: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %ar = braid.all_reduce sum %x on @tp : tensor<16x64xf32> -> tensor<16x64xf32>
  %s = braid.silu %ar : tensor<16x64xf32>
  return %s : tensor<16x64xf32>
}
