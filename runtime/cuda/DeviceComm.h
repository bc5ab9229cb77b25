//===- DeviceComm.h - One rank's communicator of one group -------*- C++ -*-===//
//
// What the executor asks of a communicator: NCCL's collectives on device
// buffers, enqueued on a stream (capturable in a CUDA Graph), with NCCL's
// layouts (all_gather concatenates the ranks' buffers, reduce_scatter gives
// rank r the r-th piece, all_to_all sends piece j of a contiguous buffer to
// rank j). Two implementations:
//   - NCCL (NcclComm.h): the only production path;
//   - the one-GPU test communicator (LocalComm.h): every rank of a group on
//     one device, so tp >= 2 plans, multi-stream capture and the abort and
//     timeout paths run on a single GPU (NCCL refuses two ranks on one).
// Ranks and peers are positions in the group instance.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_DEVICECOMM_H
#define BRAID_RUNTIME_CUDA_DEVICECOMM_H

#include "runtime/plan_generated.h"
#include "runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace braid::rt::cuda {

class DeviceComm {
public:
  virtual ~DeviceComm() = default;

  /// out = reduce over ranks of in (`count` elements; in == out allowed).
  virtual Status allReduce(const void *in, void *out, size_t count,
                           plan::DType dtype, plan::ReduceKind kind,
                           cudaStream_t stream) = 0;
  /// out = the root's in.
  virtual Status broadcast(const void *in, void *out, size_t count,
                           plan::DType dtype, int root,
                           cudaStream_t stream) = 0;
  /// out[r * count + i] = rank r's in[i].
  virtual Status allGather(const void *in, void *out, size_t count,
                           plan::DType dtype, cudaStream_t stream) = 0;
  /// out[i] = reduce over ranks of in[rank * recvCount + i].
  virtual Status reduceScatter(const void *in, void *out, size_t recvCount,
                               plan::DType dtype, plan::ReduceKind kind,
                               cudaStream_t stream) = 0;
  /// recv[j * pieceCount + i] = rank j's send[rank * pieceCount + i].
  virtual Status allToAll(const void *send, void *recv, size_t pieceCount,
                          plan::DType dtype, cudaStream_t stream) = 0;
  /// A lone send or receive: it completes when the peer's matching call
  /// does (NCCL's rendezvous semantics).
  virtual Status send(const void *in, size_t count, plan::DType dtype,
                      int peer, cudaStream_t stream) = 0;
  virtual Status recv(void *out, size_t count, plan::DType dtype, int peer,
                      cudaStream_t stream) = 0;

  /// Bracket a run of adjacent sends and receives (runtime/P2PGroups.h) so
  /// that they progress together, as ncclGroupStart/End do: two ranks that
  /// each send, then receive, complete. groupEnd follows every groupStart,
  /// also when a call between them failed.
  virtual Status groupStart() = 0;
  virtual Status groupEnd() = 0;

  /// An error found while the enqueued work runs (NCCL's asynchronous
  /// error; the test communicator's timeout); ok while there is none.
  virtual Status asyncError() = 0;
  /// Ends stuck or failed work without waiting for peers; the communicator
  /// is unusable after it. Never blocks on the peers.
  virtual void abort() = 0;
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_DEVICECOMM_H
