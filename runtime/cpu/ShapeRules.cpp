//===- ShapeRules.cpp - Operand shape rules of the compute ops ------------===//
#include "runtime/cpu/ShapeRules.h"
#include "runtime/CheckedMath.h"

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<MatmulDims> cpu::checkMatmulShapes(const Shape &a, const Shape &b,
                                            bool transposeA, bool transposeB) {
  size_t ra = a.size(), rb = b.size();
  if (ra < 2 || rb < 2)
    return errorf("matmul: operands need rank >= 2, got ", formatShape(a),
                  " and ", formatShape(b));
  MatmulDims d;
  // b is either a plain [K, N] matrix or carries a's batch dims: a GEMM
  // strides through b per batch only in the second case.
  d.batchedB = rb > 2;
  if (d.batchedB && rb != ra)
    return errorf("matmul: batched b ", formatShape(b), " must have a's rank ",
                  ra, " (a is ", formatShape(a), ")");
  for (size_t i = 0; i + 2 < ra; ++i) {
    if (d.batchedB && a[i] != b[i])
      return errorf("matmul: batch dim ", i, " differs: ", formatShape(a),
                    " vs ", formatShape(b));
    d.batch *= a[i];
  }
  d.m = transposeA ? a[ra - 1] : a[ra - 2];
  d.k = transposeA ? a[ra - 2] : a[ra - 1];
  int64_t kb = transposeB ? b[rb - 1] : b[rb - 2];
  d.n = transposeB ? b[rb - 2] : b[rb - 1];
  if (d.k != kb)
    return errorf("matmul: contraction sizes differ: a ", formatShape(a),
                  " gives K=", d.k, ", b ", formatShape(b), " gives K=", kb);
  d.result.assign(a.begin(), a.end() - 2);
  d.result.push_back(d.m);
  d.result.push_back(d.n);
  return d;
}

Expected<Broadcast> cpu::checkBroadcast(const char *op, const Shape &lhs,
                                        const Shape &rhs) {
  size_t rl = lhs.size(), rr = rhs.size();
  if (rr > rl)
    return errorf(op, ": rhs ", formatShape(rhs),
                  " has a higher rank than lhs ", formatShape(lhs));
  Broadcast b;
  b.rhsStride.assign(rl, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < rr; ++i) {
    size_t ri = rr - 1 - i, li = rl - 1 - i;
    if (rhs[ri] != lhs[li] && rhs[ri] != 1)
      return errorf(op, ": rhs ", formatShape(rhs),
                    " does not broadcast to lhs ", formatShape(lhs));
    b.exact = b.exact && rhs[ri] == lhs[li];
    b.rhsStride[li] = rhs[ri] == 1 ? 0 : stride;
    stride *= rhs[ri];
  }
  return b;
}

Status cpu::checkNormParam(const char *op, const char *what, const Shape &x,
                           const Shape &param) {
  if (x.empty() || x.back() == 0)
    return errorf(op, ": input ", formatShape(x),
                  " needs a non-empty last dimension");
  if (param.size() != 1 || param[0] != x.back())
    return errorf(op, ": ", what, " ", formatShape(param), " must be [",
                  x.back(), "] for input ", formatShape(x));
  return Status::ok();
}

Expected<RopeDims> cpu::checkRopeShapes(const Shape &x,
                                        const Shape &positions,
                                        int64_t rotaryDim) {
  if (x.size() != 4)
    return errorf("rope: input must be [B, S, H, D], got ", formatShape(x));
  RopeDims r{x[0], x[1], x[2], x[3]};
  if (rotaryDim == 0 && r.d % 2)
    return errorf("rope: head dim ", r.d, " must be even");
  if (rotaryDim != 0 && (rotaryDim < 2 || rotaryDim > r.d || rotaryDim % 2))
    return errorf("rope: rotary dim ", rotaryDim, " must be even and in [2, ",
                  r.d, "]");
  if (positions != Shape{r.b, r.s})
    return errorf("rope: positions ", formatShape(positions), " must be [", r.b,
                  ", ", r.s, "]");
  return r;
}

Expected<SoftmaxDims> cpu::checkSoftmaxShape(const Shape &x, int64_t dim) {
  int64_t rank = int64_t(x.size());
  if (dim < 0 || dim >= rank)
    return errorf("softmax: dim ", dim, " out of range for ", formatShape(x));
  SoftmaxDims s{1, x[size_t(dim)], 1};
  for (int64_t d = dim + 1; d < rank; ++d)
    s.inner *= x[size_t(d)];
  for (int64_t d = 0; d < dim; ++d)
    s.outer *= x[size_t(d)];
  return s;
}

Expected<Shape> cpu::checkEmbeddingShapes(const Shape &ids,
                                          const Shape &table) {
  if (table.size() != 2)
    return errorf("embedding: table must be [V, H], got ", formatShape(table));
  Shape out = ids;
  out.push_back(table[1]);
  return out;
}

Expected<AttentionDims> cpu::checkAttentionShapes(const Shape &q,
                                                  const Shape &k,
                                                  const Shape &v,
                                                  const AttentionParams &p) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return errorf("attention: q, k, v must be rank 4, got ", formatShape(q),
                  ", ", formatShape(k), ", ", formatShape(v));
  AttentionDims d{q[0], q[1], q[2], k[2], q[3]};
  if (p.numHeads != d.hq || p.numKvHeads != d.hkv || p.headDim != d.d)
    return errorf("attention: num_heads/num_kv_heads/head_dim ", p.numHeads,
                  "/", p.numKvHeads, "/", p.headDim, " disagree with q ",
                  formatShape(q), " and k ", formatShape(k));
  if (d.hkv <= 0 || d.hq % d.hkv)
    return errorf("attention: num_heads ", d.hq,
                  " is not a multiple of num_kv_heads ", d.hkv);
  if (k != Shape{d.b, d.sq, d.hkv, d.d} || v != k)
    return errorf("attention: k ", formatShape(k), " and v ", formatShape(v),
                  " must be [", d.b, ", ", d.sq, ", ", d.hkv, ", ", d.d, "]");
  return d;
}

Status cpu::checkAttentionCacheShapes(const AttentionDims &d,
                                      const Shape &kCache, const Shape &vCache,
                                      const Shape &position) {
  // The cache may hold more sequences than the step runs (a decode batch
  // bucket): sequence b uses the cache's rows b * max_seq onwards.
  if (kCache.size() != 4 || kCache[0] < d.b || kCache[2] != d.hkv ||
      kCache[3] != d.d || vCache != kCache)
    return errorf("attention: caches ", formatShape(kCache), " and ",
                  formatShape(vCache), " must be [>= ", d.b, ", max_seq, ",
                  d.hkv, ", ", d.d, "]");
  if (position != Shape{d.b})
    return errorf("attention: position ", formatShape(position), " must be [",
                  d.b, "]");
  return Status::ok();
}

Status cpu::attentionCacheRangeError(int64_t batch, int64_t begin, int64_t end,
                                     int64_t maxSeq) {
  return errorf("attention: batch ", batch, " writes cache rows [", begin, ", ",
                end, ") outside max_seq ", maxSeq);
}

Status cpu::checkSliceShapes(const Shape &x, const Shape &offsets,
                             const Shape &sizes) {
  size_t r = x.size();
  if (offsets.size() != r || sizes.size() != r)
    return errorf("slice: offsets/sizes need ", r, " entries for ",
                  formatShape(x));
  for (size_t d = 0; d < r; ++d) {
    // offsets[d] + sizes[d] may not fit int64: checked, never wrapped.
    std::optional<int64_t> end = checkedAdd(offsets[d], sizes[d]);
    if (offsets[d] < 0 || sizes[d] < 0 || !end || *end > x[d])
      return errorf("slice: dim ", d, " takes ", sizes[d], " elements at ",
                    "offset ", offsets[d], ", outside its size ", x[d]);
  }
  return Status::ok();
}

Expected<Shape> cpu::checkConcatShapes(const std::vector<ConcatInput> &inputs,
                                       int64_t dim) {
  if (inputs.empty())
    return errorf("concat: no inputs");
  const ConcatInput &first = inputs.front();
  int64_t r = int64_t(first.shape->size());
  if (dim < 0 || dim >= r)
    return errorf("concat: dim ", dim, " out of range for rank ", r);
  Shape shape = *first.shape;
  shape[size_t(dim)] = 0;
  for (const ConcatInput &t : inputs) {
    Shape a = *t.shape, b = *first.shape;
    if (a.size() != b.size() || t.elemSize != first.elemSize)
      return errorf("concat: input ", formatShape(a), " does not match ",
                    formatShape(b));
    a[size_t(dim)] = b[size_t(dim)] = 0;
    if (a != b)
      return errorf("concat: input ", formatShape(*t.shape), " differs from ",
                    formatShape(*first.shape), " outside dim ", dim);
    std::optional<int64_t> sum =
        checkedAdd(shape[size_t(dim)], (*t.shape)[size_t(dim)]);
    if (!sum)
      return errorf("concat: the sizes along dim ", dim,
                    " add up to more than int64 holds");
    shape[size_t(dim)] = *sum;
  }
  return shape;
}

Status cpu::checkReshape(const Shape &x, const Shape &y) {
  // Element counts that overflow must not compare equal by wrapping
  // ([2^32, 2^32 + 1] is not [2^32]).
  std::optional<int64_t> nx = checkedProduct(x), ny = checkedProduct(y);
  if (!nx || !ny)
    return errorf("reshape of ", formatShape(x), " to ", formatShape(y),
                  ": an element count does not fit int64");
  if (*nx != *ny)
    return errorf("reshape of ", formatShape(x), " to ", formatShape(y),
                  " changes the element count");
  return Status::ok();
}
