// A generation plan whose logits go through reduce_scatter then all_gather
// along one dim of @tp: braid-fuse-collectives folds the pair into one
// all_reduce (test/run/fuse-collectives.test runs both).
braid.device_group @tp size 2
func.func @prefill(%ids: tensor<1x2xi32> {braid.input = "input_ids"}, %pos: tensor<1x2xi32> {braid.input = "positions"}) -> (tensor<1x2x8xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [8, 8] : tensor<8x8xf32>
  %e = braid.embedding %ids, %t : (tensor<1x2xi32>, tensor<8x8xf32>) -> tensor<1x2x8xf32>
  %s = braid.reduce_scatter sum %e on @tp dim 2 : tensor<1x2x8xf32> -> tensor<1x2x4xf32>
  %g = braid.all_gather %s on @tp dim 2 : tensor<1x2x4xf32> -> tensor<1x2x8xf32>
  return %g : tensor<1x2x8xf32>
}
func.func @decode(%ids: tensor<1x1xi32> {braid.input = "input_ids"}, %pos: tensor<1x1xi32> {braid.input = "positions"}) -> (tensor<1x1x8xf32> {braid.output = "logits"}) {
  %t = braid.parameter "embed" full [8, 8] : tensor<8x8xf32>
  %e = braid.embedding %ids, %t : (tensor<1x1xi32>, tensor<8x8xf32>) -> tensor<1x1x8xf32>
  %s = braid.reduce_scatter sum %e on @tp dim 2 : tensor<1x1x8xf32> -> tensor<1x1x4xf32>
  %g = braid.all_gather %s on @tp dim 2 : tensor<1x1x4xf32> -> tensor<1x1x8xf32>
  return %g : tensor<1x1x8xf32>
}
