// RUN: braid-opt %s --braid-verify-schedule -split-input-file -verify-diagnostics -o /dev/null
// Outside -verify-diagnostics: no note reprinting the op in generic form
// (its renumbered SSA names disagree with the file's).
// RUN: not braid-opt %s --braid-verify-schedule -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAIN
// PLAIN-NOT: see current operation
// PLAIN: error: 'braid.{{.*}}' op on stream {{[0-9]}} {{is not ordered|reads a value clobbered|runs while}}
// PLAIN-NOT: see current operation

// A hand-scheduled two-stream tp 2 block whose events order everything.
braid.device_group @tp size 2
func.func @ordered(%x: tensor<4x8xf32> {braid.input = "x"}) -> (tensor<4x8xf32> {braid.output = "y"}) {
  %w = braid.parameter "w" full [8, 8] shard_dim 1 on @tp : tensor<8x4xf32>
  %s = braid.slice %x offsets [0, 0] sizes [4, 4] {braid.stream = 0 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  %b = braid.matmul %s, %w {transpose_b, braid.stream = 0 : i64} : (tensor<4x4xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  %e = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e {braid.stream = 1 : i64}
  %h = braid.all_reduce_start sum %b on @tp {braid.stream = 1 : i64} : tensor<4x8xf32> -> !braid.handle<tensor<4x8xf32>>
  %r = braid.wait %h {braid.stream = 0 : i64} : !braid.handle<tensor<4x8xf32>> -> tensor<4x8xf32>
  %y = braid.add %r, %x {braid.stream = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The same block without its event: the start may read %b before the
// matmul on stream 0 has written it.
braid.device_group @tp size 2
func.func @missing_event(%x: tensor<4x8xf32> {braid.input = "x"}) -> (tensor<4x8xf32> {braid.output = "y"}) {
  %w = braid.parameter "w" full [8, 8] shard_dim 1 on @tp : tensor<8x4xf32>
  %s = braid.slice %x offsets [0, 0] sizes [4, 4] {braid.stream = 0 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  // expected-note@+1 {{the other op of the unordered pair}}
  %b = braid.matmul %s, %w {transpose_b, braid.stream = 0 : i64} : (tensor<4x4xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  // expected-error@+1 {{'braid.all_reduce_start' op on stream 1 is not ordered with 'braid.matmul' on stream 0: both access bytes [0, 128) of the value of 'braid.matmul' and at least one writes}}
  %h = braid.all_reduce_start sum %b on @tp {braid.stream = 1 : i64} : tensor<4x8xf32> -> !braid.handle<tensor<4x8xf32>>
  %r = braid.wait %h {braid.stream = 0 : i64} : !braid.handle<tensor<4x8xf32>> -> tensor<4x8xf32>
  %y = braid.add %r, %x {braid.stream = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The result is read on stream 1, but only stream 0 waited for it.
braid.device_group @tp size 2
func.func @result_on_other_stream(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  %h = braid.all_reduce_start sum %x on @tp {braid.stream = 1 : i64} : tensor<4xf32> -> !braid.handle<tensor<4xf32>>
  // expected-note@+1 {{the other op of the unordered pair}}
  %r = braid.wait %h {braid.stream = 0 : i64} : !braid.handle<tensor<4xf32>> -> tensor<4xf32>
  // expected-error@+1 {{'braid.silu' op on stream 1 is not ordered with 'braid.wait' on stream 0: both access bytes [0, 16) of the value of 'braid.wait'}}
  %y = braid.silu %r {braid.stream = 1 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Arena reuse across streams: %c takes %a's bytes while stream 1 may still
// be reading %a.
func.func @early_reuse(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  %e = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e {braid.stream = 1 : i64}
  // expected-note@+1 {{the other op of the unordered pair}}
  %b = braid.gelu none %a {braid.stream = 1 : i64, braid.buffers = array<i64: 512, 256>} : tensor<64xf32>
  // expected-error@+1 {{'braid.silu' op on stream 0 is not ordered with 'braid.gelu' on stream 1: both access bytes [256, 512) of the arena and at least one writes}}
  %c = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  %f = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %f {braid.stream = 0 : i64}
  %y = braid.add %b, %c {braid.stream = 0 : i64, braid.buffers = array<i64: 768, 256>} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// -----

// The async KV-cache case (one stream): an all_gather still reads the old
// cache until its wait, after the attention. The in-place rule sees that
// reader, so the updated cache gets storage of its own (copied back at the
// end) and the schedule is safe; were it updated in place, this would be a
// race on state 'k_cache'.
braid.device_group @tp size 2
func.func @async_cache_reader(%q: tensor<1x1x2x4xf32> {braid.input = "q"}, %pos: tensor<1xi32> {braid.input = "pos"}, %kc: tensor<1x8x1x4xf32> {braid.state = "k_cache"}, %vc: tensor<1x8x1x4xf32> {braid.state = "v_cache"}) -> (tensor<1x1x2x4xf32> {braid.output = "o"}, tensor<2x8x1x4xf32> {braid.output = "g"}, tensor<1x8x1x4xf32> {braid.state = "k_cache"}, tensor<1x8x1x4xf32> {braid.state = "v_cache"}) {
  %k = braid.slice %q offsets [0, 0, 0, 0] sizes [1, 1, 1, 4] : tensor<1x1x2x4xf32> -> tensor<1x1x1x4xf32>
  %h = braid.all_gather_start %kc on @tp dim 0 : tensor<1x8x1x4xf32> -> !braid.handle<tensor<2x8x1x4xf32>>
  %o, %kc2, %vc2 = braid.attention %q, %k, %k cache(%kc, %vc) at %pos {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64} : (tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1xi32>) -> (tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
  %g = braid.wait %h : !braid.handle<tensor<2x8x1x4xf32>> -> tensor<2x8x1x4xf32>
  return %o, %g, %kc2, %vc2 : tensor<1x1x2x4xf32>, tensor<2x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>
}

// -----

// An async collective's input bytes are overwritten before its wait, on
// its own stream: the collective may still be reading them.
braid.device_group @tp size 2
func.func @in_flight_overwrite(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}, tensor<64xf32> {braid.output = "z"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-note@+1 {{the collective in flight}}
  %h = braid.all_reduce_start sum %a on @tp : tensor<64xf32> -> !braid.handle<tensor<64xf32>>
  // expected-error@+1 {{'braid.gelu' op on stream 0 runs while 'braid.all_reduce_start' on stream 0 is in flight (until its braid.wait): both access bytes [256, 512) of the arena and at least one writes; no event can order them (move the op after the wait, or give it other bytes)}}
  %z = braid.gelu none %x {braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-note@+1 {{its wait}}
  %y = braid.wait %h {braid.buffers = array<i64: 512, 256>} : !braid.handle<tensor<64xf32>> -> tensor<64xf32>
  return %y, %z : tensor<64xf32>, tensor<64xf32>
}

// -----

// Two communicators of @tp (streams 0 and 1) with nothing ordering them.
braid.device_group @tp size 2
func.func @two_communicators(%x: tensor<4xf32> {braid.input = "x"}, %y: tensor<4xf32> {braid.input = "y"}) -> (tensor<4xf32> {braid.output = "a"}, tensor<4xf32> {braid.output = "b"}) {
  // expected-note@+1 {{the other op of the unordered pair}}
  %a = braid.all_reduce sum %x on @tp {braid.stream = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
  // expected-error@+1 {{'braid.all_reduce' op on stream 1 is not ordered with 'braid.all_reduce' on stream 0: collectives of two communicators may run concurrently and deadlock}}
  %b = braid.all_reduce sum %y on @tp {braid.stream = 1 : i64} : tensor<4xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// One stream, a buffer reused one op too early: %c takes %a's bytes before
// %b has read %a. Ordered, but %b would read %c's value.
func.func @reused_too_early(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-note@+1 {{the op that overwrote it}}
  %c = braid.gelu none %x {braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-error@+1 {{'braid.silu' op on stream 0 reads a value clobbered by 'braid.gelu' on stream 0: it reads bytes [256, 512) of the arena after the other op overwrote the value they held (a buffer reused too early)}}
  %b = braid.silu %a {braid.buffers = array<i64: 512, 256>} : tensor<64xf32>
  %y = braid.add %b, %c {braid.buffers = array<i64: 768, 256>} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// -----

// A view (a reshape placed on its operand's bytes) writes nothing: stream
// 1 may read %a while stream 0 makes the view, and the view's reader sees
// the silu's write. No diagnostic.
func.func @view_on_another_stream(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}, tensor<8x8xf32> {braid.output = "z"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  %e = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e {braid.stream = 1 : i64}
  %y = braid.gelu none %a {braid.stream = 1 : i64, braid.buffers = array<i64: 512, 256>} : tensor<64xf32>
  %v = braid.reshape %a {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32> -> tensor<8x8xf32>
  %z = braid.silu %v {braid.stream = 0 : i64, braid.buffers = array<i64: 768, 256>} : tensor<8x8xf32>
  return %y, %z : tensor<64xf32>, tensor<8x8xf32>
}

// -----

// The same reshape placed 4 bytes before its operand is a copy: it writes
// bytes stream 1 is reading, and bytes of its own operand (a copy between
// overlapping ranges, which cudaMemcpyAsync leaves undefined).
func.func @copy_on_another_stream(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}, tensor<8x8xf32> {braid.output = "z"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  %e = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e {braid.stream = 1 : i64}
  // expected-note@+1 {{the other op of the unordered pair}}
  %y = braid.gelu none %a {braid.stream = 1 : i64, braid.buffers = array<i64: 512, 256>} : tensor<64xf32>
  // expected-error@+2 {{'braid.reshape' op writes bytes [256, 508) of the arena that it also reads or writes through another operand or result}}
  // expected-error@+1 {{'braid.reshape' op on stream 0 is not ordered with 'braid.gelu' on stream 1}}
  %v = braid.reshape %a {braid.stream = 0 : i64, braid.buffers = array<i64: 252, 256>} : tensor<64xf32> -> tensor<8x8xf32>
  %z = braid.silu %v {braid.stream = 0 : i64, braid.buffers = array<i64: 768, 256>} : tensor<8x8xf32>
  return %y, %z : tensor<64xf32>, tensor<8x8xf32>
}

// -----

// Variants left unchosen (braid-sequence-parallel=variants=true without
// braid-decompose) never reach a plan; braid-decompose chooses.
func.func @f(%x: tensor<1x4x8xf32> {braid.input = "x"}) -> tensor<1x4x8xf32> {
  return %x : tensor<1x4x8xf32>
}
// expected-error @+1 {{braid-verify-schedule: @f.sp is a variant of @f that braid-decompose has not chosen between}}
func.func private @f.sp(%x: tensor<1x4x8xf32> {braid.input = "x"}) -> tensor<1x4x8xf32> attributes {braid.variant_of = "f"} {
  return %x : tensor<1x4x8xf32>
}

// -----

// One op's accesses must not overlap each other (the kernels, cuBLASLt and
// NCCL assume they do not; the interpreter, computing out of place, would
// not notice): two results of one add_rms_norm sharing bytes, a concat
// over its own operand, a matmul over its input (exactly), an add over half
// its operand. Elementwise ops and attention's KV caches run in place, at
// exactly their operand's bytes: the silu gets no diagnostic.
func.func @self_overlap(%x: tensor<4x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 128>}, %w: tensor<8xf32> {braid.input = "w", braid.buffer = array<i64: 128, 32>}, %m: tensor<8x8xf32> {braid.input = "m", braid.buffer = array<i64: 1024, 256>}) -> (tensor<4x8xf32> {braid.output = "s"}, tensor<4x8xf32> {braid.output = "y"}, tensor<8x8xf32> {braid.output = "c"}, tensor<4x8xf32> {braid.output = "p"}, tensor<4x8xf32> {braid.output = "q"}) attributes {braid.arena_size = 2048 : i64} {
  %a = braid.silu %x {braid.buffers = array<i64: 256, 128>} : tensor<4x8xf32>
  // expected-error@+1 {{'braid.add_rms_norm' op writes bytes [448, 512) of the arena that it also reads or writes through another operand or result}}
  %s, %y = braid.add_rms_norm %a, %x, %w {epsilon = 1.0e-05 : f64, braid.buffers = array<i64: 384, 128, 448, 128>} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %b = braid.silu %a {braid.buffers = array<i64: 256, 128>} : tensor<4x8xf32>
  // expected-error@+1 {{'braid.concat' op writes bytes [256, 384) of the arena that it also reads or writes through another operand or result}}
  %c = braid.concat %x, %b dim 0 {braid.buffers = array<i64: 128, 256>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  // expected-error@+1 {{'braid.matmul' op writes bytes [0, 128) of the arena that it also reads or writes through another operand or result}}
  %p = braid.matmul %x, %m {braid.buffers = array<i64: 0, 128>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %d = braid.silu %m {braid.buffers = array<i64: 1280, 256>} : tensor<8x8xf32>
  %e = braid.slice %d offsets [0, 0] sizes [4, 8] {braid.buffers = array<i64: 1536, 128>} : tensor<8x8xf32> -> tensor<4x8xf32>
  // expected-error@+1 {{'braid.add' op writes bytes [1536, 1600) of the arena that it also reads or writes through another operand or result}}
  %q = braid.add %e, %e {braid.buffers = array<i64: 1472, 128>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %y, %c, %p, %q : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// An async collective writes its wait's result while it is in flight, so
// the result on the start's operand is an overlap: reported on the start
// (its accesses), with a note on the wait whose buffer moved.
braid.device_group @tp size 2
func.func @wait_over_start_operand(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-error@+1 {{'braid.all_reduce_start' op writes bytes [256, 512) of the arena that it also reads or writes through another operand or result}}
  %h = braid.all_reduce_start sum %a on @tp : tensor<64xf32> -> !braid.handle<tensor<64xf32>>
  // expected-note@+1 {{the collective writes this wait's results while it reads its operand}}
  %y = braid.wait %h {braid.buffers = array<i64: 256, 256>} : !braid.handle<tensor<64xf32>> -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// -----

// The inputs are copied into their buffers before the first op, so two
// that share bytes overwrite each other where no op's access shows it.
// expected-error@+1 {{@inputs_overlap: input 'x' and input 'y' share bytes [128, 256) of the arena (each is copied in before the first op)}}
func.func @inputs_overlap(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}, %y: tensor<64xf32> {braid.input = "y", braid.buffer = array<i64: 128, 256>}) -> (tensor<64xf32> {braid.output = "z"}) attributes {braid.arena_size = 1024 : i64} {
  %z = braid.add %x, %y {braid.buffers = array<i64: 512, 256>} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %z : tensor<64xf32>
}

// -----

// Attention computes its updated k cache in place of its k cache and v in
// place of v, not crossed: the updated k cache (result #1) exactly on the v
// cache operand's bytes is an overlap, although the bytes match.
func.func @attention_crossed_caches(%q: tensor<1x1x2x4xf32> {braid.input = "q", braid.buffer = array<i64: 0, 256>}, %pos: tensor<1xi32> {braid.input = "pos", braid.buffer = array<i64: 256, 256>}, %kc: tensor<1x8x1x4xf32> {braid.input = "kc", braid.buffer = array<i64: 512, 256>}, %vc: tensor<1x8x1x4xf32> {braid.input = "vc", braid.buffer = array<i64: 768, 256>}) -> (tensor<1x1x2x4xf32> {braid.output = "o"}, tensor<1x8x1x4xf32> {braid.output = "k2"}, tensor<1x8x1x4xf32> {braid.output = "v2"}) attributes {braid.arena_size = 2048 : i64} {
  %k = braid.slice %q offsets [0, 0, 0, 0] sizes [1, 1, 1, 4] {braid.buffers = array<i64: 1024, 256>} : tensor<1x1x2x4xf32> -> tensor<1x1x1x4xf32>
  // expected-error@+1 {{'braid.attention' op writes bytes [768, 896) of the arena that it also reads or writes through another operand or result}}
  %o, %kc2, %vc2 = braid.attention %q, %k, %k cache(%kc, %vc) at %pos {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, braid.buffers = array<i64: 1280, 256, 768, 256, 512, 256>} : (tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1xi32>) -> (tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
  return %o, %kc2, %vc2 : tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>
}

// -----

// The same attention with each cache updated in place of itself verifies.
func.func @attention_caches_in_place(%q: tensor<1x1x2x4xf32> {braid.input = "q", braid.buffer = array<i64: 0, 256>}, %pos: tensor<1xi32> {braid.input = "pos", braid.buffer = array<i64: 256, 256>}, %kc: tensor<1x8x1x4xf32> {braid.input = "kc", braid.buffer = array<i64: 512, 256>}, %vc: tensor<1x8x1x4xf32> {braid.input = "vc", braid.buffer = array<i64: 768, 256>}) -> (tensor<1x1x2x4xf32> {braid.output = "o"}, tensor<1x8x1x4xf32> {braid.output = "k2"}, tensor<1x8x1x4xf32> {braid.output = "v2"}) attributes {braid.arena_size = 2048 : i64} {
  %k = braid.slice %q offsets [0, 0, 0, 0] sizes [1, 1, 1, 4] {braid.buffers = array<i64: 1024, 256>} : tensor<1x1x2x4xf32> -> tensor<1x1x1x4xf32>
  %o, %kc2, %vc2 = braid.attention %q, %k, %k cache(%kc, %vc) at %pos {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, braid.buffers = array<i64: 1280, 256, 512, 256, 768, 256>} : (tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1xi32>) -> (tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
  return %o, %kc2, %vc2 : tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>
}

// -----

// The same reader with the updated k cache marked in place (-1, 0), as
// braid-plan-memory writes a cache it updates in its slot: refused, naming
// the reader that stops the in-place update.
braid.device_group @tp size 2
func.func @cache_marked_in_place(%q: tensor<1x1x2x4xf32> {braid.input = "q", braid.buffer = array<i64: 0, 32>}, %k: tensor<1x1x1x4xf32> {braid.input = "k", braid.buffer = array<i64: 32, 16>}, %pos: tensor<1xi32> {braid.input = "pos", braid.buffer = array<i64: 48, 4>}, %kc: tensor<1x8x1x4xf32> {braid.state = "k_cache"}, %vc: tensor<1x8x1x4xf32> {braid.state = "v_cache"}) -> (tensor<1x1x2x4xf32> {braid.output = "o"}, tensor<2x8x1x4xf32> {braid.output = "g"}, tensor<1x8x1x4xf32> {braid.state = "k_cache"}, tensor<1x8x1x4xf32> {braid.state = "v_cache"}) attributes {braid.arena_size = 1024 : i64} {
  // expected-note@+1 {{the later reader of the old cache}}
  %h = braid.all_gather_start %kc on @tp dim 0 : tensor<1x8x1x4xf32> -> !braid.handle<tensor<2x8x1x4xf32>>
  // expected-error@+1 {{buffer (-1, 0) marks a value updated in place in its state slot, but 'braid.all_gather_start' reads the old k cache after the attention (until its wait); give the result an arena buffer (braid-plan-memory), or read the cache before the attention}}
  %o, %kc2, %vc2 = braid.attention %q, %k, %k cache(%kc, %vc) at %pos {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, braid.buffers = array<i64: 64, 32, -1, 0, -1, 0>} : (tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1xi32>) -> (tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
  %g = braid.wait %h {braid.buffers = array<i64: 256, 256>} : !braid.handle<tensor<2x8x1x4xf32>> -> tensor<2x8x1x4xf32>
  return %o, %g, %kc2, %vc2 : tensor<1x1x2x4xf32>, tensor<2x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>
}

// -----

// Only an attention's updated caches live in their state slot.
func.func @silu_marked_in_place(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}) attributes {braid.arena_size = 1024 : i64} {
  // expected-error@+1 {{buffer (-1, 0) marks a value updated in place in its state slot, but only an attention's updated KV caches are; this value needs 256 bytes of the arena}}
  %y = braid.silu %x {braid.buffers = array<i64: -1, 0>} : tensor<64xf32>
  return %y : tensor<64xf32>
}
