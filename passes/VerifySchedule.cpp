//===- VerifySchedule.cpp - braid-verify-schedule -------------------------===//
#include "passes/Passes.h"
#include "passes/analysis/ScheduleAnalysis.h"
#include "passes/analysis/ScheduleConflicts.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDVERIFYSCHEDULEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;
namespace sched = ::braid::sched;

namespace {
struct BraidVerifySchedulePass
    : public mlir::braid::impl::BraidVerifySchedulePassBase<BraidVerifySchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    bool ok = true;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // A plan must not carry an alternative nobody chose between.
      if (auto of = func->getAttrOfType<StringAttr>(kVariantOfAttr)) {
        emitError(func.getLoc(), "braid-verify-schedule: @")
            << func.getSymName() << " is a variant of @" << of.getValue()
            << " that braid-decompose has not chosen between";
        ok = false;
        continue;
      }
      ok &= succeeded(verifyFunction(func));
    }
    if (!ok)
      signalPassFailure();
  }

  LogicalResult verifyFunction(func::FuncOp func) {
    auto memory = readAttachedMemoryPlan(func);
    if (failed(memory))
      return failure();
    auto schedule =
        buildFunctionSchedule(func, *memory ? &**memory : nullptr);
    if (failed(schedule))
      return failure();
    bool ok = true;
    if (auto o = sched::firstEntryOverlap(schedule->entryAccesses)) {
      auto name = [&](size_t k) {
        unsigned n = schedule->entryArguments[k].getArgNumber();
        auto input = func.getArgAttrOfType<StringAttr>(n, "braid.input");
        return input ? "input '" + input.getValue().str() + "'"
                     : "argument #" + std::to_string(n);
      };
      // At the function, without printing it (it may be a whole model).
      emitError(func.getLoc())
          << "@" << func.getSymName() << ": " << name(o->first) << " and "
          << name(o->second) << " share bytes [" << o->both.begin << ", "
          << o->both.end << ") of " << schedule->describeSpace(o->both.space)
          << " (each is copied in before the first op)";
      ok = false;
    }
    sched::CheckOptions options;
    options.concurrentCommunicators = concurrentCommunicators;
    std::vector<sched::Conflict> conflicts = sched::findConflicts(
        schedule->sched, schedule->numStreams, schedule->accesses,
        schedule->collectives, options);
    for (const sched::Conflict &c : conflicts)
      (void)emitScheduleConflict(*schedule, c);
    return success(ok && conflicts.empty());
  }
};
} // namespace
