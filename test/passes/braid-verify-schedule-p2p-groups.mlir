// RUN: braid-opt %s --braid-verify-schedule -split-input-file -verify-diagnostics -o /dev/null

// Adjacent sends and receives on one stream and group are issued as one
// group (runtime/P2PGroups.h): they run concurrently, so no member may
// write bytes another member reads or writes. The buffers are planned by
// hand (braid.buffers: offset, size).

// A receive over the bytes its group's send reads.
braid.device_group @tp size 2
func.func @receive_over_send(%x: tensor<2x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 64>}) -> (tensor<2x8xf32> {braid.output = "y"}) attributes {braid.arena_size = 256 : i64} {
  %v = braid.silu %x {braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  // expected-note @+1 {{the other member of the group}}
  braid.send %v to 1 on @tp : tensor<2x8xf32>
  // expected-error @+1 {{'braid.recv' op runs concurrently with 'braid.send': adjacent sends and receives on one stream and group are issued as one group (runtime/P2PGroups.h), and both access bytes [64, 128) of the arena with at least one writing}}
  %r = braid.recv from 1 on @tp {braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  %y = braid.add %r, %x {braid.buffers = array<i64: 128, 64>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Two receives of one group on the same bytes (the first is never read,
// but it is still written while the second lands).
braid.device_group @tp size 2
func.func @two_receives_one_buffer(%x: tensor<2x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 64>}) -> (tensor<2x8xf32> {braid.output = "y"}) attributes {braid.arena_size = 256 : i64} {
  // expected-note @+1 {{the other member of the group}}
  %r0 = braid.recv from 0 on @tp {braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  // expected-error @+1 {{runs concurrently with 'braid.recv'}}
  %r1 = braid.recv from 1 on @tp {braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  %y = braid.add %r1, %x {braid.buffers = array<i64: 128, 64>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Safe: an op between the send and the receive ends the group (the send
// has completed before the receive is issued), and a send of what the
// group received starts a new group (a relay), so both may reuse bytes.
braid.device_group @tp size 2
func.func @separate_groups(%x: tensor<2x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 64>}) -> (tensor<2x8xf32> {braid.output = "y"}) attributes {braid.arena_size = 256 : i64} {
  %v = braid.silu %x {braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  braid.send %v to 1 on @tp : tensor<2x8xf32>
  %w = braid.silu %x {braid.buffers = array<i64: 128, 64>} : tensor<2x8xf32>
  %r = braid.recv from 1 on @tp {braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  braid.send %r to 0 on @tp : tensor<2x8xf32>
  %y = braid.add %r, %w {braid.buffers = array<i64: 192, 64>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Safe: an event recorded on the group's stream marks the send, which
// ends the group there (runtime/P2PGroups.h); the receive may then take
// the send's bytes.
braid.device_group @tp size 2
func.func @event_ends_group(%x: tensor<2x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 64>}) -> (tensor<2x8xf32> {braid.output = "y"}) attributes {braid.arena_size = 256 : i64} {
  %v = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  braid.send %v to 1 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  %e = braid.event_record {braid.stream = 0 : i64}
  %r = braid.recv from 1 on @tp {braid.stream = 0 : i64, braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  braid.event_wait %e {braid.stream = 1 : i64}
  %w = braid.silu %x {braid.stream = 1 : i64, braid.buffers = array<i64: 192, 64>} : tensor<2x8xf32>
  %e2 = braid.event_record {braid.stream = 1 : i64}
  braid.event_wait %e2 {braid.stream = 0 : i64}
  %y = braid.add %r, %w {braid.stream = 0 : i64, braid.buffers = array<i64: 128, 64>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Safe: an event_wait on the group's stream for an event recorded on
// another stream after an op there holds back the next member, so the plan
// starts a new group at it (runtime/P2PGroups.h); that group's receive may
// take the first group's send bytes.
braid.device_group @tp size 2
func.func @wait_ends_group(%x: tensor<2x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 64>}) -> (tensor<2x8xf32> {braid.output = "y"}) attributes {braid.arena_size = 256 : i64} {
  %v = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  %w = braid.silu %x {braid.stream = 1 : i64, braid.buffers = array<i64: 192, 64>} : tensor<2x8xf32>
  %e = braid.event_record {braid.stream = 1 : i64}
  braid.send %v to 1 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  braid.event_wait %e {braid.stream = 0 : i64}
  %r = braid.recv from 1 on @tp {braid.stream = 0 : i64, braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  %y = braid.add %r, %w {braid.stream = 0 : i64, braid.buffers = array<i64: 128, 64>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Unsafe: the same wait, but for an event recorded before stream 1 issued
// anything (complete at once: the plan drops it), and one relayed back to
// the group's own stream (already behind it): neither holds back the
// receive, which stays in the send's group.
braid.device_group @tp size 2
func.func @waits_that_do_not_end_group(%x: tensor<2x8xf32> {braid.input = "x", braid.buffer = array<i64: 0, 64>}) -> (tensor<2x8xf32> {braid.output = "y"}) attributes {braid.arena_size = 256 : i64} {
  %e = braid.event_record {braid.stream = 1 : i64}
  %v = braid.silu %x {braid.stream = 0 : i64, braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  %e0 = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e0 {braid.stream = 1 : i64}
  %e1 = braid.event_record {braid.stream = 1 : i64}
  // expected-note @+1 {{the other member of the group}}
  braid.send %v to 1 on @tp {braid.stream = 0 : i64} : tensor<2x8xf32>
  braid.event_wait %e {braid.stream = 0 : i64}
  braid.event_wait %e1 {braid.stream = 0 : i64}
  // expected-error @+1 {{runs concurrently with 'braid.send'}}
  %r = braid.recv from 1 on @tp {braid.stream = 0 : i64, braid.buffers = array<i64: 64, 64>} : tensor<2x8xf32>
  %y = braid.add %r, %x {braid.stream = 0 : i64, braid.buffers = array<i64: 128, 64>} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
