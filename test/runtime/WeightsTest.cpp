//===- WeightsTest.cpp - Deterministic weights and shard slicing ----------===//
#include "runtime/Weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace braid::rt;

namespace {
ShardSpec spec(int64_t dim, int64_t rank, int64_t size, int64_t shards = 0,
               int64_t blocks = 1) {
  ShardSpec s;
  s.dim = dim;
  s.rank = rank;
  s.groupSize = size;
  s.shards = shards ? shards : size;
  s.blocks = blocks;
  return s;
}
} // namespace

TEST(Weights, DeterministicSeededAndSmall) {
  EXPECT_EQ(weightValue(7, "w", 3), weightValue(7, "w", 3));
  EXPECT_NE(weightValue(7, "w", 3), weightValue(8, "w", 3));
  EXPECT_NE(weightValue(7, "w", 3), weightValue(7, "v", 3));
  EXPECT_NE(weightValue(7, "w", 3), weightValue(7, "w", 4));
  auto full = generateFullWeights(
      SyntheticWeights(1), "model.layers.0.mlp.up_proj.weight", {64, 32});
  double mean = 0;
  for (float v : full) {
    EXPECT_LE(std::fabs(v), kWeightScale);
    mean += v;
  }
  EXPECT_LT(std::fabs(mean / double(full.size())), 0.002);
}

// The formula is a contract: checkpoints of synthetic models, the CPU
// interpreter and the GPU generator (runtime/WeightFormula.h) must agree to
// the bit. Values computed independently (Python, IEEE fp32 rounding).
TEST(Weights, PinnedValues) {
  auto bits = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  EXPECT_EQ(bits(weightValue(0, "w", 0)), 0xbc9a0289u);
  EXPECT_EQ(bits(weightValue(7, "model.layers.0.mlp.up_proj.weight", 12345)),
            0xbbc96114u);
  EXPECT_EQ(bits(weightValue(3, "model.norm.weight", 5)), 0x3f826929u);
}

// Fan-in weights (braid-run --weight-scale fan-in): one fp32 scale per
// tensor from its FULL shape, pinned to make_golden.py's values (the
// golden-logits-fan-in test checks them against transformers).
TEST(Weights, FanInScalesFromTheFullShape) {
  auto bits = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  using weights::Amplitude;
  EXPECT_EQ(weightScale(Amplitude::Flat, {160, 64}), weights::kScale);
  EXPECT_EQ(bits(weightScale(Amplitude::FanIn, {160, 64})), 0x3e5db3d7u);
  EXPECT_EQ(bits(weightScale(Amplitude::FanIn, {7, 96})), 0x3e3504f3u);
  EXPECT_EQ(weightScale(Amplitude::FanIn, {64}), weights::kVectorScaleFanIn);
  EXPECT_EQ(weightScale(Amplitude::FanIn, {}), weights::kVectorScaleFanIn);
  float up = weightScale(Amplitude::FanIn, {160, 64});
  EXPECT_EQ(bits(weightValue(0, "model.layers.0.mlp.up_proj.weight", 1234, up)),
            0x3dd6f8b1u);
  float norm = weightScale(Amplitude::FanIn, {64});
  EXPECT_EQ(bits(weightValue(0, "model.norm.weight", 5, norm)), 0x3f6b8514u);

  // std 1/sqrt(last dim), mean near 0.
  auto full =
      generateFullWeights(SyntheticWeights(4, Amplitude::FanIn),
                          "model.layers.0.mlp.up_proj.weight", {64, 256});
  float scale = weightScale(Amplitude::FanIn, {64, 256});
  double sum = 0, sumSq = 0;
  for (float v : full) {
    EXPECT_LE(std::fabs(v), scale);
    sum += v;
    sumSq += double(v) * v;
  }
  double n = double(full.size());
  EXPECT_NEAR(std::sqrt(sumSq / n), 1.0 / 16, 0.002);
  EXPECT_LT(std::fabs(sum / n), 0.002);
}

TEST(Weights, FanInShardsUseTheFullTensorsScale) {
  // Cut along the last dim: each rank holds 2 of 8 columns, but the scale
  // is sqrt(3 / 8), not sqrt(3 / 2).
  SyntheticWeights w(3, weights::Amplitude::FanIn);
  Shape full{6, 8};
  auto whole = generateFullWeights(w, "w", full);
  for (int64_t r = 0; r < 4; ++r) {
    auto local = generateLocalWeights(w, "w", full, {}, spec(1, r, 4));
    ASSERT_TRUE(local) << local.status().message();
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 2; ++j)
        EXPECT_EQ((*local)[size_t(i * 2 + j)], whole[size_t(i * 8 + r * 2 + j)])
            << "rank " << r;
  }
}

TEST(Weights, AmplitudeNames) {
  for (auto a : {weights::Amplitude::Flat, weights::Amplitude::FanIn})
    EXPECT_EQ(parseAmplitude(amplitudeName(a)), a);
  EXPECT_FALSE(parseAmplitude("fanin"));
  EXPECT_FALSE(parseAmplitude(""));
}

TEST(Weights, RejectsRankAboveEight) {
  Shape full(9, 1);
  auto local =
      generateLocalWeights(SyntheticWeights(0), "w", full, {}, spec(-1, 0, 1));
  ASSERT_FALSE(local);
  EXPECT_NE(local.status().message().find("at most 8"), std::string::npos)
      << local.status().message();
}

TEST(Weights, NormWeightsAreNearOne) {
  for (const char *name :
       {"model.norm.weight", "model.layers.3.input_layernorm.weight",
        "h.0.ln_1.weight", "ln_f.weight"})
    for (int64_t i = 0; i < 16; ++i)
      EXPECT_NEAR(weightValue(0, name, i), 1.0f, kWeightScale) << name;
  // Biases of norms and ordinary weights stay small.
  EXPECT_LE(std::fabs(weightValue(0, "h.0.ln_1.bias", 0)), kWeightScale);
  EXPECT_LE(std::fabs(weightValue(0, "lm_head.weight", 0)), kWeightScale);
}

TEST(Weights, ShardsReassembleFullTensorAlongDim0And1) {
  Shape full{6, 4};
  auto whole = generateFullWeights(SyntheticWeights(3), "w", full);
  // Dim 0 over 3 ranks: rank r holds rows [2r, 2r+2).
  for (int64_t r = 0; r < 3; ++r) {
    auto local =
        generateLocalWeights(SyntheticWeights(3), "w", full, {}, spec(0, r, 3));
    ASSERT_TRUE(local) << local.status().message();
    ASSERT_EQ(local->size(), 8u);
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ((*local)[size_t(i)], whole[size_t(r * 8 + i)]);
  }
  // Dim 1 over 2 ranks: rank r holds columns [2r, 2r+2) of every row.
  for (int64_t r = 0; r < 2; ++r) {
    auto local =
        generateLocalWeights(SyntheticWeights(3), "w", full, {}, spec(1, r, 2));
    ASSERT_TRUE(local);
    for (int64_t row = 0; row < 6; ++row)
      for (int64_t c = 0; c < 2; ++c)
        EXPECT_EQ((*local)[size_t(row * 2 + c)],
                  whole[size_t(row * 4 + r * 2 + c)]);
  }
}

TEST(Weights, FusedBlocksTakeAPieceOfEveryBlock) {
  // GPT-2 c_attn style: [2, 12] = 3 blocks (q, k, v) of 4 columns; over 2
  // ranks each rank takes 2 columns of every block -> [2, 6].
  Shape full{2, 12};
  auto whole = generateFullWeights(SyntheticWeights(5), "c_attn.weight", full);
  for (int64_t r = 0; r < 2; ++r) {
    auto local = generateLocalWeights(SyntheticWeights(5), "c_attn.weight",
                                      full, {}, spec(1, r, 2, 2, 3));
    ASSERT_TRUE(local);
    ASSERT_EQ(local->size(), 12u);
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t blk = 0; blk < 3; ++blk)
        for (int64_t c = 0; c < 2; ++c)
          EXPECT_EQ((*local)[size_t(row * 6 + blk * 2 + c)],
                    whole[size_t(row * 12 + blk * 4 + r * 2 + c)])
              << "rank " << r << " row " << row << " block " << blk;
  }
}

TEST(Weights, FewerShardsThanRanksReplicatesPieces) {
  // 2 KV-head shards over 4 ranks: ranks 0,1 hold piece 0; ranks 2,3 piece 1.
  Shape full{4, 2};
  auto whole = generateFullWeights(SyntheticWeights(9), "k_proj.weight", full);
  for (int64_t r = 0; r < 4; ++r) {
    auto local = generateLocalWeights(SyntheticWeights(9), "k_proj.weight",
                                      full, {}, spec(0, r, 4, 2));
    ASSERT_TRUE(local);
    int64_t piece = r / 2;
    std::vector<float> want(whole.begin() + piece * 4,
                            whole.begin() + piece * 4 + 4);
    EXPECT_EQ(*local, want) << "rank " << r;
  }
}

TEST(Weights, PaddedVocabularyGivesZeroRows) {
  // Vocabulary 5 padded to 6 over 2 ranks: rank 1's last row is padding.
  Shape full{5, 2}, padded{6, 2};
  auto whole = generateFullWeights(SyntheticWeights(2), "wte.weight", full);
  auto r1 = generateLocalWeights(SyntheticWeights(2), "wte.weight", full,
                                 padded, spec(0, 1, 2));
  ASSERT_TRUE(r1) << r1.status().message();
  EXPECT_EQ(*r1, (std::vector<float>{whole[6], whole[7], whole[8], whole[9],
                                     0.0f, 0.0f}));
  auto sliced = sliceForRank(whole, full, padded, spec(0, 1, 2));
  ASSERT_TRUE(sliced);
  EXPECT_EQ(*sliced, *r1);
}

TEST(Weights, SliceForRankMatchesDirectGeneration) {
  Shape full{4, 6, 2};
  auto whole = generateFullWeights(SyntheticWeights(11), "x", full);
  for (int64_t r = 0; r < 2; ++r) {
    auto a = sliceForRank(whole, full, {}, spec(1, r, 2, 2, 3));
    auto b = generateLocalWeights(SyntheticWeights(11), "x", full, {},
                                  spec(1, r, 2, 2, 3));
    ASSERT_TRUE(a && b);
    EXPECT_EQ(*a, *b);
  }
}

TEST(Weights, RejectsIndivisibleCut) {
  auto bad =
      generateLocalWeights(SyntheticWeights(0), "w", {5, 2}, {}, spec(0, 0, 2));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("cannot cut dim 0"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(generateLocalWeights(SyntheticWeights(0), "w", {4, 2}, {3, 2},
                                    spec(0, 0, 2)));
}

// generateLocalWeights maps a row at a time (the leading dims and the last
// dim apart); fullIndexOf, per element, is the definition (the GPU
// generator calls it). Every shard dim, blocks, fewer shards than ranks,
// padding in either dim, and rank 1 and 3 tensors.
TEST(Weights, RowWiseMappingIsFullIndexOfPerElement) {
  struct Case {
    Shape full, padded;
    ShardSpec spec;
  };
  std::vector<Case> cases = {
      {{6}, {}, spec(-1, 0, 1)},
      {{8}, {}, spec(0, 1, 2)},
      {{5}, {8}, spec(0, 3, 4)},
      {{6, 4}, {}, spec(-1, 0, 1)},
      {{6, 4}, {}, spec(0, 1, 2)},
      {{6, 4}, {}, spec(1, 1, 2)},
      {{12, 4}, {}, spec(0, 2, 4, 2, 3)}, // 3 blocks, 2 shards, 4 ranks
      {{4, 12}, {}, spec(1, 1, 2, 2, 3)},
      {{5, 3}, {8, 3}, spec(0, 3, 4)}, // padded rows
      {{3, 5}, {3, 8}, spec(1, 3, 4)}, // padded columns, in the last dim
      {{3, 5}, {4, 8}, spec(0, 1, 2)}, // padded in both, sharded on dim 0
      {{2, 6, 4}, {}, spec(1, 1, 3)},
      {{2, 6, 5}, {2, 6, 8}, spec(2, 0, 2)},
  };
  for (const Case &c : cases) {
    auto map = localIndexMap(c.full, c.padded, c.spec);
    ASSERT_TRUE(map) << map.status().message();
    auto got = generateLocalWeights(SyntheticWeights(5), "w", c.full, c.padded,
                                    c.spec);
    ASSERT_TRUE(got) << got.status().message();
    ASSERT_EQ(int64_t(got->size()), map->localCount);
    for (int64_t e = 0; e < map->localCount; ++e) {
      int64_t f = weights::fullIndexOf(*map, e);
      float want = f < 0 ? 0.0f : weightValue(5, "w", f);
      ASSERT_EQ(std::memcmp(&(*got)[size_t(e)], &want, 4), 0)
          << formatShape(c.full) << " sharded on " << c.spec.dim
          << ", local element " << e;
    }
  }
}
