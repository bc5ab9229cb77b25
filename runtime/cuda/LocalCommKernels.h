//===- LocalCommKernels.h - Device side of the one-GPU test communicator -===//
//
// Internal to the test communicator (LocalComm.h): the state its kernels
// share and their raw launchers (LocalComm.cu). Plain data only.
//
// Every rank of a group instance runs on the same device, each on its own
// streams. A collective is four launches on the rank's stream:
//   1. arrive: publish the input pointer, then wait (one thread, spinning)
//      until every rank of the group has published its own;
//   2. gather or reduce: read the peers' inputs through the published
//      pointers and write this rank's result into its scratch buffer;
//   3. depart: wait until every rank has read what it needed, so no rank
//      overwrites an input (or, in place, an output) a peer still reads;
//   4. copy the scratch buffer to the output.
// Barriers count per rank (`epoch`, advanced by the rank's own barrier
// kernels and kept in device memory), so a captured graph replays them.
// Send/receive is a rendezvous as in NCCL: the sender posts its pointer and
// waits until the receiver has copied.
//
// Every wait ends: when a peer does not come within the timeout, or when
// the host sets `abort`, the spinning thread marks the group failed (in
// device memory for the kernels after it, which then do nothing, and in
// host-mapped memory for the host) and returns.
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

/// In device memory, zeroed at creation; one per group instance and stream.
struct LocalCommDeviceState {
  unsigned long long arrived[kLocalCommMaxRanks]; // last barrier reached
  unsigned long long epoch[kLocalCommMaxRanks];   // barriers entered
  const void *input[kLocalCommMaxRanks];          // published operands
  // Point to point, [sender][receiver]: messages posted by the sender and
  // taken by the receiver; each side's own count of the messages it sent or
  // expects; the posted buffer.
  unsigned long long posted[kLocalCommMaxRanks][kLocalCommMaxRanks];
  unsigned long long taken[kLocalCommMaxRanks][kLocalCommMaxRanks];
  unsigned long long sent[kLocalCommMaxRanks][kLocalCommMaxRanks];
  unsigned long long expected[kLocalCommMaxRanks][kLocalCommMaxRanks];
  const void *message[kLocalCommMaxRanks][kLocalCommMaxRanks];
  int failed; // nonzero: every later kernel of the group does nothing
};

enum LocalCommFailure : int32_t {
  kLocalCommOk = 0,
  kLocalCommTimedOut = 1,
  kLocalCommAborted = 2,
};

/// In host-mapped pinned memory: the host reads why a wait ended and
/// writes `abort`.
struct LocalCommHostState {
  volatile int32_t abort;   // set by the host: every wait ends
  volatile int32_t failure; // LocalCommFailure of the first wait that ended
  volatile int32_t rank;    // the rank that waited
  volatile int32_t peer;    // the rank it waited for
  volatile unsigned long long epoch; // the barrier or message number
};

/// One rank's view of one group's state.
struct LocalCommRank {
  LocalCommDeviceState *dev;
  LocalCommHostState *host; // the device pointer of the mapped memory
  int rank, size;
  unsigned long long timeoutNs;
};

/// Waits for every rank at the next barrier; with `publish`, first makes
/// `input` this rank's published operand.
cudaError_t launchLocalBarrier(const LocalCommRank &r, bool publish,
                               const void *input, cudaStream_t stream);
/// For every source rank j (or only `onlySource` when >= 0):
/// dst + j * pieceBytes (0 with onlySource) receives pieceBytes from j's
/// published input + srcOffsetBytes.
cudaError_t launchLocalGather(const LocalCommRank &r, void *dst,
                              size_t pieceBytes, size_t srcOffsetBytes,
                              int onlySource, cudaStream_t stream);
/// dst[i] = the ranks' published inputs [srcOffset + i] combined in rank
/// order from rank 0, in fp32 (floats) or int64 (integers), rounded once:
/// the CPU interpreter's reduction.
cudaError_t launchLocalReduce(const LocalCommRank &r, Out dst, int64_t count,
                              int64_t srcOffset, int kind,
                              cudaStream_t stream);
/// Posts `input` to `peer` and waits until the peer has copied it.
cudaError_t launchLocalSend(const LocalCommRank &r, int peer,
                            const void *input, cudaStream_t stream);
/// Waits for `peer`'s next message, copies `bytes` of it to dst and tells
/// the peer.
cudaError_t launchLocalRecv(const LocalCommRank &r, int peer, void *dst,
                            size_t bytes, cudaStream_t stream);

} // namespace braid::rt::cuda::detail

#endif // BRAID_RUNTIME_CUDA_LOCALCOMMKERNELS_H
