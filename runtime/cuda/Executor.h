//===- Executor.h - Run a plan on GPUs: eager streams or CUDA Graphs -*- C++ -*-===//
//
// One CudaRank per GPU. At creation a rank allocates everything once: one
// arena per function (the plan's arena_size), its parameter slices
// (deterministic weights generated on the GPU, bit-identical to the CPU
// interpreter's; or a checkpoint's, via setParameter) and zeroed state
// slots; the plan's streams and events; a cuBLASLt handle with one fixed
// workspace per stream that runs GEMMs and one GEMM plan per matmul; staging
// buffers for collectives along a non-zero dim; and one NCCL communicator
// per (device group, stream) pair the plan's collectives use, created in
// (group, stream) order on every rank (StreamPlan.h).
//
// A step copies the inputs to their fixed arena buffers, then either
// launches the ops on their streams (eager) or replays the function's CUDA
// Graph: captured on first use, instantiated once, uploaded before its
// first launch, re-captured never (shapes are static). Both enqueue the
// same sequence: stream 0 forks to the other streams the function uses
// through an event; each op waits for its plan events, runs, and records
// its plan events; a Wait on another stream than its collective's start
// waits for an event recorded right after the start; every forked stream
// joins stream 0 at the end. The KV-cache position is a device tensor, so
// the same graph serves every decode step.
//
// Faults: every CUDA/cuBLAS/NCCL error names the call, file and line. The
// ranks create their communicators only after every rank's other set-up
// succeeded. A failed step (a timeout on a stuck collective, an NCCL
// asynchronous error, any error of one rank) destroys the graphs, then
// aborts the communicators of every rank held, and ends with an error, never
// a hang (RankFaults.h).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_EXECUTOR_H
#define BRAID_RUNTIME_CUDA_EXECUTOR_H

#include "runtime/Bootstrap.h"
#include "runtime/CommMatching.h"
#include "runtime/HostTensor.h"
#include "runtime/PlanLoader.h"
#include "runtime/Profile.h"
#include "runtime/Status.h"
#include "runtime/Threads.h"
#include "runtime/Weights.h"
#include "runtime/cuda/AttentionChoice.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace braid::rt::cuda {

using TensorMap = std::map<std::string, HostTensor>;

struct ExecutorOptions {
  bool graph = true;   // replay CUDA Graphs (false: eager stream launch)
  /// Refuse a step whose sends, receives and collectives do not match
  /// across the ranks or cannot complete
  /// in NCCL's order (CommMatching.h); off only for tests of how a
  /// deadlocking exchange ends.
  bool checkCommunication = true;
  SyntheticWeights weights; // deterministic weights: seed and amplitude
  size_t gemmWorkspaceBytes = size_t(32) << 20;
  double stepTimeoutSeconds = 120; // a stuck collective ends the step
  /// GPUs to use. One process for all ranks: devices[r] runs world rank r
  /// (empty: GPU r). One process per rank: devices[local rank] (empty: the
  /// local rank modulo the GPUs the process sees; DeviceSelect.h).
  std::vector<int> devices;
  /// Run a matmul's epilogue (bias, tanh GELU: matmul_bias / matmul_gelu,
  /// decided by braid-fuse-compute) inside its cuBLASLt GEMM; off, or when
  /// cuBLASLt has no algorithm for it: as kernels after the GEMM.
  bool fuseEpilogues = true;
  /// Which kernel runs attention where the tensor-core one
  /// (AttentionTensorCore.cuh) applies: bf16/f16, head_dim 16 to 128 in the
  /// steps it is built for. Elsewhere the split kernel runs whatever this
  /// says. Auto: tensor cores for a decode step (one query per sequence)
  /// over a KV cache of at least kTensorCoreAutoCacheRows rows, where an
  /// H100 measured them faster (docs/benchmarks.md); the split kernel
  /// otherwise.
  AttentionKernel attentionKernel = AttentionKernel::Auto;
  /// Where tensor cores run attention with a KV cache, the kernel also
  /// does the cache write (one launch fewer per op; measured 22.7 -> 21.3
  /// us on an H100's 8B-shaped decode op). Off until its kernel tests pass
  /// on a GPU (docs/gpu.md).
  bool fuseCacheWrite = false;
  /// 0 or 1: each GEMM runs cuBLASLt's first heuristic choice. N > 1: at
  /// set-up each distinct GEMM (shape, epilogue, operand alignment) times up
  /// to N of the heuristic's algorithms and keeps the fastest
  /// (GemmPlan::fastest): the heuristic measured up to 1.18x off the best
  /// on prefill shapes (docs/benchmarks.md). Results differ from the
  /// heuristic's within the GEMM's rounding (another split-K or tiling).
  /// Where the stand-in buffers the timing needs do not fit next to the
  /// arena, the GEMM keeps the heuristic's choice.
  int gemmAutotune = 0;
  /// Tests only: every rank on one GPU (devices[0], or GPU 0) with the
  /// one-GPU test communicator (LocalComm.h) instead of NCCL, which refuses
  /// two ranks on one GPU.
  bool singleGpuTest = false;
  /// Tests only, with singleGpuTest (-1: none): a rank that enqueues none
  /// of its collectives, so its peers' are stuck; a rank whose step fails
  /// before it enqueues anything; a rank that fails to connect once its
  /// communicators exist, leaving its peers in their first collective.
  int testStuckRank = -1;
  int testFailingRank = -1;
  int testFailingConnectRank = -1;
  /// Tests only (0: none): in eager mode stream 0 spins on the device this
  /// long before each step's first op, as behind a collective whose peer
  /// never comes, with every later launch queued behind it (LaunchWindow.h
  /// keeps the host from blocking in a launch there).
  double testStallSeconds = 0;
  /// Time every op with CUDA events (eager only: a graph replays as one
  /// launch and has no per-op boundaries to record).
  bool profile = false;
};

/// Per-step measurements.
struct StepTiming {
  /// CUDA events around the step on stream 0: the copies of the inputs
  /// from and the outputs to page-locked memory are part of the step (of
  /// its graph), so this is the whole step's device time.
  double deviceMs = 0;
  /// Host time to enqueue the step (eager: with its waits for the launch
  /// window, LaunchWindow.h, once the GPU is far behind).
  double hostLaunchMs = 0;
  /// Host clock around the whole CudaRunner::run: rank threads started,
  /// inputs copied in, the step awaited, outputs copied out.
  double wallMs = 0;
  bool captured = false;   // this step captured (and instantiated) a graph
};

class CudaRank;
class LocalCommRegistry;
struct JointSteps;

/// The ranks of a plan this process runs: every rank, one thread per GPU;
/// or, with a multi-process Bootstrap, the process's own rank.
class CudaRunner {
public:
  /// `processes` (kept, not owned) null: every rank in this process. Else
  /// this process runs rank processes->rank() of processes->size() (which
  /// must be the plan's world size); every process must call create, and
  /// then run, collectively.
  static Expected<std::unique_ptr<CudaRunner>>
  create(LoadedPlan plan, const ExecutorOptions &options,
         Bootstrap *processes = nullptr);
  ~CudaRunner();

  /// One step on every rank held; `inputs` has one map per held rank or one
  /// for all; the result has one map per held rank.
  Expected<std::vector<TensorMap>> run(const std::string &function,
                                       const std::vector<TensorMap> &inputs);
  /// One step in which held rank i runs functions[i] (pipeline stages that
  /// exchange with send/recv); otherwise as run.
  Expected<std::vector<TensorMap>>
  runPerRank(const std::vector<std::string> &functions,
             const std::vector<TensorMap> &inputs);
  /// The first held rank's timing of the last step.
  const StepTiming &lastTiming() const { return timing_; }
  /// The first held rank's per-op times of the last step (options.profile).
  const std::vector<OpTime> &lastProfile() const { return profile_; }
  /// World ranks run by this process, ascending.
  const std::vector<int> &heldRanks() const { return held_; }
  /// Replaces parameter `name` on world rank `rank`, one this process holds
  /// (e.g. from a checkpoint).
  Status setParameter(int rank, const std::string &name,
                      const HostTensor &local);

private:
  CudaRunner() = default;
  /// runPerRank; `everyRankRunsIt`: run()'s contract, every rank of every
  /// process runs functions[0].
  Expected<std::vector<TensorMap>>
  runAssigned(const std::vector<std::string> &functions,
              const std::vector<TensorMap> &inputs, bool everyRankRunsIt);
  LoadedPlan plan_;
  bool checkCommunication_ = true;
  CommMatchingCache matching_;
  std::vector<std::unique_ptr<CudaRank>> ranks_; // by position in held_
  /// The single-GPU test mode's meeting places (null otherwise): the
  /// communicators' groups, and the ranks' steps in graph mode.
  std::shared_ptr<LocalCommRegistry> local_;
  std::shared_ptr<JointSteps> joint_;
  /// The ranks' step threads, started once (runtime/Threads.h).
  std::unique_ptr<RankThreads> threads_;
  std::vector<int> held_;
  StepTiming timing_;
  std::vector<OpTime> profile_;
};

/// Number of usable GPUs, or an error saying why there are none.
Expected<int> usableDeviceCount();

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_EXECUTOR_H
