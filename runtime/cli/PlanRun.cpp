//===- PlanRun.cpp - One plan, ready to step, on one backend --------------===//
#include "runtime/cli/PlanRun.h"

#include "runtime/Safetensors.h"
#include "runtime/ShardedOutput.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <unistd.h>

namespace braid::rt::cli {
namespace {

/// A long checkpoint load's progress: one stderr line, rewritten in place,
/// once the load has taken more than a second, and only when stderr is a
/// terminal (logs and tests stay clean). Erased when the load ends.
class LoadProgress {
public:
  LoadProgress(const plan::Plan &plan, size_t ranks)
      : enabled_(::isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {
    if (plan.parameters())
      for (const plan::Parameter *param : *plan.parameters()) {
        totalTensors_ += int64_t(ranks);
        Shape local(param->local_shape()->begin(), param->local_shape()->end());
        totalBytes_ += double(ranks) * double(numElements(local)) *
                       double(dtypeSize(param->dtype()));
      }
  }
  LoadProgress(const LoadProgress &) = delete;
  LoadProgress &operator=(const LoadProgress &) = delete;
  ~LoadProgress() {
    if (shown_) // blank the line; what follows starts at its beginning
      std::cerr << "\r" << std::string(width_, ' ') << "\r" << std::flush;
  }

  /// One slice of `bytes` (in the plan's dtype) is loaded.
  void add(size_t bytes) {
    ++tensors_;
    bytes_ += double(bytes);
    if (!enabled_)
      return;
    auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) ||
        (shown_ && now - last_ < std::chrono::milliseconds(100) &&
         tensors_ != totalTensors_))
      return;
    last_ = now;
    std::ostringstream line;
    line << std::fixed << std::setprecision(2)
         << "braid-run: loading weights: " << tensors_ << "/" << totalTensors_
         << " tensors, " << bytes_ / 1e9 << "/" << totalBytes_ / 1e9 << " GB";
    std::string text = line.str();
    width_ = std::max(width_, text.size());
    std::cerr << "\r" << text << std::flush;
    shown_ = true;
  }

private:
  bool enabled_;
  bool shown_ = false;
  size_t width_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
  int64_t tensors_ = 0, totalTensors_ = 0;
  double bytes_ = 0, totalBytes_ = 0;
};

} // namespace

Expected<std::unique_ptr<PlanRun>> PlanRun::create(const std::string &path,
                                                   const Options &o,
                                                   const std::string &backend) {
  auto plan = loadPlanFile(path, o.loadOptions());
  if (!plan)
    return plan.status();
  return create(*plan, path, o, backend, nullptr, /*strict=*/false);
}

Expected<std::unique_ptr<PlanRun>>
PlanRun::create(const LoadedPlan &plan, const std::string &path,
                const Options &o, const std::string &backend,
                Bootstrap *processes, bool strict) {
  auto shape = generationShape(plan.root());
  if (!shape)
    return errorf(path, ": ", shape.status().message());
  // --sequences picks the decode batch bucket; with prefill buckets, the
  // prompt's length picks the prefill bucket.
  shape = shapeForRun(*shape, o.sequences, o.tokens.size());
  if (!shape)
    return errorf(path, ": ", shape.status().message());
  auto run = std::make_unique<PlanRun>();
  run->plan = plan;
  run->shape = *shape;
  run->backend = backend;
  run->profiling = !o.profile.empty() || !o.trace.empty();
  run->strict = strict && backend == "cpu";
  run->processes = processes;
  BRAID_RETURN_IF_ERROR(run->createRunner(path, o, processes));
  if (o.checkpoint)
    BRAID_RETURN_IF_ERROR(run->loadCheckpoint(o));
  return run;
}

Status PlanRun::createRunner(const std::string &path, const Options &o,
                             Bootstrap *processes) {
  if (backend == "cpu") {
    RunnerOptions ro;
    ro.weights = SyntheticWeights(o.seed, o.weightScale);
    // loadCheckpoint sets every parameter (or fails).
    ro.syntheticWeights = !o.checkpoint;
    ro.collectiveTimeout = std::chrono::milliseconds(
        std::max<int64_t>(1, int64_t(o.timeout * 1000)));
    ro.testStuckRank = o.testStuckRank;
    auto runner = ThreadedRunner::create(plan, ro);
    if (!runner)
      return errorf(path, ": ", runner.status().message());
    cpu = runner.take();
    cpu->rank(0).setProfiling(profiling);
    strictSeed = o.strictSeed.value_or(Options::kDefaultStrictSeed);
    RunOptions options;
    options.strict = strict;
    options.strictSeed = strictSeed;
    // --check on the CPU backend: every op's output must be finite.
    options.checkFinite = o.check;
    cpu->setRunOptions(options);
  }
#ifdef BRAID_HAVE_CUDA
  if (backend == "cuda") {
    cuda::ExecutorOptions eo;
    eo.graph = o.graph;
    eo.weights = SyntheticWeights(o.seed, o.weightScale);
    eo.stepTimeoutSeconds = o.timeout;
    eo.profile = profiling;
    eo.devices = o.devices;
    eo.singleGpuTest = o.singleGpuTest;
    eo.attentionKernel = o.attentionKernel;
    eo.gemmAutotune = o.gemmAutotune;
    eo.fuseCacheWrite = o.fuseCacheWrite;
    eo.testStuckRank = o.testStuckRank;
    eo.testFailingRank = o.testFailingRank;
    auto runner = cuda::CudaRunner::create(plan, eo, processes);
    if (!runner)
      return errorf(path, ": ", runner.status().message());
    gpu = runner.take();
  }
#endif
  return Status::ok();
}

std::vector<int> PlanRun::heldRanks() const {
  std::vector<int> held;
#ifdef BRAID_HAVE_CUDA
  if (gpu)
    held = gpu->heldRanks();
#endif
  if (held.empty()) // the CPU interpreter: every rank
    for (int r = 0; r < plan.root().world_size(); ++r)
      held.push_back(r);
  return held;
}

Status PlanRun::loadCheckpoint(const Options &o) {
  std::vector<int> held = heldRanks();
  CheckpointLoadOptions lo;
  lo.allowUnusedWeights = o.allowUnusedWeights;
  LoadProgress progress(plan.root(), held.size());
  for (int r : held)
    BRAID_RETURN_IF_ERROR(loadCheckpointParameters(
        [&](const std::string &name, HostTensor local) -> Status {
          progress.add(local.bytes.size());
#ifdef BRAID_HAVE_CUDA
          if (gpu)
            return gpu->setParameter(r, name, local);
#endif
          return cpu->rank(r).setParameter(name, std::move(local));
        },
        plan, r, *o.checkpoint, lo));
  return Status::ok();
}

Expected<std::vector<std::map<std::string, HostTensor>>>
PlanRun::runAll(const std::string &function, const StepInputs &inputs) {
#ifdef BRAID_HAVE_CUDA
  if (gpu) {
    auto outs = gpu->run(function, {inputs});
    if (outs)
      timings.push_back(gpu->lastTiming());
    if (outs && profiling)
      profiles.push_back(gpu->lastProfile());
    return outs;
  }
#endif
  auto outs = cpu->run(function, {inputs});
  if (outs && profiling)
    profiles.push_back(cpu->rank(0).lastProfile());
  return outs;
}

StepFn PlanRun::stepFn() {
  return [this](const std::string &function, const StepInputs &inputs)
             -> Expected<std::map<std::string, HostTensor>> {
    auto outs = runAll(function, inputs);
    if (!outs)
      return outs.status();
    std::vector<int> held = heldRanks();
    BRAID_RETURN_IF_ERROR(gatherLogits(function, held, *outs));
    // Every rank must hold the same (gathered) logits.
    for (size_t i = 1; i < outs->size(); ++i)
      if ((*outs)[i].at("logits").bytes != (*outs)[0].at("logits").bytes)
        return errorf("rank ", held[i], " returned different logits than rank ",
                      held[0]);
    return (*outs)[0];
  };
}

Status
PlanRun::gatherLogits(const std::string &function, const std::vector<int> &held,
                      std::vector<std::map<std::string, HostTensor>> &outs) {
  const plan::Function *f = plan.function(function);
  const plan::Binding *b = f ? outputBinding(*f, "logits") : nullptr;
  if (!b || b->shard_group() == -1)
    return Status::ok();
  // One rank per process (mpirun): every process's block, by rank.
  std::vector<HostTensor> others;
  if (processes && processes->size() > 1) {
    // Process r runs world rank r, and only it (CudaRunner::create).
    if (held != std::vector<int>{processes->rank()})
      return errorf("internal: process ", processes->rank(),
                    " does not hold exactly its own rank");
    auto all = allGatherBlocks(*processes, outs.front().at("logits"));
    if (!all)
      return errorf("gathering the sharded logits: ", all.status().message());
    others = all.take();
  }
  return gatherOutputs(plan.root(), *f, "logits", held, outs, others);
}

} // namespace braid::rt::cli
