//===- PlanMemory.cpp - braid-plan-memory ---------------------------------===//
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/analysis/ScheduleAnalysis.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDPLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {
struct BraidPlanMemoryPass
    : public mlir::braid::impl::BraidPlanMemoryPassBase<BraidPlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    if (alignment <= 0 || !llvm::isPowerOf2_64(uint64_t(alignment))) {
      emitError(getOperation().getLoc(),
                "braid-plan-memory: alignment must be a "
                "positive power of two, got ")
          << int64_t(alignment);
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // Bytes are reused only when every access of the old buffer
      // happens-before the new definition across streams and events.
      auto schedule = buildFunctionSchedule(func, /*memory=*/nullptr);
      if (failed(schedule))
        return signalPassFailure();
      ::braid::sched::HappensBefore hb(schedule->numStreams);
      if (!hb.build(schedule->sched)) {
        emitOpErrorAt(func) << "has a malformed schedule";
        return signalPassFailure();
      }
      FailureOr<FunctionMemoryPlan> plan = planFunctionMemory(
          func, reuse, alignment, happensBeforeOrdering(func, *schedule, hb));
      if (failed(plan))
        return signalPassFailure();
      attachMemoryPlan(func, *plan);
      if (report)
        emitRemark(func.getLoc())
            << "arena " << plan->arenaSize << " bytes, liveness lower bound "
            << plan->lowerBound << " bytes, without reuse "
            << plan->withoutReuse << " bytes ("
            << llvm::formatv("{0:F2}",
                             double(plan->withoutReuse) /
                                 double(std::max<int64_t>(plan->arenaSize, 1)))
                   .str()
            << "x smaller), " << plan->lifetimes.size() << " buffers";
    }
  }
};
} // namespace
