// RUN: braid-translate --braid-to-plan %s -split-input-file -verify-diagnostics -o /dev/null
//
// Hostile IR never reaches the plan as "an exporter bug" (issue 15): user
// errors are named by the verifier or the exporter at the op, the runtime
// loader's refusal stays reserved for real exporter bugs.

// Duplicate input names were reported at :0:0 with the whole module dumped.
// expected-error@+1 {{func.func @f: argument #1 and argument #0 are both braid.input 'x'}}
func.func @f(%a: tensor<4xf32> {braid.input = "x"}, %b: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  %y = braid.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// 2^32 + 2 ranks were written as `world 2`.
// expected-error@+1 {{device_group @tp: size must be in [1, 1048576], got 4294967298}}
braid.device_group @tp size 4294967298
func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  %y = braid.all_reduce sum %x on @tp : tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// An `index` tensor of another dialect crashed tensorBytes().
func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  // expected-error@+1 {{memory planning: value element type 'index' is not one the runtime runs (bf16, f16, f32, i32 or i64)}}
  %c = arith.constant dense<1> : tensor<4xindex>
  return %x : tensor<4xf32>
}

// -----

// offset + size wrapped past int64 and passed the arena check.
func.func @f(%x: tensor<4xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<4xf32> {braid.output = "y"}) attributes {braid.arena_size = 512 : i64} {
  // expected-error@+1 {{buffer [9223372036854775807, +256) for a value of 16 bytes does not fit the arena of 512 bytes}}
  %y = braid.silu %x {braid.buffers = array<i64: 9223372036854775807, 256>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error@+1 {{'func.func' op has a negative braid.arena_size -512}}
func.func @f(%x: tensor<4xf32> {braid.input = "x", braid.buffer = array<i64: 0, 256>}) -> (tensor<4xf32> {braid.output = "y"}) attributes {braid.arena_size = -512 : i64} {
  %y = braid.silu %x {braid.buffers = array<i64: 256, 256>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A state result whose type differs from its argument's.
// expected-error@+1 {{func.func @f: result #1 (braid.state 'cache') is 'tensor<8xf32>' but argument #1 of that state is 'tensor<16xf32>'}}
func.func @f(%x: tensor<4xf32> {braid.input = "x"}, %c: tensor<16xf32> {braid.state = "cache"}) -> (tensor<4xf32> {braid.output = "y"}, tensor<8xf32> {braid.state = "cache"}) {
  %s = braid.slice %c offsets [0] sizes [8] : tensor<16xf32> -> tensor<8xf32>
  return %x, %s : tensor<4xf32>, tensor<8xf32>
}
