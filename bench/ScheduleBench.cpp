//===- ScheduleBench.cpp - the schedule-safety passes at scale ------------===//
//
// Llama-3-70B at tp 8 (prefill of 4096 tokens and decode) with 8, 80 and
// 320 layers, every op put on one of two streams (collectives on stream 1,
// everything else on stream 0, so every collective needs events both ways).
// Times, separately: braid-insert-events, braid-plan-memory on the result,
// braid-verify-schedule on that. Each must grow linearly with the layers:
// compare the time per layer (the `per_layer` counter) across sizes.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "passes/InitAll.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <benchmark/benchmark.h>

#ifndef BRAID_SOURCE_DIR
#error "BRAID_SOURCE_DIR must point at the repository"
#endif

namespace {

enum class Stage { InsertEvents, PlanMemory, VerifySchedule };

mlir::LogicalResult runPass(mlir::ModuleOp module, Stage stage) {
  mlir::PassManager pm(module.getContext());
  switch (stage) {
  case Stage::InsertEvents:
    pm.addPass(mlir::braid::createBraidInsertEventsPass());
    break;
  case Stage::PlanMemory:
    pm.addPass(mlir::braid::createBraidPlanMemoryPass());
    break;
  case Stage::VerifySchedule:
    pm.addPass(mlir::braid::createBraidVerifySchedulePass());
    break;
  }
  return pm.run(module);
}

void scheduleBench(benchmark::State &state, Stage stage) {
  int64_t layers = state.range(0);
  auto config = braid::loadModelConfig(std::string(BRAID_SOURCE_DIR) +
                                       "/models/llama-3-70b/config.json");
  if (!config) {
    state.SkipWithError(llvm::toString(config.takeError()).c_str());
    return;
  }
  config->numLayers = layers;
  config->layerWindow.assign(size_t(layers), 0); // Llama 3: full attention
  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  braid::ImportOptions options;
  options.tp = 8;
  options.seq = 4096;
  options.dtype = braid::ElementType::BF16;
  auto imported = braid::importModel(ctx, *config, options);
  if (!imported) {
    state.SkipWithError(llvm::toString(imported.takeError()).c_str());
    return;
  }
  mlir::ModuleOp module = **imported;
  int64_t ops = 0;
  for (auto func : module.getOps<mlir::func::FuncOp>())
    for (mlir::Operation &op : func.getBody().front()) {
      if (mlir::braid::isUnscheduledOp(&op))
        continue;
      mlir::braid::setStream(
          &op, llvm::isa<mlir::braid::CollectiveOpInterface>(op) ? 1 : 0);
      ++ops;
    }
  // The input each stage sees in the pipeline: the stages before it done.
  for (Stage before : {Stage::InsertEvents, Stage::PlanMemory})
    if (before < stage && mlir::failed(runPass(module, before))) {
      state.SkipWithError("an earlier stage failed");
      return;
    }
  for (auto _ : state) {
    state.PauseTiming();
    mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
    state.ResumeTiming();
    if (mlir::failed(runPass(*copy, stage))) {
      state.SkipWithError("the pass failed");
      return;
    }
  }
  state.counters["ops"] = double(ops);
  // Seconds per layer (printed with an SI prefix): flat when linear.
  state.counters["per_layer"] = benchmark::Counter(
      double(layers), benchmark::Counter::kIsIterationInvariantRate |
                          benchmark::Counter::kInvert);
}

} // namespace

BENCHMARK_CAPTURE(scheduleBench, insert_events, Stage::InsertEvents)
    ->Arg(8)->Arg(80)->Arg(320)->Arg(1280)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(scheduleBench, plan_memory, Stage::PlanMemory)
    ->Arg(8)->Arg(80)->Arg(320)->Arg(1280)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(scheduleBench, verify_schedule, Stage::VerifySchedule)
    ->Arg(8)->Arg(80)->Arg(320)->Arg(1280)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
