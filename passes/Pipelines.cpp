//===- Pipelines.cpp - braid's default pass pipeline ----------------------===//
#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

void braid::buildDefaultPipeline(mlir::OpPassManager &pm,
                                 const PipelineOptions &options) {
  if (options.fuseCollectives)
    pm.addPass(mlir::braid::createBraidFuseCollectivesPass());
  pm.addPass(mlir::braid::createBraidSimplifyPass());
  pm.addPass(mlir::braid::createBraidPlanMemoryPass());
  // Nothing leaves the compiler unless its schedule is proven safe.
  pm.addPass(mlir::braid::createBraidVerifySchedulePass());
}

void braid::registerPipelines() {
  mlir::PassPipelineRegistration<>(
      "braid-default-pipeline",
      "braid-compile's pipeline: simplify, plan memory, verify the schedule",
      [](mlir::OpPassManager &pm) { buildDefaultPipeline(pm); });
}
