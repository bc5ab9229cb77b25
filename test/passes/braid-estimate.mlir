// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-target.json format=json" -o /dev/null | FileCheck %s
// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-target.json format=json" -o /dev/null | FileCheck %s --check-prefix=OVER
// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-target.json" -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-target.json launch=eager format=json" -o /dev/null | FileCheck %s --check-prefix=EAGER
// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-target.json calibration=%S/Inputs/matmul-calibration.csv format=json" -o /dev/null | FileCheck %s --check-prefix=CALIB
// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-contention-target.json format=json" -o /dev/null | FileCheck %s --check-prefix=CONTEND
// RUN: braid-opt %s --braid-estimate="target=%S/Inputs/round-numbers-contention-target.json" -o /dev/null | FileCheck %s --check-prefix=CONTEXT

// The target has round numbers: 100 TFLOP/s bf16 at efficiency 1, 1000 GB/s
// HBM at efficiency 1, 1 us per kernel (graph), 5 us per launch (eager),
// and a 10 us + 100 GB/s bus link. Every tensor below is 1024x1024 bf16 =
// 2,097,152 bytes.
//   matmul: max(2*1024^3 / 1e14 = 21.475 us, 3 * 2 MiB / 1e12 = 6.291 us)
//           + 1 us launch = 22.475 us
//   all_reduce over 4: 10 us + 2(4-1)/4 * 2 MiB / 1e11 = 41.457 us, + 1 us
//   add: 3 * 2 MiB / 1e12 = 6.291 us, + 1 us

braid.device_group @tp size 4

// Serial: T = 22.475 + 42.457 = 64.932 us, all of the all_reduce exposed.
// CHECK-LABEL: "serial": {
// CHECK: "by_op": {
// CHECK-NEXT: "all_reduce": {
// CHECK-NEXT: "count": 1,
// CHECK-NEXT: "time_ns": 41457
// CHECK: "matmul": {
// CHECK-NEXT: "count": 1,
// CHECK-NEXT: "time_ns": 21475
// CHECK: "communication_time_ns": 41457,
// CHECK-NEXT: "compute_time_ns": 21475,
// CHECK: "exposed_communication_ns": 41457,
// CHECK-NEXT: "function": "serial",
// CHECK-NEXT: "hidden_communication_ns": 0,
// CHECK-NEXT: "ideal_bound_ns": 41457,
// CHECK-NEXT: "launch": "graph",
// CHECK-NEXT: "launch_gaps_ns": 2000,
// CHECK-NEXT: "overlap_efficiency": 0,
// CHECK-NEXT: "ranks": 4,
// CHECK-NEXT: "serial_time_ns": 64932,
// CHECK-NEXT: "step_time_ns": 64932,
// CHECK-NEXT: "streams": 1,
// TEXT-LABEL: braid-estimate @serial on round-numbers (graph launch), 4 ranks, 1 streams
// TEXT-NEXT: step time (T)                   0.065 ms
// TEXT-NEXT: compute time (C)                0.021 ms
// TEXT-NEXT: communication time (M)          0.041 ms  65.9% of C+M
// TEXT-NEXT: exposed communication           0.041 ms  63.8% of T
// TEXT-NEXT: serial time (T_serial)          0.065 ms
// TEXT-NEXT: overlap efficiency                  0.0%  hidden communication / min(compute, communication) busy time
// TEXT-NEXT: ideal bound max(C, M)           0.041 ms
// TEXT-NEXT: launch gaps                     0.002 ms  T minus busy time on the critical path
// TEXT-NEXT: critical path                      2 ops  compute 0.021 ms, communication 0.041 ms
// TEXT-NEXT: by op:
// TEXT-NEXT:   all_reduce                 1 ops          0.041 ms
// TEXT-NEXT:   matmul                     1 ops          0.021 ms
// EAGER-LABEL: "serial": {
// EAGER: "step_time_ns": 69932,
func.func @serial(%a: tensor<1024x1024xbf16> {braid.input = "a"}) -> (tensor<1024x1024xbf16> {braid.output = "y"}) {
  %w = braid.parameter "w" full [1024, 1024] : tensor<1024x1024xbf16>
  %m = braid.matmul %a, %w : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  %y = braid.all_reduce sum %m on @tp : tensor<1024x1024xbf16> -> tensor<1024x1024xbf16>
  return %y : tensor<1024x1024xbf16>
}

// Scheduled: the all_reduce of %m1 runs on stream 1 (after an event from
// stream 0) under the independent %m2; the wait holds stream 0 back:
//   s0: m1 [0, 22.475]  m2 [22.475, 44.950]  wait until 64.932  add [64.932, 72.224]
//   s1: all_reduce [22.475, 64.932]
// T_serial = 2 * 22.475 + 42.457 + 7.291 = 94.698; C = 2 * 21.475 + 6.291
// = 49.241; M = 41.457; exposed = 64.932 - 44.950 = 19.982; hidden =
// 41.457 - 19.982 = 21.475 (m2's device time); overlap efficiency =
// hidden / min(C, M) = 21.475 / 41.457 = 0.51800, in [0, 1] by construction.
// Exposure counts device execution only, not the 1 us launch overheads.
// OVER-LABEL: "overlapped": {
// OVER: "communication_time_ns": 41457,
// OVER-NEXT: "compute_time_ns": 49241,
// OVER-NEXT: "contention_ns": 0,
// OVER: "exposed_communication_ns": 19982,
// OVER-NEXT: "function": "overlapped",
// OVER-NEXT: "hidden_communication_ns": 21475,
// OVER: "overlap_efficiency": 0.51799{{[0-9]*}},
// OVER: "serial_time_ns": 94698,
// OVER-NEXT: "step_time_ns": 72224,
// OVER-NEXT: "streams": 2,
// With contention (half the SMs, a quarter of HBM taken while a
// collective runs): m2 (compute-bound) runs at half rate under the
// all_reduce, [23.475, 64.932] does 20.729 us of its 21.475, the rest at
// full rate: it ends at 65.678 (20.729 us late), the add at 72.970.
// Serially nothing overlaps: no contention.
// CONTEND-LABEL: "overlapped": {
// CONTEND: "contention_ns": 2072{{[89]}},
// CONTEND: "step_time_ns": 7297{{[01]}},
// CONTEND-LABEL: "serial": {
// CONTEND: "contention_ns": 0,
// CONTEXT-LABEL: braid-estimate @overlapped
// CONTEXT: contention                      0.021 ms  compute slowed by collectives running beside it
// CALIB-LABEL: "serial": {
// CALIB: "matmul": {
// CALIB-NEXT: "count": 1,
// CALIB-NEXT: "time_ns": 100000
// CALIB: "step_time_ns": 143457,
func.func @overlapped(%a: tensor<1024x1024xbf16> {braid.input = "a"}, %b: tensor<1024x1024xbf16> {braid.input = "b"}) -> (tensor<1024x1024xbf16> {braid.output = "y"}) {
  %w = braid.parameter "w" full [1024, 1024] : tensor<1024x1024xbf16>
  %m1 = braid.matmul %a, %w {braid.stream = 0 : i64} : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  %e = braid.event_record {braid.stream = 0 : i64}
  braid.event_wait %e {braid.stream = 1 : i64}
  %h = braid.all_reduce_start sum %m1 on @tp {braid.stream = 1 : i64} : tensor<1024x1024xbf16> -> !braid.handle<tensor<1024x1024xbf16>>
  %m2 = braid.matmul %b, %w {braid.stream = 0 : i64} : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  %r = braid.wait %h {braid.stream = 0 : i64} : !braid.handle<tensor<1024x1024xbf16>> -> tensor<1024x1024xbf16>
  %y = braid.add %r, %m2 {braid.stream = 0 : i64} : (tensor<1024x1024xbf16>, tensor<1024x1024xbf16>) -> tensor<1024x1024xbf16>
  return %y : tensor<1024x1024xbf16>
}
