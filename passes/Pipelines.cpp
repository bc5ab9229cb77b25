//===- Pipelines.cpp - braid's default pass pipeline ----------------------===//
#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

void braid::buildDefaultPipeline(mlir::OpPassManager &pm) {
  pm.addPass(mlir::braid::createBraidSimplifyPass());
  pm.addPass(mlir::braid::createBraidPlanMemoryPass());
}

void braid::registerPipelines() {
  mlir::PassPipelineRegistration<>(
      "braid-default-pipeline",
      "braid-compile's pipeline: simplify, then plan memory",
      [](mlir::OpPassManager &pm) { buildDefaultPipeline(pm); });
}
