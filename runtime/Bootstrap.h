//===- Bootstrap.h - How the processes of one run find each other -*- C++ -*-===//
//
// A multi-process run (one process per GPU, launched by mpirun or srun)
// needs three things before NCCL can start: each process's rank and the
// world size, its GPU on its node (the local rank), and a way to hand small
// blobs around (the NCCL unique ids, and what every process is about to
// run). Bootstrap is that and nothing more; runtime/mpi implements it with
// MPI, and the executor never sees MPI itself.
//
// checkSameRun is the first exchange of every multi-process run: ranks that
// loaded different plans (or the same plan with different weights) would
// otherwise meet in mismatched collectives and hang or compute garbage.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_BOOTSTRAP_H
#define BRAID_RUNTIME_BOOTSTRAP_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace braid::rt {

class Bootstrap {
public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Rank among the processes on this node: the GPU index by default.
  virtual int localRank() const = 0;
  /// Every process's `mine`, by rank (lengths may differ).
  virtual Expected<std::vector<std::string>>
  allGather(const std::string &mine) = 0;
  /// `root`'s `bytes` on every process.
  virtual Status broadcast(std::string &bytes, int root) = 0;
  /// Ends every process of the run now, so none is left waiting in a
  /// collective for a rank that failed.
  [[noreturn]] virtual void abortAll(int exitCode) = 0;
};

/// 64-bit FNV-1a of a serialized plan.
uint64_t planFingerprint(const std::vector<uint8_t> &bytes);

/// What every process of a run must agree on.
struct RunIdentity {
  std::string loadError;    // non-empty: this process could not load its plan
  std::string planPath;     // named in messages only; paths may differ
  uint64_t planFingerprint = 0;
  std::string weights;      // "seed 0", or "checkpoint model.safetensors"
  /// Non-empty: this process cannot start the run it loaded (no usable
  /// device; a plan for another number of processes). Reported after plan
  /// and weight mismatches, which say more about what went wrong.
  std::string setupError;
};

/// Exchanges every process's identity and fails, on every process alike,
/// when one could not load its plan, when any two differ in plan or
/// weights, or when one cannot start it (in that order). The message names the ranks. Collective: call it on every rank,
/// even one whose plan failed to load, so no rank is left waiting.
Status checkSameRun(Bootstrap &processes, const RunIdentity &mine);

} // namespace braid::rt

#endif // BRAID_RUNTIME_BOOTSTRAP_H
