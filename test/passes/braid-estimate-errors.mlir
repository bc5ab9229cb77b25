// Bad targets, options and calibration files are errors that name what is
// wrong.
// RUN: not braid-opt %s --braid-estimate="target=tpu-v9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRESET
// PRESET: error: braid-estimate: unknown target 'tpu-v9' (presets: a100-sxm-x8, h100-pcie-x8, h100-sxm-2x8-ib, h100-sxm-x8, h200-x8; or give a .json path)
// RUN: not braid-opt %s --braid-estimate="target=%t.missing.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: braid-estimate: cannot read target '{{.*}}missing.json'
// A device or a directory is refused by its type before it is read
// (/dev/zero used to be read until memory ran out).
// RUN: not braid-opt %s --braid-estimate="target=/dev/zero" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVZERO
// DEVZERO: error: braid-estimate: cannot read target '/dev/zero': it is not a regular file
// RUN: not braid-opt %s --braid-estimate="calibration=/dev/zero" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CALZERO
// CALZERO: error: braid-estimate: cannot read calibration '/dev/zero': it is not a regular file
// RUN: rm -rf %t.dir.json && mkdir -p %t.dir.json
// RUN: not braid-opt %s --braid-estimate="target=%t.dir.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DIR
// DIR: error: braid-estimate: cannot read target '{{.*}}dir.json': it is a directory
// RUN: not braid-opt %s --braid-estimate="launch=warp" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LAUNCH
// LAUNCH: error: braid-estimate: launch must be 'graph' or 'eager', got 'warp'
// RUN: not braid-opt %s --braid-estimate="format=xml" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: error: braid-estimate: format must be 'text' or 'json', got 'xml'
//
// RUN: sed 's/"memory_bandwidth_gbs": 1000/"memory_bandwidth_gbs": -3/' %S/Inputs/round-numbers-target.json > %t.neg.json
// RUN: not braid-opt %s --braid-estimate="target=%t.neg.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: braid-estimate: {{.*}}neg.json: gpu.memory_bandwidth_gbs: expected a positive number
// Finite but absurd values are refused too: 1e308 GiB made braid-schedule's
// memory bound wrap to a negative int64.
// RUN: sed 's/"memory_gib": [0-9.]*/"memory_gib": 1e308/' %S/Inputs/round-numbers-target.json > %t.huge.json
// RUN: not braid-opt %s --braid-estimate="target=%t.huge.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: braid-estimate: {{.*}}huge.json: gpu.memory_gib: expected a number in [1e-6, 1e6], got 1e+308
// RUN: grep -v '"memory_gib"' %S/Inputs/round-numbers-target.json > %t.nomem.json
// RUN: not braid-opt %s --braid-estimate="target=%t.nomem.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFIELD
// NOFIELD: error: braid-estimate: {{.*}}nomem.json: gpu.memory_gib: missing
// RUN: sed 's/"memory_efficiency": 1.0/"memory_efficiency": 1.5/' %S/Inputs/round-numbers-target.json > %t.eff.json
// RUN: not braid-opt %s --braid-estimate="target=%t.eff.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FRACTION
// FRACTION: error: braid-estimate: {{.*}}eff.json: gpu.memory_efficiency: expected a fraction in (0, 1], got 1.5
// RUN: grep -v '"links.intra_node": ' %S/Inputs/round-numbers-target.json | sed 's/"gpu.kernel_launch_us": "test value",/"gpu.kernel_launch_us": "test value"/' > %t.nosrc.json
// RUN: not braid-opt %s --braid-estimate="target=%t.nosrc.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SOURCE
// SOURCE: error: braid-estimate: {{.*}}nosrc.json: sources.links.intra_node: missing
// RUN: sed 's/"nodes": 1/"nodes": 2/' %S/Inputs/round-numbers-target.json > %t.twonode.json
// RUN: not braid-opt %s --braid-estimate="target=%t.twonode.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INTER
// INTER: error: braid-estimate: {{.*}}twonode.json: links.inter_node: missing
// RUN: printf '{"name": ' > %t.trunc.json
// RUN: not braid-opt %s --braid-estimate="target=%t.trunc.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=JSON
// JSON: error: braid-estimate: {{.*}}trunc.json: not valid JSON
//
// RUN: printf 'op,shape\n' > %t.badheader.csv
// RUN: not braid-opt %s --braid-estimate="calibration=%t.badheader.csv" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CSVHEAD
// CSVHEAD: error: braid-estimate: {{.*}}badheader.csv:1: expected the header 'op,shape,us'
// RUN: printf 'op,shape,us\nmatmul,4x4;4x4,fast\n' > %t.badtime.csv
// RUN: not braid-opt %s --braid-estimate="calibration=%t.badtime.csv" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CSVTIME
// CSVTIME: error: braid-estimate: {{.*}}badtime.csv:2: 'fast' is not a time in microseconds
// A time past 1000 s per op (its sums reach infinity: 1e308 us printed a
// 300-digit step), and a second time for the same op and shapes (the last
// one silently won).
// RUN: printf 'op,shape,us\nmatmul,4x4;4x4,1e308\n' > %t.hugetime.csv
// RUN: not braid-opt %s --braid-estimate="calibration=%t.hugetime.csv" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CSVHUGE
// CSVHUGE: error: braid-estimate: {{.*}}hugetime.csv:2: '1e308' microseconds is more than 1e9 (1000 s) for one op
// RUN: printf 'op,shape,us\nmatmul,4x4;4x4,10\nbraid.matmul, 4x4;4x4 ,20\n' > %t.twice.csv
// RUN: not braid-opt %s --braid-estimate="calibration=%t.twice.csv" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CSVTWICE
// CSVTWICE: error: braid-estimate: {{.*}}twice.csv:3: a second time for braid.matmul with operand shapes '4x4;4x4'
//
// Hostile targets (issue 15). 40,000 nested arrays overflowed llvm::json's
// recursion (SIGSEGV); the nesting is bounded before parsing.
// RUN: %python -c "print('{\"name\": ' + '[' * 40000 + ']' * 40000 + '}')" > %t.deep.json
// RUN: not braid-opt %s --braid-estimate="target=%t.deep.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: error: braid-estimate: {{.*}}deep.json:1:73: JSON nests arrays and objects deeper than 64 levels
// nodes x gpus_per_node overflowed int (each is at most 2^20).
// RUN: sed 's/"nodes": 1/"nodes": 1048576/; s/"gpus_per_node": 8/"gpus_per_node": 1048576/' %S/Inputs/round-numbers-target.json > %t.huge.json
// RUN: not braid-opt %s --braid-estimate="target=%t.huge.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GPUS
// GPUS: error: braid-estimate: {{.*}}huge.json: gpus_per_node: nodes 1048576 x gpus_per_node 1048576 exceeds 1048576 GPUs
// A group of 2^32 ranks was an int 0 here (SIGFPE): the verifier refuses it.
// RUN: sed 's/@tp size 16/@tp size 4294967296/' %s > %t.group.mlir
// RUN: not braid-opt %t.group.mlir --braid-estimate -o /dev/null 2>&1 | FileCheck %s --check-prefix=GROUP
// GROUP: error: device_group @tp: size must be in [1, 1048576], got 4294967296
//
// A module larger than the machine.
// RUN: not braid-opt %s --braid-estimate="target=h100-sxm-x8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WORLD
// WORLD: error: braid-estimate: the module spans 16 ranks, target 'h100-sxm-x8' has 8 GPUs
braid.device_group @tp size 16
func.func @f(%x: tensor<4xf32> {braid.input = "x"}) -> (tensor<4xf32> {braid.output = "y"}) {
  %y = braid.silu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
