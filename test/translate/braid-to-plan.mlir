// RUN: braid-translate --braid-to-plan %s -o %t.bplan
// RUN: braid-translate --plan-to-text %t.bplan | FileCheck %s
// RUN: braid-opt %s --braid-plan-memory | braid-translate --braid-to-plan | braid-translate --plan-to-text | FileCheck %s --check-prefix=PLANNED

// Two mesh axes: @tp is innermost (stride 1), @dp strides over it.
// CHECK: plan version 3 world 4
// CHECK-NEXT: group 0 @tp size 2 stride 1
// CHECK-NEXT: group 1 @dp size 2 stride 2
braid.device_group @tp size 2
braid.device_group @dp size 2

// Parameters are deduplicated across functions by name; shard rules,
// blocks and padding carry over.
// CHECK-NEXT: param 0 "embed" bf16 5x8 full 9x8 padded 10x8 shard dim 0 group 0 shards 0 blocks 1
// CHECK-NEXT: param 1 "qkv" bf16 8x12 full 8x24 shard dim 1 group 0 shards 0 blocks 3
// CHECK-NEXT: param 2 "norm" bf16 8 full 8
// CHECK-NEXT: state 0 "k_cache" bf16 1x16x1x4
// CHECK-NEXT: state 1 "v_cache" bf16 1x16x1x4

// Without memory planning buffers are bump-allocated (256-byte aligned);
// views (the first position, a contiguous slice, and its reshape) sit on
// their operand's bytes.
// CHECK-LABEL: func "prefill" arena 4096 streams 1 events 0 handles 1
// CHECK-NEXT: %0 input 0 i32 1x4 at 0 +256
// CHECK-NEXT: %1 input 1 i32 1x4 at 256 +256
// CHECK-NEXT: %2 state 0 bf16 1x16x1x4
// CHECK-NEXT: %3 state 1 bf16 1x16x1x4
// CHECK-NEXT: %4 activation i32 1x1 at 256 +4
// CHECK-NEXT: %5 activation i32 1 at 256 +4
// CHECK-NEXT: %6 param 0 bf16 5x8
// CHECK-NEXT: %7 activation bf16 1x4x8 at 512 +256
// With braid-plan-memory's placement, buffers are reused: the wait's
// payload takes input_ids' place once the embedding has read it.
// PLANNED-LABEL: func "prefill" arena 1280
// PLANNED-NEXT: %0 input 0 i32 1x4 at 0 +256
// PLANNED: %7 activation bf16 1x4x8 at 512 +256
// PLANNED-NEXT: %8 activation bf16 1x4x8 at 0 +256
func.func @prefill(%ids: tensor<1x4xi32> {braid.input = "input_ids"}, %pos: tensor<1x4xi32> {braid.input = "positions"}, %kc: tensor<1x16x1x4xbf16> {braid.state = "k_cache"}, %vc: tensor<1x16x1x4xbf16> {braid.state = "v_cache"}) -> (tensor<1x4x8xbf16> {braid.output = "hidden"}, tensor<1x16x1x4xbf16> {braid.state = "k_cache"}, tensor<1x16x1x4xbf16> {braid.state = "v_cache"}) {
  %p0 = braid.slice %pos offsets [0, 0] sizes [1, 1] : tensor<1x4xi32> -> tensor<1x1xi32>
  %p = braid.reshape %p0 : tensor<1x1xi32> -> tensor<1xi32>
  %e = braid.parameter "embed" full [9, 8] shard_dim 0 on @tp {padded_shape = array<i64: 10, 8>} : tensor<5x8xbf16>
  %x0 = braid.embedding %ids, %e {vocab_group = @tp} : (tensor<1x4xi32>, tensor<5x8xbf16>) -> tensor<1x4x8xbf16>
  // The async pair: the start lists the payload (the wait's tensor) as its
  // result; the wait has only the handle.
  // CHECK: %[[X:[0-9]+]] = all_reduce_start %7 {reduce = sum, group = 0, handle = 0}
  // CHECK-NEXT: wait {handle = 0}
  %h = braid.all_reduce_start sum %x0 on @tp : tensor<1x4x8xbf16> -> !braid.handle<tensor<1x4x8xbf16>>
  %x = braid.wait %h : !braid.handle<tensor<1x4x8xbf16>> -> tensor<1x4x8xbf16>
  %w = braid.parameter "qkv" full [8, 24] shard_dim 1 on @tp {blocks = 3 : i64} : tensor<8x12xbf16>
  // CHECK-NEXT: %[[QKV:[0-9]+]] = matmul %[[X]], %{{[0-9]+}}
  // CHECK-NOT: transpose
  %qkv = braid.matmul %x, %w : (tensor<1x4x8xbf16>, tensor<8x12xbf16>) -> tensor<1x4x12xbf16>
  %q0 = braid.slice %qkv offsets [0, 0, 0] sizes [1, 4, 4] : tensor<1x4x12xbf16> -> tensor<1x4x4xbf16>
  %k0 = braid.slice %qkv offsets [0, 0, 4] sizes [1, 4, 4] : tensor<1x4x12xbf16> -> tensor<1x4x4xbf16>
  %v0 = braid.slice %qkv offsets [0, 0, 8] sizes [1, 4, 4] : tensor<1x4x12xbf16> -> tensor<1x4x4xbf16>
  // CHECK: slice %[[QKV]] {offsets = [0, 0, 8], sizes = [1, 4, 4]}
  %q1 = braid.reshape %q0 : tensor<1x4x4xbf16> -> tensor<1x4x1x4xbf16>
  %k1 = braid.reshape %k0 : tensor<1x4x4xbf16> -> tensor<1x4x1x4xbf16>
  %v = braid.reshape %v0 : tensor<1x4x4xbf16> -> tensor<1x4x1x4xbf16>
  // CHECK: rope %{{[0-9]+}}, %1 {theta = 500000}
  %q = braid.rope %q1, %pos {theta = 500000.0 : f64} : (tensor<1x4x1x4xbf16>, tensor<1x4xi32>) -> tensor<1x4x1x4xbf16>
  %k = braid.rope %k1, %pos {theta = 500000.0 : f64} : (tensor<1x4x1x4xbf16>, tensor<1x4xi32>) -> tensor<1x4x1x4xbf16>
  // The caches are updated in place: the results are State tensors.
  // CHECK: %[[O:[0-9]+]], %[[KC:[0-9]+]], %[[VC:[0-9]+]] = attention %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %2, %3, %5 {causal = true, num_heads = 1, num_kv_heads = 1, head_dim = 4, scale = 0.5}
  %o, %kc2, %vc2 = braid.attention %q, %k, %v cache(%kc, %vc) at %p {causal, head_dim = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f64} : (tensor<1x4x1x4xbf16>, tensor<1x4x1x4xbf16>, tensor<1x4x1x4xbf16>, tensor<1x16x1x4xbf16>, tensor<1x16x1x4xbf16>, tensor<1xi32>) -> (tensor<1x4x1x4xbf16>, tensor<1x16x1x4xbf16>, tensor<1x16x1x4xbf16>)
  %o2 = braid.reshape %o : tensor<1x4x1x4xbf16> -> tensor<1x4x4xbf16>
  %o3 = braid.concat %o2, %o2 dim 2 : (tensor<1x4x4xbf16>, tensor<1x4x4xbf16>) -> tensor<1x4x8xbf16>
  %n = braid.parameter "norm" full [8] : tensor<8xbf16>
  // CHECK: rms_norm %{{[0-9]+}}, %{{[0-9]+}} {epsilon = 1e-06}
  %y = braid.rms_norm %o3, %n {epsilon = 1.0e-6 : f64} : (tensor<1x4x8xbf16>, tensor<8xbf16>) -> tensor<1x4x8xbf16>
  // CHECK-NEXT: %[[G:[0-9]+]] = all_gather %{{[0-9]+}} {dim = 0, group = 1}
  %g = braid.all_gather %y on @dp dim 0 : tensor<1x4x8xbf16> -> tensor<2x4x8xbf16>
  // CHECK-NEXT: %[[R:[0-9]+]] = reduce_scatter %[[G]] {reduce = max, dim = 0, group = 1}
  %r = braid.reduce_scatter max %g on @dp dim 0 : tensor<2x4x8xbf16> -> tensor<1x4x8xbf16>
  // CHECK-NEXT: %[[S:[0-9]+]] = softmax %[[R]] {dim = 2}
  %s = braid.softmax %r dim 2 : tensor<1x4x8xbf16>
  // CHECK-NEXT: output "hidden" %[[S]]
  // CHECK-NEXT: state 0 %2 -> %[[KC]]
  // CHECK-NEXT: state 1 %3 -> %[[VC]]
  return %s, %kc2, %vc2 : tensor<1x4x8xbf16>, tensor<1x16x1x4xbf16>, tensor<1x16x1x4xbf16>
}

// A function that leaves the state alone binds it to itself. `braid.stream`
// (scheduled IR) becomes the op's stream, and an event record/wait pair
// becomes the recording op's `record_events` and the next op's
// `wait_events` on the waiting stream.
// CHECK-LABEL: func "decode" arena 768 streams 2 events 1 handles 0
// CHECK: %[[A:[0-9]+]] = silu %0 {stream = 1, record_events = [0]}
// CHECK-NEXT: %{{[0-9]+}} = gelu %[[A]] {approximation = tanh, wait_events = [0]}
// CHECK: state 0 %1 -> %1 (unchanged)
func.func @decode(%x: tensor<1x8xbf16> {braid.input = "x"}, %kc: tensor<1x16x1x4xbf16> {braid.state = "k_cache"}) -> (tensor<1x8xbf16> {braid.output = "y"}, tensor<1x16x1x4xbf16> {braid.state = "k_cache"}) {
  %a = braid.silu %x {braid.stream = 1 : i64} : tensor<1x8xbf16>
  %e = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %e {braid.stream = 0 : i64}
  %b = braid.gelu tanh %a {braid.stream = 0 : i64} : tensor<1x8xbf16>
  return %b, %kc : tensor<1x8xbf16>, tensor<1x16x1x4xbf16>
}

// An event recorded after a wait, before its stream issues anything more,
// covers the waited work too (as cudaEventRecord after cudaStreamWaitEvent):
// a wait on it waits for the relayed events as well. Stream 1 relays
// stream 0's silu to stream 2 with no op of its own yet, then after its own
// silu records again behind a second wait.
// CHECK-LABEL: func "relay" arena 1280 streams 3 events 3 handles 0
// CHECK: %[[A:[0-9]+]] = silu %0 {record_events = [0, 1]}
// CHECK-NEXT: %{{[0-9]+}} = gelu %[[A]] {approximation = none, stream = 2, wait_events = [0]}
// CHECK-NEXT: %[[C:[0-9]+]] = silu %0 {stream = 1, wait_events = [0], record_events = [2]}
// CHECK-NEXT: %{{[0-9]+}} = add %[[C]], %[[A]] {stream = 2, wait_events = [2, 1]}
func.func @relay(%x: tensor<64xf32> {braid.input = "x"}) -> (tensor<64xf32> {braid.output = "y"}, tensor<64xf32> {braid.output = "z"}) {
  %a = braid.silu %x {braid.stream = 0 : i64} : tensor<64xf32>
  %e1 = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e1 {braid.stream = 1 : i64}
  %e2 = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %e2 {braid.stream = 2 : i64}
  %b = braid.gelu none %a {braid.stream = 2 : i64} : tensor<64xf32>
  %c = braid.silu %x {braid.stream = 1 : i64} : tensor<64xf32>
  %e3 = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e3 {braid.stream = 1 : i64}
  %e4 = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %e4 {braid.stream = 2 : i64}
  %d = braid.add %c, %a {braid.stream = 2 : i64} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %b, %d : tensor<64xf32>, tensor<64xf32>
}

// A wait on another stream than its start waits through an event recorded
// after the start; when the start is in a point-to-point group (adjacent
// sends and receives issued together, runtime/P2PGroups.h), after the
// group's last member: an event on a member would end the group early and
// split an exchange that only completes as one.
// CHECK-LABEL: func "p2p_wait_elsewhere"
// CHECK: send %{{[0-9]+}} {peer = 1, group = 0}
// CHECK-NEXT: recv_start {peer = 1, group = 0, handle = 0}
// CHECK-NEXT: recv {peer = 0, group = 0, record_events = [0]}
// CHECK-NEXT: wait {handle = 0, stream = 1, wait_events = [0], record_events = [1]}
func.func @p2p_wait_elsewhere(%x: tensor<64xf32> {braid.input = "x"}) -> (tensor<64xf32> {braid.output = "y"}) {
  %v = braid.silu %x {braid.stream = 0 : i64} : tensor<64xf32>
  braid.send %v to 1 on @tp {braid.stream = 0 : i64} : tensor<64xf32>
  %h = braid.recv_start from 1 on @tp {braid.stream = 0 : i64} : !braid.handle<tensor<64xf32>>
  %r = braid.recv from 0 on @tp {braid.stream = 0 : i64} : tensor<64xf32>
  %a = braid.wait %h {braid.stream = 1 : i64} : !braid.handle<tensor<64xf32>> -> tensor<64xf32>
  %e = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %e {braid.stream = 0 : i64}
  %y = braid.add %a, %r {braid.stream = 0 : i64} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// The same when the start's group begins after a relay (a send of what
// the receive before it got starts a new group): the event goes after the
// start's own group, [send, recv_start, send], not on the start.
// CHECK-LABEL: func "p2p_wait_after_relay"
// CHECK: recv {peer = 0, group = 0}
// CHECK-NEXT: send %{{[0-9]+}} {peer = 1, group = 0}
// CHECK-NEXT: recv_start {peer = 1, group = 0, handle = 0}
// CHECK-NEXT: send %0 {peer = 0, group = 0, record_events = [0]}
// CHECK-NEXT: wait {handle = 0, stream = 1, wait_events = [0], record_events = [1]}
func.func @p2p_wait_after_relay(%x: tensor<64xf32> {braid.input = "x"}) -> (tensor<64xf32> {braid.output = "y"}) {
  %r = braid.recv from 0 on @tp {braid.stream = 0 : i64} : tensor<64xf32>
  braid.send %r to 1 on @tp {braid.stream = 0 : i64} : tensor<64xf32>
  %h = braid.recv_start from 1 on @tp {braid.stream = 0 : i64} : !braid.handle<tensor<64xf32>>
  braid.send %x to 0 on @tp {braid.stream = 0 : i64} : tensor<64xf32>
  %a = braid.wait %h {braid.stream = 1 : i64} : !braid.handle<tensor<64xf32>> -> tensor<64xf32>
  %e = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %e {braid.stream = 0 : i64}
  %y = braid.add %a, %r {braid.stream = 0 : i64} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// An event relayed back to the stream that recorded it (stream 1 waits for
// stream 0 and records with no op of its own; stream 0 waits for that) is
// behind stream 0 already: no wait_events, which would only split a
// point-to-point group the next op belongs to.
// CHECK-LABEL: func "relay_back"
// CHECK: %[[A:[0-9]+]] = silu %0 {record_events = [0]}
// CHECK-NEXT: %{{[0-9]+}} = gelu %[[A]] {approximation = none}
func.func @relay_back(%x: tensor<64xf32> {braid.input = "x"}) -> (tensor<64xf32> {braid.output = "y"}) {
  %a = braid.silu %x {braid.stream = 0 : i64} : tensor<64xf32>
  %e0 = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e0 {braid.stream = 1 : i64}
  %e1 = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %e1 {braid.stream = 0 : i64}
  %b = braid.gelu none %a {braid.stream = 0 : i64} : tensor<64xf32>
  return %b : tensor<64xf32>
}

// Private functions are helpers, not plan entries.
// CHECK-NOT: func "helper"
func.func private @helper(%x: tensor<1x8xbf16>) -> tensor<1x8xbf16> {
  return %x : tensor<1x8xbf16>
}
