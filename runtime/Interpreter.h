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
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_INTERPRETER_H
#define BRAID_RUNTIME_INTERPRETER_H

#include "runtime/Communicator.h"
#include "runtime/HostTensor.h"
#include "runtime/PlanLoader.h"
#include "runtime/Profile.h"
#include "runtime/Status.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace braid::rt {

using TensorMap = std::map<std::string, HostTensor>;

class Interpreter {
public:
  /// Builds rank `rank`'s interpreter: its parameter slices (from `seed`)
  /// and zeroed state slots.
  static Expected<std::unique_ptr<Interpreter>>
  create(LoadedPlan plan, int rank, Communicator &comm, uint64_t seed = 0);

  /// Runs one step of `function`. `inputs` must bind exactly the function's
  /// inputs by name, with matching dtype and shape.
  Expected<TensorMap> run(std::string_view function, const TensorMap &inputs);

  int rank() const { return rank_; }
  const HostTensor &stateSlot(int slot) const { return state_[size_t(slot)]; }
  const HostTensor &parameter(int index) const {
    return params_[size_t(index)];
  }
  /// Replaces parameter `name`'s local slice (e.g. from a checkpoint).
  Status setParameter(std::string_view name, HostTensor local);
  /// Zeroes every state slot (a new sequence).
  void resetState();
  /// When on, run() records each op's wall time (host clock).
  void setProfiling(bool on) { profiling_ = on; }
  /// The op times of the last run() with profiling on.
  const std::vector<OpTime> &lastProfile() const { return profile_; }

private:
  static Expected<std::unique_ptr<Interpreter>>
  createImpl(LoadedPlan plan, int rank, Communicator &comm, uint64_t seed);
  Expected<TensorMap> runImpl(std::string_view function,
                              const TensorMap &inputs);
  Interpreter(LoadedPlan plan, int rank, Communicator &comm)
      : plan_(std::move(plan)), rank_(rank), comm_(comm) {}
  friend class OpRunner;

  LoadedPlan plan_;
  int rank_;
  Communicator &comm_;
  std::vector<HostTensor> params_;
  std::vector<HostTensor> state_;
  std::map<int, std::vector<uint8_t>> arenas_; // per function index
  bool profiling_ = false;
  std::vector<OpTime> profile_;
};

/// Every rank of a plan as a thread of this process.
class ThreadedRunner {
public:
  static Expected<std::unique_ptr<ThreadedRunner>> create(LoadedPlan plan,
                                                          uint64_t seed = 0);
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

private:
  std::unique_ptr<Communicator> comm_;
  std::vector<std::unique_ptr<Interpreter>> ranks_;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_INTERPRETER_H
