// A generation plan (prefill/decode with input_ids, positions, logits) whose
// prefill also multiplies an empty tensor with a huge other dim: 0 elements
// pass every element-count limit. Used by fuzz/campaign/campaign.py; it made
// braid-run spin in cpu::matmul until the dialect and the loader bounded the
// product of dims counted as at least 1 (ccb578a).
braid.device_group @tp size 1
func.func @prefill(%ids: tensor<1x4xi32> {braid.input = "input_ids"}, %pos: tensor<1x4xi32> {braid.input = "positions"}) -> (tensor<1x1x8xf32> {braid.output = "logits"}, tensor<1090921693184x0x48xf32> {braid.output = "junk"}) {
  %w = braid.parameter "w" full [1, 1, 8] : tensor<1x1x8xf32>
  %l = braid.add %w, %w : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %e = braid.slice %w offsets [0, 0, 0] sizes [0, 1, 8] : tensor<1x1x8xf32> -> tensor<0x1x8xf32>
  %a = braid.reshape %e : tensor<0x1x8xf32> -> tensor<1090921693184x0x8xf32>
  %b = braid.parameter "b" full [8, 48] : tensor<8x48xf32>
  %0 = braid.matmul %a, %b : (tensor<1090921693184x0x8xf32>, tensor<8x48xf32>) -> tensor<1090921693184x0x48xf32>
  return %l, %0 : tensor<1x1x8xf32>, tensor<1090921693184x0x48xf32>
}
func.func @decode(%ids: tensor<1x1xi32> {braid.input = "input_ids"}, %pos: tensor<1x1xi32> {braid.input = "positions"}) -> (tensor<1x1x8xf32> {braid.output = "logits"}) {
  %w = braid.parameter "w" full [1, 1, 8] : tensor<1x1x8xf32>
  %l = braid.add %w, %w : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  return %l : tensor<1x1x8xf32>
}
