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
//   rms_norm:    rows*H (2 sz_x + sz_y) + H sz_w per block (second read of a
//                row is usually an L1/L2 hit: then rows*H (sz_x + sz_y))
//   layer_norm:  as rms_norm with three passes over x and bias reads
//   rope:        N (sz_x + sz_y) + B*S position reads
//   softmax:     N (3 sz_x + sz_y) at most (three passes; rows cached)
//   embedding:   numIds*H (sz_table + sz_out) + numIds id reads
//   attention:   per (b, h, query): n*D (sz_k + sz_v) + 2 D (sz_q, sz_o);
//                decode (S = 1) is memory-bound on the cache reads. Query
//                heads of one GQA group re-read the same KV head (from L2,
//                ideally): the minimum is B*Hkv*n*D*(sz_k + sz_v).
//   cache write: B*S*Hkv*D (sz_k + sz_v) read + the same written
//   copies:      2 * bytes copied
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

namespace braid::rt::cuda::detail {
namespace {

constexpr int kThreads = 256;        // elementwise and per-row kernels
constexpr int64_t kMaxBlocks = 1 << 20; // grid-stride loops beyond this
constexpr int kAttentionThreads = 128;
constexpr int kKeyTile = 64; // keys scored per step of the online softmax

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
// Storage <-> fp32
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float load(In t, int64_t i) {
  switch (t.dt) {
  case Dt::F32:
    return static_cast<const float *>(t.data)[i];
  case Dt::F16:
    return __half2float(static_cast<const __half *>(t.data)[i]);
  case Dt::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(t.data)[i]);
  case Dt::I32:
    return float(static_cast<const int32_t *>(t.data)[i]);
  case Dt::I64:
    return float(static_cast<const int64_t *>(t.data)[i]);
  }
  return 0.0f;
}

/// Integer reads (ids, positions); float storage truncates, as loadAsInt.
__device__ __forceinline__ int64_t loadInt(In t, int64_t i) {
  switch (t.dt) {
  case Dt::I32:
    return static_cast<const int32_t *>(t.data)[i];
  case Dt::I64:
    return static_cast<const int64_t *>(t.data)[i];
  default:
    return int64_t(load(t, i));
  }
}

__device__ __forceinline__ void store(Out t, int64_t i, float v) {
  switch (t.dt) {
  case Dt::F32:
    static_cast<float *>(t.data)[i] = v;
    return;
  case Dt::F16:
    static_cast<__half *>(t.data)[i] = __float2half_rn(v);
    return;
  case Dt::BF16:
    static_cast<__nv_bfloat16 *>(t.data)[i] = __float2bfloat16_rn(v);
    return;
  case Dt::I32:
    static_cast<int32_t *>(t.data)[i] = int32_t(v); // toward zero
    return;
  case Dt::I64:
    static_cast<int64_t *>(t.data)[i] = int64_t(v);
    return;
  }
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

template <Unary K> __device__ __forceinline__ float unary(float v) {
  if (K == Unary::Silu)
    return v / (1.0f + expf(-v));
  if (K == Unary::GeluErf)
    return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
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

//===----------------------------------------------------------------------===//
// Rope (Hugging Face rotate_half): one thread per (token, head, pair)
//===----------------------------------------------------------------------===//

__global__ void ropeKernel(In x, In positions, Out y, int64_t tokens,
                           int64_t heads, int64_t d, double theta) {
  const int64_t half = d / 2, count = tokens * heads * half;
  for (int64_t e = globalThread(); e < count; e += gridThreads()) {
    const int64_t i = e % half, t = e / half;
    const int64_t head = t % heads, token = t / heads;
    // Element i pairs with i + D/2 at frequency theta^(-2i/D), in fp64.
    double pos = double(loadInt(positions, token));
    double angle = pos * pow(theta, -2.0 * double(i) / double(d));
    float c = float(cos(angle)), s = float(sin(angle));
    const int64_t base = (token * heads + head) * d;
    float x1 = load(x, base + i), x2 = load(x, base + i + half);
    store(y, base + i, x1 * c - x2 * s);
    store(y, base + i + half, x2 * c + x1 * s);
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
// Attention: one block per (b, query i, head h), online softmax over keys
//===----------------------------------------------------------------------===//

__global__ void attentionKernel(AttentionArgs a) {
  if (a.error && a.error->code != kDeviceErrorNone)
    return; // a cache position was out of range: the host reports it
  extern __shared__ float shared[];
  const int64_t d = a.headDim;
  float *qs = shared;          // [D] this query
  float *acc = qs + d;         // [D] running sum of p_j v_j
  float *p = acc + d;          // [kKeyTile] scores, then exp(score - max)
  float *scratch = p + kKeyTile; // [32] reductions
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int warps = int(blockDim.x) >> 5;
  const int64_t group = a.heads / a.kvHeads;
  const int64_t queries = a.batch * a.seq * a.heads;

  for (int64_t qi = blockIdx.x; qi < queries; qi += gridDim.x) {
    // qi = (b * S + i) * Hq + h, which is also q's and o's row index.
    const int64_t h = qi % a.heads, i = (qi / a.heads) % a.seq;
    const int64_t b = qi / (a.heads * a.seq);
    const int64_t kvh = h / group; // GQA: query head h reads kv head h/g
    int64_t n; // keys this query attends to: [0, n)
    if (a.position.data) {
      const int64_t pos = loadInt(a.position, b);
      n = a.causal ? pos + i + 1 : pos + a.seq;
    } else {
      n = a.causal ? i + 1 : a.seq;
    }
    for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
      qs[e] = load(a.q, qi * d + e);
      acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f; // running max and sum of exp
    __syncthreads();
    for (int64_t j0 = 0; j0 < n; j0 += kKeyTile) {
      const int cnt = int(n - j0 < kKeyTile ? n - j0 : kKeyTile);
      // Scores: one warp per key, lanes across D (coalesced).
      for (int jj = warp; jj < cnt; jj += warps) {
        const int64_t kBase =
            ((b * a.keyStride + j0 + jj) * a.kvHeads + kvh) * d;
        float dot = 0.0f;
        for (int64_t e = lane; e < d; e += 32)
          dot += qs[e] * load(a.k, kBase + e);
        dot = warpReduce<false>(dot);
        if (lane == 0)
          p[jj] = dot * a.scale;
      }
      __syncthreads();
      float tileMax = -INFINITY;
      for (int jj = int(threadIdx.x); jj < cnt; jj += int(blockDim.x))
        tileMax = fmaxf(tileMax, p[jj]);
      tileMax = blockReduce<true>(tileMax, scratch);
      const float mNew = fmaxf(m, tileMax);
      const float alpha = expf(m - mNew); // 0 on the first tile
      float tileSum = 0.0f;
      for (int jj = int(threadIdx.x); jj < cnt; jj += int(blockDim.x)) {
        p[jj] = expf(p[jj] - mNew);
        tileSum += p[jj];
      }
      tileSum = blockReduce<false>(tileSum, scratch); // also publishes p
      l = l * alpha + tileSum;
      m = mNew;
      // Values: threads across D (coalesced), each owning its acc[e].
      for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
        float s = acc[e] * alpha;
        for (int jj = 0; jj < cnt; ++jj)
          s += p[jj] *
               load(a.v, ((b * a.keyStride + j0 + jj) * a.kvHeads + kvh) * d +
                             e);
        acc[e] = s;
      }
      __syncthreads(); // p is rewritten by the next tile
    }
    for (int64_t e = threadIdx.x; e < d; e += blockDim.x)
      store(a.o, qi * d + e, n > 0 ? acc[e] / l : 0.0f);
    __syncthreads(); // qs and acc are rewritten by the next query
  }
}

__global__ void checkCachePositionsKernel(In position, int64_t batch,
                                          int64_t seq, int64_t maxSeq,
                                          DeviceErrorRecord *error) {
  // One thread: B is small, and the first bad batch is the one reported,
  // as the CPU kernel does.
  if (error->code != kDeviceErrorNone)
    return;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t pos = loadInt(position, b);
    if (pos < 0 || pos + seq > maxSeq) {
      error->args[0] = b;
      error->args[1] = pos;
      error->args[2] = pos + seq;
      error->args[3] = maxSeq;
      __threadfence();
      error->code = kDeviceErrorAttentionPosition;
      return;
    }
  }
}

__global__ void cacheWriteKernel(In k, In v, Out kCache, Out vCache,
                                 In position, int64_t batch, int64_t seq,
                                 int64_t rowElems, int64_t maxSeq,
                                 const DeviceErrorRecord *error) {
  if (error->code != kDeviceErrorNone)
    return; // nothing is written, as the CPU kernel writes nothing
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
                                      bool norm) {
  for (int64_t e = globalThread(); e < map.localCount; e += gridThreads()) {
    const int64_t full = weights::fullIndexOf(map, e);
    store(out, e,
          full < 0 ? 0.0f : weights::weightFromHash(seed, nameHash, full, norm));
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

cudaError_t launchUnary(Unary kind, In x, Out y, int64_t count,
                        cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  const unsigned grid = gridFor(count, kThreads);
  switch (kind) {
  case Unary::Silu:
    unaryKernel<Unary::Silu><<<grid, kThreads, 0, stream>>>(x, y, count);
    break;
  case Unary::GeluErf:
    unaryKernel<Unary::GeluErf><<<grid, kThreads, 0, stream>>>(x, y, count);
    break;
  case Unary::GeluTanh:
    unaryKernel<Unary::GeluTanh><<<grid, kThreads, 0, stream>>>(x, y, count);
    break;
  }
  return cudaGetLastError();
}

cudaError_t launchRmsNorm(In x, In weight, Out y, int64_t rows, int64_t h,
                          float epsilon, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  rmsNormKernel<<<gridFor(rows, 1), kThreads, 0, stream>>>(x, weight, y, rows,
                                                           h, epsilon);
  return cudaGetLastError();
}

cudaError_t launchLayerNorm(In x, In weight, In bias, Out y, int64_t rows,
                            int64_t h, float epsilon, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  layerNormKernel<<<gridFor(rows, 1), kThreads, 0, stream>>>(
      x, weight, bias, y, rows, h, epsilon);
  return cudaGetLastError();
}

cudaError_t launchRope(In x, In positions, Out y, int64_t tokens,
                       int64_t heads, int64_t headDim, double theta,
                       cudaStream_t stream) {
  const int64_t count = tokens * heads * (headDim / 2);
  if (count == 0)
    return cudaSuccess;
  ropeKernel<<<gridFor(count, kThreads), kThreads, 0, stream>>>(
      x, positions, y, tokens, heads, headDim, theta);
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

cudaError_t launchAttention(const AttentionArgs &args, cudaStream_t stream) {
  const int64_t queries = args.batch * args.seq * args.heads;
  if (queries == 0 || args.headDim == 0)
    return cudaSuccess;
  const size_t sharedBytes =
      size_t(2 * args.headDim + kKeyTile + 32) * sizeof(float);
  attentionKernel<<<gridFor(queries, 1), kAttentionThreads, sharedBytes,
                    stream>>>(args);
  return cudaGetLastError();
}

cudaError_t launchCheckCachePositions(In position, int64_t batch, int64_t seq,
                                      int64_t maxSeq, DeviceErrorRecord *error,
                                      cudaStream_t stream) {
  if (batch == 0)
    return cudaSuccess;
  checkCachePositionsKernel<<<1, 1, 0, stream>>>(position, batch, seq, maxSeq,
                                                 error);
  return cudaGetLastError();
}

cudaError_t launchCacheWrite(In k, In v, Out kCache, Out vCache, In position,
                             int64_t batch, int64_t seq, int64_t rowElems,
                             int64_t maxSeq, const DeviceErrorRecord *error,
                             cudaStream_t stream) {
  const int64_t count = batch * seq * rowElems;
  if (count == 0)
    return cudaSuccess;
  cacheWriteKernel<<<gridFor(count, kThreads), kThreads, 0, stream>>>(
      k, v, kCache, vCache, position, batch, seq, rowElems, maxSeq, error);
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
                                  cudaStream_t stream) {
  if (map.localCount == 0)
    return cudaSuccess;
  generateWeightsKernel<<<gridFor(map.localCount, kThreads), kThreads, 0,
                          stream>>>(out, map, seed, nameHash, norm);
  return cudaGetLastError();
}

} // namespace braid::rt::cuda::detail
