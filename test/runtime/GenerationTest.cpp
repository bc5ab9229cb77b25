//===- GenerationTest.cpp - Prefill + decode over hostile plan shapes -----===//
//
// generate() divides by the batch and the vocabulary and reads the last
// logits row of every sequence: a plan (or a backend) that makes any of
// them empty, or logits that are not finite, must be an error before or
// instead of a SIGFPE, a SIGSEGV or a greedy token picked from NaN.
//
//===----------------------------------------------------------------------===//
#include "runtime/Generation.h"
#include "runtime/ReferenceLogits.h"
#include "runtime/Safetensors.h"
#include "test/runtime/Expect.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
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
namespace {
// decode plus prefill buckets: `buckets` (tokens, logit positions,
// logit_rows or not), each logits = slice(embedding(input_ids)).
struct BucketSpec {
  std::string name;
  int64_t tokens, logitPositions;
  bool rows;
  int64_t batch = 2;
};
PlanBuilder bucketPlan(const std::vector<BucketSpec> &buckets,
                       bool decodeOne = false) {
  PlanBuilder pb(1);
  int table = pb.param("embed_tokens.weight", {4, 4}, {4, 4});
  std::vector<BucketSpec> all = buckets;
  all.push_back({"decode", 1, 1, false});
  if (decodeOne)
    all.push_back({"decode_1", 1, 1, false, 1});
  for (const BucketSpec &b : all) {
    FnBuilder f = pb.function(b.name);
    int ids = f.input("input_ids", {b.batch, b.tokens}, DType::I32);
    f.input("positions", {b.batch, b.tokens}, DType::I32);
    if (b.rows)
      f.input("logit_rows", {b.batch, 1}, DType::I32);
    int e = f.tensor({b.batch, b.tokens, 4});
    int l = f.tensor({b.batch, b.logitPositions, 4});
    f.op(OpCode::Embedding, {ids, f.param(table, pb.plan())}, {e});
    plan::OpT &slice = f.op(OpCode::Slice, {e}, {l});
    slice.offsets = {0, 0, 0};
    slice.sizes = {b.batch, b.logitPositions, 4};
    f.output("logits", l);
  }
  return pb;
}
} // namespace

TEST(Generation, PrefillBucketsPickTheSmallestThatHoldsThePrompt) {
  auto plan = loadPlan(bucketPlan({{"prefill_16", 16, 1, true},
                                   {"prefill_4", 4, 1, true},
                                   {"prefill_8", 8, 8, false}})
                           .finish());
  ASSERT_TRUE(plan) << plan.status().message();
  auto shape = generationShape(plan->root());
  ASSERT_TRUE(shape) << shape.status().message();
  ASSERT_EQ(shape->buckets.size(), 3u); // sorted by size
  EXPECT_EQ(shape->buckets[0].function, "prefill_4");
  EXPECT_EQ(shape->buckets[2].function, "prefill_16");
  // By default the largest, for the synthetic prompt.
  EXPECT_EQ(shape->promptLength, 16);
  EXPECT_EQ(shape->prefillFunction, "prefill_16");
  for (auto [length, function] :
       {std::pair{1, "prefill_4"}, std::pair{4, "prefill_4"},
        std::pair{5, "prefill_8"}, std::pair{16, "prefill_16"}}) {
    auto fitted = shapeForPrompt(*shape, size_t(2 * length));
    ASSERT_TRUE(fitted) << fitted.status().message();
    EXPECT_EQ(fitted->promptLength, length);
    EXPECT_EQ(fitted->prefillFunction, function);
  }
  EXPECT_HAS(shapeForPrompt(*shape, 34).status().message(),
             "a prompt of 17 tokens per sequence is longer than the plan's "
             "largest prefill bucket (buckets: 4, 8, 16)");
  EXPECT_HAS(shapeForPrompt(*shape, 5).status().message(),
             "the prompt has 5 tokens, not a whole, non-zero number per "
             "sequence for batch 2");

  // What a step is fed: the prompt padded with id 0, positions running on,
  // logit_rows b * 8... here bucket 4 for a 3-token prompt.
  auto fitted = shapeForPrompt(*shape, 6);
  ASSERT_TRUE(fitted);
  std::vector<StepInputs> fed;
  StepFn step = [&](const std::string &function, const StepInputs &inputs)
      -> Expected<std::map<std::string, HostTensor>> {
    fed.push_back(inputs);
    EXPECT_EQ(function, fed.size() == 1 ? "prefill_4" : "decode");
    return std::map<std::string, HostTensor>{
        {"logits",
         HostTensor::fromFloats(DType::F32, {2, 1, 4},
                                {0, 1, 0, 0, 0, 0, 1, 0})}};
  };
  GenerationOptions g;
  g.prompt = {1, 2, 3, 3, 2, 1};
  g.decodeSteps = 1;
  auto steps = generate(*fitted, g, step);
  ASSERT_TRUE(steps) << steps.status().message();
  ASSERT_EQ(fed.size(), 2u);
  EXPECT_EQ(fed[0].at("input_ids").toInts(),
            (std::vector<int64_t>{1, 2, 3, 0, 3, 2, 1, 0}));
  EXPECT_EQ(fed[0].at("positions").toInts(),
            (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(fed[0].at("logit_rows").toInts(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(steps->front().inputIds, g.prompt); // the prompt, not the pad
  // Decode continues at the prompt's end, not the bucket's.
  EXPECT_EQ(fed[1].at("positions").toInts(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(fed[1].at("input_ids").toInts(), (std::vector<int64_t>{1, 2}));
}

TEST(Generation, DecodeBatchBucketsRunFewerSequences) {
  auto plan = loadPlan(bucketPlan({{"prefill", 3, 1, false}}, true).finish());
  ASSERT_TRUE(plan) << plan.status().message();
  auto shape = generationShape(plan->root());
  ASSERT_TRUE(shape) << shape.status().message();
  ASSERT_EQ(shape->decodeBuckets.size(), 1u);
  EXPECT_EQ(shape->decodeFunction, "decode");
  auto one = shapeForSequences(*shape, 1);
  ASSERT_TRUE(one) << one.status().message();
  EXPECT_EQ(one->batch, 1);
  EXPECT_EQ(one->planBatch, 2);
  EXPECT_EQ(one->decodeFunction, "decode_1");
  EXPECT_EQ(one->decodeBatch, 1);
  auto two = shapeForSequences(*shape, 2);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->decodeFunction, "decode");
  EXPECT_HAS(shapeForSequences(*shape, 3).status().message(),
             "--sequences 3: the plan runs 1 to 2 sequences");
  EXPECT_HAS(shapeForSequences(*shape, 0).status().message(),
             "--sequences 0: the plan runs 1 to 2 sequences");

  // One sequence: prefill feeds the plan's 2 (the second padding), decode
  // feeds decode_1 one; the records hold one sequence.
  std::vector<std::pair<std::string, StepInputs>> fed;
  StepFn step = [&](const std::string &function, const StepInputs &inputs)
      -> Expected<std::map<std::string, HostTensor>> {
    fed.emplace_back(function, inputs);
    int64_t rows = inputs.at("input_ids").shape[0];
    std::vector<float> logits(size_t(rows * 4), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      logits[size_t(r * 4 + r % 4)] = 1.0f; // sequence r picks token r
    return std::map<std::string, HostTensor>{
        {"logits", HostTensor::fromFloats(DType::F32, {rows, 1, 4}, logits)}};
  };
  GenerationOptions g;
  g.prompt = {3, 2, 1};
  g.decodeSteps = 2;
  auto steps = generate(*one, g, step);
  ASSERT_TRUE(steps) << steps.status().message();
  ASSERT_EQ(fed.size(), 3u);
  EXPECT_EQ(fed[0].first, "prefill");
  EXPECT_EQ(fed[0].second.at("input_ids").toInts(),
            (std::vector<int64_t>{3, 2, 1, 0, 0, 0}));
  EXPECT_EQ(fed[1].first, "decode_1");
  EXPECT_EQ(fed[1].second.at("input_ids").toInts(), (std::vector<int64_t>{0}));
  EXPECT_EQ(fed[1].second.at("positions").toInts(), (std::vector<int64_t>{3}));
  for (const StepRecord &r : *steps) {
    EXPECT_EQ(r.nextToken, (std::vector<int64_t>{0}));
    EXPECT_EQ(r.logits.size(), 4u);
  }
  // A decode bucket must be smaller than the plan's batch and named by it.
  EXPECT_HAS(shapeError(bucketPlan({{"prefill", 3, 1, false},
                                    {"decode_2", 1, 1, false, 2}})),
             "function 'decode_2' takes 2 sequences; a decode batch bucket "
             "decode_<b> takes b < the plan's batch 2");
}

TEST(Generation, PrefillBucketsAreChecked) {
  EXPECT_HAS(shapeError(bucketPlan({{"prefill", 4, 1, false},
                                    {"prefill_8", 8, 1, true}})),
             "plan has both 'prefill' and prefill buckets ('prefill_8')");
  EXPECT_HAS(shapeError(bucketPlan({{"prefill_8", 8, 1, false}})),
             "function 'prefill_8' returns 1 logit positions and has no "
             "'logit_rows' input");
  EXPECT_HAS(shapeError(bucketPlan({{"prefill_8", 6, 1, true}})),
             "function 'prefill_8' takes 6 tokens per sequence; its name "
             "says 8");
  // Not buckets: a name that is not prefill_<positive integer>.
  EXPECT_HAS(shapeError(bucketPlan({{"prefill_x", 4, 1, true},
                                    {"prefill_0", 4, 1, true}})),
             "plan has no 'prefill' function (nor prefill_<S> buckets)");
}

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

//===----------------------------------------------------------------------===//
// Prompts and teacher forcing
//===----------------------------------------------------------------------===//

TEST(Generation, ParseTokenList) {
  auto ids = parseTokenList(" 1,2 3\n\t4 ,, 5\r\n-6", "prompt file 'p'");
  ASSERT_TRUE(ids) << ids.status().message();
  EXPECT_EQ(*ids, (std::vector<int64_t>{1, 2, 3, 4, 5, -6}));
  auto bad = parseTokenList("1 2 3x 4", "prompt file 'p'");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "prompt file 'p': item 3 '3x' is not a token id (ids are integers "
            "separated by whitespace or commas)");
  auto huge = parseTokenList("99999999999999999999", "f");
  ASSERT_FALSE(huge);
  EXPECT_HAS(huge.status().message(), "item 1 '99999999999999999999'");
  auto longItem = parseTokenList(std::string(1000, 'a'), "f");
  ASSERT_FALSE(longItem);
  EXPECT_HAS(longItem.status().message(), "'" + std::string(40, 'a') + "...'");
  auto empty = parseTokenList(" ,\n", "prompt file 'p'");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.status().message(), "prompt file 'p' holds no token ids");
}

TEST(Generation, ForcedTokensAreSequenceMajor) {
  // Sequence 0 feeds 10, 11, 12; sequence 1 feeds 20, 21, 22.
  auto steps = forcedTokensByStep({10, 11, 12, 20, 21, 22}, 2);
  ASSERT_TRUE(steps) << steps.status().message();
  EXPECT_EQ(*steps,
            (std::vector<std::vector<int64_t>>{{10, 20}, {11, 21}, {12, 22}}));
  auto one = forcedTokensByStep({5, 6}, 1);
  ASSERT_TRUE(one);
  EXPECT_EQ(*one, (std::vector<std::vector<int64_t>>{{5}, {6}}));
  auto ragged = forcedTokensByStep({1, 2, 3}, 2);
  ASSERT_FALSE(ragged);
  EXPECT_HAS(ragged.status().message(),
             "--force-tokens gives 3 ids, not a whole number of tokens for "
             "each of the 2 sequences");
  EXPECT_FALSE(forcedTokensByStep({}, 2));
  EXPECT_FALSE(forcedTokensByStep({1}, 0));

  // generate() feeds step k token k of each sequence at position S + k - 1.
  GenerationShape shape;
  shape.batch = 2;
  shape.promptLength = 3;
  shape.vocab = 30;
  std::vector<StepInputs> seen;
  StepFn record =
      [&](const std::string &,
          const StepInputs &in) -> Expected<std::map<std::string, HostTensor>> {
    seen.push_back(in);
    int64_t t = in.at("input_ids").shape[1];
    return std::map<std::string, HostTensor>{
        {"logits",
         HostTensor::fromFloats(DType::F32, {2, t, 30},
                                std::vector<float>(size_t(2 * t * 30), 0.5f))}};
  };
  GenerationOptions g;
  g.prompt = {1, 2, 3, 4, 5, 6};
  g.decodeSteps = 2;
  g.forcedTokens = *steps;
  auto out = generate(shape, g, record);
  ASSERT_TRUE(out) << out.status().message();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].at("input_ids").toInts(), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(seen[2].at("input_ids").toInts(), (std::vector<int64_t>{11, 21}));
  EXPECT_EQ(seen[2].at("positions").toInts(), (std::vector<int64_t>{4, 4}));
  // Every logit position is kept: the prefill returned [2, 3, 30].
  EXPECT_EQ((*out)[0].positions, 3);
  EXPECT_EQ((*out)[0].allLogits.size(), 180u);
  EXPECT_EQ((*out)[0].logits.size(), 60u);
  EXPECT_EQ((*out)[1].positions, 1);
}

//===----------------------------------------------------------------------===//
// Reference logits files (--check-against FILE.safetensors)
//===----------------------------------------------------------------------===//

namespace {
std::string logitsPath(const std::string &suffix = "") {
  const auto *info = testing::UnitTest::GetInstance()->current_test_info();
  return testing::TempDir() + "braid_" + info->test_suite_name() + "_" +
         info->name() + suffix + ".safetensors";
}

// B = 2, S = 2, V = 4: a prefill returning both positions, then two decode
// steps; logit (step k, b, t, v) = k + b / 10 + t / 100 + v / 1000, except
// column 2 of each row is the largest (the greedy token).
GenerationShape smallShape() {
  GenerationShape shape;
  shape.batch = 2;
  shape.promptLength = 2;
  shape.vocab = 4;
  return shape;
}

std::vector<StepRecord> smallRun() {
  std::vector<StepRecord> steps;
  for (int k = 0; k < 3; ++k) {
    StepRecord r;
    r.positions = k == 0 ? 2 : 1;
    r.inputIds =
        k == 0 ? std::vector<int64_t>{1, 2, 3, 0} : std::vector<int64_t>{2, 2};
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < r.positions; ++t)
        for (int v = 0; v < 4; ++v)
          r.allLogits.push_back(v == 2 ? 9.0f
                                       : float(k) + float(b) / 10 +
                                             float(t) / 100 + float(v) / 1000);
    for (int b = 0; b < 2; ++b) {
      auto last = r.allLogits.begin() + (b * r.positions + r.positions - 1) * 4;
      r.logits.insert(r.logits.end(), last, last + 4);
      r.nextToken.push_back(2);
    }
    steps.push_back(r);
  }
  return steps;
}

// The file of smallRun() with `edit` applied to its tensors.
std::string writeReference(
    const std::string &path,
    const std::function<void(std::vector<std::pair<std::string, HostTensor>> &)>
        &edit = nullptr) {
  GenerationShape shape = smallShape();
  EXPECT_TRUE(writeLogitsFile(path, shape, smallRun()));
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file) << file.status().message();
  std::vector<std::pair<std::string, HostTensor>> tensors;
  for (const std::string &name : file->names()) {
    const Shape &s = file->find(name)->shape;
    if (name == "input_ids")
      tensors.emplace_back(
          name, HostTensor::fromInts(DType::I64, s, *file->readInts(name, s)));
    else
      tensors.emplace_back(
          name,
          HostTensor::fromFloats(DType::F32, s, *file->readFloats(name, s)));
  }
  if (edit) {
    edit(tensors);
    EXPECT_TRUE(writeSafetensors(path, tensors));
  }
  return path;
}

HostTensor *tensorNamed(std::vector<std::pair<std::string, HostTensor>> &t,
                        const std::string &name) {
  for (auto &[n, tensor] : t)
    if (n == name)
      return &tensor;
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

std::string readError(const std::string &path) {
  auto ref = readReferenceLogits(path);
  EXPECT_FALSE(ref) << "read " << path;
  return ref ? "" : ref.status().message();
}

std::string compareError(const std::string &path,
                         const std::vector<StepRecord> &steps = smallRun()) {
  auto ref = readReferenceLogits(path);
  EXPECT_TRUE(ref) << ref.status().message();
  if (!ref)
    return "";
  auto check = compareWithReference(*ref, smallShape(), steps, 0, 0);
  EXPECT_FALSE(check) << "compared " << path;
  return check ? "" : check.status().message();
}
} // namespace

TEST(ReferenceLogits, DumpedRunMatchesItselfExactly) {
  std::string path = writeReference(logitsPath());
  auto ref = readReferenceLogits(path);
  ASSERT_TRUE(ref) << ref.status().message();
  EXPECT_EQ(ref->steps.size(), 3u);
  EXPECT_EQ(ref->steps.at(0).shape, (Shape{2, 2, 4}));
  EXPECT_EQ(ref->steps.at(2).shape, (Shape{2, 1, 4}));
  ASSERT_TRUE(ref->inputIds);
  EXPECT_EQ(*ref->inputIds, (std::vector<int64_t>{1, 2, 3, 0}));
  EXPECT_FALSE(ref->columns);
  EXPECT_FLOAT_EQ(referenceScale(*ref, 3), 9.0f);
  auto check = compareWithReference(*ref, smallShape(), smallRun(), 0, 0);
  ASSERT_TRUE(check) << check.status().message();
  EXPECT_EQ(check->mismatches, 0);
  EXPECT_EQ(check->steps.size(), 3u);
  EXPECT_EQ(check->columns, 4);
  EXPECT_TRUE(check->notRun.empty());
  for (const StepCheck &sc : check->steps)
    EXPECT_EQ(sc.sameGreedyTokens, std::optional<bool>(true));

  // A shorter run compares its steps and lists the others.
  std::vector<StepRecord> two = smallRun();
  two.pop_back();
  auto shorter = compareWithReference(*ref, smallShape(), two, 0, 0);
  ASSERT_TRUE(shorter) << shorter.status().message();
  EXPECT_EQ(shorter->steps.size(), 2u);
  EXPECT_EQ(shorter->notRun, std::vector<int>{2});
}

TEST(ReferenceLogits, MismatchesAreLocated) {
  std::string path = writeReference(logitsPath(), [](auto &t) {
    // step0 [2, 2, 4]: batch 1, position 1, column 3 = element 15.
    HostTensor *s0 = tensorNamed(t, "step0.logits");
    std::vector<float> v = s0->toFloats();
    v[15] += 0.25f;
    *s0 = HostTensor::fromFloats(DType::F32, s0->shape, v);
    // step2: a NaN never matches; batch 0, column 0.
    HostTensor *s2 = tensorNamed(t, "step2.logits");
    std::vector<float> w = s2->toFloats();
    w[0] = std::numeric_limits<float>::quiet_NaN();
    *s2 = HostTensor::fromFloats(DType::F32, s2->shape, w);
  });
  auto ref = readReferenceLogits(path);
  ASSERT_TRUE(ref) << ref.status().message();
  // A loose tolerance still catches 0.25, and NaN at any tolerance.
  auto check = compareWithReference(*ref, smallShape(), smallRun(), 0.1, 0);
  ASSERT_TRUE(check) << check.status().message();
  EXPECT_EQ(check->mismatches, 2);
  ASSERT_EQ(check->firstMismatches.size(), 2u);
  const LogitMismatch &m = check->firstMismatches[0];
  EXPECT_EQ(m.step, 0);
  EXPECT_EQ(m.batch, 1);
  EXPECT_EQ(m.position, 1);
  EXPECT_EQ(m.column, 3);
  EXPECT_FLOAT_EQ(m.want - m.got, 0.25f);
  EXPECT_EQ(check->firstMismatches[1].step, 2);
  EXPECT_EQ(check->firstMismatches[1].column, 0);
  EXPECT_EQ(check->steps[1].comparison.mismatches, 0);
  // Within a tolerance of 0.3 only the NaN is left.
  auto loose = compareWithReference(*ref, smallShape(), smallRun(), 0.3, 0);
  ASSERT_TRUE(loose);
  EXPECT_EQ(loose->mismatches, 1);
  // The listing is bounded.
  auto one = compareWithReference(*ref, smallShape(), smallRun(), 0, 0, 1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->firstMismatches.size(), 1u);
  EXPECT_EQ(one->mismatches, 2);
}

TEST(ReferenceLogits, ColumnsSelectWhatIsCompared) {
  // Columns 1 and 3 only, stored as BF16 with I32 column ids; column 0 of
  // the run is changed and must not matter.
  std::string path = writeReference(logitsPath(), [](auto &t) {
    for (auto &[name, tensor] : t) {
      if (name.find(".logits") == std::string::npos)
        continue;
      std::vector<float> v = tensor.toFloats(), kept;
      for (size_t i = 0; i < v.size(); ++i)
        if (i % 4 == 1 || i % 4 == 3)
          kept.push_back(v[i]);
      Shape s = tensor.shape;
      s.back() = 2;
      tensor = HostTensor::fromFloats(DType::BF16, s, kept);
    }
    t.emplace_back("columns", HostTensor::fromInts(DType::I32, {2}, {1, 3}));
  });
  auto ref = readReferenceLogits(path);
  ASSERT_TRUE(ref) << ref.status().message();
  ASSERT_TRUE(ref->columns);
  EXPECT_EQ(*ref->columns, (std::vector<int64_t>{1, 3}));
  std::vector<StepRecord> run = smallRun();
  for (StepRecord &r : run)
    for (size_t i = 0; i < r.allLogits.size(); i += 4)
      r.allLogits[i] = -100;
  // bf16 holds these values to about 3 significant digits.
  auto check = compareWithReference(*ref, smallShape(), run, 0, 1e-2);
  ASSERT_TRUE(check) << check.status().message();
  EXPECT_EQ(check->mismatches, 0);
  EXPECT_EQ(check->columns, 2);
  EXPECT_FALSE(check->steps[0].sameGreedyTokens); // no argmax over a subset
  // At zero tolerance the bf16 rounding shows, on the kept columns only.
  auto exact = compareWithReference(*ref, smallShape(), run, 0, 0);
  ASSERT_TRUE(exact);
  EXPECT_GT(exact->mismatches, 0);
  for (const LogitMismatch &m : exact->firstMismatches)
    EXPECT_TRUE(m.column == 1 || m.column == 3) << m.column;

  // Column ids past the vocabulary are an error of the comparison.
  std::string far = writeReference(logitsPath("_far"), [](auto &t) {
    for (auto &[name, tensor] : t)
      if (name.find(".logits") != std::string::npos) {
        Shape s = tensor.shape;
        s.back() = 1;
        tensor = HostTensor::fromFloats(
            DType::F32, s, std::vector<float>(size_t(numElements(s)), 0));
      }
    t.emplace_back("columns", HostTensor::fromInts(DType::I64, {1}, {4}));
  });
  EXPECT_HAS(compareError(far),
             "'columns' names vocabulary id 4; the plan's vocabulary is 4");
}

TEST(ReferenceLogits, PromptAndStepsMustFitTheRun) {
  std::string ids = writeReference(logitsPath("_ids"), [](auto &t) {
    *tensorNamed(t, "input_ids") =
        HostTensor::fromInts(DType::I64, {2, 2}, {1, 2, 3, 1});
  });
  EXPECT_HAS(compareError(ids),
             "input_ids differ from the run's prompt at sequence 1, position "
             "1 (file 1, run 0)");
  std::string idShape = writeReference(logitsPath("_idshape"), [](auto &t) {
    *tensorNamed(t, "input_ids") =
        HostTensor::fromInts(DType::I32, {1, 4}, {1, 2, 3, 0});
  });
  EXPECT_HAS(compareError(idShape),
             "input_ids is [1, 4], the run's prompt is [2, 2]");

  std::string gap = writeReference(logitsPath("_gap"), [](auto &t) {
    t.erase(std::remove_if(t.begin(), t.end(),
                           [](auto &p) { return p.first == "step1.logits"; }),
            t.end());
  });
  EXPECT_HAS(compareError(gap),
             "has no step1.logits for the decode step 1 the run makes (it "
             "holds steps 0, 2); run at most --steps 0");

  // A prefill that returned only the last position: T differs.
  std::vector<StepRecord> lastOnly = smallRun();
  lastOnly[0].positions = 1;
  lastOnly[0].allLogits = lastOnly[0].logits;
  EXPECT_HAS(compareError(writeReference(logitsPath("_t")), lastOnly),
             "step0.logits is [2, 2, 4]; the prefill has [2, 1, 4] (batch, "
             "logit positions, columns)");
}

TEST(ReferenceLogits, FileIsCheckedOnItsOwn) {
  auto withExtra = [&](const std::string &suffix, const std::string &name,
                       HostTensor t) {
    return writeReference(logitsPath(suffix),
                          [&](auto &ts) { ts.emplace_back(name, t); });
  };
  HostTensor one = HostTensor::fromFloats(DType::F32, {1}, {0});
  EXPECT_HAS(readError(withExtra("_typo", "step1.logit", one)),
             "holds tensor 'step1.logit', which is none of stepK.logits, "
             "columns and input_ids");
  EXPECT_HAS(readError(withExtra("_zero", "step01.logits", one)),
             "holds tensor 'step01.logits'");
  EXPECT_HAS(
      readError(withExtra("_cols", "columns",
                          HostTensor::fromInts(DType::I64, {4}, {0, 1, 1, 3}))),
      "'columns' must be strictly increasing vocabulary ids >= 0; "
      "element 2 is 1 after 1");
  EXPECT_HAS(readError(withExtra(
                 "_neg", "columns",
                 HostTensor::fromInts(DType::I64, {4}, {-1, 0, 1, 2}))),
             "element 0 is -1");
  EXPECT_HAS(readError(withExtra(
                 "_fcols", "columns",
                 HostTensor::fromFloats(DType::F32, {4}, {0, 1, 2, 3}))),
             "tensor 'columns' has dtype F32; expected I32 or I64");
  EXPECT_HAS(
      readError(withExtra("_ncols", "columns",
                          HostTensor::fromInts(DType::I64, {3}, {0, 1, 2}))),
      "'columns' names 3 vocabulary ids, the logits have 4 columns");
  EXPECT_HAS(
      readError(withExtra(
          "_rank", "step5.logits",
          HostTensor::fromFloats(DType::F32, {2, 4}, std::vector<float>(8)))),
      "'step5.logits' is [2, 4], expected [batch, logit positions, "
      "vocabulary columns]");
  EXPECT_HAS(
      readError(withExtra("_width", "step5.logits",
                          HostTensor::fromFloats(DType::F32, {2, 1, 3},
                                                 std::vector<float>(6)))),
      "step5.logits has 3 columns, step0.logits 4");
  std::string none = logitsPath("_none");
  ASSERT_TRUE(writeSafetensors(
      none, {{"input_ids", HostTensor::fromInts(DType::I64, {1, 1}, {0})}}));
  EXPECT_HAS(readError(none), "holds no stepK.logits tensor");
}

TEST(ReferenceLogits, PlanOrLogitsByContent) {
  std::string logits = writeReference(logitsPath());
  auto kind = checkFileKind(logits);
  ASSERT_TRUE(kind) << kind.status().message();
  EXPECT_EQ(*kind, CheckFileKind::Logits);

  std::string plan = logitsPath("_plan"); // a plan, named .safetensors
  {
    std::vector<uint8_t> bytes =
        generationPlan(1, 1, {1, 1, 4}, {1, 1, 4}).finish();
    std::ofstream out(plan, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              std::streamsize(bytes.size()));
  }
  auto planKind = checkFileKind(plan);
  ASSERT_TRUE(planKind) << planKind.status().message();
  EXPECT_EQ(*planKind, CheckFileKind::Plan);

  std::string garbage = logitsPath("_garbage");
  for (const std::string &bytes :
       {std::string("short"), std::string("0123456789abcdef"),
        // A length field past the end of the file, then '{'.
        std::string("\xff\0\0\0\0\0\0\0{}", 10)}) {
    std::ofstream(garbage, std::ios::binary | std::ios::trunc) << bytes;
    auto bad = checkFileKind(garbage);
    ASSERT_FALSE(bad);
    EXPECT_HAS(bad.status().message(),
               "is neither a plan (FlatBuffers identifier BRPL) nor a "
               "safetensors logits file");
  }
  auto missing = checkFileKind(logitsPath("_missing"));
  ASSERT_FALSE(missing);
  EXPECT_HAS(missing.status().message(), "cannot open --check-against file");
}
