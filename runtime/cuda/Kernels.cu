//===- Kernels.cu - Device kernels for braid compute ops ------------------===//
//
// Correct first, matching runtime/cpu/*.cpp: every kernel reads its storage
// dtype as fp32, computes in fp32 (rope's angle in fp64, as the CPU does)
// and rounds once when it stores. No fast-math: expf, erff, tanhf, sqrtf and
// division are the accurate CUDA versions; the remaining differences from
// the CPU are summation order and FMA contraction.
//
// Storage dtypes are a runtime argument (a uniform branch per load/store),
// not a template parameter: five dtypes per operand would multiply the
// instantiations, and these kernels are memory-bound anyway.
//
// Bytes moved (element sizes sz_*), for the bandwidth comparison the issue
// asks for later. All kernels but attention's score/value loops are
// memory-bound; their arithmetic intensity is a few flops per byte.
//   add/mul:     N (sz_lhs + sz_out) + rhs reads (cached when broadcast)
//   silu/gelu:   N (sz_x + sz_y)
//   rms_norm:    rows*H (sz_x + sz_y) + H sz_w per block (the row kept in
//                registers; the per-element fallback reads it twice)
//   add_rms_norm: rows*H (2 sz_x + 2 sz_y) + H sz_w per block
//   swiglu:      N (2 sz_x + sz_y)
//   layer_norm:  as rms_norm with three passes over x and bias reads
//   rope:        N (sz_x + sz_y) + B*S position reads
//   softmax:     N (3 sz_x + sz_y) at most (three passes; rows cached)
//   embedding:   numIds*H (sz_table + sz_out) + numIds id reads
//   attention:   B*Hkv*n*D*(sz_k + sz_v) cache reads (the query heads of a
//                GQA group share each key tile) + q, o once; with splits,
//                partials of B*S*Hq*splits*(D + 2) fp32 written and read.
//   cache write: B*S*Hkv*D (sz_k + sz_v) read + the same written, B
//                positions read per block (each checks every batch)
//   copies:      2 * bytes copied
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/DeviceConvert.cuh"
#include "runtime/cuda/DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

namespace braid::rt::cuda::detail {
namespace {

constexpr int kThreads = 256;        // elementwise and per-row kernels
constexpr int64_t kMaxBlocks = 1 << 20; // grid-stride loops beyond this
constexpr int kAttentionThreads = 128; // 4 warps
constexpr int kAttentionKeyTile = 32;  // keys per step: one per lane
constexpr int kAttentionRowTile = 8;   // query rows sharing a key tile

unsigned gridFor(int64_t work, int64_t perBlock) {
  int64_t blocks = (work + perBlock - 1) / perBlock;
  return unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ __forceinline__ int64_t globalThread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t gridThreads() {
  return int64_t(gridDim.x) * blockDim.x;
}

//===----------------------------------------------------------------------===//
// Reductions (blockDim.x a multiple of 32, at most 1024)
//===----------------------------------------------------------------------===//

template <bool Max> __device__ __forceinline__ float combine(float a, float b) {
  return Max ? fmaxf(a, b) : a + b;
}

template <bool Max> __device__ __forceinline__ float warpReduce(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine<Max>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Every thread gets the block's max/sum. `scratch` holds 32 floats; the
/// leading barrier makes back-to-back calls safe.
template <bool Max> __device__ float blockReduce(float v, float *scratch) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int warps = int(blockDim.x) >> 5;
  v = warpReduce<Max>(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? scratch[lane] : (Max ? -INFINITY : 0.0f);
    w = warpReduce<Max>(w);
    if (lane == 0)
      scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

__global__ void binaryKernel(bool mul, In lhs, In rhs, Out out, int64_t count,
                             Broadcast mode, int64_t rhsCount, int rank,
                             Dims shape, Dims rhsStride) {
  for (int64_t e = globalThread(); e < count; e += gridThreads()) {
    int64_t r = e;
    if (mode == Broadcast::Modulo) {
      r = e % rhsCount;
    } else if (mode == Broadcast::General) {
      int64_t rem = e;
      r = 0;
      // Unrolled with constant indices: the Dims stay kernel parameters
      // instead of being copied to local memory.
#pragma unroll
      for (int d = kMaxRank - 1; d >= 0; --d)
        if (d < rank) {
          r += (rem % shape.v[d]) * rhsStride.v[d];
          rem /= shape.v[d];
        }
    }
    float a = load(lhs, e), b = load(rhs, r);
    store(out, e, mul ? a * b : a + b);
  }
}

// The CPU kernels' expressions (runtime/cpu/Elementwise.cpp), in f32; NaN
// propagates through the ReLUs as in PyTorch.
template <Unary K> __device__ __forceinline__ float unary(float v) {
  if constexpr (K == Unary::Silu) {
    return v / (1.0f + expf(-v));
  } else if constexpr (K == Unary::GeluErf) {
    return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  } else if constexpr (K == Unary::GeluTanh) {
    const float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * v *
           (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  } else if constexpr (K == Unary::Relu) {
    return isnan(v) || v > 0.0f ? v : 0.0f;
  } else if constexpr (K == Unary::Relu2) {
    float r = isnan(v) || v > 0.0f ? v : 0.0f;
    return r * r;
  } else if constexpr (K == Unary::Relu6) {
    return isnan(v) ? v : fminf(fmaxf(v, 0.0f), 6.0f);
  } else if constexpr (K == Unary::LeakyRelu) {
    return v > 0.0f ? v : v * 0.01f;
  } else if constexpr (K == Unary::QuickGelu) {
    return v * (1.0f / (1.0f + expf(-(1.702f * v))));
  } else if constexpr (K == Unary::Sigmoid) {
    return 1.0f / (1.0f + expf(-v));
  } else if constexpr (K == Unary::Tanh) {
    return tanhf(v);
  } else if constexpr (K == Unary::Mish) {
    return v * tanhf(log1pf(expf(v)));
  } else if constexpr (K == Unary::Hardswish) {
    return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
  } else if constexpr (K == Unary::Gelu10) {
    float g = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    return isnan(g) ? g : fminf(fmaxf(g, -10.0f), 10.0f);
  } else if constexpr (K == Unary::Laplace) {
    return 0.5f * (1.0f + erff((v - 0.707107f) / 0.39894257487763823f));
  } else {
    static_assert(K == Unary::SqrtSoftplus, "a Unary kind without a formula");
    return sqrtf(v > 20.0f ? v : log1pf(expf(v)));
  }
}

template <Unary K> __global__ void unaryKernel(In x, Out y, int64_t count) {
  for (int64_t e = globalThread(); e < count; e += gridThreads())
    store(y, e, unary<K>(load(x, e)));
}

//===----------------------------------------------------------------------===//
// Norms: one block per row, fp32 accumulation
//===----------------------------------------------------------------------===//

__global__ void rmsNormKernel(In x, In weight, Out y, int64_t rows, int64_t h,
                              float epsilon) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * h;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
      float v = load(x, base + i);
      ss += v * v;
    }
    ss = blockReduce<false>(ss, scratch);
    const float inv = 1.0f / sqrtf(ss / float(h) + epsilon);
    // Each element is read and written by the same thread: y may alias x.
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
      store(y, base + i, load(x, base + i) * inv * load(weight, i));
  }
}

__global__ void layerNormKernel(In x, In weight, In bias, Out y, int64_t rows,
                                int64_t h, float epsilon) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * h;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
      sum += load(x, base + i);
    const float mean = blockReduce<false>(sum, scratch) / float(h);
    float sq = 0.0f; // two passes (biased variance), as the CPU kernel
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
      float d = load(x, base + i) - mean;
      sq += d * d;
    }
    const float var = blockReduce<false>(sq, scratch) / float(h);
    const float inv = 1.0f / sqrtf(var + epsilon);
    for (int64_t i = threadIdx.x; i < h; i += blockDim.x)
      store(y, base + i,
            (load(x, base + i) - mean) * inv * load(weight, i) +
                load(bias, i));
  }
}

// The same norms with the row held in registers: x, the weight (and the
// bias) are read once each with 16-byte loads, all issued before the first
// reduction. The kernels above walk a row twice, a few dependent loads per
// thread each time; for a decode step's single row that latency was the
// kernel (15 us for 4096 bf16 on an H100, per Nsight Compute). Used when
// every operand has the same 2- or 4-byte float dtype, rows are whole
// 16-byte vectors, and the row fits kMaxVec vectors per thread.
template <typename T> struct Vec {
  static constexpr int n = 16 / int(sizeof(T));
};
/// Whether 16-byte vector loads and stores may use `p` (null counts: an
/// absent operand never stops them).
inline bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
template <typename T> __device__ __forceinline__ float toFloat(T x);
template <> __device__ __forceinline__ float toFloat(float x) { return x; }
template <> __device__ __forceinline__ float toFloat(__half x) {
  return __half2float(x);
}
template <> __device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <typename T>
__device__ __forceinline__ void unpack(const uint4 &v, float *f) {
  const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
  for (int j = 0; j < Vec<T>::n; ++j)
    f[j] = toFloat(e[j]);
}
template <typename T> __device__ __forceinline__ uint4 pack(const float *f) {
  uint4 v;
  T *e = reinterpret_cast<T *>(&v);
#pragma unroll
  for (int j = 0; j < Vec<T>::n; ++j)
    e[j] = fromFloat<T>(f[j]);
  return v;
}

/// With `residual` (add_rms_norm): the row is x + residual, stored to
/// `sumOut` rounded to T, and normalized from that rounded sum, as the
/// add and rms_norm pair would.
template <typename T, int kMaxVec, bool Layer>
__global__ void normRowKernel(const T *x, const T *weight, const T *bias, T *y,
                              int64_t rows, int64_t h, float epsilon,
                              const T *residual, T *sumOut) {
  constexpr int V = Vec<T>::n;
  __shared__ float scratch[32];
  const int64_t nvec = h / V;
  const uint4 *wv = reinterpret_cast<const uint4 *>(weight);
  const uint4 *bv = reinterpret_cast<const uint4 *>(bias);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint4 *xv = reinterpret_cast<const uint4 *>(x + r * h);
    uint4 *yv = reinterpret_cast<uint4 *>(y + r * h);
    float v[kMaxVec][V];
    uint4 w[kMaxVec], b[kMaxVec];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxVec; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i < nvec) {
        unpack<T>(xv[i], v[k]);
        if (residual) {
          float add[V];
          unpack<T>(reinterpret_cast<const uint4 *>(residual + r * h)[i], add);
#pragma unroll
          for (int j = 0; j < V; ++j)
            v[k][j] += add[j];
          const uint4 stored = pack<T>(v[k]);
          reinterpret_cast<uint4 *>(sumOut + r * h)[i] = stored;
          unpack<T>(stored, v[k]);
        }
        w[k] = __ldg(wv + i);
        if (Layer)
          b[k] = __ldg(bv + i);
#pragma unroll
        for (int j = 0; j < V; ++j)
          sum += Layer ? v[k][j] : v[k][j] * v[k][j];
      }
    }
    float mean = 0.0f, inv;
    if (Layer) {
      mean = blockReduce<false>(sum, scratch) / float(h);
      float sq = 0.0f; // two passes (biased variance), as the CPU kernel
#pragma unroll
      for (int k = 0; k < kMaxVec; ++k)
        if (threadIdx.x + int64_t(k) * blockDim.x < nvec)
#pragma unroll
          for (int j = 0; j < V; ++j) {
            float d = v[k][j] - mean;
            sq += d * d;
          }
      inv = 1.0f / sqrtf(blockReduce<false>(sq, scratch) / float(h) + epsilon);
    } else {
      inv = 1.0f / sqrtf(blockReduce<false>(sum, scratch) / float(h) + epsilon);
    }
#pragma unroll
    for (int k = 0; k < kMaxVec; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i >= nvec)
        continue;
      float wf[V], bf[V], out[V];
      unpack<T>(w[k], wf);
      if (Layer)
        unpack<T>(b[k], bf);
#pragma unroll
      for (int j = 0; j < V; ++j)
        out[j] = Layer ? (v[k][j] - mean) * inv * wf[j] + bf[j]
                       : v[k][j] * inv * wf[j];
      yv[i] = pack<T>(out);
    }
  }
}

// SwiGLU: silu(gate) * up in f32, rounded once (the CPU kernel's
// expression). 16-byte loads when both operands and the result share a
// 2- or 4-byte float dtype and whole vectors; else one element per step.
__global__ void swigluKernel(In gate, In up, Out y, int64_t count) {
  for (int64_t e = globalThread(); e < count; e += gridThreads()) {
    float g = load(gate, e);
    store(y, e, unary<Unary::Silu>(g) * load(up, e));
  }
}

template <typename T>
__global__ void swigluVecKernel(const T *gate, const T *up, T *y,
                                int64_t vectors) {
  constexpr int V = Vec<T>::n;
  const uint4 *gv = reinterpret_cast<const uint4 *>(gate);
  const uint4 *uv = reinterpret_cast<const uint4 *>(up);
  uint4 *yv = reinterpret_cast<uint4 *>(y);
  for (int64_t i = globalThread(); i < vectors; i += gridThreads()) {
    float g[V], u[V], out[V];
    unpack<T>(gv[i], g);
    unpack<T>(uv[i], u);
#pragma unroll
    for (int j = 0; j < V; ++j)
      out[j] = unary<Unary::Silu>(g[j]) * u[j];
    yv[i] = pack<T>(out);
  }
}

//===----------------------------------------------------------------------===//
// Rope (Hugging Face rotate_half): one thread per (token, head, pair)
//===----------------------------------------------------------------------===//

__global__ void ropeKernel(In x, In positions, Out y, int64_t tokens,
                           int64_t heads, int64_t d, int64_t rotary,
                           double theta, const double *invFreq,
                           float attentionFactor) {
  // One thread per (token, head, item): item i < R/2 rotates the pair
  // (i, i + R/2); the D - R items after copy one element each that passes
  // through (partial rotary; D may be odd then).
  const int64_t rhalf = rotary / 2, items = rhalf + (d - rotary),
                count = tokens * heads * items;
  for (int64_t e = globalThread(); e < count; e += gridThreads()) {
    const int64_t i = e % items, t = e / items;
    const int64_t head = t % heads, token = t / heads;
    const int64_t base = (token * heads + head) * d;
    if (i >= rhalf) {
      const int64_t j = rotary + (i - rhalf);
      store(y, base + j, load(x, base + j));
      continue;
    }
    // Element i pairs with i + R/2 at frequency theta^(-2i/R) or the
    // scaled table's, in fp64; cos and sin scaled in fp32 as transformers.
    double pos = double(loadInt(positions, token));
    double inv =
        invFreq ? invFreq[i] : pow(theta, -2.0 * double(i) / double(rotary));
    double angle = pos * inv;
    float c = float(cos(angle)) * attentionFactor;
    float s = float(sin(angle)) * attentionFactor;
    float x1 = load(x, base + i), x2 = load(x, base + i + rhalf);
    store(y, base + i, x1 * c - x2 * s);
    store(y, base + i + rhalf, x2 * c + x1 * s);
  }
}

//===----------------------------------------------------------------------===//
// Softmax over one dim of [outer, n, inner]
//===----------------------------------------------------------------------===//

/// inner == 1: rows are contiguous, one block per row.
__global__ void softmaxRowsKernel(In x, Out y, int64_t rows, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * n;
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      mx = fmaxf(mx, load(x, base + i));
    mx = blockReduce<true>(mx, scratch);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      sum += expf(load(x, base + i) - mx); // max-shifted for stability
    sum = blockReduce<false>(sum, scratch);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      store(y, base + i, expf(load(x, base + i) - mx) / sum);
  }
}

/// inner > 1: one thread per (outer, inner) column; neighbouring threads
/// read neighbouring addresses.
__global__ void softmaxColumnsKernel(In x, Out y, int64_t outer, int64_t n,
                                     int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t c = globalThread(); c < columns; c += gridThreads()) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i)
      mx = fmaxf(mx, load(x, base + i * inner));
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      sum += expf(load(x, base + i * inner) - mx);
    for (int64_t i = 0; i < n; ++i)
      store(y, base + i * inner, expf(load(x, base + i * inner) - mx) / sum);
  }
}

//===----------------------------------------------------------------------===//
// Embedding: ids outside [vocabStart, vocabStart + V) give zero rows
//===----------------------------------------------------------------------===//

__global__ void embeddingKernel(In ids, In table, Out out, int64_t numIds,
                                int64_t vocab, int64_t hidden,
                                int64_t vocabStart) {
  const int64_t count = numIds * hidden;
  for (int64_t e = globalThread(); e < count; e += gridThreads()) {
    const int64_t row = loadInt(ids, e / hidden) - vocabStart;
    float v = 0.0f;
    if (row >= 0 && row < vocab)
      v = load(table, row * hidden + e % hidden);
    store(out, e, v);
  }
}

//===----------------------------------------------------------------------===//
// Attention: split-KV (flash-decoding), one block per (batch, KV head, row
// tile, key range); see AttentionTiling in DeviceKernels.h
//===----------------------------------------------------------------------===//

// Shared memory of one split-KV block, in bytes (host and device agree): the
// tile's queries and output accumulators, fp32 [R][D] each; the scores
// [R][T]; each row's running max, sum, rescale factor and key count; then
// `stages` key tiles and as many value tiles, [T] rows of D elements in the
// storage dtype, each row padded to 16 bytes. Key rows are stored with
// their 16-byte chunks XOR-swizzled by the row, so the 32 lanes of a warp
// reading chunk c of 32 different keys hit all 32 banks.
struct AttentionSmem {
  int64_t rowBytes, q, acc, p, stats, k, v, total;
};
__host__ __device__ inline AttentionSmem attentionSmem(int64_t r, int64_t t,
                                                       int64_t d,
                                                       int64_t elem,
                                                       int64_t stages) {
  AttentionSmem m;
  m.rowBytes = (d * elem + 15) / 16 * 16;
  m.q = 0;
  m.acc = m.q + r * d * 4;
  m.p = m.acc + r * d * 4;
  m.stats = m.p + r * t * 4;
  m.k = (m.stats + 4 * r * 4 + 15) / 16 * 16;
  m.v = m.k + stages * t * m.rowBytes;
  m.total = m.v + stages * t * m.rowBytes;
  return m;
}

/// The XOR mask of the key-row swizzle: chunks are permuted within aligned
/// groups of up to 8 (the largest power of two dividing the row's chunks).
__host__ __device__ inline int attentionSwizzleMask(int64_t rowBytes) {
  const int64_t chunks = rowBytes / 16;
  int m = 1;
  while (m < 8 && chunks % (2 * m) == 0)
    m *= 2;
  return m - 1;
}

struct AttentionLaunch {
  AttentionArgs a;
  int rowTile, keyTile, splits, rowTiles, stages;
  int64_t keysPerSplit;
  bool vec; // rows of k and v are 16-byte aligned: cp.async in 16 bytes
  /// The tensor-core kernel writes the new rows into the caches itself and
  /// reads them from newK/newV, with the position check: no cache-write
  /// kernel before it (launchAttention decides).
  bool fusedWrite = false;
};

/// Keys query row i of batch b attends to: [0, n).
__device__ __forceinline__ int64_t attendedKeys(const AttentionArgs &a,
                                                int64_t b, int64_t i) {
  if (a.position.data) {
    const int64_t pos = loadInt(a.position, b);
    return a.causal ? pos + i + 1 : pos + a.seq;
  }
  return a.causal ? i + 1 : a.seq;
}

/// The first key a row attending to [0, n) sees: n - W with a sliding
/// window W (keys (i - W, i]), else 0.
__device__ __forceinline__ int64_t firstAttendedKey(const AttentionArgs &a,
                                                    int64_t n) {
  return a.slidingWindow > 0 ? max(n - a.slidingWindow, int64_t(0))
                             : int64_t(0);
}

/// What one block of a split kernel covers: blockIdx.x is (batch b, KV
/// head kvh, tile of `R` query rows), blockIdx.y its key range (`split`).
/// Row r of the tile is query i = (firstRow + r) / group, head kvh * group
/// + (firstRow + r) % group; its q/o row index is (b * S + i) * Hq + h.
/// Its keys: its split's range, up to the last row's extent (the rows of a
/// tile are in query order, so the last attends to the most); with a
/// sliding window no row sees keys before the first row's window, so those
/// are not read at all.
struct AttentionBlock {
  int64_t group, firstRow, b, kvh, kBegin, kEnd;
  int rows, split;

  __device__ AttentionBlock(const AttentionLaunch &L, int R) {
    const AttentionArgs &a = L.a;
    group = a.heads / a.kvHeads;
    split = int(blockIdx.y);
    const int64_t set = int64_t(blockIdx.x) / L.rowTiles;
    firstRow = (int64_t(blockIdx.x) % L.rowTiles) * R;
    rows = int(min(int64_t(R), a.seq * group - firstRow));
    b = set / a.kvHeads;
    kvh = set % a.kvHeads;
    const int64_t splitBegin = int64_t(split) * L.keysPerSplit;
    kBegin =
        max(splitBegin, firstAttendedKey(a, attendedKeys(a, b, queryPos(0))));
    kEnd = min(splitBegin + L.keysPerSplit,
               attendedKeys(a, b, queryPos(rows - 1)));
  }
  __device__ int64_t queryPos(int r) const { return (firstRow + r) / group; }
  __device__ int64_t qRow(const AttentionArgs &a, int r) const {
    const int64_t row = firstRow + r, i = row / group;
    return (b * a.seq + i) * a.heads + kvh * group + row % group;
  }
};

/// Starts copying keys [j0, j0 + cnt) of (b, kvh) into a stage: 16-byte
/// asynchronous copies (cp.async) when rows are aligned, else element by
/// element (synchronously) into the same swizzled layout.
template <typename T>
__device__ void issueKvTile(const AttentionLaunch &L, int64_t b, int64_t kvh,
                            int64_t j0, int cnt, char *kDst, char *vDst,
                            int64_t rowBytes, int mask) {
  const AttentionArgs &a = L.a;
  const int64_t d = a.headDim;
  const T *k = static_cast<const T *>(a.k.data);
  const T *v = static_cast<const T *>(a.v.data);
  const int64_t first = ((b * a.keyStride + j0) * a.kvHeads + kvh) * d;
  const int64_t stride = a.kvHeads * d; // elements between keys
  if (L.vec) {
    const int chunks = int(d * int64_t(sizeof(T)) / 16);
    for (int c = int(threadIdx.x); c < cnt * chunks; c += int(blockDim.x)) {
      const int row = c / chunks, ch = c % chunks;
      const int64_t at = first + row * stride + ch * (16 / int(sizeof(T)));
      __pipeline_memcpy_async(kDst + row * rowBytes + ((ch ^ (row & mask)) * 16),
                              k + at, 16);
      __pipeline_memcpy_async(vDst + row * rowBytes + ch * 16, v + at, 16);
    }
    return;
  }
  for (int x = int(threadIdx.x); x < cnt * int(d); x += int(blockDim.x)) {
    const int row = x / int(d), e = x % int(d);
    const int byte = e * int(sizeof(T)), ch = byte / 16;
    const int64_t at = first + row * stride + e;
    *reinterpret_cast<T *>(kDst + row * rowBytes + ((ch ^ (row & mask)) * 16) +
                           byte % 16) = k[at];
    *reinterpret_cast<T *>(vDst + row * rowBytes + byte) = v[at];
  }
}

/// acc[r][e] = acc[r][e] * alpha[r] + sum_j p[j][r] v[j][e] for the tile's
/// rows (at most NR) and every e: one thread per e reads each value once for
/// all rows (the scores are stored [key][row], so a row's are a broadcast).
template <int NR, typename T>
__device__ void accumulateValues(float *acc, const float *p, const float *alpha,
                                 const T *vs, int rowElems, int rows, int R,
                                 int cnt, int64_t d) {
  for (int e = int(threadIdx.x); e < int(d); e += int(blockDim.x)) {
    float o[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r)
      o[r] = r < rows ? acc[r * d + e] * alpha[r] : 0.0f;
    for (int jj = 0; jj < cnt; ++jj) {
      const float v = toFloat(vs[jj * rowElems + e]);
      const float *pj = p + jj * R;
#pragma unroll
      for (int r = 0; r < NR; ++r)
        o[r] += pj[r] * v; // p is 0 past `rows` (never read then)
    }
#pragma unroll
    for (int r = 0; r < NR; ++r)
      if (r < rows)
        acc[r * d + e] = o[r];
  }
}

template <typename T>
__global__ void attentionSplitKernel(AttentionLaunch L) {
  const AttentionArgs &a = L.a;
  if (a.error && a.error->code != kDeviceErrorNone)
    return; // a cache position was out of range: the host reports it
  extern __shared__ __align__(16) char smem[];
  const int64_t d = a.headDim;
  const int R = L.rowTile, Tk = L.keyTile;
  const AttentionSmem S = attentionSmem(R, Tk, d, sizeof(T), L.stages);
  const int mask = attentionSwizzleMask(S.rowBytes);
  float *qs = reinterpret_cast<float *>(smem + S.q);     // [R][D]
  float *acc = reinterpret_cast<float *>(smem + S.acc);  // [R][D]
  float *p = reinterpret_cast<float *>(smem + S.p);      // [R][T]
  float *mRow = reinterpret_cast<float *>(smem + S.stats); // [R] each:
  float *lRow = mRow + R, *alpha = lRow + R, *nRow = alpha + R;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int warps = int(blockDim.x) >> 5;

  const AttentionBlock blk(L, R);
  const int split = blk.split, rows = blk.rows;
  const int64_t b = blk.b, kvh = blk.kvh, kBegin = blk.kBegin, kEnd = blk.kEnd;
  auto qRow = [&](int r) { return blk.qRow(a, r); };
  auto queryPos = [&](int r) { return blk.queryPos(r); };
  const int tiles = kEnd > kBegin ? int((kEnd - kBegin + Tk - 1) / Tk) : 0;
  auto stageK = [&](int s) { return smem + S.k + s * Tk * S.rowBytes; };
  auto stageV = [&](int s) { return smem + S.v + s * Tk * S.rowBytes; };
  auto issue = [&](int t) {
    if (t < tiles) {
      const int64_t j0 = kBegin + int64_t(t) * Tk;
      issueKvTile<T>(L, b, kvh, j0, int(min(int64_t(Tk), kEnd - j0)),
                     stageK(t % L.stages), stageV(t % L.stages), S.rowBytes,
                     mask);
    }
    __pipeline_commit(); // one group per tile, empty or not
  };
  // The first tiles' copies fly while the queries load.
  for (int t = 0; t < L.stages; ++t)
    issue(t);

  for (int64_t x = threadIdx.x; x < rows * d; x += blockDim.x) {
    qs[x] = load(a.q, qRow(int(x / d)) * d + x % d);
    acc[x] = 0.0f;
  }
  for (int r = int(threadIdx.x); r < rows; r += int(blockDim.x)) {
    mRow[r] = -INFINITY;
    lRow[r] = 0.0f;
    nRow[r] = float(attendedKeys(a, b, queryPos(r)));
  }
  // Scores of rows past `rows` (a last, partial row tile) stay 0.
  for (int x = int(threadIdx.x); x < R * Tk; x += int(blockDim.x))
    p[x] = 0.0f;

  constexpr int kPer = 16 / int(sizeof(T)); // elements per 16-byte chunk
  // Whole 16-byte chunks of a key row, read with float4 loads of q: those
  // need q rows 16-byte aligned (d % 4 == 0); else every element is a tail.
  const int fullChunks = d % 4 == 0 ? int(d) / kPer : 0;
  for (int t = 0; t < tiles; ++t) {
    // Tile t's group is complete once at most stages - 1 later ones pend.
    __pipeline_wait_prior(L.stages - 1);
    __syncthreads();
    const int64_t j0 = kBegin + int64_t(t) * Tk;
    const int cnt = int(min(int64_t(Tk), kEnd - j0));
    const char *ks = stageK(t % L.stages), *vsBytes = stageV(t % L.stages);
    // Scores and the online softmax: one warp per row, one lane per key,
    // 16-byte chunks of the key row at a time.
    for (int r = warp; r < rows; r += warps) {
      const int64_t n = int64_t(nRow[r]);
      const int64_t lo = firstAttendedKey(a, n);
      const int jj = lane;
      float s = -INFINITY;
      if (jj < cnt && j0 + jj < n && j0 + jj >= lo) {
        const float *qr = qs + r * d;
        const char *kr = ks + jj * S.rowBytes;
        float d0 = 0.0f, d1 = 0.0f;
        for (int ch = 0; ch < fullChunks; ++ch) {
          const uint4 raw =
              *reinterpret_cast<const uint4 *>(kr + ((ch ^ (jj & mask)) * 16));
          const T *kv = reinterpret_cast<const T *>(&raw);
          // q rows start 16-byte aligned (d % 4 == 0 when vectorized).
          const float4 *qc = reinterpret_cast<const float4 *>(qr + ch * kPer);
#pragma unroll
          for (int u = 0; u < kPer / 4; ++u) {
            const float4 q4 = qc[u];
            d0 += q4.x * toFloat(kv[4 * u]);
            d1 += q4.y * toFloat(kv[4 * u + 1]);
            d0 += q4.z * toFloat(kv[4 * u + 2]);
            d1 += q4.w * toFloat(kv[4 * u + 3]);
          }
        }
        for (int e = fullChunks * kPer; e < int(d); ++e) {
          const int byte = e * int(sizeof(T)), ch = byte / 16;
          d0 += qr[e] * toFloat(*reinterpret_cast<const T *>(
                            kr + ((ch ^ (jj & mask)) * 16) + byte % 16));
        }
        s = (d0 + d1) * a.scale;
      }
      const float mOld = mRow[r], lOld = lRow[r];
      const float tileMax = warpReduce<true>(s);
      const float mNew = fmaxf(mOld, tileMax);
      // No key seen yet (mNew = -inf): nothing to rescale or add.
      const float pj = mNew == -INFINITY ? 0.0f : expf(s - mNew);
      const float sum = warpReduce<false>(pj);
      if (jj < Tk)
        p[jj * R + r] = pj; // [key][row]: accumulateValues reads a key's row
      // Every lane has read mRow[r] and lRow[r] before lane 0 rewrites them
      // (shuffles order registers, not shared memory: racecheck saw it).
      __syncwarp();
      if (lane == 0) {
        const float al = mNew == -INFINITY ? 1.0f : expf(mOld - mNew);
        alpha[r] = al;
        lRow[r] = lOld * al + sum;
        mRow[r] = mNew;
      }
    }
    __syncthreads();
    // Values: one thread per e, all rows at once.
    const T *vs = reinterpret_cast<const T *>(vsBytes);
    const int rowElems = int(S.rowBytes / int64_t(sizeof(T)));
    if (R <= 1)
      accumulateValues<1>(acc, p, alpha, vs, rowElems, rows, R, cnt, d);
    else if (R <= 2)
      accumulateValues<2>(acc, p, alpha, vs, rowElems, rows, R, cnt, d);
    else if (R <= 4)
      accumulateValues<4>(acc, p, alpha, vs, rowElems, rows, R, cnt, d);
    else
      accumulateValues<8>(acc, p, alpha, vs, rowElems, rows, R, cnt, d);
    __syncthreads(); // the stage is free: refill it with tile t + stages
    issue(t + L.stages);
  }
  __pipeline_wait_prior(0);
  __syncthreads();

  if (L.splits == 1) {
    for (int64_t x = threadIdx.x; x < rows * d; x += blockDim.x) {
      const int r = int(x / d);
      store(a.o, qRow(r) * d + x % d,
            lRow[r] > 0.0f ? acc[x] / lRow[r] : 0.0f);
    }
    return;
  }
  // Partial of (row, split): [max, sum, acc[D]], all written (zeros for an
  // empty range) so the combine sums without branches.
  for (int r = 0; r < rows; ++r) {
    float *part = a.partials + (qRow(r) * L.splits + split) * (d + 2);
    if (threadIdx.x == 0) {
      part[0] = mRow[r];
      part[1] = lRow[r];
    }
    for (int64_t e = threadIdx.x; e < d; e += blockDim.x)
      part[2 + e] = acc[r * d + e];
  }
}

/// One block per (query row, 32 elements of D): o = sum_s acc_s e^(m_s - m)
/// / sum_s l_s e^(m_s - m) over the splits whose key range the row reached.
/// The warps take every fourth split, each lane one element, so a thread's
/// loads are independent and few; the warps' sums are added at the end.
__global__ void attentionCombineKernel(AttentionLaunch L) {
  const AttentionArgs &a = L.a;
  if (a.error && a.error->code != kDeviceErrorNone)
    return;
  extern __shared__ float weight[]; // [splits], [32] reductions, [W][32]
  float *scratch = weight + L.splits;
  float *sums = scratch + 32;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int warps = int(blockDim.x) >> 5;
  const int64_t d = a.headDim, queries = a.batch * a.seq * a.heads;
  const int64_t chunks = (d + 31) / 32;
  for (int64_t blk = blockIdx.x; blk < queries * chunks; blk += gridDim.x) {
    const int64_t qi = blk / chunks, e = (blk % chunks) * 32 + lane;
    const int64_t i = (qi / a.heads) % a.seq, b = qi / (a.heads * a.seq);
    const int64_t n = attendedKeys(a, b, i);
    const int used = int(min(int64_t(L.splits),
                             (n + L.keysPerSplit - 1) / L.keysPerSplit));
    const float *part = a.partials + qi * L.splits * (d + 2);
    float m = -INFINITY;
    for (int s = int(threadIdx.x); s < used; s += int(blockDim.x))
      if (part[s * (d + 2) + 1] > 0.0f)
        m = fmaxf(m, part[s * (d + 2)]);
    m = blockReduce<true>(m, scratch);
    float l = 0.0f;
    for (int s = int(threadIdx.x); s < used; s += int(blockDim.x)) {
      const float ls = part[s * (d + 2) + 1];
      const float w = ls > 0.0f ? expf(part[s * (d + 2)] - m) : 0.0f;
      weight[s] = w;
      l += ls * w;
    }
    l = blockReduce<false>(l, scratch); // also publishes weight[]
    float o0 = 0.0f, o1 = 0.0f, o2 = 0.0f, o3 = 0.0f;
    if (e < d) {
      // Every partial is written (zeros for an empty range): an unused
      // split adds weight 0 times a finite value.
      const float *col = part + 2 + e;
      const int64_t step = d + 2;
      int s = warp;
      for (; s + 3 * warps < used; s += 4 * warps) {
        o0 += col[s * step] * weight[s];
        o1 += col[(s + warps) * step] * weight[s + warps];
        o2 += col[(s + 2 * warps) * step] * weight[s + 2 * warps];
        o3 += col[(s + 3 * warps) * step] * weight[s + 3 * warps];
      }
      for (; s < used; s += warps)
        o0 += col[s * step] * weight[s];
    }
    sums[warp * 32 + lane] = (o0 + o1) + (o2 + o3);
    __syncthreads();
    if (warp == 0 && e < d) {
      float o = 0.0f;
      for (int w = 0; w < warps; ++w)
        o += sums[w * 32 + lane];
      store(a.o, qi * d + e, l > 0.0f ? o / l : 0.0f);
    }
    __syncthreads(); // weight[] and sums are rewritten for the next block
  }
}

/// The first batch whose new cache rows [pos, pos + S) leave [0, maxS), or
/// `batch` when every one fits. Every block checks every batch (B is
/// small), so all blocks of a launch agree. All threads of the block call
/// it (it synchronizes them).
__device__ int64_t firstBadCachePosition(In position, int64_t batch,
                                         int64_t seq, int64_t maxSeq) {
  __shared__ unsigned long long firstBad;
  if (threadIdx.x == 0)
    firstBad = static_cast<unsigned long long>(batch);
  __syncthreads();
  for (int64_t b = threadIdx.x; b < batch; b += blockDim.x) {
    const int64_t pos = loadInt(position, b);
    // Not pos + seq > maxSeq: a huge position would overflow.
    if (pos < 0 || pos > maxSeq - seq)
      atomicMin(&firstBad, static_cast<unsigned long long>(b));
  }
  __syncthreads();
  return int64_t(firstBad);
}

/// Records batch `bad`'s position out of range unless a record is set
/// already (the first error wins). One thread of the grid calls it.
__device__ void recordBadCachePosition(DeviceErrorRecord *error, In position,
                                       int64_t bad, int64_t seq,
                                       int64_t maxSeq) {
  if (atomicCAS(&error->code, int32_t(kDeviceErrorNone),
                int32_t(kDeviceErrorAttentionPosition)) ==
      int32_t(kDeviceErrorNone)) {
    const int64_t pos = loadInt(position, bad);
    error->args[0] = bad;
    error->args[1] = pos;
    error->args[2] = pos > INT64_MAX - seq ? INT64_MAX : pos + seq;
    error->args[3] = maxSeq;
  }
}

// The tensor-core split kernel: same blocks, partials and combine.
#include "runtime/cuda/AttentionTensorCore.cuh"

/// The cache write of attention with a cache, with its position check.
/// Every block first checks every batch's [pos, pos + S) against
/// [0, maxS) (B is small), so all blocks agree: with a position out of
/// range the first bad batch is recorded (unless a record is set already:
/// the first error wins) and nothing is written; with a record set before
/// (by an earlier op), nothing is written either.
__global__ void cacheWriteKernel(In k, In v, Out kCache, Out vCache,
                                 In position, int64_t batch, int64_t seq,
                                 int64_t rowElems, int64_t maxSeq,
                                 DeviceErrorRecord *error) {
  const int64_t bad = firstBadCachePosition(position, batch, seq, maxSeq);
  if (bad < batch) {
    if (globalThread() == 0)
      recordBadCachePosition(error, position, bad, seq, maxSeq);
    return; // nothing is written, as the CPU kernel writes nothing
  }
  if (error->code != kDeviceErrorNone)
    return;
  const int64_t count = batch * seq * rowElems;
  for (int64_t e = globalThread(); e < count; e += gridThreads()) {
    const int64_t r = e % rowElems, t = e / rowElems;
    const int64_t s = t % seq, b = t / seq;
    const int64_t dst = (b * maxSeq + loadInt(position, b) + s) * rowElems + r;
    store(kCache, dst, load(k, e));
    store(vCache, dst, load(v, e));
  }
}

//===----------------------------------------------------------------------===//
// N-d strided copy in units of U
//===----------------------------------------------------------------------===//

template <typename U>
__global__ void stridedCopyKernel(U *dst, const U *src, int rank, Dims sizes,
                                  Dims dstStrides, Dims srcStrides,
                                  int64_t count) {
  for (int64_t e = globalThread(); e < count; e += gridThreads()) {
    int64_t rem = e, so = 0, dOff = 0;
#pragma unroll // constant indices keep the Dims out of local memory
    for (int d = kMaxRank - 1; d >= 0; --d)
      if (d < rank) {
        const int64_t idx = rem % sizes.v[d];
        rem /= sizes.v[d];
        so += idx * srcStrides.v[d];
        dOff += idx * dstStrides.v[d];
      }
    dst[dOff] = src[so];
  }
}

//===----------------------------------------------------------------------===//
// Deterministic weights (runtime/WeightFormula.h, bit-identical to the host)
//===----------------------------------------------------------------------===//

__global__ void generateWeightsKernel(Out out, weights::LocalIndexMap map,
                                      uint64_t seed, uint64_t nameHash,
                                      bool norm, float scale) {
  for (int64_t e = globalThread(); e < map.localCount; e += gridThreads()) {
    const int64_t full = weights::fullIndexOf(map, e);
    store(out, e,
          full < 0
              ? 0.0f
              : weights::weightFromHash(seed, nameHash, full, norm, scale));
  }
}

template <typename U>
cudaError_t copyAs(void *dst, const void *src, const CopyPlan &c,
                   cudaStream_t stream) {
  stridedCopyKernel<U><<<gridFor(c.count, kThreads), kThreads, 0, stream>>>(
      static_cast<U *>(dst), static_cast<const U *>(src), c.rank, c.sizes,
      c.dstStrides, c.srcStrides, c.count);
  return cudaGetLastError();
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

cudaError_t launchBinary(bool mul, In lhs, In rhs, Out out, int64_t count,
                         Broadcast mode, int64_t rhsCount, int rank,
                         const Dims &shape, const Dims &rhsStride,
                         cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  binaryKernel<<<gridFor(count, kThreads), kThreads, 0, stream>>>(
      mul, lhs, rhs, out, count, mode, rhsCount, rank, shape, rhsStride);
  return cudaGetLastError();
}

namespace {
template <typename T>
bool launchSwigluVec(In gate, In up, Out y, int64_t count,
                     cudaStream_t stream) {
  constexpr int V = Vec<T>::n;
  if (count % V != 0 || !aligned16(gate.data) || !aligned16(up.data) ||
      !aligned16(y.data))
    return false;
  const int64_t vectors = count / V;
  swigluVecKernel<T><<<gridFor(vectors, kThreads), kThreads, 0, stream>>>(
      static_cast<const T *>(gate.data), static_cast<const T *>(up.data),
      static_cast<T *>(y.data), vectors);
  return true;
}
} // namespace

cudaError_t launchSwiglu(In gate, In up, Out y, int64_t count,
                         cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  bool vec = false;
  if (gate.dt == up.dt && y.dt == gate.dt) {
    if (gate.dt == Dt::F32)
      vec = launchSwigluVec<float>(gate, up, y, count, stream);
    else if (gate.dt == Dt::F16)
      vec = launchSwigluVec<__half>(gate, up, y, count, stream);
    else if (gate.dt == Dt::BF16)
      vec = launchSwigluVec<__nv_bfloat16>(gate, up, y, count, stream);
  }
  if (!vec)
    swigluKernel<<<gridFor(count, kThreads), kThreads, 0, stream>>>(gate, up,
                                                                    y, count);
  return cudaGetLastError();
}

cudaError_t launchUnary(Unary kind, In x, Out y, int64_t count,
                        cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  const unsigned grid = gridFor(count, kThreads);
  switch (kind) {
#define UNARY_CASE(K)                                                          \
  case Unary::K:                                                               \
    unaryKernel<Unary::K><<<grid, kThreads, 0, stream>>>(x, y, count);         \
    break;
    UNARY_CASE(Silu)
    UNARY_CASE(GeluErf)
    UNARY_CASE(GeluTanh)
    UNARY_CASE(Relu)
    UNARY_CASE(Relu2)
    UNARY_CASE(Relu6)
    UNARY_CASE(LeakyRelu)
    UNARY_CASE(QuickGelu)
    UNARY_CASE(Sigmoid)
    UNARY_CASE(Tanh)
    UNARY_CASE(Mish)
    UNARY_CASE(Hardswish)
    UNARY_CASE(Gelu10)
    UNARY_CASE(Laplace)
    UNARY_CASE(SqrtSoftplus)
#undef UNARY_CASE
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

namespace {
/// Field `Field` of cudaFuncGetAttributes for `Kernel` on the current
/// device, asked once per device and kept; 0 when the runtime cannot say,
/// which is not kept. Host-side only, so safe while capturing. A failed
/// query's error is taken off the runtime's last-error slot, where the
/// next launch's cudaGetLastError would report it as its own.
template <auto Kernel, int cudaFuncAttributes::*Field> int kernelAttribute() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0) {
    (void)cudaGetLastError();
    return 0;
  }
  if (device < kDevices)
    if (int v = known[device].load())
      return v;
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, Kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (device < kDevices)
    known[device].store(attr.*Field);
  return attr.*Field;
}

/// The most threads a block of normRowKernel<T, K, Layer> may have (its
/// registers bound it below 1024 with several vectors per thread); 0 if
/// the runtime cannot say.
template <typename T, int K, bool Layer> int64_t normRowThreads() {
  return int64_t(kernelAttribute<normRowKernel<T, K, Layer>,
                                 &cudaFuncAttributes::maxThreadsPerBlock>()) /
         32 * 32;
}

/// Launches normRowKernel when the operands allow it (see there); false
/// when they do not, and the caller runs the per-element kernel.

template <typename T, bool Layer>
bool launchNormRowsAs(In x, In weight, In bias, Out y, int64_t rows, int64_t h,
                      float epsilon, cudaStream_t stream, In residual,
                      Out sum) {
  constexpr int V = Vec<T>::n;
  if (h % V != 0 || !aligned16(x.data) || !aligned16(weight.data) ||
      !aligned16(y.data) || (Layer && !aligned16(bias.data)) ||
      !aligned16(residual.data) || !aligned16(sum.data))
    return false;
  const int64_t nvec = h / V;
  const unsigned grid = gridFor(rows, 1);
  // The most threads a block of this instantiation may have (its registers
  // bound it below 1024 with several vectors per thread).
  // With as many threads as the row has vectors (up to the limit), each
  // thread issues the fewest dependent loads.
  auto go = [&](auto kernel, int64_t most, int64_t perThread) {
    if (most <= 0 || nvec > most * perThread)
      return false;
    const int64_t threads = std::min<int64_t>(
        most, std::max<int64_t>(32, ((nvec + perThread - 1) / perThread + 31) /
                                        32 * 32));
    kernel<<<grid, unsigned(threads), 0, stream>>>(
        static_cast<const T *>(x.data), static_cast<const T *>(weight.data),
        static_cast<const T *>(Layer ? bias.data : nullptr),
        static_cast<T *>(y.data), rows, h, epsilon,
        static_cast<const T *>(residual.data), static_cast<T *>(sum.data));
    return true;
  };
  return go(normRowKernel<T, 1, Layer>, normRowThreads<T, 1, Layer>(), 1) ||
         go(normRowKernel<T, 2, Layer>, normRowThreads<T, 2, Layer>(), 2) ||
         go(normRowKernel<T, 4, Layer>, normRowThreads<T, 4, Layer>(), 4);
}

/// `residual` and `sum` (data null: none) make it add_rms_norm.
template <bool Layer>
bool launchNormRows(In x, In weight, In bias, Out y, int64_t rows, int64_t h,
                    float epsilon, cudaStream_t stream,
                    In residual = {nullptr, Dt::F32},
                    Out sum = {nullptr, Dt::F32}) {
  if (weight.dt != x.dt || y.dt != x.dt || (Layer && bias.dt != x.dt) ||
      (residual.data && (residual.dt != x.dt || sum.dt != x.dt)))
    return false;
  switch (x.dt) {
  case Dt::F32:
    return launchNormRowsAs<float, Layer>(x, weight, bias, y, rows, h, epsilon,
                                          stream, residual, sum);
  case Dt::F16:
    return launchNormRowsAs<__half, Layer>(x, weight, bias, y, rows, h, epsilon,
                                           stream, residual, sum);
  case Dt::BF16:
    return launchNormRowsAs<__nv_bfloat16, Layer>(
        x, weight, bias, y, rows, h, epsilon, stream, residual, sum);
  default:
    return false;
  }
}
} // namespace

cudaError_t launchRmsNorm(In x, In weight, Out y, int64_t rows, int64_t h,
                          float epsilon, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  if (!launchNormRows<false>(x, weight, In{}, y, rows, h, epsilon, stream))
    rmsNormKernel<<<gridFor(rows, 1), kThreads, 0, stream>>>(
        x, weight, y, rows, h, epsilon);
  return cudaGetLastError();
}

cudaError_t launchAddRmsNorm(In x, In residual, In weight, Out sum, Out y,
                             int64_t rows, int64_t h, float epsilon,
                             cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  if (launchNormRows<false>(x, weight, In{}, y, rows, h, epsilon, stream,
                            residual, sum))
    return cudaGetLastError();
  // Not whole vectors (or mixed dtypes): the add, then the norm of the
  // stored sum, as two kernels.
  const int64_t count = rows * h;
  cudaError_t e = launchBinary(false, x, residual, sum, count, Broadcast::Same,
                               count, 0, Dims{}, Dims{}, stream);
  if (e != cudaSuccess)
    return e;
  return launchRmsNorm(In{sum.data, sum.dt}, weight, y, rows, h, epsilon,
                       stream);
}

cudaError_t launchLayerNorm(In x, In weight, In bias, Out y, int64_t rows,
                            int64_t h, float epsilon, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  if (!launchNormRows<true>(x, weight, bias, y, rows, h, epsilon, stream))
    layerNormKernel<<<gridFor(rows, 1), kThreads, 0, stream>>>(
        x, weight, bias, y, rows, h, epsilon);
  return cudaGetLastError();
}

cudaError_t launchRope(In x, In positions, Out y, int64_t tokens,
                       int64_t heads, int64_t headDim, int64_t rotaryDim,
                       double theta, const double *invFreq,
                       double attentionFactor, cudaStream_t stream) {
  const int64_t rotary = rotaryDim ? rotaryDim : headDim;
  const int64_t count = tokens * heads * (rotary / 2 + headDim - rotary);
  if (count == 0)
    return cudaSuccess;
  ropeKernel<<<gridFor(count, kThreads), kThreads, 0, stream>>>(
      x, positions, y, tokens, heads, headDim, rotary, theta, invFreq,
      float(attentionFactor));
  return cudaGetLastError();
}

cudaError_t launchSoftmax(In x, Out y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream) {
  if (outer * n * inner == 0)
    return cudaSuccess;
  if (inner == 1)
    softmaxRowsKernel<<<gridFor(outer, 1), kThreads, 0, stream>>>(x, y, outer,
                                                                  n);
  else
    softmaxColumnsKernel<<<gridFor(outer * inner, kThreads), kThreads, 0,
                           stream>>>(x, y, outer, n, inner);
  return cudaGetLastError();
}

cudaError_t launchEmbedding(In ids, In table, Out out, int64_t numIds,
                            int64_t vocab, int64_t hidden, int64_t vocabStart,
                            cudaStream_t stream) {
  const int64_t count = numIds * hidden;
  if (count == 0)
    return cudaSuccess;
  embeddingKernel<<<gridFor(count, kThreads), kThreads, 0, stream>>>(
      ids, table, out, numIds, vocab, hidden, vocabStart);
  return cudaGetLastError();
}

namespace {
/// Splits `keyRows` keys for `blocks` blocks (of the other dims) so the
/// grid has about `perMultiprocessor` blocks per multiprocessor, every range
/// a whole number of `granule` keys; at most 1024 ranges (the combine keeps
/// one weight per split in shared memory).
void splitKeys(AttentionTiling &t, int64_t blocks, int64_t keyRows,
               int64_t granule, int multiprocessors,
               int64_t perMultiprocessor) {
  int64_t splits = 1;
  if (multiprocessors > 0 && keyRows > 0) {
    const int64_t want =
        (perMultiprocessor * int64_t(multiprocessors) + blocks - 1) / blocks;
    const int64_t most = std::max<int64_t>(keyRows / granule, 1);
    splits = std::max<int64_t>(1, std::min({want, most, int64_t(1024)}));
  }
  int64_t per = (std::max<int64_t>(keyRows, 1) + splits - 1) / splits;
  per = (per + granule - 1) / granule * granule;
  t.splits = int((std::max<int64_t>(keyRows, 1) + per - 1) / per);
  t.keysPerSplit = per;
}
} // namespace

AttentionTiling planAttention(int64_t batch, int64_t seq, int64_t heads,
                              int64_t kvHeads, int64_t headDim, int64_t keyRows,
                              int64_t elemBytes, int multiprocessors,
                              int keyTile, int blocksPerMultiprocessor,
                              bool tensorCore) {
  AttentionTiling t;
  if (kvHeads <= 0 || heads % kvHeads != 0 || headDim <= 0 ||
      headDim > kMaxAttentionHeadDim ||
      (elemBytes != 2 && elemBytes != 4))
    return t;
  const int64_t rowsPerSet = seq * (heads / kvHeads);
  auto workspace = [&] {
    if (t.splits > 1)
      t.workspaceBytes = size_t(batch * seq * heads) * size_t(t.splits) *
                         size_t(headDim + 2) * sizeof(float);
  };
  if (tensorCore && elemBytes == 2 && tensorCoreHeadDim(headDim)) {
    // Two stages per warp; the second overlaps the first's arithmetic.
    // Ranges are whole multiples of the 4 warps' 16-key tiles.
    t.fits = t.tensorCore = true;
    t.rowTile = kTensorCoreRows;
    t.keyTile = kTensorCoreKeys;
    t.stages = 2;
    t.sharedBytes = size_t(tensorCoreSmemBytes(headDim, t.stages));
    const int64_t rowTiles =
        (rowsPerSet + kTensorCoreRows - 1) / kTensorCoreRows;
    splitKeys(t, std::max<int64_t>(batch * kvHeads * rowTiles, 1), keyRows,
              kTensorCoreWarps * kTensorCoreKeys, multiprocessors,
              blocksPerMultiprocessor > 0 ? blocksPerMultiprocessor : 2);
    workspace();
    return t;
  }
  // Without the opt-in (which costs occupancy) a block has 48 KiB: two
  // stages of key/value tiles if they fit (the next tile's copy overlaps
  // this one's arithmetic), else one; then fewer keys, fewer rows, and past
  // that the opt-in.
  constexpr int64_t kDefaultShared = 48 << 10, kOptInShared = 227 << 10;
  int64_t r = std::min<int64_t>(kAttentionRowTile, std::max<int64_t>(rowsPerSet, 1));
  int64_t k = keyTile > 0 && keyTile < kAttentionKeyTile ? keyTile
                                                          : kAttentionKeyTile;
  int64_t stages = 2;
  const int64_t perMultiprocessor =
      blocksPerMultiprocessor > 0 ? blocksPerMultiprocessor : 4;
  auto bytes = [&] {
    return attentionSmem(r, k, headDim, elemBytes, stages).total;
  };
  if (bytes() > kDefaultShared)
    stages = 1;
  while (bytes() > kDefaultShared && k > 1)
    k /= 2;
  while (bytes() > kDefaultShared && r > 1)
    r /= 2;
  if (bytes() > kOptInShared)
    return t;
  t.fits = true;
  t.rowTile = int(r);
  t.keyTile = int(k);
  t.stages = int(stages);
  t.sharedBytes = size_t(bytes());
  // Enough blocks for ~4 per multiprocessor, each range at least one key
  // tile (fewer splits when the rows alone fill the GPU, e.g. prefill).
  const int64_t rowTiles = (rowsPerSet + r - 1) / r;
  splitKeys(t, std::max<int64_t>(batch * kvHeads * rowTiles, 1), keyRows, k,
            multiprocessors, perMultiprocessor);
  workspace();
  return t;
}

int64_t attentionElemBytes(Dt dt) {
  return dt == Dt::F32 ? 4 : dt == Dt::F16 || dt == Dt::BF16 ? 2 : 0;
}

/// Raises `kernel`'s dynamic shared memory limit on the current device to
/// at least `shared` bytes. The limit it starts from is the runtime's
/// (48 KiB less the kernel's static __shared__, which counts against them
/// too: an H100 refused head_dim 96's 48 KiB of tiles plus the tensor-core
/// kernel's position-check slot), so no static size is assumed here. It
/// only grows, kept per (kernel, device) under a lock: rank threads
/// sharing a GPU (--single-gpu-test) launch one kernel with different
/// sizes, and setting it to exactly one launch's size could lower it under
/// another thread's launch.
static cudaError_t raiseSharedLimit(const void *kernel, size_t shared) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    return e;
  static std::mutex mutex;
  static std::map<std::pair<const void *, int>, size_t> limits;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = limits.try_emplace({kernel, device}, 0);
  if (fresh) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel) == cudaSuccess)
      it->second = size_t(std::max(attr.maxDynamicSharedSizeBytes, 0));
    else
      (void)cudaGetLastError(); // unknown: the attribute is set below
  }
  if (shared <= it->second)
    return cudaSuccess;
  cudaError_t e = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e == cudaSuccess)
    it->second = shared;
  return e;
}

/// Launches an attention split kernel with `shared` bytes of dynamic shared
/// memory, opting in above what a block gets without.
static cudaError_t launchWithShared(void (*kernel)(AttentionLaunch),
                                    const AttentionLaunch &L, dim3 grid,
                                    size_t shared, cudaStream_t stream) {
  if (cudaError_t e =
          raiseSharedLimit(reinterpret_cast<const void *>(kernel), shared);
      e != cudaSuccess)
    return e;
  kernel<<<grid, kAttentionThreads, shared, stream>>>(L);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launchAttentionSplit(const AttentionLaunch &L, dim3 grid,
                                 size_t shared, cudaStream_t stream) {
  return launchWithShared(attentionSplitKernel<T>, L, grid, shared, stream);
}

template <typename T, int D>
cudaError_t launchTensorCoreFor(const AttentionLaunch &L, dim3 grid,
                                size_t shared, cudaStream_t stream) {
  return launchWithShared(attentionTensorCoreKernel<T, D>, L, grid, shared,
                          stream);
}

template <typename T>
cudaError_t launchTensorCore(const AttentionLaunch &L, dim3 grid, size_t shared,
                             cudaStream_t stream) {
  switch (L.a.headDim) {
  case 16:
    return launchTensorCoreFor<T, 16>(L, grid, shared, stream);
  case 32:
    return launchTensorCoreFor<T, 32>(L, grid, shared, stream);
  case 64:
    return launchTensorCoreFor<T, 64>(L, grid, shared, stream);
  case 80:
    return launchTensorCoreFor<T, 80>(L, grid, shared, stream);
  case 96:
    return launchTensorCoreFor<T, 96>(L, grid, shared, stream);
  case 128:
    return launchTensorCoreFor<T, 128>(L, grid, shared, stream);
  default:
    return cudaErrorInvalidValue; // planAttention checks tensorCoreHeadDim
  }
}

/// Whether the binary of the tensor-core kernel loaded for the current
/// device is sm_80 or newer (mma.sync for bf16; below, the kernel traps).
/// Kept per device (kernelAttribute).
static bool tensorCoreBinary() {
  return kernelAttribute<attentionTensorCoreKernel<__half, 16>,
                         &cudaFuncAttributes::binaryVersion>() >= 80;
}

bool tensorCoreAttentionApplies(const AttentionArgs &args) {
  const Dt dt = args.k.dt;
  return (dt == Dt::BF16 || dt == Dt::F16) && args.q.dt == dt &&
         args.v.dt == dt && tensorCoreHeadDim(args.headDim) &&
         aligned16(args.q.data) && aligned16(args.k.data) &&
         aligned16(args.v.data) && tensorCoreBinary();
}

cudaError_t launchAttention(const AttentionArgs &args, int multiprocessors,
                            cudaStream_t stream) {
  const int64_t queries = args.batch * args.seq * args.heads;
  const bool attend = queries > 0 && args.headDim > 0;
  if (attend && args.k.dt != args.v.dt)
    return cudaErrorInvalidValue; // the loader refuses mixed k/v dtypes
  const bool tensorCore =
      attend && args.tensorCore && tensorCoreAttentionApplies(args);
  auto tiling = [&](int sms) {
    return planAttention(args.batch, args.seq, args.heads, args.kvHeads,
                         args.headDim, args.keyStride,
                         attentionElemBytes(args.k.dt), sms, args.keyTile,
                         args.blocksPerMultiprocessor, tensorCore);
  };
  AttentionTiling t;
  if (attend) {
    t = tiling(args.partials ? multiprocessors : 0);
    if (t.splits > 1 && t.workspaceBytes > args.partialsBytes)
      t = tiling(0); // no room for the partials: one split
    if (!t.fits)
      return cudaErrorInvalidValue; // Kernels.cpp checks head_dim first
  }
  // Asked to, the tensor-core kernel takes the cache write in (one launch
  // fewer): new rows of the caches' dtype, 16-byte aligned as its cp.async
  // needs.
  const bool fusedWrite =
      args.fuseCacheWrite && t.tensorCore && args.position.data &&
      args.batch > 0 && args.newK.dt == args.k.dt &&
      args.newV.dt == args.v.dt && aligned16(args.newK.data) &&
      aligned16(args.newV.data);
  // Otherwise, with a cache: the position check and the new rows first.
  if (args.position.data && args.batch > 0 && !fusedWrite) {
    const int64_t rowElems = args.kvHeads * args.headDim;
    const int64_t count = args.batch * args.seq * rowElems;
    // The caches are written through k and v (Kernels.cpp's kCache and
    // vCache, non-const there).
    const Out kCache{const_cast<void *>(args.k.data), args.k.dt};
    const Out vCache{const_cast<void *>(args.v.data), args.v.dt};
    cacheWriteKernel<<<gridFor(std::max<int64_t>(count, 1), kThreads), kThreads,
                       0, stream>>>(args.newK, args.newV, kCache, vCache,
                                    args.position, args.batch, args.seq,
                                    rowElems, args.keyStride, args.error);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  if (!attend)
    return cudaSuccess;
  AttentionLaunch L;
  L.a = args;
  L.rowTile = t.rowTile;
  L.keyTile = t.keyTile;
  L.splits = t.splits;
  L.stages = t.stages;
  L.keysPerSplit = t.keysPerSplit;
  L.fusedWrite = fusedWrite;
  const int64_t rowsPerSet = args.seq * (args.heads / args.kvHeads);
  L.rowTiles = int((rowsPerSet + t.rowTile - 1) / t.rowTile);
  const int64_t elem = attentionElemBytes(args.k.dt);
  L.vec = aligned16(args.k.data) && aligned16(args.v.data) &&
          (args.headDim * elem) % 16 == 0;
  const int64_t sets = args.batch * args.kvHeads * L.rowTiles;
  if (sets > INT32_MAX || t.splits > 65535) // gridDim.x, gridDim.y
    return cudaErrorInvalidConfiguration;
  const dim3 grid(unsigned(sets), unsigned(t.splits));
  cudaError_t e = cudaErrorInvalidValue;
  if (t.tensorCore)
    e = args.k.dt == Dt::BF16
            ? launchTensorCore<__nv_bfloat16>(L, grid, t.sharedBytes, stream)
            : launchTensorCore<__half>(L, grid, t.sharedBytes, stream);
  else if (args.k.dt == Dt::F32)
    e = launchAttentionSplit<float>(L, grid, t.sharedBytes, stream);
  else if (args.k.dt == Dt::F16)
    e = launchAttentionSplit<__half>(L, grid, t.sharedBytes, stream);
  else if (args.k.dt == Dt::BF16)
    e = launchAttentionSplit<__nv_bfloat16>(L, grid, t.sharedBytes, stream);
  if (e != cudaSuccess || t.splits == 1)
    return e;
  const int64_t blocks = queries * ((args.headDim + 31) / 32);
  attentionCombineKernel<<<gridFor(blocks, 1), kAttentionThreads,
                           size_t(t.splits + 32 + kAttentionThreads) *
                               sizeof(float),
                           stream>>>(L);
  return cudaGetLastError();
}

cudaError_t launchStridedCopy(void *dst, const void *src, const CopyPlan &plan,
                              cudaStream_t stream) {
  if (plan.count == 0)
    return cudaSuccess;
  switch (plan.unitBytes) {
  case 1:
    return copyAs<uint8_t>(dst, src, plan, stream);
  case 2:
    return copyAs<uint16_t>(dst, src, plan, stream);
  case 4:
    return copyAs<uint32_t>(dst, src, plan, stream);
  case 8:
    return copyAs<uint2>(dst, src, plan, stream);
  case 16:
    return copyAs<uint4>(dst, src, plan, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t launchGenerateWeights(Out out, const weights::LocalIndexMap &map,
                                  uint64_t seed, uint64_t nameHash, bool norm,
                                  float scale, cudaStream_t stream) {
  if (map.localCount == 0)
    return cudaSuccess;
  generateWeightsKernel<<<gridFor(map.localCount, kThreads), kThreads, 0,
                          stream>>>(out, map, seed, nameHash, norm, scale);
  return cudaGetLastError();
}

namespace {
__device__ uint64_t globalNanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void stallKernel(uint64_t nanoseconds) {
  uint64_t start = globalNanoseconds();
  while (globalNanoseconds() - start < nanoseconds)
    __nanosleep(100000);
}
} // namespace

cudaError_t launchStall(uint64_t nanoseconds, cudaStream_t stream) {
  stallKernel<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

} // namespace braid::rt::cuda::detail
