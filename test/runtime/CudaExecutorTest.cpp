//===- CudaExecutorTest.cpp - Whole plans on the GPU vs the interpreter ---===//
//
// Each plan runs on the CPU reference interpreter and on the CUDA executor,
// eager and as a captured CUDA Graph, through the same code path; outputs
// must agree within the storage type's tolerance. NCCL runs at world size
// 1 (one GPU), so collectives are captured into the graph too. Without a
// usable GPU every test skips and says why; the plans, their CPU reference
// results and the executor's stream plan (StreamPlan.h: communicators per
// (group, stream), workspaces per stream, events for cross-stream Waits)
// are checked on every machine.
//
//===----------------------------------------------------------------------===//
#include "runtime/Interpreter.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/Executor.h"
#include "runtime/cuda/StreamPlan.h"
#include "test/runtime/GpuTestUtil.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {



/// Runs `steps` (function, inputs) on the interpreter and on the GPU in
/// eager and graph mode; compares every output. Skips after the
/// interpreter half when there is no GPU.
void expectSameOnGpu(
    const PlanBuilder &pb,
    const std::vector<std::pair<std::string, TensorMap>> &steps, double atol,
    double rtol, bool fuseEpilogues = true, int gemmAutotune = 0) {
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto cpu = ThreadedRunner::create(*loaded, /*seed=*/5);
  ASSERT_TRUE(cpu) << cpu.status().message();
  std::vector<TensorMap> want;
  for (const auto &[fn, in] : steps) {
    auto out = (*cpu)->run(fn, {in});
    ASSERT_TRUE(out) << out.status().message();
    want.push_back((*out)[0]);
  }
  // The plan and the reference are checked on every machine; the GPU half
  // needs a GPU.
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions options;
    options.graph = graph;
    options.weights.seed = 5;
    options.fuseEpilogues = fuseEpilogues;
    options.gemmAutotune = gemmAutotune;
    auto gpu = cuda::CudaRunner::create(*loaded, options);
    ASSERT_TRUE(gpu) << gpu.status().message();
    for (size_t s = 0; s < steps.size(); ++s) {
      auto out = (*gpu)->run(steps[s].first, {steps[s].second});
      ASSERT_TRUE(out) << out.status().message();
      for (const auto &[name, expected] : want[s]) {
        std::vector<float> a = (*out)[0].at(name).toFloats();
        std::vector<float> b = expected.toFloats();
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i)
          EXPECT_NEAR(a[i], b[i], atol + rtol * std::fabs(b[i]))
              << (graph ? "graph" : "eager") << " step " << s << " output "
              << name << " element " << i;
      }
    }
  }
}

PlanBuilder mlpPlan(DType dtype) {
  return megatronMlpPlan(/*tp=*/1, /*hidden=*/64, /*inter=*/128,
                         /*batch=*/2, /*tokens=*/8, dtype);
}

TEST(CudaExecutor, MlpMatchesInterpreterFp32) {
  TensorMap in{{"x", HostTensor::fromFloats(DType::F32, {2, 8, 64},
                                            wave(2 * 8 * 64, 0.1f))}};
  // fp32 storage; cuBLASLt may use a different summation order.
  expectSameOnGpu(mlpPlan(DType::F32), {{"prefill", in}}, 1e-5, 1e-4);
}

TEST(CudaExecutor, MlpMatchesInterpreterBf16) {
  TensorMap in{{"x", HostTensor::fromFloats(DType::BF16, {2, 8, 64},
                                            wave(2 * 8 * 64, 0.3f))}};
  // bf16 rounds each intermediate tensor (8 mantissa bits): 2^-7 relative,
  // a few roundings deep.
  expectSameOnGpu(mlpPlan(DType::BF16), {{"prefill", in}}, 2e-3, 3e-2);
}

// A fused projection's matmul reads its pack: one allocation, the second
// piece at byte 192 (not a multiple of 256), which the pieces' own matmuls
// read too.
TEST(CudaExecutor, MatmulOverParameterPackMatchesInterpreter) {
  TensorMap in{{"x", HostTensor::fromFloats(DType::F32, {2, 3, 8},
                                            wave(2 * 3 * 8, 0.2f))}};
  expectSameOnGpu(packedProjectionPlan(/*tp=*/1), {{"prefill", in}}, 1e-5,
                  1e-4);
}

// A piece set by name is written inside its pack: the next step, eager or
// a graph captured before the change, reads the new values through both.
TEST(CudaExecutor, SetParameterOfAPieceReachesItsPack) {
  auto loaded = loadPlan(packedProjectionPlan(/*tp=*/1).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  TensorMap in{{"x", HostTensor::fromFloats(DType::F32, {2, 3, 8},
                                            wave(2 * 3 * 8, 0.2f))}};
  HostTensor newK =
      HostTensor::fromFloats(DType::F32, {4, 8}, wave(4 * 8, 2.5f));
  auto cpu = ThreadedRunner::create(*loaded, /*seed=*/5);
  ASSERT_TRUE(cpu) << cpu.status().message();
  auto before = (*cpu)->run("prefill", {in});
  ASSERT_TRUE(before) << before.status().message();
  ASSERT_TRUE((*cpu)->rank(0).setParameter("k_proj.weight", newK));
  auto after = (*cpu)->run("prefill", {in});
  ASSERT_TRUE(after) << after.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions options;
    options.graph = graph;
    options.weights.seed = 5;
    auto gpu = cuda::CudaRunner::create(*loaded, options);
    ASSERT_TRUE(gpu) << gpu.status().message();
    for (int step = 0; step < 2; ++step) {
      if (step == 1) {
        ASSERT_TRUE((*gpu)->setParameter(0, "k_proj.weight", newK));
      }
      auto out = (*gpu)->run("prefill", {in});
      ASSERT_TRUE(out) << out.status().message();
      const TensorMap &want = step == 0 ? (*before)[0] : (*after)[0];
      for (const auto &[name, expected] : want) {
        std::vector<float> a = (*out)[0].at(name).toFloats();
        std::vector<float> b = expected.toFloats();
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i)
          EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-4 * std::fabs(b[i]))
              << (graph ? "graph" : "eager") << " step " << step << " output "
              << name << " element " << i;
      }
    }
  }
}

// GPT-2's MLP as braid-fuse-compute leaves it: y = gelu(x W1 + b1) W2 + b2,
// both epilogues on the matmuls (PlanTestUtil's gpt2MlpPlan). cuBLASLt
// applies a tanh GELU and the biases; an erf GELU, or fuseEpilogues off,
// runs them as kernels after the GEMM.
TEST(CudaExecutor, FusedEpiloguesMatchInterpreter) {
  for (DType dt : {DType::F32, DType::BF16}) {
    TensorMap in{{"x", HostTensor::fromFloats(dt, {2, 8, 64},
                                              wave(2 * 8 * 64, 0.2f))}};
    double atol = dt == DType::F32 ? 1e-5 : 2e-3;
    double rtol = dt == DType::F32 ? 1e-4 : 3e-2;
    for (bool tanh : {true, false})
      for (bool fuse : {true, false})
        expectSameOnGpu(gpt2MlpPlan(dt, tanh), {{"prefill", in}}, atol, rtol,
                        fuse);
  }
}

// GEMM autotuning (ExecutorOptions::gemmAutotune) times cuBLASLt's
// candidates at set-up and keeps the fastest: another algorithm, the same
// answer within the GEMM's rounding. Plain, fused-epilogue and
// pack-offset (not 256-byte aligned) GEMMs.
TEST(CudaExecutor, AutotunedGemmsMatchInterpreter) {
  TensorMap x{{"x", HostTensor::fromFloats(DType::BF16, {2, 8, 64},
                                           wave(2 * 8 * 64, 0.3f))}};
  expectSameOnGpu(mlpPlan(DType::BF16), {{"prefill", x}}, 2e-3, 3e-2,
                  /*fuseEpilogues=*/true, /*gemmAutotune=*/8);
  TensorMap g{{"x", HostTensor::fromFloats(DType::F32, {2, 8, 64},
                                           wave(2 * 8 * 64, 0.2f))}};
  expectSameOnGpu(gpt2MlpPlan(DType::F32, /*tanhGelu=*/true), {{"prefill", g}},
                  1e-5, 1e-4, /*fuseEpilogues=*/true, /*gemmAutotune=*/8);
  TensorMap p{{"x", HostTensor::fromFloats(DType::F32, {2, 3, 8},
                                           wave(2 * 3 * 8, 0.2f))}};
  expectSameOnGpu(packedProjectionPlan(/*tp=*/1), {{"prefill", p}}, 1e-5, 1e-4,
                  /*fuseEpilogues=*/true, /*gemmAutotune=*/8);
}

// An output that is a state slot's storage is the slot's entry value, read
// before the copy-back stores this step's silu(x) (the interpreter's
// order, which InterpreterTest checks against the arithmetic).
TEST(CudaExecutor, AnOutputOfAStateSlotIsItsValueBeforeTheCopyBack) {
  PlanBuilder pb = previousValuePlan(64);
  auto step = [](float phase) {
    return TensorMap{
        {"x", HostTensor::fromFloats(DType::F32, {64}, wave(64, phase))}};
  };
  expectSameOnGpu(
      pb, {{"step", step(0.0f)}, {"step", step(0.5f)}, {"step", step(0.9f)}},
      1e-6, 1e-6);
}

// A KV cache in state across prefill (4 tokens at position 0) and two decode
// steps (positions 4 and 5): one captured decode graph serves both, since
// the position is a device tensor.
TEST(CudaExecutor, KvCacheAcrossPrefillAndDecode) {
  PlanBuilder pb(1);
  int kSlot = pb.stateSlot("k_cache", {1, 8, 2, 16});
  int vSlot = pb.stateSlot("v_cache", {1, 8, 2, 16});
  for (auto [name, s] : {std::pair<const char *, int64_t>{"prefill", 4},
                         {"decode", 1}}) {
    FnBuilder f = pb.function(name);
    int q = f.input("q", {1, s, 4, 16});
    int k = f.input("k", {1, s, 2, 16});
    int v = f.input("v", {1, s, 2, 16});
    int pos = f.input("pos", {1}, DType::I32);
    int kc = f.state(kSlot, pb.plan()), vc = f.state(vSlot, pb.plan());
    int o = f.tensor({1, s, 4, 16});
    int kc2 = f.tensor({1, 8, 2, 16}, DType::F32, TensorKind::State, kSlot);
    int vc2 = f.tensor({1, 8, 2, 16}, DType::F32, TensorKind::State, vSlot);
    plan::OpT &att = f.op(OpCode::Attention, {q, k, v, kc, vc, pos},
                          {o, kc2, vc2});
    att.causal = true;
    att.num_heads = 4;
    att.num_kv_heads = 2;
    att.head_dim = 16;
    f.output("o", o);
    for (auto [slot, in, out] : {std::tuple{kSlot, kc, kc2},
                                 std::tuple{vSlot, vc, vc2}}) {
      auto b = std::make_unique<plan::StateBindingT>();
      b->slot = slot;
      b->input = in;
      b->output = out;
      f.fn().state.push_back(std::move(b));
    }
  }
  auto step = [](int64_t s, int64_t pos, float phase) {
    TensorMap in;
    in["q"] = HostTensor::fromFloats(DType::F32, {1, s, 4, 16},
                                     wave(s * 64, phase));
    in["k"] = HostTensor::fromFloats(DType::F32, {1, s, 2, 16},
                                     wave(s * 32, phase + 1));
    in["v"] = HostTensor::fromFloats(DType::F32, {1, s, 2, 16},
                                     wave(s * 32, phase + 2));
    in["pos"] = HostTensor::fromInts(DType::I32, {1}, {pos});
    return in;
  };
  expectSameOnGpu(pb,
                  {{"prefill", step(4, 0, 0.0f)},
                   {"decode", step(1, 4, 0.5f)},
                   {"decode", step(1, 5, 0.9f)}},
                  1e-5, 1e-4);
}

// Hand-scheduled: stream 1 runs an async all_reduce of the first matmul
// while stream 0 computes an independent matmul; events order the
// cross-stream edges (record after the producer, wait before the consumer).
TEST(CudaExecutor, MultiStreamCaptureWithEventsAndAsyncCollective) {
  PlanBuilder pb(1);
  pb.group("tp", 1);
  int w = pb.param("w", {32, 32}, {32, 32});
  FnBuilder f = pb.function("step");
  int x = f.input("x", {16, 32}), x2 = f.input("x2", {16, 32});
  int m1 = f.tensor({16, 32}), r = f.tensor({16, 32});
  int m2 = f.tensor({16, 32}), y = f.tensor({16, 32});
  int wt = f.param(w, pb.plan());
  f.op(OpCode::Matmul, {x, wt}, {m1}).record_events = {0};
  plan::OpT &start = f.op(OpCode::AllReduceStart, {m1}, {r});
  start.group = 0;
  start.handle = 0;
  start.stream = 1;
  start.wait_events = {0};
  start.record_events = {1};
  f.op(OpCode::Matmul, {x2, wt}, {m2});
  plan::OpT &wait = f.op(OpCode::Wait, {}, {});
  wait.handle = 0;
  wait.wait_events = {1};
  f.op(OpCode::Add, {r, m2}, {y});
  f.output("y", y);
  f.fn().num_streams = 2;
  f.fn().num_events = 2;
  f.fn().num_handles = 1;
  TensorMap in{
      {"x", HostTensor::fromFloats(DType::F32, {16, 32}, wave(512, 0.2f))},
      {"x2", HostTensor::fromFloats(DType::F32, {16, 32}, wave(512, 0.7f))}};
  expectSameOnGpu(pb, {{"step", in}, {"step", in}}, 1e-5, 1e-4);
}

// Two streams that both run GEMMs (each with its own cuBLASLt workspace)
// and collectives on both streams whose Waits are on the other stream, with
// no plan event for the executor to lean on: the Wait alone must make its
// stream wait for the collective. Schedule (stream: op):
//   0: m1 = x @ w1                               record e0
//   1: wait e0; r = all_reduce_start(m1) h0      (communicator (tp, 1))
//   1: m3 = x2 @ w2                              record e1
//   0: m2 = x2 @ w1                              (concurrent with m3)
//   0: wait h0                                   (start on stream 1)
//   0: y0 = r + m2
//   0: wait e1; y1 = y0 + m3
//   0: g = all_gather_start(y1) h1               (communicator (tp, 0))
//   1: wait h1                                   (start on stream 0)
//   1: z = g * g
// Outputs y1 (stream 0) and z (stream 1, read after the final join).
PlanBuilder crossStreamWaitPlan() {
  PlanBuilder pb(1);
  int tp = pb.group("tp", 1);
  int w1 = pb.param("w1", {512, 32}, {512, 32});
  int w2 = pb.param("w2", {512, 32}, {512, 32});
  FnBuilder f = pb.function("step");
  int x = f.input("x", {16, 512}), x2 = f.input("x2", {16, 512});
  int wt1 = f.param(w1, pb.plan()), wt2 = f.param(w2, pb.plan());
  int m1 = f.tensor({16, 32}), r = f.tensor({16, 32});
  int m2 = f.tensor({16, 32}), m3 = f.tensor({16, 32});
  int y0 = f.tensor({16, 32}), y1 = f.tensor({16, 32});
  int g = f.tensor({16, 32}), z = f.tensor({16, 32});
  f.op(OpCode::Matmul, {x, wt1}, {m1}).record_events = {0};
  plan::OpT &ar = f.op(OpCode::AllReduceStart, {m1}, {r});
  ar.group = tp;
  ar.handle = 0;
  ar.stream = 1;
  ar.wait_events = {0};
  plan::OpT &mm3 = f.op(OpCode::Matmul, {x2, wt2}, {m3});
  mm3.stream = 1;
  mm3.record_events = {1};
  f.op(OpCode::Matmul, {x2, wt1}, {m2});
  f.op(OpCode::Wait, {}, {}).handle = 0;
  f.op(OpCode::Add, {r, m2}, {y0});
  f.op(OpCode::Add, {y0, m3}, {y1}).wait_events = {1};
  plan::OpT &ag = f.op(OpCode::AllGatherStart, {y1}, {g});
  ag.group = tp;
  ag.handle = 1;
  ag.dim = 0;
  plan::OpT &wait1 = f.op(OpCode::Wait, {}, {});
  wait1.handle = 1;
  wait1.stream = 1;
  f.op(OpCode::Mul, {g, g}, {z}).stream = 1;
  f.output("y", y1);
  f.output("z", z);
  f.fn().num_streams = 2;
  f.fn().num_events = 2;
  f.fn().num_handles = 2;
  return pb;
}

TensorMap crossStreamWaitInputs() {
  return {{"x",
           HostTensor::fromFloats(DType::F32, {16, 512}, wave(16 * 512, 0.4f))},
          {"x2", HostTensor::fromFloats(DType::F32, {16, 512},
                                        wave(16 * 512, 1.1f))}};
}

TEST(CudaExecutor, CrossStreamWaitsAndGemmsOnTwoStreams) {
  // fp32, K = 512: cuBLASLt may split K differently from the interpreter.
  expectSameOnGpu(
      crossStreamWaitPlan(),
      {{"step", crossStreamWaitInputs()}, {"step", crossStreamWaitInputs()}},
      1e-4, 1e-4);
}

//===----------------------------------------------------------------------===//
// The stream plan (no GPU needed)
//===----------------------------------------------------------------------===//

const plan::Plan &rootOf(const std::vector<uint8_t> &bytes) {
  return *plan::GetPlan(bytes.data());
}

TEST(CudaStreamPlan, CrossStreamWaitPlanIsSafeForEveryStrictOrder) {
  // The loader's schedule check accepts it (a Wait orders its stream after
  // the start), and the strict interpreter gives plan order's bits.
  auto loaded = loadPlan(crossStreamWaitPlan().finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto reference = ThreadedRunner::create(*loaded, 5);
  ASSERT_TRUE(reference) << reference.status().message();
  auto want = (*reference)->run("step", {crossStreamWaitInputs()});
  ASSERT_TRUE(want) << want.status().message();
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    auto strict = ThreadedRunner::create(*loaded, 5);
    ASSERT_TRUE(strict) << strict.status().message();
    (*strict)->setStrict(true, seed);
    auto got = (*strict)->run("step", {crossStreamWaitInputs()});
    ASSERT_TRUE(got) << got.status().message();
    for (const char *name : {"y", "z"})
      EXPECT_EQ((*got)[0].at(name).bytes, (*want)[0].at(name).bytes)
          << name << " seed " << seed;
  }
}

TEST(CudaStreamPlan, WaitOnAnotherStreamWaitsForAnEventAfterTheStart) {
  std::vector<uint8_t> bytes = crossStreamWaitPlan().finish();
  const plan::Plan &p = rootOf(bytes);
  std::vector<cuda::CommKey> comms = cuda::planCommunicators(p);
  ASSERT_EQ(comms, (std::vector<cuda::CommKey>{{0, 0}, {0, 1}}));
  auto sp = cuda::planFunctionStreams(*p.functions()->Get(0), comms);
  ASSERT_TRUE(sp) << sp.status().message();
  ASSERT_EQ(sp->ops.size(), 10u);
  EXPECT_EQ(sp->numHandleEvents, 2);
  EXPECT_EQ(sp->forkedStreams, (std::vector<int>{1}));
  // all_reduce_start on stream 1 (communicator 1), waited on stream 0.
  EXPECT_EQ(sp->ops[1].comm, 1);
  EXPECT_EQ(sp->ops[1].waitEvents, (std::vector<int>{0}));
  EXPECT_EQ(sp->ops[1].recordHandleEvent, 0);
  EXPECT_EQ(sp->ops[4].waitHandleEvent, 0);
  EXPECT_EQ(sp->ops[4].recordHandleEvent, -1);
  // all_gather_start on stream 0 (communicator 0), waited on stream 1.
  EXPECT_EQ(sp->ops[7].comm, 0);
  EXPECT_EQ(sp->ops[7].recordHandleEvent, 1);
  EXPECT_EQ(sp->ops[8].waitHandleEvent, 1);
  // Plan events pass through; compute ops have no communicator.
  EXPECT_EQ(sp->ops[0].recordEvents, (std::vector<int>{0}));
  EXPECT_EQ(sp->ops[2].recordEvents, (std::vector<int>{1}));
  EXPECT_EQ(sp->ops[6].waitEvents, (std::vector<int>{1}));
  for (int i : {0, 2, 3, 5, 6, 9})
    EXPECT_EQ(sp->ops[size_t(i)].comm, -1) << "op " << i;
  // Both streams run GEMMs: one workspace each.
  EXPECT_EQ(cuda::planGemmStreams(p), (std::vector<bool>{true, true}));
}

TEST(CudaStreamPlan, WaitOnTheStartsStreamNeedsNoEvent) {
  // The older hand-scheduled plan shape: start and Wait on one stream, or
  // a Wait that the plan already orders with its own event.
  PlanBuilder pb(1);
  int tp = pb.group("tp", 1);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {4}), a = f.tensor({4}), b = f.tensor({4});
  plan::OpT &s0 = f.op(OpCode::AllReduceStart, {x}, {a});
  s0.group = tp;
  s0.handle = 0;
  s0.stream = 1;
  f.op(OpCode::Wait, {}, {}).handle = 0;
  f.fn().ops[1]->stream = 1; // same stream as its start
  // The handle is reused after its Wait: the next Wait pairs with the
  // latest start, here on stream 1 and waited on stream 0.
  plan::OpT &s1 = f.op(OpCode::AllReduceStart, {a}, {b});
  s1.group = tp;
  s1.handle = 0;
  s1.stream = 1;
  s1.record_events = {0};
  plan::OpT &w1 = f.op(OpCode::Wait, {}, {});
  w1.handle = 0;
  w1.wait_events = {0};
  f.output("b", b);
  f.fn().num_streams = 2;
  f.fn().num_events = 1;
  f.fn().num_handles = 1;
  std::vector<uint8_t> bytes = pb.finish();
  const plan::Plan &p = rootOf(bytes);
  auto comms = cuda::planCommunicators(p);
  ASSERT_EQ(comms, (std::vector<cuda::CommKey>{{0, 1}}));
  auto sp = cuda::planFunctionStreams(*p.functions()->Get(0), comms);
  ASSERT_TRUE(sp) << sp.status().message();
  EXPECT_EQ(sp->ops[0].recordHandleEvent, -1);
  EXPECT_EQ(sp->ops[1].waitHandleEvent, -1);
  // Even with the plan's own event, the executor does not rely on it.
  EXPECT_EQ(sp->ops[2].recordHandleEvent, 0);
  EXPECT_EQ(sp->ops[3].waitHandleEvent, 0);
  EXPECT_EQ(sp->ops[3].waitEvents, (std::vector<int>{0}));
  EXPECT_EQ(sp->numHandleEvents, 1);
  EXPECT_EQ(sp->forkedStreams, (std::vector<int>{1}));
  // No matmul: no workspace on either stream.
  EXPECT_EQ(cuda::planGemmStreams(p), (std::vector<bool>{false, false}));
}

TEST(CudaStreamPlan, OneCommunicatorPerGroupInstanceAndStream) {
  // World 4 as a 2 x 2 mesh: tp = {0,1},{2,3} (stride 1), dp = {0,2},{1,3}
  // (stride 2). Collectives of tp on streams 1 and 2, of dp on streams 0
  // and 1, spread over two functions.
  PlanBuilder pb(4);
  int tp = pb.group("tp", 2, 1), dp = pb.group("dp", 2, 2);
  auto collective = [](FnBuilder &f, OpCode code, int group, int stream) {
    int in = f.tensor({4}), out = f.tensor({4});
    plan::OpT &op = f.op(code, {in}, {out});
    op.group = group;
    op.stream = stream;
    return out;
  };
  {
    FnBuilder f = pb.function("prefill");
    f.fn().num_streams = 3;
    collective(f, OpCode::AllReduce, tp, 1);
    collective(f, OpCode::AllReduce, dp, 1);
    collective(f, OpCode::AllReduce, tp, 1); // same communicator again
    f.op(OpCode::Matmul, {f.tensor({2, 2}), f.tensor({2, 2})},
         {f.tensor({2, 2})})
        .stream = 2;
  }
  {
    FnBuilder f = pb.function("decode");
    f.fn().num_streams = 3;
    f.fn().num_handles = 1;
    int out = collective(f, OpCode::AllReduceStart, tp, 2);
    (void)out;
    f.fn().ops.back()->handle = 0;
    f.op(OpCode::Wait, {}, {}).handle = 0;
    collective(f, OpCode::AllGather, dp, 0);
  }
  std::vector<uint8_t> bytes = pb.finish();
  const plan::Plan &p = rootOf(bytes);
  // Creation order, the same on every rank: sorted by (group, stream).
  std::vector<cuda::CommKey> comms = cuda::planCommunicators(p);
  EXPECT_EQ(comms,
            (std::vector<cuda::CommKey>{{tp, 1}, {tp, 2}, {dp, 0}, {dp, 1}}));
  // One id per (group instance, stream): tp's instances are keyed 0 and 2
  // (group 0, bases 0 and 2), dp's 4 and 5 (group 1, bases 0 and 1).
  EXPECT_EQ(
      cuda::planCommunicatorIds(p),
      (std::vector<cuda::CommIdKey>{
          {0, 1}, {0, 2}, {2, 1}, {2, 2}, {4, 0}, {4, 1}, {5, 0}, {5, 1}}));
  // The members of an instance use the same id; other instances another.
  auto idOf = [&](int group, int stream, int rank) {
    return cuda::communicatorIdOf(p, {group, stream}, rank);
  };
  EXPECT_EQ(idOf(tp, 1, 0), idOf(tp, 1, 1));
  EXPECT_EQ(idOf(tp, 1, 2), idOf(tp, 1, 3));
  EXPECT_FALSE(idOf(tp, 1, 0) == idOf(tp, 1, 2));
  EXPECT_FALSE(idOf(tp, 1, 0) == idOf(tp, 2, 0));
  EXPECT_EQ(idOf(dp, 0, 0), idOf(dp, 0, 2));
  EXPECT_EQ(idOf(dp, 0, 1), idOf(dp, 0, 3));
  EXPECT_EQ(idOf(dp, 1, 3), (cuda::CommIdKey{5, 1}));
  // Ops map to their (group, own stream) communicator.
  auto prefill = cuda::planFunctionStreams(*p.functions()->Get(0), comms);
  ASSERT_TRUE(prefill) << prefill.status().message();
  EXPECT_EQ(prefill->ops[0].comm, 0);
  EXPECT_EQ(prefill->ops[1].comm, 3);
  EXPECT_EQ(prefill->ops[2].comm, 0);
  EXPECT_EQ(prefill->forkedStreams, (std::vector<int>{1, 2}));
  auto decode = cuda::planFunctionStreams(*p.functions()->Get(1), comms);
  ASSERT_TRUE(decode) << decode.status().message();
  EXPECT_EQ(decode->ops[0].comm, 1);
  EXPECT_EQ(decode->ops[1].comm, -1); // a Wait issues nothing
  EXPECT_EQ(decode->ops[1].waitHandleEvent, 0);
  EXPECT_EQ(decode->ops[2].comm, 2);
  EXPECT_EQ(decode->forkedStreams, (std::vector<int>{2}));
  // Only stream 2 runs a matmul.
  EXPECT_EQ(cuda::planGemmStreams(p), (std::vector<bool>{false, false, true}));
}

TEST(CudaStreamPlan, SingleStreamPlanForksNothing) {
  std::vector<uint8_t> bytes = mlpPlan(DType::F32).finish();
  const plan::Plan &p = rootOf(bytes);
  auto comms = cuda::planCommunicators(p);
  ASSERT_EQ(comms, (std::vector<cuda::CommKey>{{0, 0}}));
  EXPECT_EQ(cuda::planCommunicatorIds(p),
            (std::vector<cuda::CommIdKey>{{0, 0}}));
  auto sp = cuda::planFunctionStreams(*p.functions()->Get(0), comms);
  ASSERT_TRUE(sp) << sp.status().message();
  EXPECT_TRUE(sp->forkedStreams.empty());
  EXPECT_EQ(sp->numHandleEvents, 0);
  EXPECT_EQ(cuda::planGemmStreams(p), (std::vector<bool>{true}));
}

TEST(CudaStreamPlan, MalformedSchedulesAreErrors) {
  auto planOf = [](auto edit) {
    PlanBuilder pb(1);
    pb.group("tp", 1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {4}), a = f.tensor({4});
    plan::OpT &s = f.op(OpCode::AllReduceStart, {x}, {a});
    s.group = 0;
    s.handle = 0;
    f.op(OpCode::Wait, {}, {}).handle = 0;
    f.fn().num_handles = 1;
    edit(f.fn());
    return pb.finish();
  };
  auto errorOf = [](const std::vector<uint8_t> &bytes) {
    const plan::Plan &p = rootOf(bytes);
    auto sp = cuda::planFunctionStreams(*p.functions()->Get(0),
                                        cuda::planCommunicators(p));
    return sp ? std::string() : sp.status().message();
  };
  EXPECT_EQ(errorOf(planOf([](plan::FunctionT &) {})), "");
  std::string wait = errorOf(planOf([](plan::FunctionT &fn) {
    fn.ops[0]->opcode = OpCode::AllReduce; // the Wait loses its start
    fn.ops[0]->handle = -1;
  }));
  EXPECT_NE(wait.find("waits on handle 0 with no start"), std::string::npos)
      << wait;
  std::string stream =
      errorOf(planOf([](plan::FunctionT &fn) { fn.ops[1]->stream = 1; }));
  EXPECT_NE(stream.find("op 1: stream 1 of 1"), std::string::npos) << stream;
  std::string event = errorOf(
      planOf([](plan::FunctionT &fn) { fn.ops[1]->wait_events = {3}; }));
  EXPECT_NE(event.find("waits on event 3 of 0"), std::string::npos) << event;
  // A wait on an event with no earlier record is a no-op, not an error
  // (the loader refuses such plans; the executor must not capture one).
  std::vector<uint8_t> early = planOf([](plan::FunctionT &fn) {
    fn.num_events = 1;
    fn.ops[0]->wait_events = {0};
    fn.ops[1]->record_events = {0};
  });
  const plan::Plan &p = rootOf(early);
  auto sp = cuda::planFunctionStreams(*p.functions()->Get(0),
                                      cuda::planCommunicators(p));
  ASSERT_TRUE(sp) << sp.status().message();
  EXPECT_TRUE(sp->ops[0].waitEvents.empty());
  EXPECT_EQ(sp->ops[1].recordEvents, (std::vector<int>{0}));
}

TEST(CudaExecutor, DecodePastTheCacheIsAnErrorNotAHang) {
  BRAID_SKIP_WITHOUT_GPU();
  PlanBuilder pb(1);
  int kSlot = pb.stateSlot("k_cache", {1, 2, 1, 8});
  int vSlot = pb.stateSlot("v_cache", {1, 2, 1, 8});
  FnBuilder f = pb.function("decode");
  int q = f.input("q", {1, 1, 1, 8}), k = f.input("k", {1, 1, 1, 8});
  int v = f.input("v", {1, 1, 1, 8}), pos = f.input("pos", {1}, DType::I32);
  int kc = f.state(kSlot, pb.plan()), vc = f.state(vSlot, pb.plan());
  int o = f.tensor({1, 1, 1, 8});
  int kc2 = f.tensor({1, 2, 1, 8}, DType::F32, TensorKind::State, kSlot);
  int vc2 = f.tensor({1, 2, 1, 8}, DType::F32, TensorKind::State, vSlot);
  plan::OpT &att = f.op(OpCode::Attention, {q, k, v, kc, vc, pos},
                        {o, kc2, vc2});
  att.num_heads = 1;
  att.num_kv_heads = 1;
  att.head_dim = 8;
  f.output("o", o);
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto gpu = cuda::CudaRunner::create(*loaded, {});
  ASSERT_TRUE(gpu) << gpu.status().message();
  TensorMap in{{"q", HostTensor(DType::F32, {1, 1, 1, 8})},
               {"k", HostTensor(DType::F32, {1, 1, 1, 8})},
               {"v", HostTensor(DType::F32, {1, 1, 1, 8})},
               {"pos", HostTensor::fromInts(DType::I32, {1}, {2})}};
  auto out = (*gpu)->run("decode", {in});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("outside max_seq 2"),
            std::string::npos)
      << out.status().message();
}

/// x through `ops` SiLUs, each into a tensor of its own: a step far longer
/// than the eager launch window and than CUDA's launch queue.
PlanBuilder longChainPlan(int ops) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("step");
  int x = f.input("x", {4});
  for (int i = 0; i < ops; ++i) {
    int y = f.tensor({4});
    f.op(OpCode::Silu, {x}, {y});
    x = y;
  }
  f.output("y", x);
  return pb;
}

// Eager steps wait for the launch window (LaunchWindow.h) every few ops
// once it is full; the results are still the interpreter's.
TEST(CudaExecutor, LongEagerStepsThroughTheLaunchWindowMatchInterpreter) {
  TensorMap in{{"x", HostTensor::fromFloats(DType::F32, {4}, wave(4, 0.3f))}};
  expectSameOnGpu(longChainPlan(3000), {{"step", in}, {"step", in}}, 1e-6,
                  1e-5);
}

// Behind a device that stalls far longer than the step timeout (what a
// collective whose peer never comes looks like to its stream), with more
// launches to enqueue than CUDA's launch queue holds, an eager step still
// ends near its timeout: the host waits for the launch window, where the
// timeout is checked, instead of blocking in a launch until the stall ends.
TEST(CudaExecutor, EagerStepBehindAStalledDeviceEndsAtTheTimeout) {
  auto loaded = loadPlan(longChainPlan(4000).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  cuda::ExecutorOptions o;
  o.graph = false;
  o.stepTimeoutSeconds = 2;
  o.testStallSeconds = 15;
  auto gpu = cuda::CudaRunner::create(*loaded, o);
  ASSERT_TRUE(gpu) << gpu.status().message();
  TensorMap in{{"x", HostTensor::fromFloats(DType::F32, {4}, wave(4, 0.3f))}};
  auto start = std::chrono::steady_clock::now();
  auto out = (*gpu)->run("step", {in});
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("did not finish within 2 s"),
            std::string::npos)
      << out.status().message();
  EXPECT_LT(seconds, 8) << "the step should end near its 2 s timeout, not "
                           "when the 15 s stall does";
}

TEST(CudaExecutor, NoGpuIsAClearError) {
  if (cuda::cudaDeviceAvailable())
    GTEST_SKIP() << "a GPU is present; this checks the message without one";
  auto loaded = loadPlan(mlpPlan(DType::F32).finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto gpu = cuda::CudaRunner::create(*loaded, {});
  ASSERT_FALSE(gpu);
  EXPECT_FALSE(gpu.status().message().empty());
}

} // namespace
