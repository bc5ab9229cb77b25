//===- HostileInputTest.cpp - Bad input: clean errors, never a signal -----===//
//
// Regression tests for issue 15's runtime half: inputs that used to wrap an
// int64, divide by zero, read out of bounds, block forever, terminate on an
// uncaught exception or compute garbage quietly. Each must now be refused
// with an error that names what is wrong.
//
//===----------------------------------------------------------------------===//
#include "runtime/HostTensor.h"
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"
#include "runtime/Safetensors.h"
#include "runtime/Threads.h"
#include "runtime/Weights.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"
#include "test/runtime/Expect.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string loadError(const PlanBuilder &pb) {
  auto plan = loadPlan(pb.finish());
  EXPECT_FALSE(plan) << "plan unexpectedly loaded";
  return plan ? std::string() : plan.status().message();
}

// A path unique to the running test.
std::string tempPath(const std::string &suffix) {
  const auto *info = testing::UnitTest::GetInstance()->current_test_info();
  return testing::TempDir() + "braid_" + info->test_suite_name() + "_" +
         info->name() + suffix;
}

// A FIFO nobody writes to: open(O_RDONLY) on it blocks forever.
std::string makeFifo(const std::string &suffix) {
  std::string path = tempPath(suffix);
  std::remove(path.c_str());
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  return path;
}

std::string rawSafetensors(const std::string &header, size_t dataBytes) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(char(uint8_t(uint64_t(header.size()) >> (8 * i))));
  return out + header + std::string(dataBytes, '\0');
}

std::string safetensorsOpenError(const std::string &bytes) {
  std::string path = tempPath(".safetensors");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  auto file = SafetensorsFile::open(path);
  EXPECT_FALSE(file) << "opened";
  return file ? std::string() : file.status().message();
}
} // namespace

//===----------------------------------------------------------------------===//
// Plan loader: sizes computed checked, operand dtypes, file types
//===----------------------------------------------------------------------===//

// offsets + sizes wrapped to a negative end, passed `end <= dim` and the
// kernel read far outside the buffer (ASan heap-buffer-overflow).
TEST(PlanLoaderHostile, SliceEndOverflowingInt64IsRefused) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {3});
  int y = f.tensor({2});
  plan::OpT &s = f.op(OpCode::Slice, {x}, {y});
  s.offsets = {kMax - 1};
  s.sizes = {2};
  f.output("y", y);
  EXPECT_HAS(loadError(pb), "op 0 (slice): dim 0 slice "
                            "[9223372036854775806, +2) exceeds size 3");
}

// Concat had no load-time check: an f16 and a bf16 operand (same element
// size) were joined bit for bit into garbage.
TEST(PlanLoaderHostile, ConcatShapesAndDTypesAreChecked) {
  auto build = [](DType second, Shape out) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int a = f.input("a", {2, 3}, DType::F16);
    int b = f.input("b", {2, 1}, second);
    int y = f.tensor(std::move(out), DType::F16);
    f.op(OpCode::Concat, {a, b}, {y}).dim = 1;
    f.output("y", y);
    return pb;
  };
  EXPECT_TRUE(loadPlan(build(DType::F16, {2, 4}).finish()));
  EXPECT_HAS(loadError(build(DType::BF16, {2, 4})),
             "op 0 (concat): operand 1 is bf16 but operand 0 is f16");
  EXPECT_HAS(loadError(build(DType::F16, {2, 5})),
             "op 0 (concat): result shape [2, 5] should be [2, 4]");
}

TEST(PlanLoaderHostile, GatheredSizeOverflowingInt64IsRefused) {
  int world = std::numeric_limits<int>::max();
  PlanBuilder pb(world);
  pb.group("all", world);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {int64_t(1) << 40}, DType::I32);
  int y = f.tensor({1});
  plan::OpT &g = f.op(OpCode::AllGather, {x}, {y});
  g.group = 0;
  g.dim = 0;
  f.output("y", y);
  EXPECT_HAS(loadError(pb), "dim 0 of size 1099511627776 times group size "
                            "2147483647 does not fit int64");
}

// The loader did not check operand dtypes: a float tensor could feed token
// ids or positions (truncated, NaN -> int is UB) and mixed float types ran
// through kernels that read one dtype.
TEST(PlanLoaderHostile, OperandDTypesAreChecked) {
  {
    PlanBuilder pb(1);
    int table = pb.param("embed", {4, 2}, {4, 2});
    FnBuilder f = pb.function("main");
    int ids = f.input("ids", {3}, DType::F32);
    int y = f.tensor({3, 2});
    f.op(OpCode::Embedding, {ids, f.param(table, pb.plan())}, {y});
    f.output("y", y);
    EXPECT_HAS(loadError(pb), "op 0 (embedding): ids (tensor 0) is f32, must "
                              "be an integer type (i32 or i64)");
  }
  {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {1, 2, 1, 4});
    int pos = f.input("pos", {1, 2}, DType::BF16);
    int y = f.tensor({1, 2, 1, 4});
    f.op(OpCode::Rope, {x, pos}, {y});
    f.output("y", y);
    EXPECT_HAS(loadError(pb), "op 0 (rope): positions (tensor 1) is bf16, "
                              "must be an integer type");
  }
  {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int a = f.input("a", {2, 2}, DType::F16);
    int b = f.input("b", {2, 2}, DType::BF16);
    int y = f.tensor({2, 2}, DType::F16);
    f.op(OpCode::Matmul, {a, b}, {y});
    f.output("y", y);
    EXPECT_HAS(loadError(pb), "op 0 (matmul): operand 1 (tensor 1) is bf16 "
                              "but operand 0 (tensor 0) is f16");
  }
  {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {4}, DType::I32);
    int y = f.tensor({4}, DType::I32);
    f.op(OpCode::Softmax, {x}, {y});
    f.output("y", y);
    EXPECT_HAS(loadError(pb), "op 0 (softmax): the input (tensor 0) is i32, "
                              "must be floating point");
  }
  {
    PlanBuilder pb(1);
    int slot = pb.stateSlot("k", {1, 4, 1, 2});
    int vslot = pb.stateSlot("v", {1, 4, 1, 2});
    FnBuilder f = pb.function("main");
    int q = f.input("q", {1, 1, 1, 2});
    int pos = f.input("pos", {1}, DType::F32);
    int kc = f.state(slot, pb.plan()), vc = f.state(vslot, pb.plan());
    int o = f.tensor({1, 1, 1, 2});
    int kc2 = f.tensor({1, 4, 1, 2}, DType::F32, TensorKind::State, slot);
    int vc2 = f.tensor({1, 4, 1, 2}, DType::F32, TensorKind::State, vslot);
    plan::OpT &att =
        f.op(OpCode::Attention, {q, q, q, kc, vc, pos}, {o, kc2, vc2});
    att.num_heads = att.num_kv_heads = 1;
    att.head_dim = 2;
    f.output("o", o);
    EXPECT_HAS(loadError(pb), "op 0 (attention): position (tensor 1) is f32, "
                              "must be an integer type");
  }
  {
    PlanBuilder pb(1);
    int w = pb.param("norm.weight", {4}, {4});
    int bias = pb.param("norm.bias", {4}, {4}, DType::F16);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {2, 4});
    int y = f.tensor({2, 4});
    f.op(OpCode::LayerNorm,
         {x, f.param(w, pb.plan()), f.param(bias, pb.plan())}, {y});
    f.output("y", y);
    EXPECT_HAS(loadError(pb), "op 0 (layer_norm): the bias (tensor 3) is f16 "
                              "but the input (tensor 0) is f32");
  }
}

// A directory made the reader throw std::ios_failure (braid-run aborted);
// a FIFO blocked open() forever; a device was read as a plan.
TEST(PlanLoaderHostile, DirectoryFifoAndDeviceAreRefusedBeforeOpening) {
  auto dir = loadPlanFile(testing::TempDir());
  ASSERT_FALSE(dir);
  EXPECT_HAS(dir.status().message(), "is not a regular file (a directory)");
  std::string fifo = makeFifo(".fifo");
  auto pipe = loadPlanFile(fifo);
  ASSERT_FALSE(pipe);
  EXPECT_HAS(pipe.status().message(),
             "plan '" + fifo + "' is not a regular file (a FIFO)");
  std::remove(fifo.c_str());
  auto dev = loadPlanFile("/dev/zero");
  ASSERT_FALSE(dev);
  EXPECT_HAS(dev.status().message(), "is not a regular file (a device)");
}

//===----------------------------------------------------------------------===//
// CPU kernels: the same rules, checked on their own
//===----------------------------------------------------------------------===//

TEST(KernelHostile, SliceConcatAndReshapeSizesAreChecked) {
  cpu::ByteTensor x{{3}, 4, std::vector<uint8_t>(12)};
  auto s = cpu::slice(x, {kMax - 1}, {2});
  ASSERT_FALSE(s);
  EXPECT_HAS(s.status().message(), "slice: dim 0 takes 2 elements at offset "
                                   "9223372036854775806, outside its size 3");

  // [2^32, 2^32 + 1] is not [2^32], whatever the wrapped products say.
  int64_t n = int64_t(1) << 32;
  Status r = cpu::checkReshape({n, n + 1}, {n});
  ASSERT_FALSE(r);
  EXPECT_HAS(r.message(), "an element count does not fit int64");
  EXPECT_FALSE(cpu::checkReshape({n, n}, {0}));
  EXPECT_TRUE(cpu::checkReshape({2, 3}, {6}));

  Shape big{kMax / 2 + 1}, other{kMax / 2 + 1};
  auto c = cpu::checkConcatShapes({{&big, 4}, {&other, 4}}, 0);
  ASSERT_FALSE(c);
  EXPECT_HAS(c.status().message(),
             "concat: the sizes along dim 0 add up to more than int64 holds");
}

// An op whose result has no elements must do no work however large its
// other dims are (each is bounded only by 2^40 on the product of a shape's
// nonzero dims): cpu::matmul of an empty [22906492245, 0, 8] ran 2.29e10
// empty batch iterations (34 s), and softmax, rope, attention and concat
// had loops of the same kind.
TEST(KernelHostile, EmptyResultsDoNoPerBatchWork) {
  const int64_t huge = 22906492245;
  auto start = std::chrono::steady_clock::now();

  auto c = cpu::matmul(cpu::FTensor{{huge, 0, 8}, {}},
                       cpu::FTensor{{8, 48}, std::vector<float>(8 * 48, 1.0f)},
                       false, false);
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->shape, (Shape{huge, 0, 48}));
  EXPECT_TRUE(c->data.empty());
  auto ct = cpu::matmul(cpu::FTensor{{huge, 8, 0}, {}},
                        cpu::FTensor{{48, 8}, std::vector<float>(48 * 8)}, true,
                        true);
  ASSERT_TRUE(ct) << ct.status().message();
  EXPECT_EQ(ct->shape, (Shape{huge, 0, 48}));

  auto sm = cpu::softmax(cpu::FTensor{{huge, 0}, {}}, 1);
  ASSERT_TRUE(sm) << sm.status().message();
  EXPECT_EQ(sm->shape, (Shape{huge, 0}));

  // One position, no heads, a head dim of 2^34: half of it was looped
  // over with a pow, a cos and a sin each.
  auto r = cpu::rope(cpu::FTensor{{1, 1, 0, int64_t(1) << 34}, {}},
                     cpu::ITensor{{1, 1}, {3}}, 10000.0);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->data.empty());

  // Head dim 0: batch x seq x heads x keys empty iterations.
  cpu::AttentionParams p;
  p.numHeads = 1 << 17;
  p.numKvHeads = 1 << 17;
  p.headDim = 0;
  p.causal = true;
  cpu::FTensor qkv{{1, 1 << 17, 1 << 17, 0}, {}};
  auto o = cpu::attention(qkv, qkv, qkv, p);
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_EQ(o->shape, qkv.shape);

  cpu::ByteTensor e{{huge, 0, 8}, 4, {}};
  auto cat = cpu::concat({&e, &e}, 2);
  ASSERT_TRUE(cat) << cat.status().message();
  EXPECT_EQ(cat->shape, (Shape{huge, 0, 16}));

  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, 2.0) << "empty results took " << seconds << " s";
}

// Returning early on an empty result changes nothing else: a KV-cache
// attention with no query heads still writes its keys and values into the
// cache, and a concat with an empty input still copies the others.
TEST(KernelHostile, EmptyResultsKeepTheirSideEffects) {
  cpu::AttentionParams p;
  p.numHeads = 0;
  p.numKvHeads = 1;
  p.headDim = 2;
  p.causal = true;
  cpu::FTensor q{{1, 1, 0, 2}, {}};
  cpu::FTensor k{{1, 1, 1, 2}, {5, 6}}, v{{1, 1, 1, 2}, {7, 8}};
  cpu::FTensor kc{{1, 3, 1, 2}, std::vector<float>(6, 0.0f)};
  cpu::FTensor vc = kc;
  auto o = cpu::attentionWithCache(q, k, v, kc, vc, cpu::ITensor{{1}, {1}}, p);
  ASSERT_TRUE(o) << o.status().message();
  EXPECT_TRUE(o->data.empty());
  EXPECT_EQ(kc.data, (std::vector<float>{0, 0, 5, 6, 0, 0}));
  EXPECT_EQ(vc.data, (std::vector<float>{0, 0, 7, 8, 0, 0}));

  cpu::ByteTensor a{{2, 0, 1}, 1, {}}, b{{2, 2, 1}, 1, {1, 2, 3, 4}};
  auto cat = cpu::concat({&a, &b, &a}, 1);
  ASSERT_TRUE(cat) << cat.status().message();
  EXPECT_EQ(cat->shape, (Shape{2, 2, 1}));
  EXPECT_EQ(cat->data, (std::vector<uint8_t>{1, 2, 3, 4}));
}

//===----------------------------------------------------------------------===//
// Dtype conversion, weights
//===----------------------------------------------------------------------===//

// int32_t(NaN) and int32_t(1e10f) are undefined behaviour (x86 yields
// INT_MIN for both); storing floats into integers is now defined.
TEST(HostTensorHostile, FloatToIntConversionIsDefined) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v{kNaN, 1e10f, -1e10f, inf, -inf, 3.7f, -3.7f};
  EXPECT_EQ(HostTensor::fromFloats(DType::I32, {7}, v).toInts(),
            (std::vector<int64_t>{0, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(), 3, -3}));
  EXPECT_EQ(HostTensor::fromFloats(DType::I64, {2}, {kNaN, 1e30f}).toInts(),
            (std::vector<int64_t>{0, kMax}));
  EXPECT_EQ(HostTensor::fromFloats(DType::F32, {1}, {kNaN}).toInts(),
            (std::vector<int64_t>{0}));
  EXPECT_EQ(firstNonIntegral(DType::I32, v.data(), 7), 0);
  EXPECT_EQ(firstNonIntegral(DType::I32, v.data() + 5, 2), -1);
  float edge[] = {2147483648.0f, -2147483648.0f};
  EXPECT_EQ(firstNonIntegral(DType::I32, edge, 2), 0);
  EXPECT_EQ(firstNonIntegral(DType::I32, edge + 1, 1), -1);
  EXPECT_EQ(firstNonIntegral(DType::I64, edge, 2), -1);
  EXPECT_EQ(firstNonIntegral(DType::BF16, v.data(), 7), -1);
}

// shards x blocks wrapped to 0 and `dim % 0` raised SIGFPE.
TEST(WeightsHostile, ShardsTimesBlocksOverflowIsAnErrorNotSigfpe) {
  ShardSpec spec;
  spec.dim = 0;
  spec.shards = int64_t(1) << 32;
  spec.blocks = int64_t(1) << 32;
  spec.groupSize = int64_t(1) << 32;
  spec.rank = 0;
  auto local = localShape({8}, spec);
  ASSERT_FALSE(local);
  EXPECT_HAS(local.status().message(), "cannot cut dim 0 of [8] into "
                                       "4294967296 blocks x 4294967296 shards");
}

//===----------------------------------------------------------------------===//
// Safetensors headers and values
//===----------------------------------------------------------------------===//

// JSON keeps the last of two equal keys: the second tensor silently
// replaced the first.
TEST(SafetensorsHostile, DuplicateTensorNameIsRefused) {
  std::string e = safetensorsOpenError(
      rawSafetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     8));
  EXPECT_HAS(e, "tensor 'w' is named twice in the header");
}

TEST(SafetensorsHostile, OverlappingDataOffsetsAreRefused) {
  std::string e = safetensorsOpenError(rawSafetensors(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12));
  EXPECT_HAS(e, "tensors 'a' ([0, 8)) and 'b' ([4, 12)) overlap in the data "
                "region");
  // Adjacent tensors and empty ones anywhere are fine.
  std::string path = tempPath(".ok.safetensors");
  {
    std::string ok = rawSafetensors(
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
        12);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(ok.data(), std::streamsize(ok.size()));
  }
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file) << file.status().message();
}

// open() on a FIFO blocked before the regular-file check ran.
TEST(SafetensorsHostile, FifoAndDeviceAreRefusedWithoutBlocking) {
  std::string fifo = makeFifo(".safetensors");
  auto file = SafetensorsFile::open(fifo);
  ASSERT_FALSE(file);
  EXPECT_HAS(file.status().message(), "is not a regular file (a FIFO)");
  std::remove(fifo.c_str());
  auto dev = SafetensorsFile::open("/dev/zero");
  ASSERT_FALSE(dev);
  EXPECT_HAS(dev.status().message(), "is not a regular file (a device)");
}

// A checkpoint value converted into an integer parameter: NaN -> int was
// undefined behaviour (UBSan), 1e10 -> i32 too.
TEST(SafetensorsHostile, UnrepresentableValueForIntegerParameterIsRefused) {
  PlanBuilder pb(1);
  pb.param("token_type_ids", {4}, {4}, DType::I32);
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  auto tryValues = [&](std::vector<float> values) -> Status {
    std::string path = tempPath(".ints.safetensors");
    EXPECT_TRUE(writeSafetensors(
        path,
        {{"token_type_ids", HostTensor::fromFloats(DType::F32, {4}, values)}}));
    auto file = SafetensorsFile::open(path);
    EXPECT_TRUE(file) << file.status().message();
    std::vector<int64_t> got;
    return loadCheckpointParameters(
        [&](const std::string &, HostTensor local) {
          got = local.toInts();
          return Status::ok();
        },
        *plan, 0, *file);
  };
  EXPECT_TRUE(tryValues({0, 1, 2, 3}));
  Status nan = tryValues({0, kNaN, 2, 3});
  ASSERT_FALSE(nan);
  EXPECT_HAS(nan.message(), "parameter 'token_type_ids': checkpoint tensor "
                            "'token_type_ids' holds nan (local element 1), "
                            "which its i32 type cannot represent");
  Status big = tryValues({0, 1, 1e10f, 3});
  ASSERT_FALSE(big);
  EXPECT_HAS(big.message(), "(local element 2), which its i32 type");
}

//===----------------------------------------------------------------------===//
// Interpreter: finite outputs, resources, timeouts, threads
//===----------------------------------------------------------------------===//

namespace {
// y = silu(x @ w), x [1, 2], w [2, 2].
PlanBuilder matmulPlan() {
  PlanBuilder pb(1);
  int w = pb.param("w", {2, 2}, {2, 2});
  FnBuilder f = pb.function("main");
  int x = f.input("x", {1, 2});
  int m = f.tensor({1, 2}), y = f.tensor({1, 2});
  f.op(OpCode::Matmul, {x, f.param(w, pb.plan())}, {m});
  f.op(OpCode::Silu, {m}, {y});
  f.output("y", y);
  return pb;
}
} // namespace

TEST(InterpreterHostile, CheckFiniteNamesTheFirstNonFiniteOp) {
  auto plan = loadPlan(matmulPlan().finish());
  ASSERT_TRUE(plan) << plan.status().message();
  TensorMap in{{"x", HostTensor::fromFloats(DType::F32, {1, 2}, {1, 1})}};
  for (bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "strict" : "plan order");
    auto runner = ThreadedRunner::create(*plan, 0);
    ASSERT_TRUE(runner);
    ASSERT_TRUE((*runner)->rank(0).setParameter(
        "w", HostTensor::fromFloats(DType::F32, {2, 2}, {1, kNaN, 1, 1})));
    // Unchecked, NaN flows to the output.
    auto quiet = (*runner)->run("main", {in});
    ASSERT_TRUE(quiet) << quiet.status().message();
    EXPECT_TRUE(std::isnan((*quiet)[0].at("y").toFloats()[1]));

    RunOptions options;
    options.strict = strict;
    options.checkFinite = true;
    (*runner)->setRunOptions(options);
    auto checked = (*runner)->run("main", {in});
    ASSERT_FALSE(checked);
    EXPECT_HAS(checked.status().message(),
               "rank 0: function 'main': op 0 (matmul): result tensor 1 "
               "[1, 2] x f32 holds nan at element 1 (the first op whose "
               "output is not finite); operand tensor 3 (parameter 'w') "
               "already holds nan at element 1");

    // Finite operands that overflow: the op itself is named as the cause.
    ASSERT_TRUE((*runner)->rank(0).setParameter(
        "w", HostTensor::fromFloats(DType::F32, {2, 2}, {3e38f, 1, 3e38f, 1})));
    auto overflow = (*runner)->run("main", {in});
    ASSERT_FALSE(overflow);
    EXPECT_HAS(overflow.status().message(),
               "op 0 (matmul): result tensor 1 [1, 2] x f32 holds inf at "
               "element 0 (the first op whose output is not finite); every "
               "operand is finite, so this op produced it");
  }
}

// world_size 2 -> 65538 (one bit) ran for minutes, then died "rank 14066:
// out of memory": now refused before anything is allocated.
TEST(InterpreterHostile, WorldSizeBeyondTheThreadBoundIsRefusedAtOnce) {
  PlanBuilder pb(65538);
  pb.group("tp", 2);
  pb.param("w", {64, 64}, {32, 64}, DType::F32, 0, 0);
  FnBuilder f = pb.function("main");
  f.input("x", {1});
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  auto start = std::chrono::steady_clock::now();
  auto runner = ThreadedRunner::create(*plan, 0);
  ASSERT_FALSE(runner);
  EXPECT_HAS(runner.status().message(),
             "the plan has world_size 65538; the CPU interpreter runs every "
             "rank as a thread of this process, at most 1024");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(InterpreterHostile, HostMemoryIsCheckedBeforeAllocating) {
  PlanBuilder pb(4);
  pb.group("tp", 4);
  pb.param("w", {1024, 256}, {1024, 256}, DType::F32); // 1 MiB per rank
  int slot = pb.stateSlot("kv", {256, 256});           // 256 KiB per rank
  FnBuilder f = pb.function("main");
  f.input("x", {1});
  f.fn().arena_size = 4096;
  (void)slot;
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  auto perRank = hostBytesPerRank(plan->root());
  ASSERT_TRUE(perRank) << perRank.status().message();
  EXPECT_EQ(perRank->parameters, 1 << 20);
  EXPECT_EQ(perRank->state, 1 << 18);
  EXPECT_EQ(perRank->arenas, 4096);
  RunnerOptions options;
  options.memoryLimitBytes = 4 << 20; // less than 4 x 1.25 MiB
  auto runner = ThreadedRunner::create(*plan, options);
  ASSERT_FALSE(runner);
  EXPECT_HAS(runner.status().message(),
             "the plan needs 1314816 bytes per rank (parameters 1048576, "
             "state 262144, arenas 4096) x 4 ranks = 5259264 bytes of host "
             "memory, more than the 4194304 bytes of the configured limit");
  options.memoryLimitBytes = 8 << 20;
  EXPECT_TRUE(ThreadedRunner::create(*plan, options));
  EXPECT_GT(hostMemoryLimit().bytes, 0);
}

// The collective timeout was fixed at 60 s (braid-run's --timeout was
// ignored on the CPU backend).
TEST(InterpreterHostile, CollectiveTimeoutIsConfigurable) {
  // Both ranks receive from every rank, then send to every rank: the
  // messages pair, but each rank's receives wait for sends it issues only
  // after them (CommMatching.h refuses it before the step unless told not to).
  PlanBuilder pb(2);
  pb.group("tp", 2);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {1});
  for (int peer : {0, 1}) {
    int y = f.tensor({1});
    plan::OpT &recv = f.op(OpCode::Recv, {}, {y});
    recv.group = 0;
    recv.peer = peer;
    f.output("y" + std::to_string(peer), y);
  }
  int z = f.tensor({1}); // an op between: the sends are not in the group
  f.op(OpCode::Add, {x, x}, {z});
  f.output("z", z);
  for (int peer : {0, 1}) {
    plan::OpT &send = f.op(OpCode::Send, {x}, {});
    send.group = 0;
    send.peer = peer;
  }
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  RunnerOptions options;
  options.collectiveTimeout = std::chrono::milliseconds(100);
  options.checkCommunication = false; // run it anyway (it is refused)
  auto runner = ThreadedRunner::create(*plan, options);
  ASSERT_TRUE(runner) << runner.status().message();
  auto start = std::chrono::steady_clock::now();
  auto out = (*runner)->run(
      "main", {{{"x", HostTensor::fromFloats(DType::F32, {1}, {1})}}});
  ASSERT_FALSE(out);
  EXPECT_HAS(out.status().message(), "timed out (no matching send)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// std::thread's constructor throwing std::system_error used to unwind a
// vector of joinable threads: std::terminate.
TEST(ThreadsHostile, ThreadStartFailureIsAnErrorNotTerminate) {
  std::atomic<int> ran{0};
  int started = 0;
  ThreadStarter failThird = [&](std::function<void()> body) {
    if (started++ == 2)
      throw std::system_error(
          std::make_error_code(std::errc::resource_unavailable_try_again),
          "thread");
    return std::thread(std::move(body));
  };
  Status st = runOnThreads(
      4, [&](size_t) { ++ran; }, "the rank threads", failThird);
  ASSERT_FALSE(st);
  EXPECT_HAS(st.message(), "cannot start the rank threads: started 2 of 4");
  // No body ran: none waits in a collective for the rank that never came.
  EXPECT_EQ(ran.load(), 0);

  ran = 0;
  EXPECT_TRUE(runOnThreads(
      4, [&](size_t) { ++ran; }, "threads"));
  EXPECT_EQ(ran.load(), 4);
}
