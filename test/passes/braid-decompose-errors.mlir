// RUN: braid-opt %s --braid-decompose -split-input-file -verify-diagnostics -o /dev/null

// A variant whose function is not in the module.
// expected-error @+1 {{a variant of @gone, which is not a function here}}
func.func private @gone.sp(%x: tensor<1x4x8xf32> {braid.input = "x"}) -> tensor<1x4x8xf32> attributes {braid.variant_of = "gone"} {
  return %x : tensor<1x4x8xf32>
}

// -----

// A variant must be a function braid-decompose can price: one block, not
// yet scheduled.
// expected-error @+1 {{braid-decompose: @f and its variants must be unscheduled single-block functions}}
func.func @f(%x: tensor<1x4x8xf32> {braid.input = "x"}) -> tensor<1x4x8xf32> {
  return %x : tensor<1x4x8xf32>
}
func.func private @f.sp(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {braid.variant_of = "f"}
