// RUN: braid-opt %s --braid-insert-events -split-input-file -verify-diagnostics -o /dev/null
// What braid-insert-events (which orders scheduled functions: some op has a
// braid.stream) cannot repair with an event: the verifier's
// wording of the conflict (passes/analysis/ScheduleConflicts.h), and a note
// saying what must change instead.

// One stream, a buffer reused one op too early: no event restores %a.
func.func @reused_too_early(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-note@+1 {{the op that overwrote it}}
  %c = braid.gelu none %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-error@+2 {{'braid.silu' op on stream 0 reads a value clobbered by 'braid.gelu' on stream 0: it reads bytes [256, 512) of the arena after the other op overwrote the value they held (a buffer reused too early)}}
  // expected-note@+1 {{braid-insert-events cannot repair this with an event: the bytes must change (plan memory after the schedule, or give the op other bytes)}}
  %b = braid.silu %a {braid.stream = 0 : i64, braid.buffers = array<i64: 512, 256>} : tensor<64xf32>
  %y = braid.add %b, %c {braid.stream = 0 : i64, braid.buffers = array<i64: 768, 256>} : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// -----

// An async collective's input is overwritten before its wait: an event
// cannot order an op before a collective that is still running.
braid.device_group @tp size 2
func.func @in_flight_overwrite(%x: tensor<64xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<64xf32> {braid.output = "y"}, tensor<64xf32> {braid.output = "z"}) attributes {braid.arena_size = 1024 : i64} {
  %a = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-note@+1 {{the collective in flight}}
  %h = braid.all_reduce_start sum %a on @tp {braid.stream = 0 : i64} : tensor<64xf32> -> !braid.handle<tensor<64xf32>>
  // expected-error@+2 {{'braid.gelu' op on stream 0 runs while 'braid.all_reduce_start' on stream 0 is in flight (until its braid.wait): both access bytes [256, 512) of the arena and at least one writes; no event can order them (move the op after the wait, or give it other bytes)}}
  // expected-note@+1 {{braid-insert-events cannot repair this with an event: an op or a wait must move}}
  %z = braid.gelu none %x {braid.stream = 0 : i64, braid.buffers = array<i64: 256, 256>} : tensor<64xf32>
  // expected-note@+1 {{its wait}}
  %r = braid.wait %h {braid.stream = 0 : i64, braid.buffers = array<i64: 512, 256>} : !braid.handle<tensor<64xf32>> -> tensor<64xf32>
  return %r, %z : tensor<64xf32>, tensor<64xf32>
}

// -----

// A matmul over its own input: no order of two ops separates one op's
// operand from its result.
func.func @matmul_over_its_input(%x: tensor<4x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 128>}, %m: tensor<8x8xf32> {braid.input = "m", braid.buffer = array<i64: 1024, 256>}) -> (tensor<4x8xf32> {braid.output = "p"}) attributes {braid.arena_size = 2048 : i64} {
  // expected-error@+2 {{'braid.matmul' op writes bytes [0, 128) of the arena that it also reads or writes through another operand or result}}
  // expected-note@+1 {{braid-insert-events cannot repair this with an event: the bytes must change (plan memory after the schedule, or give the op other bytes)}}
  %p = braid.matmul %x, %m {braid.stream = 0 : i64, braid.buffers = array<i64: 0, 128>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}
