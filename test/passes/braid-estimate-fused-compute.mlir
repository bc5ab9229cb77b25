// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-target.json format=json" -o /dev/null | FileCheck %s
//
// The cost model prices braid-fuse-compute's ops as one memory-bound
// kernel each: their operand and result bytes and one launch. On the
// round-numbers target (1000 GB/s, 1 us per graph launch; every 1024x1024
// bf16 tensor is 2 MiB, 2.097 us):
//   silu 2 tensors (4.194 us) + mul 3 (6.291 us) + 2 launches = 12.486 us;
//   swiglu 3 tensors (6.291 us) + 1 launch = 7.291 us;
//   add 3 (6.291 us) + rms_norm x, y and a 2 KiB weight (4.196 us) + 2
//   launches = 12.488 us; add_rms_norm x, r, sum, y and the weight
//   (8.391 us) + 1 launch = 9.391 us.

// CHECK: "compute_time_ns": 8391,
// CHECK: "function": "add_rms_norm",
// CHECK: "launch_gaps_ns": 1000,
// CHECK: "step_time_ns": 9391,
func.func @add_rms_norm(%x: tensor<1024x1024xbf16>, %r: tensor<1024x1024xbf16>, %w: tensor<1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) {
  %s, %y = braid.add_rms_norm %x, %r, %w {epsilon = 1.0e-05 : f64} : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>, tensor<1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>)
  return %s, %y : tensor<1024x1024xbf16>, tensor<1024x1024xbf16>
}

// CHECK: "compute_time_ns": 10488,
// CHECK: "function": "add_then_rms_norm",
// CHECK: "launch_gaps_ns": 2000,
// CHECK: "step_time_ns": 12488,
func.func @add_then_rms_norm(%x: tensor<1024x1024xbf16>, %r: tensor<1024x1024xbf16>, %w: tensor<1024xbf16>) -> (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) {
  %s = braid.add %x, %r : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  %y = braid.rms_norm %s, %w {epsilon = 1.0e-05 : f64} : (tensor<1024x1024xbf16>, tensor<1024xbf16>) -> tensor<1024x1024xbf16>
  return %s, %y : tensor<1024x1024xbf16>, tensor<1024x1024xbf16>
}

// CHECK: "compute_time_ns": 10486,
// CHECK: "function": "silu_then_mul",
// CHECK: "launch_gaps_ns": 2000,
// CHECK: "step_time_ns": 12486,
func.func @silu_then_mul(%g: tensor<1024x1024xbf16>, %u: tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16> {
  %s = braid.silu %g : tensor<1024x1024xbf16>
  %y = braid.mul %s, %u : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  return %y : tensor<1024x1024xbf16>
}

// CHECK: "compute_time_ns": 6291,
// CHECK: "function": "swiglu",
// CHECK: "launch_gaps_ns": 1000,
// CHECK: "step_time_ns": 7291,
func.func @swiglu(%g: tensor<1024x1024xbf16>, %u: tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16> {
  %y = braid.swiglu %g, %u : tensor<1024x1024xbf16>
  return %y : tensor<1024x1024xbf16>
}
