// RUN: braid-opt %s --braid-simplify | FileCheck %s

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x512xbf16>)
func.func @reshape_chain(%x: tensor<2x16x512xbf16>) -> tensor<2x16x8x64xbf16> {
  // CHECK-NEXT: %[[R:.*]] = braid.reshape %[[X]] : tensor<2x16x512xbf16> -> tensor<2x16x8x64xbf16>
  // CHECK-NEXT: return %[[R]]
  %a = braid.reshape %x : tensor<2x16x512xbf16> -> tensor<32x512xbf16>
  %b = braid.reshape %a : tensor<32x512xbf16> -> tensor<32x8x64xbf16>
  %c = braid.reshape %b : tensor<32x8x64xbf16> -> tensor<2x16x8x64xbf16>
  return %c : tensor<2x16x8x64xbf16>
}

// CHECK-LABEL: func.func @reshape_roundtrip
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @reshape_roundtrip(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NOT: braid.reshape
  // CHECK: return %[[X]]
  %a = braid.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %b = braid.reshape %a : tensor<32xf32> -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// An intermediate reshape with another user stays.
// CHECK-LABEL: func.func @shared_reshape
func.func @shared_reshape(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<2x16xf32>) {
  // CHECK: %[[A:.*]] = braid.reshape %{{.*}} : tensor<4x8xf32> -> tensor<32xf32>
  // CHECK: %[[B:.*]] = braid.reshape %{{.*}} : tensor<4x8xf32> -> tensor<2x16xf32>
  // CHECK: return %[[A]], %[[B]]
  %a = braid.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %b = braid.reshape %a : tensor<32xf32> -> tensor<2x16xf32>
  return %a, %b : tensor<32xf32>, tensor<2x16xf32>
}

// CHECK-LABEL: func.func @full_slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @full_slice(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x4xf32>) {
  // CHECK-NEXT: %[[S:.*]] = braid.slice %[[X]] offsets [0, 4] sizes [4, 4]
  // CHECK-NEXT: return %[[X]], %[[S]]
  %a = braid.slice %x offsets [0, 0] sizes [4, 8] : tensor<4x8xf32> -> tensor<4x8xf32>
  %b = braid.slice %x offsets [0, 4] sizes [4, 4] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x4xf32>
}

// Collectives are never removed, even when their result is unused: every
// rank must take part.
// CHECK-LABEL: func.func @keeps_collectives
func.func @keeps_collectives(%x: tensor<4x8xf32>) {
  // CHECK: braid.all_reduce sum
  %0 = braid.all_reduce sum %x on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}
braid.device_group @tp size 2
