//===- Passes.td - braid passes ----------------------------*- tablegen -*-===//
#ifndef BRAID_PASSES_TD
#define BRAID_PASSES_TD

include "mlir/Pass/PassBase.td"

def BraidSimplifyPass : Pass<"braid-simplify", "::mlir::ModuleOp"> {
  let summary = "Fold braid reshapes and no-op slices to a fixed point";
  let description = [{
    Applies the braid dialect's folders greedily: a reshape to its operand's
    own type and a slice covering its whole operand disappear, and chains of
    reshapes collapse into one. Importers emit such chains when they move
    between `[B, S, H*D]` and `[B, S, H, D]` layouts.

    Before:
    ```mlir
    %a = braid.reshape %x : tensor<2x16x512xbf16> -> tensor<32x512xbf16>
    %b = braid.reshape %a : tensor<32x512xbf16> -> tensor<2x16x8x64xbf16>
    ```
    After:
    ```mlir
    %b = braid.reshape %x : tensor<2x16x512xbf16> -> tensor<2x16x8x64xbf16>
    ```
    Ops left without uses and free of side effects are erased.
  }];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

#endif // BRAID_PASSES_TD
