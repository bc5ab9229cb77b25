//===- NcclComm.h - DeviceComm over an NCCL communicator ---------*- C++ -*-===//
//
// The production communicator: one ncclComm_t per (group instance, stream),
// created with ncclCommInitRank (which blocks until every rank of the
// instance calls it: RankFaults.h orders that after every rank's fallible
// set-up). Destroyed with ncclCommDestroy unless abort() ran first.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_NCCLCOMM_H
#define BRAID_RUNTIME_CUDA_NCCLCOMM_H

#include "runtime/cuda/DeviceComm.h"

#include <nccl.h>

#include <memory>

namespace braid::rt::cuda {

/// Rank `rank` of `size` of the communicator `id` names (blocking init).
Expected<std::unique_ptr<DeviceComm>>
createNcclComm(const ncclUniqueId &id, int size, int rank);

/// While one lives, this thread's ncclCommAbort calls only set their
/// communicators' abort flags; NCCL reclaims them (waiting for their
/// captured work) when the outermost one ends (an NCCL group). Aborting
/// communicators one at a time can hang: the abort of X waits for a graph
/// holding X's captured collectives, which is spinning in a collective of
/// Y whose flags are not set yet. No NCCL calls other than aborts may be
/// made while one lives.
class NcclAbortBatch {
public:
  NcclAbortBatch();
  ~NcclAbortBatch();
  NcclAbortBatch(const NcclAbortBatch &) = delete;
  NcclAbortBatch &operator=(const NcclAbortBatch &) = delete;

private:
  bool open_;
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_NCCLCOMM_H
