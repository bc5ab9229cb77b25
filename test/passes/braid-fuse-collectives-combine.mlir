// Combining independent all_reduces (braid-fuse-collectives combine-bytes).
// RUN: braid-opt %s --braid-fuse-collectives=combine-bytes=192 --split-input-file | FileCheck %s
// One byte under what the two need together: left apart.
// RUN: braid-opt %s --braid-fuse-collectives=combine-bytes=191 --split-input-file | FileCheck %s --check-prefix=UNDER
// Off by default.
// RUN: braid-opt %s --braid-fuse-collectives --split-input-file | FileCheck %s --check-prefix=UNDER
// A negative count is refused (braid-compile's --combine-collectives too).
// RUN: not braid-opt %s --braid-fuse-collectives=combine-bytes=-1 --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: braid-fuse-collectives: combine-bytes must be a byte count, 0 or more (0: never), got -1

braid.device_group @tp size 2
braid.device_group @dp size 2

// 128 + 64 bytes: packed at the second, sliced back apart.
// CHECK-LABEL: func.func @two
// CHECK-NEXT: %[[FA:.*]] = braid.reshape %arg0 : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[C:.*]] = braid.concat %[[FA]], %arg1 dim 0 : (tensor<32xf32>, tensor<16xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[R:.*]] = braid.all_reduce sum %[[C]] on @tp : tensor<48xf32> -> tensor<48xf32>
// CHECK-NEXT: %[[SA:.*]] = braid.slice %[[R]] offsets [0] sizes [32]
// CHECK-NEXT: %[[RA:.*]] = braid.reshape %[[SA]] : tensor<32xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[RB:.*]] = braid.slice %[[R]] offsets [32] sizes [16]
// CHECK-NEXT: return %[[RA]], %[[RB]]
// UNDER-LABEL: func.func @two
// UNDER-NEXT: braid.all_reduce sum %arg0
// UNDER-NEXT: braid.all_reduce sum %arg1
func.func @two(%a: tensor<4x8xf32>, %b: tensor<16xf32>) -> (tensor<4x8xf32>, tensor<16xf32>) {
  %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  %rb = braid.all_reduce sum %b on @tp : tensor<16xf32> -> tensor<16xf32>
  return %ra, %rb : tensor<4x8xf32>, tensor<16xf32>
}

// The second reads the first's result: never packed.
// CHECK-LABEL: func.func @dependent
// CHECK-NEXT: %[[RA:.*]] = braid.all_reduce sum %arg0 on @tp : tensor<16xf32>
// CHECK-NEXT: %[[M:.*]] = braid.mul %[[RA]], %arg1
// CHECK-NEXT: braid.all_reduce sum %[[M]] on @tp : tensor<16xf32>
func.func @dependent(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %ra = braid.all_reduce sum %a on @tp : tensor<16xf32> -> tensor<16xf32>
  %m = braid.mul %ra, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %rb = braid.all_reduce sum %m on @tp : tensor<16xf32> -> tensor<16xf32>
  return %rb : tensor<16xf32>
}

// Another collective of the group in between (packing would reorder the
// group's collectives); a different group, kind or element type: never
// packed together.
// CHECK-LABEL: func.func @incompatible
// CHECK-NEXT: braid.all_reduce sum %arg0 on @tp : tensor<16xf32>
// CHECK-NEXT: braid.all_gather %arg1 on @tp dim 0
// CHECK-NEXT: braid.all_reduce sum %arg0 on @tp : tensor<16xf32>
// CHECK-NEXT: braid.all_reduce sum %arg0 on @dp : tensor<16xf32>
// CHECK-NEXT: braid.all_reduce max %arg0 on @tp : tensor<16xf32>
// CHECK-NEXT: braid.all_reduce sum %arg2 on @tp : tensor<16xbf16>
func.func @incompatible(%a: tensor<16xf32>, %b: tensor<4xf32>, %h: tensor<16xbf16>) -> (tensor<16xf32>, tensor<8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xbf16>) {
  %r0 = braid.all_reduce sum %a on @tp : tensor<16xf32> -> tensor<16xf32>
  %g = braid.all_gather %b on @tp dim 0 : tensor<4xf32> -> tensor<8xf32>
  %r1 = braid.all_reduce sum %a on @tp : tensor<16xf32> -> tensor<16xf32>
  %r2 = braid.all_reduce sum %a on @dp : tensor<16xf32> -> tensor<16xf32>
  %r3 = braid.all_reduce max %a on @tp : tensor<16xf32> -> tensor<16xf32>
  %r4 = braid.all_reduce sum %h on @tp : tensor<16xbf16> -> tensor<16xbf16>
  return %r0, %g, %r1, %r2, %r3, %r4 : tensor<16xf32>, tensor<8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xbf16>
}
