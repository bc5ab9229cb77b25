//===- CudaExecutorTest.cpp - Whole plans on the GPU vs the interpreter ---===//
//
// Each plan runs on the CPU reference interpreter and on the CUDA executor,
// eager and as a captured CUDA Graph, through the same code path; outputs
// must agree within the storage type's tolerance. NCCL runs at world size
// 1 (one GPU), so collectives are captured into the graph too. Without a
// usable GPU every test skips and says why.
//
//===----------------------------------------------------------------------===//
#include "runtime/Interpreter.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/Executor.h"
#include "runtime/cuda/GemmFusion.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    ::braid::rt::Status braidGpu_ = ::braid::rt::cuda::cudaDeviceAvailable();  \
    if (!braidGpu_)                                                            \
      GTEST_SKIP() << "no usable GPU: " << braidGpu_.message();                \
  } while (0)

std::vector<float> wave(int64_t n, float phase) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(std::sin(0.37f * float(i) + phase) * 2.0f);
  return v;
}

/// Runs `steps` (function, inputs) on the interpreter and on the GPU in
/// eager and graph mode; compares every output. Skips after the
/// interpreter half when there is no GPU.
void expectSameOnGpu(const PlanBuilder &pb,
                     const std::vector<std::pair<std::string, TensorMap>> &steps,
                     double atol, double rtol, bool fuseEpilogues = true) {
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
  SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    cuda::ExecutorOptions options;
    options.graph = graph;
    options.seed = 5;
    options.fuseEpilogues = fuseEpilogues;
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

// GPT-2's MLP: y = gelu_tanh(x W1 + b1) W2 + b2. The first matmul fuses
// bias and GELU into its cuBLASLt epilogue, the second its bias.
PlanBuilder gpt2MlpPlan(DType dt) {
  PlanBuilder pb;
  int w1 = pb.param("h.0.mlp.c_fc.weight", {64, 128}, {64, 128}, dt);
  int b1 = pb.param("h.0.mlp.c_fc.bias", {128}, {128}, dt);
  int w2 = pb.param("h.0.mlp.c_proj.weight", {128, 64}, {128, 64}, dt);
  int b2 = pb.param("h.0.mlp.c_proj.bias", {64}, {64}, dt);
  FnBuilder f = pb.function("prefill");
  int x = f.input("x", {2, 8, 64}, dt);
  int h = f.tensor({2, 8, 128}, dt), hb = f.tensor({2, 8, 128}, dt),
      g = f.tensor({2, 8, 128}, dt), y = f.tensor({2, 8, 64}, dt),
      yb = f.tensor({2, 8, 64}, dt);
  f.op(OpCode::Matmul, {x, f.param(w1, pb.plan())}, {h});
  f.op(OpCode::Add, {h, f.param(b1, pb.plan())}, {hb});
  f.op(OpCode::Gelu, {hb}, {g}).gelu_approximation =
      plan::GeluApproximation::Tanh;
  f.op(OpCode::Matmul, {g, f.param(w2, pb.plan())}, {y});
  f.op(OpCode::Add, {y, f.param(b2, pb.plan())}, {yb});
  f.output("y", yb);
  return pb;
}

std::map<int, cuda::GemmEpilogue> epiloguesOf(const PlanBuilder &pb) {
  std::vector<uint8_t> bytes = pb.finish();
  return cuda::findGemmEpilogues(*plan::GetPlan(bytes.data())->functions()->Get(0));
}

TEST(CudaGemmFusion, FindsBiasGeluAndBiasChains) {
  auto chains = epiloguesOf(gpt2MlpPlan(DType::BF16));
  ASSERT_EQ(chains.size(), 2u);
  const cuda::GemmEpilogue &up = chains.at(0), &down = chains.at(3);
  EXPECT_TRUE(up.gelu);
  EXPECT_EQ(up.absorbed, (std::vector<int>{1, 2}));
  // Tensors in creation order: x, h, hb, g, y, yb, then the parameters.
  EXPECT_EQ(up.output, 3); // g, gelu's result
  EXPECT_FALSE(down.gelu);
  EXPECT_EQ(down.absorbed, (std::vector<int>{4}));
  EXPECT_EQ(down.output, 5); // yb, the output y + b2
  EXPECT_GE(up.bias, 0);
  EXPECT_GE(down.bias, 0);
}

TEST(CudaGemmFusion, LeavesObservableChainsAlone) {
  // The matmul's result is also an output: the add must stay.
  PlanBuilder seen = gpt2MlpPlan(DType::BF16);
  seen.plan().functions[0]->outputs.push_back(
      std::make_unique<plan::BindingT>());
  seen.plan().functions[0]->outputs.back()->name = "h";
  seen.plan().functions[0]->outputs.back()->tensor = 1;
  EXPECT_EQ(epiloguesOf(seen).count(0), 0u);

  // erf GELU: cuBLASLt's is tanh; only the bias fuses.
  PlanBuilder erf = gpt2MlpPlan(DType::BF16);
  erf.plan().functions[0]->ops[2]->gelu_approximation =
      plan::GeluApproximation::None;
  EXPECT_EQ(epiloguesOf(erf).at(0).absorbed, (std::vector<int>{1}));

  // An event between the matmul and its add.
  PlanBuilder event = gpt2MlpPlan(DType::BF16);
  event.plan().functions[0]->num_events = 1;
  event.plan().functions[0]->ops[0]->record_events = {0};
  EXPECT_EQ(epiloguesOf(event).count(0), 0u);

  // Several streams: the memory plan's lifetimes follow the stream order.
  PlanBuilder streams = gpt2MlpPlan(DType::BF16);
  streams.plan().functions[0]->num_streams = 2;
  EXPECT_TRUE(epiloguesOf(streams).empty());

  // The fused result's buffer overlaps the matmul's input: the GEMM would
  // overwrite x while reading it.
  PlanBuilder alias = gpt2MlpPlan(DType::BF16);
  auto &tensors = alias.plan().functions[0]->tensors;
  tensors[3]->buffer_offset = tensors[0]->buffer_offset; // g over x
  EXPECT_EQ(epiloguesOf(alias).count(0), 0u);
  EXPECT_EQ(epiloguesOf(alias).count(3), 1u);

  // A residual add ([2, 8, 64] + [2, 8, 64]) is not a bias.
  PlanBuilder residual = gpt2MlpPlan(DType::BF16);
  residual.plan().functions[0]->ops[4]->operands[1] = 0; // y + x
  EXPECT_EQ(epiloguesOf(residual).count(3), 0u);
}

TEST(CudaExecutor, FusedEpiloguesMatchInterpreter) {
  for (DType dt : {DType::F32, DType::BF16}) {
    TensorMap in{{"x", HostTensor::fromFloats(dt, {2, 8, 64},
                                              wave(2 * 8 * 64, 0.2f))}};
    double atol = dt == DType::F32 ? 1e-5 : 2e-3;
    double rtol = dt == DType::F32 ? 1e-4 : 3e-2;
    for (bool fuse : {true, false})
      expectSameOnGpu(gpt2MlpPlan(dt), {{"prefill", in}}, atol, rtol, fuse);
  }
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

TEST(CudaExecutor, DecodePastTheCacheIsAnErrorNotAHang) {
  SKIP_WITHOUT_GPU();
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
