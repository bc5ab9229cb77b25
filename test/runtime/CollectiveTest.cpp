//===- CollectiveTest.cpp - Collectives over 2-4 thread ranks -------------===//
//
// Each case is a one-op plan run on every rank; inputs depend on the rank
// and the expected outputs are worked out by hand.
//
//===----------------------------------------------------------------------===//
#include "runtime/CommMatching.h"
#include "runtime/Interpreter.h"
#include "runtime/P2PGroups.h"
#include "test/runtime/Expect.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {
std::vector<std::vector<float>>
runCollective(PlanBuilder &pb, const std::vector<std::vector<float>> &perRank,
              const Shape &inShape) {
  auto plan = loadPlan(pb.finish());
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan)
    return {};
  auto runner = ThreadedRunner::create(*plan);
  EXPECT_TRUE(runner) << runner.status().message();
  std::vector<TensorMap> inputs;
  for (const auto &v : perRank)
    inputs.push_back({{"x", HostTensor::fromFloats(DType::F32, inShape, v)}});
  auto out = (*runner)->run("main", inputs);
  EXPECT_TRUE(out) << out.status().message();
  std::vector<std::vector<float>> result;
  if (out)
    for (auto &m : *out)
      result.push_back(m.at("y").toFloats());
  return result;
}

// One-op plan: y = op(x) on group 0 of size `world`.
PlanBuilder onePlan(int world, OpCode code, Shape in, Shape out,
                    void (*attrs)(plan::OpT &) = nullptr) {
  PlanBuilder pb(world);
  pb.group("tp", world);
  FnBuilder f = pb.function("main");
  int x = f.input("x", in);
  int y = f.tensor(out);
  plan::OpT &op = f.op(code, {x}, {y});
  op.group = 0;
  if (attrs)
    attrs(op);
  f.output("y", y);
  return pb;
}
} // namespace

TEST(Collectives, AllReduceKinds) {
  // Rank r holds [r+1, 10(r+1)] over 3 ranks.
  std::vector<std::vector<float>> in{{1, 10}, {2, 20}, {3, 30}};
  struct Case {
    plan::ReduceKind kind;
    std::vector<float> want;
  } cases[] = {{plan::ReduceKind::Sum, {6, 60}},
               {plan::ReduceKind::Max, {3, 30}},
               {plan::ReduceKind::Min, {1, 10}},
               {plan::ReduceKind::Prod, {6, 6000}}};
  for (const Case &c : cases) {
    PlanBuilder pb = onePlan(3, OpCode::AllReduce, {2}, {2});
    pb.plan().functions[0]->ops[0]->reduce_kind = c.kind;
    auto out = runCollective(pb, in, {2});
    ASSERT_EQ(out.size(), 3u);
    for (auto &o : out)
      EXPECT_EQ(o, c.want) << "kind " << int(c.kind);
  }
}

TEST(Collectives, AllReduceBitIdenticalOnEveryRank) {
  // Values whose fp32 sum depends on the order: every rank must still agree.
  std::vector<std::vector<float>> in{
      {1e8f, 1}, {1, -1e8f}, {-1e8f, 1}, {1, 1e8f}};
  PlanBuilder pb = onePlan(4, OpCode::AllReduce, {2}, {2});
  auto out = runCollective(pb, in, {2});
  ASSERT_EQ(out.size(), 4u);
  // Rank order in fp32 (1e8 + 1 rounds to 1e8):
  //   element 0: ((1e8 + 1) - 1e8) + 1 = 1
  //   element 1: ((1 - 1e8) + 1) + 1e8 = 0
  EXPECT_EQ(out[0], (std::vector<float>{1, 0}));
  for (auto &o : out)
    EXPECT_EQ(o, out[0]);
}

TEST(Collectives, AllGatherAlongDim1) {
  // [1, 2] per rank, gathered along dim 1 over 2 ranks -> [1, 4].
  PlanBuilder pb = onePlan(2, OpCode::AllGather, {1, 2}, {1, 4},
                           [](plan::OpT &op) { op.dim = 1; });
  auto out = runCollective(pb, {{1, 2}, {3, 4}}, {1, 2});
  ASSERT_EQ(out.size(), 2u);
  for (auto &o : out)
    EXPECT_EQ(o, (std::vector<float>{1, 2, 3, 4}));
}

TEST(Collectives, AllGatherAlongDim0ThreeRanks) {
  PlanBuilder pb = onePlan(3, OpCode::AllGather, {1, 2}, {3, 2},
                           [](plan::OpT &op) { op.dim = 0; });
  auto out = runCollective(pb, {{1, 2}, {3, 4}, {5, 6}}, {1, 2});
  ASSERT_EQ(out.size(), 3u);
  for (auto &o : out)
    EXPECT_EQ(o, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Collectives, ReduceScatterSum) {
  // [2, 2] per rank; the sum is scattered by rows.
  PlanBuilder pb = onePlan(2, OpCode::ReduceScatter, {2, 2}, {1, 2},
                           [](plan::OpT &op) { op.dim = 0; });
  auto out = runCollective(pb, {{1, 2, 3, 4}, {10, 20, 30, 40}}, {2, 2});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::vector<float>{11, 22}));
  EXPECT_EQ(out[1], (std::vector<float>{33, 44}));
}

TEST(Collectives, AllToAllSplitConcat) {
  // Doc example: rank0 [a0 a1], rank1 [b0 b1] -> rank0 [a0 b0], rank1
  // [a1 b1]; here split along dim 1, concatenate along dim 0.
  PlanBuilder pb =
      onePlan(2, OpCode::AllToAll, {1, 4}, {2, 2}, [](plan::OpT &op) {
        op.split_dim = 1;
        op.concat_dim = 0;
      });
  auto out = runCollective(pb, {{1, 2, 3, 4}, {5, 6, 7, 8}}, {1, 4});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::vector<float>{1, 2, 5, 6}));
  EXPECT_EQ(out[1], (std::vector<float>{3, 4, 7, 8}));
}

TEST(Collectives, AllToAllFourRanks) {
  PlanBuilder pb = onePlan(4, OpCode::AllToAll, {4}, {4}, [](plan::OpT &op) {
    op.split_dim = 0;
    op.concat_dim = 0;
  });
  // Rank r holds [10r, 10r+1, 10r+2, 10r+3]; rank j gets element j of each.
  auto out = runCollective(
      pb, {{0, 1, 2, 3}, {10, 11, 12, 13}, {20, 21, 22, 23}, {30, 31, 32, 33}},
      {4});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[2], (std::vector<float>{2, 12, 22, 32}));
  EXPECT_EQ(out[3], (std::vector<float>{3, 13, 23, 33}));
}

TEST(Collectives, BroadcastFromRoot) {
  PlanBuilder pb = onePlan(3, OpCode::Broadcast, {2}, {2},
                           [](plan::OpT &op) { op.root = 2; });
  auto out = runCollective(pb, {{1, 1}, {2, 2}, {7, 8}}, {2});
  ASSERT_EQ(out.size(), 3u);
  for (auto &o : out)
    EXPECT_EQ(o, (std::vector<float>{7, 8}));
}

TEST(Collectives, AsyncAllReduceWithComputeInBetween) {
  // h = all_reduce_start(x); z = x * x (overlapped); y = wait(h) + z.
  PlanBuilder pb(2);
  pb.group("tp", 2);
  FnBuilder f = pb.function("main");
  f.fn().num_handles = 1;
  int x = f.input("x", {2});
  int r = f.tensor({2}), z = f.tensor({2}), y = f.tensor({2});
  plan::OpT &start = f.op(OpCode::AllReduceStart, {x}, {r});
  start.group = 0;
  start.handle = 0;
  f.op(OpCode::Mul, {x, x}, {z});
  f.op(OpCode::Wait, {}, {}).handle = 0;
  f.op(OpCode::Add, {r, z}, {y});
  f.output("y", y);
  auto out = runCollective(pb, {{1, 2}, {3, 4}}, {2});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::vector<float>{4 + 1, 6 + 4}));
  EXPECT_EQ(out[1], (std::vector<float>{4 + 9, 6 + 16}));
}

namespace {
/// A send or receive (sync or start) of `f` to or from `peer` of group
/// `group`.
plan::OpT &p2pOp(FnBuilder &f, OpCode code, std::vector<int> operands,
                 std::vector<int> results, int peer, int group = 0) {
  plan::OpT &o = f.op(code, std::move(operands), std::move(results));
  o.group = group;
  o.peer = peer;
  return o;
}

// Rank 0 runs "stage0", rank 1 runs "stage1" (pipeline stages).
Expected<std::vector<TensorMap>> runStages(PlanBuilder &pb,
                                           std::vector<TensorMap> inputs) {
  auto plan = loadPlan(pb.finish());
  if (!plan)
    return plan.status();
  auto runner = ThreadedRunner::create(*plan);
  if (!runner)
    return runner.status();
  return (*runner)->runPerRank({"stage0", "stage1"}, inputs);
}
} // namespace

TEST(Collectives, SendRecv) {
  PlanBuilder pb = sendRecvStages(3);
  auto out = runStages(
      pb, {{{"x", HostTensor::fromFloats(DType::F32, {3}, {1, 2, 3})}},
           {{"x", HostTensor::fromFloats(DType::F32, {3}, {0, 0, 0})}}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[1].at("y").toFloats(), (std::vector<float>{1, 2, 3}));
}

TEST(Collectives, AsyncRecvBeforeSendOnBothRanksDoesNotDeadlock) {
  // Both ranks start their receive before their send: the exchange must
  // complete because the receive finishes at its wait.
  PlanBuilder pb = exchangeStages(/*recvFirst=*/true, /*opBetween=*/false,
                                  /*async=*/true);
  auto out =
      runStages(pb, {{{"x", HostTensor::fromFloats(DType::F32, {2}, {1, 2})}},
                     {{"x", HostTensor::fromFloats(DType::F32, {2}, {3, 4})}}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].at("y").toFloats(), (std::vector<float>{3, 4}));
  EXPECT_EQ((*out)[1].at("y").toFloats(), (std::vector<float>{1, 2}));
}

// Point-to-point semantics shared with the CUDA executor (P2PGroups.h), in
// the two tests below: each rank sends, then receives (exchangeStages).
// Adjacent, the two form a group (NCCL's ncclGroupStart/End) and the
// exchange completes; with an op between them each is a lone blocking
// call, which deadlocks under NCCL, and the interpreter ends it at the
// timeout instead of completing it.
Expected<std::vector<TensorMap>> runExchange(PlanBuilder &pb, bool strict,
                                             int timeoutMs,
                                             bool checkCommunication = true) {
  auto plan = loadPlan(pb.finish());
  if (!plan)
    return plan.status();
  RunnerOptions o;
  o.collectiveTimeout = std::chrono::milliseconds(timeoutMs);
  o.checkCommunication = checkCommunication;
  auto runner = ThreadedRunner::create(*plan, o);
  if (!runner)
    return runner.status();
  if (strict)
    (*runner)->setStrict(true, 5);
  return (*runner)->runPerRank(
      {"stage0", "stage1"},
      {{{"x", HostTensor::fromFloats(DType::F32, {2}, {1, 2})}},
       {{"x", HostTensor::fromFloats(DType::F32, {2}, {3, 4})}}});
}

/// Stages the check before the step refuses: each must fail with `error`
/// at once, well before the collective timeout (60 s).
struct RefusedCase {
  const char *what;
  PlanBuilder pb;
  const char *error;
};
void expectRefusedBeforeTheStep(std::vector<RefusedCase> &cases) {
  for (RefusedCase &c : cases) {
    auto start = std::chrono::steady_clock::now();
    auto out = runExchange(c.pb, /*strict=*/false, 60000);
    ASSERT_FALSE(out) << c.what;
    EXPECT_NE(out.status().message().find(c.error), std::string::npos)
        << c.what << ": " << out.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(20))
        << c.what;
  }
}

TEST(Collectives, AdjacentSendAndRecvOnBothRanksRunAsAGroup) {
  for (bool strict : {false, true}) {
    PlanBuilder pb = exchangeStages(/*recvFirst=*/false, /*opBetween=*/false);
    auto out = runExchange(pb, strict, 60000);
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].at("y").toFloats(), (std::vector<float>{3, 4}));
    EXPECT_EQ((*out)[1].at("y").toFloats(), (std::vector<float>{1, 2}));
  }
}

TEST(Collectives, LoneSendThenRecvOnBothRanksDeadlocksAsUnderNccl) {
  // Refused before the step (CommMatching.h), naming the deadlock.
  PlanBuilder refused = exchangeStages(/*recvFirst=*/false, /*opBetween=*/true);
  auto early = runExchange(refused, /*strict=*/false, 60000);
  ASSERT_FALSE(early);
  EXPECT_NE(early.status().message().find(
                "world rank 0 (function 'stage0', op 0, send) never "
                "completes: its partner, world rank 1 (function 'stage1', op "
                "2, recv), is issued only after world rank 1 (function "
                "'stage1', op 0, send) on the same communicator (group 'pp', "
                "stream 0)"),
            std::string::npos)
      << early.status().message();
  // Run anyway, the interpreter ends it at the timeout.
  for (bool strict : {false, true}) {
    PlanBuilder pb = exchangeStages(/*recvFirst=*/false, /*opBetween=*/true);
    auto start = std::chrono::steady_clock::now();
    auto out = runExchange(pb, strict, 300, /*checkCommunication=*/false);
    ASSERT_FALSE(out) << (strict ? "strict" : "plain");
    EXPECT_NE(out.status().message().find("no matching receive"),
              std::string::npos)
        << out.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(20));
  }
}

// The same exchange with starts (send_start, recv_start, then both waits):
// adjacent, a group that completes; with an op between them, lone posts on
// one channel (communicator and stream), each waiting for the channel's
// earlier ops as under NCCL, where the receive queues behind the send.
// Run anyway, strict mode, which models the channel, ends it at the
// timeout; the plain interpreter completes it (it does not model streams).
// The check before the step refuses it.
TEST(Collectives, LoneSendStartThenRecvStartDeadlocksInStrictMode) {
  for (bool opBetween : {false, true}) {
    PlanBuilder pb = exchangeStages(/*recvFirst=*/false, opBetween,
                                    /*async=*/true);
    auto start = std::chrono::steady_clock::now();
    auto out = runExchange(pb, /*strict=*/true, 300,
                           /*checkCommunication=*/!opBetween);
    if (!opBetween) {
      ASSERT_TRUE(out) << out.status().message();
      EXPECT_EQ((*out)[0].at("y").toFloats(), (std::vector<float>{3, 4}));
      EXPECT_EQ((*out)[1].at("y").toFloats(), (std::vector<float>{1, 2}));
      continue;
    }
    ASSERT_FALSE(out) << "a lone exchange on one channel completed";
    EXPECT_NE(out.status().message().find("no matching receive"),
              std::string::npos)
        << out.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(20));
    PlanBuilder plain = exchangeStages(/*recvFirst=*/false, opBetween,
                                       /*async=*/true);
    EXPECT_TRUE(runExchange(plain, /*strict=*/false, 60000,
                            /*checkCommunication=*/false));
    // The check refuses it in either mode: NCCL may deadlock on it.
    PlanBuilder checked = exchangeStages(/*recvFirst=*/false, opBetween,
                                         /*async=*/true);
    auto refused = runExchange(checked, /*strict=*/false, 60000);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.status().message().find("this exchange deadlocks"),
              std::string::npos)
        << refused.status().message();
  }
}

// Groups that mix sync ops and starts, and the channel's order across the
// sends of one group: each completes (as under NCCL) in plain and strict
// mode. (A start left in flight behind a collective of another group is
// refused by the loader's schedule check: NCCL could deadlock on it.)
TEST(Collectives, MixedGroupsAndTheirOrder) {
  auto p2p = [](FnBuilder &f, OpCode code, std::vector<int> operands,
                std::vector<int> results, int peer, int handle = -1) {
    plan::OpT &o =
        p2pOp(f, code, std::move(operands), std::move(results), peer);
    if (handle >= 0)
      o.handle = handle;
  };
  for (bool strict : {false, true}) {
    // Both ranks: recv, then send_start, adjacent: one group.
    PlanBuilder mixed(2);
    mixed.group("pp", 2);
    for (int r = 0; r < 2; ++r) {
      FnBuilder f = mixed.function("stage" + std::to_string(r));
      f.fn().num_handles = 1;
      int x = f.input("x", {2}), y = f.tensor({2});
      p2p(f, OpCode::Recv, {}, {y}, 1 - r);
      p2p(f, OpCode::SendStart, {x}, {}, 1 - r, 0);
      f.op(OpCode::Wait, {}, {}).handle = 0;
      f.output("y", y);
    }
    auto out = runExchange(mixed, strict, 20000);
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].at("y").toFloats(), (std::vector<float>{3, 4}));
    EXPECT_EQ((*out)[1].at("y").toFloats(), (std::vector<float>{1, 2}));

    // Rank 0: send_start x, send 2x (one group); rank 1 receives them in
    // that order.
    PlanBuilder order(2);
    order.group("pp", 2);
    {
      FnBuilder f = order.function("stage0");
      f.fn().num_handles = 1;
      int x = f.input("x", {2}), z = f.tensor({2});
      f.op(OpCode::Add, {x, x}, {z});
      p2p(f, OpCode::SendStart, {x}, {}, 1, 0);
      p2p(f, OpCode::Send, {z}, {}, 1);
      f.op(OpCode::Wait, {}, {}).handle = 0;
      f.output("z", z);
    }
    {
      FnBuilder f = order.function("stage1");
      f.input("x", {2});
      int a = f.tensor({2}), b = f.tensor({2});
      p2p(f, OpCode::Recv, {}, {a}, 0);
      p2p(f, OpCode::Recv, {}, {b}, 0);
      f.output("a", a);
      f.output("b", b);
    }
    out = runExchange(order, strict, 20000);
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[1].at("a").toFloats(), (std::vector<float>{1, 2}));
    EXPECT_EQ((*out)[1].at("b").toFloats(), (std::vector<float>{2, 4}));
  }
}

// A send and its receive on different streams use different NCCL
// communicators, which never match: the interpreter's channels are per
// stream too.
TEST(Collectives, SendAndRecvOnDifferentStreamsNeverMatch) {
  PlanBuilder pb = sendRecvStages(2, /*recvStream=*/1);
  auto out = runExchange(pb, false, 60000);
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find(
                "world rank 0 (function 'stage0', op 0, send) sends to world "
                "rank 1 (rank 1 of 'pp') on stream 0, which never receives "
                "it"),
            std::string::npos)
      << out.status().message();
}

/// checkCommunicationMatching refuses world rank r running function
/// `functionOfRank[r]` of `p` with an error that holds `text`.
void expectMatchingRefused(const plan::Plan &p,
                           const std::vector<int> &functionOfRank,
                           const std::string &text) {
  Status refused = checkCommunicationMatching(p, functionOfRank);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find(text), std::string::npos)
      << refused.message();
}

// Sends and receives are paired before the step (CommMatching.h): a send
// nobody receives, a receive nobody sends, or a pair of different sizes is
// an error naming both ranks at once, not a wait for the collective
// timeout (60 s here).
TEST(Collectives, UnpairedPointToPointOpsFailBeforeTheStep) {
  auto stages = [](int64_t sent, int64_t received, int sends, int recvs) {
    PlanBuilder pb(2);
    pb.group("pp", 2);
    FnBuilder s0 = pb.function("stage0");
    int x = s0.input("x", {sent});
    for (int i = 0; i < sends; ++i)
      p2pOp(s0, OpCode::Send, {x}, {}, /*peer=*/1);
    FnBuilder s1 = pb.function("stage1");
    s1.input("x", {sent});
    for (int i = 0; i < recvs; ++i) {
      int y = s1.tensor({received});
      p2pOp(s1, OpCode::Recv, {}, {y}, /*peer=*/0);
      s1.output("y" + std::to_string(i), y);
    }
    return pb;
  };
  std::vector<RefusedCase> cases;
  cases.push_back(
      {"two sends, one receive", stages(2, 2, 2, 1),
       "world rank 0 (function 'stage0', op 1, send) sends to world rank 1 "
       "(rank 1 of 'pp') on stream 0, which never receives it: it receives "
       "1 message(s) from world rank 0 (rank 0 of 'pp') there and this is "
       "send 2"});
  cases.push_back(
      {"one send, two receives", stages(2, 2, 1, 2),
       "world rank 1 (function 'stage1', op 1, recv) receives from world "
       "rank 0 (rank 0 of 'pp') on stream 0, which never sends it: it sends "
       "1 message(s) to world rank 1 (rank 1 of 'pp') there and this is "
       "receive 2"});
  cases.push_back({"sizes differ", stages(2, 3, 1, 1),
                   "point-to-point message 1 from world rank 0 (rank 0 of "
                   "'pp') to world rank 1 (rank 1 of 'pp') on stream 0: world "
                   "rank 0 (function 'stage0', op 0, send) sends 8 bytes, "
                   "world rank 1 (function 'stage1', op 0, recv) receives 12 "
                   "bytes"});
  expectRefusedBeforeTheStep(cases);
  // Paired, the same stages run.
  PlanBuilder paired = stages(2, 2, 2, 2);
  auto out = runExchange(paired, /*strict=*/false, 60000);
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[1].at("y1").toFloats(), (std::vector<float>{1, 2}));
}

// The check itself: a rank that runs no function sends nothing, and an
// SPMD function pairs with itself (every rank sends to and receives from
// every rank of the group).
TEST(Collectives, PointToPointPairingOfAnAssignment) {
  PlanBuilder pb(2);
  pb.group("pp", 2);
  FnBuilder f = pb.function("swap");
  int x = f.input("x", {2});
  for (int peer : {0, 1})
    p2pOp(f, OpCode::Send, {x}, {}, peer);
  for (int peer : {0, 1}) {
    int y = f.tensor({2});
    p2pOp(f, OpCode::Recv, {}, {y}, peer);
    f.output("y" + std::to_string(peer), y);
  }
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_TRUE(checkCommunicationMatching(plan->root(), {0, 0}));
  expectMatchingRefused(plan->root(), {0, -1},
                        "world rank 0 (function 'swap', op 1, "
                        "send) sends to world rank 1 (rank 1 of "
                        "'pp') on stream 0, which runs no function");
  expectMatchingRefused(plan->root(), {-1, 0},
                        "receives from world rank 0 (rank 0 of "
                        "'pp') on stream 0, which runs no function");
  auto runner = ThreadedRunner::create(*plan);
  ASSERT_TRUE(runner) << runner.status().message();
  auto out = (*runner)->run(
      "swap", {{{"x", HostTensor::fromFloats(DType::F32, {2}, {1, 2})}},
               {{"x", HostTensor::fromFloats(DType::F32, {2}, {3, 4})}}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].at("y1").toFloats(), (std::vector<float>{3, 4}));
  EXPECT_EQ((*out)[1].at("y0").toFloats(), (std::vector<float>{1, 2}));
}

// Lone sends and receives in matching order (a pipeline: stage 0 sends,
// then receives; stage 1 receives, then sends back) complete under NCCL:
// the order check must not refuse them.
TEST(Collectives, LoneOpsInMatchingOrderPassTheCheck) {
  PlanBuilder pb(2);
  pb.group("pp", 2);
  for (int r = 0; r < 2; ++r) {
    FnBuilder f = pb.function("stage" + std::to_string(r));
    int x = f.input("x", {2});
    int y = f.tensor({2}), z = f.tensor({2});
    auto send = [&] { p2pOp(f, OpCode::Send, {x}, {}, 1 - r); };
    auto recv = [&] { p2pOp(f, OpCode::Recv, {}, {y}, 1 - r); };
    if (r == 0)
      send();
    else
      recv();
    f.op(OpCode::Add, {x, x}, {z}); // keeps the two apart: lone ops
    if (r == 0)
      recv();
    else
      send();
    f.output("y", y);
    f.output("z", z);
  }
  for (bool strict : {false, true}) {
    auto out = runExchange(pb, strict, 60000);
    ASSERT_TRUE(out) << out.status().message();
    EXPECT_EQ((*out)[0].at("y").toFloats(), (std::vector<float>{3, 4}));
    EXPECT_EQ((*out)[1].at("y").toFloats(), (std::vector<float>{1, 2}));
  }
}

// On a 2 x 2 mesh the pipeline group strides over the tensor-parallel one:
// its instances are world ranks {0, 2} and {1, 3}, and a send to its rank
// 1 from world rank 0 reaches world rank 2.
TEST(Collectives, PointToPointPairingOnAMesh) {
  PlanBuilder pb(4);
  pb.group("tp", 2);
  pb.group("pp", 2, /*stride=*/2);
  FnBuilder first = pb.function("first");
  int x = first.input("x", {2});
  p2pOp(first, OpCode::Send, {x}, {}, /*peer=*/1, /*group=*/1);
  FnBuilder second = pb.function("second");
  second.input("x", {2});
  int y = second.tensor({2});
  p2pOp(second, OpCode::Recv, {}, {y}, /*peer=*/0, /*group=*/1);
  second.output("y", y);
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_TRUE(checkCommunicationMatching(plan->root(), {0, 0, 1, 1}));
  expectMatchingRefused(
      plan->root(), {0, 1, 0, 1},
      "world rank 0 (function 'first', op 0, send) sends to world "
      "rank 2 (rank 1 of 'pp') on stream 0, which never receives "
      "it");
}

// Pipeline stages that share a group also share its collectives: every
// member issues as many on each communicator (group instance, stream), and
// the k-th of each agree in what NCCL needs (CommMatching.h). Anything
// else is an error before the step, naming both ranks, instead of a wait
// for the collective timeout (60 s here) on the CPU and a hang on NCCL.
TEST(Collectives, CollectivesMatchAcrossFunctionsBeforeTheStep) {
  // stage0 all_reduces x; stage1 runs `code` over `elements` with `kind`.
  auto stages = [](int count, OpCode code, int64_t elements,
                   plan::ReduceKind kind = plan::ReduceKind::Sum) {
    PlanBuilder pb(2);
    pb.group("dp", 2);
    FnBuilder s0 = pb.function("stage0");
    int x = s0.input("x", {2});
    int y = s0.tensor({2});
    s0.op(OpCode::AllReduce, {x}, {y}).group = 0;
    s0.output("y", y);
    FnBuilder s1 = pb.function("stage1");
    int x1 = s1.input("x", {2});
    int in = x1;
    if (elements != 2) {
      in = s1.tensor({elements});
      s1.op(OpCode::Concat, {x1, x1}, {in}).dim = 0;
    }
    int out = in;
    for (int i = 0; i < count; ++i) {
      out = s1.tensor({code == OpCode::AllGather ? 2 * elements : elements});
      plan::OpT &c = s1.op(code, {in}, {out});
      c.group = 0;
      c.reduce_kind = kind;
    }
    s1.output("y", out);
    return pb;
  };
  std::vector<RefusedCase> cases;
  cases.push_back(
      {"stage1 never joins", stages(0, OpCode::AllReduce, 2),
       "world rank 0 (function 'stage0', op 0, all_reduce) is collective 1 on "
       "the communicator of group 'dp' (world ranks 0, 1) on stream 0, which "
       "world rank 1 (rank 1 of 'dp') never joins: it issues only 0 "
       "collective(s) there (the collective would block its stream "
       "forever)"});
  cases.push_back(
      {"another collective", stages(1, OpCode::AllGather, 2),
       "collective 1 on the communicator of group 'dp' (world ranks 0, 1) on "
       "stream 0: world rank 0 (function 'stage0', op 0, all_reduce) is "
       "all_reduce sum of f32, 2 elements in, 2 out, but world rank 1 "
       "(function 'stage1', op 0, all_gather) is all_gather of f32, 2 "
       "elements in, 4 out (NCCL needs every member's to agree)"});
  cases.push_back({"another reduction",
                   stages(1, OpCode::AllReduce, 2, plan::ReduceKind::Max),
                   "is all_reduce sum of f32, 2 elements in, 2 out, but world "
                   "rank 1 (function 'stage1', op 0, all_reduce) is "
                   "all_reduce max of f32, 2 elements in, 2 out"});
  cases.push_back({"another size", stages(1, OpCode::AllReduce, 4),
                   "is all_reduce sum of f32, 2 elements in, 2 out, but world "
                   "rank 1 (function 'stage1', op 1, all_reduce) is "
                   "all_reduce sum of f32, 4 elements in, 4 out"});
  cases.push_back({"one too many", stages(2, OpCode::AllReduce, 2),
                   "world rank 1 (function 'stage1', op 1, all_reduce) is "
                   "collective 2 on the communicator of group 'dp' (world "
                   "ranks 0, 1) on stream 0, which world rank 0 (rank 0 of "
                   "'dp') never joins: it issues only 1 collective(s) there"});
  expectRefusedBeforeTheStep(cases);
  // A member that runs nothing never joins either.
  PlanBuilder idle = stages(1, OpCode::AllReduce, 2);
  auto plan = loadPlan(idle.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  expectMatchingRefused(plan->root(), {0, -1},
                        "which world rank 1 (rank 1 of 'dp') never "
                        "joins: it runs no function");
  // Broadcasts must agree on their root.
  auto broadcastFromOwnRank = [] {
    PlanBuilder pb(2);
    pb.group("dp", 2);
    for (int r = 0; r < 2; ++r) {
      FnBuilder f = pb.function("stage" + std::to_string(r));
      int x = f.input("x", {2});
      int y = f.tensor({2});
      plan::OpT &b = f.op(OpCode::Broadcast, {x}, {y});
      b.group = 0;
      b.root = r;
      f.output("y", y);
    }
    return pb;
  };
  PlanBuilder roots = broadcastFromOwnRank();
  auto rootPlan = loadPlan(roots.finish());
  ASSERT_TRUE(rootPlan) << rootPlan.status().message();
  expectMatchingRefused(
      rootPlan->root(), {0, 1},
      "is broadcast from rank 0 of f32, 2 elements in, 2 out, but "
      "world rank 1 (function 'stage1', op 0, broadcast) is "
      "broadcast from rank 1");
  EXPECT_TRUE(checkCommunicationMatching(rootPlan->root(), {0, 0}));
  // Matched, the stages run: 1 + 3 and 2 + 4 on both ranks.
  PlanBuilder matched = stages(1, OpCode::AllReduce, 2);
  auto out = runExchange(matched, /*strict=*/false, 60000);
  ASSERT_TRUE(out) << out.status().message();
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ((*out)[size_t(r)].at("y").toFloats(), (std::vector<float>{4, 6}));

  // Run anyway (check off), mismatched members still meet: the round is an
  // error on every rank, in either mode, not sums computed from an
  // all_gather's or a max's input, nor a broadcast from two roots.
  struct Mismatch {
    PlanBuilder pb;
    const char *error;
  };
  for (bool strict : {false, true}) {
    std::vector<Mismatch> mismatches;
    mismatches.push_back({stages(1, OpCode::AllGather, 2),
                          "all_reduce sum of f32, 2 elements in, 2 out, but "
                          "world rank 1 runs all_gather of f32, 2 elements "
                          "in, 4 out"});
    mismatches.push_back(
        {stages(1, OpCode::AllReduce, 2, plan::ReduceKind::Max),
         "but world rank 1 runs all_reduce max of f32"});
    mismatches.push_back({stages(1, OpCode::AllReduce, 4),
                          "but world rank 1 runs all_reduce sum of f32, 4 "
                          "elements in, 4 out"});
    mismatches.push_back({broadcastFromOwnRank(),
                          "world rank 0 runs broadcast from rank 0 of f32, 2 "
                          "elements in, 2 out, but world rank 1 runs "
                          "broadcast from rank 1"});
    for (Mismatch &m : mismatches) {
      auto ran = runExchange(m.pb, strict, 60000,
                             /*checkCommunication=*/false);
      ASSERT_FALSE(ran) << m.error;
      EXPECT_HAS(ran.status().message(),
                 "stream 0 joins different collectives: world rank 0 runs");
      EXPECT_HAS(ran.status().message(), m.error);
    }
  }
}

// A collective and a send share a communicator (same group and stream):
// NCCL runs them in issue order, so a collective queued behind a receive
// whose send is queued behind the other member's collective deadlocks. An
// all_to_all is NCCL sends and receives to every member, the same case.
TEST(Collectives, ACollectiveQueuedBehindAReceiveDeadlocks) {
  for (OpCode code :
       {OpCode::AllReduce, OpCode::AllToAll, OpCode::AllReduceStart}) {
    auto stages = [&](bool sendFirst) {
      PlanBuilder pb(2);
      pb.group("pp", 2);
      for (int r = 0; r < 2; ++r) {
        FnBuilder f = pb.function("stage" + std::to_string(r));
        int x = f.input("x", {2});
        int y = f.tensor({2}), z = r == 1 ? f.tensor({2}) : -1;
        auto collective = [&] {
          plan::OpT &c = f.op(code, {x}, {y});
          c.group = 0;
          if (code != OpCode::AllReduceStart)
            return;
          // Issued at the start (its NCCL call), completed at the wait.
          f.fn().num_handles = 1;
          c.handle = 0;
          f.op(OpCode::Wait, {}, {}).handle = 0;
        };
        auto message = [&] {
          if (r == 0)
            p2pOp(f, OpCode::Send, {x}, {}, 1);
          else
            p2pOp(f, OpCode::Recv, {}, {z}, 0);
        };
        // stage0: the collective, then its send; stage1: the receive
        // first, or (sendFirst) after the collective too.
        if (r == 1 && !sendFirst)
          message();
        collective();
        if (r == 0 || sendFirst)
          message();
        f.output("y", y);
        if (r == 1)
          f.output("z", z);
      }
      return pb;
    };
    const char *name = code == OpCode::AllReduce  ? "all_reduce"
                       : code == OpCode::AllToAll ? "all_to_all"
                                                  : "all_reduce_start";
    PlanBuilder crossed = stages(/*sendFirst=*/false);
    auto start = std::chrono::steady_clock::now();
    auto refused = runExchange(crossed, /*strict=*/false, 60000);
    ASSERT_FALSE(refused) << name;
    EXPECT_NE(refused.status().message().find(
                  std::string("world rank 0 (function 'stage0', op 0, ") +
                  name +
                  ") never completes: the matching collective, world rank 1 "
                  "(function 'stage1', op 1, " +
                  name +
                  "), is issued only after world rank 1 (function 'stage1', "
                  "op 0, recv) on the same communicator (group 'pp', stream "
                  "0), which waits in turn"),
              std::string::npos)
        << refused.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(20));
    // In the same order on both, it completes.
    for (bool strict : {false, true}) {
      PlanBuilder ordered = stages(/*sendFirst=*/true);
      auto out = runExchange(ordered, strict, 60000);
      ASSERT_TRUE(out) << name << ": " << out.status().message();
      EXPECT_EQ((*out)[1].at("z").toFloats(), (std::vector<float>{1, 2}))
          << name;
    }
  }
}

// Two stages that share two communicators and meet on them in opposite
// orders: the loader's hang rule runs a rank's communicators one after
// another, so stage0's all_reduce on 'a' waits for stage1 to finish 'b',
// which waits for stage0. Each communicator on its own matches and keeps
// its order; the deadlock is only across them. Refused before the step;
// in the same order the stages run. Also with the second collective on
// another stream of the same group (another communicator), ordered after
// the first by an event.
TEST(Collectives, StagesThatMeetOnTwoCommunicatorsInOppositeOrdersDeadlock) {
  for (bool secondStream : {false, true}) {
    auto stages = [&](bool sameOrder) {
      PlanBuilder pb(2);
      pb.group("a", 2);
      pb.group("b", 2);
      for (int r = 0; r < 2; ++r) {
        FnBuilder f = pb.function("stage" + std::to_string(r));
        int x = f.input("x", {2});
        int y = f.tensor({2}), z = f.tensor({2});
        // On the second stream the second collective is 'a' again.
        auto collective = [&](int which, int out) -> plan::OpT & {
          plan::OpT &c = f.op(OpCode::AllReduce, {x}, {out});
          c.group = secondStream ? 0 : which;
          c.stream = secondStream ? which : 0;
          return c;
        };
        bool flip = r == 1 && !sameOrder;
        int first = flip ? 1 : 0;
        plan::OpT &one = collective(first, y);
        plan::OpT &two = collective(1 - first, z);
        if (secondStream) {
          f.fn().num_streams = 2;
          f.fn().num_events = 1;
          one.record_events = {0};
          two.wait_events = {0};
        }
        f.output("y", y);
        f.output("z", z);
      }
      return pb;
    };
    const char *name = secondStream ? "two streams" : "two groups";
    PlanBuilder crossed = stages(/*sameOrder=*/false);
    auto start = std::chrono::steady_clock::now();
    auto refused = runExchange(crossed, /*strict=*/false, 60000);
    ASSERT_FALSE(refused) << name;
    std::string second =
        secondStream ? "(group 'a', stream 1)" : "(group 'b', stream 0)";
    EXPECT_NE(refused.status().message().find(
                  "world rank 0 (function 'stage0', op 0, all_reduce) never "
                  "completes: the matching collective, world rank 1 "
                  "(function 'stage1', op 1, all_reduce), is issued only after "
                  "world rank 1 "
                  "(function 'stage1', op 0, all_reduce) on another of its "
                  "communicators " +
                  second + ", which waits in turn"),
              std::string::npos)
        << name << ": " << refused.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(20))
        << name;
    for (bool strict : {false, true}) {
      PlanBuilder ordered = stages(/*sameOrder=*/true);
      auto out = runExchange(ordered, strict, 60000);
      ASSERT_TRUE(out) << name << ": " << out.status().message();
      for (int r = 0; r < 2; ++r)
        EXPECT_EQ((*out)[size_t(r)].at("z").toFloats(),
                  (std::vector<float>{4, 6}))
            << name;
      // Run anyway, the interpreter deadlocks as NCCL would and ends at
      // the timeout. (Its rounds used to be per group instance, whatever
      // the stream: on two streams stage0's first all_reduce met stage1's
      // first, of the other stream, and both completed with wrong sums.)
      PlanBuilder again = stages(/*sameOrder=*/false);
      auto hung = runExchange(again, strict, 300,
                              /*checkCommunication=*/false);
      ASSERT_FALSE(hung) << name;
      EXPECT_NE(hung.status().message().find("timed out"), std::string::npos)
          << name << ": " << hung.status().message();
    }
  }
}

// A group of adjacent point-to-point ops is issued at once (P2PGroups.h):
// all of its receives are posted before any is waited for. Rank 0's group
// receives from 2, then from 1; rank 2 sends only after it receives from
// 1, whose lone send to 0 completes only once rank 0's receive from 1 is
// posted. The interpreter took a group's receives one at a time, so this
// exchange, which NCCL and the check (rightly) complete, waited out the
// collective timeout on the CPU.
TEST(Collectives, AGroupPostsAllItsReceivesBeforeWaitingForAny) {
  PlanBuilder pb = groupReceivesStages(2);
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_TRUE(checkCommunicationMatching(plan->root(), {0, 1, 2}));
  for (bool strict : {false, true}) {
    RunnerOptions o;
    o.collectiveTimeout = std::chrono::milliseconds(20000);
    auto runner = ThreadedRunner::create(*plan, o);
    ASSERT_TRUE(runner) << runner.status().message();
    if (strict)
      (*runner)->setStrict(true, 5);
    auto start = std::chrono::steady_clock::now();
    auto out = (*runner)->runPerRank(
        {"stage0", "stage1", "stage2"},
        {{{"x", HostTensor::fromFloats(DType::F32, {2}, {1, 2})}},
         {{"x", HostTensor::fromFloats(DType::F32, {2}, {3, 4})}},
         {{"x", HostTensor::fromFloats(DType::F32, {2}, {5, 6})}}});
    ASSERT_TRUE(out) << (strict ? "strict: " : "plain: ")
                     << out.status().message();
    EXPECT_EQ((*out)[0].at("a").toFloats(), (std::vector<float>{5, 6}));
    EXPECT_EQ((*out)[0].at("b").toFloats(), (std::vector<float>{3, 4}));
    EXPECT_EQ((*out)[2].at("r").toFloats(), (std::vector<float>{3, 4}));
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(10));
  }
}

// Which adjacent point-to-point ops form a group (P2PGroups.h).
TEST(Collectives, PointToPointGroupsFollowTheRules) {
  struct Case {
    const char *what;
    std::function<void(FnBuilder &, int, int, int)> ops; // f, x, y, z
    std::vector<int> want;
  };
  auto send = [](FnBuilder &f, int t, int stream = 0, int group = 0) {
    plan::OpT &o = f.op(OpCode::Send, {t}, {});
    o.group = group;
    o.peer = 1;
    o.stream = stream;
    return &o;
  };
  auto recv = [](FnBuilder &f, int t, int stream = 0, int group = 0) {
    plan::OpT &o = f.op(OpCode::Recv, {}, {t});
    o.group = group;
    o.peer = 1;
    o.stream = stream;
    return &o;
  };
  std::vector<Case> cases = {
      {"send, recv", [&](FnBuilder &f, int x, int y, int) {
         send(f, x);
         recv(f, y);
       }, {2, -1}},
      {"send, recv, send", [&](FnBuilder &f, int x, int y, int) {
         send(f, x);
         recv(f, y);
         send(f, x);
       }, {3, -1, -1}},
      {"an op between", [&](FnBuilder &f, int x, int y, int z) {
         send(f, x);
         f.op(OpCode::Add, {x, x}, {z});
         recv(f, y);
       }, {-1, -1, -1}},
      {"another stream", [&](FnBuilder &f, int x, int y, int) {
         send(f, x);
         recv(f, y, /*stream=*/1);
       }, {-1, -1}},
      {"another group", [&](FnBuilder &f, int x, int y, int) {
         send(f, x);
         recv(f, y, 0, /*group=*/1);
       }, {-1, -1}},
      {"sends what it received", [&](FnBuilder &f, int, int y, int) {
         recv(f, y);
         send(f, y);
       }, {-1, -1}},
      {"an event recorded between", [&](FnBuilder &f, int x, int y, int) {
         send(f, x)->record_events = {0};
         recv(f, y);
       }, {-1, -1}},
      {"an event waited for between", [&](FnBuilder &f, int x, int y, int) {
         send(f, x);
         recv(f, y)->wait_events = {0};
       }, {-1, -1}},
      {"async starts", [&](FnBuilder &f, int x, int y, int) {
         plan::OpT &r = f.op(OpCode::RecvStart, {}, {y});
         r.group = 0;
         r.peer = 1;
         r.handle = 0;
         plan::OpT &s = f.op(OpCode::SendStart, {x}, {});
         s.group = 0;
         s.peer = 1;
         s.handle = 1;
         f.op(OpCode::Wait, {}, {}).handle = 1;
         f.op(OpCode::Wait, {}, {}).handle = 0;
       }, {2, -1, -1, -1}},
  };
  for (const Case &c : cases) {
    PlanBuilder pb(2);
    pb.group("pp", 2);
    pb.group("pp2", 2);
    FnBuilder f = pb.function("main");
    f.fn().num_streams = 2;
    f.fn().num_events = 1;
    f.fn().num_handles = 2;
    int x = f.input("x", {2});
    int y = f.tensor({2}), z = f.tensor({2});
    c.ops(f, x, y, z);
    f.output("y", y);
    std::vector<uint8_t> bytes = pb.finish();
    const plan::Plan *root = plan::GetPlan(bytes.data());
    EXPECT_EQ(p2pGroupEnds(*root->functions()->Get(0)), c.want) << c.what;
  }
}

TEST(Collectives, TwoGroupsOnAMesh) {
  // World 4 as a 2x2 mesh: "tp" = {0,1},{2,3} (stride 1), "dp" = {0,2},{1,3}
  // (stride 2). all_reduce over tp then over dp sums everything.
  PlanBuilder pb(4);
  pb.group("tp", 2, 1);
  pb.group("dp", 2, 2);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {1});
  int a = f.tensor({1}), b = f.tensor({2});
  f.op(OpCode::AllReduce, {x}, {a}).group = 0;
  f.op(OpCode::AllGather, {a}, {b}).group = 1; // [tp sum of my dp peer]
  f.output("y", b);
  auto out = runCollective(pb, {{1}, {2}, {30}, {40}}, {1});
  ASSERT_EQ(out.size(), 4u);
  // tp sums: ranks 0,1 -> 3; ranks 2,3 -> 70. dp gathers {0,2} / {1,3}.
  for (auto &o : out)
    EXPECT_EQ(o, (std::vector<float>{3, 70}));
}

TEST(Collectives, MismatchedCollectiveFailsInsteadOfHanging) {
  // Rank 1 runs a function with no collective, so rank 0's all_reduce can
  // never complete; the communicator must time out with an error.
  PlanBuilder pb(2);
  pb.group("tp", 2);
  FnBuilder f0 = pb.function("stage0");
  int x0 = f0.input("x", {1});
  int y0 = f0.tensor({1});
  f0.op(OpCode::AllReduce, {x0}, {y0}).group = 0;
  FnBuilder f1 = pb.function("stage1");
  f1.input("x", {1});
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  Communicator comm(2, std::chrono::milliseconds(200));
  auto r0 = Interpreter::create(*plan, 0, comm);
  ASSERT_TRUE(r0);
  auto out = (*r0)->run("stage0",
                        {{"x", HostTensor::fromFloats(DType::F32, {1}, {1})}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("timed out"), std::string::npos)
      << out.status().message();
}
