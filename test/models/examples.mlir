// The bundled example the demo runs: verifies, and braid-simplify collapses
// its reshape chain while keeping both all_reduces of the layer.
// RUN: braid-opt --braid-simplify %braid_src_root/models/examples/llama_layer_tp4.mlir | FileCheck %s

// CHECK-LABEL: func.func @layer0
// CHECK: %[[ATT:.*]] = braid.attention
// CHECK-NEXT: %[[FLAT:.*]] = braid.reshape %[[ATT]] : tensor<1x8x2x32xf32> -> tensor<1x8x64xf32>
// CHECK-NEXT: braid.matmul %[[FLAT]]
// CHECK-COUNT-2: braid.all_reduce sum
// CHECK-NOT: braid.all_reduce
