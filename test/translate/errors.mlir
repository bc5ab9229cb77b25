// RUN: braid-translate --braid-to-plan %s -split-input-file -verify-diagnostics -o /dev/null

// expected-error@+1 {{argument #0 is neither a 'braid.input' nor a 'braid.state'; the plan cannot bind it}}
func.func @unbound_argument(%x: tensor<4xf32>) -> (tensor<4xf32> {braid.output = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error@+1 {{result #0 is neither a 'braid.output' nor a 'braid.state'; the plan cannot bind it}}
func.func @unbound_result(%x: tensor<4xf32> {braid.input = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error@+1 {{result #1 updates state 'cache' that no argument reads}}
func.func @state_without_argument(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}, tensor<4xf32> {braid.state = "cache"}) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @a(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  %w = braid.parameter "w" full [4] : tensor<4xf32>
  %y = braid.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @b(%x: tensor<4xf16> {braid.input = "x"}) -> (tensor<4xf16> {braid.output = "y"}) {
  // expected-error@+1 {{declares parameter 'w' differently from an earlier function (shape, dtype, padding or shard rule)}}
  %w = braid.parameter "w" full [4] : tensor<4xf16>
  %y = braid.add %x, %w : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return %y : tensor<4xf16>
}

// -----

func.func @a(%c: tensor<8xf32> {braid.state = "cache"}) -> (tensor<8xf32> {braid.state = "cache"}) {
  return %c : tensor<8xf32>
}
// expected-error@+1 {{state 'cache' (argument #0) has a different type than in an earlier function}}
func.func @b(%c: tensor<16xf32> {braid.state = "cache"}) -> (tensor<16xf32> {braid.state = "cache"}) {
  return %c : tensor<16xf32>
}

// -----

// The verifier refuses element types the runtime does not run, naming the
// argument (issue 15).
// expected-error@+1 {{func.func @f64_input: argument #0 (braid.input 'x') element type 'f64' is not one the runtime runs (bf16, f16, f32, i32 or i64)}}
func.func @f64_input(%x: tensor<4xf64> {braid.input = "x"}) -> (tensor<4xf64> {braid.output = "y"}) {
  return %x : tensor<4xf64>
}

// -----

// expected-error@+1 {{no public function to export as a plan entry}}
module {
  func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Memory-planned IR must place every arena value inside the arena.
func.func @buffer_outside_arena(%x: tensor<4xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<4xf32> {braid.output = "y"}) attributes {braid.arena_size = 512 : i64} {
  // expected-error@+1 {{buffer [512, +256) for a value of 16 bytes does not fit the arena of 512 bytes}}
  %y = braid.silu %x {braid.buffers = array<i64: 512, 256>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Kernels index a buffer as an array of its elements: an f32 value at an
// offset that is not a multiple of 4 is refused (the CPU would not notice,
// the GPU faults).
func.func @buffer_misaligned(%x: tensor<4xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<4xf32> {braid.output = "y"}) attributes {braid.arena_size = 512 : i64} {
  // expected-error@+1 {{buffer [258, +16) for a value of 'f32' elements is not aligned to their 4 bytes}}
  %y = braid.silu %x {braid.buffers = array<i64: 258, 16>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error@+1 {{buffer [0, +8) is smaller than its value of 16 bytes}}
func.func @buffer_too_small(%x: tensor<4xf32> {braid.input = "x", braid.buffer = array<i64: 0, 8>}) -> (tensor<4xf32> {braid.output = "y"}) attributes {braid.arena_size = 512 : i64} {
  %y = braid.silu %x {braid.buffers = array<i64: 256, 256>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @missing_buffer(%x: tensor<4xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<4xf32> {braid.output = "y"}) attributes {braid.arena_size = 512 : i64} {
  // expected-error@+1 {{needs a 'braid.buffers' attribute with an (offset, size) pair per result after memory planning}}
  %y = braid.silu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error@+1 {{argument #0 needs a 'braid.buffer' = array<i64: offset, size> after memory planning}}
func.func @missing_argument_buffer(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) attributes {braid.arena_size = 512 : i64} {
  %y = braid.silu %x {braid.buffers = array<i64: 256, 256>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @bad_stream(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  // expected-error@+1 {{braid.stream must be in [0, 255], got 300}}
  %y = braid.silu %x {braid.stream = 300 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A schedule the runtime would refuse is never emitted; the IR check names
// the ops where they are.
// The plan's refusal names each op with its IR location.
// expected-error-re@+1 {{refusing to emit an unsafe schedule: function 'f': op 0 (silu, stream 0, at loc("{{.*}}":{{[0-9]+}}:10)) and op 1 (gelu, stream 1, at loc("{{.*}}":{{[0-9]+}}:10)) are not ordered by streams, events or waits: both access bytes [256, 272) of the arena and at least one writes (op numbers count the plan's ops; the errors above name them in the IR)}}
module {
  func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
    // expected-note@+1 {{the other op of the unordered pair}}
    %a = braid.silu %x {braid.stream = 0 : i64} : tensor<4xf32>
    // expected-error@+1 {{'braid.gelu' op on stream 1 is not ordered with 'braid.silu' on stream 0}}
    %b = braid.gelu none %a {braid.stream = 1 : i64} : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

// A nested module's functions would be left out of the plan: refused.
// expected-error@+1 {{'builtin.module' at the top level is not part of a plan: only func.func and braid.device_group are exported}}
module @inner {
  func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
    return %x : tensor<4xf32>
  }
}
func.func @g(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  return %x : tensor<4xf32>
}
