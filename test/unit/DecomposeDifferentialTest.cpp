//===- DecomposeDifferentialTest.cpp - braid-decompose, IR to numbers -----===//
//
// braid-decompose must not change the answer: each module runs on two
// ranks through the CPU interpreter as written and cut into two chunks
// (then scheduled on two streams), and every output must be the same bit
// for bit. The cases are the edges of what the pass cuts: chunks joined
// before an op they cannot pass through (a bucketed prefill's row
// gather), and values a reduce_scatter (or Ulysses' all_to_all) split by
// chunk, which hold other tokens than the whole function's until an
// all_gather (or the all_to_all back) makes them whole.
//
//===----------------------------------------------------------------------===//
#include "test/unit/CompileIR.h"

#include "runtime/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
namespace rt = ::braid::rt;

namespace {

struct Compiled {
  std::vector<uint8_t> plan;
  int64_t chunks = 1; // braid.token_chunks of @f, 1 when it stayed whole
};

/// `ir` with plan memory and a verified schedule; with `decompose`, first
/// cut into 2 chunks and scheduled.
Compiled compile(const char *ir, bool decompose) {
  Compiled out;
  auto cut = [](PassManager &pm) {
    mlir::braid::BraidDecomposePassOptions chunks;
    chunks.chunks = "2";
    pm.addPass(mlir::braid::createBraidDecomposePass(chunks));
    mlir::braid::BraidSchedulePassOptions schedule;
    schedule.minHiddenUs = 0;
    pm.addPass(mlir::braid::createBraidSchedulePass(schedule));
    pm.addPass(mlir::braid::createBraidAssignStreamsPass());
    pm.addPass(mlir::braid::createBraidInsertEventsPass());
  };
  out.plan = ::braid::test::compileIR(
      ir, decompose ? llvm::function_ref<void(PassManager &)>(cut) : nullptr,
      [&](ModuleOp module) {
        auto f = module.lookupSymbol<func::FuncOp>("f");
        EXPECT_TRUE(f);
        if (auto k = f ? f->getAttrOfType<IntegerAttr>("braid.token_chunks")
                       : IntegerAttr())
          out.chunks = k.getInt();
      });
  return out;
}

/// @f's outputs on each of 2 ranks (strict interpreter, seeded), for
/// inputs `x` that differ by rank and, with `rows`, row 5 as `rows`.
std::vector<rt::TensorMap> run(const std::vector<uint8_t> &bytes, uint64_t seed,
                               bool rows) {
  auto plan = rt::loadPlan(bytes);
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan)
    return {};
  auto runner = rt::ThreadedRunner::create(*plan);
  EXPECT_TRUE(runner) << runner.status().message();
  if (!runner)
    return {};
  (*runner)->setStrict(true, seed);
  std::vector<rt::TensorMap> inputs;
  for (int r = 0; r < 2; ++r) {
    std::vector<float> x;
    for (int i = 0; i < 8 * 16; ++i)
      x.push_back(std::sin(float(i * 7 + 1000 * r)));
    inputs.push_back({{"x", rt::HostTensor::fromFloats(
                                ::braid::plan::DType::F32, {1, 8, 16}, x)}});
    if (rows)
      inputs.back().emplace(
          "rows",
          rt::HostTensor::fromInts(::braid::plan::DType::I32, {1, 1}, {5}));
  }
  auto out = (*runner)->run("f", inputs);
  EXPECT_TRUE(out) << out.status().message();
  return out ? *out : std::vector<rt::TensorMap>{};
}

/// Runs `ir` whole and cut; expects `chunks` chunks and equal outputs.
void expectSameAnswer(const char *ir, int64_t chunks, bool rows = false) {
  Compiled whole = compile(ir, false), cut = compile(ir, true);
  ASSERT_FALSE(whole.plan.empty());
  ASSERT_FALSE(cut.plan.empty());
  EXPECT_EQ(cut.chunks, chunks);
  for (uint64_t seed : {1, 2}) {
    std::vector<rt::TensorMap> a = run(whole.plan, seed, rows),
                               b = run(cut.plan, seed, rows);
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(b.size(), 2u);
    for (int r = 0; r < 2; ++r)
      for (const auto &[name, tensor] : a[size_t(r)]) {
        ASSERT_TRUE(b[size_t(r)].count(name)) << name;
        EXPECT_EQ(tensor.toFloats(), b[size_t(r)].at(name).toFloats())
            << "output " << name << " of rank " << r << " (seed " << seed
            << ")";
      }
  }
}

// A layer, then the row the input `rows` names of the [tokens, h] view
// (a bucketed prefill's last-token gather): the chunks join before the
// reshape; the hidden state is an output too.
const char *kJoinedHead = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}, %rows: tensor<1x1xi32> {braid.input = "rows"}) -> (tensor<1x1x16xf32> {braid.output = "y"}, tensor<1x8x16xf32> {braid.output = "h"}) {
  %w1 = braid.parameter "w1" full [16, 32] shard_dim 1 on @tp : tensor<16x16xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = braid.add %ar, %x : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  %flat = braid.reshape %h : tensor<1x8x16xf32> -> tensor<8x16xf32>
  %row = braid.embedding %rows, %flat : (tensor<1x1xi32>, tensor<8x16xf32>) -> tensor<1x1x16xf32>
  %w2 = braid.parameter "w2" full [16, 32] shard_dim 1 on @tp : tensor<16x16xf32>
  %m = braid.matmul %row, %w2 {transpose_b} : (tensor<1x1x16xf32>, tensor<16x16xf32>) -> tensor<1x1x16xf32>
  %y = braid.all_reduce sum %m on @tp : tensor<1x1x16xf32> -> tensor<1x1x16xf32>
  return %y, %h : tensor<1x1x16xf32>, tensor<1x8x16xf32>
}
)mlir";

TEST(DecomposeDifferential, ChunksJoinBeforeARowGather) {
  expectSameAnswer(kJoinedHead, 2, /*rows=*/true);
}

// Sequence parallelism: reduce_scatter, a norm, all_gather. Chunk c of
// the split value holds piece r of chunk c, not of the whole; gathered,
// each chunk is whole again.
const char *kSplitThenGathered = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x8x16xf32> {braid.output = "y"}) {
  %g = braid.parameter "g" full [16] : tensor<16xf32>
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %n = braid.rms_norm %s, %g {epsilon = 1.0e-05 : f64} : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %y = braid.all_gather %n on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}
)mlir";

TEST(DecomposeDifferential, SplitValuesGatheredBackAreTheWholeOnes) {
  expectSameAnswer(kSplitThenGathered, 2);
}

// Ulysses without the attention: the split tokens exchanged for whole
// tokens of a head shard, a token-wise op, exchanged back, gathered.
const char *kUlyssesExchange = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x8x16xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %h = braid.reshape %s : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %q = braid.all_to_all %h on @tp split 2 concat 1 : tensor<1x4x4x4xf32> -> tensor<1x8x2x4xf32>
  %a = braid.silu %q : tensor<1x8x2x4xf32>
  %b = braid.all_to_all %a on @tp split 1 concat 2 : tensor<1x8x2x4xf32> -> tensor<1x4x4x4xf32>
  %m = braid.reshape %b : tensor<1x4x4x4xf32> -> tensor<1x4x16xf32>
  %y = braid.all_gather %m on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}
)mlir";

TEST(DecomposeDifferential, UlyssesExchangesGatherAndSplitChunks) {
  expectSameAnswer(kUlyssesExchange, 2);
}

// GPT-2's positions under sequence parallelism: this rank's rows of a
// tensor through an all_to_all that splits and concatenates the tokens,
// then its first piece (rank 0's piece r; the input differs by rank here,
// so the piece's origin shows).
const char *kExchangeFirstPiece = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x8x16xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %e = braid.all_to_all %x on @tp split 1 concat 1 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %mine = braid.slice %e offsets [0, 0, 0] sizes [1, 4, 16] : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %h = braid.mul %s, %mine : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %y = braid.all_gather %h on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}
)mlir";

TEST(DecomposeDifferential, AnExchangesFirstPieceIsSplit) {
  expectSameAnswer(kExchangeFirstPiece, 2);
}

// Ulysses' plain-TP form on whole weights: every rank's heads of whole
// tokens through an all_to_all concatenating the tokens, first piece kept
// (rank 0's chunk, this rank's heads); gathered back along the heads.
const char *kWholeTokenExchange = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x8x16xf32> {braid.output = "y"}) {
  %a = braid.all_reduce sum %x on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = braid.reshape %x : tensor<1x8x16xf32> -> tensor<1x8x4x4xf32>
  %e = braid.all_to_all %h on @tp split 2 concat 1 : tensor<1x8x4x4xf32> -> tensor<1x16x2x4xf32>
  %mine = braid.slice %e offsets [0, 0, 0, 0] sizes [1, 8, 2, 4] : tensor<1x16x2x4xf32> -> tensor<1x8x2x4xf32>
  %s = braid.silu %mine : tensor<1x8x2x4xf32>
  %g = braid.all_gather %s on @tp dim 2 : tensor<1x8x2x4xf32> -> tensor<1x8x4x4xf32>
  %m = braid.reshape %g : tensor<1x8x4x4xf32> -> tensor<1x8x16xf32>
  %y = braid.add %m, %a : (tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}
)mlir";

TEST(DecomposeDifferential, AnExchangeOfWholeTokensKeepsRankZerosChunk) {
  expectSameAnswer(kWholeTokenExchange, 2);
}

// The whole exchange read after a collective was cut: joined, its chunks
// would be pieces of chunks, not of the whole. Refused.
const char *kExchangeReadWhole = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x8x16xf32> {braid.output = "y"}) {
  %a = braid.all_reduce sum %x on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %e = braid.all_to_all %a on @tp split 1 concat 1 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %y = braid.silu %e : tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}
)mlir";

TEST(DecomposeDifferential, AnExchangeIsNeverJoined) {
  expectSameAnswer(kExchangeReadWhole, 1);
}

// The split value itself returned, or its last token taken: cut, rank 0
// would hold tokens 0, 1, 4, 5 instead of 0 to 3. The function stays
// whole.
const char *kSplitOutput = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x4x16xf32> {braid.output = "y"}) {
  %w1 = braid.parameter "w1" full [16, 32] shard_dim 1 on @tp : tensor<16x16xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %s = braid.reduce_scatter sum %a on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %y = braid.silu %s : tensor<1x4x16xf32>
  return %y : tensor<1x4x16xf32>
}
)mlir";

const char *kSplitSlice = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x1x16xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %y = braid.slice %s offsets [0, 3, 0] sizes [1, 1, 16] : tensor<1x4x16xf32> -> tensor<1x1x16xf32>
  return %y : tensor<1x1x16xf32>
}
)mlir";

// Gathering along the tokens what no reduce_scatter split (by all_gather
// or all_to_all): cut, the gather would interleave the ranks' chunks.
const char *kGatherOfWhole = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x16x16xf32> {braid.output = "y"}) {
  %w1 = braid.parameter "w1" full [16, 32] shard_dim 1 on @tp : tensor<16x16xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %y = braid.all_gather %ar on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x16x16xf32>
  return %y : tensor<1x16x16xf32>
}
)mlir";

const char *kExchangeOfWhole = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x16x2x4xf32> {braid.output = "y"}) {
  %w1 = braid.parameter "w1" full [16, 32] shard_dim 1 on @tp : tensor<16x16xf32>
  %a = braid.matmul %x, %w1 {transpose_b} : (tensor<1x8x16xf32>, tensor<16x16xf32>) -> tensor<1x8x16xf32>
  %ar = braid.all_reduce sum %a on @tp : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = braid.reshape %ar : tensor<1x8x16xf32> -> tensor<1x8x4x4xf32>
  %y = braid.all_to_all %h on @tp split 2 concat 1 : tensor<1x8x4x4xf32> -> tensor<1x16x2x4xf32>
  return %y : tensor<1x16x2x4xf32>
}
)mlir";

// An all_reduce over the group that split the tokens: whole, y[t] sums
// tokens t % 4 and 4 + t % 4 of x; cut, tokens of one chunk.
const char *kReduceOfSplit = R"mlir(
braid.device_group @tp size 2
func.func @f(%x: tensor<1x8x16xf32> {braid.input = "x"}) -> (tensor<1x8x16xf32> {braid.output = "y"}) {
  %s = braid.reduce_scatter sum %x on @tp dim 1 : tensor<1x8x16xf32> -> tensor<1x4x16xf32>
  %a = braid.all_reduce sum %s on @tp : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
  %y = braid.all_gather %a on @tp dim 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
  return %y : tensor<1x8x16xf32>
}
)mlir";

TEST(DecomposeDifferential, SplitValuesNeverLeaveInChunkOrder) {
  expectSameAnswer(kReduceOfSplit, 1);
  expectSameAnswer(kSplitOutput, 1);
  expectSameAnswer(kSplitSlice, 1);
  expectSameAnswer(kGatherOfWhole, 1);
  expectSameAnswer(kExchangeOfWhole, 1);
}

} // namespace
