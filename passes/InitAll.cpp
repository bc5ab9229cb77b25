//===- InitAll.cpp --------------------------------------------------------===//
#include "passes/InitAll.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void braid::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::braid::BraidDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
}

void braid::registerAllPasses() {
  mlir::braid::registerBraidPasses();
  registerPipelines();
  // Generic cleanups users combine with braid passes.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}
