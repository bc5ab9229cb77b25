//===- CudaSingleGpuTest.cpp - tp >= 2 on one GPU (test communicator) -----===//
//
// NCCL refuses two ranks on one GPU; the single-GPU test communicator
// (runtime/cuda/LocalComm.h) runs every rank of a plan on one device, so
// multi-rank plans, multi-stream capture with one communicator per
// (group, stream), and the paths that end a stuck or failed step run here.
// Its reductions follow the interpreter's order (rank 0 first, fp32,
// rounded once), so collectives alone must match it bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/Interpreter.h"
#include "runtime/cuda/Executor.h"
#include "test/runtime/GpuTestUtil.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {


cuda::ExecutorOptions oneGpu(bool graph) {
  cuda::ExecutorOptions o;
  o.graph = graph;
  o.weights.seed = 5;
  o.singleGpuTest = true;
  return o;
}

/// The interpreter's outputs of one step, rank r running functions[r].
std::vector<TensorMap> onCpu(const LoadedPlan &loaded,
                             const std::vector<std::string> &functions,
                             const std::vector<TensorMap> &inputs) {
  auto cpu = ThreadedRunner::create(loaded, /*seed=*/5);
  EXPECT_TRUE(cpu) << cpu.status().message();
  if (!cpu)
    return {};
  auto out = (*cpu)->runPerRank(functions, inputs);
  EXPECT_TRUE(out) << out.status().message();
  return out ? out.take() : std::vector<TensorMap>{};
}

/// Every rank's every output within atol + rtol * |want| (0, 0: the same
/// bits).
void expectOutputs(const std::vector<TensorMap> &got,
                   const std::vector<TensorMap> &want, double atol,
                   double rtol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < want.size(); ++r)
    for (const auto &[name, expected] : want[r]) {
      ASSERT_TRUE(got[r].count(name)) << what << ": rank " << r << " " << name;
      const HostTensor &actual = got[r].at(name);
      if (atol == 0 && rtol == 0) {
        EXPECT_EQ(actual.bytes, expected.bytes)
            << what << ": rank " << r << " output " << name;
        continue;
      }
      std::vector<float> a = actual.toFloats(), b = expected.toFloats();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_NEAR(a[i], b[i], atol + rtol * std::fabs(b[i]))
            << what << ": rank " << r << " output " << name << " element "
            << i;
    }
}

/// The plan on the interpreter, then on one GPU eager and as graphs, two
/// steps each (the second replays the captured graph, barriers included).
void expectSameOnOneGpu(const PlanBuilder &pb, const std::string &function,
                        const std::vector<TensorMap> &inputs, double atol,
                        double rtol) {
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  int world = loaded->root().world_size();
  std::vector<std::string> fns(size_t(world), function);
  std::vector<TensorMap> want = onCpu(*loaded, fns, inputs);
  ASSERT_EQ(want.size(), size_t(world));
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    auto gpu = cuda::CudaRunner::create(*loaded, oneGpu(graph));
    ASSERT_TRUE(gpu) << gpu.status().message();
    for (int step = 0; step < 2; ++step) {
      auto out = (*gpu)->run(function, inputs);
      ASSERT_TRUE(out) << out.status().message();
      expectOutputs(*out, want, atol, rtol,
                    std::string(graph ? "graph" : "eager") + " step " +
                        std::to_string(step));
    }
  }
}

// Every collective of the plan format at world size 4, with NCCL's layouts
// permuted along non-zero dims by the executor: bit-identical to the
// interpreter.
TEST(SingleGpu, EveryCollectiveMatchesInterpreterBitForBit) {
  const int world = 4;
  PlanBuilder pb(world);
  pb.group("tp", world);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {2, 8, 6});
  int h = f.input("h", {2, 8, 6}, DType::BF16);
  int ids = f.input("ids", {5}, DType::I32);
  auto collective = [&](OpCode code, std::vector<int> in, Shape out,
                        DType dt = DType::F32) -> plan::OpT & {
    int y = f.tensor(out, dt);
    plan::OpT &op = f.op(code, std::move(in), {y});
    op.group = 0;
    f.output("y" + std::to_string(y), y);
    return op;
  };
  collective(OpCode::AllReduce, {x}, {2, 8, 6});
  collective(OpCode::AllReduce, {x}, {2, 8, 6}).reduce_kind =
      plan::ReduceKind::Max;
  collective(OpCode::AllReduce, {x}, {2, 8, 6}).reduce_kind =
      plan::ReduceKind::Prod;
  collective(OpCode::AllReduce, {h}, {2, 8, 6}, DType::BF16);
  collective(OpCode::AllReduce, {ids}, {5}, DType::I32);
  collective(OpCode::AllGather, {x}, {8, 8, 6}).dim = 0;
  collective(OpCode::AllGather, {x}, {2, 32, 6}).dim = 1;
  collective(OpCode::ReduceScatter, {x}, {2, 2, 6}).dim = 1;
  collective(OpCode::ReduceScatter, {h}, {2, 2, 6}, DType::BF16).dim = 1;
  // Along dim 0 (no permutation): of the dim-0 gather of x.
  int g = f.tensor({8, 8, 6});
  f.op(OpCode::AllGather, {x}, {g}).group = 0;
  collective(OpCode::ReduceScatter, {g}, {2, 8, 6}).dim = 0;
  plan::OpT &a2a = collective(OpCode::AllToAll, {x}, {2, 2, 24});
  a2a.split_dim = 1;
  a2a.concat_dim = 2;
  collective(OpCode::Broadcast, {x}, {2, 8, 6}).root = 2;
  std::vector<TensorMap> inputs;
  for (int r = 0; r < world; ++r) {
    std::vector<float> v = wave(96, 0.5f * float(r));
    // Values whose fp32 sum depends on the order.
    v[0] = r % 2 ? 1e8f : 1.0f;
    inputs.push_back(
        {{"x", HostTensor::fromFloats(DType::F32, {2, 8, 6}, v)},
         {"h", HostTensor::fromFloats(DType::BF16, {2, 8, 6},
                                      wave(96, 1.0f + float(r)))},
         {"ids", HostTensor::fromInts(DType::I32, {5},
                                      {r, -r, 7 * r, 1 << 20, 3})}});
  }
  expectSameOnOneGpu(pb, "main", inputs, 0, 0);
}

TEST(SingleGpu, MegatronMlpAtTp2AndTp4MatchesInterpreter) {
  for (int tp : {2, 4})
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE("tp " + std::to_string(tp) +
                   (dt == DType::F32 ? " fp32" : " bf16"));
      PlanBuilder pb = megatronMlpPlan(tp, /*hidden=*/64, /*inter=*/128,
                                       /*batch=*/2, /*tokens=*/8, dt);
      TensorMap in{{"x", HostTensor::fromFloats(dt, {2, 8, 64},
                                                wave(2 * 8 * 64, 0.1f))}};
      // cuBLASLt sums in another order than the interpreter; bf16 rounds
      // every intermediate (MlpMatchesInterpreter* in CudaExecutorTest).
      if (dt == DType::F32)
        expectSameOnOneGpu(pb, "prefill", {in}, 1e-5, 1e-4);
      else
        expectSameOnOneGpu(pb, "prefill", {in}, 2e-3, 3e-2);
    }
}

// Two streams, each with a collective of the same group (so two test
// communicators per rank) and a cross-stream Wait, at tp 2.
TEST(SingleGpu, TwoStreamsWithACommunicatorEach) {
  PlanBuilder pb(2);
  pb.group("tp", 2);
  int w = pb.param("w", {32, 32}, {32, 32});
  FnBuilder f = pb.function("step");
  int x = f.input("x", {16, 32}), x2 = f.input("x2", {16, 32});
  int m1 = f.tensor({16, 32}), r = f.tensor({16, 32});
  int m2 = f.tensor({16, 32}), y = f.tensor({16, 32}), g = f.tensor({32, 32});
  int wt = f.param(w, pb.plan());
  f.op(OpCode::Matmul, {x, wt}, {m1}).record_events = {0};
  plan::OpT &start = f.op(OpCode::AllReduceStart, {m1}, {r});
  start.group = 0;
  start.handle = 0;
  start.stream = 1;
  start.wait_events = {0};
  f.op(OpCode::Matmul, {x2, wt}, {m2});
  f.op(OpCode::Wait, {}, {}).handle = 0; // stream 0 waits for stream 1's
  f.op(OpCode::Add, {r, m2}, {y});
  f.op(OpCode::AllGather, {y}, {g}).group = 0; // stream 0's communicator
  f.output("g", g);
  f.fn().num_streams = 2;
  f.fn().num_events = 1;
  f.fn().num_handles = 1;
  std::vector<TensorMap> inputs;
  for (int rank = 0; rank < 2; ++rank)
    inputs.push_back(
        {{"x", HostTensor::fromFloats(DType::F32, {16, 32},
                                      wave(512, 0.2f + float(rank)))},
         {"x2", HostTensor::fromFloats(DType::F32, {16, 32},
                                       wave(512, 0.7f - float(rank)))}});
  expectSameOnOneGpu(pb, "step", inputs, 1e-5, 1e-4);
}

/// Two pipeline stages ("stage0" on rank 0, "stage1" on rank 1), each fed
/// an `n`-element "x": bit for bit as on the interpreter, graph and eager,
/// three steps each.
void expectStagesMatchInterpreter(PlanBuilder pb, int64_t n,
                                  const std::string &what) {
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  std::vector<TensorMap> inputs{
      {{"x", HostTensor::fromFloats(DType::F32, {n}, wave(n, 0.3f))}},
      {{"x", HostTensor::fromFloats(DType::F32, {n}, wave(n, 9.0f))}}};
  std::vector<std::string> fns{"stage0", "stage1"};
  std::vector<TensorMap> want = onCpu(*loaded, fns, inputs);
  ASSERT_EQ(want.size(), 2u) << what;
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    auto gpu = cuda::CudaRunner::create(*loaded, oneGpu(graph));
    ASSERT_TRUE(gpu) << gpu.status().message();
    for (int step = 0; step < 3; ++step) {
      auto out = (*gpu)->runPerRank(fns, inputs);
      ASSERT_TRUE(out) << what << ": " << out.status().message();
      expectOutputs(*out, want, 0, 0,
                    what + (graph ? " graph" : " eager"));
    }
  }
}

TEST(SingleGpu, SendRecvBetweenStages) {
  expectStagesMatchInterpreter(sendRecvStages(1000), 1000, "send/recv");
}

/// One step of `function` on `runner` and the milliseconds it took.
Expected<std::vector<TensorMap>>
timedRun(cuda::CudaRunner &runner, const std::vector<std::string> &functions,
         const std::vector<TensorMap> &inputs, double &ms) {
  auto t0 = std::chrono::steady_clock::now();
  auto out = runner.runPerRank(functions, inputs);
  ms = std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now() - t0)
           .count();
  return out;
}

/// The Megatron MLP at tp `tp` (megatronMlpPlan's "prefill") and its input.
PlanBuilder faultTestPlan(int tp) {
  return megatronMlpPlan(tp, 64, 128, 2, 8, DType::F32);
}
TensorMap faultTestInput() {
  return {{"x", HostTensor::fromFloats(DType::F32, {2, 8, 64},
                                       wave(2 * 8 * 64, 0.1f))}};
}

// Both ranks receive before they send, each a lone blocking call (an op
// between them, so they are no group: P2PGroups.h): NCCL deadlocks on this
// (a lone ncclRecv waits for the peer's ncclSend, queued behind the peer's
// own ncclRecv), and so do the test communicator and the interpreter. The
// runner refuses it before the step (CommMatching.h); run anyway, the step
// must end at the timeout with an error, not hang.
TEST(SingleGpu, RecvBeforeSendOnBothRanksEndsAtTheTimeout) {
  auto loaded =
      loadPlan(exchangeStages(/*recvFirst=*/true, /*opBetween=*/true).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions o = oneGpu(graph);
    o.stepTimeoutSeconds = 1;
    o.checkCommunication = false; // run it anyway (it is refused)
    auto gpu = cuda::CudaRunner::create(*loaded, o);
    ASSERT_TRUE(gpu) << gpu.status().message();
    TensorMap in{{"x", HostTensor::fromFloats(DType::F32, {2}, {1, 2})}};
    double ms = 0;
    auto out = timedRun(**gpu, {"stage0", "stage1"}, {in, in}, ms);
    ASSERT_FALSE(out) << (graph ? "graph" : "eager");
    EXPECT_NE(out.status().message().find("a send or receive is stuck"),
              std::string::npos)
        << out.status().message();
    EXPECT_LT(ms, 10000) << "the step should end near its 1 s timeout";
  }
}

// The same exchange with the receive and the send adjacent (sync), or as
// adjacent starts (async): each forms a group, issued together as by
// ncclGroupStart/End, and completes on the GPU as on the interpreter.
TEST(SingleGpu, AdjacentRecvAndSendOnBothRanksRunAsAGroup) {
  for (bool async : {false, true}) {
    PlanBuilder pb(2);
    pb.group("pp", 2);
    for (int r = 0; r < 2; ++r) {
      FnBuilder f = pb.function("stage" + std::to_string(r));
      int x = f.input("x", {300});
      int y = f.tensor({300});
      f.fn().num_handles = 2;
      plan::OpT &recv =
          f.op(async ? OpCode::RecvStart : OpCode::Recv, {}, {y});
      recv.group = 0;
      recv.peer = 1 - r;
      plan::OpT &send = f.op(async ? OpCode::SendStart : OpCode::Send, {x}, {});
      send.group = 0;
      send.peer = 1 - r;
      if (async) {
        recv.handle = 0;
        send.handle = 1;
        f.op(OpCode::Wait, {}, {}).handle = 1;
        f.op(OpCode::Wait, {}, {}).handle = 0;
      }
      f.output("y", y);
    }
    expectStagesMatchInterpreter(pb, 300, async ? "async" : "sync");
  }
}

// A group's receives are posted together, as ncclGroupStart/End posts
// them: rank 0's group receives from 2, then from 1, and rank 2 sends only
// after it has received from 1, whose lone send to 0 comes first. The test
// communicator took a group's receives in plan order (as the interpreter
// did), which waits for rank 2 forever; it now takes each as its sender
// posts (HostMailbox::receiveAny). Bit for bit with the interpreter.
TEST(SingleGpu, AGroupsReceivesTakeWhicheverSenderComesFirst) {
  constexpr int64_t n = 500;
  PlanBuilder pb = groupReceivesStages(n);
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  std::vector<TensorMap> inputs;
  for (int r = 0; r < 3; ++r)
    inputs.push_back({{"x", HostTensor::fromFloats(DType::F32, {n},
                                                   wave(n, 0.5f + float(r)))}});
  std::vector<std::string> fns{"stage0", "stage1", "stage2"};
  std::vector<TensorMap> want = onCpu(*loaded, fns, inputs);
  ASSERT_EQ(want.size(), 3u);
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions o = oneGpu(graph);
    o.stepTimeoutSeconds = 20;
    auto gpu = cuda::CudaRunner::create(*loaded, o);
    ASSERT_TRUE(gpu) << gpu.status().message();
    auto out = (*gpu)->runPerRank(fns, inputs);
    ASSERT_TRUE(out) << (graph ? "graph: " : "eager: ")
                     << out.status().message();
    expectOutputs(*out, want, 0, 0, graph ? "graph" : "eager");
  }
}

// A rank that never joins its collectives: its peers' step ends at the
// timeout with an error naming who waited for whom; the runner then
// refuses further steps (its communicators are aborted).
TEST(SingleGpu, StuckCollectiveEndsWithinTheTimeout) {
  auto loaded = loadPlan(faultTestPlan(2).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  TensorMap in = faultTestInput();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions o = oneGpu(graph);
    o.stepTimeoutSeconds = 2;
    o.testStuckRank = 1;
    auto gpu = cuda::CudaRunner::create(*loaded, o);
    ASSERT_TRUE(gpu) << gpu.status().message();
    double ms = 0;
    auto out = timedRun(**gpu, {"prefill", "prefill"}, {in}, ms);
    ASSERT_FALSE(out) << (graph ? "graph" : "eager");
    EXPECT_NE(out.status().message().find("waited for rank 1"),
              std::string::npos)
        << out.status().message();
    EXPECT_LT(ms, 10000) << "the step should end near its 2 s timeout";
    auto again = (*gpu)->run("prefill", {in});
    ASSERT_FALSE(again);
    EXPECT_NE(again.status().message().find("unusable after an aborted step"),
              std::string::npos)
        << again.status().message();
  }
}

// A rank that fails alone, before it launches anything: its peers, already
// waiting in a collective, are released at once (not at the timeout), and
// the error is the failing rank's.
TEST(SingleGpu, FailingRankReleasesItsPeersAtOnce) {
  auto loaded = loadPlan(faultTestPlan(4).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  TensorMap in = faultTestInput();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions o = oneGpu(graph);
    o.stepTimeoutSeconds = 60;
    o.testFailingRank = 2;
    auto gpu = cuda::CudaRunner::create(*loaded, o);
    ASSERT_TRUE(gpu) << gpu.status().message();
    double ms = 0;
    auto out = timedRun(**gpu, std::vector<std::string>(4, "prefill"), {in},
                        ms);
    ASSERT_FALSE(out) << (graph ? "graph" : "eager");
    EXPECT_NE(out.status().message().find("rank 2: failed on purpose"),
              std::string::npos)
        << out.status().message();
    EXPECT_LT(ms, 10000) << "the peers should not wait for the 60 s timeout";
  }
}

TEST(SingleGpu, OneRanksBadInputsAreRefusedBeforeAnyRankStarts) {
  // Checked on the caller's thread: had rank 2 refused them on its own,
  // its peers would be left in collectives with it (in NCCL possibly
  // inside a first-use connection no cancel reaches), and the runner
  // aborted for good.
  auto loaded = loadPlan(faultTestPlan(4).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  TensorMap good = faultTestInput();
  TensorMap bad = {{"x", HostTensor::fromFloats(DType::F32, {2, 8, 32},
                                                wave(2 * 8 * 32, 0.1f))}};
  for (bool graph : {false, true}) {
    auto gpu = cuda::CudaRunner::create(*loaded, oneGpu(graph));
    ASSERT_TRUE(gpu) << gpu.status().message();
    std::vector<std::string> fns(4, "prefill");
    auto out = (*gpu)->runPerRank(fns, {good, good, bad, good});
    ASSERT_FALSE(out) << (graph ? "graph" : "eager");
    EXPECT_EQ(out.status().message().rfind("rank 2: ", 0), 0u)
        << out.status().message();
    // Nothing ran, nothing was aborted: the runner still works.
    out = (*gpu)->runPerRank(fns, {good, good, good, good});
    EXPECT_TRUE(out) << out.status().message();
  }
}

TEST(SingleGpu, FailingConnectionReleasesItsPeersAtOnce) {
  // Ranks 0, 1 and 3 wait in their first all_reduce (the communicators'
  // warm-up) for rank 2, which failed: they must stop at once, and the
  // runner's teardown must not wait in ncclCommDestroy for them.
  auto loaded = loadPlan(faultTestPlan(4).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions o = oneGpu(graph);
    o.stepTimeoutSeconds = 60;
    o.testFailingConnectRank = 2;
    auto begin = std::chrono::steady_clock::now();
    auto gpu = cuda::CudaRunner::create(*loaded, o);
    ASSERT_FALSE(gpu) << (graph ? "graph" : "eager");
    EXPECT_NE(gpu.status().message().find("rank 2 (GPU "), std::string::npos)
        << gpu.status().message();
    EXPECT_NE(gpu.status().message().find("failed to connect on purpose"),
              std::string::npos)
        << gpu.status().message();
    EXPECT_LT(std::chrono::steady_clock::now() - begin,
              std::chrono::seconds(10))
        << "the peers should not wait for the 60 s timeout";
  }
}

// Checked before any GPU is touched, so on every machine.
TEST(SingleGpu, RankFaultsNeedTheTestCommunicator) {
  auto loaded = loadPlan(faultTestPlan(2).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  cuda::ExecutorOptions o;
  o.testStuckRank = 1;
  auto gpu = cuda::CudaRunner::create(*loaded, o);
  ASSERT_FALSE(gpu);
  EXPECT_NE(gpu.status().message().find("need the single-GPU test"),
            std::string::npos)
      << gpu.status().message();
  o = oneGpu(true);
  o.devices = {0, 1};
  gpu = cuda::CudaRunner::create(*loaded, o);
  ASSERT_FALSE(gpu);
  EXPECT_NE(gpu.status().message().find("runs every rank on one GPU"),
            std::string::npos)
      << gpu.status().message();
}

} // namespace
