//===- InterpreterTest.cpp - Whole plans on the reference interpreter -----===//
#include "runtime/Interpreter.h"
#include "runtime/Weights.h"
#include "test/runtime/Expect.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {
HostTensor f32(Shape shape, std::vector<float> v) {
  return HostTensor::fromFloats(DType::F32, std::move(shape), v);
}

std::unique_ptr<ThreadedRunner> makeRunner(const PlanBuilder &pb,
                                           uint64_t seed = 0) {
  auto plan = loadPlan(pb.finish());
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan)
    return nullptr;
  auto runner = ThreadedRunner::create(*plan, seed);
  EXPECT_TRUE(runner) << runner.status().message();
  return runner ? runner.take() : nullptr;
}

PlanBuilder mlpPlan(int tp) {
  return megatronMlpPlan(tp, /*hidden=*/8, /*inter=*/16, /*batch=*/1,
                         /*tokens=*/2);
}
} // namespace

TEST(Interpreter, TensorParallelMlpMatchesSingleRank) {
  std::vector<float> xs;
  for (int i = 0; i < 16; ++i)
    xs.push_back(std::sin(0.7f * float(i)) * 3.0f);
  TensorMap in{{"x", f32({1, 2, 8}, xs)}};
  std::vector<float> ref;
  for (int tp : {1, 2, 4}) {
    auto runner = makeRunner(mlpPlan(tp), /*seed=*/42);
    ASSERT_TRUE(runner);
    auto out = runner->run("prefill", {in});
    ASSERT_TRUE(out) << out.status().message();
    std::vector<float> y0 = (*out)[0].at("y").toFloats();
    for (int r = 1; r < tp; ++r) // bit-identical across ranks
      EXPECT_EQ((*out)[size_t(r)].at("y").toFloats(), y0) << "rank " << r;
    if (ref.empty()) {
      ref = y0;
      float mx = 0;
      for (float v : ref)
        mx = std::max(mx, std::fabs(v));
      EXPECT_GT(mx, 1e-4f); // not trivially zero
      continue;
    }
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(y0[i], ref[i], 1e-6f) << "tp " << tp << " element " << i;
  }
}

TEST(Interpreter, VocabParallelEmbeddingMatchesFullTable) {
  // Table [6, 4] cut over 2 ranks; ids span both shards; all_reduce sums the
  // zero rows away. Expected rows come straight from the weight generator.
  PlanBuilder pb(2);
  pb.group("tp", 2);
  int tab =
      pb.param("model.embed_tokens.weight", {6, 4}, {3, 4}, DType::F32, 0, 0);
  FnBuilder f = pb.function("prefill");
  int ids = f.input("ids", {1, 3}, DType::I32);
  int e = f.tensor({1, 3, 4}), y = f.tensor({1, 3, 4});
  f.op(OpCode::Embedding, {ids, f.param(tab, pb.plan())}, {e}).vocab_group = 0;
  f.op(OpCode::AllReduce, {e}, {y}).group = 0;
  f.output("y", y);
  auto runner = makeRunner(pb, 7);
  ASSERT_TRUE(runner);
  auto out = runner->run(
      "prefill",
      {{{"ids", HostTensor::fromInts(DType::I32, {1, 3}, {4, 0, 3})}}});
  ASSERT_TRUE(out) << out.status().message();
  auto full = generateFullWeights(SyntheticWeights(7),
                                  "model.embed_tokens.weight", {6, 4});
  std::vector<float> want;
  for (int id : {4, 0, 3})
    want.insert(want.end(), full.begin() + id * 4, full.begin() + id * 4 + 4);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ((*out)[size_t(r)].at("y").toFloats(), want);
}

namespace {
// Attention with a KV cache [1, 4, 1, 2] kept in state slots across a
// prefill and a decode step. Prefill updates the state in place (State
// result tensors); decode writes activations that are copied back.
PlanBuilder kvPlan() {
  PlanBuilder pb(1);
  int kslot = pb.stateSlot("layers.0.k_cache", {1, 4, 1, 2});
  int vslot = pb.stateSlot("layers.0.v_cache", {1, 4, 1, 2});
  for (bool prefill : {true, false}) {
    FnBuilder f = pb.function(prefill ? "prefill" : "decode");
    int q = f.input("q", {1, 1, 2, 2});
    int k = f.input("k", {1, 1, 1, 2});
    int v = f.input("v", {1, 1, 1, 2});
    int pos = f.input("pos", {1}, DType::I64);
    int kc = f.state(kslot, pb.plan()), vc = f.state(vslot, pb.plan());
    int o = f.tensor({1, 1, 2, 2});
    int kc2 = prefill ? f.state(kslot, pb.plan()) : f.tensor({1, 4, 1, 2});
    int vc2 = prefill ? f.state(vslot, pb.plan()) : f.tensor({1, 4, 1, 2});
    plan::OpT &att =
        f.op(OpCode::Attention, {q, k, v, kc, vc, pos}, {o, kc2, vc2});
    att.causal = true;
    att.num_heads = 2;
    att.num_kv_heads = 1;
    att.head_dim = 2;
    for (auto [slot, in, out] :
         {std::tuple{kslot, kc, kc2}, std::tuple{vslot, vc, vc2}}) {
      auto b = std::make_unique<plan::StateBindingT>();
      b->slot = slot;
      b->input = in;
      b->output = out;
      f.fn().state.push_back(std::move(b));
    }
    f.output("o", o);
  }
  return pb;
}
} // namespace

TEST(Interpreter, KvCachePersistsAcrossSteps) {
  auto runner = makeRunner(kvPlan());
  ASSERT_TRUE(runner);
  // Step 1 at pos 0: a single token attends to itself -> v0 for both heads.
  auto s1 = runner->run(
      "prefill", {{{"q", f32({1, 1, 2, 2}, {1, 0, 0, 1})},
                   {"k", f32({1, 1, 1, 2}, {1, 0})},
                   {"v", f32({1, 1, 1, 2}, {1, 2})},
                   {"pos", HostTensor::fromInts(DType::I64, {1}, {0})}}});
  ASSERT_TRUE(s1) << s1.status().message();
  EXPECT_EQ((*s1)[0].at("o").toFloats(), (std::vector<float>{1, 2, 1, 2}));
  // Step 2 at pos 1 sees the cached token 0 (hand-computed in KernelTest).
  auto s2 = runner->run(
      "decode", {{{"q", f32({1, 1, 2, 2}, {1, 1, 2, 0})},
                  {"k", f32({1, 1, 1, 2}, {0, 1})},
                  {"v", f32({1, 1, 1, 2}, {3, 4})},
                  {"pos", HostTensor::fromInts(DType::I64, {1}, {1})}}});
  ASSERT_TRUE(s2) << s2.status().message();
  std::vector<float> o = (*s2)[0].at("o").toFloats();
  std::vector<float> want{2, 3, 1.391141f, 2.391141f};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(o[i], want[i], 1e-5f);
  EXPECT_EQ(runner->rank(0).stateSlot(0).toFloats(),
            (std::vector<float>{1, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(runner->rank(0).stateSlot(1).toFloats(),
            (std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0}));
  runner->rank(0).resetState();
  EXPECT_EQ(runner->rank(0).stateSlot(0).toFloats(),
            std::vector<float>(8, 0.0f));
}

// An updated cache of another shape than its cache (the loader checks only
// their dtypes) is an error naming both shapes, not a write past either.
TEST(Interpreter, AnUpdatedCacheOfAnotherShapeIsAnError) {
  PlanBuilder pb(1);
  int kslot = pb.stateSlot("k_cache", {1, 4, 1, 2});
  int vslot = pb.stateSlot("v_cache", {1, 4, 1, 2});
  FnBuilder f = pb.function("decode");
  int q = f.input("q", {1, 1, 1, 2});
  int pos = f.input("pos", {1}, DType::I64);
  int kc = f.state(kslot, pb.plan()), vc = f.state(vslot, pb.plan());
  int o = f.tensor({1, 1, 1, 2});
  int kc2 = f.tensor({1, 8, 1, 2}), vc2 = f.tensor({1, 4, 1, 2});
  plan::OpT &att =
      f.op(OpCode::Attention, {q, q, q, kc, vc, pos}, {o, kc2, vc2});
  att.causal = true;
  att.num_heads = att.num_kv_heads = 1;
  att.head_dim = 2;
  f.output("o", o);
  auto runner = makeRunner(pb);
  ASSERT_TRUE(runner);
  auto out = runner->run(
      "decode", {{{"q", f32({1, 1, 1, 2}, {1, 0})},
                  {"pos", HostTensor::fromInts(DType::I64, {1}, {0})}}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("updated cache tensor " +
                                        std::to_string(kc2) +
                                        " is [1, 8, 1, 2]; its cache is "
                                        "[1, 4, 1, 2]"),
            std::string::npos)
      << out.status().message();
}

TEST(Interpreter, Bf16StorageRoundsOnStore) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  int a = f.input("a", {2}, DType::BF16), b = f.input("b", {2}, DType::BF16);
  int y = f.tensor({2}, DType::BF16);
  f.op(OpCode::Add, {a, b}, {y});
  f.output("y", y);
  auto runner = makeRunner(pb);
  ASSERT_TRUE(runner);
  auto out = runner->run(
      "main", {{{"a", HostTensor::fromFloats(DType::BF16, {2}, {1, 256})},
                {"b", HostTensor::fromFloats(DType::BF16, {2}, {0.5, 1})}}});
  ASSERT_TRUE(out) << out.status().message();
  const HostTensor &r = (*out)[0].at("y");
  EXPECT_EQ(r.dtype, DType::BF16);
  // 256 + 1 = 257 is a tie between bf16 neighbours 256 and 258 -> 256.
  EXPECT_EQ(r.toFloats(), (std::vector<float>{1.5f, 256.0f}));
}

TEST(Interpreter, SliceConcatReshapeSoftmax) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {2, 3});
  int s = f.tensor({2, 2}), c = f.tensor({4, 2}), r = f.tensor({8});
  int sm = f.tensor({2, 2});
  plan::OpT &sl = f.op(OpCode::Slice, {x}, {s});
  sl.offsets = {0, 1};
  sl.sizes = {2, 2};
  f.op(OpCode::Concat, {s, s}, {c}).dim = 0;
  f.op(OpCode::Reshape, {c}, {r});
  f.op(OpCode::Softmax, {s}, {sm}).dim = 1;
  f.output("r", r);
  f.output("sm", sm);
  auto runner = makeRunner(pb);
  ASSERT_TRUE(runner);
  auto out = runner->run("main", {{{"x", f32({2, 3}, {1, 2, 3, 4, 5, 7})}}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].at("r").toFloats(),
            (std::vector<float>{2, 3, 5, 7, 2, 3, 5, 7}));
  // softmax([2, 3]) = (0.268941, 0.731059); softmax([5, 7]) = (0.119203,
  // 0.880797).
  std::vector<float> sms = (*out)[0].at("sm").toFloats();
  std::vector<float> want{0.268941f, 0.731059f, 0.119203f, 0.880797f};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(sms[i], want[i], 1e-6f);
}

// A rule the loader leaves to the kernel (a norm weight's shape; matmul
// shapes are the loader's own, PlanLoaderTest).
TEST(Interpreter, RuntimeShapeErrorNamesTheOp) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {2, 2}), w = f.input("w", {3});
  int y = f.tensor({2, 2});
  f.op(OpCode::RmsNorm, {x, w}, {y}).loc = "model.mlir:12:3";
  f.output("y", y);
  auto runner = makeRunner(pb);
  ASSERT_TRUE(runner);
  auto out = runner->run("main", {{{"x", f32({2, 2}, std::vector<float>(4))},
                                   {"w", f32({3}, std::vector<float>(3))}}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find(
                "rank 0: function 'main': op 0 (rms_norm) at model.mlir:12:3: "
                "rms_norm: weight [3] must be [2] for input [2, 2]"),
            std::string::npos)
      << out.status().message();
}

TEST(Interpreter, RejectsBadInputs) {
  PlanBuilder pb = mlpPlan(1);
  auto runner = makeRunner(pb);
  ASSERT_TRUE(runner);
  auto missing = runner->run("prefill", {{}});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("missing input 'x'"),
            std::string::npos);
  auto shape = runner->run("prefill", {{{"x", f32({2, 8}, {})}}});
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.status().message().find("input 'x' must be [1, 2, 8] x f32"),
            std::string::npos)
      << shape.status().message();
  auto extra = runner->run("prefill",
                           {{{"x", f32({1, 2, 8}, {})}, {"z", f32({1}, {0})}}});
  ASSERT_FALSE(extra);
  EXPECT_NE(extra.status().message().find("has no input 'z'"),
            std::string::npos);
  EXPECT_FALSE(runner->run("nope", {{}}));
}

TEST(Interpreter, SetParameterOverridesGeneratedWeights) {
  PlanBuilder pb(1);
  int w = pb.param("w", {2, 2}, {2, 2});
  FnBuilder f = pb.function("main");
  int x = f.input("x", {1, 2});
  int y = f.tensor({1, 2});
  f.op(OpCode::Matmul, {x, f.param(w, pb.plan())}, {y});
  f.output("y", y);
  auto runner = makeRunner(pb);
  ASSERT_TRUE(runner);
  ASSERT_TRUE(runner->rank(0).setParameter("w", f32({2, 2}, {1, 2, 3, 4})));
  EXPECT_FALSE(runner->rank(0).setParameter("w", f32({4}, {1, 2, 3, 4})));
  EXPECT_FALSE(runner->rank(0).setParameter("v", f32({2, 2}, {1, 2, 3, 4})));
  auto out = runner->run("main", {{{"x", f32({1, 2}, {1, 1})}}});
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].at("y").toFloats(), (std::vector<float>{4, 6}));
}

TEST(Interpreter, HugeArenaIsAnErrorNotACrash) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {1});
  int y = f.tensor({1});
  f.op(OpCode::Silu, {x}, {y});
  f.output("y", y);
  f.fn().arena_size = int64_t(1) << 62; // valid in the schema, not in memory
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  // Refused before anything is allocated (checkHostResources)...
  auto refused = ThreadedRunner::create(*plan, 0);
  ASSERT_FALSE(refused);
  EXPECT_NE(
      refused.status().message().find("arenas 4611686018427387904) x 1 ranks"),
      std::string::npos)
      << refused.status().message();
  // ...and with the check lifted, the allocation fails as an error.
  RunnerOptions unchecked;
  unchecked.memoryLimitBytes = std::numeric_limits<int64_t>::max();
  auto runner = ThreadedRunner::create(*plan, unchecked);
  ASSERT_TRUE(runner) << runner.status().message();
  auto out = (*runner)->run("main", {{{"x", f32({1}, {1})}}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("out of memory"), std::string::npos)
      << out.status().message();
}

namespace {
// A LLaMA attention block on `tp` ranks with a KV cache: hidden 8, 4 query
// heads, 2 KV heads, head_dim 2. q/k/v are column-parallel (KV heads
// replicated when tp > 2 via shards = 2), o_proj row-parallel + all_reduce.
PlanBuilder attentionBlockPlan(int tp) {
  const int hidden = 8, heads = 4, kvHeads = 2, d = 2, maxSeq = 4;
  int kvShards = std::min(tp, kvHeads);
  int hqL = heads / tp, kvL = kvHeads / kvShards;
  PlanBuilder pb(tp);
  pb.group("tp", tp);
  int wq = pb.param("layers.0.self_attn.q_proj.weight", {heads * d, hidden},
                    {hqL * d, hidden}, DType::F32, 0, 0);
  int wk = pb.param("layers.0.self_attn.k_proj.weight", {kvHeads * d, hidden},
                    {kvL * d, hidden}, DType::F32, 0, 0, kvShards);
  int wv = pb.param("layers.0.self_attn.v_proj.weight", {kvHeads * d, hidden},
                    {kvL * d, hidden}, DType::F32, 0, 0, kvShards);
  int wo = pb.param("layers.0.self_attn.o_proj.weight", {hidden, heads * d},
                    {hidden, hqL * d}, DType::F32, 1, 0);
  int ks = pb.stateSlot("layers.0.k_cache", {1, maxSeq, kvL, d});
  int vs = pb.stateSlot("layers.0.v_cache", {1, maxSeq, kvL, d});
  for (auto [name, s] : {std::pair{"prefill", 2}, std::pair{"decode", 1}}) {
    FnBuilder f = pb.function(name);
    const plan::PlanT &p = pb.plan();
    int x = f.input("x", {1, s, hidden});
    int pos = f.input("pos", {1}, DType::I64);
    int positions = f.input("positions", {1, s}, DType::I32);
    int q = f.tensor({1, s, hqL * d}), k = f.tensor({1, s, kvL * d});
    int v = f.tensor({1, s, kvL * d});
    f.op(OpCode::Matmul, {x, f.param(wq, p)}, {q}).transpose_b = true;
    f.op(OpCode::Matmul, {x, f.param(wk, p)}, {k}).transpose_b = true;
    f.op(OpCode::Matmul, {x, f.param(wv, p)}, {v}).transpose_b = true;
    int q4 = f.tensor({1, s, hqL, d}), k4 = f.tensor({1, s, kvL, d});
    int v4 = f.tensor({1, s, kvL, d});
    f.op(OpCode::Reshape, {q}, {q4});
    f.op(OpCode::Reshape, {k}, {k4});
    f.op(OpCode::Reshape, {v}, {v4});
    int qr = f.tensor({1, s, hqL, d}), kr = f.tensor({1, s, kvL, d});
    f.op(OpCode::Rope, {q4, positions}, {qr}).theta = 10000.0;
    f.op(OpCode::Rope, {k4, positions}, {kr}).theta = 10000.0;
    int kc = f.state(ks, p), vc = f.state(vs, p);
    int o = f.tensor({1, s, hqL, d});
    int kc2 = f.state(ks, p), vc2 = f.state(vs, p);
    plan::OpT &att =
        f.op(OpCode::Attention, {qr, kr, v4, kc, vc, pos}, {o, kc2, vc2});
    att.causal = true;
    att.num_heads = hqL;
    att.num_kv_heads = kvL;
    att.head_dim = d;
    for (auto [slot, in, out] : {std::tuple{ks, kc, kc2}, {vs, vc, vc2}}) {
      auto b = std::make_unique<plan::StateBindingT>();
      b->slot = slot;
      b->input = in;
      b->output = out;
      f.fn().state.push_back(std::move(b));
    }
    int o2 = f.tensor({1, s, hqL * d}), pr = f.tensor({1, s, hidden});
    int y = f.tensor({1, s, hidden});
    f.op(OpCode::Reshape, {o}, {o2});
    f.op(OpCode::Matmul, {o2, f.param(wo, p)}, {pr}).transpose_b = true;
    f.op(OpCode::AllReduce, {pr}, {y}).group = 0;
    f.output("y", y);
  }
  return pb;
}
} // namespace

TEST(Interpreter, TensorParallelAttentionWithKvCacheMatchesSingleRank) {
  std::vector<float> x1, x2;
  for (int i = 0; i < 16; ++i)
    x1.push_back(std::cos(0.3f * float(i)) * 20.0f);
  for (int i = 0; i < 8; ++i)
    x2.push_back(std::sin(0.9f * float(i)) * 20.0f);
  TensorMap prefill{
      {"x", f32({1, 2, 8}, x1)},
      {"pos", HostTensor::fromInts(DType::I64, {1}, {0})},
      {"positions", HostTensor::fromInts(DType::I32, {1, 2}, {0, 1})}};
  TensorMap decode{
      {"x", f32({1, 1, 8}, x2)},
      {"pos", HostTensor::fromInts(DType::I64, {1}, {2})},
      {"positions", HostTensor::fromInts(DType::I32, {1, 1}, {2})}};
  std::vector<float> ref1, ref2;
  for (int tp : {1, 2, 4}) {
    auto runner = makeRunner(attentionBlockPlan(tp), 3);
    ASSERT_TRUE(runner);
    auto o1 = runner->run("prefill", {prefill});
    ASSERT_TRUE(o1) << o1.status().message();
    auto o2 = runner->run("decode", {decode});
    ASSERT_TRUE(o2) << o2.status().message();
    std::vector<float> y1 = (*o1)[0].at("y").toFloats();
    std::vector<float> y2 = (*o2)[0].at("y").toFloats();
    if (tp == 1) {
      ref1 = y1;
      ref2 = y2;
      float mx = 0;
      for (float v : y2)
        mx = std::max(mx, std::fabs(v));
      EXPECT_GT(mx, 1e-4f);
      continue;
    }
    for (size_t i = 0; i < ref1.size(); ++i)
      EXPECT_NEAR(y1[i], ref1[i], 1e-6f) << "tp " << tp << " prefill " << i;
    for (size_t i = 0; i < ref2.size(); ++i)
      EXPECT_NEAR(y2[i], ref2[i], 1e-6f) << "tp " << tp << " decode " << i;
  }
}

TEST(Interpreter, StateSlotsReturnedSwappedAreAssignedAtOnce) {
  // Each step adds x to slot a in place, then returns the slots swapped
  // (a <- b, b <- a'). Copying the slots back one after the other would
  // overwrite a' with b before it is read, and the update would be lost.
  PlanBuilder pb(1);
  int a = pb.stateSlot("a", {2}), b = pb.stateSlot("b", {2});
  FnBuilder f = pb.function("step");
  int x = f.input("x", {2});
  int aIn = f.state(a, pb.plan()), bIn = f.state(b, pb.plan());
  int aNew = f.state(a, pb.plan()); // written in place
  f.op(OpCode::Add, {aIn, x}, {aNew});
  for (auto [slot, in, out] : {std::tuple{a, aIn, bIn}, {b, bIn, aNew}}) {
    auto bind = std::make_unique<plan::StateBindingT>();
    bind->slot = slot;
    bind->input = in;
    bind->output = out;
    f.fn().state.push_back(std::move(bind));
  }
  for (bool strict : {false, true}) {
    auto runner = makeRunner(pb);
    ASSERT_TRUE(runner);
    runner->setStrict(strict);
    ASSERT_TRUE(runner->run("step", {{{"x", f32({2}, {1, 2})}}}));
    EXPECT_EQ(runner->rank(0).stateSlot(a).toFloats(),
              (std::vector<float>{0, 0}));
    EXPECT_EQ(runner->rank(0).stateSlot(b).toFloats(),
              (std::vector<float>{1, 2}));
    ASSERT_TRUE(runner->run("step", {{{"x", f32({2}, {10, 20})}}}));
    EXPECT_EQ(runner->rank(0).stateSlot(a).toFloats(),
              (std::vector<float>{1, 2}));
    EXPECT_EQ(runner->rank(0).stateSlot(b).toFloats(),
              (std::vector<float>{10, 20}));
  }
}

TEST(Interpreter, AnOutputOfAStateSlotIsItsValueBeforeTheCopyBack) {
  // Each step returns the slot's entry value (the output is the slot's
  // storage) and stores silu(x) into it: the previous step's silu(x), not
  // this step's, as the IR says (braid-simplify folds the copy that would
  // otherwise hold the entry value).
  PlanBuilder pb = previousValuePlan(2);
  for (bool strict : {false, true}) {
    auto runner = makeRunner(pb);
    ASSERT_TRUE(runner);
    runner->setStrict(strict);
    auto first = runner->run("step", {{{"x", f32({2}, {1, 2})}}});
    ASSERT_TRUE(first) << first.status().message();
    EXPECT_EQ((*first)[0].at("prev").toFloats(), (std::vector<float>{0, 0}));
    auto second = runner->run("step", {{{"x", f32({2}, {3, 4})}}});
    ASSERT_TRUE(second) << second.status().message();
    std::vector<float> silu = {1 / (1 + std::exp(-1.0f)),
                               2 / (1 + std::exp(-2.0f))};
    std::vector<float> got = (*second)[0].at("prev").toFloats();
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < 2; ++i)
      EXPECT_NEAR(got[i], silu[i], 1e-6f) << i;
  }
}

// A matmul over a parameter pack gives exactly the matmuls over its pieces,
// side by side, on every rank (each pack holds that rank's slices); a
// piece set by name is seen through the pack at once.
// A matmul's epilogue (bias, GELU) is the separate add and gelu ops'
// arithmetic on the f32 result: bit for bit in f32, for both GELUs.
TEST(Interpreter, MatmulEpilogueIsTheSeparateOpsBitForBit) {
  for (bool tanh : {true, false}) {
    PlanBuilder fused = gpt2MlpPlan(DType::F32, tanh);
    // The same MLP as five ops.
    PlanBuilder pb;
    int w1 = pb.param("h.0.mlp.c_fc.weight", {64, 128}, {64, 128});
    int b1 = pb.param("h.0.mlp.c_fc.bias", {128}, {128});
    int w2 = pb.param("h.0.mlp.c_proj.weight", {128, 64}, {128, 64});
    int b2 = pb.param("h.0.mlp.c_proj.bias", {64}, {64});
    FnBuilder f = pb.function("prefill");
    int x = f.input("x", {2, 8, 64});
    int h = f.tensor({2, 8, 128}), hb = f.tensor({2, 8, 128}),
        g = f.tensor({2, 8, 128}), y = f.tensor({2, 8, 64}),
        yb = f.tensor({2, 8, 64});
    f.op(OpCode::Matmul, {x, f.param(w1, pb.plan())}, {h});
    f.op(OpCode::Add, {h, f.param(b1, pb.plan())}, {hb});
    f.op(OpCode::Gelu, {hb}, {g}).gelu_approximation =
        tanh ? plan::GeluApproximation::Tanh : plan::GeluApproximation::None;
    f.op(OpCode::Matmul, {g, f.param(w2, pb.plan())}, {y});
    f.op(OpCode::Add, {y, f.param(b2, pb.plan())}, {yb});
    f.output("y", yb);
    TensorMap in{{"x", f32({2, 8, 64}, wave(2 * 8 * 64, 0.3f))}};
    auto a = makeRunner(fused, /*seed=*/5), b = makeRunner(pb, /*seed=*/5);
    ASSERT_TRUE(a && b);
    auto outA = a->run("prefill", {in}), outB = b->run("prefill", {in});
    ASSERT_TRUE(outA) << outA.status().message();
    ASSERT_TRUE(outB) << outB.status().message();
    EXPECT_EQ((*outA)[0].at("y").bytes, (*outB)[0].at("y").bytes)
        << (tanh ? "tanh" : "erf");
  }
}

TEST(Interpreter, MatmulOverParameterPackIsTheMatmulsOverItsPieces) {
  const int tp = 2;
  PlanBuilder pb = packedProjectionPlan(tp);
  auto runner = makeRunner(pb, /*seed=*/7);
  ASSERT_TRUE(runner);
  TensorMap in{{"x", f32({2, 3, 8}, wave(2 * 3 * 8, 0.4f))}};
  const int64_t nq = 6 / tp, nk = 4 / tp, n = nq + nk;
  // y's rows, each cut into its q and k columns, must be yq's and yk's.
  auto expectSideBySide = [&](const TensorMap &out, const char *when) {
    std::vector<float> y = out.at("y").toFloats();
    std::vector<float> yq = out.at("yq").toFloats();
    std::vector<float> yk = out.at("yk").toFloats();
    ASSERT_EQ(y.size(), size_t(6 * n));
    for (int64_t row = 0; row < 6; ++row)
      for (int64_t j = 0; j < n; ++j) {
        float want =
            j < nq ? yq[size_t(row * nq + j)] : yk[size_t(row * nk + j - nq)];
        // Bit for bit: the same dot products in the same order.
        EXPECT_EQ(y[size_t(row * n + j)], want)
            << when << " row " << row << " column " << j;
      }
  };
  auto out = runner->run("prefill", {in});
  ASSERT_TRUE(out) << out.status().message();
  for (int r = 0; r < tp; ++r)
    expectSideBySide((*out)[size_t(r)], "generated weights");
  // The ranks hold different slices.
  EXPECT_NE((*out)[0].at("y").toFloats(), (*out)[1].at("y").toFloats());

  // New values for one piece, different on each rank.
  std::vector<std::vector<float>> newK;
  for (int r = 0; r < tp; ++r) {
    newK.push_back(wave(nk * 8, 1.0f + float(r)));
    ASSERT_TRUE(runner->rank(r).setParameter("k_proj.weight",
                                             f32({nk, 8}, newK.back())));
    EXPECT_EQ(runner->rank(r).parameter(1).toFloats(), newK.back());
  }
  auto after = runner->run("prefill", {in});
  ASSERT_TRUE(after) << after.status().message();
  for (int r = 0; r < tp; ++r) {
    const TensorMap &o = (*after)[size_t(r)];
    expectSideBySide(o, "after setParameter");
    // q is untouched, k is the new one.
    EXPECT_EQ(o.at("yq").toFloats(), (*out)[size_t(r)].at("yq").toFloats());
    std::vector<float> x = in.at("x").toFloats(), yk = o.at("yk").toFloats();
    for (int64_t row = 0; row < 6; ++row)
      for (int64_t j = 0; j < nk; ++j) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < 8; ++kk)
          acc += x[size_t(row * 8 + kk)] * newK[size_t(r)][size_t(j * 8 + kk)];
        EXPECT_EQ(yk[size_t(row * nk + j)], acc) << "rank " << r;
      }
  }

  // Strict mode reads the same pack.
  runner->setStrict(true, 3);
  auto strict = runner->run("prefill", {in});
  ASSERT_TRUE(strict) << strict.status().message();
  for (int r = 0; r < tp; ++r)
    EXPECT_EQ((*strict)[size_t(r)].at("y").toFloats(),
              (*after)[size_t(r)].at("y").toFloats());
}

// Packed pieces hold the weights generated for their names, as parameters
// of their own would: where a piece lives changes no value.
TEST(Interpreter, PackedPiecesHoldTheirGeneratedWeights) {
  PlanBuilder pb = packedProjectionPlan(2);
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto runner = ThreadedRunner::create(*loaded, /*seed=*/11);
  ASSERT_TRUE(runner) << runner.status().message();
  const plan::Plan &p = loaded->root();
  for (int r = 0; r < 2; ++r)
    for (unsigned i = 0; i < 2; ++i) {
      auto want = initialParameterValue(p, *p.parameters()->Get(i), r,
                                        SyntheticWeights(11));
      ASSERT_TRUE(want) << want.status().message();
      EXPECT_EQ((*runner)->rank(r).parameter(int(i)).bytes, want->bytes)
          << "rank " << r << " parameter " << i;
    }
}

// Without synthetic weights (a checkpoint run, which sets every parameter)
// parameters start unset: a step before every one is set fails naming the
// first; set to the generated values, the runner computes what a synthetic
// one does, bit for bit.
TEST(Interpreter, ParametersSetByTheCallerStartUnset) {
  PlanBuilder pb = packedProjectionPlan(2);
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  RunnerOptions o;
  o.weights.seed = 11;
  auto synthetic = ThreadedRunner::create(*loaded, o);
  o.syntheticWeights = false;
  auto unset = ThreadedRunner::create(*loaded, o);
  ASSERT_TRUE(synthetic && unset);
  TensorMap in{{"x", f32({2, 3, 8}, wave(2 * 3 * 8, 0.4f))}};
  const plan::Plan &p = loaded->root();
  unsigned n = p.parameters()->size();
  for (unsigned i = 0; i < n; ++i) {
    auto early = (*unset)->run("prefill", {in});
    ASSERT_FALSE(early);
    EXPECT_HAS(early.status().message(),
               std::to_string(n - i) + " parameter(s) never set, the first '" +
                   p.parameters()->Get(i)->name()->str() + "'");
    for (int r = 0; r < 2; ++r) {
      auto want = initialParameterValue(p, *p.parameters()->Get(i), r,
                                        SyntheticWeights(11));
      ASSERT_TRUE(want) << want.status().message();
      ASSERT_TRUE((*unset)->rank(r).setParameter(
          p.parameters()->Get(i)->name()->str(), want.take()));
    }
  }
  auto a = (*synthetic)->run("prefill", {in});
  auto b = (*unset)->run("prefill", {in});
  ASSERT_TRUE(a && b);
  for (int r = 0; r < 2; ++r)
    for (const char *name : {"y", "yq", "yk"})
      EXPECT_EQ((*a)[size_t(r)].at(name).bytes, (*b)[size_t(r)].at(name).bytes)
          << "rank " << r << " " << name;
}
