// RUN: braid-opt %s --cse --canonicalize | FileCheck %s

// Collectives, waits and event ops have memory effects (communication and
// stream-order resources): CSE may not merge two identical all_reduces or
// event records, and canonicalization may not drop a collective whose
// result is unused (every rank must still issue it) or an event pair.
// CHECK-LABEL: func.func @kept
// CHECK: braid.all_reduce sum %{{.*}} on @tp
// CHECK-NEXT: braid.all_reduce sum %{{.*}} on @tp
// CHECK-NEXT: braid.all_gather %{{.*}} on @tp dim 0
// CHECK-NEXT: braid.all_reduce_start
// CHECK-NEXT: braid.wait
// CHECK-NEXT: %[[E1:.*]] = braid.event_record {braid.stream = 0 : i64}
// CHECK-NEXT: %[[E2:.*]] = braid.event_record {braid.stream = 0 : i64}
// CHECK-NEXT: braid.event_wait %[[E1]] {braid.stream = 1 : i64}
// CHECK-NEXT: braid.event_wait %[[E2]] {braid.stream = 1 : i64}
braid.device_group @tp size 2
func.func @kept(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = braid.all_reduce sum %x on @tp {braid.stream = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
  %b = braid.all_reduce sum %x on @tp {braid.stream = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
  %unused = braid.all_gather %x on @tp dim 0 {braid.stream = 0 : i64} : tensor<4xf32> -> tensor<8xf32>
  %h = braid.all_reduce_start sum %x on @tp {braid.stream = 0 : i64} : tensor<4xf32> -> !braid.handle<tensor<4xf32>>
  %w = braid.wait %h {braid.stream = 0 : i64} : !braid.handle<tensor<4xf32>> -> tensor<4xf32>
  %e1 = braid.event_record {braid.stream = 0 : i64}
  %e2 = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e1 {braid.stream = 1 : i64}
  braid.event_wait %e2 {braid.stream = 1 : i64}
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
