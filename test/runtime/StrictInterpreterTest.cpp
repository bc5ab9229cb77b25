//===- StrictInterpreterTest.cpp - The interpreter's strict mode ----------===//
//
// Strict mode must give the same bits as plan order for every seed on a
// correct plan, and must change the numbers (NaN or wrong values) for some
// seed when a plan misses an event or reuses a buffer too early.
//
//===----------------------------------------------------------------------===//
#include "runtime/Interpreter.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {
HostTensor f32(Shape shape, std::vector<float> v) {
  return HostTensor::fromFloats(DType::F32, std::move(shape), v);
}

/// `steps` steps of `function` on a fresh runner (the last step's outputs);
/// `seed` 0: plan order, else strict mode with that seed.
Expected<std::vector<TensorMap>>
runOnce(const PlanBuilder &pb, const std::vector<TensorMap> &inputs,
        uint64_t seed, bool checkSchedule = true,
        const std::string &function = "main", int steps = 1) {
  LoadOptions lo;
  lo.checkSchedule = checkSchedule;
  auto plan = loadPlan(pb.finish(), lo);
  if (!plan)
    return plan.status();
  auto runner = ThreadedRunner::create(*plan, /*seed=*/5);
  if (!runner)
    return runner.status();
  (*runner)->setStrict(seed != 0, seed);
  Expected<std::vector<TensorMap>> out = errorf("no step run");
  for (int i = 0; i < steps; ++i)
    out = (*runner)->run(function, inputs);
  return out;
}

/// Every output of every rank has the same bytes.
bool sameBits(const std::vector<TensorMap> &a,
              const std::vector<TensorMap> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].size() != b[r].size())
      return false;
    for (const auto &[name, t] : a[r])
      if (!b[r].count(name) || b[r].at(name).bytes != t.bytes)
        return false;
  }
  return true;
}

/// Runs seeds 1..8 strictly and compares each with plan order; returns
/// the seeds that gave different bits (a failed run counts as different).
std::vector<uint64_t>
strictSeedsThatDiffer(const PlanBuilder &pb,
                      const std::vector<TensorMap> &inputs, bool checkSchedule,
                      const std::string &function, int steps = 1) {
  auto ref = runOnce(pb, inputs, 0, checkSchedule, function, steps);
  EXPECT_TRUE(ref) << ref.status().message();
  if (!ref)
    return {0};
  std::vector<uint64_t> differ;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    auto out = runOnce(pb, inputs, seed, checkSchedule, function, steps);
    if (!out || !sameBits(*ref, *out))
      differ.push_back(seed);
    // The same seed repeats the same interleaving, also on a broken plan.
    auto again = runOnce(pb, inputs, seed, checkSchedule, function, steps);
    EXPECT_EQ(bool(out), bool(again)) << "seed " << seed;
    if (out && again) {
      EXPECT_TRUE(sameBits(*out, *again)) << "seed " << seed;
    }
  }
  return differ;
}

::testing::AssertionResult noSeedDiffers(const std::vector<uint64_t> &seeds) {
  if (seeds.empty())
    return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure() << "strict mode differs for seeds";
  for (uint64_t s : seeds)
    r << " " << s;
  return r;
}

std::vector<TensorMap> perRankX(int world, Shape shape) {
  std::vector<TensorMap> in;
  int64_t n = numElements(shape);
  for (int r = 0; r < world; ++r) {
    std::vector<float> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(std::sin(0.9f * float(i) + float(r)) * 2.0f);
    in.push_back({{"x", f32(shape, v)}});
  }
  return in;
}

// Which event a two-stream plan leaves out.
enum class Missing { None, ProducerToStart, WaitToConsumer };

/// Two ranks, two streams: a = x*x on stream 0; all_reduce_start(a) on
/// stream 1 (after event 0 from the producer); b = x+x on stream 0 overlaps
/// the collective; then y = p + b. `commWait`: the wait runs on stream 1
/// and records event 1 for the consumer; else it runs on stream 0.
PlanBuilder twoStreamPlan(Missing missing, bool commWait) {
  PlanBuilder pb(2);
  pb.group("tp", 2);
  FnBuilder f = pb.function("main");
  f.fn().num_streams = 2;
  f.fn().num_events = 2;
  f.fn().num_handles = 1;
  int x = f.input("x", {4});
  int a = f.tensor({4}), p = f.tensor({4}), b = f.tensor({4});
  int y = f.tensor({4});
  f.op(OpCode::Mul, {x, x}, {a}).record_events = {0};
  plan::OpT &start = f.op(OpCode::AllReduceStart, {a}, {p});
  start.group = 0;
  start.handle = 0;
  start.stream = 1;
  if (missing != Missing::ProducerToStart)
    start.wait_events = {0};
  f.op(OpCode::Add, {x, x}, {b});
  plan::OpT &wait = f.op(OpCode::Wait, {}, {});
  wait.handle = 0;
  plan::OpT &sum = f.op(OpCode::Add, {p, b}, {y});
  if (commWait) {
    wait.stream = 1;
    wait.record_events = {1};
    if (missing != Missing::WaitToConsumer)
      sum.wait_events = {1};
  }
  f.output("y", y);
  return pb;
}
} // namespace

TEST(StrictInterpreter, MegatronMlpIsBitIdenticalForEverySeed) {
  PlanBuilder pb = megatronMlpPlan(2, /*hidden=*/8, /*inter=*/16,
                                   /*batch=*/1, /*tokens=*/2);
  EXPECT_TRUE(noSeedDiffers(
      strictSeedsThatDiffer(pb, perRankX(1, {1, 2, 8}), true, "prefill")));
}

TEST(StrictInterpreter, TwoStreamPlanWithEventsIsBitIdenticalForEverySeed) {
  for (bool commWait : {false, true}) {
    PlanBuilder pb = twoStreamPlan(Missing::None, commWait);
    auto in = perRankX(2, {4});
    EXPECT_TRUE(
        noSeedDiffers(strictSeedsThatDiffer(pb, in, true, "main", /*steps=*/2)))
        << "wait on stream " << commWait;
    // And plan order computes what the plan says.
    auto out = runOnce(pb, in, 0);
    ASSERT_TRUE(out) << out.status().message();
    std::vector<float> x0 = in[0].at("x").toFloats();
    std::vector<float> x1 = in[1].at("x").toFloats();
    for (int r = 0; r < 2; ++r) {
      std::vector<float> y = (*out)[size_t(r)].at("y").toFloats();
      std::vector<float> xr = in[size_t(r)].at("x").toFloats();
      for (size_t i = 0; i < 4; ++i)
        EXPECT_EQ(y[i], (x0[i] * x0[i] + x1[i] * x1[i]) + (xr[i] + xr[i]));
    }
  }
}

TEST(StrictInterpreter, MissingEventBeforeAsyncStartChangesTheNumbers) {
  // Without event 0 the collective may be issued before its input exists.
  // With the wait on stream 0 the input is complete by the wait, so only
  // the rule that the input must not change between start and collective
  // catches it; with the wait on stream 1 the collective may run first.
  for (bool commWait : {false, true}) {
    PlanBuilder pb = twoStreamPlan(Missing::ProducerToStart, commWait);
    EXPECT_FALSE(strictSeedsThatDiffer(pb, perRankX(2, {4}),
                                       /*checkSchedule=*/false, "main")
                     .empty())
        << "wait on stream " << commWait;
  }
}

TEST(StrictInterpreter, MissingEventAfterWaitReadsAPoisonedPayload) {
  PlanBuilder pb = twoStreamPlan(Missing::WaitToConsumer, /*commWait=*/true);
  auto in = perRankX(2, {4});
  EXPECT_FALSE(
      strictSeedsThatDiffer(pb, in, /*checkSchedule=*/false, "main").empty());
  // The early read sees NaN, not a stale value.
  bool sawNan = false;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    auto out = runOnce(pb, in, seed, false);
    ASSERT_TRUE(out) << out.status().message();
    for (float v : (*out)[0].at("y").toFloats())
      sawNan |= std::isnan(v);
  }
  EXPECT_TRUE(sawNan);
}

namespace {
/// One rank, two streams: A = x*x (event 0); stream 1 reads A into
/// B = A+A (event 1); C = x+x then reuses A's buffer on stream 0, which is
/// safe only after event 1; D = B*C.
PlanBuilder reusePlan(bool reuseWaitsForReader) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  f.fn().num_streams = 2;
  f.fn().num_events = 2;
  int x = f.input("x", {4});
  int a = f.tensor({4}), b = f.tensor({4}), c = f.tensor({4});
  int d = f.tensor({4});
  f.fn().tensors[size_t(c)]->buffer_offset =
      f.fn().tensors[size_t(a)]->buffer_offset;
  f.op(OpCode::Mul, {x, x}, {a}).record_events = {0};
  plan::OpT &readA = f.op(OpCode::Add, {a, a}, {b});
  readA.stream = 1;
  readA.wait_events = {0};
  readA.record_events = {1};
  plan::OpT &reuse = f.op(OpCode::Add, {x, x}, {c});
  if (reuseWaitsForReader)
    reuse.wait_events = {1};
  f.op(OpCode::Mul, {b, c}, {d}).wait_events = {1};
  f.output("d", d);
  return pb;
}
} // namespace

TEST(StrictInterpreter, ArenaReuseOrderedByEventsIsBitIdentical) {
  // Dead buffers are poisoned: that must not touch a buffer that a later
  // tensor reuses once the event orders it (what compiled plans do).
  auto in = perRankX(1, {4});
  EXPECT_TRUE(noSeedDiffers(
      strictSeedsThatDiffer(reusePlan(true), in, true, "main", 2)));
}

TEST(StrictInterpreter, ArenaReuseBeforeTheOtherStreamsReadChangesNumbers) {
  auto in = perRankX(1, {4});
  EXPECT_FALSE(strictSeedsThatDiffer(reusePlan(false), in,
                                     /*checkSchedule=*/false, "main")
                   .empty());
}

TEST(StrictInterpreter, InPlaceBuffersAreNotPoisoned) {
  // An op whose result takes its dying operand's buffer, and an async
  // all_reduce whose payload is its operand's buffer (NCCL allows both;
  // the memory planner does not produce them, hence no schedule check).
  PlanBuilder pb(2);
  pb.group("tp", 2);
  FnBuilder f = pb.function("main");
  f.fn().num_streams = 2;
  f.fn().num_events = 1;
  f.fn().num_handles = 1;
  int x = f.input("x", {4});
  int a = f.tensor({4}), b = f.tensor({4}), p = f.tensor({4});
  int c = f.tensor({4}), y = f.tensor({4});
  auto &ts = f.fn().tensors;
  ts[size_t(b)]->buffer_offset = ts[size_t(a)]->buffer_offset;
  ts[size_t(p)]->buffer_offset = ts[size_t(a)]->buffer_offset;
  f.op(OpCode::Mul, {x, x}, {a});
  f.op(OpCode::Add, {a, x}, {b}).record_events = {0};
  plan::OpT &start = f.op(OpCode::AllReduceStart, {b}, {p});
  start.group = 0;
  start.handle = 0;
  start.stream = 1;
  start.wait_events = {0};
  f.op(OpCode::Add, {x, x}, {c});
  f.op(OpCode::Wait, {}, {}).handle = 0;
  f.op(OpCode::Add, {p, c}, {y});
  f.output("y", y);
  EXPECT_TRUE(
      noSeedDiffers(strictSeedsThatDiffer(pb, perRankX(2, {4}),
                                          /*checkSchedule=*/false, "main", 2)));
}

TEST(StrictInterpreter, CollectivesOfOneStreamRunInIssueOrder) {
  // Two all_reduces issued on stream 1, waited on streams 0 and 2 in either
  // order: each rank may reach the waits in a different order, but NCCL
  // runs the two in issue order, and so must strict mode (else the ranks
  // would pair one rank's first all_reduce with another's second).
  PlanBuilder pb(2);
  pb.group("tp", 2);
  FnBuilder f = pb.function("main");
  f.fn().num_streams = 3;
  f.fn().num_events = 3;
  f.fn().num_handles = 2;
  int x = f.input("x", {4});
  int a0 = f.tensor({4}), a1 = f.tensor({4}), p0 = f.tensor({4});
  int p1 = f.tensor({4}), busy = f.tensor({4});
  int y0 = f.tensor({4}), y1 = f.tensor({4});
  f.op(OpCode::Mul, {x, x}, {a0}).record_events = {0};
  f.op(OpCode::Add, {x, x}, {a1}).record_events = {1};
  for (int h : {0, 1}) {
    plan::OpT &s = f.op(OpCode::AllReduceStart, {h ? a1 : a0}, {h ? p1 : p0});
    s.group = 0;
    s.handle = h;
    s.stream = 1;
    s.wait_events = {h};
  }
  f.op(OpCode::Mul, {x, x}, {busy}).stream = 2; // delays stream 2's wait
  plan::OpT &w1 = f.op(OpCode::Wait, {}, {});
  w1.handle = 1;
  w1.stream = 2;
  w1.record_events = {2};
  f.op(OpCode::Wait, {}, {}).handle = 0;
  f.op(OpCode::Add, {p0, p0}, {y0});
  f.op(OpCode::Add, {p1, p1}, {y1}).wait_events = {2};
  f.output("y0", y0);
  f.output("y1", y1);
  EXPECT_TRUE(noSeedDiffers(
      strictSeedsThatDiffer(pb, perRankX(2, {4}), true, "main", 2)));
}

TEST(StrictInterpreter, ReceiveBeforeSendOnBothRanksDoesNotDeadlock) {
  // Both ranks start a receive, then a send, and wait for the receive
  // first: a receive completes this rank's started sends before it blocks.
  for (bool recvWaitFirst : {false, true}) {
    PlanBuilder pb(2);
    pb.group("pp", 2);
    for (int r = 0; r < 2; ++r) {
      FnBuilder f = pb.function("stage" + std::to_string(r));
      f.fn().num_handles = 2;
      int x = f.input("x", {2});
      int y = f.tensor({2});
      plan::OpT &rs = f.op(OpCode::RecvStart, {}, {y});
      rs.group = 0;
      rs.peer = 1 - r;
      rs.handle = 0;
      plan::OpT &ss = f.op(OpCode::SendStart, {x}, {});
      ss.group = 0;
      ss.peer = 1 - r;
      ss.handle = 1;
      f.op(OpCode::Wait, {}, {}).handle = recvWaitFirst ? 0 : 1;
      f.op(OpCode::Wait, {}, {}).handle = recvWaitFirst ? 1 : 0;
      f.output("y", y);
    }
    auto plan = loadPlan(pb.finish());
    ASSERT_TRUE(plan) << plan.status().message();
    auto runner = ThreadedRunner::create(*plan);
    ASSERT_TRUE(runner) << runner.status().message();
    (*runner)->setStrict(true, 3);
    auto out = (*runner)->runPerRank(
        {"stage0", "stage1"},
        {{{"x", f32({2}, {1, 2})}}, {{"x", f32({2}, {3, 4})}}});
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].at("y").toFloats(), (std::vector<float>{3, 4}));
    EXPECT_EQ((*out)[1].at("y").toFloats(), (std::vector<float>{1, 2}));
  }
}

TEST(StrictInterpreter, ProfileHasEveryOp) {
  PlanBuilder pb = twoStreamPlan(Missing::None, /*commWait=*/true);
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  auto runner = ThreadedRunner::create(*plan);
  ASSERT_TRUE(runner) << runner.status().message();
  (*runner)->setStrict(true, 2);
  (*runner)->rank(0).setProfiling(true);
  ASSERT_TRUE((*runner)->run("main", perRankX(2, {4})));
  EXPECT_EQ((*runner)->rank(0).lastProfile().size(), 5u);
}

// The loader runs the schedule check without MLIR: the same broken plans
// are refused by default, naming the unordered pair.
TEST(PlanLoader, RefusesUnorderedTwoStreamPlans) {
  auto refused = [](const PlanBuilder &pb) {
    auto plan = loadPlan(pb.finish());
    return plan ? std::string() : plan.status().message();
  };
  EXPECT_EQ(refused(twoStreamPlan(Missing::None, false)), "");
  EXPECT_EQ(refused(twoStreamPlan(Missing::None, true)), "");
  EXPECT_EQ(refused(reusePlan(true)), "");
  std::string m = refused(twoStreamPlan(Missing::ProducerToStart, false));
  EXPECT_NE(m.find("op 0 (mul, stream 0) and op 1 (all_reduce_start, stream "
                   "1) are not ordered"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("bytes [64, 80) of the arena"), std::string::npos) << m;
  m = refused(twoStreamPlan(Missing::WaitToConsumer, true));
  EXPECT_NE(m.find("op 3 (wait, stream 1) and op 4 (add, stream 0)"),
            std::string::npos)
      << m;
  m = refused(reusePlan(false));
  EXPECT_NE(m.find("op 1 (add, stream 1) and op 2 (add, stream 0)"),
            std::string::npos)
      << m;
  // With the IR locations a plan carries, the refusal names them too.
  PlanBuilder located = twoStreamPlan(Missing::ProducerToStart, false);
  int line = 10;
  for (auto &op : located.plan().functions[0]->ops)
    op->loc = "loc(\"model.mlir\":" + std::to_string(line++) + ":5)";
  m = refused(located);
  EXPECT_NE(m.find("op 0 (mul, stream 0, at loc(\"model.mlir\":10:5)) and "
                   "op 1 (all_reduce_start, stream 1, at "
                   "loc(\"model.mlir\":11:5)) are not ordered"),
            std::string::npos)
      << m;
}

// An op that writes an async collective's operand bytes between its start
// and its wait: no event can order it, and the refusal says the collective
// is in flight rather than that the two are unordered.
TEST(PlanLoader, RefusesAWriteToACollectivesBytesWhileItIsInFlight) {
  PlanBuilder pb = twoStreamPlan(Missing::None, false);
  plan::FunctionT &fn = *pb.plan().functions[0];
  // Tensors: x 0, a 1 (the start's operand), p 2, b 3 (the add's result).
  fn.tensors[3]->buffer_offset = fn.tensors[1]->buffer_offset;
  auto plan = loadPlan(pb.finish());
  ASSERT_FALSE(plan);
  const std::string m = plan.status().message();
  EXPECT_NE(m.find("op 2 (add, stream 0) runs while op 1 (all_reduce_start, "
                   "stream 1) is in flight (until its wait): both access "
                   "bytes"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("no event can order them"), std::string::npos) << m;
}

TEST(PlanLoader, RefusesConcurrentCollectivesOfTwoCommunicators) {
  // all_reduce of group 0 on stream 0 and on stream 1, nothing between.
  auto build = [](bool ordered) {
    PlanBuilder pb(2);
    pb.group("tp", 2);
    FnBuilder f = pb.function("main");
    f.fn().num_streams = 2;
    f.fn().num_events = 1;
    int x = f.input("x", {4});
    int a = f.tensor({4}), b = f.tensor({4});
    plan::OpT &first = f.op(OpCode::AllReduce, {x}, {a});
    first.group = 0;
    first.record_events = {0};
    plan::OpT &second = f.op(OpCode::AllReduce, {x}, {b});
    second.group = 0;
    second.stream = 1;
    if (ordered)
      second.wait_events = {0};
    f.output("a", a);
    f.output("b", b);
    return pb;
  };
  EXPECT_TRUE(loadPlan(build(true).finish()));
  auto bad = loadPlan(build(false).finish());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find(
                "op 0 (all_reduce, stream 0) and op 1 (all_reduce, stream 1) "
                "are not ordered by streams, events or waits: collectives of "
                "two communicators may run concurrently and deadlock"),
            std::string::npos)
      << bad.status().message();
}
