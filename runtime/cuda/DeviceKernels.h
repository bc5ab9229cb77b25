//===- DeviceKernels.h - Raw launchers of Kernels.cu ------------*- C++ -*-===//
//
// Internal to BraidCudaKernels: the boundary between Kernels.cpp (shape
// checks, Status, the runtime's types; compiled by the host compiler) and
// Kernels.cu (device code; compiled by nvcc, includes no FlatBuffers or
// runtime headers besides DeviceError.h). Arguments are plain sizes and
// pointers whose shapes Kernels.cpp has already checked. Each launcher
// returns the cudaError_t of its launch (cudaGetLastError), and launches
// nothing for empty work.
//
// Use runtime/cuda/Kernels.h instead.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_DEVICEKERNELS_H
#define BRAID_RUNTIME_CUDA_DEVICEKERNELS_H

#include "runtime/WeightFormula.h"
#include "runtime/cuda/DeviceError.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace braid::rt::cuda::detail {

/// Storage types as the device code sees them (braid::rt::DType mapped by
/// Kernels.cpp). Every kernel reads any of them as fp32 (integers
/// converted) and writes fp32 results to any of them (RNE for f16/bf16,
/// toward zero for integers), as HostTensor's loadAsFloat/storeFromFloat.
enum class Dt : int32_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4 };

struct In {
  const void *data;
  Dt dt;
};
struct Out {
  void *data;
  Dt dt;
};

constexpr int kMaxRank = 9; // a plan tensor's rank + 1 (see stridedCopy)
struct Dims {
  int64_t v[kMaxRank];
};

/// silu, the two GELUs, then braid.activation's kinds in plan order.
enum class Unary : int32_t {
  Silu = 0,
  GeluErf = 1,
  GeluTanh = 2,
  Relu = 3,
  Relu2 = 4,
  Relu6 = 5,
  LeakyRelu = 6,
  QuickGelu = 7,
  Sigmoid = 8,
  Tanh = 9,
  Mish = 10,
  Hardswish = 11,
  Gelu10 = 12,
  Laplace = 13,
  SqrtSoftplus = 14
};

/// How the rhs of add/mul is indexed from the flat lhs index e.
enum class Broadcast : int32_t {
  Same = 0,   // rhs has lhs's elements: rhs[e]
  Modulo = 1, // rhs is lhs's trailing dims exactly: rhs[e % rhsCount]
  General = 2 // size-1 dims: rhs[sum idx[d] * rhsStride[d]]
};

cudaError_t launchBinary(bool mul, In lhs, In rhs, Out out, int64_t count,
                         Broadcast mode, int64_t rhsCount, int rank,
                         const Dims &shape, const Dims &rhsStride,
                         cudaStream_t stream);
cudaError_t launchUnary(Unary kind, In x, Out y, int64_t count,
                        cudaStream_t stream);
/// y = silu(gate) * up over `count` elements (same shapes).
cudaError_t launchSwiglu(In gate, In up, Out y, int64_t count,
                         cudaStream_t stream);
cudaError_t launchRmsNorm(In x, In weight, Out y, int64_t rows, int64_t h,
                          float epsilon, cudaStream_t stream);
/// sum = x + residual (stored), y = rms_norm(sum as stored).
cudaError_t launchAddRmsNorm(In x, In residual, In weight, Out sum, Out y,
                             int64_t rows, int64_t h, float epsilon,
                             cudaStream_t stream);
cudaError_t launchLayerNorm(In x, In weight, In bias, Out y, int64_t rows,
                            int64_t h, float epsilon, cudaStream_t stream);
/// rotaryDim 0: the whole head.
cudaError_t launchRope(In x, In positions, Out y, int64_t tokens,
                       int64_t heads, int64_t headDim, int64_t rotaryDim,
                       double theta, const double *invFreq,
                       double attentionFactor, cudaStream_t stream);
cudaError_t launchSoftmax(In x, Out y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream);
cudaError_t launchEmbedding(In ids, In table, Out out, int64_t numIds,
                            int64_t vocab, int64_t hidden, int64_t vocabStart,
                            cudaStream_t stream);

struct AttentionArgs {
  In q;
  In k; // keys: k [B, S, Hkv, D], or the key cache [B, maxS, Hkv, D]
  In v; // values, laid out as `k`
  Out o;
  int64_t batch, seq, heads, kvHeads, headDim;
  int64_t keyStride; // rows per batch in k/v: S, or maxS for a cache
  float scale;
  bool causal;
  int64_t slidingWindow = 0; // causal only: the last W keys; 0: all
  In position; // data null: no cache; else [B] cache positions
  /// With a cache: the new rows [B, S, Hkv, D], written into the caches
  /// (through k and v) at the positions before attention reads them.
  In newK, newV;
  /// With a cache: where a position out of range is recorded; nothing is
  /// written or attended while a record is set.
  DeviceErrorRecord *error;
  /// Split-KV scratch of `partialsBytes`; null, or smaller than the
  /// tiling's workspaceBytes: one split.
  float *partials = nullptr;
  size_t partialsBytes = 0;
  /// Tiling knobs (planAttention); 0: the defaults. Benchmarks sweep them.
  int keyTile = 0, blocksPerMultiprocessor = 0;
  /// Ask for the tensor-core split kernel (AttentionTensorCore.cuh). It
  /// runs where it applies (see launchAttention), else the split kernel.
  /// The executor decides (ExecutorOptions::attentionKernel).
  bool tensorCore = false;
  /// With it and a cache, the tensor-core kernel takes the cache write in
  /// (AttentionWorkspace::fuseCacheWrite).
  bool fuseCacheWrite = false;
};

/// How launchAttention divides the work (flash-decoding): the query rows of
/// one (batch, KV head) -- its S x (Hq / Hkv) query heads, so a GQA group
/// reads each key once -- in tiles of `rowTile` rows; the key rows in
/// `splits` ranges of `keysPerSplit`, one block per (tile, range), walked
/// `keyTile` keys at a time through shared memory with an online softmax.
/// With splits > 1 every block writes its partial (max, sum, unnormalized
/// output) to the workspace and a second kernel combines them. A pure
/// function of the shapes and the multiprocessor count, so it is computed
/// once when a plan is prepared and again, identically, at each launch.
struct AttentionTiling {
  int rowTile = 1, keyTile = 1, splits = 1;
  int stages = 1; // key/value tiles in flight (cp.async double-buffering)
  int64_t keysPerSplit = 0;
  size_t sharedBytes = 0;
  size_t workspaceBytes = 0; // partials, when splits > 1
  bool fits = false; // false: head_dim too large for shared memory
  /// The tensor-core kernel's tiling: 16 rows, 16-key tiles per warp.
  bool tensorCore = false;
};
/// `multiprocessors` 0 (or no workspace to be had): one split.
/// `keyTile` (at most 32) and `blocksPerMultiprocessor` (the split count's
/// target) 0: the defaults, 32 and 4.
/// `elemBytes`: the k/v storage size (2 or 4; else it does not fit).
/// `tensorCore`: the tensor-core kernel's tiling where its shapes apply
/// (16-bit storage, a head_dim it is built for; `keyTile` is ignored and
/// `blocksPerMultiprocessor` defaults to 2), else the split kernel's.
AttentionTiling planAttention(int64_t batch, int64_t seq, int64_t heads,
                              int64_t kvHeads, int64_t headDim, int64_t keyRows,
                              int64_t elemBytes, int multiprocessors,
                              int keyTile = 0, int blocksPerMultiprocessor = 0,
                              bool tensorCore = false);
/// Bytes per element of a k/v storage dtype attention takes (2 or 4), or 0.
int64_t attentionElemBytes(Dt dt);
/// Most keys (S, or a cache's maxS) launchAttention takes: the split kernel
/// keeps each row's key count as a float in shared memory, exact below 2^24.
constexpr int64_t kMaxAttentionKeys = int64_t(1) << 24;
/// Largest head_dim launchAttention takes.
constexpr int64_t kMaxAttentionHeadDim = 4096;
/// `multiprocessors` as given to planAttention; the launch splits the keys
/// only when args.partials holds that tiling's workspaceBytes.
/// Kernels, in order on `stream`: with a cache (args.position.data), the
/// cache write, which checks every batch's [pos, pos + S) against
/// [0, keyStride) first and, for the first batch outside it, records
/// kDeviceErrorAttentionPosition (unless a record is set) and writes
/// nothing (nor while a record is set), else k[b, pos[b] + s] = newK[b, s]
/// (and v); the split kernel (skipped while a record is set); with
/// splits > 1, the combine. With args.tensorCore, the split kernel is the
/// tensor-core one when q, k, v are one 16-bit dtype, 16-byte aligned,
/// head_dim is one it is built for (16, 32, 64, 80, 96, 128) and the
/// device is sm_80 or newer.
cudaError_t launchAttention(const AttentionArgs &args, int multiprocessors,
                            cudaStream_t stream);
/// Whether launchAttention runs `args` on tensor cores when asked
/// (args.tensorCore is not read): the conditions above, and the kernel's
/// binary for the current device is sm_80 or newer.
bool tensorCoreAttentionApplies(const AttentionArgs &args);

/// A strided copy as the kernel runs it: dst[idx] = src[idx] over `sizes`
/// (outermost dim first), strides in `unitBytes` units (1, 2, 4, 8 or 16;
/// both pointers and all strides aligned to it); the innermost dim is
/// contiguous on both sides.
struct CopyPlan {
  int rank = 0;
  Dims sizes{}, dstStrides{}, srcStrides{};
  int64_t count = 0; // units to copy
  int unitBytes = 1;
};
/// Host side (Kernels.cpp): element strides -> CopyPlan. Drops size-1 dims,
/// merges dims contiguous on both sides, picks the widest unit. Arguments
/// already checked (ranks equal and <= kMaxRank - 1, nothing negative,
/// elemSize > 0, at least one element).
CopyPlan planStridedCopy(uintptr_t dst, uintptr_t src, const int64_t *sizes,
                         const int64_t *dstStrides, const int64_t *srcStrides,
                         int rank, int64_t elemSize);
cudaError_t launchStridedCopy(void *dst, const void *src, const CopyPlan &plan,
                              cudaStream_t stream);

/// out[e] = the deterministic weight of local element e (WeightFormula.h),
/// zero for padding, for e < map.localCount; `scale` is the tensor's
/// (weightScale, computed on the host).
cudaError_t launchGenerateWeights(Out out, const weights::LocalIndexMap &map,
                                  uint64_t seed, uint64_t nameHash, bool norm,
                                  float scale, cudaStream_t stream);

/// One thread spinning for `nanoseconds` of the global timer (tests).
cudaError_t launchStall(uint64_t nanoseconds, cudaStream_t stream);

} // namespace braid::rt::cuda::detail

#endif // BRAID_RUNTIME_CUDA_DEVICEKERNELS_H
