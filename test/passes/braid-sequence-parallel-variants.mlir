// RUN: braid-opt %s --braid-sequence-parallel=variants=true --split-input-file | FileCheck %s --check-prefix=VARIANT
// RUN: braid-opt %s --braid-sequence-parallel=variants=true --braid-decompose --split-input-file | FileCheck %s
// RUN: braid-opt %s --braid-sequence-parallel="variants=true report=true" --braid-decompose=report=true --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: braid-opt %s --braid-sequence-parallel=report=true --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED

// Sequence parallelism priced after chunking and scheduling. With
// `variants`, braid-sequence-parallel keeps each function and adds its
// rewritten form as a private variant; braid-decompose prices every
// chunk count and order of both and keeps the fastest under the
// function's name. MLP layers at Llama-3-70B tp 8 widths, 4096 tokens.
//
// VARIANT-LABEL: func.func @two_layers(
// VARIANT-NOT: braid.reduce_scatter
// VARIANT: func.func private @two_layers.sp({{.*}} attributes {braid.variant_of = "two_layers"}
// VARIANT: braid.reduce_scatter sum
//
// Two layers: unscheduled, the rewrite pays; scheduled, the function as it
// is with 4 chunks side by side beats every form of the rewrite, so the
// all_reduces stay and the variant is gone.
// UNSCHEDULED: braid-sequence-parallel: @two_layers: 3 all_reduces -> reduce_scatter + all_gather over tp (dim 1), 4 ops on 1/8 of the tokens step [[BEFORE:[0-9.]+]] ms -> [[AFTER:[0-9.]+]] ms
// REPORT: braid-sequence-parallel: @two_layers: 3 all_reduces -> reduce_scatter + all_gather in the variant @two_layers.sp, which braid-decompose prices scheduled against @two_layers
// REPORT: remark: braid-decompose: 4 chunks, side by side, as it is (estimated k=1: {{.*}} with @two_layers.sp: k=1: {{.*}})
// CHECK-LABEL: func.func @two_layers(
// CHECK: braid.all_reduce
// CHECK-NOT: braid.reduce_scatter
// CHECK-NOT: @two_layers.sp
// CHECK: return
braid.device_group @tp size 8
func.func @two_layers(%x: tensor<1x4096x8192xbf16> {braid.input = "x"}) -> (tensor<1x4096x8192xbf16> {braid.output = "y"}) {
  %g = braid.parameter "g" full [8192] : tensor<8192xbf16>
  %up = braid.parameter "up" full [28672, 8192] shard_dim 0 on @tp : tensor<3584x8192xbf16>
  %down = braid.parameter "down" full [8192, 28672] shard_dim 1 on @tp : tensor<8192x3584xbf16>
  %h0 = braid.all_reduce sum %x on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %n0 = braid.rms_norm %h0, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4096x8192xbf16>, tensor<8192xbf16>) -> tensor<1x4096x8192xbf16>
  %u0 = braid.matmul %n0, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d0 = braid.matmul %u0, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r0 = braid.all_reduce sum %d0 on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %h1 = braid.add %r0, %h0 : (tensor<1x4096x8192xbf16>, tensor<1x4096x8192xbf16>) -> tensor<1x4096x8192xbf16>
  %n1 = braid.rms_norm %h1, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4096x8192xbf16>, tensor<8192xbf16>) -> tensor<1x4096x8192xbf16>
  %u1 = braid.matmul %n1, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d1 = braid.matmul %u1, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r1 = braid.all_reduce sum %d1 on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %h2 = braid.add %r1, %h1 : (tensor<1x4096x8192xbf16>, tensor<1x4096x8192xbf16>) -> tensor<1x4096x8192xbf16>
  return %h2 : tensor<1x4096x8192xbf16>
}

// -----

// Four layers: the rewrite, in 4 skewed chunks, is the fastest form; it
// takes the function's place and name.
// VARIANT-LABEL: func.func @four_layers(
// VARIANT: func.func private @four_layers.sp(
// REPORT: remark: braid-decompose: 4 chunks, skewed, the variant @four_layers.sp
// CHECK-LABEL: func.func @four_layers(
// CHECK-SAME: braid.token_chunks = 4
// CHECK: braid.reduce_scatter sum
// CHECK-NOT: braid.all_reduce
// CHECK-NOT: func.func
braid.device_group @tp size 8
func.func @four_layers(%x: tensor<1x4096x8192xbf16> {braid.input = "x"}) -> (tensor<1x4096x8192xbf16> {braid.output = "y"}) {
  %g = braid.parameter "g" full [8192] : tensor<8192xbf16>
  %up = braid.parameter "up" full [28672, 8192] shard_dim 0 on @tp : tensor<3584x8192xbf16>
  %down = braid.parameter "down" full [8192, 28672] shard_dim 1 on @tp : tensor<8192x3584xbf16>
  %h0 = braid.all_reduce sum %x on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %n0 = braid.rms_norm %h0, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4096x8192xbf16>, tensor<8192xbf16>) -> tensor<1x4096x8192xbf16>
  %u0 = braid.matmul %n0, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d0 = braid.matmul %u0, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r0 = braid.all_reduce sum %d0 on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %h1 = braid.add %r0, %h0 : (tensor<1x4096x8192xbf16>, tensor<1x4096x8192xbf16>) -> tensor<1x4096x8192xbf16>
  %n1 = braid.rms_norm %h1, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4096x8192xbf16>, tensor<8192xbf16>) -> tensor<1x4096x8192xbf16>
  %u1 = braid.matmul %n1, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d1 = braid.matmul %u1, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r1 = braid.all_reduce sum %d1 on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %h2 = braid.add %r1, %h1 : (tensor<1x4096x8192xbf16>, tensor<1x4096x8192xbf16>) -> tensor<1x4096x8192xbf16>
  %n2 = braid.rms_norm %h2, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4096x8192xbf16>, tensor<8192xbf16>) -> tensor<1x4096x8192xbf16>
  %u2 = braid.matmul %n2, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d2 = braid.matmul %u2, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r2 = braid.all_reduce sum %d2 on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %h3 = braid.add %r2, %h2 : (tensor<1x4096x8192xbf16>, tensor<1x4096x8192xbf16>) -> tensor<1x4096x8192xbf16>
  %n3 = braid.rms_norm %h3, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4096x8192xbf16>, tensor<8192xbf16>) -> tensor<1x4096x8192xbf16>
  %u3 = braid.matmul %n3, %up {transpose_b} : (tensor<1x4096x8192xbf16>, tensor<3584x8192xbf16>) -> tensor<1x4096x3584xbf16>
  %d3 = braid.matmul %u3, %down {transpose_b} : (tensor<1x4096x3584xbf16>, tensor<8192x3584xbf16>) -> tensor<1x4096x8192xbf16>
  %r3 = braid.all_reduce sum %d3 on @tp : tensor<1x4096x8192xbf16> -> tensor<1x4096x8192xbf16>
  %h4 = braid.add %r3, %h3 : (tensor<1x4096x8192xbf16>, tensor<1x4096x8192xbf16>) -> tensor<1x4096x8192xbf16>
  return %h4 : tensor<1x4096x8192xbf16>
}

// -----

// A variant never takes a name the module already has.
// VARIANT-LABEL: func.func @g(
// VARIANT: func.func private @g.sp_0({{.*}} attributes {braid.variant_of = "g"}
// VARIANT: braid.reduce_scatter sum
// VARIANT: func.func private @g.sp(%{{.*}}: tensor<1x8x16xf32>) -> tensor<1x8x16xf32> {
// VARIANT-NEXT: return
// braid-decompose keeps one form of @g and erases the variant; @g.sp, not
// a variant, stays.
// CHECK-LABEL: func.func @g(
// CHECK-NOT: @g.sp_0
// CHECK: func.func private @g.sp(
braid.device_group @tp size 2
func.func @g(%e: tensor<1x8x16xf32> {braid.input = "e"}) -> tensor<1x8x16xf32> {
  %w = braid.parameter "ln" full [16] : tensor<16xf32>
  %x = braid.all_reduce sum %e on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %n = braid.rms_norm %x, %w {epsilon = 1.0e-05 : f64} : (tensor<1x8x16xf32>, tensor<16xf32>) -> tensor<1x8x16xf32>
  return %n : tensor<1x8x16xf32>
}
func.func private @g.sp(%x: tensor<1x8x16xf32>) -> tensor<1x8x16xf32> {
  return %x : tensor<1x8x16xf32>
}
