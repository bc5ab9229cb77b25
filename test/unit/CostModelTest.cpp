//===- CostModelTest.cpp - cost formulas against hand-computed values -----===//
#include "passes/cost/CostModel.h"
#include "passes/cost/Target.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace braid::cost;

namespace {

/// H100-like numbers, written out so every expected value below can be
/// recomputed by hand.
Target testTarget(int nodes = 1) {
  Target t;
  t.name = "test";
  t.nodes = nodes;
  t.gpusPerNode = 8;
  t.matmulTflops = {{"bf16", 989.4}, {"fp16", 989.4}, {"fp32", 494.7}};
  t.vectorTflops = 66.9;
  t.memoryBandwidthGBs = 3350;
  t.memoryEfficiency = 0.85;
  t.attentionEfficiency = 0.5;
  t.matmulEfficiency = {{1, 0.005}, {16, 0.05}, {64, 0.2},
                        {256, 0.5}, {1024, 0.68}, {4096, 0.75}};
  t.intraNode = {"nvswitch", 10.0, 370.0};
  t.interNode = {"ib", 20.0, 45.0};
  return t;
}

TEST(CostModel, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::ReduceScatter, 8),
                   0.875);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::AllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::SendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::AllReduce, 1), 0.0);
}

TEST(CostModel, GroupPlacementFollowsTheMeshStride) {
  Target two = testTarget(2);
  GroupPlacement tp = placeGroup(two, 8, 1);
  EXPECT_EQ(tp.local, 8);
  EXPECT_EQ(tp.nodes, 1);
  GroupPlacement wide = placeGroup(two, 16, 1);
  EXPECT_EQ(wide.local, 8);
  EXPECT_EQ(wide.nodes, 2);
  // dp over tp 8: stride 8 puts each member on its own node.
  GroupPlacement dp = placeGroup(two, 2, 8);
  EXPECT_EQ(dp.local, 1);
  EXPECT_EQ(dp.nodes, 2);
  GroupPlacement half = placeGroup(two, 4, 4); // 2 per node
  EXPECT_EQ(half.local, 2);
  EXPECT_EQ(half.nodes, 2);
}

TEST(CostModel, IntraNodeAllReduceIsAlphaBeta) {
  // Llama-3-70B at tp 8: 4096 tokens x 8192 x bf16 = 67,108,864 bytes.
  // 10 us + 1.75 * 67108864 B / 370e9 B/s = 10 us + 317.407 us.
  Target t = testTarget();
  double s = collectiveSeconds(t, CollectiveKind::AllReduce, 67108864.0,
                               placeGroup(t, 8, 1));
  EXPECT_NEAR(s * 1e6, 10.0 + 317.4072, 1e-3);
  // all_gather of the same output: 10 us + 0.875 * bytes / bw.
  double g = collectiveSeconds(t, CollectiveKind::AllGather, 67108864.0,
                               placeGroup(t, 8, 1));
  EXPECT_NEAR(g * 1e6, 10.0 + 158.7036, 1e-3);
  // A group of one moves nothing and costs nothing.
  EXPECT_EQ(collectiveSeconds(t, CollectiveKind::AllReduce, 1e9,
                              placeGroup(t, 1, 1)),
            0.0);
}

TEST(CostModel, CrossNodeAllReduceIsHierarchical) {
  // 16 ranks = 2 nodes x 8, 1 GB: intra reduce_scatter and all_gather
  // (2 * 7/8 * 1e9 / 370e9 = 4.72973 ms), inter all_reduce over 2 nodes on
  // 1/8 of the data (2 * 1/2 * 1.25e8 / 45e9 = 2.77778 ms), latency
  // 2 * 10 + 20 us.
  Target t = testTarget(2);
  double s = collectiveSeconds(t, CollectiveKind::AllReduce, 1e9,
                               placeGroup(t, 16, 1));
  EXPECT_NEAR(s * 1e3, 0.040 + 4.729730 + 2.777778, 1e-5);
  // dp of 2 across nodes (one rank per node): pure inter-node.
  double dp = collectiveSeconds(t, CollectiveKind::AllReduce, 1e9,
                                placeGroup(t, 2, 8));
  EXPECT_NEAR(dp * 1e3, 0.020 + 1e9 / 45e9 * 1e3, 1e-6);
}

TEST(CostModel, MatmulEfficiencyInterpolatesInLog2) {
  Target t = testTarget();
  EXPECT_DOUBLE_EQ(t.matmulEfficiencyAt(0.5), 0.005);
  EXPECT_DOUBLE_EQ(t.matmulEfficiencyAt(16), 0.05);
  // 32 is halfway between 16 and 64 in log2.
  EXPECT_NEAR(t.matmulEfficiencyAt(32), 0.125, 1e-12);
  EXPECT_DOUBLE_EQ(t.matmulEfficiencyAt(8192), 0.75);
}

TEST(CostModel, LargeMatmulIsComputeBound) {
  // QKV projection of Llama-3-70B at tp 8: M=4096, N=1280, K=8192, bf16.
  Target t = testTarget();
  double flops = 2.0 * 4096 * 1280 * 8192;
  double bytes = 2.0 * (4096.0 * 8192 + 1280.0 * 8192 + 4096.0 * 1280);
  double eff = 0.68 + (std::log2(1280.0) - 10) / 2 * (0.75 - 0.68);
  double expected = flops / (989.4e12 * eff); // ~125.6 us
  EXPECT_NEAR(matmulSeconds(t, flops, 1280, bytes, "bf16"), expected,
              1e-12);
  EXPECT_NEAR(expected * 1e6, 125.6, 0.1);
}

TEST(CostModel, DecodeMatmulIsMemoryBound) {
  // One token through an 8192 x 1280 bf16 weight: 21 MB of weight.
  Target t = testTarget();
  double flops = 2.0 * 1 * 1280 * 8192;
  double bytes = 2.0 * (8192 + 1280.0 * 8192 + 1280);
  double expected = bytes / (3350e9 * 0.85);
  EXPECT_NEAR(matmulSeconds(t, flops, 1, bytes, "bf16"), expected, 1e-15);
  EXPECT_NEAR(memorySeconds(t, 1e9) * 1e6, 351.185, 1e-3);
}

TEST(CostModel, AttentionUsesItsOwnEfficiency) {
  Target t = testTarget();
  // 34.4 GFLOP at 50% of 989.4 TFLOP/s.
  EXPECT_NEAR(attentionSeconds(t, 34.4e9, 1e6, "bf16"),
              34.4e9 / (989.4e12 * 0.5), 1e-15);
}

TEST(Target, BundledPresetsParse) {
  std::vector<std::string> names = presetTargets();
  ASSERT_EQ(names.size(), 5u);
  for (const std::string &name : names) {
    auto t = resolveTarget(name);
    ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
    EXPECT_EQ(t->name, name);
    EXPECT_FALSE(t->sources.empty());
  }
  auto ib = resolveTarget("h100-sxm-2x8-ib");
  ASSERT_TRUE(bool(ib));
  EXPECT_EQ(ib->worldSize(), 16);
  EXPECT_GT(ib->interNode.busBandwidthGBs, 0);
}

TEST(Target, ErrorsNameTheField) {
  auto expectError = [](llvm::StringRef json, llvm::StringRef message) {
    auto t = parseTarget(json, "t.json");
    ASSERT_FALSE(bool(t));
    std::string text = llvm::toString(t.takeError());
    EXPECT_NE(text.find(message.str()), std::string::npos) << text;
  };
  expectError("[]", "t.json: expected a JSON object");
  expectError("{", "t.json: not valid JSON");
  expectError(R"({"description": "x"})", "t.json: name: missing");
  expectError(R"({"name": "x", "description": "x", "nodes": 0})",
              "t.json: nodes: expected a positive integer");
  expectError(R"({"name": "x", "description": "x", "nodes": 1,
                 "gpus_per_node": 8, "gpu": 3})",
              "t.json: gpu: expected an object");
}

TEST(Target, CollectiveContentionIsOptionalAndChecked) {
  // The round-numbers test target, with and without the contention block.
  auto withContention = [](llvm::StringRef block, bool source) {
    std::string json = R"({"name": "t", "description": "t", "nodes": 1,
      "gpus_per_node": 8, "gpu": {"matmul_tflops": {"bf16": 1, "fp16": 1,
      "fp32": 1}, "vector_tflops": 1, "memory_bandwidth_gbs": 1,
      "memory_gib": 1, "matmul_efficiency": [[1, 1.0]],
      "memory_efficiency": 1, "attention_efficiency": 1,
      "kernel_launch_us": {"eager": 1, "graph": 1})" +
                       block.str() + R"(}, "links": {"intra_node": {"kind":
      "x", "latency_us": 1, "bus_bandwidth_gbs": 1}}, "sources": {
      "gpu.matmul_tflops": "s", "gpu.vector_tflops": "s",
      "gpu.memory_bandwidth_gbs": "s", "gpu.memory_gib": "s",
      "gpu.matmul_efficiency": "s", "gpu.memory_efficiency": "s",
      "gpu.attention_efficiency": "s", "gpu.kernel_launch_us": "s",
      "links.intra_node": "s")" +
                       (source ? R"(, "gpu.collective_contention": "s")" : "") +
                       "}}";
    return parseTarget(json, "t.json");
  };
  auto none = withContention("", false);
  ASSERT_TRUE(bool(none)) << llvm::toString(none.takeError());
  EXPECT_EQ(none->collectiveSmFraction, 0);
  EXPECT_EQ(none->collectiveMemoryFraction, 0);
  auto some = withContention(
      R"(, "collective_contention": {"sm_fraction": 0.2, "memory_fraction": 0.1})",
      true);
  ASSERT_TRUE(bool(some)) << llvm::toString(some.takeError());
  EXPECT_DOUBLE_EQ(some->collectiveSmFraction, 0.2);
  EXPECT_DOUBLE_EQ(some->collectiveMemoryFraction, 0.1);
  auto expectError = [&](llvm::StringRef block, bool source,
                         llvm::StringRef message) {
    auto t = withContention(block, source);
    ASSERT_FALSE(bool(t));
    std::string text = llvm::toString(t.takeError());
    EXPECT_NE(text.find(message.str()), std::string::npos) << text;
  };
  expectError(
      R"(, "collective_contention": {"sm_fraction": 0.2, "memory_fraction": 0.1})",
      false, "sources.gpu.collective_contention: missing");
  expectError(
      R"(, "collective_contention": {"sm_fraction": 1, "memory_fraction": 0.1})",
      true,
      "gpu.collective_contention.sm_fraction: expected a fraction in [0, 1)");
  expectError(R"(, "collective_contention": {"sm_fraction": 0.1})", true,
              "gpu.collective_contention.memory_fraction: expected a fraction");
  // Every preset says what a running collective takes.
  for (const std::string &name : presetTargets()) {
    auto t = resolveTarget(name);
    ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
    EXPECT_GT(t->collectiveSmFraction, 0) << name;
    EXPECT_GT(t->collectiveMemoryFraction, 0) << name;
  }
}

TEST(Calibration, ParsesAndRejects) {
  auto c = Calibration::parse("op,shape,us\nbraid.matmul,4x4;4x4,2.5\n"
                              "silu,4x4,1\n",
                              "c.csv");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->size(), 2u);
  auto bad = Calibration::parse("op,shape,us\nmatmul,4x4,-1\n", "c.csv");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("c.csv:2"),
            std::string::npos);
  auto empty = Calibration::parse("", "e.csv");
  ASSERT_FALSE(bool(empty));
  llvm::consumeError(empty.takeError());
}

} // namespace
