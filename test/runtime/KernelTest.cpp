//===- KernelTest.cpp - Hand-computed cases for every CPU kernel ----------===//
//
// Expected numbers are worked out by hand or with a few lines of Python's
// math module, never with the kernels themselves.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <limits>

#include <cmath>

#include <cstring>
#include <iterator>
#include <utility>

using namespace braid::rt;
using namespace braid::rt::cpu;

namespace {
void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}
} // namespace

TEST(MatmulKernel, PlainAndTransposed) {
  FTensor a{{2, 3}, {1, 2, 3, 4, 5, 6}};
  FTensor b{{3, 2}, {7, 8, 9, 10, 11, 12}};
  auto c = matmul(a, b, false, false);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->shape, (Shape{2, 2}));
  expectNear(c->data, {58, 64, 139, 154});

  FTensor bt{{2, 3}, {7, 9, 11, 8, 10, 12}}; // b^T, HF Linear layout
  auto c2 = matmul(a, bt, false, true);
  ASSERT_TRUE(c2);
  expectNear(c2->data, {58, 64, 139, 154});

  FTensor at{{3, 2}, {1, 4, 2, 5, 3, 6}};
  auto c3 = matmul(at, bt, true, true);
  ASSERT_TRUE(c3);
  expectNear(c3->data, {58, 64, 139, 154});
}

TEST(MatmulKernel, BatchedAWithMatrixAndBatchedB) {
  FTensor a{{2, 1, 2}, {1, 2, 3, 4}};
  FTensor b{{2, 2}, {1, 0, 1, 1}};
  auto c = matmul(a, b, false, false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->shape, (Shape{2, 1, 2}));
  expectNear(c->data, {3, 2, 7, 4});

  FTensor bb{{2, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 3}}; // I and diag(2, 3)
  auto c2 = matmul(a, bb, false, false);
  ASSERT_TRUE(c2);
  expectNear(c2->data, {1, 2, 6, 12});
}

// The blocked kernel computes each element as the reference does (one sum
// in k order), so it must equal it bit for bit: on every transpose, on a
// batched and an unbatched B, and on sizes that fill no panel or row block
// evenly (rows 1..9 against blocks of 4, columns 1..37 against panels of
// 16), with values whose sums round differently in any other order.
TEST(MatmulKernel, BlockedIsTheReferenceBitForBit) {
  uint64_t state = 12345;
  auto next = [&] { // xorshift: reproducible, no <random> distribution
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return float(int64_t(state % 2000001) - 1000000) * 1e-3f;
  };
  auto random = [&](Shape shape) {
    FTensor t{shape, std::vector<float>(size_t(numElements(shape)))};
    for (float &x : t.data)
      x = next();
    return t;
  };
  int cases = 0;
  for (int64_t m : {1, 3, 4, 9})
    for (int64_t n : {1, 15, 16, 37})
      for (int64_t k : {1, 7, 64})
        for (bool ta : {false, true})
          for (bool tb : {false, true})
            for (bool batchedB : {false, true}) {
              FTensor a = random(ta ? Shape{2, k, m} : Shape{2, m, k});
              Shape bs = tb ? Shape{n, k} : Shape{k, n};
              if (batchedB)
                bs.insert(bs.begin(), 2);
              FTensor b = random(bs);
              auto got = matmul(a, b, ta, tb);
              auto want = matmulReference(a.view(), b.view(), ta, tb);
              ASSERT_TRUE(got) << got.status().message();
              ASSERT_TRUE(want) << want.status().message();
              ASSERT_EQ(got->shape, want->shape);
              ASSERT_EQ(0, std::memcmp(got->data.data(), want->data.data(),
                                       got->data.size() * sizeof(float)))
                  << "m " << m << " n " << n << " k " << k << " ta " << ta
                  << " tb " << tb << " batched B " << batchedB;
              // Stored as bf16 and f16, read in place: the f32 matmul of
              // the converted operands (the interpreter converted whole
              // copies before), bit for bit.
              for (DType dt : {DType::BF16, DType::F16}) {
                auto stored = [&](const FTensor &x) {
                  HostTensor h(dt, x.shape);
                  storeFromFloat(dt, x.data.data(), int64_t(x.data.size()),
                                 h.bytes.data());
                  return h;
                };
                HostTensor a16 = stored(a), b16 = stored(b);
                auto inPlace =
                    matmul(FView{a16.shape, a16.bytes.data(), dt},
                           FView{b16.shape, b16.bytes.data(), dt}, ta, tb);
                auto converted = matmulReference(
                    FTensor{a.shape, a16.toFloats()}.view(),
                    FTensor{b.shape, b16.toFloats()}.view(), ta, tb);
                ASSERT_TRUE(inPlace && converted);
                ASSERT_EQ(0, std::memcmp(inPlace->data.data(),
                                         converted->data.data(),
                                         inPlace->data.size() * 4))
                    << dtypeName(dt) << " m " << m << " n " << n << " k " << k
                    << " ta " << ta << " tb " << tb;
              }
              ++cases;
            }
  EXPECT_EQ(cases, 4 * 4 * 3 * 8);
}

// Large enough to be split across threads (by columns): each element is
// still computed as on one thread, for the row-block and the single-row
// paths, f32 and bf16 B, ragged column counts.
TEST(MatmulKernel, ThreadsSplitColumnsBitForBit) {
  for (int64_t m : {1, 5})
    for (DType dt : {DType::F32, DType::BF16}) {
      int64_t n = 4100, k = 2048;
      std::vector<float> av(size_t(m * k)), bv(size_t(n * k));
      for (size_t i = 0; i < av.size(); ++i)
        av[i] = float(int64_t(i * 7919 % 2003) - 1001) * 1e-3f;
      for (size_t i = 0; i < bv.size(); ++i)
        bv[i] = float(int64_t(i * 104729 % 1999) - 999) * 1e-3f;
      HostTensor b = HostTensor::fromFloats(dt, {n, k}, bv);
      FView a{{m, k}, av.data(), DType::F32};
      FView bView{b.shape, b.bytes.data(), dt};
      auto one = matmul(a, bView, false, true, 1);
      auto three = matmul(a, bView, false, true, 3);
      ASSERT_TRUE(one && three);
      ASSERT_EQ(0, std::memcmp(one->data.data(), three->data.data(),
                               one->data.size() * 4))
          << "m " << m << " " << dtypeName(dt);
      auto want = matmulReference(a, bView, false, true);
      ASSERT_TRUE(want);
      ASSERT_EQ(0, std::memcmp(one->data.data(), want->data.data(),
                               one->data.size() * 4))
          << "m " << m << " " << dtypeName(dt);
    }
}

TEST(MatmulKernel, RejectsContractionMismatch) {
  auto c = matmul(FTensor{{2, 3}, std::vector<float>(6)},
                  FTensor{{2, 2}, std::vector<float>(4)}, false, false);
  ASSERT_FALSE(c);
  EXPECT_NE(c.status().message().find("contraction sizes differ"),
            std::string::npos)
      << c.status().message();
}

TEST(ElementwiseKernel, AddMulTrailingBroadcast) {
  FTensor x{{2, 3}, {1, 2, 3, 4, 5, 6}};
  auto y = binary(BinaryKind::Add, x, FTensor{{3}, {10, 20, 30}});
  ASSERT_TRUE(y);
  expectNear(y->data, {11, 22, 33, 14, 25, 36});
  auto z = binary(BinaryKind::Mul, x, FTensor{{2, 1}, {100, 200}});
  ASSERT_TRUE(z);
  expectNear(z->data, {100, 200, 300, 800, 1000, 1200});
  EXPECT_FALSE(binary(BinaryKind::Add, x, FTensor{{2}, {1, 2}}));
}

TEST(ElementwiseKernel, SiluAndGelu) {
  FTensor x{{3}, {1.0f, -2.0f, 0.5f}};
  expectNear(silu(x).data, {0.7310586f, -0.2384058f, 0.3112297f});
  FTensor g{{3}, {1.0f, -1.0f, 0.5f}};
  expectNear(gelu(g, GeluKind::Erf).data,
             {0.8413447f, -0.1586553f, 0.3457312f});
  expectNear(gelu(g, GeluKind::Tanh).data,
             {0.8411920f, -0.1588080f, 0.3457140f});
}

// braid.activation's kinds at values from transformers' ACT2FN in fp32
// (torch 2.15), and NaN through the ReLUs as PyTorch passes it.
TEST(ElementwiseKernel, ActivationKindsMatchTransformers) {
  using K = braid::plan::ActivationKind;
  FTensor x{{4}, {1.0f, -2.0f, 0.5f, 7.0f}};
  const std::pair<K, std::vector<float>> cases[] = {
      {K::Relu, {1.0f, 0.0f, 0.5f, 7.0f}},
      {K::Relu2, {1.0f, 0.0f, 0.25f, 49.0f}},
      {K::Relu6, {1.0f, 0.0f, 0.5f, 6.0f}},
      {K::LeakyRelu, {1.0f, -0.02f, 0.5f, 7.0f}},
      {K::QuickGelu, {0.8457958f, -0.06434137f, 0.3503884f, 6.999953f}},
      {K::Sigmoid, {0.7310586f, 0.1192029f, 0.6224594f, 0.999089f}},
      {K::Tanh, {0.7615942f, -0.9640276f, 0.4621172f, 0.9999983f}},
      {K::Mish, {0.8650984f, -0.2525015f, 0.3752452f, 6.999989f}},
      {K::Hardswish, {0.6666667f, -0.3333333f, 0.2916667f, 7.0f}},
      {K::Gelu10, {0.8413447f, -0.04550028f, 0.3457312f, 7.0f}},
      {K::Laplace, {0.8504297f, 0.0f, 0.2314211f, 1.0f}},
      {K::SqrtSoftplus, {1.145976f, 0.3562696f, 0.9869534f, 2.645924f}},
  };
  static_assert(std::size(cases) == size_t(K::MAX) + 1, "a kind untested");
  for (const auto &[kind, want] : cases) {
    SCOPED_TRACE(int(kind));
    expectNear(activation(x, kind).data, want);
  }
  // Past the clip and PyTorch's softplus threshold (torch: 10 and sqrt(30)).
  FTensor big{{2}, {12.0f, 30.0f}};
  expectNear(activation(big, K::Gelu10).data, {10.0f, 10.0f});
  expectNear(activation(big, K::SqrtSoftplus).data, {3.4641016f, 5.4772258f});
  FTensor nan{{1}, {std::nanf("")}};
  for (K kind : {K::Relu, K::Relu2, K::Relu6})
    EXPECT_TRUE(std::isnan(activation(nan, kind).data[0])) << int(kind);
}

// swiglu is the pair silu, mul, bit for bit in f32 (one expression, the
// same operations in the same order), and refuses to broadcast.
TEST(ElementwiseKernel, SwigluIsSiluTimesUpExactly) {
  FTensor g{{2, 3}, {1.0f, -2.0f, 0.5f, 7.25f, -0.125f, 30.0f}};
  FTensor u{{2, 3}, {0.3f, 4.0f, -1.5f, 1e-3f, 2.0f, -0.75f}};
  auto pair = binary(BinaryKind::Mul, silu(g), u);
  auto fused = swiglu(g, u);
  ASSERT_TRUE(pair && fused);
  EXPECT_EQ(fused->shape, g.shape);
  for (size_t i = 0; i < g.data.size(); ++i)
    EXPECT_EQ(fused->data[i], pair->data[i]) << "element " << i;
  auto bad = swiglu(g, FTensor{{3}, {1, 2, 3}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("does not broadcast"),
            std::string::npos);
}

TEST(NormKernel, RmsNorm) {
  // mean(x^2) = 7.5, + eps 0.5 = 8: y = x / sqrt(8) * w.
  auto y =
      rmsNorm(FTensor{{1, 4}, {1, 2, 3, 4}}, FTensor{{4}, {1, 1, 2, 2}}, 0.5);
  ASSERT_TRUE(y);
  expectNear(y->data, {0.3535534f, 0.7071068f, 2.1213203f, 2.8284271f});
  EXPECT_FALSE(
      rmsNorm(FTensor{{1, 4}, {1, 2, 3, 4}}, FTensor{{3}, {1, 1, 1}}, 0.5));
}

TEST(NormKernel, LayerNorm) {
  // mean 2.5, biased var 1.25, + eps 0.75 = 2.
  auto y = layerNorm(FTensor{{1, 4}, {1, 2, 3, 4}}, FTensor{{4}, {1, 2, 1, 2}},
                     FTensor{{4}, {0, 0, 1, 1}}, 0.75);
  ASSERT_TRUE(y);
  expectNear(y->data, {-1.0606602f, -0.7071068f, 1.3535534f, 3.1213203f});
}

TEST(RopeKernel, RotateHalfPairs) {
  // D = 4, theta = 100: frequencies 1 and 0.1. Token 0 at position 0 is
  // unchanged; token 1 at position 2 rotates (x0, x2) by 2 rad and (x1, x3)
  // by 0.2 rad.
  FTensor x{{1, 2, 1, 4}, {5, 6, 7, 8, 1, 2, 3, 4}};
  auto y = rope(x, ITensor{{1, 2}, {0, 2}}, 100.0);
  ASSERT_TRUE(y);
  expectNear(y->data,
             {5, 6, 7, 8, -3.144039f, 1.165456f, -0.339143f, 4.317605f});
  EXPECT_FALSE(rope(x, ITensor{{2}, {0, 2}}, 100.0));
}

TEST(RopeKernel, FrequencyTableAndAttentionFactor) {
  // The table {1, 0.1} is theta = 100's: the same rotation as above.
  FTensor x{{1, 2, 1, 4}, {5, 6, 7, 8, 1, 2, 3, 4}};
  RopeParams table(100.0);
  table.invFreq = {1.0, 0.1};
  auto y = rope(x, ITensor{{1, 2}, {0, 2}}, table);
  ASSERT_TRUE(y) << y.status().message();
  expectNear(y->data,
             {5, 6, 7, 8, -3.144039f, 1.165456f, -0.339143f, 4.317605f});
  // A scaled table: pair 1 now turns by 2 * 0.5 = 1 rad; attention_factor
  // 2 doubles cos and sin (so position 0 doubles x).
  RopeParams scaled(100.0);
  scaled.invFreq = {1.0, 0.5};
  scaled.attentionFactor = 2.0;
  y = rope(x, ITensor{{1, 2}, {0, 2}}, scaled);
  ASSERT_TRUE(y);
  float c1 = std::cos(1.0f), s1 = std::sin(1.0f);
  float c2 = std::cos(2.0f), s2 = std::sin(2.0f);
  expectNear(y->data, {10, 12, 14, 16, //
                       2 * (1 * c2 - 3 * s2), 2 * (2 * c1 - 4 * s1),
                       2 * (3 * c2 + 1 * s2), 2 * (4 * c1 + 2 * s1)});
  RopeParams wrong(100.0);
  wrong.invFreq = {1.0};
  EXPECT_FALSE(rope(x, ITensor{{1, 2}, {0, 2}}, wrong));
}

TEST(RopeKernel, PartialRotaryLeavesTheRestAlone) {
  // D = 6, R = 2 (GPT-NeoX's rotary_pct): only the pair (0, 1) turns, by
  // position * theta^0 = 2 rad at position 2; elements 2..5 pass through.
  FTensor x{{1, 1, 1, 6}, {1, 2, 3, 4, 5, 6}};
  RopeParams p(10000.0);
  p.rotaryDim = 2;
  auto y = rope(x, ITensor{{1, 1}, {2}}, p);
  ASSERT_TRUE(y) << y.status().message();
  float c = std::cos(2.0f), s = std::sin(2.0f);
  expectNear(y->data, {1 * c - 2 * s, 2 * c + 1 * s, 3, 4, 5, 6});
  // R = 4: pairs (0, 2) and (1, 3) at theta^0 and theta^(-2/4).
  p.rotaryDim = 4;
  y = rope(x, ITensor{{1, 1}, {2}}, p);
  ASSERT_TRUE(y);
  float c1 = std::cos(2.0f / 100.0f), s1 = std::sin(2.0f / 100.0f);
  expectNear(y->data, {1 * c - 3 * s, 2 * c1 - 4 * s1, 3 * c + 1 * s,
                       4 * c1 + 2 * s1, 5, 6});
  p.rotaryDim = 3;
  EXPECT_FALSE(rope(x, ITensor{{1, 1}, {2}}, p));
  // An odd head (GPT-NeoX: hidden 20 over 4 heads) with an even rotary dim.
  FTensor odd{{1, 1, 1, 5}, {1, 2, 3, 4, 5}};
  p.rotaryDim = 2;
  y = rope(odd, ITensor{{1, 1}, {2}}, p);
  ASSERT_TRUE(y) << y.status().message();
  expectNear(y->data, {1 * c - 2 * s, 2 * c + 1 * s, 3, 4, 5});
  p.rotaryDim = 0; // the whole (odd) head cannot rotate
  EXPECT_FALSE(rope(odd, ITensor{{1, 1}, {2}}, p));
}

namespace {
// B=1, S=2, Hq=2, Hkv=1, D=2 (both query heads share the KV head).
FTensor q2() { return {{1, 2, 2, 2}, {1, 0, 0, 1, 1, 1, 2, 0}}; }
FTensor k2() { return {{1, 2, 1, 2}, {1, 0, 0, 1}}; }
FTensor v2() { return {{1, 2, 1, 2}, {1, 2, 3, 4}}; }
AttentionParams gqa(bool causal) {
  AttentionParams p;
  p.causal = causal;
  p.numHeads = 2;
  p.numKvHeads = 1;
  p.headDim = 2;
  return p;
}
} // namespace

TEST(AttentionKernel, GqaCausal) {
  // Token 0 sees only itself -> v0; token 1 head 0 has equal scores -> mean
  // of v; head 1 scores (sqrt 2, 0) -> weights (0.8044, 0.1956).
  auto o = attention(q2(), k2(), v2(), gqa(true));
  ASSERT_TRUE(o) << o.status().message();
  expectNear(o->data, {1, 2, 1, 2, 2, 3, 1.391141f, 2.391141f});
}

TEST(AttentionKernel, GqaNotCausal) {
  auto o = attention(q2(), k2(), v2(), gqa(false));
  ASSERT_TRUE(o);
  expectNear(o->data, {1.660477f, 2.660477f, 2.339523f, 3.339523f, 2, 3,
                       1.391141f, 2.391141f});
}

TEST(AttentionKernel, GqaHeadMapsToKvHeadDividedByGroup) {
  // Hq = 4, Hkv = 2, one key: each head's output is its KV head's value, and
  // heads 0,1 use KV head 0, heads 2,3 use KV head 1 (h / 2, not h % 2).
  AttentionParams p;
  p.numHeads = 4;
  p.numKvHeads = 2;
  p.headDim = 1;
  auto o = attention(FTensor{{1, 1, 4, 1}, {1, 2, 3, 4}},
                     FTensor{{1, 1, 2, 1}, {1, 1}},
                     FTensor{{1, 1, 2, 1}, {10, 20}}, p);
  ASSERT_TRUE(o);
  expectNear(o->data, {10, 10, 20, 20});
}

TEST(AttentionKernel, ExplicitScale) {
  // Scale 0 on the scores makes every weight equal: mean of the values.
  AttentionParams p = gqa(false);
  p.scale = 1e-30;
  auto o = attention(q2(), k2(), v2(), p);
  ASSERT_TRUE(o);
  expectNear(o->data, {2, 3, 2, 3, 2, 3, 2, 3});
}

TEST(AttentionKernel, RejectsHeadMismatch) {
  AttentionParams p = gqa(true);
  p.numHeads = 3;
  auto o = attention(q2(), k2(), v2(), p);
  ASSERT_FALSE(o);
  EXPECT_NE(o.status().message().find("disagree"), std::string::npos);
}

TEST(AttentionKernel, KvCacheWritesAndAttendsPrefix) {
  // B=2, S=1, max_seq 4. Batch 0 decodes token 1 at pos 1 with token 0
  // already cached (rows 2, 3 hold junk that must be ignored); batch 1
  // starts at pos 0 and sees only its new token.
  FTensor q{{2, 1, 2, 2}, {1, 1, 2, 0, 1, 1, 2, 0}};
  FTensor k{{2, 1, 1, 2}, {0, 1, 0, 1}};
  FTensor v{{2, 1, 1, 2}, {3, 4, 5, 6}};
  FTensor kc{{2, 4, 1, 2},
             {1, 0, 9, 9, 100, 100, 100, 100, //
              9, 9, 9, 9, 9, 9, 9, 9}};
  FTensor vc{{2, 4, 1, 2},
             {1, 2, 9, 9, 100, 100, 100, 100, //
              9, 9, 9, 9, 9, 9, 9, 9}};
  auto o = attentionWithCache(q, k, v, kc, vc, ITensor{{2}, {1, 0}}, gqa(true));
  ASSERT_TRUE(o) << o.status().message();
  expectNear(o->data, {2, 3, 1.391141f, 2.391141f, 5, 6, 5, 6});
  expectNear(kc.data, {1, 0, 0, 1, 100, 100, 100, 100, //
                       0, 1, 9, 9, 9, 9, 9, 9});
  expectNear(vc.data, {1, 2, 3, 4, 100, 100, 100, 100, //
                       5, 6, 9, 9, 9, 9, 9, 9});
}

TEST(AttentionKernel, SlidingWindow) {
  // S = 3, one head, D = 1: equal scores, so each output is the mean of
  // the values the window shows. Window 2: token 2 sees tokens 1 and 2.
  AttentionParams p;
  p.causal = true;
  p.numHeads = p.numKvHeads = p.headDim = 1;
  FTensor q{{1, 3, 1, 1}, {0, 0, 0}}, k = q;
  FTensor v{{1, 3, 1, 1}, {1, 2, 4}};
  p.slidingWindow = 2;
  auto o = attention(q, k, v, p);
  ASSERT_TRUE(o) << o.status().message();
  expectNear(o->data, {1, 1.5f, 3});
  // Window 1: every token sees only itself; a window past S is causal.
  p.slidingWindow = 1;
  o = attention(q, k, v, p);
  ASSERT_TRUE(o);
  expectNear(o->data, {1, 2, 4});
  p.slidingWindow = 8;
  o = attention(q, k, v, p);
  ASSERT_TRUE(o);
  expectNear(o->data, {1, 1.5f, 7.0f / 3});
}

TEST(AttentionKernel, SlidingWindowOverTheCacheDecodesPastTheWindow) {
  // Decoding position 5 with window 3 sees cache rows 3, 4, 5 only: rows
  // 0-2 (values 100) left the window.
  AttentionParams p;
  p.causal = true;
  p.numHeads = p.numKvHeads = p.headDim = 1;
  p.slidingWindow = 3;
  FTensor kc{{1, 8, 1, 1}, std::vector<float>(8, 0.0f)};
  FTensor vc{{1, 8, 1, 1}, {100, 100, 100, 1, 2, 0, 0, 0}};
  FTensor q{{1, 1, 1, 1}, {0}}, k{{1, 1, 1, 1}, {0}}, v{{1, 1, 1, 1}, {6}};
  auto o = attentionWithCache(q, k, v, kc, vc, ITensor{{1}, {5}}, p);
  ASSERT_TRUE(o) << o.status().message();
  expectNear(o->data, {3}); // (1 + 2 + 6) / 3
}

TEST(AttentionKernel, CacheHoldingMoreSequencesThanTheStep) {
  // A decode batch bucket: 1 sequence over a cache of 2; sequence 0 uses
  // the cache's sequence 0, sequence 1's rows are untouched.
  AttentionParams p;
  p.causal = true;
  p.numHeads = p.numKvHeads = p.headDim = 1;
  FTensor kc{{2, 4, 1, 1}, std::vector<float>(8, 0.0f)};
  FTensor vc{{2, 4, 1, 1}, {2, 9, 9, 9, 7, 7, 7, 7}};
  FTensor q{{1, 1, 1, 1}, {0}}, k{{1, 1, 1, 1}, {0}}, v{{1, 1, 1, 1}, {4}};
  auto o = attentionWithCache(q, k, v, kc, vc, ITensor{{1}, {1}}, p);
  ASSERT_TRUE(o) << o.status().message();
  expectNear(o->data, {3}); // (2 + 4) / 2
  expectNear(vc.data, {2, 4, 9, 9, 7, 7, 7, 7});
  // Fewer cache sequences than the step is an error.
  FTensor small{{1, 4, 1, 1}, std::vector<float>(4, 0.0f)}, small2 = small;
  FTensor q2{{2, 1, 1, 1}, {0, 0}};
  auto bad = attentionWithCache(q2, q2, q2, small, small2, ITensor{{2}, {0, 0}},
                                p);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("must be [>= 2, max_seq"),
            std::string::npos)
      << bad.status().message();
}

// The caches kept in bf16: output rows are bit for bit full attention over
// the sequence the cache and the new tokens make (the cached entries as
// stored, the new ones as k and v hold them), with and without a window,
// causal or not, two batch rows at different positions; the updated cache
// is the entry one with only the new rows written, rounded once; a cache
// updated into other bytes leaves the entry one alone.
TEST(AttentionKernel, StoredCacheIsFullAttentionOverTheCachedSequence) {
  const int64_t maxS = 12, hq = 4, hkv = 2, dh = 3, s = 2, row = hkv * dh;
  const std::vector<int64_t> positions{7, 3};
  auto values = [](int64_t n, float phase) {
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out[size_t(i)] = std::sin(0.37f * float(i) + phase);
    return out;
  };
  HostTensor entryK = HostTensor::fromFloats(DType::BF16, {2, maxS, hkv, dh},
                                             values(2 * maxS * row, 0.1f));
  HostTensor entryV = HostTensor::fromFloats(DType::BF16, {2, maxS, hkv, dh},
                                             values(2 * maxS * row, 0.7f));
  // The new k, v in f32, not bf16-representable: attention reads them as
  // they are, the cache stores them rounded.
  FTensor q{{2, s, hq, dh}, values(2 * s * hq * dh, 0.3f)};
  FTensor k{{2, s, hkv, dh}, values(2 * s * row, 1.3f)};
  FTensor v{{2, s, hkv, dh}, values(2 * s * row, 2.1f)};
  auto params = [&](bool causal, int64_t window) {
    AttentionParams p;
    p.causal = causal;
    p.numHeads = hq;
    p.numKvHeads = hkv;
    p.headDim = dh;
    p.slidingWindow = window;
    return p;
  };
  for (bool causal : {true, false})
    for (int64_t window : {int64_t(0), int64_t(3)}) {
      SCOPED_TRACE(::testing::Message() << (causal ? "causal" : "not causal")
                                        << " window " << window);
      AttentionParams p = params(causal, window);
      HostTensor kc = entryK, vc = entryV;     // updated in place
      HostTensor kOut = entryK, vOut = entryV; // updated elsewhere
      std::fill(kOut.bytes.begin(), kOut.bytes.end(), uint8_t(0xff));
      std::fill(vOut.bytes.begin(), vOut.bytes.end(), uint8_t(0xff));
      auto inPlace = attentionWithStoredCache(
          q, k, v, {kc.shape, DType::BF16, kc.bytes.data(), kc.bytes.data()},
          {vc.shape, DType::BF16, vc.bytes.data(), vc.bytes.data()},
          ITensor{{2}, positions}, p);
      ASSERT_TRUE(inPlace) << inPlace.status().message();
      auto moved = attentionWithStoredCache(
          q, k, v,
          {entryK.shape, DType::BF16, entryK.bytes.data(), kOut.bytes.data()},
          {entryV.shape, DType::BF16, entryV.bytes.data(), vOut.bytes.data()},
          ITensor{{2}, positions}, p);
      ASSERT_TRUE(moved) << moved.status().message();
      EXPECT_EQ(moved->data, inPlace->data);
      EXPECT_EQ(kOut.bytes, kc.bytes);
      EXPECT_EQ(vOut.bytes, vc.bytes);
      std::vector<float> ek = entryK.toFloats(), ev = entryV.toFloats();
      for (int64_t b = 0; b < 2; ++b) {
        int64_t pos = positions[size_t(b)];
        // The sequence: entries [0, pos) as stored, then the new ones.
        FTensor fk{{1, pos + s, hkv, dh}, {}}, fv = fk;
        FTensor fq{{1, pos + s, hq, dh},
                   std::vector<float>(size_t((pos + s) * hq * dh))};
        fk.data.assign(ek.begin() + b * maxS * row,
                       ek.begin() + (b * maxS + pos) * row);
        fv.data.assign(ev.begin() + b * maxS * row,
                       ev.begin() + (b * maxS + pos) * row);
        fk.data.insert(fk.data.end(), k.data.begin() + b * s * row,
                       k.data.begin() + (b + 1) * s * row);
        fv.data.insert(fv.data.end(), v.data.begin() + b * s * row,
                       v.data.begin() + (b + 1) * s * row);
        std::copy_n(q.data.begin() + b * s * hq * dh, s * hq * dh,
                    fq.data.begin() + pos * hq * dh);
        AttentionParams full = p;
        if (!causal) // every query sees [0, pos + S): query rows pos.. only
          full.causal = false;
        auto want = attention(fq, fk, fv, full);
        ASSERT_TRUE(want) << want.status().message();
        std::vector<float> got(inPlace->data.begin() + b * s * hq * dh,
                               inPlace->data.begin() + (b + 1) * s * hq * dh);
        std::vector<float> wantRows(want->data.begin() + pos * hq * dh,
                                    want->data.end());
        EXPECT_EQ(got, wantRows) << "batch row " << b;
        // The cache: the entry one but for the new rows, rounded to bf16.
        std::vector<float> ck = kc.toFloats();
        for (int64_t j = 0; j < maxS; ++j)
          for (int64_t e = 0; e < row; ++e) {
            size_t at = size_t((b * maxS + j) * row + e);
            float expected =
                j >= pos && j < pos + s
                    ? HostTensor::fromFloats(
                          DType::BF16, {1},
                          {k.data[size_t((b * s + j - pos) * row + e)]})
                          .toFloats()[0]
                    : ek[at];
            ASSERT_EQ(ck[at], expected) << "k cache row " << j;
          }
      }
    }
  // Out of range: an error, and neither cache changed.
  HostTensor kc = entryK, vc = entryV;
  auto bad = attentionWithStoredCache(
      q, k, v, {kc.shape, DType::BF16, kc.bytes.data(), kc.bytes.data()},
      {vc.shape, DType::BF16, vc.bytes.data(), vc.bytes.data()},
      ITensor{{2}, {maxS - 1, 0}}, params(true, 0));
  ASSERT_FALSE(bad);
  EXPECT_EQ(kc.bytes, entryK.bytes);
  EXPECT_EQ(vc.bytes, entryV.bytes);
}

TEST(AttentionKernel, KvCacheRejectsWriteBeyondMaxSeq) {
  FTensor q{{1, 1, 2, 2}, {1, 1, 2, 0}};
  FTensor k{{1, 1, 1, 2}, {0, 1}}, v{{1, 1, 1, 2}, {3, 4}};
  FTensor kc{{1, 2, 1, 2}, std::vector<float>(4)}, vc = kc;
  auto o = attentionWithCache(q, k, v, kc, vc, ITensor{{1}, {2}}, gqa(true));
  ASSERT_FALSE(o);
  EXPECT_NE(o.status().message().find("outside max_seq 2"), std::string::npos)
      << o.status().message();
  // A position so large that position + S overflows is out of range too.
  o = attentionWithCache(q, k, v, kc, vc,
                         ITensor{{1}, {std::numeric_limits<int64_t>::max()}},
                         gqa(true));
  ASSERT_FALSE(o);
  EXPECT_NE(o.status().message().find("outside max_seq 2"), std::string::npos)
      << o.status().message();
}

TEST(SoftmaxKernel, LastAndFirstDim) {
  auto y = softmax(FTensor{{1, 3}, {1, 2, 3}}, 1);
  ASSERT_TRUE(y);
  expectNear(y->data, {0.090031f, 0.244728f, 0.665241f});
  // Along dim 0 of [[1, 5], [1, 5]]: each column is uniform.
  auto z = softmax(FTensor{{2, 2}, {1, 5, 1, 5}}, 0);
  ASSERT_TRUE(z);
  expectNear(z->data, {0.5f, 0.5f, 0.5f, 0.5f});
  EXPECT_FALSE(softmax(FTensor{{2, 2}, {1, 5, 1, 5}}, 2));
}

TEST(EmbeddingKernel, LookupAndVocabShard) {
  FTensor table{{3, 2}, {1, 2, 3, 4, 5, 6}};
  auto y = embedding(ITensor{{2}, {2, 0}}, table, 0);
  ASSERT_TRUE(y);
  EXPECT_EQ(y->shape, (Shape{2, 2}));
  expectNear(y->data, {5, 6, 1, 2});
  // This table is rank 1's shard [3, 6): ids 3 and 5 hit, id 1 is zero.
  auto s = embedding(ITensor{{1, 3}, {3, 5, 1}}, table, 3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->shape, (Shape{1, 3, 2}));
  expectNear(s->data, {1, 2, 5, 6, 0, 0});
}

TEST(LayoutKernel, SliceConcatSplit) {
  ByteTensor x{{2, 3}, 4, {}};
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  x.data.assign(reinterpret_cast<uint8_t *>(v.data()),
                reinterpret_cast<uint8_t *>(v.data() + 6));
  auto asFloats = [](const ByteTensor &t) {
    std::vector<float> f(t.data.size() / 4);
    std::memcpy(f.data(), t.data.data(), t.data.size());
    return f;
  };
  auto s = slice(x, {0, 1}, {2, 2});
  ASSERT_TRUE(s);
  expectNear(asFloats(*s), {2, 3, 5, 6});
  EXPECT_FALSE(slice(x, {1, 0}, {2, 1}));
  auto c = concat({&x, &*s}, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->shape, (Shape{2, 5}));
  expectNear(asFloats(*c), {1, 2, 3, 2, 3, 4, 5, 6, 5, 6});
  auto parts = split(x, 0, 2);
  ASSERT_TRUE(parts);
  expectNear(asFloats((*parts)[1]), {4, 5, 6});
  EXPECT_FALSE(split(x, 1, 2));
}

TEST(DTypeConversion, Bf16AndF16Rounding) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256), 0x3F80); // tie -> even
  EXPECT_EQ(floatToBf16(1.0f + 3.0f / 256), 0x3F82); // tie -> even (up)
  EXPECT_EQ(floatToBf16(-2.0f), 0xC000);
  EXPECT_FLOAT_EQ(bf16ToFloat(0x3FC0), 1.5f);
  EXPECT_EQ(floatToF16(1.0f), 0x3C00);
  EXPECT_EQ(floatToF16(-2.0f), 0xC000);
  EXPECT_EQ(floatToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToF16(1e6f), 0x7C00);
  EXPECT_EQ(floatToF16(1e-7f), 0x0002); // subnormal: 1e-7 * 2^24 = 1.68
  EXPECT_EQ(floatToF16(1.0f + 1.0f / 2048), 0x3C00); // tie -> even
  EXPECT_FLOAT_EQ(f16ToFloat(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(f16ToFloat(0x0001), 5.9604645e-8f);
}
