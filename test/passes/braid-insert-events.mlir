// RUN: braid-opt %s --braid-insert-events -split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-insert-events --braid-verify-schedule -split-input-file -o /dev/null
// RUN: braid-opt %s --braid-insert-events --braid-plan-memory --braid-insert-events --braid-verify-schedule -split-input-file -o /dev/null
// RUN: braid-opt %s --braid-insert-events --braid-plan-memory --braid-insert-events=replace=true --braid-verify-schedule -split-input-file | FileCheck %s --check-prefix=REPLACE

// A tp 2 MLP block on two streams: compute on 0, the all_reduce on 1. The
// start reads a value made on stream 0: one event. The wait on stream 0
// already orders the add after the collective, and the all_gather of %s
// (made before %b on stream 0) is covered by the first event: no more.
// CHECK-LABEL: func.func @mlp
// CHECK: braid.silu
// CHECK-NEXT: %[[B:.*]] = braid.matmul %{{.*}}, %{{.*}} {braid.stream = 0 : i64, transpose_b}
// CHECK-NEXT: %[[E:.*]] = braid.event_record {braid.stream = 0 : i64}
// CHECK-NEXT: braid.event_wait %[[E]] {braid.stream = 1 : i64}
// CHECK-NEXT: %[[H:.*]] = braid.all_reduce_start sum %[[B]] on @tp {braid.stream = 1 : i64}
// CHECK-NEXT: %[[H2:.*]] = braid.all_gather_start
// CHECK-NEXT: %[[R:.*]] = braid.wait %[[H]] {braid.stream = 0 : i64}
// CHECK-NEXT: braid.wait %[[H2]] {braid.stream = 0 : i64}
// CHECK-NEXT: braid.add %[[R]]
// CHECK-NOT: braid.event
// CHECK: return
braid.device_group @tp size 2
func.func @mlp(%x: tensor<4x8xf32> {braid.input = "x"}) -> (tensor<4x8xf32> {braid.output = "y"}, tensor<4x8xf32> {braid.output = "g"}) {
  %w1 = braid.parameter "w1" full [8, 8] shard_dim 0 on @tp : tensor<4x8xf32>
  %w2 = braid.parameter "w2" full [8, 8] shard_dim 1 on @tp : tensor<8x4xf32>
  %a = braid.matmul %x, %w1 {transpose_b, braid.stream = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  %s = braid.silu %a {braid.stream = 0 : i64} : tensor<4x4xf32>
  %b = braid.matmul %s, %w2 {transpose_b, braid.stream = 0 : i64} : (tensor<4x4xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  %h = braid.all_reduce_start sum %b on @tp {braid.stream = 1 : i64} : tensor<4x8xf32> -> !braid.handle<tensor<4x8xf32>>
  %h2 = braid.all_gather_start %s on @tp dim 1 {braid.stream = 1 : i64} : tensor<4x4xf32> -> !braid.handle<tensor<4x8xf32>>
  %r = braid.wait %h {braid.stream = 0 : i64} : !braid.handle<tensor<4x8xf32>> -> tensor<4x8xf32>
  %g = braid.wait %h2 {braid.stream = 0 : i64} : !braid.handle<tensor<4x8xf32>> -> tensor<4x8xf32>
  %y = braid.add %r, %x {braid.stream = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %g : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Three streams feed one op: the latest producer per stream, minus what
// another one already orders. %c on stream 2 waited for stream 1 after %b,
// so waiting for %c covers %b too: one event from stream 2, one from 0.
// CHECK-LABEL: func.func @reduction
// CHECK: %[[A:.*]] = braid.silu %{{.*}} {braid.stream = 0 : i64}
// CHECK-NEXT: %[[EA:.*]] = braid.event_record {braid.stream = 0 : i64}
// CHECK: %[[B:.*]] = braid.silu %{{.*}} {braid.stream = 1 : i64}
// CHECK-NEXT: %[[EB:.*]] = braid.event_record {braid.stream = 1 : i64}
// CHECK-NEXT: braid.event_wait %[[EB]] {braid.stream = 2 : i64}
// CHECK-NEXT: %[[C:.*]] = braid.gelu none %[[B]] {braid.stream = 2 : i64}
// CHECK-NEXT: %[[EC:.*]] = braid.event_record {braid.stream = 2 : i64}
// CHECK-NEXT: braid.event_wait %[[EC]] {braid.stream = 0 : i64}
// CHECK-NEXT: braid.concat %[[A]], %[[B]], %[[C]]
// CHECK: braid.event_wait %[[EA]] {braid.stream = 3 : i64}
// CHECK-NEXT: braid.silu %[[A]] {braid.stream = 3 : i64}
func.func @reduction(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<12xf32> {braid.output = "y"}, tensor<4xf32> {braid.output = "z"}) {
  %a = braid.silu %x {braid.stream = 0 : i64} : tensor<4xf32>
  %b = braid.silu %x {braid.stream = 1 : i64} : tensor<4xf32>
  %c = braid.gelu none %b {braid.stream = 2 : i64} : tensor<4xf32>
  %y = braid.concat %a, %b, %c dim 0 {braid.stream = 0 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<12xf32>
  %z = braid.silu %a {braid.stream = 3 : i64} : tensor<4xf32>
  return %y, %z : tensor<12xf32>, tensor<4xf32>
}

// -----

// Collectives of two communicators (group @tp on streams 0 and 1) are
// ordered even without a data dependency.
// CHECK-LABEL: func.func @two_communicators
// CHECK: braid.all_reduce sum %{{.*}} on @tp {braid.stream = 0 : i64}
// CHECK-NEXT: %[[E:.*]] = braid.event_record {braid.stream = 0 : i64}
// CHECK-NEXT: braid.event_wait %[[E]] {braid.stream = 1 : i64}
// CHECK-NEXT: braid.all_reduce sum %{{.*}} on @tp {braid.stream = 1 : i64}
braid.device_group @tp size 2
func.func @two_communicators(%x: tensor<4xf32> {braid.input = "x"}, %y: tensor<4xf32> {braid.input = "y"}) -> (tensor<4xf32> {braid.output = "a"}, tensor<4xf32> {braid.output = "b"}) {
  %a = braid.all_reduce sum %x on @tp {braid.stream = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
  %b = braid.all_reduce sum %y on @tp {braid.stream = 1 : i64} : tensor<4xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// Unscheduled functions are left alone.
// CHECK-LABEL: func.func @serial
// CHECK-NOT: braid.event
func.func @serial(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  %a = braid.silu %x : tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Views: two slices of one matmul feed two collectives on stream 1.
// Before memory is planned each slice writes its own bytes, so each start
// waits for its slice (two events). Planned, the slices are views of the
// matmul's bytes: with `replace` the events are made again from the plan,
// and one event after the matmul orders both starts.
// CHECK-LABEL: func.func @views
// CHECK: braid.event_wait
// CHECK: braid.event_wait
// REPLACE-LABEL: func.func @views
// REPLACE: braid.matmul
// REPLACE-NEXT: %[[E:.*]] = braid.event_record {braid.stream = 0 : i64}
// REPLACE: braid.event_wait %[[E]] {braid.stream = 1 : i64}
// REPLACE-NOT: braid.event_wait
// REPLACE: return
braid.device_group @tp size 2
func.func @views(%x: tensor<1x4x16xf32> {braid.input = "x"}) -> (tensor<1x4x16xf32> {braid.output = "y"}) {
  %w = braid.parameter "w" full [16, 16] : tensor<16x16xf32>
  %m = braid.matmul %x, %w {transpose_b, braid.stream = 0 : i64} : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
  %a = braid.slice %m offsets [0, 0, 0] sizes [1, 2, 16] {braid.stream = 0 : i64} : tensor<1x4x16xf32> -> tensor<1x2x16xf32>
  %ha = braid.all_gather_start %a on @tp dim 1 {braid.stream = 1 : i64} : tensor<1x2x16xf32> -> !braid.handle<tensor<1x4x16xf32>>
  %b = braid.slice %m offsets [0, 2, 0] sizes [1, 2, 16] {braid.stream = 0 : i64} : tensor<1x4x16xf32> -> tensor<1x2x16xf32>
  %hb = braid.all_gather_start %b on @tp dim 1 {braid.stream = 1 : i64} : tensor<1x2x16xf32> -> !braid.handle<tensor<1x4x16xf32>>
  %s = braid.silu %x {braid.stream = 0 : i64} : tensor<1x4x16xf32>
  %ga = braid.wait %ha {braid.stream = 0 : i64} : !braid.handle<tensor<1x4x16xf32>> -> tensor<1x4x16xf32>
  %gb = braid.wait %hb {braid.stream = 0 : i64} : !braid.handle<tensor<1x4x16xf32>> -> tensor<1x4x16xf32>
  %t = braid.add %ga, %gb {braid.stream = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %y = braid.add %t, %s {braid.stream = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return %y : tensor<1x4x16xf32>
}

// -----

// A point-to-point group (adjacent sends and receives on one stream and
// group, issued together: runtime/P2PGroups.h) whose third send reads a
// value stream 1 makes: the wait goes before the group's first member, not
// between members (in the plan an event there would split the group, and
// the exchange would deadlock); the received value stream 1 reads is
// recorded after the group's last member.
// CHECK-LABEL: func.func @p2p_group
// CHECK: %[[W:.*]] = braid.mul {{.*}}braid.stream = 1
// CHECK-NEXT: %[[E:.*]] = braid.event_record {braid.stream = 1 : i64}
// CHECK-NEXT: braid.event_wait %[[E]] {braid.stream = 0 : i64}
// CHECK-NEXT: braid.send %{{.*}} to 0
// CHECK-NEXT: braid.send %{{.*}} to 1
// CHECK-NEXT: braid.send %[[W]] to 0
// CHECK-NEXT: braid.send %[[W]] to 1
// CHECK-NEXT: braid.recv from 0
// CHECK-NEXT: %[[B:.*]] = braid.recv from 1
// CHECK-NEXT: %[[F:.*]] = braid.event_record {braid.stream = 0 : i64}
// CHECK-NEXT: braid.event_wait %[[F]] {braid.stream = 1 : i64}
// CHECK-NEXT: braid.silu %[[B]] {braid.stream = 1 : i64}
braid.device_group @tp size 2
func.func @p2p_group(%x: tensor<2x8xf32> {braid.input = "x"}) -> (tensor<2x8xf32> {braid.output = "y"}) {
  %v = braid.silu %x {braid.stream = 0 : i64} : tensor<2x8xf32>
  %w = braid.mul %x, %x {braid.stream = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  braid.send %v to 0 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  braid.send %v to 1 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  braid.send %w to 0 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  braid.send %w to 1 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  %a = braid.recv from 0 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  %b = braid.recv from 1 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  %s = braid.silu %b {braid.stream = 1 : i64} : tensor<2x8xf32>
  %y = braid.add %a, %s {braid.stream = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
