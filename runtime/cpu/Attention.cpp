//===- Attention.cpp - braid.attention (GQA, causal, KV cache) ------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace braid::rt;
using namespace braid::rt::cpu;

AttentionParams cpu::attentionParamsOf(const braid::plan::Op &op) {
  AttentionParams p;
  p.causal = op.causal();
  p.numHeads = op.num_heads();
  p.numKvHeads = op.num_kv_heads();
  p.headDim = op.head_dim();
  p.scale = op.scale();
  p.slidingWindow = op.sliding_window();
  return p;
}

// o[b, i, h] = softmax_j(scale * q.k_j) v_j over keys j in [lo, n) with
// n = keyCount(b, i) and lo = n - window (0 without a window), keys read
// from kData/vData laid out [B, keyStride, Hkv, D].
template <typename KeyCount>
static void attend(const FTensor &q, const float *kData, const float *vData,
                   int64_t keyStride, const AttentionDims &d, double scaleAttr,
                   int64_t window, KeyCount keyCount, FTensor &o) {
  float scale =
      scaleAttr != 0.0 ? float(scaleAttr) : 1.0f / std::sqrt(float(d.d));
  int64_t groupSize = d.hq / d.hkv;
  std::vector<float> scores;
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t i = 0; i < d.sq; ++i) {
      int64_t n = keyCount(b, i);
      int64_t lo = window > 0 ? std::max<int64_t>(n - window, 0) : 0;
      scores.assign(size_t(std::max<int64_t>(n, 0)), 0.0f);
      for (int64_t h = 0; h < d.hq; ++h) {
        int64_t kvh = h / groupSize; // GQA: query head h reads kv head h/g
        const float *qp = q.data.data() + ((b * d.sq + i) * d.hq + h) * d.d;
        float mx = -INFINITY;
        for (int64_t j = lo; j < n; ++j) {
          const float *kp = kData + ((b * keyStride + j) * d.hkv + kvh) * d.d;
          float dot = 0.0f;
          for (int64_t e = 0; e < d.d; ++e)
            dot += qp[e] * kp[e];
          scores[size_t(j)] = dot * scale;
          mx = std::max(mx, scores[size_t(j)]);
        }
        float sum = 0.0f;
        for (int64_t j = lo; j < n; ++j) {
          scores[size_t(j)] = std::exp(scores[size_t(j)] - mx);
          sum += scores[size_t(j)];
        }
        float *op = o.data.data() + ((b * d.sq + i) * d.hq + h) * d.d;
        for (int64_t e = 0; e < d.d; ++e)
          op[e] = 0.0f;
        for (int64_t j = lo; j < n; ++j) {
          const float *vp = vData + ((b * keyStride + j) * d.hkv + kvh) * d.d;
          float w = scores[size_t(j)] / sum;
          for (int64_t e = 0; e < d.d; ++e)
            op[e] += w * vp[e];
        }
      }
    }
}

Expected<FTensor> cpu::attention(const FTensor &q, const FTensor &k,
                                 const FTensor &v, const AttentionParams &p) {
  auto dims = checkAttentionShapes(q.shape, k.shape, v.shape, p);
  if (!dims)
    return dims.status();
  const AttentionDims &d = *dims;
  FTensor o{q.shape, std::vector<float>(q.data.size())};
  if (o.data.empty()) // head dim 0: b x s x heads x keys empty iterations
    return o;
  int64_t s = d.sq;
  bool causal = p.causal;
  int64_t window = causal ? p.slidingWindow : 0;
  attend(
      q, k.data.data(), v.data.data(), s, d, p.scale, window,
      [&](int64_t, int64_t i) { return causal ? i + 1 : s; }, o);
  return o;
}

Expected<FTensor> cpu::attentionWithCache(const FTensor &q, const FTensor &k,
                                          const FTensor &v, FTensor &kCache,
                                          FTensor &vCache,
                                          const ITensor &position,
                                          const AttentionParams &p) {
  return attentionWithStoredCache(
      q, k, v,
      {kCache.shape, DType::F32, kCache.data.data(), kCache.data.data()},
      {vCache.shape, DType::F32, vCache.data.data(), vCache.data.data()},
      position, p);
}

Expected<FTensor> cpu::attentionWithStoredCache(
    const FTensor &q, const FTensor &k, const FTensor &v,
    const StoredCache &kCache, const StoredCache &vCache,
    const ITensor &position, const AttentionParams &p) {
  auto dims = checkAttentionShapes(q.shape, k.shape, v.shape, p);
  if (!dims)
    return dims.status();
  const AttentionDims &d = *dims;
  BRAID_RETURN_IF_ERROR(
      checkAttentionCacheShapes(d, kCache.shape, vCache.shape, position.shape));
  if (kCache.dtype != vCache.dtype)
    return errorf("attention: k_cache is ", dtypeName(kCache.dtype),
                  ", v_cache ", dtypeName(vCache.dtype));
  int64_t maxS = kCache.shape[1];
  for (int64_t b = 0; b < d.b; ++b) {
    int64_t pos = position.data[size_t(b)];
    // Not pos + S > maxS: a huge position would overflow.
    if (pos < 0 || pos > maxS - d.sq)
      return attentionCacheRangeError(
          b, pos,
          pos > std::numeric_limits<int64_t>::max() - d.sq
              ? std::numeric_limits<int64_t>::max()
              : pos + d.sq,
          maxS);
  }
  const int64_t row = d.hkv * d.d; // elements of one cache entry
  const size_t elem = dtypeSize(kCache.dtype);
  // The updated caches: the entry ones, then the new keys and values at
  // [pos, pos + S), rounded once.
  for (const StoredCache *c : {&kCache, &vCache})
    if (c->updated != c->entry)
      std::memmove(c->updated, c->entry, size_t(numElements(c->shape)) * elem);
  auto entryAt = [&](const StoredCache &c, int64_t b, int64_t j) {
    return static_cast<uint8_t *>(c.updated) +
           size_t((b * maxS + j) * row) * elem;
  };
  for (int64_t b = 0; row > 0 && b < d.b; ++b) {
    int64_t pos = position.data[size_t(b)];
    storeFromFloat(kCache.dtype, k.data.data() + b * d.sq * row, d.sq * row,
                   entryAt(kCache, b, pos));
    storeFromFloat(vCache.dtype, v.data.data() + b * d.sq * row, d.sq * row,
                   entryAt(vCache, b, pos));
  }
  FTensor o{q.shape, std::vector<float>(q.data.size())};
  if (o.data.empty()) // the caches above are updated all the same
    return o;
  bool causal = p.causal;
  int64_t s = d.sq;
  int64_t window = causal ? p.slidingWindow : 0;
  // The keys and values attended to, in f32, laid out [B, keys, Hkv, D]
  // with keys the longest batch row's pos + S: the entries from the first
  // one any query of the batch row sees (its window's start) up to pos,
  // then the new ones as k and v hold them. Nothing else is read.
  int64_t keys = 0;
  for (int64_t b = 0; b < d.b; ++b)
    keys = std::max(keys, position.data[size_t(b)] + s);
  std::vector<float> kw(size_t(d.b * keys * row)), vw(kw.size());
  for (int64_t b = 0; b < d.b; ++b) {
    int64_t pos = position.data[size_t(b)];
    int64_t first = window > 0 ? std::max<int64_t>(pos + 1 - window, 0) : 0;
    size_t at = size_t((b * keys + first) * row);
    loadAsFloat(kCache.dtype, entryAt(kCache, b, first), (pos - first) * row,
                kw.data() + at);
    loadAsFloat(vCache.dtype, entryAt(vCache, b, first), (pos - first) * row,
                vw.data() + at);
    std::copy_n(k.data.data() + b * s * row, s * row,
                kw.data() + (b * keys + pos) * row);
    std::copy_n(v.data.data() + b * s * row, s * row,
                vw.data() + (b * keys + pos) * row);
  }
  attend(
      q, kw.data(), vw.data(), keys, d, p.scale, window,
      [&](int64_t b, int64_t i) {
        int64_t pos = position.data[size_t(b)];
        return causal ? pos + i + 1 : pos + s;
      },
      o);
  return o;
}
