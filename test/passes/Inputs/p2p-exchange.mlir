// A symmetric exchange at tp 2: every rank sends %v to both ranks, then
// receives from both. The four adjacent point-to-point ops on one stream
// and group are issued as one group (runtime/P2PGroups.h) and run
// concurrently: the receives must land on bytes no member still uses.
braid.device_group @tp size 2
func.func @prefill(%ids: tensor<1x2xi32> {braid.input = "input_ids"}, %pos: tensor<1x2xi32> {braid.input = "positions"}) -> (tensor<1x2x64xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [64, 64] : tensor<64x64xf32>
  %e = braid.embedding %ids, %t : (tensor<1x2xi32>, tensor<64x64xf32>) -> tensor<1x2x64xf32>
  %v = braid.silu %e : tensor<1x2x64xf32>
  braid.send %v to 0 on @tp : tensor<1x2x64xf32>
  braid.send %v to 1 on @tp : tensor<1x2x64xf32>
  %r0 = braid.recv from 0 on @tp : tensor<1x2x64xf32>
  %r1 = braid.recv from 1 on @tp : tensor<1x2x64xf32>
  %s = braid.add %r0, %r1 : (tensor<1x2x64xf32>, tensor<1x2x64xf32>) -> tensor<1x2x64xf32>
  return %s : tensor<1x2x64xf32>
}
func.func @decode(%ids: tensor<1x1xi32> {braid.input = "input_ids"}, %pos: tensor<1x1xi32> {braid.input = "positions"}) -> (tensor<1x1x64xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [64, 64] : tensor<64x64xf32>
  %e = braid.embedding %ids, %t : (tensor<1x1xi32>, tensor<64x64xf32>) -> tensor<1x1x64xf32>
  return %e : tensor<1x1x64xf32>
}
