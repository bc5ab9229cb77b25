//===- LocalCommKernels.h - Device side of the one-GPU test communicator -===//
//
// Internal to the test communicator (LocalComm.h): the state its kernels
// share and their raw launchers (LocalComm.cu). Plain data only.
//
// Every rank of a group instance runs on the same device, each on its own
// streams. The ranks meet on the host (HostRendezvous.h) and exchange their
// operand pointers and events there; the kernels below only move data,
// reading the peers' buffers through those pointers after the stream has
// waited for the peers' events. Nothing on the device waits for a peer.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_LOCALCOMMKERNELS_H
#define BRAID_RUNTIME_CUDA_LOCALCOMMKERNELS_H

#include "runtime/cuda/DeviceKernels.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace braid::rt::cuda::detail {

constexpr int kLocalCommMaxRanks = 8;

/// The operands of one collective, by rank (passed by value to kernels).
struct LocalSources {
  const void *ptr[kLocalCommMaxRanks];
  int size;
};

/// For every source rank j (or only `onlySource` when >= 0):
/// dst + j * pieceBytes (0 with onlySource) receives pieceBytes from
/// src.ptr[j] + srcOffsetBytes.
cudaError_t launchLocalGather(const LocalSources &src, void *dst,
                              size_t pieceBytes, size_t srcOffsetBytes,
                              int onlySource, cudaStream_t stream);
/// dst[i] = the ranks' operands [srcOffset + i] combined in rank order from
/// rank 0, in fp32 (floats) or int64 (integers), rounded once: the CPU
/// interpreter's reduction.
cudaError_t launchLocalReduce(const LocalSources &src, Out dst, int64_t count,
                              int64_t srcOffset, int kind,
                              cudaStream_t stream);

} // namespace braid::rt::cuda::detail

#endif // BRAID_RUNTIME_CUDA_LOCALCOMMKERNELS_H
