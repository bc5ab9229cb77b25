//===- GenerationTest.cpp - Prefill + decode over hostile plan shapes -----===//
//
// generate() divides by the batch and the vocabulary and reads the last
// logits row of every sequence: a plan (or a backend) that makes any of
// them empty, or logits that are not finite, must be an error before or
// instead of a SIGFPE, a SIGSEGV or a greedy token picked from NaN.
//
//===----------------------------------------------------------------------===//
#include "runtime/Generation.h"
#include "test/runtime/Expect.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {

// prefill / decode: logits = slice(embedding(input_ids, table)) with the
// given logits shapes (the slice makes any dim, 0 included, reachable);
// `batch` x `prompt` ids, table [4, 4].
PlanBuilder generationPlan(int64_t batch, int64_t prompt, Shape prefillLogits,
                           Shape decodeLogits) {
  PlanBuilder pb(1);
  int table = pb.param("embed_tokens.weight", {4, 4}, {4, 4});
  for (auto [name, tokens, logits] :
       {std::tuple{"prefill", prompt, prefillLogits},
        std::tuple{"decode", int64_t(1), decodeLogits}}) {
    FnBuilder f = pb.function(name);
    int ids = f.input("input_ids", {batch, tokens}, DType::I32);
    f.input("positions", {batch, tokens}, DType::I32);
    int e = f.tensor({batch, tokens, 4});
    int l = f.tensor(logits);
    f.op(OpCode::Embedding, {ids, f.param(table, pb.plan())}, {e});
    plan::OpT &slice = f.op(OpCode::Slice, {e}, {l});
    slice.offsets = {0, 0, 0};
    slice.sizes = logits;
    f.output("logits", l);
  }
  return pb;
}

std::string shapeError(const PlanBuilder &pb) {
  auto plan = loadPlan(pb.finish());
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan)
    return "";
  auto shape = generationShape(plan->root());
  EXPECT_FALSE(shape) << "generation shape accepted";
  return shape ? "" : shape.status().message();
}

// A step function that returns `logits` for every step.
StepFn constantStep(HostTensor logits) {
  return [logits](const std::string &, const StepInputs &)
             -> Expected<std::map<std::string, HostTensor>> {
    return std::map<std::string, HostTensor>{{"logits", logits}};
  };
}
} // namespace

TEST(Generation, AcceptsAWellFormedPlan) {
  auto plan = loadPlan(generationPlan(2, 3, {2, 3, 4}, {2, 1, 4}).finish());
  ASSERT_TRUE(plan) << plan.status().message();
  auto shape = generationShape(plan->root());
  ASSERT_TRUE(shape) << shape.status().message();
  EXPECT_EQ(shape->batch, 2);
  EXPECT_EQ(shape->promptLength, 3);
  EXPECT_EQ(shape->vocab, 4);
}

// Each of these loaded and then died in generate(): SIGFPE dividing by
// vocab or batch, SIGSEGV reading the last row of zero logit positions.
TEST(Generation, RefusesEmptyGenerationShapes) {
  std::string vocab0 = shapeError(generationPlan(2, 3, {2, 3, 0}, {2, 1, 0}));
  EXPECT_HAS(vocab0, "function 'prefill': input_ids [2, 3] and logits "
                     "[2, 3, 0] leave nothing to generate from");
  EXPECT_HAS(shapeError(generationPlan(0, 3, {0, 3, 4}, {0, 1, 4})),
             "input_ids [0, 3] and logits [0, 3, 4] leave nothing");
  EXPECT_HAS(shapeError(generationPlan(2, 0, {2, 0, 4}, {2, 1, 4})),
             "input_ids [2, 0] and logits [2, 0, 4] leave nothing");
  // Zero logit positions (a [B, 0, V] output).
  EXPECT_HAS(shapeError(generationPlan(2, 3, {2, 3, 4}, {2, 0, 4})),
             "function 'decode': input_ids [2, 1] and logits [2, 0, 4] "
             "leave nothing");
}

TEST(Generation, RefusesAVocabularyBeyondI32Ids) {
  // Logits [1, 1, 2^31 + 1]: ids up to 2^31 do not fit i32 input_ids.
  int64_t v = (int64_t(1) << 31) + 1;
  PlanBuilder pb(1);
  for (const char *name : {"prefill", "decode"}) {
    FnBuilder f = pb.function(name);
    f.input("input_ids", {1, 1}, DType::I32);
    int pos = f.input("positions", {1, 1}, DType::I32);
    int l = f.tensor({1, 1, v});
    // Any producer will do; the shapes are what is checked.
    f.op(OpCode::Recv, {}, {l}).group = 0;
    (void)pos;
    f.output("logits", l);
  }
  pb.group("self", 1);
  std::string e = shapeError(pb);
  EXPECT_HAS(e, "vocab 2147483649 has ids that do not fit its i32 input_ids");
}

TEST(Generation, HandMadeEmptyShapeIsAnErrorNotSigfpe) {
  GenerationShape shape; // batch, prompt and vocab 0
  EXPECT_TRUE(syntheticPrompt(shape, 0).empty());
  GenerationOptions g;
  auto out = generate(shape, g, constantStep(HostTensor()));
  ASSERT_FALSE(out);
  EXPECT_HAS(out.status().message(),
             "generation needs batch, prompt length and vocab >= 1");
}

TEST(Generation, LogitsOfTheWrongSizeAreAnError) {
  GenerationShape shape;
  shape.batch = 2;
  shape.promptLength = 1;
  shape.vocab = 4;
  GenerationOptions g;
  g.prompt = {1, 2};
  // 6 values are not whole [2, 4] rows; none at all would read row -1.
  for (size_t n : {size_t(6), size_t(0)}) {
    auto out =
        generate(shape, g,
                 constantStep(HostTensor::fromFloats(
                     DType::F32, {int64_t(n)}, std::vector<float>(n, 1.0f))));
    ASSERT_FALSE(out);
    EXPECT_HAS(out.status().message(), "prefill step 0 returned " +
                                           std::to_string(n) +
                                           " logits, not a whole number of "
                                           "[2, 4] rows");
  }
}

TEST(Generation, NonFiniteLogitsAreAnErrorNamingTheStep) {
  GenerationShape shape;
  shape.batch = 1;
  shape.promptLength = 2;
  shape.vocab = 3;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // [1, 2, 3]: the last position of the one sequence holds a NaN.
  HostTensor logits =
      HostTensor::fromFloats(DType::F32, {1, 2, 3}, {0, 1, 2, 5, nan, 1});
  GenerationOptions g;
  g.prompt = {0, 1};
  g.decodeSteps = 1;
  auto out = generate(shape, g, constantStep(logits));
  ASSERT_FALSE(out);
  EXPECT_HAS(out.status().message(),
             "prefill step 0: 1 of 6 logits are not finite, the first (nan) "
             "at batch 0, position 1, vocab id 1 (--allow-non-finite accepts "
             "them)");

  // An infinity at decode step 1 only.
  int calls = 0;
  StepFn laterInf =
      [&](const std::string &,
          const StepInputs &) -> Expected<std::map<std::string, HostTensor>> {
    float bad = calls++ ? std::numeric_limits<float>::infinity() : 0.0f;
    return std::map<std::string, HostTensor>{
        {"logits", HostTensor::fromFloats(DType::F32, {1, 1, 3}, {1, 2, bad})}};
  };
  auto decode = generate(shape, g, laterInf);
  ASSERT_FALSE(decode);
  EXPECT_HAS(decode.status().message(),
             "decode step 1: 1 of 3 logits are not finite, the first (inf) at "
             "batch 0, position 0, vocab id 2");

  // The explanation hook sees every step so far, the failing one last.
  g.explainNonFinite = [](const std::vector<StepRecord> &steps) {
    return "explained " + std::to_string(steps.size()) + " step(s), last " +
           steps.back().function;
  };
  auto explained = generate(shape, g, constantStep(logits));
  ASSERT_FALSE(explained);
  EXPECT_HAS(explained.status().message(),
             "vocab id 1; explained 1 step(s), last prefill");

  // --allow-non-finite: the run goes on.
  g.allowNonFinite = true;
  auto allowed = generate(shape, g, constantStep(logits));
  ASSERT_TRUE(allowed) << allowed.status().message();
  EXPECT_EQ(allowed->size(), 2u);
}

TEST(Generation, ForcedTokensAndPositionsAreChecked) {
  GenerationShape shape;
  shape.batch = 1;
  shape.promptLength = 2;
  shape.vocab = 3;
  HostTensor logits = HostTensor::fromFloats(DType::F32, {1, 1, 3}, {0, 1, 2});
  GenerationOptions g;
  g.prompt = {0, 0};
  g.decodeSteps = 1;
  g.forcedTokens = {{7}};
  auto out = generate(shape, g, constantStep(logits));
  ASSERT_FALSE(out);
  EXPECT_HAS(out.status().message(),
             "forced token 7 is outside the vocabulary [0, 3)");
  g.forcedTokens = {{0, 1}};
  auto wide = generate(shape, g, constantStep(logits));
  ASSERT_FALSE(wide);
  EXPECT_HAS(wide.status().message(), "forced tokens hold 2 ids");

  // The last position, 2 + (2^31 - 1) - 1, does not fit i32 positions.
  g.forcedTokens.clear();
  g.decodeSteps = std::numeric_limits<int>::max();
  auto far = generate(shape, g, constantStep(logits));
  ASSERT_FALSE(far);
  EXPECT_HAS(far.status().message(),
             "reach positions that do not fit the plan's i32 positions");
}
