//===- ShardedOutputTest.cpp - Gathering sharded outputs -----------------===//
#include "runtime/ShardedOutput.h"
#include "runtime/PlanLoader.h"
#include "test/runtime/FakeProcesses.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <map>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {
#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

/// Rank r's block: 100 r + 10 row + column.
HostTensor blockOfRank(int r) {
  std::vector<float> v;
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 3; ++col)
      v.push_back(float(100 * r + 10 * row + col));
  return HostTensor::fromFloats(DType::F32, {2, 3}, v);
}
} // namespace

TEST(ShardedOutput, GathersTheGroupInstanceInRankOrderAndDropsThePadding) {
  PlanBuilder pb = shardedOutputPlan();
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  const plan::Function &f = *loaded->root().functions()->Get(0);
  const plan::Binding *b = outputBinding(f, "logits");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(outputBinding(f, "nothing"), nullptr);
  EXPECT_EQ(wholeShape(f, *b), (Shape{2, 5}));
  std::map<int, HostTensor> blocks;
  for (int r = 0; r < 4; ++r)
    blocks[r] = blockOfRank(r);
  auto blockOf = [&](int r) -> const HostTensor * {
    auto it = blocks.find(r);
    return it == blocks.end() ? nullptr : &it->second;
  };
  // Rank 0's instance is {0, 2}; rank 3's is {1, 3}.
  auto whole0 = gatherOutput(loaded->root(), f, *b, 0, blockOf);
  ASSERT_TRUE(whole0) << whole0.status().message();
  EXPECT_EQ(whole0->shape, (Shape{2, 5}));
  EXPECT_EQ(whole0->toFloats(), (std::vector<float>{0, 1, 2, 200, 201, //
                                                    10, 11, 12, 210, 211}));
  auto whole3 = gatherOutput(loaded->root(), f, *b, 3, blockOf);
  ASSERT_TRUE(whole3) << whole3.status().message();
  EXPECT_EQ(whole3->toFloats(), (std::vector<float>{100, 101, 102, 300, 301,
                                                    110, 111, 112, 310, 311}));
  // Rank 2 sees the same whole as rank 0, its group peer.
  auto whole2 = gatherOutput(loaded->root(), f, *b, 2, blockOf);
  ASSERT_TRUE(whole2);
  EXPECT_EQ(whole2->bytes, whole0->bytes);
}

TEST(ShardedOutput, AMemberHoldingOnlyPaddingIsNotRead) {
  // Full size 3: rank 0's block is the whole, rank 2's all padding.
  PlanBuilder pb = shardedOutputPlan();
  pb.plan().functions[0]->outputs.back()->full_size = 3;
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  const plan::Function &f = *loaded->root().functions()->Get(0);
  const plan::Binding &b = *outputBinding(f, "logits");
  HostTensor own = blockOfRank(0);
  auto whole = gatherOutput(loaded->root(), f, b, 0,
                            [&](int r) { return r == 0 ? &own : nullptr; });
  ASSERT_TRUE(whole) << whole.status().message();
  EXPECT_EQ(whole->shape, (Shape{2, 3}));
  EXPECT_EQ(whole->bytes, own.bytes);
}

TEST(ShardedOutput, NamesAMissingOrMisshapenBlock) {
  PlanBuilder pb = shardedOutputPlan();
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  const plan::Function &f = *loaded->root().functions()->Get(0);
  const plan::Binding &b = *outputBinding(f, "logits");
  HostTensor good = blockOfRank(0);
  HostTensor wrong = HostTensor::fromFloats(DType::F32, {2, 2}, {0, 1, 2, 3});
  auto onlyZero = [&](int r) { return r == 0 ? &good : nullptr; };
  auto missing = gatherOutput(loaded->root(), f, b, 0, onlyZero);
  ASSERT_FALSE(missing);
  EXPECT_CONTAINS(missing.status().message(),
                  "output 'logits' of 'decode': rank 2's block is missing");
  auto misshapen = [&](int r) { return r == 0 ? &good : &wrong; };
  auto bad = gatherOutput(loaded->root(), f, b, 0, misshapen);
  ASSERT_FALSE(bad);
  EXPECT_CONTAINS(bad.status().message(),
                  "rank 2 returned f32 [2, 2], not the plan's f32 [2, 3]");
}

TEST(ShardedOutput, AnUnshardedOutputIsTheRanksOwn) {
  PlanBuilder pb = shardedOutputPlan();
  pb.plan().functions[0]->outputs.back()->shard_group = -1;
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  const plan::Function &f = *loaded->root().functions()->Get(0);
  const plan::Binding &b = *outputBinding(f, "logits");
  EXPECT_EQ(wholeShape(f, b), (Shape{2, 3}));
  HostTensor own = blockOfRank(1);
  auto whole = gatherOutput(loaded->root(), f, b, 1,
                            [&](int r) { return r == 1 ? &own : nullptr; });
  ASSERT_TRUE(whole) << whole.status().message();
  EXPECT_EQ(whole->bytes, own.bytes);
}

TEST(ShardedOutput, EveryProcessBlockByRank) {
  HostTensor mine = blockOfRank(1);
  HostTensor zero = blockOfRank(0);
  std::string other(zero.bytes.begin(), zero.bytes.end());
  FakeProcesses processes(1, {other, ""});
  auto blocks = allGatherBlocks(processes, mine);
  ASSERT_TRUE(blocks) << blocks.status().message();
  ASSERT_EQ(blocks->size(), 2u);
  EXPECT_EQ((*blocks)[0].bytes, zero.bytes);
  EXPECT_EQ((*blocks)[1].bytes, mine.bytes);
  EXPECT_EQ((*blocks)[0].shape, mine.shape);
  ASSERT_EQ(processes.sent.size(), 1u);
  EXPECT_EQ(processes.sent[0].size(), mine.bytes.size());
}

TEST(ShardedOutput, NamesAProcessWhoseBlockHasAnotherSize) {
  FakeProcesses processes(0, {"", "short"});
  auto blocks = allGatherBlocks(processes, blockOfRank(0));
  ASSERT_FALSE(blocks);
  EXPECT_CONTAINS(blocks.status().message(),
                  "process 1 sent 5 bytes, not the 24 of a f32 [2, 3] block");
}

TEST(ShardedOutput, GatherOutputsReplacesEachRanksBlockByItsWhole) {
  PlanBuilder pb = shardedOutputPlan();
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  const plan::Function &f = *loaded->root().functions()->Get(0);
  // This process holds rank 2; the others' blocks came by rank (rank 2's
  // own entry there is not used).
  std::vector<std::map<std::string, HostTensor>> outs(1);
  outs[0]["logits"] = blockOfRank(2);
  std::vector<HostTensor> others = {blockOfRank(0), blockOfRank(1),
                                    HostTensor(), blockOfRank(3)};
  Status st = gatherOutputs(loaded->root(), f, "logits", {2}, outs, others);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(outs[0]["logits"].toFloats(),
            (std::vector<float>{0, 1, 2, 200, 201, 10, 11, 12, 210, 211}));
  // An output the function does not have is left alone.
  ASSERT_TRUE(gatherOutputs(loaded->root(), f, "other", {2}, outs, others));
}
