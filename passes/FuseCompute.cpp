//===- FuseCompute.cpp - braid-fuse-compute -------------------------------===//
//
// Compute patterns the runtimes run as one op (see Passes.td): today
// silu(gate) * up -> swiglu(gate, up).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDFUSECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// Schedule and placement attributes (braid.stream, events, buffers) are
/// set by later passes; an op that has any is left alone.
bool hasDiscardableAttrs(Operation *op) {
  return !op->getDiscardableAttrDictionary().empty();
}

/// The silu of `v` when `v` is a silu result read only by `user`.
SiluOp siluOnlyFeeding(Value v, Operation *user) {
  auto silu = v.getDefiningOp<SiluOp>();
  if (!silu || !v.hasOneUse() || *v.getUsers().begin() != user ||
      hasDiscardableAttrs(silu))
    return nullptr;
  return silu;
}

struct BraidFuseComputePass
    : public braid::impl::BraidFuseComputePassBase<BraidFuseComputePass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<MulOp> muls;
    getOperation().walk([&](MulOp op) { muls.push_back(op); });
    for (MulOp mul : muls)
      fuseSwiglu(mul);
  }

  void fuseSwiglu(MulOp mul) {
    Type type = mul.getType();
    if (mul.getLhs().getType() != type || mul.getRhs().getType() != type ||
        hasDiscardableAttrs(mul))
      return;
    // silu(g) * u, or u * silu(g): float products commute exactly.
    Value up = mul.getRhs();
    SiluOp silu = siluOnlyFeeding(mul.getLhs(), mul);
    if (!silu) {
      silu = siluOnlyFeeding(mul.getRhs(), mul);
      up = mul.getLhs();
    }
    if (!silu)
      return;
    OpBuilder b(mul);
    Value y = SwigluOp::create(b, mul.getLoc(), type, silu.getInput(), up);
    mul.replaceAllUsesWith(y);
    mul.erase();
    silu.erase();
  }
};

} // namespace
