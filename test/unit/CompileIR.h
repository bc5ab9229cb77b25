//===- CompileIR.h - IR text to a plan, for IR-to-numbers tests -*- C++ -*-===//
#ifndef BRAID_TEST_UNIT_COMPILEIR_H
#define BRAID_TEST_UNIT_COMPILEIR_H

#include "passes/InitAll.h"
#include "passes/Passes.h"
#include "translate/PlanExport.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace braid::test {

/// Parses `ir`, runs the passes `addPasses` adds, plans memory, verifies
/// the schedule, shows the module to `inspect` and exports the plan; a
/// failing step fails the test and gives an empty plan.
inline std::vector<uint8_t>
compileIR(const char *ir,
          llvm::function_ref<void(mlir::PassManager &)> addPasses = {},
          llvm::function_ref<void(mlir::ModuleOp)> inspect = {}) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(ir, &ctx);
  EXPECT_TRUE(module);
  if (!module)
    return {};
  mlir::PassManager pm(&ctx);
  if (addPasses)
    addPasses(pm);
  pm.addPass(mlir::braid::createBraidPlanMemoryPass());
  pm.addPass(mlir::braid::createBraidVerifySchedulePass());
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  if (inspect)
    inspect(*module);
  auto bytes = exportPlan(*module);
  EXPECT_TRUE(mlir::succeeded(bytes));
  return mlir::succeeded(bytes) ? *bytes : std::vector<uint8_t>{};
}

} // namespace braid::test

#endif // BRAID_TEST_UNIT_COMPILEIR_H
