//===- LocalComm.cu - Kernels of the one-GPU test communicator ------------===//
//
// See LocalCommKernels.h: data movement only; the ranks meet on the host.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/DeviceConvert.cuh"
#include "runtime/cuda/LocalCommKernels.h"

#include <cuda_runtime.h>

namespace braid::rt::cuda::detail {
namespace {

constexpr int kCopyThreads = 256;
constexpr unsigned kMaxCopyBlocks = 4096;

/// dst + j * piece (0 with onlySource) <- sources[j] + offset, piece bytes.
__global__ void gatherKernel(LocalSources sources, uint8_t *dst, size_t piece,
                             size_t offset, int onlySource) {
  int j = onlySource >= 0 ? onlySource : int(blockIdx.y);
  const uint8_t *src = static_cast<const uint8_t *>(sources.ptr[j]);
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
__global__ void reduceKernel(LocalSources sources, Out dst, int64_t count,
                             int64_t offset, int kind) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    using T = typename Acc<Integer>::T;
    T acc = Acc<Integer>::read(In{sources.ptr[0], dst.dt}, offset + i);
    for (int j = 1; j < sources.size; ++j)
      acc = combine<T>(
          kind, acc,
          Acc<Integer>::read(In{sources.ptr[j], dst.dt}, offset + i));
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

/// Blocks of kCopyThreads for `work` items (grid-stride beyond the cap).
unsigned blocksFor(size_t work) {
  size_t blocks = (work + kCopyThreads - 1) / kCopyThreads;
  return unsigned(blocks < 1 ? 1 : blocks > kMaxCopyBlocks ? kMaxCopyBlocks
                                                           : blocks);
}
/// Copies move 16 bytes per thread where they can.
unsigned copyBlocks(size_t bytes) { return blocksFor(bytes / 16); }

} // namespace

cudaError_t launchLocalGather(const LocalSources &src, void *dst,
                              size_t pieceBytes, size_t srcOffsetBytes,
                              int onlySource, cudaStream_t stream) {
  if (pieceBytes == 0)
    return cudaSuccess;
  dim3 grid(copyBlocks(pieceBytes), onlySource >= 0 ? 1u : unsigned(src.size));
  gatherKernel<<<grid, kCopyThreads, 0, stream>>>(
      src, static_cast<uint8_t *>(dst), pieceBytes, srcOffsetBytes, onlySource);
  return cudaGetLastError();
}

cudaError_t launchLocalReduce(const LocalSources &src, Out dst, int64_t count,
                              int64_t srcOffset, int kind,
                              cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  unsigned blocks = blocksFor(size_t(count));
  if (dst.dt == Dt::I32 || dst.dt == Dt::I64)
    reduceKernel<true>
        <<<blocks, kCopyThreads, 0, stream>>>(src, dst, count, srcOffset, kind);
  else
    reduceKernel<false>
        <<<blocks, kCopyThreads, 0, stream>>>(src, dst, count, srcOffset, kind);
  return cudaGetLastError();
}

} // namespace braid::rt::cuda::detail
