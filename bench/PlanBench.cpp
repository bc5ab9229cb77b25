//===- PlanBench.cpp - compile, plan load and interpreter speed -----------===//
//
// - compile: import + default pipeline (memory planning) + translation to a
//   plan, i.e. what `braid-compile` does, with the plan size and the arena
//   (planned, liveness lower bound, without reuse) as counters;
// - load: `loadPlan` on the serialized bytes (FlatBuffers Verifier +
//   semantic checks); what every rank pays at start-up;
// - interpreter: one prefill or decode step of the tiny model on the CPU
//   reference interpreter, all ranks as threads.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "passes/InitAll.h"
#include "passes/MemoryPlan.h"
#include "passes/Pipelines.h"
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"
#include "translate/PlanExport.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <benchmark/benchmark.h>

#ifndef BRAID_SOURCE_DIR
#error "BRAID_SOURCE_DIR must point at the repository"
#endif

namespace {

struct Compiled {
  std::vector<uint8_t> bytes;
  int64_t arena = 0, lowerBound = 0, withoutReuse = 0; // prefill
  std::string error;
};

/// With `arenaStats`, also reports the prefill arena: read back from the
/// attributes braid-plan-memory attached, plus the no-reuse total from the
/// lifetimes; kept out of the timed loop (it is not braid-compile's work).
/// `layers` > 0 replaces the config's layer count (full attention).
Compiled compile(const char *model, int64_t tp, int64_t seq, int64_t maxSeq,
                 braid::ElementType dtype, bool arenaStats = false,
                 int64_t layers = 0) {
  Compiled c;
  auto config = braid::loadModelConfig(std::string(BRAID_SOURCE_DIR) +
                                       "/models/" + model + "/config.json");
  if (!config) {
    c.error = llvm::toString(config.takeError());
    return c;
  }
  if (layers > 0) {
    config->numLayers = layers;
    config->layerWindow.assign(size_t(layers), 0);
  }
  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  braid::ImportOptions options;
  options.tp = tp;
  options.seq = seq;
  options.maxSeq = maxSeq;
  options.dtype = dtype;
  auto module = braid::importModel(ctx, *config, options);
  if (!module) {
    c.error = llvm::toString(module.takeError());
    return c;
  }
  // As braid-compile: verified once, after the pipeline.
  mlir::PassManager pm(&ctx);
  pm.enableVerifier(false);
  braid::buildDefaultPipeline(pm);
  if (mlir::failed(pm.run(**module)) || mlir::failed(mlir::verify(**module))) {
    c.error = "pipeline failed";
    return c;
  }
  for (auto func : (**module).getOps<mlir::func::FuncOp>())
    if (arenaStats && func.getSymName() == "prefill") {
      auto attached = mlir::braid::readAttachedMemoryPlan(func);
      auto lives = mlir::braid::computeLifetimes(
          func, mlir::braid::kDefaultBufferAlignment);
      if (mlir::succeeded(attached) && *attached && mlir::succeeded(lives)) {
        c.arena = (*attached)->arenaSize;
        c.lowerBound = (*attached)->lowerBound;
        for (const mlir::braid::BufferLifetime &l : *lives)
          c.withoutReuse += l.size;
      }
    }
  auto bytes = braid::exportPlan(**module);
  if (mlir::failed(bytes)) {
    c.error = "translation failed";
    return c;
  }
  c.bytes = std::move(*bytes);
  return c;
}

void compileBench(benchmark::State &state, const char *model, int64_t tp,
                  int64_t seq) {
  for (auto _ : state) {
    Compiled c = compile(model, tp, seq, 0, braid::ElementType::BF16);
    if (!c.error.empty()) {
      state.SkipWithError(c.error.c_str());
      return;
    }
  }
  Compiled c = compile(model, tp, seq, 0, braid::ElementType::BF16,
                       /*arenaStats=*/true);
  state.counters["plan_MB"] = double(c.bytes.size()) / 1e6;
  state.counters["arena_MB"] = double(c.arena) / 1e6;
  state.counters["bound_MB"] = double(c.lowerBound) / 1e6;
  state.counters["noreuse_MB"] = double(c.withoutReuse) / 1e6;
}

/// The whole of braid-compile at Llama-3-70B widths, tp 8, a prefill of
/// 4096 tokens and decode, with the layer count as the argument: time per
/// layer is flat when the compiler is linear in the model's depth.
void layersBench(benchmark::State &state) {
  int64_t layers = state.range(0);
  for (auto _ : state) {
    Compiled c = compile("llama-3-70b", 8, 4096, 4096, braid::ElementType::BF16,
                         false, layers);
    if (!c.error.empty()) {
      state.SkipWithError(c.error.c_str());
      return;
    }
  }
  // Seconds / (iterations x layers / 1000): milliseconds per layer.
  state.counters["per_layer_ms"] = benchmark::Counter(
      double(layers) / 1e3, benchmark::Counter::kIsIterationInvariantRate |
                                benchmark::Counter::kInvert);
}

void loadBench(benchmark::State &state, const char *model, int64_t tp,
               int64_t seq) {
  Compiled c = compile(model, tp, seq, 0, braid::ElementType::BF16);
  if (!c.error.empty()) {
    state.SkipWithError(c.error.c_str());
    return;
  }
  for (auto _ : state) {
    // Includes one copy of the bytes: loadPlan takes ownership.
    auto plan = braid::rt::loadPlan(c.bytes);
    if (!plan) {
      state.SkipWithError(plan.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(plan->root().functions());
  }
  state.counters["plan_MB"] = double(c.bytes.size()) / 1e6;
  state.SetBytesProcessed(int64_t(state.iterations()) *
                          int64_t(c.bytes.size()));
}

void interpreterBench(benchmark::State &state, int64_t tp,
                      const char *function) {
  Compiled c = compile("tiny-llama", tp, 16, 64, braid::ElementType::F32);
  if (!c.error.empty()) {
    state.SkipWithError(c.error.c_str());
    return;
  }
  auto plan = braid::rt::loadPlan(c.bytes);
  auto runner = plan ? braid::rt::ThreadedRunner::create(*plan)
                     : braid::rt::Expected<
                           std::unique_ptr<braid::rt::ThreadedRunner>>(
                           plan.status());
  if (!runner) {
    state.SkipWithError(runner.status().message().c_str());
    return;
  }
  int64_t tokens = std::string_view(function) == "prefill" ? 16 : 1;
  std::vector<int64_t> ids(static_cast<size_t>(tokens)),
      pos(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) {
    ids[size_t(i)] = (i * 37) % 256;
    pos[size_t(i)] = tokens == 1 ? 16 : i;
  }
  braid::rt::TensorMap inputs;
  inputs["input_ids"] =
      braid::rt::HostTensor::fromInts(braid::plan::DType::I32, {1, tokens}, ids);
  inputs["positions"] =
      braid::rt::HostTensor::fromInts(braid::plan::DType::I32, {1, tokens}, pos);
  for (auto _ : state) {
    auto out = (*runner)->run(function, {inputs});
    if (!out) {
      state.SkipWithError(out.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(out->front());
  }
  state.counters["tokens/s"] = benchmark::Counter(
      double(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

} // namespace

BENCHMARK_CAPTURE(compileBench, llama3_70b_tp8_seq4096, "llama-3-70b", 8, 4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(layersBench)
    ->Arg(8)
    ->Arg(80)
    ->Arg(320)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(loadBench, llama3_70b_tp8_seq4096, "llama-3-70b", 8, 4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(loadBench, llama3_8b_tp8_seq4096, "llama-3-8b", 8, 4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(interpreterBench, tiny_tp1_prefill16, 1, "prefill")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(interpreterBench, tiny_tp4_prefill16, 4, "prefill")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(interpreterBench, tiny_tp1_decode, 1, "decode")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(interpreterBench, tiny_tp4_decode, 4, "decode")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
