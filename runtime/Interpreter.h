//===- Interpreter.h - CPU reference interpreter ----------------*- C++ -*-===//
//
// Executes a verified plan in plan order, in fp32 (bf16/f16 storage is
// converted on load and store), one Interpreter per rank. Ranks are threads
// that meet in a Communicator for collectives. Streams and events need no
// action here: the loader guarantees plan order is a valid serialization.
// Parameters are generated deterministically (runtime/Weights.h) unless
// replaced; persistent state (the KV cache) is zero at start and kept
// across run() calls.
//
// Strict mode (RunOptions::strict) instead runs the streams in a seeded
// random order that respects only what the plan orders (stream FIFO order,
// event waits, a wait after its start), runs each async collective as late
// as hardware may (at its wait; an input element that changed since the
// start reads as NaN) and poisons what a correct plan never reads: async
// payloads before the collective writes them, dead arena buffers, the whole
// arena at step start. A correct plan gives bit-identical results for every
// seed; a missing event or an early buffer reuse changes the numbers (NaN
// or wrong values) for some seeds. docs/plan-and-runtime.md has the rules.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_INTERPRETER_H
#define BRAID_RUNTIME_INTERPRETER_H

#include "runtime/CommMatching.h"
#include "runtime/Communicator.h"
#include "runtime/HostTensor.h"
#include "runtime/PlanLoader.h"
#include "runtime/Profile.h"
#include "runtime/Status.h"
#include "runtime/Weights.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace braid::rt {

using TensorMap = std::map<std::string, HostTensor>;

/// How run() executes a step.
struct RunOptions {
  /// Adversarial stream order, late collectives and poisoning (see above).
  bool strict = false;
  /// Seeds the stream choices (mixed with the rank, so ranks differ). The
  /// generator lives across run() calls: successive steps use different
  /// orders, and the same sequence of calls repeats them exactly.
  uint64_t strictSeed = 1;
  /// After every op, the floating-point values it wrote must be finite:
  /// the first op that writes a NaN or an infinity fails the step, naming
  /// the op, the value and the first non-finite operand (a parameter, an
  /// input, a state slot) if any, else saying the op itself produced it.
  bool checkFinite = false;
};

/// At most this many ranks run as threads of one CPU interpreter process.
constexpr int kMaxCpuRanks = 1024;

/// How a ThreadedRunner is built.
struct RunnerOptions {
  /// The generated weights: seed and amplitude.
  SyntheticWeights weights;
  /// false: parameters start unset, for a caller that sets every one
  /// itself (a checkpoint; generating weights it then replaced doubled a
  /// checkpoint run's set-up); a step before then is an error.
  bool syntheticWeights = true;
  /// How long a rank waits in one collective for the others before the
  /// step fails (a mismatched or hung schedule).
  std::chrono::milliseconds collectiveTimeout = std::chrono::seconds(60);
  /// Host memory all ranks together may take for parameters, state and
  /// arenas; 0: the least of physical memory, the cgroup limit and this
  /// process's RLIMIT_AS / RLIMIT_DATA (hostMemoryLimit()).
  int64_t memoryLimitBytes = 0;
  /// Ranks (threads) one runner may run.
  int maxRanks = kMaxCpuRanks;
  /// Refuse a step whose sends, receives and collectives do not match
  /// across the ranks or cannot complete
  /// in NCCL's order (CommMatching.h). Off only for tests that must run a
  /// deliberately deadlocking exchange (to show how the runtime ends it).
  bool checkCommunication = true;
  /// TESTS ONLY: this rank never joins its collectives (braid-run
  /// --test-fault stuck-collective:R), so its peers' steps end at the
  /// collective timeout.
  int testStuckRank = -1;
};

/// Bytes one rank of the CPU interpreter holds for `plan`: its parameter
/// slices, the state slots and every function's arena (a lower bound: the
/// kernels' temporaries come on top). Errors when the sum overflows.
struct RankBytes {
  int64_t parameters = 0, state = 0, arenas = 0, total = 0;
};
Expected<RankBytes> hostBytesPerRank(const plan::Plan &plan);

/// The host memory this process may use: the least of physical memory, the
/// cgroup memory limit and RLIMIT_AS / RLIMIT_DATA. `source` names which.
struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;
};
MemoryLimit hostMemoryLimit();

/// Refuses, before anything is allocated, a plan whose world size exceeds
/// `options.maxRanks` or whose ranks together need more host memory than
/// the limit (hostBytesPerRank x world_size, checked).
Status checkHostResources(const plan::Plan &plan, const RunnerOptions &options);

class Interpreter {
public:
  /// Builds rank `rank`'s interpreter: its parameter slices (generated
  /// as `weights` says; without `syntheticWeights`, unset until setParameter,
  /// for a caller that sets every one: a step before that is an error) and
  /// zeroed state slots.
  static Expected<std::unique_ptr<Interpreter>>
  create(LoadedPlan plan, int rank, Communicator &comm,
         SyntheticWeights weights = {}, bool syntheticWeights = true);

  /// Runs one step of `function`. `inputs` must bind exactly the function's
  /// inputs by name, with matching dtype and shape.
  Expected<TensorMap> run(std::string_view function, const TensorMap &inputs);

  int rank() const { return rank_; }
  /// Threads one large matmul of this rank may use (ThreadedRunner: the
  /// cores its ranks leave free); results do not depend on it.
  void setMatmulThreads(int threads) { matmulThreads_ = std::max(1, threads); }
  const HostTensor &stateSlot(int slot) const { return state_[size_t(slot)]; }
  /// Parameter `index`'s local slice (a copy: a piece of a parameter pack
  /// lives inside its pack).
  HostTensor parameter(int index) const;
  /// Replaces parameter `name`'s local slice (e.g. from a checkpoint); a
  /// piece of a pack is written into the pack.
  Status setParameter(std::string_view name, HostTensor local);
  /// Zeroes every state slot (a new sequence).
  void resetState();
  /// When on, run() records each op's wall time (host clock).
  void setProfiling(bool on) { profiling_ = on; }
  /// The op times of the last run() with profiling on (in execution order).
  const std::vector<OpTime> &lastProfile() const { return profile_; }
  /// Applies to the following run() calls; restarts the strict generator.
  void setRunOptions(const RunOptions &options);
  void setStrict(bool on, uint64_t seed = 1) {
    setRunOptions(RunOptions{on, seed});
  }
  const RunOptions &runOptions() const { return options_; }
  /// TESTS ONLY: this rank never joins a collective (RunnerOptions).
  void setTestStuck(bool on) { testStuck_ = on; }

private:
  static Expected<std::unique_ptr<Interpreter>>
  createImpl(LoadedPlan plan, int rank, Communicator &comm,
             SyntheticWeights weights, bool syntheticWeights);
  Expected<TensorMap> runImpl(std::string_view function,
                              const TensorMap &inputs);
  Interpreter(LoadedPlan plan, int rank, Communicator &comm)
      : plan_(std::move(plan)), rank_(rank), comm_(comm) {}
  friend class OpRunner;

  LoadedPlan plan_;
  int rank_;
  int matmulThreads_ = 1;
  /// Per parameter: not yet set (created without synthetic weights).
  std::vector<bool> unset_;
  size_t unsetCount_ = 0;
  Communicator &comm_;
  bool testStuck_ = false;
  /// Where parameter `index`'s local slice lives: its own tensor, or its
  /// range of its pack.
  uint8_t *parameterData(int index);
  const uint8_t *parameterData(int index) const;

  /// By parameter; a packed piece keeps its dtype and shape here, and its
  /// bytes (empty here) in packs_.
  std::vector<HostTensor> params_;
  /// Plan.parameter_packs: each pack's pieces end to end; a PackedParameter
  /// tensor reads it as is.
  std::vector<HostTensor> packs_;
  ParameterPacking packing_;
  std::vector<HostTensor> state_;
  std::map<int, std::vector<uint8_t>> arenas_; // per function index
  bool profiling_ = false;
  std::vector<OpTime> profile_;
  RunOptions options_;
  std::mt19937_64 strictRng_;
};

/// Every rank of a plan as a thread of this process.
class ThreadedRunner {
public:
  static Expected<std::unique_ptr<ThreadedRunner>> create(LoadedPlan plan,
                                                          uint64_t seed = 0);
  /// checkHostResources first: nothing is allocated for a plan that cannot
  /// fit.
  static Expected<std::unique_ptr<ThreadedRunner>>
  create(LoadedPlan plan, const RunnerOptions &options);
  /// One step on every rank. `inputs` holds one map per rank, or a single
  /// map given to every rank. Returns each rank's outputs; the first rank
  /// error (which aborts the others' collectives) is the result.
  Expected<std::vector<TensorMap>> run(std::string_view function,
                                       const std::vector<TensorMap> &inputs);
  /// As run(), with rank r running functions[r] (MPMD, e.g. pipeline
  /// stages that pair a send with a recv).
  Expected<std::vector<TensorMap>>
  runPerRank(const std::vector<std::string> &functions,
             const std::vector<TensorMap> &inputs);
  int worldSize() const { return int(ranks_.size()); }
  Interpreter &rank(int r) { return *ranks_[size_t(r)]; }
  /// Sets every rank's run options (each rank mixes its rank into the seed).
  void setRunOptions(const RunOptions &options);
  void setStrict(bool on, uint64_t seed = 1) {
    setRunOptions(RunOptions{on, seed});
  }

private:
  LoadedPlan plan_;
  bool checkCommunication_ = true;
  CommMatchingCache matching_;
  std::unique_ptr<Communicator> comm_;
  std::vector<std::unique_ptr<Interpreter>> ranks_;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_INTERPRETER_H
