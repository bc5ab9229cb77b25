// RUN: braid-opt %s -split-input-file -verify-diagnostics
// At most 64 device groups (mesh axes); 64 verify.
// RUN: %python -c "print('\n'.join('braid.device_group @g' + str(i) + ' size 1' for i in range(65)))" > %t.groups.mlir
// RUN: not braid-opt %t.groups.mlir 2>&1 | FileCheck %s --check-prefix=GROUPS
// GROUPS: error: device_group @g64: a module declares at most 64 device groups (mesh axes)
// RUN: head -n 64 %t.groups.mlir | braid-opt | FileCheck %s --check-prefix=GROUPS64
// GROUPS64: braid.device_group @g63 size 1
//
// Hostile shapes, element types, group sizes and bindings (issue 15): each is
// a verifier error naming the op and the numbers. Before the fix, sizes
// overflowed int64 and verified (an out-of-bounds slice, a [2^32, 2^32+1]
// tensor "reshaped" to [2^32], a concat or all_gather result of size 0), a
// parameter divided by an overflowed 0 (SIGFPE), index/vector/complex
// tensors verified and crashed plan-memory, and a group of 2^32 + 2 ranks
// became a plan of 2.

// --- 1. Sizes that overflow int64 ---

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{slice: dim 0 takes [9223372036854775807, 9223372036854775807 + 2) which is outside [0, 4)}}
  %0 = braid.slice %x offsets [9223372036854775807] sizes [2] : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{slice: dim 1 takes [9223372036854775800, 9223372036854775800 + 8) which is outside [0, 8)}}
  %0 = braid.slice %x offsets [0, 9223372036854775800] sizes [4, 8] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4294967296x4294967297xf32>) {
  // expected-error@+1 {{reshape: operand #0 'tensor<4294967296x4294967297xf32>' has more elements than int64 can count; a braid tensor holds at most 2^40 = 1099511627776 elements}}
  %0 = braid.reshape %x : tensor<4294967296x4294967297xf32> -> tensor<4294967296xf32>
  return
}

// -----

// The four inputs sum to 2^64 = 0 in int64.
func.func @f(%x: tensor<4611686018427387904xf32>) {
  // expected-error@+1 {{concat: operand #0 'tensor<4611686018427387904xf32>' has dim 0 of size 4611686018427387904; a braid tensor dim is at most 2^40 = 1099511627776}}
  %0 = braid.concat %x, %x, %x, %x dim 0 : (tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>) -> tensor<0xf32>
  return
}

// -----

func.func @f(%x: tensor<2097152x1048576xbf16>) {
  // expected-error@+1 {{silu: operand #0 'tensor<2097152x1048576xbf16>' has 2199023255552 elements; a braid tensor holds at most 2^40 = 1099511627776}}
  %0 = braid.silu %x : tensor<2097152x1048576xbf16>
  return
}

// -----

func.func @f(%x: tensor<0x2199023255552xf32>) {
  // expected-error@+1 {{silu: operand #0 'tensor<0x2199023255552xf32>' has dim 1 of size 2199023255552; a braid tensor dim is at most 2^40 = 1099511627776}}
  %0 = braid.silu %x : tensor<0x2199023255552xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f(%x: tensor<1024x1073741824xf32>) {
  // expected-error@+1 {{all_gather: result #0 'tensor<4096x1073741824xf32>' has 4398046511104 elements; a braid tensor holds at most 2^40 = 1099511627776}}
  %0 = braid.all_gather %x on @tp dim 0 : tensor<1024x1073741824xf32> -> tensor<4096x1073741824xf32>
  return
}

// -----

braid.device_group @pp size 2
func.func @f() {
  // expected-error@+1 {{recv_start: result #0 handle payload 'tensor<1048577x1048576xf32>' has 1099512676352 elements; a braid tensor holds at most 2^40 = 1099511627776}}
  %h = braid.recv_start from 0 on @pp : !braid.handle<tensor<1048577x1048576xf32>>
  %x = braid.wait %h : !braid.handle<tensor<1048577x1048576xf32>> -> tensor<1048577x1048576xf32>
  return
}

// -----

// --- 3. Parameters: the whole checkpoint tensor must fit too ---

func.func @f() {
  // expected-error@+1 {{parameter 'w': full shape [4294967296, 4294967297] has more elements than int64 can count; a braid tensor holds at most 2^40 = 1099511627776}}
  %0 = braid.parameter "w" full [4294967296, 4294967297] : tensor<4x4xf32>
  return
}

// -----

braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{parameter 'w': padded shape [2048, 1073741824] has 2199023255552 elements; a braid tensor holds at most 2^40 = 1099511627776}}
  %0 = braid.parameter "w" full [2, 8] shard_dim 1 on @tp {padded_shape = array<i64: 2048, 1073741824>} : tensor<2048x268435456xf32>
  return
}

// -----

// shards x blocks = 4 x 2^62 overflowed to 0: `dim % 0` was a SIGFPE.
braid.device_group @tp size 4
func.func @f() {
  // expected-error@+1 {{parameter 'w': blocks 4611686018427387904 must be in [1, 2147483647]}}
  %0 = braid.parameter "w" full [8, 8] shard_dim 0 on @tp {blocks = 4611686018427387904 : i64} : tensor<2x8xf32>
  return
}

// -----

// --- 4. Only the element types the runtime runs ---

func.func @f(%x: tensor<4xindex>) {
  // expected-error@+1 {{'braid.reshape' op operand #0 must be statically shaped tensor of bfloat16 type or 16-bit float or 32-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xindex>'}}
  %0 = braid.reshape %x : tensor<4xindex> -> tensor<2x2xindex>
  return
}

// -----

func.func @f(%x: tensor<4xvector<4xf32>>) {
  // expected-error@+1 {{'braid.slice' op operand #0 must be statically shaped tensor of}}
  %0 = braid.slice %x offsets [0] sizes [2] : tensor<4xvector<4xf32>> -> tensor<2xvector<4xf32>>
  return
}

// -----

braid.device_group @tp size 2
func.func @f(%x: tensor<4xcomplex<f32>>) {
  // expected-error@+1 {{'braid.all_reduce' op operand #0 must be statically shaped tensor of}}
  %0 = braid.all_reduce sum %x on @tp : tensor<4xcomplex<f32>> -> tensor<4xcomplex<f32>>
  return
}

// -----

func.func @f() {
  // expected-error@+1 {{'braid.parameter' op result #0 must be statically shaped tensor of}}
  %0 = braid.parameter "w" full [4] : tensor<4xi8>
  return
}

// -----

braid.device_group @pp size 2
func.func @f() {
  // expected-error@+1 {{recv_start: result #0 handle payload element type 'index' is not one the runtime runs (bf16, f16, f32, i32 or i64)}}
  %h = braid.recv_start from 0 on @pp : !braid.handle<tensor<4xindex>>
  %x = braid.wait %h : !braid.handle<tensor<4xindex>> -> tensor<4xindex>
  return
}

// -----

// expected-error@+1 {{func.func @f: argument #0 (braid.input 'x') element type 'index' is not one the runtime runs (bf16, f16, f32, i32 or i64)}}
func.func @f(%x: tensor<4xindex> {braid.input = "x"}) -> (tensor<4xindex> {braid.output = "y"}) {
  return %x : tensor<4xindex>
}

// -----

// expected-error@+1 {{func.func @f: result #0 (braid.output 'y') type 'tensor<?xf32>' is not a statically shaped ranked tensor}}
func.func private @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<?xf32> {braid.output = "y"})

// -----

// expected-error@+1 {{func.func @f: argument #1 (braid.state 'c') 'tensor<4294967296x4294967296xf32>' has more elements than int64 can count}}
func.func private @f(%x: tensor<4xf32> {braid.input = "x"}, %c: tensor<4294967296x4294967296xf32> {braid.state = "c"})

// -----

// --- 5. Group sizes and the mesh fit the plan's int32 ---

// 2^32 + 2: the exporter wrote `world 2`, braid-estimate divided by 0.
// expected-error@+1 {{device_group @tp: size must be in [1, 1048576], got 4294967298}}
braid.device_group @tp size 4294967298

// -----

// expected-error@+1 {{device_group @tp: size must be in [1, 1048576], got -1}}
braid.device_group @tp size -1

// -----

braid.device_group @tp size 1024
// expected-error@+1 {{device_group @dp: the mesh of device groups @tp x @dp = 1024 x 2048 = 2097152 ranks exceeds the maximum world size 1048576}}
braid.device_group @dp size 2048

// -----

// --- 14. Bindings: user errors named here, not "an exporter bug" later ---

// expected-error@+1 {{func.func @f: argument #1 and argument #0 are both braid.input 'x'}}
func.func @f(%a: tensor<4xf32> {braid.input = "x"}, %b: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error@+1 {{func.func @f: result #2 and result #0 are both braid.output 'y'}}
func.func @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}, tensor<4xf32> {braid.output = "z"}, tensor<4xf32> {braid.output = "y"}) {
  return %a, %a, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{func.func @f: argument #2 and argument #1 are both braid.state 'cache'}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}, %c: tensor<4xf32> {braid.state = "cache"}, %d: tensor<4xf32> {braid.state = "cache"})

// -----

// expected-error@+1 {{func.func @f: argument #0 is both braid.input and braid.state}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x", braid.state = "s"})

// -----

// expected-error@+1 {{func.func @f: argument #0: braid.input must be a non-empty string, got 7 : i64}}
func.func private @f(%a: tensor<4xf32> {braid.input = 7})

// -----

// expected-error@+1 {{func.func @f: argument #0: braid.input must be a non-empty string, got ""}}
func.func private @f(%a: tensor<4xf32> {braid.input = ""})

// -----

// expected-error@+1 {{func.func @f: result #0 (braid.state 'cache') is 'tensor<8xf32>' but argument #1 of that state is 'tensor<16xf32>'}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}, %c: tensor<16xf32> {braid.state = "cache"}) -> (tensor<8xf32> {braid.state = "cache"})

// -----

// A sharded output: each rank returns a block of dim 1, gathered over @tp
// and cut to 7 of its 2 x 4 columns.
braid.device_group @tp size 2
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<2x4xf32> {braid.output = "logits", braid.sharded = {group = @tp, dim = 1 : i64, size = 7 : i64}})

// -----

braid.device_group @tp size 2
// expected-error@+1 {{func.func @f: result #0: braid.sharded needs braid.output on the same result: only outputs are gathered}}
func.func private @f(%c: tensor<4xf32> {braid.state = "c"}) -> (tensor<4xf32> {braid.state = "c", braid.sharded = {group = @tp, dim = 0 : i64, size = 4 : i64}})

// -----

braid.device_group @tp size 2
// expected-error@+1 {{func.func @f: result #0: braid.sharded must be {group = @g, dim = d : i64, size = n : i64}, got {dim = 0 : i64, group = "tp", size = 4 : i64}}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y", braid.sharded = {group = "tp", dim = 0 : i64, size = 4 : i64}})

// -----

braid.device_group @tp size 2
// expected-error@+1 {{func.func @f: result #0: braid.sharded dim 1 is not a dim of 'tensor<4xf32>'}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y", braid.sharded = {group = @tp, dim = 1 : i64, size = 4 : i64}})

// -----

// expected-error@+1 {{func.func @f: result #0: braid.sharded group @tp does not name a braid.device_group}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y", braid.sharded = {group = @tp, dim = 0 : i64, size = 4 : i64}})

// -----

braid.device_group @tp size 2
// expected-error@+1 {{func.func @f: result #0: braid.sharded size 9 must be in [1, 8]: 2 blocks of 4 along dim 0}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y", braid.sharded = {group = @tp, dim = 0 : i64, size = 9 : i64}})

// -----

// A size wider than i64 is refused, not cut to its low 64 bits.
braid.device_group @tp size 2
// expected-error@+1 {{func.func @f: result #0: braid.sharded must be {group = @g, dim = d : i64, size = n : i64}, got {dim = 0 : i64, group = @tp, size = 36893488147419103236 : i128}}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y", braid.sharded = {group = @tp, dim = 0 : i64, size = 36893488147419103236 : i128}})

// -----

// The gathered output is a tensor too: at most 2^40 elements.
braid.device_group @tp size 1048576
// expected-error@+1 {{func.func @f: result #0 gathered (braid.sharded) 'tensor<1099511627776x2xf32>' has 2199023255552 elements; a braid tensor holds at most 2^40 = 1099511627776}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x"}) -> (tensor<1048576x2xf32> {braid.output = "y", braid.sharded = {group = @tp, dim = 0 : i64, size = 1099511627776 : i64}})

// -----

braid.device_group @tp size 2
// expected-error@+1 {{'func.func' op braid.sharded is an attribute of a function's results (outputs); inputs are whole}}
func.func private @f(%a: tensor<4xf32> {braid.input = "x", braid.sharded = {group = @tp, dim = 0 : i64, size = 8 : i64}}) -> (tensor<4xf32> {braid.output = "y"})

// -----

// The plan loader reads both caches with one element type: a mixed pair
// verified here and then failed as "an exporter bug".
func.func @f(%q: tensor<1x4x2x8xbf16>, %kc: tensor<1x16x2x8xbf16>, %vc: tensor<1x16x2x8xf32>, %p: tensor<1xi32>) {
  // expected-error@+1 {{attention: v_cache element type 'f32' does not match 'bf16'}}
  %0:3 = braid.attention %q, %q, %q cache(%kc, %vc) at %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xf32>, tensor<1xi32>) -> (tensor<1x4x2x8xbf16>, tensor<1x16x2x8xbf16>, tensor<1x16x2x8xf32>)
  return
}

// -----

// An empty tensor may not hide a huge dim: kernels loop over it (the
// campaign's [1090921693184, 0, 8] matmul spun in the CPU kernel).
func.func @f(%x: tensor<1x0x8xf32>) -> tensor<1090921693184x0x8xf32> {
  // expected-error@+1 {{reshape: result #0 'tensor<1090921693184x0x8xf32>' has dims whose nonzero sizes multiply past 2^40 = 1099511627776 (a zero dim does not make the others free)}}
  %r = braid.reshape %x : tensor<1x0x8xf32> -> tensor<1090921693184x0x8xf32>
  return %r : tensor<1090921693184x0x8xf32>
}
