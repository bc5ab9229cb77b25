// braid-sequence-parallel prices the rewritten function against the
// original with both as the pipeline leaves them: braid-narrow-gathers
// runs on both copies. Here a 32 MiB all_gather that sequence parallelism
// does not touch is read by a 2-column slice; priced whole in the original
// only, it made SP look 0.082 -> 0.059 ms and kept it. Narrowed in both,
// the original costs what braid-estimate says of it narrowed, and SP does
// not pay.
// RUN: braid-opt %s --braid-narrow-gathers --braid-estimate=target=h100-sxm-x8 -o /dev/null > %t.priced
// RUN: braid-opt %s --braid-sequence-parallel=report=true -o /dev/null 2>> %t.priced
// RUN: FileCheck %s < %t.priced
// CHECK: step time (T) [[NARROWED:[0-9.]+]] ms
// CHECK: braid-sequence-parallel: @layer: left alone: does not pay: step [[NARROWED]] ms -> {{[0-9.]+}} ms on h100-sxm-x8

braid.device_group @tp size 2

func.func @layer(%e: tensor<1x8x16xf32>, %o: tensor<1x8x16xf32>, %v: tensor<1x1x4194304xf32>) -> (tensor<1x1x16xf32>, tensor<1x1x2xf32>) {
  %w1 = braid.parameter "ln1" full [16] : tensor<16xf32>
  %x = braid.all_reduce sum %e on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %n = braid.rms_norm %x, %w1 {epsilon = 1.0e-05 : f64} : (tensor<1x8x16xf32>, tensor<16xf32>) -> tensor<1x8x16xf32>
  %wq = braid.parameter "wq" full [16, 32] shard_dim 1 on @tp : tensor<16x16xf32>
  %q = braid.matmul %n, %wq : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %p = braid.add %q, %o : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %r = braid.all_reduce sum %p on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = braid.add %x, %r : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %l = braid.slice %h offsets [0, 7, 0] sizes [1, 1, 16] : tensor<1x8x16xf32> -> tensor<1x1x16xf32>
  %vg = braid.all_gather %v on @tp dim 2 : tensor<1x1x4194304xf32> -> tensor<1x1x8388608xf32>
  %vs = braid.slice %vg offsets [0, 0, 5] sizes [1, 1, 2] : tensor<1x1x8388608xf32> -> tensor<1x1x2xf32>
  return %l, %vs : tensor<1x1x16xf32>, tensor<1x1x2xf32>
}
