//===- LocalComm.h - The one-GPU test communicator --------------*- C++ -*-===//
//
// NCCL refuses two ranks on one GPU, so without this a tp >= 2 plan could
// never run anywhere the project tests. The test communicator runs every
// rank of a group on one device (the ranks are threads of one process, each
// with its own streams). A collective: the ranks meet on the host as they
// enqueue it (HostRendezvous.h), each posting its operand and an event
// recorded after it; each stream waits for its peers' events, then a copy
// or reduction kernel reads the peers' operands into this rank's scratch;
// the ranks meet again (nobody overwrites an operand a peer still reads),
// and the scratch is copied to the output. Reductions follow the CPU
// interpreter's order (rank 0 first, fp32, rounded once), so results match
// it bit for bit. A send/receive is a host rendezvous too.
//
// The device never waits for a peer: a spinning wait shares its hardware
// queue with other streams, and a peer's work queued behind it would never
// run (that hung one run in ten on an H100). Every wait is on the host,
// ends at the timeout (naming the rank that did not come) or when the
// runner aborts, and works while a CUDA Graph is being captured: in graph
// mode the runner captures all its ranks into one graph (Executor.cpp).
//
// For tests and `braid-run --single-gpu-test` only; NCCL is the only
// production path. Not fast: every collective reads every peer's buffer.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_LOCALCOMM_H
#define BRAID_RUNTIME_CUDA_LOCALCOMM_H

#include "runtime/cuda/DeviceComm.h"
#include "runtime/cuda/StreamPlan.h"

#include <map>
#include <memory>
#include <mutex>

namespace braid::rt::cuda {

class LocalCommGroup;

/// The shared state of every group instance and stream of one run, created
/// on the device current when first joined.
class LocalCommRegistry {
public:
  explicit LocalCommRegistry(double timeoutSeconds)
      : timeoutSeconds_(timeoutSeconds) {}
  ~LocalCommRegistry();

  /// Member `rank` of `size` of the communicator `key`; `scratchBytes`
  /// bounds the results of its collectives. Thread-safe.
  Expected<std::unique_ptr<DeviceComm>> join(const CommIdKey &key, int size,
                                             int rank, size_t scratchBytes);
  /// Ends every wait of every group, now and later (a rank failed).
  void abortAll();

private:
  double timeoutSeconds_;
  std::mutex mu_;
  std::map<CommIdKey, std::shared_ptr<LocalCommGroup>> groups_;
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_LOCALCOMM_H
