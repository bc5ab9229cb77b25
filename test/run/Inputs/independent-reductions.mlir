// A generation plan with two independent all_reduces of @tp per step (of
// different shapes): braid-fuse-collectives combine-bytes packs them into
// one (test/run/fuse-collectives.test runs both).
braid.device_group @tp size 2
func.func @prefill(%ids: tensor<1x2xi32> {braid.input = "input_ids"}, %pos: tensor<1x2xi32> {braid.input = "positions"}) -> (tensor<1x2x8xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [8, 8] : tensor<8x8xf32>
  %e = braid.embedding %ids, %t : (tensor<1x2xi32>, tensor<8x8xf32>) -> tensor<1x2x8xf32>
  %w = braid.parameter "w" full [8] : tensor<8xf32>
  %m = braid.mul %e, %e : (tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %ra = braid.all_reduce sum %e on @tp : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  %rw = braid.all_reduce sum %w on @tp : tensor<8xf32> -> tensor<8xf32>
  %rm = braid.all_reduce sum %m on @tp : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  %s = braid.add %ra, %rm : (tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %y = braid.mul %s, %rw : (tensor<1x2x8xf32>, tensor<8xf32>) -> tensor<1x2x8xf32>
  return %y : tensor<1x2x8xf32>
}
func.func @decode(%ids: tensor<1x1xi32> {braid.input = "input_ids"}, %pos: tensor<1x1xi32> {braid.input = "positions"}) -> (tensor<1x1x8xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [8, 8] : tensor<8x8xf32>
  %e = braid.embedding %ids, %t : (tensor<1x1xi32>, tensor<8x8xf32>) -> tensor<1x1x8xf32>
  %w = braid.parameter "w" full [8] : tensor<8xf32>
  %m = braid.mul %e, %e : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %ra = braid.all_reduce sum %e on @tp : tensor<1x1x8xf32> -> tensor<1x1x8xf32>
  %rw = braid.all_reduce sum %w on @tp : tensor<8xf32> -> tensor<8xf32>
  %rm = braid.all_reduce sum %m on @tp : tensor<1x1x8xf32> -> tensor<1x1x8xf32>
  %s = braid.add %ra, %rm : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %y = braid.mul %s, %rw : (tensor<1x1x8xf32>, tensor<8xf32>) -> tensor<1x1x8xf32>
  return %y : tensor<1x1x8xf32>
}
