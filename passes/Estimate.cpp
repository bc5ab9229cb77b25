//===- Estimate.cpp - braid-estimate --------------------------------------===//
#include "passes/Passes.h"
#include "passes/cost/Timeline.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDESTIMATEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;
namespace cost = ::braid::cost;

namespace {
struct BraidEstimatePass
    : public mlir::braid::impl::BraidEstimatePassBase<BraidEstimatePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Errors name the option, file or numbers; they are not about one op,
    // so the module is not dumped with them.
    auto fail = [&](const Twine &message) {
      mlir::emitError(module.getLoc()) << "braid-estimate: " << message;
      signalPassFailure();
    };
    if (launch != "graph" && launch != "eager")
      return fail("launch must be 'graph' or 'eager', got '" + launch + "'");
    if (format != "text" && format != "json")
      return fail("format must be 'text' or 'json', got '" + format + "'");
    llvm::Expected<cost::Target> tgt = cost::resolveTarget(target);
    if (!tgt)
      return fail(llvm::toString(tgt.takeError()));
    std::optional<cost::Calibration> calib;
    if (!calibration.empty()) {
      auto loaded = cost::Calibration::load(calibration);
      if (!loaded)
        return fail(llvm::toString(loaded.takeError()));
      calib = std::move(*loaded);
    }
    cost::CostModel model(*tgt,
                          launch == "eager" ? cost::LaunchMode::Eager
                                            : cost::LaunchMode::Graph,
                          module, calib ? &*calib : nullptr);
    if (std::string problem = model.fitProblem(); !problem.empty())
      return fail(problem);

    std::vector<cost::Timeline> timelines;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func.isPrivate())
        continue;
      if (!func.getBody().hasOneBlock())
        return fail("@" + func.getSymName() + " has more than one block");
      timelines.push_back(cost::simulate(func, model));
    }

    std::string err;
    auto out = openOutputFile(report, &err);
    if (!out)
      return fail(err);
    if (format == "json") {
      // Keyed by function name (JSON objects print sorted by key).
      llvm::json::Object all;
      for (const cost::Timeline &t : timelines)
        all[t.function] = cost::timelineJson(t, model);
      out->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(all)))
                << "\n";
    } else {
      for (const cost::Timeline &t : timelines)
        cost::printTimelineText(out->os(), t, model);
    }
    out->keep();

    if (!trace.empty()) {
      auto traceFile = openOutputFile(trace, &err);
      if (!traceFile)
        return fail(err);
      traceFile->os() << llvm::json::Value(cost::chromeTrace(timelines, model))
                      << "\n";
      traceFile->keep();
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
