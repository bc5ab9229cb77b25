//===- ImportBench.cpp - braid-import speed on real model shapes ----------===//
//
// Imports a bundled config into a verified module (prefill + decode), the
// work `braid-import` does before printing. The headline case is
// Llama-3-70B at tp 8 with a 4096-token prefill.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "passes/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <benchmark/benchmark.h>

#ifndef BRAID_SOURCE_DIR
#error "BRAID_SOURCE_DIR must point at the repository"
#endif

static void importBench(benchmark::State &state, const char *model,
                        int64_t tp, int64_t seq) {
  auto config = braid::loadModelConfig(std::string(BRAID_SOURCE_DIR) +
                                       "/models/" + model + "/config.json");
  if (!config) {
    state.SkipWithError(llvm::toString(config.takeError()).c_str());
    return;
  }
  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  braid::ImportOptions options;
  options.tp = tp;
  options.seq = seq;
  int64_t ops = 0;
  for (auto _ : state) {
    auto module = braid::importModel(ctx, *config, options);
    if (!module) {
      state.SkipWithError(llvm::toString(module.takeError()).c_str());
      return;
    }
    ops = 0;
    (**module).walk([&](mlir::Operation *) { ++ops; });
    benchmark::DoNotOptimize(ops);
  }
  state.counters["ops"] = (double)ops;
}

BENCHMARK_CAPTURE(importBench, llama3_70b_tp8_seq4096, "llama-3-70b", 8, 4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(importBench, llama3_8b_tp8_seq4096, "llama-3-8b", 8, 4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(importBench, gpt2_tp4_seq1024, "gpt2", 4, 1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(importBench, tiny_llama_tp4_seq16, "tiny-llama", 4, 16)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
