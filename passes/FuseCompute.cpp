//===- FuseCompute.cpp - braid-fuse-compute -------------------------------===//
//
// Compute patterns the runtimes run as one op (see Passes.td):
// silu(gate) * up -> swiglu(gate, up); rms_norm(x + r) -> add_rms_norm,
// which also returns the sum.
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
    SmallVector<RmsNormOp> norms;
    getOperation().walk([&](RmsNormOp op) { norms.push_back(op); });
    for (RmsNormOp norm : norms)
      fuseAddRmsNorm(norm);
  }

  /// rms_norm(x + r): the sum may have other readers (the residual stream
  /// goes on); they read the fused op's sum. The fused op takes the norm's
  /// place when no other reader of the sum comes before it, else the add's
  /// place when the weight is already defined there; otherwise nothing.
  void fuseAddRmsNorm(RmsNormOp norm) {
    auto add = norm.getInput().getDefiningOp<AddOp>();
    if (!add || hasDiscardableAttrs(add) || hasDiscardableAttrs(norm))
      return;
    Type type = add.getType();
    if (add.getLhs().getType() != type || add.getRhs().getType() != type ||
        norm.getType() != type || add->getBlock() != norm->getBlock())
      return;
    Operation *at = norm;
    for (Operation *user : add->getUsers())
      if (user != norm &&
          (user->getBlock() != norm->getBlock() || user->isBeforeInBlock(norm)))
        at = add;
    if (at == add.getOperation()) {
      Operation *weight = norm.getWeight().getDefiningOp();
      if (weight && (weight->getBlock() != add->getBlock() ||
                     !weight->isBeforeInBlock(add)))
        return;
    }
    OpBuilder b(at);
    auto fused = AddRmsNormOp::create(b, norm.getLoc(), type, type,
                                      add.getLhs(), add.getRhs(),
                                      norm.getWeight(), norm.getEpsilonAttr());
    norm.replaceAllUsesWith(fused.getResult());
    add.replaceAllUsesWith(fused.getSum());
    norm.erase();
    add.erase();
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
