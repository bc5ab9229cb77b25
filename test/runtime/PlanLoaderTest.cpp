//===- PlanLoaderTest.cpp - Loader accepts good plans, names bad ones -----===//
#include "runtime/PlanLoader.h"
#include "runtime/PlanText.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {
// A valid two-op plan: y = rms_norm(x, w) @ W^T, on a 2-rank group, with a
// cross-stream event between the two ops.
PlanBuilder goodPlan() {
  PlanBuilder pb(2);
  pb.group("tp", 2);
  int w = pb.param("model.norm.weight", {4}, {4});
  int wq = pb.param("q_proj.weight", {8, 4}, {4, 4}, DType::F32, 0, 0);
  FnBuilder f = pb.function("prefill");
  f.fn().num_streams = 2;
  f.fn().num_events = 1;
  int x = f.input("x", {2, 4});
  int tw = f.param(w, pb.plan()), tq = f.param(wq, pb.plan());
  int n = f.tensor({2, 4}), y = f.tensor({2, 4});
  plan::OpT &norm = f.op(OpCode::RmsNorm, {x, tw}, {n});
  norm.record_events = {0};
  plan::OpT &mm = f.op(OpCode::Matmul, {n, tq}, {y});
  mm.transpose_b = true;
  mm.stream = 1;
  mm.wait_events = {0};
  f.output("y", y);
  return pb;
}

std::string loadError(const std::vector<uint8_t> &bytes) {
  auto plan = loadPlan(bytes);
  EXPECT_FALSE(plan) << "plan unexpectedly loaded";
  return plan ? std::string() : plan.status().message();
}

std::string loadError(PlanBuilder &pb) { return loadError(pb.finish()); }

#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)
} // namespace

TEST(PlanLoader, AcceptsGoodPlan) {
  PlanBuilder pb = goodPlan();
  auto plan = loadPlan(pb.finish());
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->root().version(), kPlanFormatVersion);
  EXPECT_EQ(plan->functionIndex("prefill"), 0);
  EXPECT_EQ(plan->function("decode"), nullptr);
}

TEST(PlanLoader, LoadsFromFileAndNamesMissingFile) {
  PlanBuilder pb = goodPlan();
  std::vector<uint8_t> bytes = pb.finish();
  std::string path = ::testing::TempDir() + "/braid_loader_test.bplan";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              std::streamsize(bytes.size()));
  }
  EXPECT_TRUE(loadPlanFile(path));
  std::remove(path.c_str());
  auto missing = loadPlanFile(path);
  ASSERT_FALSE(missing);
  EXPECT_CONTAINS(missing.status().message(), "cannot open plan");
}

TEST(PlanLoader, RejectsTruncatedPlan) {
  PlanBuilder pb = goodPlan();
  std::vector<uint8_t> bytes = pb.finish();
  EXPECT_CONTAINS(
      loadError(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 5)),
      "truncated");
  // Every shorter prefix that still has the header must fail verification.
  for (size_t n = 8; n < bytes.size(); n += 7) {
    auto plan =
        loadPlan(std::vector<uint8_t>(bytes.begin(), bytes.begin() + long(n)));
    EXPECT_FALSE(plan) << "prefix of " << n << " bytes loaded";
  }
  EXPECT_CONTAINS(loadError(std::vector<uint8_t>(
                      bytes.begin(), bytes.begin() + long(bytes.size() / 2))),
                  "FlatBuffers verification");
}

TEST(PlanLoader, SurvivesEveryCorruptedByte) {
  // Flipping any single byte must give a plan or an error, never a crash;
  // flipping the root offset is always caught.
  PlanBuilder pb = goodPlan();
  std::vector<uint8_t> bytes = pb.finish();
  int rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0xA5;
    rejected += loadPlan(bad) ? 0 : 1;
  }
  EXPECT_GT(rejected, 0);
  std::vector<uint8_t> bad = bytes;
  bad[1] = 0x7f; // root offset far past the end
  EXPECT_CONTAINS(loadError(bad), "verification");
}

TEST(PlanLoader, RejectsWrongIdentifier) {
  PlanBuilder pb = goodPlan();
  std::vector<uint8_t> bytes = pb.finish();
  std::memcpy(bytes.data() + 4, "XXXX", 4);
  std::string e = loadError(bytes);
  EXPECT_CONTAINS(e, "not a Braid plan");
  EXPECT_CONTAINS(e, "'XXXX'");

  // A buffer finished without any identifier (plain builder API).
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(plan::CreatePlan(fbb));
  EXPECT_CONTAINS(
      loadError(std::vector<uint8_t>(fbb.GetBufferPointer(),
                                     fbb.GetBufferPointer() + fbb.GetSize())),
      "not a Braid plan");
}

TEST(PlanLoader, RejectsWrongVersion) {
  // Built with the raw builder API, as an older or newer compiler would.
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(plan::CreatePlan(fbb, kPlanFormatVersion + 1),
             plan::PlanIdentifier());
  std::string e = loadError(std::vector<uint8_t>(
      fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()));
  EXPECT_CONTAINS(e, "plan format version " +
                         std::to_string(kPlanFormatVersion + 1) +
                         " is not one this runtime reads (1 to " +
                         std::to_string(kPlanFormatVersion) + ")");
}

TEST(PlanLoader, ReadsOlderVersions) {
  // Versions 2 and 3 only added fields an older plan cannot hold.
  for (uint32_t version : {1u, 2u}) {
    PlanBuilder pb = goodPlan();
    pb.plan().version = version;
    auto plan = loadPlan(pb.finish());
    ASSERT_TRUE(plan) << plan.status().message();
    EXPECT_EQ(plan->root().version(), version);
  }
}

namespace {
// x [1, 2, 1, 4] -> rope -> attention over itself (causal).
PlanBuilder ropeAttentionPlan() {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("prefill");
  int x = f.input("x", {1, 2, 1, 4});
  int pos = f.input("positions", {1, 2}, DType::I32);
  int r = f.tensor({1, 2, 1, 4}), o = f.tensor({1, 2, 1, 4});
  f.op(OpCode::Rope, {x, pos}, {r});
  plan::OpT &a = f.op(OpCode::Attention, {r, r, r}, {o});
  a.causal = true;
  a.num_heads = a.num_kv_heads = 1;
  a.head_dim = 4;
  f.output("o", o);
  return pb;
}
plan::OpT &opOf(PlanBuilder &pb, int i) {
  return *pb.plan().functions[0]->ops[size_t(i)];
}
} // namespace

TEST(PlanLoader, ChecksRopeTablesAndSlidingWindows) {
  PlanBuilder good = ropeAttentionPlan();
  opOf(good, 0).rope_inv_freq = {1.0, 0.25};
  opOf(good, 0).rope_attention_factor = 1.5;
  opOf(good, 1).sliding_window = 1;
  auto plan = loadPlan(good.finish());
  ASSERT_TRUE(plan) << plan.status().message();

  PlanBuilder count = ropeAttentionPlan();
  opOf(count, 0).rope_inv_freq = {1.0, 0.5, 0.25};
  EXPECT_CONTAINS(loadError(count), "rope_inv_freq has 3 frequencies; the "
                                    "input [1, 2, 1, 4] has 2 rotated pairs");
  PlanBuilder nan = ropeAttentionPlan();
  opOf(nan, 0).rope_inv_freq = {1.0, std::nan("")};
  EXPECT_CONTAINS(loadError(nan), "rope_inv_freq[1] is nan; frequencies must "
                                  "be positive and finite");
  PlanBuilder rotary = ropeAttentionPlan();
  opOf(rotary, 0).rope_rotary_dim = 3;
  EXPECT_CONTAINS(loadError(rotary), "rope_rotary_dim 3 must be 0 (the whole "
                                     "head) or even and in [2, 4]");
  PlanBuilder partial = ropeAttentionPlan();
  opOf(partial, 0).rope_rotary_dim = 2;
  opOf(partial, 0).rope_inv_freq = {1.0, 0.5};
  EXPECT_CONTAINS(loadError(partial), "rope_inv_freq has 2 frequencies; the "
                                      "input [1, 2, 1, 4] has 1 rotated pairs");
  PlanBuilder factor = ropeAttentionPlan();
  opOf(factor, 0).rope_attention_factor = 0.0;
  EXPECT_CONTAINS(loadError(factor),
                  "rope_attention_factor 0 must be positive and finite");
  PlanBuilder window = ropeAttentionPlan();
  opOf(window, 1).sliding_window = -2;
  EXPECT_CONTAINS(loadError(window), "sliding_window -2 must be >= 0");
  PlanBuilder acausal = ropeAttentionPlan();
  opOf(acausal, 1).causal = false;
  opOf(acausal, 1).sliding_window = 2;
  EXPECT_CONTAINS(loadError(acausal), "sliding_window needs causal attention");
}

TEST(PlanLoader, RejectsBufferOutsideArena) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->tensors[4]->buffer_offset =
      pb.plan().functions[0]->arena_size - 8;
  EXPECT_CONTAINS(loadError(pb), "tensor 4 buffer");
  EXPECT_CONTAINS(loadError(pb), "outside the arena");
}

TEST(PlanLoader, RejectsBufferNotAlignedToItsElements) {
  // The CPU kernels would not notice; the GPU's would fault.
  PlanBuilder pb = goodPlan();
  plan::TensorT &t = *pb.plan().functions[0]->tensors[4];
  ASSERT_EQ(t.dtype, DType::F32);
  t.buffer_offset += 2;
  EXPECT_CONTAINS(loadError(pb), "tensor 4 (f32) at arena offset ");
  EXPECT_CONTAINS(loadError(pb), "is not aligned to its 4-byte elements");
  t.buffer_offset += 2; // aligned again
  EXPECT_TRUE(loadPlan(pb.finish())) << loadError(pb);

  // Each dtype to its own size (the fuzzer's plan that once put an i32
  // input at offset 1 and a bf16 result at 19: the interpreter tolerated
  // them, the GPU would not).
  for (auto [dtype, offset, ok] : {std::tuple{DType::I32, 1, false},
                                   {DType::I32, 2, false},
                                   {DType::I32, 4, true},
                                   {DType::BF16, 19, false},
                                   {DType::BF16, 18, true},
                                   {DType::F16, 3, false}}) {
    PlanBuilder one;
    FnBuilder f = one.function("main");
    int x = f.input("x", {2}, dtype);
    f.output("x", x);
    f.fn().tensors[size_t(x)]->buffer_offset = offset;
    f.fn().arena_size = 64;
    if (ok) {
      auto loaded = loadPlan(one.finish());
      EXPECT_TRUE(loaded) << dtypeName(dtype) << " at " << offset << ": "
                          << loaded.status().message();
    } else {
      EXPECT_CONTAINS(loadError(one), "is not aligned to its");
    }
  }
}

TEST(PlanLoader, RejectsBufferSmallerThanShape) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->tensors[3]->buffer_size = 16;
  EXPECT_CONTAINS(loadError(pb), "tensor 3 of shape [2, 4] x f32 needs 32 "
                                 "bytes but its buffer has 16");
}

TEST(PlanLoader, RejectsOperandUsedBeforeDefinition) {
  PlanBuilder pb = goodPlan();
  auto &ops = pb.plan().functions[0]->ops;
  std::swap(ops[0], ops[1]); // matmul now reads the norm before it runs
  ops[0]->wait_events.clear();
  std::string e = loadError(pb);
  EXPECT_CONTAINS(e, "op 0 (matmul)");
  EXPECT_CONTAINS(e, "operand tensor 3 is used before it is defined");
}

TEST(PlanLoader, RejectsNeverDefinedOperand) {
  PlanBuilder pb = goodPlan();
  FnBuilder f(*pb.plan().functions[0]);
  int orphan = f.tensor({2, 4});
  pb.plan().functions[0]->ops[1]->operands[0] = orphan;
  EXPECT_CONTAINS(loadError(pb), "is never defined");
}

TEST(PlanLoader, RejectsEventWaitedBeforeRecorded) {
  PlanBuilder pb = goodPlan();
  auto &ops = pb.plan().functions[0]->ops;
  ops[0]->record_events.clear();
  ops[1]->record_events = {0}; // recorded only after its own wait
  std::string e = loadError(pb);
  EXPECT_CONTAINS(e, "op 1 (matmul)");
  EXPECT_CONTAINS(e, "waits on event 0 before any op records it");
}

TEST(PlanLoader, RejectsEventAndStreamOutOfRange) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->ops[0]->record_events = {3};
  EXPECT_CONTAINS(loadError(pb), "records event 3 of 1");
  PlanBuilder pb2 = goodPlan();
  pb2.plan().functions[0]->ops[1]->stream = 2;
  EXPECT_CONTAINS(loadError(pb2), "stream 2 is not below 2");
}

TEST(PlanLoader, RejectsBadGroupIndex) {
  PlanBuilder pb = goodPlan();
  FnBuilder f(*pb.plan().functions[0]);
  int r = f.tensor({2, 4});
  f.op(OpCode::AllReduce, {3}, {r}).group = 5;
  EXPECT_CONTAINS(loadError(pb), "group 5 is not a device group (have 1)");

  PlanBuilder pb2 = goodPlan();
  pb2.plan().parameters[1]->shard->group = 1;
  EXPECT_CONTAINS(loadError(pb2), "shard group 1 is not a device group");
}

TEST(PlanLoader, RejectsGroupThatDoesNotTileWorld) {
  PlanBuilder pb = goodPlan();
  pb.group("odd", 3);
  EXPECT_CONTAINS(loadError(pb), "device group 'odd': size 3 x stride 1 "
                                 "does not tile world_size 2");
}

TEST(PlanLoader, RejectsParameterShapeMismatch) {
  PlanBuilder pb = goodPlan();
  pb.plan().parameters[1]->local_shape = {8, 4};
  // The shard rule says [4, 4].
  EXPECT_CONTAINS(loadError(pb), "parameter 'q_proj.weight': local shape "
                                 "[8, 4] should be [4, 4]");
}

TEST(PlanLoader, RejectsTensorShapeDisagreeingWithParameter) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->tensors[2]->shape = {4, 8};
  EXPECT_CONTAINS(loadError(pb), "parameter tensor 2 is [4, 8]");
}

TEST(PlanLoader, RejectsSwigluOperandsOfTwoShapesOrTypes) {
  auto build = [](Shape up, DType upType) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int g = f.input("g", {2, 8});
    int u = f.input("u", up, upType);
    int y = f.tensor({2, 8});
    f.op(OpCode::Swiglu, {g, u}, {y});
    f.output("y", y);
    return pb;
  };
  PlanBuilder good = build({2, 8}, DType::F32);
  EXPECT_TRUE(loadPlan(good.finish()));
  PlanBuilder broadcast = build({8}, DType::F32);
  EXPECT_CONTAINS(loadError(broadcast),
                  "operand 1 shape [8] should be [2, 8] (swiglu does not "
                  "broadcast)");
  PlanBuilder mixed = build({2, 8}, DType::BF16);
  EXPECT_CONTAINS(loadError(mixed), "operand 1 (tensor 1) is bf16 but "
                                    "operand 0 (tensor 0) is f32");
}

TEST(PlanLoader, RejectsMatmulEpiloguesThatDoNotFit) {
  // a [2, 8] x b [8, 4] + bias, as the flags say.
  auto build = [](bool flag, bool biasOperand, Shape bias, DType biasType,
                  int gelu = 0) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int a = f.input("a", {2, 8});
    int b = f.input("b", {8, 4});
    int c = f.input("c", bias, biasType);
    int y = f.tensor({2, 4});
    std::vector<int> operands{a, b};
    if (biasOperand)
      operands.push_back(c);
    plan::OpT &mm = f.op(OpCode::Matmul, operands, {y});
    mm.matmul_bias = flag;
    mm.matmul_gelu = gelu != 0;
    mm.gelu_approximation = plan::GeluApproximation(gelu == 2 ? 7 : 1);
    f.output("y", y);
    return pb;
  };
  PlanBuilder good = build(true, true, {4}, DType::F32, 1);
  EXPECT_TRUE(loadPlan(good.finish()));
  PlanBuilder noBias = build(true, false, {4}, DType::F32);
  EXPECT_CONTAINS(loadError(noBias), "has 2 operands and 1 results");
  PlanBuilder unflagged = build(false, true, {4}, DType::F32);
  EXPECT_CONTAINS(loadError(unflagged), "has 3 operands and 1 results");
  PlanBuilder wide = build(true, true, {8}, DType::F32);
  EXPECT_CONTAINS(loadError(wide), "bias (tensor 2) shape [8] should be [4], "
                                   "the result's last dim");
  PlanBuilder matrix = build(true, true, {2, 4}, DType::F32);
  EXPECT_CONTAINS(loadError(matrix), "bias (tensor 2) shape [2, 4] should be "
                                     "[4]");
  PlanBuilder typed = build(true, true, {4}, DType::BF16);
  EXPECT_CONTAINS(loadError(typed), "the bias (tensor 2) is bf16 but operand "
                                    "0 (tensor 0) is f32");
  PlanBuilder approx = build(true, true, {4}, DType::F32, 2);
  EXPECT_CONTAINS(loadError(approx), "unknown GELU approximation 7");
}

// A kind or approximation past the enum would run as some other function
// (the runtimes switch on it): refused, naming the value.
TEST(PlanLoader, RejectsUnknownActivationKindsAndGeluApproximations) {
  auto build = [](OpCode code, int value) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {2, 8});
    int y = f.tensor({2, 8});
    plan::OpT &op = f.op(code, {x}, {y});
    if (code == OpCode::Gelu)
      op.gelu_approximation = plan::GeluApproximation(value);
    else
      op.activation = plan::ActivationKind(value);
    f.output("y", y);
    return pb;
  };
  for (int kind = 0; kind <= int(plan::ActivationKind::MAX); ++kind) {
    PlanBuilder good = build(OpCode::Activation, kind);
    EXPECT_TRUE(loadPlan(good.finish())) << kind;
  }
  PlanBuilder past = build(OpCode::Activation, 12);
  EXPECT_CONTAINS(loadError(past), "unknown activation kind 12");
  PlanBuilder negative = build(OpCode::Activation, -3);
  EXPECT_CONTAINS(loadError(negative), "unknown activation kind -3");
  PlanBuilder tanh = build(OpCode::Gelu, 1);
  EXPECT_TRUE(loadPlan(tanh.finish()));
  PlanBuilder gelu = build(OpCode::Gelu, 5);
  EXPECT_CONTAINS(loadError(gelu), "unknown GELU approximation 5");
}

TEST(PlanLoader, RejectsMatmulResidualsThatDoNotFit) {
  // a [2, 8] x b [8, 4] + r, r the last operand.
  auto build = [](Shape residual, DType type, bool gelu, bool operand) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int a = f.input("a", {2, 8});
    int b = f.input("b", {8, 4});
    int r = f.input("r", residual, type);
    int y = f.tensor({2, 4});
    std::vector<int> operands{a, b};
    if (operand)
      operands.push_back(r);
    plan::OpT &mm = f.op(OpCode::Matmul, operands, {y});
    mm.matmul_residual = true;
    mm.matmul_gelu = gelu;
    mm.gelu_approximation = plan::GeluApproximation::Tanh;
    f.output("y", y);
    return pb;
  };
  PlanBuilder good = build({2, 4}, DType::F32, false, true);
  EXPECT_TRUE(loadPlan(good.finish()));
  PlanBuilder missing = build({2, 4}, DType::F32, false, false);
  EXPECT_CONTAINS(loadError(missing), "has 2 operands and 1 results");
  PlanBuilder bias = build({4}, DType::F32, false, true);
  EXPECT_CONTAINS(loadError(bias), "residual (tensor 2) shape [4] should be "
                                   "the result's [2, 4]");
  PlanBuilder typed = build({2, 4}, DType::BF16, false, true);
  EXPECT_CONTAINS(loadError(typed), "the residual (tensor 2) is bf16 but "
                                    "operand 0 (tensor 0) is f32");
  PlanBuilder both = build({2, 4}, DType::F32, true, true);
  EXPECT_CONTAINS(loadError(both), "has both a residual and a GELU epilogue");
}

TEST(PlanLoader, RejectsAddRmsNormOfWrongShapesOrTypes) {
  auto build = [](Shape residual, Shape weight, DType residualType) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {2, 8});
    int r = f.input("r", residual, residualType);
    int w = f.input("w", weight);
    int s = f.tensor({2, 8}), y = f.tensor({2, 8});
    f.op(OpCode::AddRmsNorm, {x, r, w}, {s, y}).epsilon = 1e-5;
    f.output("s", s);
    f.output("y", y);
    return pb;
  };
  PlanBuilder good = build({2, 8}, {8}, DType::F32);
  EXPECT_TRUE(loadPlan(good.finish()));
  PlanBuilder broadcast = build({8}, {8}, DType::F32);
  EXPECT_CONTAINS(loadError(broadcast), "residual shape [8] should be [2, 8]");
  PlanBuilder weight = build({2, 8}, {2, 8}, DType::F32);
  EXPECT_CONTAINS(loadError(weight), "weight shape [2, 8] should be [8]");
  PlanBuilder mixed = build({2, 8}, {8}, DType::BF16);
  EXPECT_CONTAINS(loadError(mixed), "the residual (tensor 1) is bf16");
}

// An op whose own accesses overlap (results over each other, a result over
// an operand) is refused by the schedule check: the kernels, cuBLASLt and
// NCCL assume no overlap, and the interpreter, computing out of place,
// would not notice. Elementwise ops may run in place at exactly their
// operand's bytes.
TEST(PlanLoader, RejectsAnOpOverlappingItself) {
  auto build = [](int64_t sumAt, int64_t yAt) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {2, 8});
    int r = f.input("r", {2, 8});
    int w = f.input("w", {8});
    int s = f.tensor({2, 8}), y = f.tensor({2, 8});
    f.op(OpCode::AddRmsNorm, {x, r, w}, {s, y}).epsilon = 1e-5;
    f.output("s", s);
    f.output("y", y);
    plan::FunctionT &fn = *pb.plan().functions[0];
    fn.tensors[size_t(s)]->buffer_offset = sumAt;
    fn.tensors[size_t(y)]->buffer_offset = yAt;
    fn.arena_size = std::max<int64_t>(fn.arena_size, 1024);
    return pb;
  };
  PlanBuilder apart = build(512, 640);
  EXPECT_TRUE(loadPlan(apart.finish()));
  PlanBuilder overlapping = build(512, 544); // 64 bytes each
  EXPECT_CONTAINS(loadError(overlapping),
                  "op 0 (add_rms_norm, stream 0) writes bytes [544, 576) of "
                  "the arena that it also reads or writes");
  PlanBuilder overX = build(0, 640); // the sum over its operand x
  EXPECT_CONTAINS(loadError(overX), "writes bytes [0, 64) of the arena");

  // add in place (exactly its operand's bytes) is fine; half over is not.
  auto add = [](int64_t at) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {2, 8});
    int y = f.tensor({2, 8});
    f.op(OpCode::Add, {x, x}, {y});
    f.output("y", y);
    plan::FunctionT &fn = *pb.plan().functions[0];
    fn.tensors[size_t(y)]->buffer_offset =
        fn.tensors[size_t(x)]->buffer_offset + at;
    fn.arena_size = std::max<int64_t>(fn.arena_size, 1024);
    return pb;
  };
  PlanBuilder inPlace = add(0);
  auto loaded = loadPlan(inPlace.finish());
  EXPECT_TRUE(loaded) << loaded.status().message();
  PlanBuilder half = add(32);
  EXPECT_CONTAINS(loadError(half), "op 0 (add, stream 0) writes bytes");
}

// Adjacent sends and receives on one stream and group are issued as one
// group (P2PGroups.h) and run concurrently: a receive may not land on bytes
// a send of its group reads, nor two receives of a group on the same bytes.
// The same receive after another op (a separate group) may.
TEST(PlanLoader, RejectsAGroupedReceiveOverBytesItsGroupUses) {
  enum Layout { Apart, OverTheSend, OverTheOtherReceive, SendThenAdd };
  auto build = [](Layout layout) {
    PlanBuilder pb(2);
    pb.group("tp", 2);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {2, 8}); // 64 bytes
    int r0 = f.tensor({2, 8}), r1 = f.tensor({2, 8}), z = f.tensor({2, 8});
    auto p2p = [&](OpCode code, std::vector<int> in, std::vector<int> out,
                   int peer) {
      plan::OpT &op = f.op(code, std::move(in), std::move(out));
      op.group = 0;
      op.peer = peer;
    };
    p2p(OpCode::Send, {x}, {}, 0);
    p2p(OpCode::Send, {x}, {}, 1);
    if (layout == SendThenAdd) // ends the group: the sends have completed
      f.op(OpCode::Add, {x, x}, {z});
    p2p(OpCode::Recv, {}, {r0}, 0);
    p2p(OpCode::Recv, {}, {r1}, 1);
    if (layout != SendThenAdd)
      f.op(OpCode::Add, {r0, r1}, {z});
    f.output("z", z);
    plan::FunctionT &fn = *pb.plan().functions[0];
    fn.tensors[size_t(x)]->buffer_offset = 0;
    fn.tensors[size_t(r0)]->buffer_offset =
        layout == OverTheSend || layout == SendThenAdd ? 0 : 256;
    fn.tensors[size_t(r1)]->buffer_offset =
        layout == OverTheOtherReceive ? 256 : 512;
    fn.tensors[size_t(z)]->buffer_offset = 768;
    fn.arena_size = std::max<int64_t>(fn.arena_size, 1024);
    return pb;
  };
  PlanBuilder apart = build(Apart);
  auto loaded = loadPlan(apart.finish());
  EXPECT_TRUE(loaded) << loaded.status().message();
  PlanBuilder overSend = build(OverTheSend);
  EXPECT_CONTAINS(loadError(overSend),
                  "op 0 (send, stream 0) and op 2 (recv, stream 0) are "
                  "adjacent sends and receives on one stream and group, "
                  "issued as one group that runs them concurrently: both "
                  "access bytes [0, 64) of the arena");
  PlanBuilder overRecv = build(OverTheOtherReceive);
  EXPECT_CONTAINS(loadError(overRecv),
                  "op 2 (recv, stream 0) and op 3 (recv, stream 0) are "
                  "adjacent sends and receives");
  PlanBuilder separate = build(SendThenAdd);
  loaded = loadPlan(separate.finish());
  EXPECT_TRUE(loaded) << loaded.status().message();
}

// The inputs are copied in before the first op: two that share bytes
// would overwrite each other where no op's access shows it.
TEST(PlanLoader, RejectsInputsSharingBytes) {
  auto build = [](int64_t yAt) {
    PlanBuilder pb(1);
    FnBuilder f = pb.function("main");
    int x = f.input("x", {2, 8});
    int y = f.input("y", {2, 8});
    int z = f.tensor({2, 8});
    f.op(OpCode::Add, {x, y}, {z});
    f.output("z", z);
    plan::FunctionT &fn = *pb.plan().functions[0];
    fn.tensors[size_t(x)]->buffer_offset = 0;
    fn.tensors[size_t(y)]->buffer_offset = yAt;
    fn.tensors[size_t(z)]->buffer_offset = 512;
    fn.arena_size = std::max<int64_t>(fn.arena_size, 1024);
    return pb;
  };
  PlanBuilder apart = build(256);
  auto loaded = loadPlan(apart.finish());
  EXPECT_TRUE(loaded) << loaded.status().message();
  PlanBuilder overlapping = build(32); // 64 bytes each
  EXPECT_CONTAINS(loadError(overlapping),
                  "function 'main': inputs 'x' and 'y' share bytes [32, 64) "
                  "of the arena (each is copied in before the first op)");
}

TEST(PlanLoader, RejectsWrongArity) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->ops[1]->operands.push_back(1);
  EXPECT_CONTAINS(loadError(pb), "op 1 (matmul): has 3 operands and 1 results");
}

TEST(PlanLoader, RejectsAsyncMisuse) {
  auto build = [](bool wait, bool useEarly) {
    PlanBuilder pb(2);
    pb.group("tp", 2);
    FnBuilder f = pb.function("main");
    f.fn().num_handles = 1;
    int x = f.input("x", {2});
    int r = f.tensor({2}), y = f.tensor({2});
    plan::OpT &s = f.op(OpCode::AllReduceStart, {x}, {r});
    s.group = 0;
    s.handle = 0;
    if (useEarly) // reads the payload before the wait
      f.op(OpCode::Silu, {r}, {y});
    if (wait)
      f.op(OpCode::Wait, {}, {}).handle = 0;
    if (!useEarly)
      f.op(OpCode::Silu, {r}, {y});
    f.output("y", y);
    return pb;
  };
  PlanBuilder ok = build(true, false);
  EXPECT_TRUE(loadPlan(ok.finish()));
  PlanBuilder early = build(true, true);
  EXPECT_CONTAINS(loadError(early), "operand tensor 1 is used before it is "
                                    "defined");
  PlanBuilder noWait = build(false, false);
  EXPECT_CONTAINS(loadError(noWait), "used before it is defined");
  PlanBuilder twice = build(true, false);
  FnBuilder(*twice.plan().functions[0]).op(OpCode::Wait, {}, {}).handle = 0;
  EXPECT_CONTAINS(loadError(twice), "handle 0 is waited twice");
}

TEST(PlanLoader, RejectsStartedButNeverWaitedHandle) {
  PlanBuilder pb(2);
  pb.group("tp", 2);
  FnBuilder f = pb.function("main");
  f.fn().num_handles = 1;
  int x = f.input("x", {2});
  plan::OpT &s = f.op(OpCode::SendStart, {x}, {});
  s.group = 0;
  s.peer = 1;
  s.handle = 0;
  EXPECT_CONTAINS(loadError(pb), "handle 0 is started but never waited");
}

TEST(PlanLoader, RejectsTensorProducedTwice) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->ops[1]->results[0] = 3;
  pb.plan().functions[0]->outputs[0]->tensor = 3;
  EXPECT_CONTAINS(loadError(pb), "tensor 3 is produced by op 0 and op 1");
}

TEST(PlanLoader, RejectsWritingAParameter) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->ops[1]->results[0] = 2;
  EXPECT_CONTAINS(loadError(pb), "op 1 writes tensor 2 which is a parameter");
}

TEST(PlanLoader, RejectsTensorIdMismatchAndBadRefs) {
  PlanBuilder pb = goodPlan();
  pb.plan().functions[0]->tensors[1]->id = 7;
  EXPECT_CONTAINS(loadError(pb), "tensor at position 1 has id 7");
  PlanBuilder pb2 = goodPlan();
  pb2.plan().functions[0]->ops[0]->operands[0] = 42;
  EXPECT_CONTAINS(loadError(pb2), "names tensor 42 but there are 5");
}

TEST(PlanLoader, RejectsStateBindingOfWrongShape) {
  PlanBuilder pb(1);
  int slot = pb.stateSlot("kv", {1, 4, 1, 2});
  FnBuilder f = pb.function("decode");
  int in = f.state(slot, pb.plan());
  int out = f.tensor({1, 4, 1, 1});
  f.op(OpCode::Reshape, {in}, {out}); // element counts differ on purpose
  auto b = std::make_unique<plan::StateBindingT>();
  b->slot = slot;
  b->input = in;
  b->output = out;
  f.fn().state.push_back(std::move(b));
  EXPECT_CONTAINS(loadError(pb), "state binding for slot 'kv' writes tensor 1 "
                                 "of shape [1, 4, 1, 1], slot is [1, 4, 1, 2]");
}

TEST(PlanLoader, RejectsDuplicateFunctionAndPeerOutOfRange) {
  PlanBuilder pb = goodPlan();
  pb.function("prefill");
  EXPECT_CONTAINS(loadError(pb), "function 'prefill' is defined twice");
  PlanBuilder pb2(2);
  pb2.group("pp", 2);
  FnBuilder f = pb2.function("main");
  int x = f.input("x", {1});
  plan::OpT &s = f.op(OpCode::Send, {x}, {});
  s.group = 0;
  s.peer = 2;
  EXPECT_CONTAINS(loadError(pb2), "peer 2 is not a rank of a group of 2");
}

TEST(PlanLoader, RejectsCollectiveShapeMismatch) {
  auto build = [](OpCode code, Shape in, Shape out, int64_t dim) {
    PlanBuilder pb(2);
    pb.group("tp", 2);
    FnBuilder f = pb.function("main");
    int x = f.input("x", std::move(in));
    int y = f.tensor(std::move(out));
    plan::OpT &op = f.op(code, {x}, {y});
    op.group = 0;
    op.dim = dim;
    f.output("y", y);
    return pb;
  };
  PlanBuilder ag = build(OpCode::AllGather, {2, 3}, {2, 3}, 1);
  EXPECT_CONTAINS(loadError(ag),
                  "op 0 (all_gather): result shape [2, 3] should be [2, 6]");
  PlanBuilder rs = build(OpCode::ReduceScatter, {3, 4}, {1, 4}, 0);
  EXPECT_CONTAINS(loadError(rs), "dim 0 of size 3 is not divisible by group "
                                 "size 2");
  PlanBuilder ar = build(OpCode::AllReduceStart, {4}, {2}, 0);
  ar.plan().functions[0]->num_handles = 1;
  ar.plan().functions[0]->ops[0]->handle = 0;
  FnBuilder(*ar.plan().functions[0]).op(OpCode::Wait, {}, {}).handle = 0;
  EXPECT_CONTAINS(loadError(ar),
                  "op 0 (all_reduce_start): result shape [2] should be [4]");
  PlanBuilder ok = build(OpCode::AllGather, {2, 3}, {2, 6}, 1);
  EXPECT_TRUE(loadPlan(ok.finish()));
}

TEST(PlanLoader, RejectsReshapeAndSliceMismatch) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  int x = f.input("x", {2, 3});
  int y = f.tensor({5});
  f.op(OpCode::Reshape, {x}, {y});
  EXPECT_CONTAINS(loadError(pb), "reshape [2, 3] -> [5] changes the element "
                                 "count");
  PlanBuilder pb2(1);
  FnBuilder g = pb2.function("main");
  int a = g.input("x", {2, 3});
  int b = g.tensor({2, 2});
  plan::OpT &sl = g.op(OpCode::Slice, {a}, {b});
  sl.offsets = {0, 2};
  sl.sizes = {2, 2};
  EXPECT_CONTAINS(loadError(pb2), "dim 1 slice [2, +2) exceeds size 3");
}

namespace {
// y = a @ b (transposed as asked), one op; the error when it is refused.
std::string matmulError(Shape a, Shape b, Shape y, bool transA = false,
                        bool transB = false, DType da = DType::F32,
                        DType db = DType::F32, DType dy = DType::F32) {
  PlanBuilder pb(1);
  FnBuilder f = pb.function("main");
  int ta = f.input("a", std::move(a), da), tb = f.input("b", std::move(b), db);
  int ty = f.tensor(std::move(y), dy);
  plan::OpT &mm = f.op(OpCode::Matmul, {ta, tb}, {ty});
  mm.transpose_a = transA;
  mm.transpose_b = transB;
  f.output("y", ty);
  auto plan = loadPlan(pb.finish());
  return plan ? std::string() : plan.status().message();
}
} // namespace

// cuBLASLt checks nothing: a matmul whose operands or result disagree
// would read the wrong elements or write past its result on a GPU, so the
// loader refuses it, naming the op and the tensors.
TEST(PlanLoader, RejectsMatmulShapeMismatch) {
  EXPECT_CONTAINS(matmulError({2, 3}, {2, 4}, {2, 4}),
                  "function 'main': op 0 (matmul): a (tensor 0) and b "
                  "(tensor 1): contraction sizes differ: a [2, 3] gives K=3, "
                  "b [2, 4] gives K=2");
  // The transposes decide which dim is K.
  EXPECT_CONTAINS(matmulError({2, 3}, {4, 3}, {2, 4}),
                  "contraction sizes differ: a [2, 3] gives K=3, b [4, 3] "
                  "gives K=4");
  EXPECT_CONTAINS(matmulError({3, 2}, {3, 4}, {2, 4}, /*transA=*/false),
                  "a [3, 2] gives K=2, b [3, 4] gives K=3");
  // A result of another shape than A x B (smaller: the GEMM would write
  // past its buffer).
  EXPECT_CONTAINS(matmulError({2, 3}, {3, 4}, {2, 2}),
                  "op 0 (matmul): result (tensor 2) shape [2, 2] should be "
                  "[2, 4], a [2, 3] x b [3, 4]");
  EXPECT_CONTAINS(matmulError({3, 2}, {4, 3}, {3, 4}, true, true),
                  "result (tensor 2) shape [3, 4] should be [2, 4], "
                  "a [3, 2]^T x b [4, 3]^T");
  EXPECT_CONTAINS(matmulError({2, 2, 3}, {3, 4}, {4, 4}),
                  "result (tensor 2) shape [4, 4] should be [2, 2, 4]");
  // B is one shared matrix or carries A's batch dims, nothing between.
  EXPECT_CONTAINS(matmulError({2, 2, 3}, {1, 2, 3, 4}, {2, 2, 4}),
                  "a (tensor 0) and b (tensor 1): batched b [1, 2, 3, 4] "
                  "must have a's rank 3 (a is [2, 2, 3])");
  EXPECT_CONTAINS(matmulError({2, 3}, {2, 3, 4}, {2, 2, 4}),
                  "batched b [2, 3, 4] must have a's rank 2");
  EXPECT_CONTAINS(matmulError({2, 2, 3}, {1, 3, 4}, {2, 2, 4}),
                  "batch dim 0 differs: [2, 2, 3] vs [1, 3, 4]");
  EXPECT_CONTAINS(matmulError({2, 5, 2, 3}, {2, 4, 3, 4}, {2, 5, 2, 4}),
                  "batch dim 1 differs: [2, 5, 2, 3] vs [2, 4, 3, 4]");
  EXPECT_CONTAINS(matmulError({3}, {3, 4}, {4}),
                  "op 0 (matmul): a (tensor 0) and b (tensor 1): operands "
                  "need rank >= 2, got [3] and [3, 4]");
}

TEST(PlanLoader, RejectsMatmulDTypeMismatch) {
  EXPECT_CONTAINS(matmulError({2, 3}, {3, 4}, {2, 4}, false, false, DType::BF16,
                              DType::F16, DType::BF16),
                  "op 0 (matmul): operand 1 (tensor 1) is f16 but operand 0 "
                  "(tensor 0) is bf16");
  EXPECT_CONTAINS(matmulError({2, 3}, {3, 4}, {2, 4}, false, false, DType::BF16,
                              DType::BF16, DType::F32),
                  "op 0 (matmul): the result (tensor 2) is f32 but operand 0 "
                  "(tensor 0) is bf16");
  EXPECT_CONTAINS(matmulError({2, 3}, {3, 4}, {2, 4}, false, false, DType::I32,
                              DType::I32, DType::I32),
                  "op 0 (matmul): operand 0 (tensor 0) is i32, must be "
                  "floating point");
}

// Every form the CPU kernel and the CUDA GEMM both run loads.
TEST(PlanLoader, AcceptsEveryMatmulForm) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(t));
    auto ok = [t](Shape a, Shape b, Shape y, bool ta = false, bool tb = false) {
      return matmulError(std::move(a), std::move(b), std::move(y), ta, tb, t, t,
                         t);
    };
    EXPECT_EQ(ok({2, 3}, {3, 4}, {2, 4}), "");
    EXPECT_EQ(ok({3, 2}, {4, 3}, {2, 4}, true, true), "");
    EXPECT_EQ(ok({2, 5, 3}, {4, 3}, {2, 5, 4}, false, true), ""); // shared B
    EXPECT_EQ(ok({2, 3, 5}, {3, 4}, {2, 5, 4}, true, false), "");
    EXPECT_EQ(ok({2, 5, 3}, {2, 3, 4}, {2, 5, 4}), ""); // batched B
    EXPECT_EQ(ok({2, 6, 5, 3}, {2, 6, 4, 3}, {2, 6, 5, 4}, false, true), "");
    EXPECT_EQ(ok({2, 0}, {0, 4}, {2, 4}), ""); // K = 0: zeros
    EXPECT_EQ(ok({0, 3}, {3, 4}, {0, 4}), "");
  }
}

namespace {
/// A one-element [T] vector {value} the FlatBuffers Verifier accepts,
/// faked inside a 16-byte blob with its length prefix `shift` bytes in:
/// shifts 0 and 4 leave the element 8-byte aligned in one case and not in
/// the other (which one depends on where the builder put the blob).
template <typename T>
flatbuffers::Offset<flatbuffers::Vector<T>>
fakeVector(flatbuffers::FlatBufferBuilder &fbb, int shift, T value) {
  static_assert(sizeof(T) == 8, "the blob holds one 8-byte element");
  std::vector<uint8_t> blob(16, 0); // same size for every shift
  uint32_t length = 1;
  std::memcpy(blob.data() + shift, &length, 4);
  std::memcpy(blob.data() + shift + 4, &value, 8);
  // Builder offsets count from the end of the buffer; the blob's data
  // starts 4 bytes (its own length prefix) after its offset.
  flatbuffers::uoffset_t blobAt = fbb.CreateVector(blob).o;
  return flatbuffers::Offset<flatbuffers::Vector<T>>(
      blobAt - 4 - flatbuffers::uoffset_t(shift));
}
} // namespace

TEST(PlanLoader, RejectsMisalignedLongVector) {
  // Found by fuzz/PlanLoaderFuzzer.cpp (UBSan: misaligned int64 load in
  // toShape). The FlatBuffers Verifier checks that a vector's 4-byte length
  // prefix is aligned and in bounds, not that 8-byte elements are aligned:
  // point a tensor's shape at a fake [long] vector {2} inside a byte blob,
  // once 8-byte aligned and once 4 bytes off, and only the latter must fail.
  int misaligned = 0;
  for (int shift : {0, 4}) {
    flatbuffers::FlatBufferBuilder fbb;
    auto fake = fakeVector<int64_t>(fbb, shift, 2);
    auto tensor = plan::CreateTensor(fbb, 0, 0, fake, plan::DType::F32,
                                     plan::TensorKind::Activation, -1, 0, 8);
    auto fn = plan::CreateFunction(fbb, fbb.CreateString("main"),
                                   fbb.CreateVector(&tensor, 1), 0, 0, 0, 0,
                                   /*arena_size=*/8);
    fbb.Finish(plan::CreatePlan(fbb, kPlanFormatVersion, 1, 0, 0, 0,
                                fbb.CreateVector(&fn, 1)),
               plan::PlanIdentifier());
    std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                               fbb.GetBufferPointer() + fbb.GetSize());
    // Reading the vector's address reads only (aligned) offsets.
    const auto *shape = plan::GetPlan(bytes.data())
                            ->functions()
                            ->Get(0)
                            ->tensors()
                            ->Get(0)
                            ->shape();
    ASSERT_EQ(shape->size(), 1u);
    if (reinterpret_cast<uintptr_t>(shape->Data()) % 8 == 0) {
      auto plan = loadPlan(bytes);
      EXPECT_TRUE(plan) << plan.status().message();
      continue;
    }
    ++misaligned;
    EXPECT_CONTAINS(loadError(bytes), "function 'main': tensor 0 shape vector "
                                      "is not aligned");
  }
  EXPECT_EQ(misaligned, 1);
}

TEST(PlanLoader, RejectsMisalignedDoubleVector) {
  // Found by fuzz/PlanLoaderFuzzer.cpp (UBSan: misaligned double load
  // unpacking a plan that loaded): an op's rope_inv_freq ([double]) was not
  // among the vectors checked. As above, a fake one-element vector inside a
  // byte blob, 8-byte aligned and 4 bytes off; only the latter is refused
  // for its alignment (the other for what the op lacks).
  int misaligned = 0;
  for (int shift : {0, 4}) {
    flatbuffers::FlatBufferBuilder fbb;
    auto fake = fakeVector<double>(fbb, shift, 0.5);
    plan::OpBuilder ob(fbb);
    ob.add_opcode(plan::OpCode::Rope);
    ob.add_rope_inv_freq(fake);
    auto op = ob.Finish();
    auto fn = plan::CreateFunction(fbb, fbb.CreateString("main"), 0, 0, 0, 0,
                                   fbb.CreateVector(&op, 1), /*arena_size=*/8);
    fbb.Finish(plan::CreatePlan(fbb, kPlanFormatVersion, 1, 0, 0, 0,
                                fbb.CreateVector(&fn, 1)),
               plan::PlanIdentifier());
    std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                               fbb.GetBufferPointer() + fbb.GetSize());
    const auto *inv = plan::GetPlan(bytes.data())
                          ->functions()
                          ->Get(0)
                          ->ops()
                          ->Get(0)
                          ->rope_inv_freq();
    ASSERT_EQ(inv->size(), 1u);
    const std::string error = loadError(bytes);
    if (reinterpret_cast<uintptr_t>(inv->Data()) % 8 == 0) {
      EXPECT_EQ(error.find("not aligned"), std::string::npos) << error;
      continue;
    }
    ++misaligned;
    EXPECT_CONTAINS(error, "function 'main': op 0 rope_inv_freq vector is not "
                           "aligned");
  }
  EXPECT_EQ(misaligned, 1);
}

// Shapes of parameters and state slots no tensor refers to are bounded too:
// their element counts feed allocation arithmetic in every runtime.
TEST(PlanLoader, RejectsHugeParameterAndStateShapes) {
  PlanBuilder pb = goodPlan();
  pb.param("huge", {int64_t(1) << 30, int64_t(1) << 30},
           {int64_t(1) << 30, int64_t(1) << 30});
  EXPECT_CONTAINS(loadError(pb), "parameter 'huge': shape "
                                 "[1073741824, 1073741824] is too large");
  PlanBuilder pb2 = goodPlan();
  pb2.stateSlot("big", {int64_t(1) << 21, int64_t(1) << 21});
  EXPECT_CONTAINS(loadError(pb2), "state slot 'big': invalid or too large "
                                  "shape [2097152, 2097152]");
}

namespace {
// y = x P^T over pack 0 = {q, k, v} ([3 + 2 + 2, 4] per rank of 2).
PlanBuilder packPlan() {
  PlanBuilder pb(2);
  pb.group("tp", 2);
  int q = pb.param("q_proj.weight", {6, 4}, {3, 4}, DType::F32, 0, 0);
  int k = pb.param("k_proj.weight", {4, 4}, {2, 4}, DType::F32, 0, 0);
  int v = pb.param("v_proj.weight", {4, 4}, {2, 4}, DType::F32, 0, 0);
  int qkv = pb.pack({q, k, v});
  FnBuilder f = pb.function("prefill");
  int x = f.input("x", {2, 4});
  int p = f.packedParam(qkv, pb.plan());
  int y = f.tensor({2, 7});
  f.op(OpCode::Matmul, {x, p}, {y}).transpose_b = true;
  f.output("y", y);
  return pb;
}
} // namespace

TEST(PlanLoader, AcceptsParameterPacks) {
  PlanBuilder pb = packPlan();
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  ParameterPacking packing = parameterPacking(loaded->root());
  ASSERT_EQ(packing.packs.size(), 1u);
  EXPECT_EQ(packing.packs[0].shape, (Shape{7, 4}));
  EXPECT_EQ(packing.packs[0].dtype, DType::F32);
  EXPECT_EQ(packing.packs[0].bytes, 7 * 4 * 4);
  ASSERT_EQ(packing.places.size(), 3u);
  EXPECT_EQ(packing.places[0].pack, 0);
  EXPECT_EQ(packing.places[0].offset, 0);
  EXPECT_EQ(packing.places[1].offset, 3 * 4 * 4);
  EXPECT_EQ(packing.places[2].offset, 5 * 4 * 4);

  // A parameter in no pack stays on its own.
  PlanBuilder pb2 = packPlan();
  pb2.param("o_proj.weight", {4, 4}, {4, 4});
  auto loaded2 = loadPlan(pb2.finish());
  ASSERT_TRUE(loaded2) << loaded2.status().message();
  EXPECT_EQ(parameterPacking(loaded2->root()).places[3].pack, -1);
}

// A pack is read-only, like a parameter: two streams may read it with no
// event between them, even while one writes arena bytes (here the pack
// would overlap [-1, 111) if it were taken for an arena tensor).
TEST(PlanLoader, PackedParameterIsReadOnlyForTheScheduleCheck) {
  PlanBuilder pb = packPlan();
  plan::FunctionT &fn = *pb.plan().functions[0];
  FnBuilder f(fn);
  int y2 = f.tensor({2, 7});
  fn.num_streams = 2;
  plan::OpT &mm = f.op(OpCode::Matmul, {0, 1}, {y2});
  mm.transpose_b = true;
  mm.stream = 1;
  // Stream 1 writes the tensor at arena offset 64 first; stream 0 reads
  // the pack unordered with it.
  std::swap(fn.ops[0], fn.ops[1]);
  std::swap(fn.tensors[2]->buffer_offset, fn.tensors[3]->buffer_offset);
  f.output("y2", y2);
  auto loaded = loadPlan(pb.finish());
  EXPECT_TRUE(loaded) << loaded.status().message();
}

TEST(PlanLoader, RejectsMalformedParameterPacks) {
  struct Case {
    const char *what;
    std::function<void(PlanBuilder &)> mutate;
    const char *error;
  };
  auto pieces = [](PlanBuilder &pb) -> std::vector<int> & {
    return pb.plan().parameter_packs[0]->pieces;
  };
  auto packTensor = [](PlanBuilder &pb) -> plan::TensorT & {
    return *pb.plan().functions[0]->tensors[1];
  };
  const int64_t big = int64_t(1) << 40;
  std::vector<Case> cases = {
      {"piece out of range", [&](PlanBuilder &pb) { pieces(pb)[1] = 9; },
       "parameter pack 0: piece 1 is parameter 9 but there are 3"},
      {"negative piece", [&](PlanBuilder &pb) { pieces(pb)[0] = -1; },
       "parameter pack 0: piece 0 is parameter -1 but there are 3"},
      {"repeated piece", [&](PlanBuilder &pb) { pieces(pb)[2] = 0; },
       "parameter pack 0: parameter 'q_proj.weight' is a piece twice"},
      {"piece in two packs", [&](PlanBuilder &pb) { pb.pack({2}); },
       "parameter pack 1: parameter 'v_proj.weight' is already a piece of "
       "parameter pack 0"},
      {"no pieces", [&](PlanBuilder &pb) { pieces(pb).clear(); },
       "parameter pack 0 has no pieces"},
      {"dtypes disagree",
       [&](PlanBuilder &pb) {
         pb.plan().parameters[1]->dtype = DType::BF16;
         pb.plan().functions[0]->tensors[1]->dtype = DType::BF16;
       },
       "parameter pack 0: piece 'k_proj.weight' is bf16 but piece "
       "'q_proj.weight' is f32; the pieces of a pack share their dtype"},
      {"trailing dims disagree",
       [&](PlanBuilder &pb) {
         pb.plan().parameters[2]->full_shape = {4, 5};
         pb.plan().parameters[2]->local_shape = {2, 5};
       },
       "parameter pack 0: piece 'v_proj.weight' is [2, 5] but piece "
       "'q_proj.weight' is [3, 4]; the pieces of a pack share every dim but "
       "dim 0"},
      {"ranks disagree",
       [&](PlanBuilder &pb) {
         pb.plan().parameters[1]->full_shape = {4, 4, 1};
         pb.plan().parameters[1]->local_shape = {2, 4, 1};
       },
       "piece 'k_proj.weight' is [2, 4, 1] but piece 'q_proj.weight' is "
       "[3, 4]"},
      {"rank 0", [&](PlanBuilder &pb) { pb.pack({pb.param("scale", {}, {})}); },
       "parameter pack 1: piece 'scale' has rank 0; pieces are stacked "
       "along dim 0"},
      {"too large",
       [&](PlanBuilder &pb) {
         pb.pack({pb.param("a", {big}, {big}), pb.param("b", {big}, {big})});
       },
       "parameter pack 1: its pieces stacked on dim 0 (2 pieces, first "
       "[1099511627776]) make a tensor that is too large"},
      {"tensor names no pack", [&](PlanBuilder &pb) { packTensor(pb).ref = 1; },
       "function 'prefill': packed parameter tensor 1 refers to parameter "
       "pack 1 of 1"},
      {"tensor shape is not the pack's",
       [&](PlanBuilder &pb) {
         packTensor(pb).shape = {6, 4};
       },
       "function 'prefill': packed parameter tensor 1 is [6, 4] x f32 but "
       "parameter pack 0 is [7, 4] x f32"},
      {"tensor dtype is not the pack's",
       [&](PlanBuilder &pb) { packTensor(pb).dtype = DType::F16; },
       "packed parameter tensor 1 is [7, 4] x f16 but parameter pack 0 is "
       "[7, 4] x f32"},
      {"tensor in the arena",
       [&](PlanBuilder &pb) { packTensor(pb).buffer_offset = 0; },
       "packed parameter tensor 1 must have buffer_offset -1"},
      {"op writes the pack",
       [&](PlanBuilder &pb) {
         plan::FunctionT &fn = *pb.plan().functions[0];
         fn.ops[0]->results[0] = 1;
         fn.outputs[0]->tensor = 1;
       },
       "function 'prefill': op 0 writes tensor 1 which is a packed parameter "
       "(read-only)"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    PlanBuilder pb = packPlan();
    c.mutate(pb);
    EXPECT_CONTAINS(loadError(pb), c.error);
  }
}

TEST(PlanText, ShowsPacksAndPackedTensors) {
  PlanBuilder pb = packPlan();
  auto loaded = loadPlan(pb.finish());
  ASSERT_TRUE(loaded) << loaded.status().message();
  std::ostringstream text;
  printPlan(text, loaded->root());
  EXPECT_CONTAINS(text.str(),
                  "\npack 0 f32 7x4 = param 0 + param 1 + param 2\n");
  EXPECT_CONTAINS(text.str(), "\n  %1 pack 0 f32 7x4\n");
  EXPECT_CONTAINS(text.str(), "\n  %2 = matmul %0, %1 {transpose_b = true}\n");
}

TEST(PlanLoader, RejectsShardingItCannotGather) {
  auto edit = [](const std::function<void(plan::FunctionT &)> &change) {
    PlanBuilder pb = shardedOutputPlan();
    change(*pb.plan().functions[0]);
    return loadError(pb);
  };
  EXPECT_CONTAINS(
      edit([](plan::FunctionT &f) { f.outputs.back()->shard_group = 2; }),
      "function 'decode': output 'logits' is sharded over group 2 "
      "of 2");
  EXPECT_CONTAINS(
      edit([](plan::FunctionT &f) { f.outputs.back()->shard_dim = 2; }),
      "output 'logits' is sharded along dim 2 of a rank-2 tensor");
  EXPECT_CONTAINS(
      edit([](plan::FunctionT &f) { f.outputs.back()->full_size = 7; }),
      "output 'logits' has full size 7 along dim 1; its 2 blocks "
      "of 3 hold 1 to 6");
  EXPECT_CONTAINS(
      edit([](plan::FunctionT &f) { f.outputs.back()->full_size = 0; }),
      "has full size 0 along dim 1");
  EXPECT_CONTAINS(edit([](plan::FunctionT &f) {
                    f.inputs.back()->shard_group = 1;
                    f.inputs.back()->full_size = 1;
                  }),
                  "input 'x' is sharded; only outputs may be");
}

TEST(PlanLoader, RejectsAShardedOutputTooLargeToGather) {
  // 2^24 ranks of a 2^40-row block: the whole would be 2^64 rows (an
  // int64 overflow before), and a full size of 2^62 is past every tensor
  // limit.
  PlanBuilder pb(1 << 24);
  pb.group("tp", 1 << 24);
  FnBuilder f = pb.function("decode");
  int x = f.input("x", {int64_t(1) << 40}, DType::I32);
  f.output("logits", x);
  plan::BindingT &b = *f.fn().outputs.back();
  b.shard_group = 0;
  b.shard_dim = 0;
  b.full_size = int64_t(1) << 62;
  EXPECT_CONTAINS(loadError(pb), "output 'logits' gathered is "
                                 "[4611686018427387904], too large a tensor");
}
