//===- CudaGemmTest.cpp - cuBLASLt GEMM plans: shapes, alignment -------===//
//
// runtime/cuda/Gemm.h on its own and inside the executor. Without a GPU the
// host-side rules run: the shapes a GEMM accepts (the CPU kernel's, which
// the plan loader enforces), cuBLASLt's int32 batch count, the address
// alignment a plan is made for, and empty GEMMs (no cuBLASLt call). With
// one: operands at offsets below cuBLASLt's assumed 256 bytes, against the
// CPU kernel; a pointer less aligned than planned refused; K = 0 writing
// zeros; and a fused epilogue cuBLASLt cannot run falling back to the
// unfused ops.
//
//===----------------------------------------------------------------------===//
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/Executor.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/Resources.h"
#include "test/runtime/Expect.h"
#include "test/runtime/GpuTestUtil.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace braid::rt;
using namespace braid::rt::test;
namespace cu = braid::rt::cuda;
namespace plan = braid::plan;

namespace {

void *at(uintptr_t address) { return reinterpret_cast<void *>(address); }

std::string shapeError(Shape a, Shape b, bool ta = false, bool tb = false) {
  auto g = cu::gemmShapeOf(a, b, ta, tb, DType::BF16);
  EXPECT_FALSE(g) << "accepted";
  return g ? std::string() : g.status().message();
}
} // namespace

//===----------------------------------------------------------------------===//
// Host-side rules (every machine)
//===----------------------------------------------------------------------===//

TEST(CudaGemmShape, SharedBFoldsTheBatchIntoRows) {
  auto g = cu::gemmShapeOf({2, 5, 3}, {3, 4}, false, false, DType::BF16);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->batch, 1);
  EXPECT_EQ(g->m, 10);
  EXPECT_EQ(g->n, 4);
  EXPECT_EQ(g->k, 3);
  EXPECT_FALSE(g->batchedB);
  // A transposed A cannot fold: a strided batch over a stride-0 B.
  auto t = cu::gemmShapeOf({2, 3, 5}, {4, 3}, true, true, DType::BF16);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->batch, 2);
  EXPECT_EQ(t->m, 5);
  EXPECT_EQ(t->n, 4);
  EXPECT_FALSE(t->batchedB);
  auto b =
      cu::gemmShapeOf({2, 6, 5, 3}, {2, 6, 3, 4}, false, false, DType::F16);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->batch, 12);
  EXPECT_TRUE(b->batchedB);
}

// The CPU kernel's rules and words: nothing the loader refuses reaches
// cuBLASLt, and nothing it accepts is refused here.
TEST(CudaGemmShape, RefusesWhatTheCpuKernelRefuses) {
  EXPECT_HAS(shapeError({2, 2, 3}, {1, 2, 3, 4}),
             "matmul: batched b [1, 2, 3, 4] must have a's rank 3");
  EXPECT_HAS(shapeError({2, 3}, {2, 3, 4}),
             "matmul: batched b [2, 3, 4] must have a's rank 2");
  EXPECT_HAS(shapeError({2, 2, 3}, {3, 3, 4}),
             "matmul: batch dim 0 differs: [2, 2, 3] vs [3, 3, 4]");
  EXPECT_HAS(shapeError({2, 3}, {4, 3}),
             "matmul: contraction sizes differ: a [2, 3] gives K=3, b "
             "[4, 3] gives K=4");
  EXPECT_HAS(shapeError({3}, {3, 4}), "matmul: operands need rank >= 2");
}

TEST(CudaGemmShape, RefusesMoreBatchesThanCublasLtCounts) {
  int64_t many = int64_t(1) << 31;
  EXPECT_HAS(shapeError({many, 1, 1}, {many, 1, 1}),
             "matmul: 2147483648 batches of [2147483648, 1, 1] x "
             "[2147483648, 1, 1] are more than cuBLASLt runs in one call");
  EXPECT_HAS(shapeError({many, 1, 1}, {1, 1}, /*ta=*/true),
             "2147483648 batches");
  // Folded into rows, the same batch is one GEMM.
  auto folded =
      cu::gemmShapeOf({many, 1, 1}, {1, 1}, false, false, DType::BF16);
  ASSERT_TRUE(folded) << folded.status().message();
  EXPECT_EQ(folded->m, many);
}

TEST(CudaGemmAlignment, LargestPowerOfTwoUpTo256) {
  EXPECT_EQ(cu::addressAlignment(nullptr), 256u);
  EXPECT_EQ(cu::addressAlignment(at(0x7f0000001000)), 256u);
  EXPECT_EQ(cu::addressAlignment(at(0x7f0000001080)), 128u);
  EXPECT_EQ(cu::addressAlignment(at(0x7f0000001040)), 64u);
  EXPECT_EQ(cu::addressAlignment(at(0x7f0000001010)), 16u);
  EXPECT_EQ(cu::addressAlignment(at(0x7f0000001004)), 4u);
  EXPECT_EQ(cu::addressAlignment(at(0x7f0000001002)), 2u);
  EXPECT_EQ(cu::addressAlignment(at(0x7f0000001001)), 1u);
}

// An empty GEMM is planned and run without cuBLASLt (its layouts would
// have a zero leading dimension), so these need no GPU.
TEST(CudaGemmPlan, EmptyResultNeedsNoCublasLt) {
  cu::GemmShape s;
  s.m = 0;
  s.n = 4;
  s.k = 3;
  auto plan = cu::GemmPlan::create(nullptr, s, 0);
  ASSERT_TRUE(plan) << plan.status().message();
  Status ran =
      plan->run(nullptr, at(0x1000), at(0x1000), nullptr, nullptr, 0, nullptr);
  EXPECT_TRUE(ran) << ran.message();
  // K = 0 owes gelu(bias) to a fused epilogue: refused, so the executor
  // runs the chain unfused.
  cu::GemmShape k0;
  k0.m = 2;
  k0.n = 4;
  k0.k = 0;
  k0.bias = true;
  auto fused = cu::GemmPlan::create(nullptr, k0, 0);
  ASSERT_FALSE(fused);
  EXPECT_HAS(fused.status().message(), "matmul: no fused epilogue for K=0");
}

// The alignment check runs on the host before anything is enqueued
// (capture-safe): an empty plan shows it without a GPU.
TEST(CudaGemmPlan, PointerLessAlignedThanPlannedIsRefused) {
  cu::GemmShape s;
  s.m = 0;
  s.n = 4;
  s.k = 3;
  auto plan = cu::GemmPlan::create(nullptr, s, 0); // planned for 256
  ASSERT_TRUE(plan);
  Status a =
      plan->run(nullptr, at(0x1002), at(0x1000), nullptr, nullptr, 0, nullptr);
  ASSERT_FALSE(a);
  EXPECT_HAS(a.message(), "matmul: a at 0x1002 is 2-byte aligned; the GEMM "
                          "was planned for 256");
  cu::GemmAlignment low;
  low.a = 2;
  low.c = 16;
  auto planned = cu::GemmPlan::create(nullptr, s, 0, low);
  ASSERT_TRUE(planned);
  EXPECT_TRUE(planned->run(nullptr, at(0x1002), at(0x1000), at(0x1010), nullptr,
                           0, nullptr));
  Status c = planned->run(nullptr, at(0x1002), at(0x1000), at(0x1008), nullptr,
                          0, nullptr);
  ASSERT_FALSE(c);
  EXPECT_HAS(c.message(), "the result at 0x1008 is 8-byte aligned; the GEMM "
                          "was planned for 16");
}

//===----------------------------------------------------------------------===//
// On a GPU
//===----------------------------------------------------------------------===//

namespace {


std::vector<float> randomValues(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(rng);
  return v;
}

// One rounding of the fp32 result to the storage type on each side.
float rtolFor(DType t) {
  return t == DType::BF16  ? 1.01f / 128
         : t == DType::F16 ? 1.01f / 1024
                           : 1e-4f;
}

struct GemmCase {
  Shape a, b;
  bool ta = false, tb = false;
};

// Runs a x b with a, b and c placed `offset` bytes past 256-byte aligned
// device addresses (a GemmPlan made for that alignment), against the CPU
// kernel.
void expectGemmMatchesCpu(const GemmCase &g, DType dt, size_t offset) {
  SCOPED_TRACE(::testing::Message()
               << dtypeName(dt) << " " << formatShape(g.a) << (g.ta ? "^T" : "")
               << " x " << formatShape(g.b) << (g.tb ? "^T" : "") << " at +"
               << offset << " bytes");
  auto shape = cu::gemmShapeOf(g.a, g.b, g.ta, g.tb, dt);
  ASSERT_TRUE(shape) << shape.status().message();
  HostTensor a =
      HostTensor::fromFloats(dt, g.a, randomValues(numElements(g.a), 1));
  HostTensor b =
      HostTensor::fromFloats(dt, g.b, randomValues(numElements(g.b), 2));
  auto want = cpu::matmul({g.a, a.toFloats()}, {g.b, b.toFloats()}, g.ta, g.tb);
  ASSERT_TRUE(want) << want.status().message();
  std::vector<float> expected =
      HostTensor::fromFloats(dt, want->shape, want->data).toFloats();
  size_t cBytes = expected.size() * dtypeSize(dt);

  cu::DeviceMemory da, db, dc, ws;
  ASSERT_CUDA(cudaMalloc(da.out(), a.bytes.size() + 256));
  ASSERT_CUDA(cudaMalloc(db.out(), b.bytes.size() + 256));
  ASSERT_CUDA(cudaMalloc(dc.out(), cBytes + 256));
  const size_t wsBytes = size_t(32) << 20;
  ASSERT_CUDA(cudaMalloc(ws.out(), wsBytes));
  char *pa = static_cast<char *>(da.get()) + offset;
  char *pb = static_cast<char *>(db.get()) + offset;
  char *pc = static_cast<char *>(dc.get()) + offset;
  ASSERT_CUDA(
      cudaMemcpy(pa, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(
      cudaMemcpy(pb, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice));
  cu::CublasLtHandle lt;
  ASSERT_EQ(cublasLtCreate(lt.out()), CUBLAS_STATUS_SUCCESS);
  cu::GemmAlignment align;
  align.a = cu::addressAlignment(pa);
  align.b = cu::addressAlignment(pb);
  align.c = cu::addressAlignment(pc);
  auto plan = cu::GemmPlan::create(lt.get(), *shape, wsBytes, align);
  ASSERT_TRUE(plan) << plan.status().message();
  ASSERT_OK(plan->run(lt.get(), pa, pb, pc, ws.get(), wsBytes, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  HostTensor c(dt, want->shape);
  ASSERT_CUDA(cudaMemcpy(c.bytes.data(), pc, cBytes, cudaMemcpyDeviceToHost));
  std::vector<float> got = c.toFloats();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i],
                1e-4f + rtolFor(dt) * std::fabs(expected[i]))
        << "element " << i;
}

} // namespace

// cuBLASLt assumes 256-byte aligned operands unless told otherwise; arena
// tensors sit wherever the memory plan put them.
TEST(CudaGemmGpu, OperandsBelowDefaultAlignmentMatchTheCpu) {
  BRAID_SKIP_WITHOUT_GPU();
  std::vector<GemmCase> cases = {
      {{37, 96}, {96, 80}},
      {{2, 7, 64}, {48, 64}, false, true}, // shared B^T, folded rows
      {{2, 64, 7}, {64, 48}, true, false}, // A^T: a strided batch
      {{3, 9, 40}, {3, 40, 24}},           // batched B
  };
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const GemmCase &g : cases)
      for (size_t offset : {size_t(0), size_t(4), size_t(16), size_t(64)})
        expectGemmMatchesCpu(g, dt, offset);
  for (const GemmCase &g : cases) // 2-byte aligned 16-bit operands
    expectGemmMatchesCpu(g, DType::BF16, 2);
}

TEST(CudaGemmGpu, PointerLessAlignedThanPlannedIsRefused) {
  BRAID_SKIP_WITHOUT_GPU();
  auto shape = cu::gemmShapeOf({64, 64}, {64, 64}, false, false, DType::BF16);
  ASSERT_TRUE(shape);
  cu::CublasLtHandle lt;
  ASSERT_EQ(cublasLtCreate(lt.out()), CUBLAS_STATUS_SUCCESS);
  auto plan = cu::GemmPlan::create(lt.get(), *shape, 0); // for 256 bytes
  ASSERT_TRUE(plan) << plan.status().message();
  cu::DeviceMemory m;
  ASSERT_CUDA(cudaMalloc(m.out(), 3 * 64 * 64 * 2 + 256));
  char *p = static_cast<char *>(m.get());
  Status st =
      plan->run(lt.get(), p, p + 8192, p + 16384 + 2, nullptr, 0, nullptr);
  ASSERT_FALSE(st);
  EXPECT_HAS(st.message(), "-byte aligned; the GEMM was planned for 256");
}

TEST(CudaGemmGpu, ZeroContractionWritesZeros) {
  BRAID_SKIP_WITHOUT_GPU();
  auto shape = cu::gemmShapeOf({3, 0}, {0, 5}, false, false, DType::BF16);
  ASSERT_TRUE(shape);
  auto plan = cu::GemmPlan::create(nullptr, *shape, 0);
  ASSERT_TRUE(plan) << plan.status().message();
  cu::DeviceMemory c;
  ASSERT_CUDA(cudaMalloc(c.out(), 15 * 2));
  ASSERT_CUDA(cudaMemset(c.get(), 0xff, 15 * 2));
  // a and b hold no element: never read.
  ASSERT_OK(plan->run(nullptr, c.get(), c.get(), c.get(), nullptr, 0, nullptr));
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> host(15, 1);
  ASSERT_CUDA(cudaMemcpy(host.data(), c.get(), 30, cudaMemcpyDeviceToHost));
  for (uint16_t v : host)
    EXPECT_EQ(v, 0);
}

namespace {


// The plan on the interpreter and on the GPU, eager and graph; outputs
// compared. The CPU half runs everywhere.
void expectSameOnGpu(const PlanBuilder &pb, const TensorMap &in, double atol,
                     double rtol) {
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto cpu = ThreadedRunner::create(*loaded, /*seed=*/5);
  ASSERT_TRUE(cpu) << cpu.status().message();
  auto want = (*cpu)->run("prefill", {in});
  ASSERT_TRUE(want) << want.status().message();
  BRAID_SKIP_WITHOUT_GPU();
  for (bool graph : {false, true}) {
    cu::ExecutorOptions options;
    options.graph = graph;
    options.weights.seed = 5;
    auto gpu = cu::CudaRunner::create(*loaded, options);
    ASSERT_TRUE(gpu) << gpu.status().message();
    auto out = (*gpu)->run("prefill", {in});
    ASSERT_TRUE(out) << out.status().message();
    for (const auto &[name, expected] : (*want)[0]) {
      std::vector<float> a = (*out)[0].at(name).toFloats();
      std::vector<float> b = expected.toFloats();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], b[i], atol + rtol * std::fabs(b[i]))
            << (graph ? "graph" : "eager") << " output " << name << " element "
            << i;
    }
  }
}

// Moves every arena tensor `shift` bytes past a 256-byte boundary (the
// builder's are 64-byte aligned; the compiler's 256).
void shiftArena(PlanBuilder &pb, int64_t shift) {
  plan::FunctionT &f = *pb.plan().functions[0];
  int64_t at = 0;
  for (auto &t : f.tensors)
    if (t->kind == TensorKind::Activation || t->kind == TensorKind::Input) {
      t->buffer_offset = at + shift;
      at += (t->buffer_size + shift + 255) / 256 * 256;
    }
  f.arena_size = at;
}

// y = gelu_tanh(x w1 + b1) w2 + b2, the biases inputs (in the arena, not
// 256-byte aligned parameter allocations).
PlanBuilder biasGeluPlan(DType dt, Shape x, int64_t k, int64_t n) {
  PlanBuilder pb;
  int w1 = pb.param("c_fc.weight", {k, n}, {k, n}, dt);
  int w2 = pb.param("c_proj.weight", {n, k}, {n, k}, dt);
  FnBuilder f = pb.function("prefill");
  Shape hidden = x;
  hidden.back() = n;
  int tx = f.input("x", x, dt);
  int b1 = f.input("b1", {n}, dt), b2 = f.input("b2", {k}, dt);
  int g = f.tensor(hidden, dt), y = f.tensor(x, dt);
  plan::OpT &up = f.op(OpCode::Matmul, {tx, f.param(w1, pb.plan()), b1}, {g});
  up.matmul_bias = up.matmul_gelu = true;
  up.gelu_approximation = plan::GeluApproximation::Tanh;
  f.op(OpCode::Matmul, {g, f.param(w2, pb.plan()), b2}, {y}).matmul_bias = true;
  f.output("y", y);
  f.output("g", g);
  return pb;
}

// y = x w + b + r (GPT-2's c_proj at tp 1 with its residual), r and b
// inputs in the arena.
PlanBuilder residualPlan(DType dt, Shape x, int64_t n) {
  PlanBuilder pb;
  int w = pb.param("c_proj.weight", {x.back(), n}, {x.back(), n}, dt);
  FnBuilder f = pb.function("prefill");
  Shape out = x;
  out.back() = n;
  int tx = f.input("x", x, dt), b = f.input("b", {n}, dt),
      r = f.input("r", out, dt);
  int y = f.tensor(out, dt);
  plan::OpT &mm = f.op(OpCode::Matmul, {tx, f.param(w, pb.plan()), b, r}, {y});
  mm.matmul_bias = mm.matmul_residual = true;
  f.output("y", y);
  return pb;
}

} // namespace

// The residual epilogue (cuBLASLt's C with beta 1, a pointer other than
// D's) against the interpreter's add, aligned and not.
TEST(CudaGemmExecutor, ResidualEpilogueMatchesInterpreter) {
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t shift : {int64_t(0), int64_t(dtypeSize(dt))}) {
      SCOPED_TRACE(::testing::Message()
                   << dtypeName(dt) << " shifted by " << shift);
      PlanBuilder pb = residualPlan(dt, {2, 8, 64}, 96);
      shiftArena(pb, shift);
      TensorMap in{
          {"x", HostTensor::fromFloats(dt, {2, 8, 64}, wave(1024, 0.2f))},
          {"b", HostTensor::fromFloats(dt, {96}, wave(96, 1.0f))},
          {"r", HostTensor::fromFloats(dt, {2, 8, 96}, wave(1536, 2.0f))}};
      double atol = dt == DType::F32 ? 1e-5 : 2e-3;
      double rtol = dt == DType::F32 ? 1e-4 : 3e-2;
      expectSameOnGpu(pb, in, atol, rtol);
    }
}

// Fused bias/GELU epilogues and plain GEMMs with every arena operand (the
// biases too) 2 or 16 bytes past a 256-byte boundary: each GEMM is planned
// for the alignment it gets, fused where cuBLASLt can, unfused where not.
TEST(CudaGemmExecutor, ArenaOperandsOffTheDefaultAlignment) {
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t shift : {int64_t(0), int64_t(16), int64_t(dtypeSize(dt))}) {
      SCOPED_TRACE(::testing::Message()
                   << dtypeName(dt) << " shifted by " << shift);
      PlanBuilder pb = biasGeluPlan(dt, {2, 8, 64}, 64, 128);
      shiftArena(pb, shift);
      TensorMap in{
          {"x", HostTensor::fromFloats(dt, {2, 8, 64}, wave(1024, 0.2f))},
          {"b1", HostTensor::fromFloats(dt, {128}, wave(128, 1.0f))},
          {"b2", HostTensor::fromFloats(dt, {64}, wave(64, 2.0f))}};
      double atol = dt == DType::F32 ? 1e-5 : 2e-3;
      double rtol = dt == DType::F32 ? 1e-4 : 3e-2;
      expectSameOnGpu(pb, in, atol, rtol);
    }
}

// An epilogue cuBLASLt cannot take (here K = 0: the epilogue would owe
// gelu(bias) where the GEMM launches nothing) runs as kernels after the
// GEMM instead of failing the plan.
TEST(CudaGemmExecutor, EpilogueThatCannotBePlannedRunsUnfused) {
  PlanBuilder pb;
  FnBuilder f = pb.function("prefill");
  int x = f.input("x", {4, 0}), w = f.input("w", {0, 8});
  int bias = f.input("bias", {8});
  int g = f.tensor({4, 8});
  plan::OpT &mm = f.op(OpCode::Matmul, {x, w, bias}, {g});
  mm.matmul_bias = mm.matmul_gelu = true;
  mm.gelu_approximation = plan::GeluApproximation::Tanh;
  f.output("g", g);
  TensorMap in{
      {"x", HostTensor::fromFloats(DType::F32, {4, 0}, {})},
      {"w", HostTensor::fromFloats(DType::F32, {0, 8}, {})},
      {"bias", HostTensor::fromFloats(DType::F32, {8}, wave(8, 0.5f))}};
  expectSameOnGpu(pb, in, 1e-5, 1e-4);
}
