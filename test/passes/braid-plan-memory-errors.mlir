// RUN: braid-opt %s --braid-plan-memory -split-input-file -verify-diagnostics
//
// Values of other dialects' ops have no arena size unless they are braid
// tensors: an `index` tensor crashed tensorBytes() (issue 15).

func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  // expected-error@+1 {{memory planning: value element type 'index' is not one the runtime runs (bf16, f16, f32, i32 or i64)}}
  %c = arith.constant dense<1> : tensor<4xindex>
  return %x : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  // expected-error@+1 {{memory planning: value 'tensor<2097152x1048576xf32>' has 2199023255552 elements; a braid tensor holds at most 2^40 = 1099511627776}}
  %c = arith.constant dense<1.0> : tensor<2097152x1048576xf32>
  return %x : tensor<4xf32>
}

// -----

// Two buffers aligned to 2^62 bytes total 2^63: the arena overflowed int64
// into a negative size.
// RUN: echo 'func.func @f(%%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) { %%y = braid.silu %%x : tensor<4xf32> return %%y : tensor<4xf32> }' > %t.align.mlir
// RUN: not braid-opt %t.align.mlir --braid-plan-memory=alignment=4611686018427387904 -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALIGN
// ALIGN: error: 'func.func' op buffers total more than int64 bytes
func.func @g(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  return %x : tensor<4xf32>
}
