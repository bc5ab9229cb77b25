// A generation plan whose prefill can never finish although its messages
// pair: every rank receives from both ranks of @tp, then (after an op, so
// not in one group with them) sends to both. Each rank's receives wait for
// sends its peers issue only after their own receives. The CPU
// interpreter's collective timeout (braid-run --timeout) must end it.
braid.device_group @tp size 2
func.func @prefill(%ids: tensor<1x2xi32> {braid.input = "input_ids"}, %pos: tensor<1x2xi32> {braid.input = "positions"}) -> (tensor<1x2x4xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [4, 4] : tensor<4x4xf32>
  %e = braid.embedding %ids, %t : (tensor<1x2xi32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %r0 = braid.recv from 0 on @tp : tensor<1x2x4xf32>
  %r1 = braid.recv from 1 on @tp : tensor<1x2x4xf32>
  %s0 = braid.add %e, %r0 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %s = braid.add %s0, %r1 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  braid.send %e to 0 on @tp : tensor<1x2x4xf32>
  braid.send %e to 1 on @tp : tensor<1x2x4xf32>
  return %s : tensor<1x2x4xf32>
}
func.func @decode(%ids: tensor<1x1xi32> {braid.input = "input_ids"}, %pos: tensor<1x1xi32> {braid.input = "positions"}) -> (tensor<1x1x4xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [4, 4] : tensor<4x4xf32>
  %e = braid.embedding %ids, %t : (tensor<1x1xi32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  return %e : tensor<1x1x4xf32>
}
