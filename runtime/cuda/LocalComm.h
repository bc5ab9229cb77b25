//===- LocalComm.h - The one-GPU test communicator --------------*- C++ -*-===//
//
// NCCL refuses two ranks on one GPU, so without this a tp >= 2 plan could
// never run anywhere the project tests. The test communicator runs every
// rank of a group on one device (the ranks are threads of one process, each
// with its own streams): collectives are device-side barriers plus copy and
// reduction kernels (LocalCommKernels.h), capturable in CUDA Graphs, with
// the CPU interpreter's reduction order (rank 0 first, fp32, rounded once),
// so results can match the interpreter bit for bit. Every wait ends at the
// timeout or when the host aborts, which exercises the executor's stuck
// collective and failing rank paths on one GPU.
//
// For tests and `braid-run --single-gpu-test` only; NCCL is the only
// production path. Not fast: every collective is four launches and reads
// every peer's buffer.
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

private:
  double timeoutSeconds_;
  std::mutex mu_;
  std::map<CommIdKey, std::shared_ptr<LocalCommGroup>> groups_;
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_LOCALCOMM_H
