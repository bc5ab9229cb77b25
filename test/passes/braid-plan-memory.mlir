// RUN: braid-opt %s --braid-plan-memory -split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-plan-memory=reuse=false -split-input-file | FileCheck %s --check-prefix=NOREUSE
// RUN: braid-opt %s --braid-plan-memory=report=true -split-input-file -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: not braid-opt %s --braid-plan-memory=alignment=3 -split-input-file 2>&1 | FileCheck %s --check-prefix=ALIGN

// Offsets are pinned: placement is deterministic (largest first, ties in
// definition order, lowest offset that fits). Each 4x64xf32 is 1024 bytes.

// ALIGN: alignment must be a positive power of two, got 3

// A chain needs two buffers: each value dies at its only use, so the value
// after next takes its place. The input itself is reused once it is read.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: {braid.buffer = array<i64: 0, 1024>, braid.input = "x"}
// CHECK-SAME: attributes {braid.arena_lower_bound = 2048 : i64, braid.arena_size = 2048 : i64}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 1024, 1024>}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 0, 1024>}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 1024, 1024>}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 0, 1024>}
// NOREUSE-LABEL: func.func @chain
// NOREUSE-SAME: attributes {braid.arena_lower_bound = 2048 : i64, braid.arena_size = 5120 : i64}
// NOREUSE-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 1024, 1024>}
// NOREUSE-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 2048, 1024>}
// NOREUSE-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 3072, 1024>}
// NOREUSE-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 4096, 1024>}
// REPORT: remark: arena 2048 bytes, liveness lower bound 2048 bytes, without reuse 5120 bytes (2.50x smaller), 5 buffers
func.func @chain(%x: tensor<4x64xf32> {braid.input = "x"}) -> (tensor<4x64xf32> {braid.output = "y"}) {
  %1 = braid.silu %x : tensor<4x64xf32>
  %2 = braid.silu %1 : tensor<4x64xf32>
  %3 = braid.silu %2 : tensor<4x64xf32>
  %4 = braid.silu %3 : tensor<4x64xf32>
  return %4 : tensor<4x64xf32>
}

// -----

// An async collective reads its input until the wait, and writes its payload
// from the start: %x stays live through the wait although silu reads it
// last, so %b cannot take %x's buffer; the payload %y is live from the start.
// CHECK-LABEL: func.func @async
// CHECK-SAME: {braid.buffer = array<i64: 0, 1024>, braid.input = "x"}
// CHECK-SAME: attributes {braid.arena_lower_bound = 4096 : i64, braid.arena_size = 4096 : i64}
// CHECK-NEXT: braid.all_reduce_start
// CHECK-NOT: braid.buffers
// CHECK-SAME: -> !braid.handle
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 1024, 1024>}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 2048, 1024>}
// CHECK-NEXT: braid.wait %{{.*}} {braid.buffers = array<i64: 3072, 1024>}
// CHECK-NEXT: braid.add %{{.*}} {braid.buffers = array<i64: 0, 1024>}
braid.device_group @tp size 2
// REPORT: remark: arena 4096 bytes, liveness lower bound 4096 bytes, without reuse 5120 bytes (1.25x smaller), 5 buffers
func.func @async(%x: tensor<4x64xf32> {braid.input = "x"}) -> (tensor<4x64xf32> {braid.output = "z"}) {
  %h = braid.all_reduce_start sum %x on @tp : tensor<4x64xf32> -> !braid.handle<tensor<4x64xf32>>
  %a = braid.silu %x : tensor<4x64xf32>
  %b = braid.silu %a : tensor<4x64xf32>
  %y = braid.wait %h : !braid.handle<tensor<4x64xf32>> -> tensor<4x64xf32>
  %z = braid.add %y, %b : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %z : tensor<4x64xf32>
}

// -----

// Parameters and state are runtime-owned: no buffers. The attention updates
// the caches in place (-1, 0: outside the arena). Small tensors round up to
// the 256-byte alignment.
// The output of mul takes q's buffer: q is dead after the attention.
// CHECK-LABEL: func.func @state_in_place
// CHECK-SAME: attributes {braid.arena_lower_bound = 1280 : i64, braid.arena_size = 1280 : i64}
// CHECK: braid.parameter "w" full [4] : tensor<4xf32>
// CHECK-NEXT: braid.attention
// CHECK-SAME: braid.buffers = array<i64: 1024, 256, -1, 0, -1, 0>
// CHECK-NEXT: braid.mul %{{.*}} {braid.buffers = array<i64: 0, 256>}
// REPORT: remark: arena 1280 bytes, liveness lower bound 1280 bytes, without reuse 1536 bytes (1.20x smaller), 6 buffers
func.func @state_in_place(%q: tensor<1x1x2x4xf32> {braid.input = "q"}, %k: tensor<1x1x1x4xf32> {braid.input = "k"}, %v: tensor<1x1x1x4xf32> {braid.input = "v"}, %pos: tensor<1xi32> {braid.input = "pos"}, %kc: tensor<1x8x1x4xf32> {braid.state = "k_cache"}, %vc: tensor<1x8x1x4xf32> {braid.state = "v_cache"}) -> (tensor<1x1x2x4xf32> {braid.output = "o"}, tensor<1x8x1x4xf32> {braid.state = "k_cache"}, tensor<1x8x1x4xf32> {braid.state = "v_cache"}) {
  %w = braid.parameter "w" full [4] : tensor<4xf32>
  %o, %kc2, %vc2 = braid.attention %q, %k, %v cache(%kc, %vc) at %pos {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1xi32>) -> (tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
  %ow = braid.mul %o, %w : (tensor<1x1x2x4xf32>, tensor<4xf32>) -> tensor<1x1x2x4xf32>
  return %ow, %kc2, %vc2 : tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>
}

// -----

// A later read of the old cache forbids the in-place update: the new caches
// get arena buffers (and the runtime copies them back into the slot).
// CHECK-LABEL: func.func @state_read_after_update
// CHECK: braid.attention
// CHECK-SAME: braid.buffers = array<i64: 1024, 256, 1280, 256, 1536, 256>
// REPORT: remark: arena 1792 bytes, liveness lower bound 1792 bytes, without reuse 2048 bytes (1.14x smaller), 8 buffers
func.func @state_read_after_update(%q: tensor<1x1x2x4xf32> {braid.input = "q"}, %k: tensor<1x1x1x4xf32> {braid.input = "k"}, %v: tensor<1x1x1x4xf32> {braid.input = "v"}, %pos: tensor<1xi32> {braid.input = "pos"}, %kc: tensor<1x8x1x4xf32> {braid.state = "k_cache"}, %vc: tensor<1x8x1x4xf32> {braid.state = "v_cache"}) -> (tensor<1x8x1x4xf32> {braid.output = "old"}, tensor<1x8x1x4xf32> {braid.state = "k_cache"}, tensor<1x8x1x4xf32> {braid.state = "v_cache"}) {
  %o, %kc2, %vc2 = braid.attention %q, %k, %v cache(%kc, %vc) at %pos {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1xi32>) -> (tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
  %old = braid.add %kc, %vc : (tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>) -> tensor<1x8x1x4xf32>
  return %old, %kc2, %vc2 : tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>
}

// -----

// Two streams: %c may not take %a's bytes, since stream 1 may still be
// reading %a (in plan order %a is dead by then). %y may: the event orders
// %a's last reader before it.
// CHECK-LABEL: func.func @streams
// CHECK-SAME: {braid.buffer = array<i64: 0, 1024>, braid.input = "x"}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 1024, 1024>, braid.stream = 0 : i64}
// CHECK: braid.gelu none %{{.*}} {braid.buffers = array<i64: 2048, 1024>, braid.stream = 1 : i64}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 3072, 1024>, braid.stream = 0 : i64}
// CHECK: braid.add %{{.*}} {braid.buffers = array<i64: 0, 1024>, braid.stream = 0 : i64}
func.func @streams(%x: tensor<4x64xf32> {braid.input = "x"}) -> (tensor<4x64xf32> {braid.output = "y"}) {
  %a = braid.silu %x {braid.stream = 0 : i64} : tensor<4x64xf32>
  %e = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e {braid.stream = 1 : i64}
  %b = braid.gelu none %a {braid.stream = 1 : i64} : tensor<4x64xf32>
  %c = braid.silu %x {braid.stream = 0 : i64} : tensor<4x64xf32>
  %f = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %f {braid.stream = 0 : i64}
  %y = braid.add %b, %c {braid.stream = 0 : i64} : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Views: a reshape, and a slice whose elements are one contiguous run, sit
// inside their operand's buffer (at the run's byte offset), so the runtime
// copies nothing; the operand's buffer lives until the views' last reader.
// A strided slice, and a reshape of a state slot (not in the arena), get
// buffers of their own (they are copies).
// CHECK-LABEL: func.func @views
// CHECK-SAME: attributes {braid.arena_lower_bound = 1536 : i64, braid.arena_size = 1536 : i64}
// CHECK-NEXT: %[[A:.*]] = braid.silu %arg0 {braid.buffers = array<i64: 512, 512>}
// CHECK-NEXT: braid.slice %[[A]] offsets [0, 0, 0] sizes [1, 1, 64] {braid.buffers = array<i64: 512, 256>}
// CHECK-NEXT: braid.slice %[[A]] offsets [0, 0, 64] sizes [1, 1, 32] {braid.buffers = array<i64: 768, 128>}
// CHECK-NEXT: braid.reshape %{{.*}} {braid.buffers = array<i64: 768, 128>}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 1024, 256>}
// CHECK-NEXT: braid.silu %{{.*}} {braid.buffers = array<i64: 1280, 256>}
// CHECK-NEXT: braid.silu %arg1 {braid.buffers = array<i64: 0, 768>}
// CHECK-NEXT: braid.slice %{{.*}} offsets [0, 32] sizes [2, 32] {braid.buffers = array<i64: 768, 256>}
// CHECK-NEXT: braid.reshape %arg1 {braid.buffers = array<i64: 0, 768>}
// REPORT: remark: arena 1536 bytes, liveness lower bound 1536 bytes, without reuse 3328 bytes (2.17x smaller), 7 buffers
func.func @views(%x: tensor<1x1x96xf32> {braid.input = "x"}, %kv: tensor<2x96xf32> {braid.state = "kv"}) -> (tensor<1x1x64xf32> {braid.output = "q"}, tensor<1x1x2x16xf32> {braid.output = "k"}, tensor<2x32xf32> {braid.output = "strided"}, tensor<192xf32> {braid.output = "state_copy"}, tensor<2x96xf32> {braid.state = "kv"}) {
  %a = braid.silu %x : tensor<1x1x96xf32>
  %q = braid.slice %a offsets [0, 0, 0] sizes [1, 1, 64] : tensor<1x1x96xf32> -> tensor<1x1x64xf32>
  %k = braid.slice %a offsets [0, 0, 64] sizes [1, 1, 32] : tensor<1x1x96xf32> -> tensor<1x1x32xf32>
  %kh = braid.reshape %k : tensor<1x1x32xf32> -> tensor<1x1x2x16xf32>
  %s = braid.silu %q : tensor<1x1x64xf32>
  %t = braid.silu %kh : tensor<1x1x2x16xf32>
  %b = braid.silu %kv : tensor<2x96xf32>
  %st = braid.slice %b offsets [0, 32] sizes [2, 32] : tensor<2x96xf32> -> tensor<2x32xf32>
  %r = braid.reshape %kv : tensor<2x96xf32> -> tensor<192xf32>
  return %s, %t, %st, %r, %kv : tensor<1x1x64xf32>, tensor<1x1x2x16xf32>, tensor<2x32xf32>, tensor<192xf32>, tensor<2x96xf32>
}
