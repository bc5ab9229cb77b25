// An empty [22906492245, 0, 8] tensor multiplied in prefill: 22906492245 x 48
// is just under the 2^40 bound, so it compiles and loads; cpu::matmul ran
// 2.29e10 empty iterations of its batch loop (34 s in the release braid-run,
// minutes under ASan) until kernels returned at once on an empty result.
// Found by the hostile-input campaign (docs/hostile-input.md); run by
// test/run/empty-tensors.test.
braid.device_group @tp size 1
func.func @prefill(%ids: tensor<1x4xi32> {braid.input = "input_ids"}, %pos: tensor<1x4xi32> {braid.input = "positions"}) -> (tensor<1x1x8xf32> {braid.output = "logits"}, tensor<22906492245x0x48xf32> {braid.output = "junk"}) {
  %w = braid.parameter "w" full [1, 1, 8] : tensor<1x1x8xf32>
  %l = braid.add %w, %w : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %e = braid.slice %w offsets [0, 0, 0] sizes [0, 1, 8] : tensor<1x1x8xf32> -> tensor<0x1x8xf32>
  %a = braid.reshape %e : tensor<0x1x8xf32> -> tensor<22906492245x0x8xf32>
  %b = braid.parameter "b" full [8, 48] : tensor<8x48xf32>
  %0 = braid.matmul %a, %b : (tensor<22906492245x0x8xf32>, tensor<8x48xf32>) -> tensor<22906492245x0x48xf32>
  return %l, %0 : tensor<1x1x8xf32>, tensor<22906492245x0x48xf32>
}
func.func @decode(%ids: tensor<1x1xi32> {braid.input = "input_ids"}, %pos: tensor<1x1xi32> {braid.input = "positions"}) -> (tensor<1x1x8xf32> {braid.output = "logits"}) {
  %w = braid.parameter "w" full [1, 1, 8] : tensor<1x1x8xf32>
  %l = braid.add %w, %w : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  return %l : tensor<1x1x8xf32>
}
