//===- PlanRun.h - One plan, ready to step, on one backend ------*- C++ -*-===//
//
// braid-run's handle on a loaded plan: the CPU interpreter (ranks as
// threads) or, in a build with the CUDA executor, the GPU runner; the
// checkpoint's slices loaded into it; and the step function the generation
// loop drives.
//
// Internal to the braid-run library (runtime/cli): its members depend on
// BRAID_HAVE_CUDA, which only the library's own sources are compiled with.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CLI_PLANRUN_H
#define BRAID_RUNTIME_CLI_PLANRUN_H

#include "runtime/Bootstrap.h"
#include "runtime/Generation.h"
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"
#include "runtime/Profile.h"
#include "runtime/cli/CommandLine.h"
#ifdef BRAID_HAVE_CUDA
#include "runtime/cuda/Executor.h"
#endif

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace braid::rt::cli {

/// A ready-to-step run of one plan on one backend.
struct PlanRun {
  LoadedPlan plan;
  GenerationShape shape;
  std::string backend;
  bool strict = false;
  uint64_t strictSeed = Options::kDefaultStrictSeed;
  std::unique_ptr<ThreadedRunner> cpu;
  bool profiling = false;
  std::vector<std::vector<OpTime>> profiles; // one per step, rank 0
#ifdef BRAID_HAVE_CUDA
  std::unique_ptr<cuda::CudaRunner> gpu;
  std::vector<cuda::StepTiming> timings;     // one per step run
  std::vector<cuda::StepTiming> timedDecode; // --iters
#endif

  /// A reference run (--check, --check-against): never strict.
  static Expected<std::unique_ptr<PlanRun>>
  create(const std::string &path, const Options &o, const std::string &backend);

  /// `plan`, loaded from `path`; `processes`: this process runs one rank of
  /// a multi-process run; `strict`: the CPU interpreter's strict mode.
  static Expected<std::unique_ptr<PlanRun>>
  create(const LoadedPlan &plan, const std::string &path, const Options &o,
         const std::string &backend, Bootstrap *processes, bool strict);

  /// Runs `function` on every rank this process holds; each rank's outputs.
  Expected<std::vector<std::map<std::string, HostTensor>>>
  runAll(const std::string &function, const StepInputs &inputs);

  /// The generation loop's step: rank 0's outputs, after gathering
  /// sharded logits and checking that every rank holds the same.
  StepFn stepFn();
  /// World ranks this process runs, in the order runAll returns them.
  std::vector<int> heldRanks() const;

private:
  /// Creates the backend's runner (CPU interpreter or GPU runner); errors
  /// name `path`.
  Status createRunner(const std::string &path, const Options &o,
                      Bootstrap *processes);
  /// --weights: every rank this process holds gets its slices.
  Status loadCheckpoint(const Options &o);
  /// Replaces each held rank's block of `function`'s logits by the whole
  /// when the plan leaves them sharded (blocks of other processes come
  /// through `processes`); otherwise leaves `outs` as is.
  Status gatherLogits(const std::string &function, const std::vector<int> &held,
                      std::vector<std::map<std::string, HostTensor>> &outs);
  /// Non-null in a multi-process run: this process is one of them.
  Bootstrap *processes = nullptr;
};

} // namespace braid::rt::cli

#endif // BRAID_RUNTIME_CLI_PLANRUN_H
