// A generation plan whose prefill can never finish: every rank receives
// from rank 0 of @tp and nobody sends (rank 0 waits for itself). braid-run
// refuses it before the step (the receive has no send to pair with).
braid.device_group @tp size 2
func.func @prefill(%ids: tensor<1x2xi32> {braid.input = "input_ids"}, %pos: tensor<1x2xi32> {braid.input = "positions"}) -> (tensor<1x2x4xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [4, 4] : tensor<4x4xf32>
  %e = braid.embedding %ids, %t : (tensor<1x2xi32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %r = braid.recv from 0 on @tp : tensor<1x2x4xf32>
  %s = braid.add %e, %r : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return %s : tensor<1x2x4xf32>
}
func.func @decode(%ids: tensor<1x1xi32> {braid.input = "input_ids"}, %pos: tensor<1x1xi32> {braid.input = "positions"}) -> (tensor<1x1x4xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [4, 4] : tensor<4x4xf32>
  %e = braid.embedding %ids, %t : (tensor<1x1xi32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  return %e : tensor<1x1x4xf32>
}
