//===- ShapeChecksTest.cpp - unit tests of the shared shape rules ---------===//
#include "dialect/ShapeChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::braid;

namespace {
class ShapeChecksTest : public ::testing::Test {
protected:
  ShapeChecksTest()
      : handler(&ctx, [this](Diagnostic &d) {
          last = d.str();
          return success();
        }) {}

  RankedTensorType t(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, Builder(&ctx).getBF16Type());
  }
  Location loc() { return UnknownLoc::get(&ctx); }

  MLIRContext ctx;
  std::string last;
  ScopedDiagnosticHandler handler;
};
} // namespace

TEST_F(ShapeChecksTest, FormatShape) {
  EXPECT_EQ(formatShape({2, 16, 512}), "[2, 16, 512]");
  EXPECT_EQ(formatShape({}), "[]");
}

TEST_F(ShapeChecksTest, MatmulInfersBatchedTransposedShape) {
  auto s = inferMatmulShape(loc(), {2, 16, 512}, {128, 512}, false, true);
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (SmallVector<int64_t>{2, 16, 128}));
  auto u = inferMatmulShape(loc(), {64, 32}, {64, 8}, true, false);
  ASSERT_TRUE(succeeded(u));
  EXPECT_EQ(*u, (SmallVector<int64_t>{32, 8}));
}

TEST_F(ShapeChecksTest, MatmulContractionMismatchNamesBothSizes) {
  EXPECT_TRUE(failed(inferMatmulShape(loc(), {4, 512}, {256, 8}, false, false)));
  EXPECT_NE(last.find("contraction size of a (512)"), std::string::npos) << last;
  EXPECT_NE(last.find("that of b (256)"), std::string::npos) << last;
}

TEST_F(ShapeChecksTest, AllGatherMultipliesDimByGroupSize) {
  EXPECT_TRUE(succeeded(checkAllGather(loc(), "all_gather", t({4, 8}),
                                       t({4, 32}), 1, 4)));
  EXPECT_TRUE(failed(checkAllGather(loc(), "all_gather", t({4, 8}),
                                    t({4, 16}), 1, 4)));
  EXPECT_NE(last.find("group size 4 x operand size 8"), std::string::npos)
      << last;
}

TEST_F(ShapeChecksTest, ReduceScatterNeedsDivisibleDim) {
  EXPECT_TRUE(succeeded(checkReduceScatter(loc(), "reduce_scatter",
                                           t({4, 4096}), t({4, 1024}), 1, 4)));
  EXPECT_TRUE(failed(checkReduceScatter(loc(), "reduce_scatter", t({4, 4096}),
                                        t({4, 1365}), 1, 3)));
  EXPECT_EQ(last,
            "reduce_scatter: dim 1 of size 4096 is not divisible by group "
            "size 3");
}

TEST_F(ShapeChecksTest, AllToAllMovesTheFactor) {
  EXPECT_TRUE(succeeded(checkAllToAll(loc(), "all_to_all", t({1, 4, 8, 64}),
                                      t({1, 16, 2, 64}), 2, 1, 4)));
  EXPECT_TRUE(failed(checkAllToAll(loc(), "all_to_all", t({1, 4, 6, 64}),
                                   t({1, 16, 1, 64}), 2, 1, 4)));
}

TEST_F(ShapeChecksTest, ParameterShardsAndBlocks) {
  // GPT-2 c_attn [768, 2304] cut into 3 blocks over 4 ranks -> [768, 576].
  EXPECT_TRUE(succeeded(checkParameter(loc(), "c_attn", {768, 2304}, {},
                                       t({768, 576}), 1, 4, 4, 3)));
  // Two KV heads (256 rows) replicated over 4 ranks: 2 shards -> 128 rows.
  EXPECT_TRUE(succeeded(
      checkParameter(loc(), "k_proj", {256, 512}, {}, t({128, 512}), 0, 4, 2, 1)));
  EXPECT_TRUE(failed(
      checkParameter(loc(), "k_proj", {256, 512}, {}, t({128, 512}), 0, 4, 3, 1)));
  EXPECT_NE(last.find("shards 3 must divide the group size 4"),
            std::string::npos)
      << last;
  EXPECT_TRUE(failed(
      checkParameter(loc(), "w", {10, 512}, {}, t({2, 512}), 0, 4, 4, 1)));
  EXPECT_NE(last.find("dim 0 of size 10 is not divisible"), std::string::npos)
      << last;
  // GPT-2's vocabulary 50257 padded to 50260 splits over 4 ranks.
  EXPECT_TRUE(succeeded(checkParameter(loc(), "wte", {50257, 768},
                                       {50260, 768}, t({12565, 768}), 0, 4,
                                       4, 1)));
}

TEST_F(ShapeChecksTest, AttentionRejectsIndivisibleHeads) {
  AttentionShapes s;
  s.q = t({1, 4, 6, 8});
  s.k = s.v = t({1, 4, 4, 8});
  s.output = s.q;
  s.numHeads = 6;
  s.numKvHeads = 4;
  s.headDim = 8;
  EXPECT_TRUE(failed(checkAttention(loc(), s)));
  EXPECT_EQ(last, "attention: num_heads 6 is not divisible by num_kv_heads 4");
  s.numKvHeads = 2;
  s.k = s.v = t({1, 4, 2, 8});
  EXPECT_TRUE(succeeded(checkAttention(loc(), s)));
}

TEST_F(ShapeChecksTest, BroadcastBinaryTrailingRule) {
  EXPECT_TRUE(succeeded(checkBroadcastBinary(loc(), "add", t({2, 3, 4}),
                                             t({4}), t({2, 3, 4}))));
  EXPECT_TRUE(succeeded(checkBroadcastBinary(loc(), "add", t({2, 3, 4}),
                                             t({3, 1}), t({2, 3, 4}))));
  EXPECT_TRUE(failed(checkBroadcastBinary(loc(), "add", t({2, 3, 4}), t({3}),
                                          t({2, 3, 4}))));
}
