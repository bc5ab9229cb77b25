//===- Simplify.cpp - braid-simplify --------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDSIMPLIFYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {
struct BraidSimplifyPass
    : public braid::impl::BraidSimplifyPassBase<BraidSimplifyPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Only folders for now: collect the dialect's canonicalization patterns
    // (none beyond folding today) so new ones are picked up automatically.
    for (RegisteredOperationName op :
         getContext().getRegisteredOperationsByDialect("braid"))
      op.getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
