//===- ShapeRules.h - Shape rules of the compute ops ------------*- C++ -*-===//
//
// The shape checks every implementation of a compute op makes, on plain
// Shapes, with their error messages: the CPU reference kernels (cpu/*.cpp)
// and the CUDA launchers' host half (cuda/Kernels.cpp) both call these, so
// the two reject the same operands with the same words. What only one
// backend needs (the CUDA result-shape, alignment and size limits) stays
// with that backend.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CPU_SHAPERULES_H
#define BRAID_RUNTIME_CPU_SHAPERULES_H

#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/cpu/Kernels.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace braid::rt::cpu {

/// matmul: a [..., M, K] ([..., K, M] with transposeA) times b [K, N]
/// ([N, K] with transposeB), b either one matrix shared by every batch or
/// carrying a's batch dims; the result is a's batch dims + [M, N]. The CPU
/// kernel, the plan loader and the CUDA GEMM (cuBLASLt strided batches)
/// accept exactly these shapes.
struct MatmulDims {
  int64_t batch = 1, m = 0, n = 0, k = 0; // batch: product of a's batch dims
  bool batchedB = false;                  // b carries a's batch dims
  Shape result;
};
Expected<MatmulDims> checkMatmulShapes(const Shape &a, const Shape &b,
                                       bool transposeA, bool transposeB);

/// add / mul (`op` names it): rhs aligned to lhs's trailing dims, size-1
/// dims broadcast; the result has lhs's shape.
struct Broadcast {
  std::vector<int64_t> rhsStride; // per lhs dim, in rhs elements; 0: broadcast
  bool exact = true;              // every rhs dim equals lhs's
};
Expected<Broadcast> checkBroadcast(const char *op, const Shape &lhs,
                                   const Shape &rhs);

/// rms_norm / layer_norm (`op`): x has a non-empty last dim H and the
/// parameter `what` (weight, bias) is [H].
Status checkNormParam(const char *op, const char *what, const Shape &x,
                      const Shape &param);

/// rope: x [B, S, H, D] with D even, positions [B, S].
struct RopeDims {
  int64_t b, s, h, d;
};
/// `rotaryDim` 0: the whole head D, which must be even; else the rotary
/// dim must be even and in [2, D] (D itself may be odd).
Expected<RopeDims> checkRopeShapes(const Shape &x, const Shape &positions,
                                   int64_t rotaryDim = 0);

/// softmax along `dim` of x, seen as [outer, n, inner].
struct SoftmaxDims {
  int64_t outer, n, inner;
};
Expected<SoftmaxDims> checkSoftmaxShape(const Shape &x, int64_t dim);

/// embedding: table [V, H]; returns the result shape ids + [H].
Expected<Shape> checkEmbeddingShapes(const Shape &ids, const Shape &table);

/// attention: q [B, S, Hq, D], k and v [B, S, Hkv, D], agreeing with the
/// op's num_heads / num_kv_heads / head_dim, Hq a multiple of Hkv.
struct AttentionDims {
  int64_t b, sq, hq, hkv, d;
};
Expected<AttentionDims> checkAttentionShapes(const Shape &q, const Shape &k,
                                             const Shape &v,
                                             const AttentionParams &p);
/// attention with a KV cache: caches [B, max_seq, Hkv, D], position [B].
Status checkAttentionCacheShapes(const AttentionDims &d, const Shape &kCache,
                                 const Shape &vCache, const Shape &position);
/// The error for batch `batch` writing cache rows [begin, end) past
/// `maxSeq` (checked on the host by the CPU, on the device by CUDA).
Status attentionCacheRangeError(int64_t batch, int64_t begin, int64_t end,
                                int64_t maxSeq);

/// slice: one offset and size per dim of x, [offset, offset + size) inside
/// the dim.
Status checkSliceShapes(const Shape &x, const Shape &offsets,
                        const Shape &sizes);

/// concat along `dim`: inputs of one rank and element size that agree
/// outside `dim`. Returns the result shape.
struct ConcatInput {
  const Shape *shape;
  size_t elemSize;
};
Expected<Shape> checkConcatShapes(const std::vector<ConcatInput> &inputs,
                                  int64_t dim);

/// reshape: the same element count.
Status checkReshape(const Shape &x, const Shape &y);

} // namespace braid::rt::cpu

#endif // BRAID_RUNTIME_CPU_SHAPERULES_H
