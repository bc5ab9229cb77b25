//===- LocalComm.cu - Kernels of the one-GPU test communicator ------------===//
//
// See LocalCommKernels.h for the protocol. Barrier and point-to-point
// waits run on one thread; the data movement on a grid.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/DeviceConvert.cuh"
#include "runtime/cuda/LocalCommKernels.h"

#include <cuda_runtime.h>

namespace braid::rt::cuda::detail {
namespace {

constexpr int kCopyThreads = 256;
constexpr unsigned kMaxCopyBlocks = 4096;

__device__ __forceinline__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned long long
readCounter(const unsigned long long *p) {
  return *static_cast<const volatile unsigned long long *>(p);
}

__device__ __forceinline__ bool groupFailed(const LocalCommRank &r) {
  return *static_cast<volatile int *>(&r.dev->failed) != 0;
}

/// The first failure of the group wins; the host sees why.
__device__ void markFailed(const LocalCommRank &r, int32_t why, int peer,
                           unsigned long long epoch) {
  if (atomicCAS(&r.dev->failed, 0, why) != 0)
    return;
  r.host->rank = r.rank;
  r.host->peer = peer;
  r.host->epoch = epoch;
  __threadfence_system();
  r.host->failure = why;
  __threadfence_system();
}

/// Spins until *word >= target; false (and the group failed) when the
/// host aborts, the timeout passes, or another wait of the group failed.
__device__ bool waitAtLeast(const LocalCommRank &r,
                            const unsigned long long *word,
                            unsigned long long target, int peer) {
  unsigned long long start = globalTimerNs();
  while (readCounter(word) < target) {
    if (groupFailed(r))
      return false;
    if (r.host->abort) {
      markFailed(r, kLocalCommAborted, peer, target);
      return false;
    }
    if (globalTimerNs() - start > r.timeoutNs) {
      markFailed(r, kLocalCommTimedOut, peer, target);
      return false;
    }
    __nanosleep(256);
  }
  __threadfence(); // what the peer wrote before its counter is now visible
  return true;
}

__device__ __forceinline__ void publishCounter(unsigned long long *p,
                                               unsigned long long v) {
  __threadfence(); // everything before is visible before the counter
  atomicExch(p, v);
}

__global__ void barrierKernel(LocalCommRank r, bool publish,
                              const void *input) {
  if (groupFailed(r))
    return;
  unsigned long long e = r.dev->epoch[r.rank] + 1;
  r.dev->epoch[r.rank] = e;
  if (publish)
    r.dev->input[r.rank] = input;
  publishCounter(&r.dev->arrived[r.rank], e);
  for (int j = 0; j < r.size; ++j)
    if (!waitAtLeast(r, &r.dev->arrived[j], e, j))
      return;
}

__device__ __forceinline__ const void *readPointer(const void *const *slot) {
  return *static_cast<const void *const volatile *>(slot);
}

/// dst + j * piece (0 with onlySource) <- slots[j] + offset, piece bytes.
__global__ void copyFromSlotsKernel(LocalCommRank r, const void *const *slots,
                                    uint8_t *dst, size_t piece, size_t offset,
                                    int onlySource) {
  if (groupFailed(r))
    return;
  int j = onlySource >= 0 ? onlySource : int(blockIdx.y);
  const uint8_t *src = static_cast<const uint8_t *>(readPointer(&slots[j]));
  if (!src)
    return;
  src += offset;
  uint8_t *to = dst + (onlySource >= 0 ? 0 : size_t(j) * piece);
  size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  bool wide = (reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(to) |
               piece) % 16 == 0;
  if (wide) {
    const uint4 *s = reinterpret_cast<const uint4 *>(src);
    uint4 *d = reinterpret_cast<uint4 *>(to);
    for (size_t i = tid; i < piece / 16; i += stride)
      d[i] = __ldcg(s + i);
  } else {
    for (size_t i = tid; i < piece; i += stride)
      to[i] = __ldcg(src + i);
  }
}

template <bool Integer> struct Acc;
template <> struct Acc<false> {
  using T = float;
  __device__ static float read(In t, int64_t i) { return load(t, i); }
};
template <> struct Acc<true> {
  using T = int64_t;
  __device__ static int64_t read(In t, int64_t i) { return loadInt(t, i); }
};

template <typename T> __device__ __forceinline__ T combine(int kind, T a, T b) {
  switch (kind) {
  case 1: // max
    return a > b ? a : b;
  case 2: // min
    return a < b ? a : b;
  case 3: // prod
    return a * b;
  default: // sum
    return a + b;
  }
}

template <bool Integer>
__global__ void reduceKernel(LocalCommRank r, Out dst, int64_t count,
                             int64_t offset, int kind) {
  if (groupFailed(r))
    return;
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    using T = typename Acc<Integer>::T;
    T acc = Acc<Integer>::read(In{readPointer(&r.dev->input[0]), dst.dt},
                               offset + i);
    for (int j = 1; j < r.size; ++j)
      acc = combine<T>(kind, acc,
                       Acc<Integer>::read(
                           In{readPointer(&r.dev->input[j]), dst.dt},
                           offset + i));
    if constexpr (Integer) {
      if (dst.dt == Dt::I32)
        static_cast<int32_t *>(dst.data)[i] = int32_t(acc);
      else
        static_cast<int64_t *>(dst.data)[i] = acc;
    } else {
      store(dst, i, acc);
    }
  }
}

__global__ void sendKernel(LocalCommRank r, int peer, const void *input) {
  if (groupFailed(r))
    return;
  unsigned long long k = r.dev->sent[r.rank][peer] + 1;
  r.dev->sent[r.rank][peer] = k;
  r.dev->message[r.rank][peer] = input;
  publishCounter(&r.dev->posted[r.rank][peer], k);
  (void)waitAtLeast(r, &r.dev->taken[r.rank][peer], k, peer);
}

__global__ void recvWaitKernel(LocalCommRank r, int peer) {
  if (groupFailed(r))
    return;
  unsigned long long k = r.dev->expected[peer][r.rank] + 1;
  r.dev->expected[peer][r.rank] = k;
  (void)waitAtLeast(r, &r.dev->posted[peer][r.rank], k, peer);
}

__global__ void recvDoneKernel(LocalCommRank r, int peer) {
  if (groupFailed(r))
    return;
  publishCounter(&r.dev->taken[peer][r.rank], r.dev->expected[peer][r.rank]);
}

/// Blocks of kCopyThreads for `work` items (grid-stride beyond the cap).
unsigned blocksFor(size_t work) {
  size_t blocks = (work + kCopyThreads - 1) / kCopyThreads;
  return unsigned(blocks < 1 ? 1 : blocks > kMaxCopyBlocks ? kMaxCopyBlocks
                                                           : blocks);
}
/// Copies move 16 bytes per thread where they can.
unsigned copyBlocks(size_t bytes) { return blocksFor(bytes / 16); }

} // namespace

cudaError_t launchLocalBarrier(const LocalCommRank &r, bool publish,
                               const void *input, cudaStream_t stream) {
  barrierKernel<<<1, 1, 0, stream>>>(r, publish, input);
  return cudaGetLastError();
}

cudaError_t launchLocalGather(const LocalCommRank &r, void *dst,
                              size_t pieceBytes, size_t srcOffsetBytes,
                              int onlySource, cudaStream_t stream) {
  if (pieceBytes == 0)
    return cudaSuccess;
  dim3 grid(copyBlocks(pieceBytes), onlySource >= 0 ? 1u : unsigned(r.size));
  copyFromSlotsKernel<<<grid, kCopyThreads, 0, stream>>>(
      r, r.dev->input, static_cast<uint8_t *>(dst), pieceBytes,
      srcOffsetBytes, onlySource);
  return cudaGetLastError();
}

cudaError_t launchLocalReduce(const LocalCommRank &r, Out dst, int64_t count,
                              int64_t srcOffset, int kind,
                              cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  unsigned blocks = blocksFor(size_t(count));
  if (dst.dt == Dt::I32 || dst.dt == Dt::I64)
    reduceKernel<true><<<blocks, kCopyThreads, 0, stream>>>(r, dst, count,
                                                            srcOffset, kind);
  else
    reduceKernel<false><<<blocks, kCopyThreads, 0, stream>>>(r, dst, count,
                                                             srcOffset, kind);
  return cudaGetLastError();
}

cudaError_t launchLocalSend(const LocalCommRank &r, int peer,
                            const void *input, cudaStream_t stream) {
  sendKernel<<<1, 1, 0, stream>>>(r, peer, input);
  return cudaGetLastError();
}

cudaError_t launchLocalRecv(const LocalCommRank &r, int peer, void *dst,
                            size_t bytes, cudaStream_t stream) {
  recvWaitKernel<<<1, 1, 0, stream>>>(r, peer);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return e;
  if (bytes) {
    // The posted pointer of [peer][rank]: a slot array with one entry.
    copyFromSlotsKernel<<<dim3(copyBlocks(bytes), 1), kCopyThreads, 0,
                          stream>>>(r, &r.dev->message[peer][r.rank],
                                    static_cast<uint8_t *>(dst), bytes, 0, 0);
    e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  recvDoneKernel<<<1, 1, 0, stream>>>(r, peer);
  return cudaGetLastError();
}

} // namespace braid::rt::cuda::detail
