//===- CompileReport.cpp - what the default pipeline bought ---------------===//
#include "passes/CompileReport.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/cost/Timeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <optional>

using mlir::IntegerAttr;
using mlir::ModuleOp;
namespace func = mlir::func;
namespace cost = ::braid::cost;

/// "12.345 ms (6.7% of the step)"
static std::string exposed(const cost::Timeline &t) {
  return cost::formatMs(t.exposedComm) + " (" +
         cost::formatPercent(t.stepTime > 0 ? t.exposedComm / t.stepTime
                                            : 0.0) +
         " of the step)";
}

/// The report's lines that need no price: token chunks and the arena.
static void printLayout(llvm::raw_ostream &os, func::FuncOp func) {
  auto chunks = func->getAttrOfType<IntegerAttr>(mlir::braid::kTokenChunksAttr);
  os << "  token chunks            " << (chunks ? chunks.getInt() : 1) << "\n";
  auto arena = func->getAttrOfType<IntegerAttr>(mlir::braid::kArenaSizeAttr);
  auto bound =
      func->getAttrOfType<IntegerAttr>(mlir::braid::kArenaLowerBoundAttr);
  os << "  arena                   "
     << (arena ? std::to_string(arena.getInt()) + " bytes" : "unplanned")
     << ", liveness lower bound "
     << (bound ? std::to_string(bound.getInt()) + " bytes" : "unknown") << "\n";
}

llvm::Error braid::printCompileReport(llvm::raw_ostream &os, ModuleOp compiled,
                                      ModuleOp serial,
                                      const std::string &target) {
  llvm::Expected<cost::Target> tgt = cost::resolveTarget(target);
  if (!tgt)
    return tgt.takeError();
  cost::CostModel model(*tgt, cost::LaunchMode::Graph, compiled);
  std::optional<cost::CostModel> serialModel;
  if (serial)
    serialModel.emplace(*tgt, cost::LaunchMode::Graph, serial);
  for (auto func : compiled.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate())
      continue;
    if (!func.getBody().hasOneBlock())
      return llvm::createStringError("@" + func.getSymName().str() +
                                     " has more than one block");
    os << "@" << func.getSymName() << " on " << tgt->name << ":\n";
    if (std::string problem = model.fitProblem(); !problem.empty()) {
      // Every collective would cost infinity.
      os << "  step                    not priced: " << problem << "\n";
      printLayout(os, func);
      continue;
    }
    cost::Timeline now = cost::simulate(func, model);
    auto before = serial ? serial.lookupSymbol<func::FuncOp>(func.getSymName())
                         : func::FuncOp();
    if (before && before.getBody().hasOneBlock()) {
      cost::Timeline was = cost::simulate(before, *serialModel);
      double change =
          was.stepTime > 0 ? 100 * (now.stepTime / was.stepTime - 1) : 0.0;
      os << llvm::formatv("  step                    {0} serial -> {1} "
                          "({2}{3:F1}%)\n",
                          cost::formatMs(was.stepTime),
                          cost::formatMs(now.stepTime), change >= 0 ? "+" : "",
                          change);
      os << "  exposed communication   " << exposed(was) << " -> "
         << exposed(now) << "\n";
    } else {
      os << "  step                    " << cost::formatMs(now.stepTime)
         << "\n";
      os << "  exposed communication   " << exposed(now) << "\n";
    }
    double efficiency = now.overlapEfficiency();
    os << "  overlap efficiency      " << cost::formatPercent(efficiency)
       << (std::isnan(efficiency) ? " (nothing to overlap)" : "") << "\n";
    printLayout(os, func);
  }
  return llvm::Error::success();
}
