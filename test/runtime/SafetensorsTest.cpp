//===- SafetensorsTest.cpp - safetensors checkpoints ----------------------===//
#include "runtime/Safetensors.h"
#include "runtime/Interpreter.h"
#include "runtime/Weights.h"
#include "test/runtime/Expect.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>

#include <unistd.h>

using namespace braid::rt;
using namespace braid::rt::test;
namespace plan = braid::plan;

namespace {
// A path unique to the running test, so parallel ctest processes never
// share a file.
std::string tempPath(const std::string &suffix = "") {
  const auto *info = testing::UnitTest::GetInstance()->current_test_info();
  return testing::TempDir() + "braid_" + info->test_suite_name() + "_" +
         info->name() + suffix + ".safetensors";
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// Length field (the header's size unless `len` is given), header, data.
std::string rawFile(const std::string &header, const std::string &data = "",
                    std::optional<uint64_t> len = std::nullopt) {
  uint64_t n = len ? *len : header.size();
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(char(uint8_t(n >> (8 * i))));
  return out + header + data;
}

// Writes `bytes`, expects open() to fail, returns the message (which must
// name the file).
std::string openError(const std::string &bytes) {
  std::string path = tempPath();
  writeBytes(path, bytes);
  auto file = SafetensorsFile::open(path);
  EXPECT_FALSE(file) << "opened: " << path;
  if (file)
    return "";
  const std::string &msg = file.status().message();
  EXPECT_NE(msg.find("checkpoint '" + path + "'"), std::string::npos) << msg;
  return msg;
}

// One F32 tensor "w" with the given JSON fields and 8 bytes of data.
std::string oneTensor(const std::string &fields) {
  return rawFile("{\"w\":{" + fields + "}}", std::string(8, '\0'));
}


std::vector<float> ramp(size_t n, float scale = 0.37f) {
  std::vector<float> v;
  for (size_t i = 0; i < n; ++i)
    v.push_back(std::sin(float(i) * scale) * 2.5f);
  return v;
}
} // namespace

//===----------------------------------------------------------------------===//
// Reading and writing
//===----------------------------------------------------------------------===//

TEST(Safetensors, RoundTripBf16F16F32) {
  std::vector<std::pair<std::string, HostTensor>> tensors;
  tensors.emplace_back("a.bf16",
                       HostTensor::fromFloats(DType::BF16, {3, 4}, ramp(12)));
  tensors.emplace_back("b.f16",
                       HostTensor::fromFloats(DType::F16, {2, 5}, ramp(10)));
  tensors.emplace_back("c.f32",
                       HostTensor::fromFloats(DType::F32, {7}, ramp(7)));
  tensors.emplace_back("d.scalar",
                       HostTensor::fromFloats(DType::F32, {}, {1.5f}));
  tensors.emplace_back("e.empty",
                       HostTensor::fromFloats(DType::BF16, {0, 3}, {}));
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(path, tensors));

  // HF layout: header length is a multiple of 8, padded with spaces.
  std::string bytes = readBytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | uint8_t(bytes[size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ(bytes.size(), 8 + n + 24 + 20 + 28 + 4 + 0);

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->names(), (std::vector<std::string>{"a.bf16", "b.f16", "c.f32",
                                                     "d.scalar", "e.empty"}));
  EXPECT_TRUE(file->contains("b.f16"));
  EXPECT_FALSE(file->contains("z"));
  for (const auto &[name, t] : tensors) {
    auto values = file->readFloats(name, t.shape);
    ASSERT_TRUE(values) << values.status().message();
    EXPECT_EQ(*values, t.toFloats()) << name; // exact: one rounding each
  }
  // The rounding really happened (the dtypes are not all stored as f32).
  EXPECT_NE(*file->readFloats("a.bf16", {3, 4}), std::vector<float>(ramp(12)));
  EXPECT_NE(*file->readFloats("b.f16", {2, 5}), std::vector<float>(ramp(10)));
}

TEST(Safetensors, ReadsHandWrittenFileWithMetadataAndUnalignedData) {
  // Header of odd length: the data region starts unaligned.
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("y":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}})";
  if (header.size() % 2 == 0)
    header += " ";
  std::string data;
  for (float f : {1.0f, -2.5f}) {
    char b[4];
    std::memcpy(b, &f, 4);
    data.append(b, 4);
  }
  // bf16 0x3fc0 = 1.5, 0xc000 = -2.0, little-endian.
  data += std::string("\xc0\x3f\x00\xc0", 4);
  std::string path = tempPath();
  writeBytes(path, rawFile(header, data));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*file->readFloats("x", {2}), (std::vector<float>{1.0f, -2.5f}));
  EXPECT_EQ(*file->readFloats("y", {1, 2}), (std::vector<float>{1.5f, -2.0f}));
}

TEST(Safetensors, WriterRejectsBadTensors) {
  std::string path = tempPath();
  HostTensor ok = HostTensor::fromFloats(DType::F32, {2}, {1, 2});
  Status dup = writeSafetensors(path, {{"w", ok}, {"w", ok}});
  ASSERT_FALSE(dup);
  EXPECT_HAS(dup.message(), "tensor name 'w' is reserved or repeated");
  EXPECT_FALSE(writeSafetensors(path, {{"__metadata__", ok}}));
  HostTensor bad = ok;
  bad.bytes.pop_back();
  Status sz = writeSafetensors(path, {{"v", bad}});
  ASSERT_FALSE(sz);
  EXPECT_HAS(sz.message(), "tensor 'v' is [2] x f32 with 7 bytes");
  Status dir = writeSafetensors(testing::TempDir() + "no/such/dir/x", {});
  ASSERT_FALSE(dir);
  EXPECT_HAS(dir.message(), "cannot write");
}

//===----------------------------------------------------------------------===//
// Every way a header can be wrong
//===----------------------------------------------------------------------===//

TEST(SafetensorsErrors, MissingFileAndDirectory) {
  auto missing = SafetensorsFile::open(tempPath("_missing"));
  ASSERT_FALSE(missing);
  EXPECT_HAS(missing.status().message(), "cannot open checkpoint '");
  auto dir = SafetensorsFile::open(testing::TempDir());
  ASSERT_FALSE(dir);
  EXPECT_HAS(dir.status().message(), "is not a regular file");
}

TEST(SafetensorsErrors, ShorterThanLengthField) {
  EXPECT_HAS(openError(""), "is 0 bytes, shorter than the 8-byte header");
  EXPECT_HAS(openError(std::string("\x02\0\0\0\0", 5)),
             "is 5 bytes, shorter than the 8-byte header");
}

TEST(SafetensorsErrors, HeaderLengthPastEndOfFile) {
  EXPECT_HAS(openError(rawFile("{}", "", 100)),
             "header length 100 exceeds the 2 bytes after the length field");
  EXPECT_HAS(openError(rawFile("{}", "", UINT64_MAX)),
             "header length 18446744073709551615 exceeds");
}

TEST(SafetensorsErrors, HeaderNotJsonOrNotObject) {
  EXPECT_HAS(openError(rawFile("{\"w\": ")), "header is not valid JSON");
  EXPECT_HAS(openError(rawFile("\xff\xfe")), "header is not valid JSON");
  EXPECT_HAS(openError(rawFile("")), "header is not valid JSON");
  EXPECT_HAS(openError(rawFile("[1, 2]")), "header is not a JSON object");
  EXPECT_HAS(openError(rawFile("\"w\"")), "header is not a JSON object");
}

TEST(SafetensorsErrors, EntryNotObjectOrMissingFields) {
  EXPECT_HAS(openError(rawFile(R"({"w": 3})")),
             "tensor 'w': entry is not a JSON object");
  EXPECT_HAS(openError(oneTensor(R"("shape":[2],"data_offsets":[0,8])")),
             "tensor 'w': missing 'dtype'");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","data_offsets":[0,8])")),
             "tensor 'w': missing 'shape'");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[2])")),
             "tensor 'w': missing 'data_offsets'");
}

TEST(SafetensorsErrors, FieldsOfWrongType) {
  EXPECT_HAS(openError(oneTensor(R"("dtype":4,"shape":[2],)"
                                 R"("data_offsets":[0,8])")),
             "tensor 'w': 'dtype' is not a string");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":"2",)"
                                 R"("data_offsets":[0,8])")),
             "tensor 'w': 'shape' is not an array");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[2.0],)"
                                 R"("data_offsets":[0,8])")),
             "tensor 'w': shape dim 0 is not an integer: 2.0");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[1,"2"],)"
                                 R"("data_offsets":[0,8])")),
             "tensor 'w': shape dim 1 is not an integer");
  for (const char *offsets :
       {"[0]", "[0,8,8]", "\"0,8\"", "[0,-8]", "[-1,8]", "[0,8.0]", "[null,8]"})
    EXPECT_HAS(openError(oneTensor(std::string(R"("dtype":"F32","shape":[2],)"
                                               R"("data_offsets":)") +
                                   offsets)),
               "tensor 'w': 'data_offsets' is not [begin, end] of "
               "non-negative integers");
}

TEST(SafetensorsErrors, UnsupportedDtypeIsNamed) {
  EXPECT_HAS(openError(oneTensor(R"("dtype":"Q4_K","shape":[2],)"
                                 R"("data_offsets":[0,8])")),
             "tensor 'w': unsupported dtype 'Q4_K' (supported: BF16, F16, "
             "F32)");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"bf16","shape":[4],)"
                                 R"("data_offsets":[0,8])")),
             "unsupported dtype 'bf16'");
}

TEST(SafetensorsErrors, KnownNonFloatDtypeOpensButCannotBeRead) {
  // Integer buffers (e.g. position ids) must not stop the rest loading.
  std::string path = tempPath();
  writeBytes(path, rawFile(R"({"ids":{"dtype":"I64","shape":[1],)"
                           R"("data_offsets":[0,8]}})",
                           std::string(8, '\0')));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  auto values = file->readFloats("ids", {1});
  ASSERT_FALSE(values);
  EXPECT_HAS(values.status().message(),
             "checkpoint '" + path +
                 "': tensor 'ids' has dtype I64; only BF16, F16 and F32 can "
                 "be read");
}

TEST(SafetensorsErrors, NegativeDim) {
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[2,-3],)"
                                 R"("data_offsets":[0,8])")),
             "tensor 'w': shape dim 1 is negative: -3");
}

TEST(SafetensorsErrors, OffsetsOutsideDataOrReversed) {
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[1],)"
                                 R"("data_offsets":[8,4])")),
             "tensor 'w': data_offsets [8, 4] end before they begin");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[4],)"
                                 R"("data_offsets":[0,16])")),
             "tensor 'w': data_offsets [0, 16] run past the data region of 8 "
             "bytes");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[0],)"
                                 R"("data_offsets":[9,9])")),
             "run past the data region of 8 bytes");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[1],)"
                                 R"("data_offsets":[0,18446744073709551615])")),
             "'data_offsets' is not [begin, end]");
}

TEST(SafetensorsErrors, ByteSizeDoesNotMatchShape) {
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":[3],)"
                                 R"("data_offsets":[0,8])")),
             "tensor 'w': data_offsets [0, 8] hold 8 bytes, shape [3] x F32 "
             "needs 12");
  EXPECT_HAS(openError(oneTensor(R"("dtype":"BF16","shape":[2,1],)"
                                 R"("data_offsets":[0,8])")),
             "hold 8 bytes, shape [2, 1] x BF16 needs 4");
}

TEST(SafetensorsErrors, HugeShapesOverflowCleanly) {
  // 2^32 * 2^32 * 16 wraps to 0 in 64 bits: must not pass as 0 bytes.
  EXPECT_HAS(
      openError(oneTensor(R"("dtype":"F32","shape":[4294967296,4294967296,16],)"
                          R"("data_offsets":[0,0])")),
      "shape [4294967296, 4294967296, 16] has too many elements");
  // Fits in u64 elements, overflows once multiplied by the dtype size.
  EXPECT_HAS(
      openError(oneTensor(R"("dtype":"F32","shape":[4611686018427387904,2],)"
                          R"("data_offsets":[0,0])")),
      "has too many elements");
  // Any running product that overflows is rejected, even if a later 0 dim
  // would make the tensor empty: int64 shape math downstream must not wrap.
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32","shape":)"
                                 R"([9223372036854775807,4,0],)"
                                 R"("data_offsets":[0,0])")),
             "has too many elements");
  std::string path = tempPath("_empty");
  writeBytes(path, oneTensor(R"("dtype":"F32","shape":)"
                             R"([2,0,9223372036854775807],)"
                             R"("data_offsets":[0,0])"));
  auto empty = SafetensorsFile::open(path);
  ASSERT_TRUE(empty) << empty.status().message();
  auto values = empty->readFloats("w", {2, 0, INT64_MAX});
  ASSERT_TRUE(values) << values.status().message();
  EXPECT_TRUE(values->empty());
  EXPECT_HAS(openError(oneTensor(R"("dtype":"F32",)"
                                 R"("shape":[18446744073709551615],)"
                                 R"("data_offsets":[0,8])")),
             "shape dim 0 is too large: 18446744073709551615");
}

TEST(SafetensorsErrors, ReadMissingOrMisShapedTensor) {
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(
      path, {{"w", HostTensor::fromFloats(DType::BF16, {2, 3}, ramp(6))}}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  auto missing = file->readFloats("v", {2, 3});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(),
            "checkpoint '" + path + "' has no tensor 'v'");
  auto shape = file->readFloats("w", {3, 2});
  ASSERT_FALSE(shape);
  EXPECT_EQ(shape.status().message(),
            "checkpoint '" + path + "': tensor 'w' is [2, 3], expected [3, 2]");
}

TEST(SafetensorsErrors, TruncatedOrCorruptedFilesNeverCrash) {
  std::string good = tempPath("_good");
  ASSERT_TRUE(writeSafetensors(
      good, {{"a", HostTensor::fromFloats(DType::F16, {3, 2}, ramp(6))},
             {"b", HostTensor::fromFloats(DType::F32, {4}, ramp(4))}}));
  std::string bytes = readBytes(good);
  std::string path = tempPath();
  auto tryRead = [&](const std::string &b) {
    writeBytes(path, b);
    auto file = SafetensorsFile::open(path);
    if (!file)
      return false;
    for (const std::string &name : file->names()) {
      (void)file->readFloats(name, {3, 2});
      (void)file->readFloats(name, {4});
    }
    return true;
  };
  // Every strict prefix loses data or header bytes: none may open.
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(tryRead(bytes.substr(0, n))) << "prefix " << n;
  EXPECT_TRUE(tryRead(bytes));
  // Flip bytes of the length field and header, where parsing happens.
  size_t headerEnd = bytes.find_last_of('}') + 1;
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string b = bytes;
    size_t at = rng() % headerEnd;
    b[at] = char(rng());
    (void)tryRead(b); // any result, as long as it returns
  }
}

//===----------------------------------------------------------------------===//
// Loading a plan's parameters
//===----------------------------------------------------------------------===//

namespace {
// A tiny tensor-parallel LM on `tp` ranks: vocab-parallel embedding (vocab
// 5 padded to 6), rms_norm, Megatron MLP, column-parallel lm_head (padded
// too) and an all_gather of the logits. Exercises replicated, dim-0, dim-1
// and padded parameters.
PlanBuilder lmPlan(int tp, DType dtype) {
  PlanBuilder pb(tp);
  pb.group("tp", tp);
  int embed =
      pb.param("model.embed_tokens.weight", {5, 8}, {6 / tp, 8}, dtype, 0, 0);
  pb.plan().parameters.back()->padded_shape = {6, 8};
  int norm = pb.param("model.norm.weight", {8}, {8}, dtype);
  int up = pb.param("mlp.up_proj.weight", {16, 8}, {16 / tp, 8}, dtype, 0, 0);
  int down =
      pb.param("mlp.down_proj.weight", {8, 16}, {8, 16 / tp}, dtype, 1, 0);
  int head = pb.param("lm_head.weight", {5, 8}, {6 / tp, 8}, dtype, 0, 0);
  pb.plan().parameters.back()->padded_shape = {6, 8};

  FnBuilder f = pb.function("prefill");
  int ids = f.input("ids", {1, 3}, DType::I32);
  // Activations in the parameters' dtype, as the dialect requires.
  int e = f.tensor({1, 3, 8}, dtype), x = f.tensor({1, 3, 8}, dtype);
  int n = f.tensor({1, 3, 8}, dtype), h = f.tensor({1, 3, 16 / tp}, dtype);
  int a = f.tensor({1, 3, 16 / tp}, dtype), p = f.tensor({1, 3, 8}, dtype);
  int y = f.tensor({1, 3, 8}, dtype), l = f.tensor({1, 3, 6 / tp}, dtype);
  int logits = f.tensor({1, 3, 6}, dtype);
  f.op(OpCode::Embedding, {ids, f.param(embed, pb.plan())}, {e}).vocab_group =
      0;
  f.op(OpCode::AllReduce, {e}, {x}).group = 0;
  f.op(OpCode::RmsNorm, {x, f.param(norm, pb.plan())}, {n}).epsilon = 1e-6;
  f.op(OpCode::Matmul, {n, f.param(up, pb.plan())}, {h}).transpose_b = true;
  f.op(OpCode::Gelu, {h}, {a}).gelu_approximation =
      plan::GeluApproximation::Tanh;
  f.op(OpCode::Matmul, {a, f.param(down, pb.plan())}, {p}).transpose_b = true;
  f.op(OpCode::AllReduce, {p}, {y}).group = 0;
  f.op(OpCode::Matmul, {y, f.param(head, pb.plan())}, {l}).transpose_b = true;
  plan::OpT &gather = f.op(OpCode::AllGather, {l}, {logits});
  gather.group = 0;
  gather.dim = 2;
  f.output("logits", logits);
  return pb;
}

LoadedPlan load(const PlanBuilder &pb) {
  auto plan = loadPlan(pb.finish());
  EXPECT_TRUE(plan) << plan.status().message();
  return plan.take();
}

// The plan's full parameters from the weight generator, stored as `dtype`;
// `skip` names are left out.
std::vector<std::pair<std::string, HostTensor>>
checkpointFor(PlanBuilder &pb, uint64_t seed, DType dtype,
              const std::vector<std::string> &skip = {}) {
  std::vector<std::pair<std::string, HostTensor>> out;
  for (const auto &p : pb.plan().parameters) {
    if (std::find(skip.begin(), skip.end(), p->name) != skip.end())
      continue;
    out.emplace_back(p->name, HostTensor::fromFloats(
                                  dtype, p->full_shape,
                                  generateFullWeights(SyntheticWeights(seed),
                                                      p->name, p->full_shape)));
  }
  return out;
}

Expected<std::vector<TensorMap>> runLm(ThreadedRunner &runner) {
  return runner.run(
      "prefill",
      {{{"ids", HostTensor::fromInts(DType::I32, {1, 3}, {4, 0, 3})}}});
}

std::unique_ptr<ThreadedRunner> loadedRunner(const LoadedPlan &plan,
                                             const std::string &path) {
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file) << file.status().message();
  // A seed no reference uses, so only the checkpoint can make runs agree.
  auto runner = ThreadedRunner::create(plan, /*seed=*/999);
  EXPECT_TRUE(runner) << runner.status().message();
  if (!file || !runner)
    return nullptr;
  for (int r = 0; r < (*runner)->worldSize(); ++r) {
    Status st = loadCheckpointParameters((*runner)->rank(r), plan, r, *file);
    EXPECT_TRUE(st) << "rank " << r << ": " << st.message();
    if (!st)
      return nullptr;
  }
  return runner.take();
}
} // namespace

TEST(SafetensorsLoad, CheckpointOfGeneratedWeightsMatchesGeneratedRun) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int tp : {1, 2}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " tp " + std::to_string(tp));
      PlanBuilder pb = lmPlan(tp, dtype);
      LoadedPlan plan = load(pb);
      std::string path = tempPath(std::to_string(tp) + dtypeName(dtype));
      ASSERT_TRUE(writeSafetensors(path, checkpointFor(pb, 42, dtype)));

      auto ref = ThreadedRunner::create(plan, /*seed=*/42);
      ASSERT_TRUE(ref) << ref.status().message();
      auto want = runLm(**ref);
      ASSERT_TRUE(want) << want.status().message();

      auto runner = loadedRunner(plan, path);
      ASSERT_TRUE(runner);
      for (int r = 0; r < tp; ++r)
        for (unsigned i = 0; i < 5; ++i)
          EXPECT_EQ(runner->rank(r).parameter(int(i)).bytes,
                    (*ref)->rank(r).parameter(int(i)).bytes)
              << "rank " << r << " parameter " << i;
      auto got = runLm(*runner);
      ASSERT_TRUE(got) << got.status().message();
      for (int r = 0; r < tp; ++r) {
        std::vector<float> g = (*got)[size_t(r)].at("logits").toFloats();
        EXPECT_EQ(g, (*want)[size_t(r)].at("logits").toFloats())
            << "rank " << r;
        float mx = 0;
        for (float v : g)
          mx = std::max(mx, std::fabs(v));
        EXPECT_GT(mx, 1e-6f); // not trivially zero (weights are 0.02-scale)
      }
    }
}

TEST(SafetensorsLoad, DifferentCheckpointValuesChangeTheOutputs) {
  PlanBuilder pb = lmPlan(2, DType::F32);
  LoadedPlan plan = load(pb);
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(path, checkpointFor(pb, 43, DType::F32)));
  auto runner = loadedRunner(plan, path);
  ASSERT_TRUE(runner);
  auto got = runLm(*runner);
  ASSERT_TRUE(got) << got.status().message();
  std::vector<float> g = (*got)[0].at("logits").toFloats();

  auto seed42 = ThreadedRunner::create(plan, 42);
  auto seed43 = ThreadedRunner::create(plan, 43);
  ASSERT_TRUE(seed42 && seed43);
  auto out42 = runLm(**seed42), out43 = runLm(**seed43);
  ASSERT_TRUE(out42 && out43);
  EXPECT_EQ(g, (*out43)[0].at("logits").toFloats());
  std::vector<float> other = (*out42)[0].at("logits").toFloats();
  ASSERT_EQ(g.size(), other.size());
  float maxDiff = 0, maxAbs = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    maxDiff = std::max(maxDiff, std::fabs(g[i] - other[i]));
    maxAbs = std::max(maxAbs, std::fabs(other[i]));
  }
  EXPECT_GT(maxDiff, 0.1f * maxAbs); // logits are ~1e-4: compare relatively
}

// The importer reads the embedding as the head itself when the config ties
// them: a plan that asks for lm_head.weight is untied, and the embedding in
// its place would be a silent wrong answer.
TEST(SafetensorsLoad, LmHeadIsNeverTheEmbedding) {
  PlanBuilder pb = lmPlan(2, DType::F32);
  LoadedPlan plan = load(pb);
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(
      path, checkpointFor(pb, 5, DType::F32, {"lm_head.weight"})));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  auto runner = ThreadedRunner::create(plan, 0);
  ASSERT_TRUE(runner);
  Status st = loadCheckpointParameters((*runner)->rank(0), plan, 0, *file);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            "parameter 'lm_head.weight': checkpoint '" + path +
                "' has no tensor 'lm_head.weight'; the plan has its own LM "
                "head (its config has tie_word_embeddings false), so the "
                "checkpoint must hold it: the embedding is not used in its "
                "place");
  // A checkpoint that has lm_head.weight uses it, not the embedding.
  std::string untied = tempPath("_untied");
  ASSERT_TRUE(writeSafetensors(untied, checkpointFor(pb, 5, DType::F32)));
  auto runner2 = loadedRunner(plan, untied);
  ASSERT_TRUE(runner2);
  EXPECT_NE(runner2->rank(0).parameter(4).bytes,
            runner2->rank(0).parameter(0).bytes);
}

// A tied plan (no lm_head parameter) with an lm_head tensor in the
// checkpoint: config and checkpoint disagree, and the error says so.
TEST(SafetensorsLoad, HeadInCheckpointOfTiedPlanIsUnused) {
  PlanBuilder pb(1);
  pb.param("model.embed_tokens.weight", {4, 2}, {4, 2});
  pb.function("main");
  LoadedPlan plan = load(pb);
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(
      path, {{"model.embed_tokens.weight",
              HostTensor::fromFloats(DType::F32, {4, 2}, ramp(8))},
             {"lm_head.weight",
              HostTensor::fromFloats(DType::F32, {4, 2}, ramp(8))}}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  Status st = loadCheckpointParameters(
      [](const std::string &, HostTensor) { return Status::ok(); }, plan, 0,
      *file);
  ASSERT_FALSE(st);
  EXPECT_HAS(st.message(), "holds 1 tensor the plan does not use: "
                           "'lm_head.weight' (the plan ties the LM head to the "
                           "embedding: its config has tie_word_embeddings "
                           "true)");
}

TEST(SafetensorsLoad, Gpt2TransformerPrefix) {
  PlanBuilder pb(1);
  pb.param("wte.weight", {4, 2}, {4, 2});
  pb.param("h.0.ln_1.weight", {2}, {2});
  pb.function("main");
  LoadedPlan plan = load(pb);
  std::string path = tempPath();
  auto wte = ramp(8), ln = ramp(2, 1.1f);
  // GPT2LMHeadModel's names.
  ASSERT_TRUE(
      writeSafetensors(path, {{"transformer.wte.weight",
                               HostTensor::fromFloats(DType::F32, {4, 2}, wte)},
                              {"transformer.h.0.ln_1.weight",
                               HostTensor::fromFloats(DType::F32, {2}, ln)}}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  auto runner = ThreadedRunner::create(plan, 0);
  ASSERT_TRUE(runner);
  ASSERT_OK(loadCheckpointParameters((*runner)->rank(0), plan, 0, *file));
  EXPECT_EQ((*runner)->rank(0).parameter(0).toFloats(), wte);
  EXPECT_EQ((*runner)->rank(0).parameter(1).toFloats(), ln);
}

namespace {
// The tensors of `tensors` renamed by `rename` (names it maps to "" are
// left out).
std::vector<std::pair<std::string, HostTensor>>
renamed(const std::vector<std::pair<std::string, HostTensor>> &tensors,
        const std::function<std::string(const std::string &)> &rename) {
  std::vector<std::pair<std::string, HostTensor>> out;
  for (const auto &[name, t] : tensors)
    if (std::string to = rename(name); !to.empty())
      out.emplace_back(to, t);
  return out;
}

// `name` without its base-model prefix, as a base model's checkpoint
// (LlamaModel.save_pretrained) names it.
std::string withoutBasePrefix(const std::string &name) {
  for (std::string prefix : {"model.", "gpt_neox.", "transformer."})
    if (name.rfind(prefix, 0) == 0)
      return name.substr(prefix.size());
  return name;
}

// matchCheckpoint's error for `tensors` against `pb`'s plan.
std::string
matchError(const PlanBuilder &pb,
           const std::vector<std::pair<std::string, HostTensor>> &tensors) {
  LoadedPlan plan = load(pb);
  std::string path = tempPath();
  EXPECT_TRUE(writeSafetensors(path, tensors));
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file) << file.status().message();
  if (!file)
    return "";
  auto match = matchCheckpoint(plan.root(), Checkpoint(*file));
  EXPECT_FALSE(match);
  return match ? "" : match.status().message();
}
} // namespace

// A base model's checkpoint (LlamaModel, GPTNeoXModel save_pretrained)
// names its tensors without the family's base-model prefix: transformers
// loads it into the *ForCausalLM model, and so does Braid, bit for bit.
TEST(SafetensorsLoad, BaseModelCheckpointWithoutPrefix) {
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    PlanBuilder pb = lmPlan(tp, DType::F32);
    LoadedPlan plan = load(pb);
    auto tensors = checkpointFor(pb, 11, DType::F32);
    std::string prefixed = tempPath("_prefixed"), bare = tempPath("_bare");
    ASSERT_TRUE(writeSafetensors(prefixed, tensors));
    ASSERT_TRUE(writeSafetensors(bare, renamed(tensors, withoutBasePrefix)));
    auto bareFile = SafetensorsFile::open(bare);
    ASSERT_TRUE(bareFile) << bareFile.status().message();
    auto match = matchCheckpoint(plan.root(), Checkpoint(*bareFile));
    ASSERT_TRUE(match) << match.status().message();
    EXPECT_EQ(match->sources,
              (std::vector<std::string>{
                  "embed_tokens.weight", "norm.weight", "mlp.up_proj.weight",
                  "mlp.down_proj.weight", "lm_head.weight"}));
    EXPECT_TRUE(match->unused.empty());
    auto want = loadedRunner(plan, prefixed), got = loadedRunner(plan, bare);
    ASSERT_TRUE(want && got);
    for (int r = 0; r < tp; ++r)
      for (int i = 0; i < 5; ++i)
        EXPECT_EQ(got->rank(r).parameter(i).bytes,
                  want->rank(r).parameter(i).bytes)
            << "rank " << r << " parameter " << i;
    auto wantOut = runLm(*want), gotOut = runLm(*got);
    ASSERT_TRUE(wantOut && gotOut);
    for (int r = 0; r < tp; ++r)
      EXPECT_EQ((*gotOut)[size_t(r)].at("logits").bytes,
                (*wantOut)[size_t(r)].at("logits").bytes);
  }
  // GPT-NeoX: "gpt_neox." stripped; transformers 5's "lm_head.weight" still
  // stands for "embed_out.weight"; the causal-mask buffers are skipped.
  PlanBuilder neox(1);
  neox.param("gpt_neox.embed_in.weight", {4, 2}, {4, 2});
  neox.param("gpt_neox.layers.0.attention.dense.bias", {2}, {2});
  neox.param("embed_out.weight", {4, 2}, {4, 2});
  neox.function("main");
  LoadedPlan plan = load(neox);
  std::string path = tempPath("_neox");
  auto t = [](Shape shape) {
    return HostTensor::fromFloats(DType::F32, shape,
                                  ramp(size_t(numElements(shape))));
  };
  ASSERT_TRUE(
      writeSafetensors(path, {{"embed_in.weight", t({4, 2})},
                              {"layers.0.attention.dense.bias", t({2})},
                              {"layers.0.attention.bias", t({1, 1, 4, 4})},
                              {"layers.0.attention.masked_bias", t({})},
                              {"lm_head.weight", t({4, 2})}}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  auto match = matchCheckpoint(plan.root(), Checkpoint(*file));
  ASSERT_TRUE(match) << match.status().message();
  EXPECT_EQ(match->sources,
            (std::vector<std::string>{"embed_in.weight",
                                      "layers.0.attention.dense.bias",
                                      "lm_head.weight"}));
  EXPECT_TRUE(match->unused.empty());
  EXPECT_EQ(match->skipped,
            (std::vector<std::string>{"layers.0.attention.bias",
                                      "layers.0.attention.masked_bias"}));
  // GPT-2's base model names are Braid's own: read as they are.
  PlanBuilder gpt2(1);
  gpt2.param("wte.weight", {4, 2}, {4, 2});
  gpt2.function("main");
  LoadedPlan gpt2Plan = load(gpt2);
  std::string gpt2Path = tempPath("_gpt2");
  ASSERT_TRUE(writeSafetensors(gpt2Path, {{"wte.weight", t({4, 2})}}));
  auto gpt2File = SafetensorsFile::open(gpt2Path);
  ASSERT_TRUE(gpt2File) << gpt2File.status().message();
  auto gpt2Match = matchCheckpoint(gpt2Plan.root(), Checkpoint(*gpt2File));
  ASSERT_TRUE(gpt2Match) << gpt2Match.status().message();
  EXPECT_EQ(gpt2Match->sources, std::vector<std::string>{"wte.weight"});
}

// Both spellings of one tensor: which one is meant is a guess, so it is an
// error, --allow-unused-weights or not (the other one is not merely unused).
TEST(SafetensorsLoad, BothSpellingsOfATensorAreAmbiguous) {
  PlanBuilder pb = lmPlan(2, DType::F32);
  auto tensors = renamed(checkpointFor(pb, 12, DType::F32), withoutBasePrefix);
  tensors.emplace_back("model.norm.weight",
                       HostTensor::fromFloats(DType::F32, {8}, ramp(8)));
  std::string want = "parameter 'model.norm.weight': checkpoint '" +
                     tempPath() +
                     "' holds both 'model.norm.weight' and 'norm.weight' (the "
                     "name with and without the base model's prefix): "
                     "ambiguous, refusing to pick one";
  EXPECT_EQ(matchError(pb, tensors), want);
  LoadedPlan plan = load(pb);
  auto file = SafetensorsFile::open(tempPath());
  ASSERT_TRUE(file) << file.status().message();
  CheckpointLoadOptions lo;
  lo.allowUnusedWeights = true;
  Status st = loadCheckpointParameters(
      [](const std::string &, HostTensor) { return Status::ok(); }, plan, 0,
      *file, lo);
  EXPECT_EQ(st.message(), want);

  // GPT-2 alike: "h.0.ln_1.weight" and "transformer.h.0.ln_1.weight".
  PlanBuilder gpt2(1);
  gpt2.param("wte.weight", {4, 2}, {4, 2});
  gpt2.param("h.0.ln_1.weight", {2}, {2});
  gpt2.function("main");
  EXPECT_EQ(
      matchError(gpt2, {{"transformer.wte.weight",
                         HostTensor::fromFloats(DType::F32, {4, 2}, ramp(8))},
                        {"transformer.h.0.ln_1.weight",
                         HostTensor::fromFloats(DType::F32, {2}, ramp(2))},
                        {"h.0.ln_1.weight",
                         HostTensor::fromFloats(DType::F32, {2}, {7, 8})}}),
      "parameter 'h.0.ln_1.weight': checkpoint '" + tempPath() +
          "' holds both 'h.0.ln_1.weight' and 'transformer.h.0.ln_1.weight' "
          "(the name with and without the base model's prefix): ambiguous, "
          "refusing to pick one");
}

// Some tensors with the prefix and others without: two checkpoints merged,
// never one save_pretrained. Refused, naming one parameter of each kind.
TEST(SafetensorsLoad, MixedSpellingsAreRefused) {
  PlanBuilder pb = lmPlan(1, DType::F32);
  auto tensors =
      renamed(checkpointFor(pb, 13, DType::F32), [](const std::string &name) {
        return name == "model.norm.weight" ? withoutBasePrefix(name) : name;
      });
  EXPECT_EQ(matchError(pb, tensors),
            "checkpoint '" + tempPath() +
                "' mixes two naming layouts: parameter "
                "'model.embed_tokens.weight' is read from "
                "'model.embed_tokens.weight' but parameter "
                "'model.norm.weight' from 'norm.weight' (a checkpoint names "
                "every tensor with the base model's prefix or every one "
                "without it)");
}

// An untied plan needs lm_head.weight even from a base model's checkpoint
// (which has none: LlamaModel has no head); the error says why it is
// missing.
TEST(SafetensorsLoad, UntiedPlanNeedsTheHeadFromABaseModelCheckpoint) {
  PlanBuilder pb = lmPlan(1, DType::F32);
  auto tensors =
      renamed(checkpointFor(pb, 14, DType::F32), [](const std::string &name) {
        return name == "lm_head.weight" ? std::string()
                                        : withoutBasePrefix(name);
      });
  EXPECT_EQ(matchError(pb, tensors),
            "parameter 'lm_head.weight': checkpoint '" + tempPath() +
                "' has no tensor 'lm_head.weight'; the plan has its own LM "
                "head (its config has tie_word_embeddings false), so the "
                "checkpoint must hold it: the embedding is not used in its "
                "place (the checkpoint names its tensors without the base "
                "model's prefix, as a base model without an LM head saves "
                "them)");
  // GPT-NeoX's embed_out: both names it may have are tried.
  PlanBuilder neox(1);
  neox.param("gpt_neox.embed_in.weight", {4, 2}, {4, 2});
  neox.param("embed_out.weight", {4, 2}, {4, 2});
  neox.function("main");
  EXPECT_EQ(
      matchError(neox, {{"embed_in.weight",
                         HostTensor::fromFloats(DType::F32, {4, 2}, ramp(8))}}),
      "parameter 'embed_out.weight': checkpoint '" + tempPath() +
          "' has no tensor 'embed_out.weight' (nor 'lm_head.weight'); "
          "the checkpoint names its tensors without the base model's "
          "prefix, as a base model without an LM head saves them");
}

TEST(SafetensorsLoad, ErrorsNameTheParameter) {
  PlanBuilder pb = lmPlan(2, DType::F32);
  LoadedPlan plan = load(pb);
  auto runner = ThreadedRunner::create(plan, 0);
  ASSERT_TRUE(runner);
  auto tryLoad = [&](const std::vector<std::pair<std::string, HostTensor>> &t,
                     int rank = 1) {
    std::string path = tempPath();
    EXPECT_TRUE(writeSafetensors(path, t));
    auto file = SafetensorsFile::open(path);
    EXPECT_TRUE(file) << file.status().message();
    Status st = loadCheckpointParameters((*runner)->rank(1), plan, rank, *file);
    EXPECT_FALSE(st);
    return st.message();
  };

  std::string missing =
      tryLoad(checkpointFor(pb, 0, DType::F32, {"mlp.down_proj.weight"}));
  EXPECT_HAS(missing, "parameter 'mlp.down_proj.weight': checkpoint '");
  EXPECT_HAS(missing, "has no tensor 'mlp.down_proj.weight' (nor "
                      "'transformer.mlp.down_proj.weight')");
  // Every spelling tried is named: with and without the base-model prefix.
  EXPECT_EQ(tryLoad(checkpointFor(pb, 0, DType::F32, {"model.norm.weight"})),
            "parameter 'model.norm.weight': checkpoint '" + tempPath() +
                "' has no tensor 'model.norm.weight' (nor 'norm.weight')");

  auto noHead = checkpointFor(pb, 0, DType::F32, {"lm_head.weight"});
  EXPECT_HAS(tryLoad(noHead), "parameter 'lm_head.weight': checkpoint '" +
                                  tempPath() +
                                  "' has no tensor 'lm_head.weight'; the plan "
                                  "has its own LM head");

  auto wrongShape = checkpointFor(pb, 0, DType::F32);
  wrongShape[2].second = HostTensor::fromFloats(DType::F32, {8, 16}, ramp(128));
  std::string shape = tryLoad(wrongShape);
  EXPECT_HAS(shape, "parameter 'mlp.up_proj.weight': checkpoint '");
  EXPECT_HAS(shape, "tensor 'mlp.up_proj.weight' is [8, 16], expected [16, 8]");

  auto intTensor = checkpointFor(pb, 0, DType::F32);
  intTensor[1].second = HostTensor::fromInts(DType::I64, {8}, {});
  EXPECT_HAS(tryLoad(intTensor), "parameter 'model.norm.weight': checkpoint '");

  EXPECT_HAS(tryLoad(checkpointFor(pb, 0, DType::F32), /*rank=*/0),
             "loading rank 0's slices into rank 1's interpreter");
  EXPECT_HAS(tryLoad(checkpointFor(pb, 0, DType::F32), /*rank=*/2),
             "rank 2 is outside world_size 2");
}

//===----------------------------------------------------------------------===//
// Reading one rank's slice
//===----------------------------------------------------------------------===//

// readSlice reads only the slice's elements, in runs; it must give exactly
// what cutting the whole tensor gives, for every shard rule (replicated,
// any dim, blocks, padding, shards < group) and every float dtype.
TEST(SafetensorsSlice, ReadSliceMatchesSliceOfWholeTensor) {
  struct Case {
    Shape full, padded;
    ShardSpec spec;
  };
  std::vector<Case> cases = {
      {{5, 8}, {}, {}},                         // replicated
      {{6, 8}, {}, {0, 2, 1, 1, 2}},            // rows
      {{6, 8}, {}, {1, 4, 1, 3, 4}},            // columns
      {{5, 8}, {6, 8}, {0, 2, 1, 1, 2}},        // padded rows
      {{4, 7}, {4, 8}, {1, 2, 1, 0, 2}},        // padded columns
      {{4, 7}, {4, 8}, {1, 2, 1, 1, 2}},        // the padded piece
      {{3, 12}, {}, {1, 2, 3, 1, 2}},           // c_attn: 3 blocks
      {{2, 3, 8}, {}, {1, 3, 1, 2, 3}},         // middle dim
      {{2, 3, 9}, {2, 3, 12}, {2, 2, 2, 1, 4}}, // shards < group
      {{}, {}, {}},                             // scalar
      {{0, 4}, {}, {1, 2, 1, 1, 2}},            // empty
  };
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case &c = cases[i];
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " case " +
                   std::to_string(i));
      std::string path = tempPath(std::to_string(i) + dtypeName(dtype));
      ASSERT_TRUE(writeSafetensors(
          path, {{"w", HostTensor::fromFloats(
                           dtype, c.full,
                           ramp(size_t(numElements(c.full)), 0.61f))}}));
      auto file = SafetensorsFile::open(path);
      ASSERT_TRUE(file) << file.status().message();
      auto whole = file->readFloats("w", c.full);
      ASSERT_TRUE(whole) << whole.status().message();
      auto want = sliceForRank(*whole, c.full, c.padded, c.spec);
      ASSERT_TRUE(want) << want.status().message();
      auto got = file->readSlice("w", c.full, c.padded, c.spec);
      ASSERT_TRUE(got) << got.status().message();
      EXPECT_EQ(*got, *want);
    }
}

TEST(SafetensorsSlice, ReadSliceErrors) {
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(
      path, {{"w", HostTensor::fromFloats(DType::F32, {4, 2}, ramp(8))},
             {"i", HostTensor::fromInts(DType::I64, {2}, {1, 2})}}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  auto shape = file->readSlice("w", {2, 4}, {}, {});
  ASSERT_FALSE(shape);
  EXPECT_HAS(shape.status().message(), "tensor 'w' is [4, 2], expected [2, 4]");
  auto ints = file->readSlice("i", {2}, {}, {});
  ASSERT_FALSE(ints);
  EXPECT_HAS(ints.status().message(), "tensor 'i' has dtype I64");
  auto cut = file->readSlice("w", {4, 2}, {}, {0, 3, 1, 0, 3});
  ASSERT_FALSE(cut);
  EXPECT_HAS(cut.status().message(), "cannot cut dim 0 of [4, 2]");
}

TEST(SafetensorsSlice, ReadInts) {
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(
      path, {{"a", HostTensor::fromInts(DType::I32, {3}, {-1, 0, 70000})},
             {"b", HostTensor::fromInts(DType::I64, {1, 2}, {1ll << 40, 5})},
             {"f", HostTensor::fromFloats(DType::F32, {1}, {1})}}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(*file->readInts("a", {3}), (std::vector<int64_t>{-1, 0, 70000}));
  EXPECT_EQ(*file->readInts("b", {1, 2}), (std::vector<int64_t>{1ll << 40, 5}));
  auto f = file->readInts("f", {1});
  ASSERT_FALSE(f);
  EXPECT_HAS(f.status().message(), "tensor 'f' has dtype F32; expected I32 "
                                   "or I64");
  ASSERT_NE(file->find("b"), nullptr);
  EXPECT_EQ(file->find("b")->dtypeName, "I64");
  EXPECT_EQ(file->find("b")->shape, (Shape{1, 2}));
  EXPECT_EQ(file->find("z"), nullptr);
}

// f16 checkpoint into a bf16 plan: each value is the f16 value rounded once
// to bf16 (the runtime goes through fp32, which holds every f16 exactly).
TEST(SafetensorsLoad, AnyFloatCheckpointDtypeIntoAnyPlanDtype) {
  for (DType from : {DType::F32, DType::BF16, DType::F16})
    for (DType to : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtypeName(from)) + " -> " + dtypeName(to));
      PlanBuilder pb = lmPlan(2, to);
      LoadedPlan plan = load(pb);
      std::string path = tempPath(std::string(dtypeName(from)) + dtypeName(to));
      auto tensors = checkpointFor(pb, 7, from);
      ASSERT_TRUE(writeSafetensors(path, tensors));
      auto runner = loadedRunner(plan, path);
      ASSERT_TRUE(runner);
      // Parameter 2 (mlp.up_proj.weight, rows cut): rank 1 holds rows 8..15.
      std::vector<float> stored = tensors[2].second.toFloats();
      std::vector<float> rows(stored.begin() + 64, stored.end());
      EXPECT_EQ(runner->rank(1).parameter(2).bytes,
                HostTensor::fromFloats(to, {8, 8}, rows).bytes);
    }
}

//===----------------------------------------------------------------------===//
// Sharded checkpoints: index, shards, model directories
//===----------------------------------------------------------------------===//

namespace {
// A fresh directory for this test (removed first if left over).
std::string tempDir(const std::string &suffix = "") {
  const auto *info = testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = testing::TempDir() + "braid_" + info->test_suite_name() +
                    "_" + info->name() + suffix;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// Two shards of an F32 checkpoint ("a", "b" in shard 1; "c" in shard 2)
// and `index` as model.safetensors.index.json; returns the index path.
std::string shardedCheckpoint(const std::string &dir,
                              const std::string &index) {
  auto t = [](size_t n, float scale) {
    return HostTensor::fromFloats(DType::F32, {int64_t(n)}, ramp(n, scale));
  };
  EXPECT_TRUE(writeSafetensors(dir + "/model-00001-of-00002.safetensors",
                               {{"a", t(2, 0.1f)}, {"b", t(3, 0.2f)}}));
  EXPECT_TRUE(writeSafetensors(dir + "/model-00002-of-00002.safetensors",
                               {{"c", t(4, 0.3f)}}));
  std::string path = dir + "/model.safetensors.index.json";
  writeBytes(path, index);
  return path;
}

constexpr const char *kGoodIndex =
    R"({"metadata": {"total_size": 36}, "weight_map": {)"
    R"("a": "model-00001-of-00002.safetensors",)"
    R"("b": "model-00001-of-00002.safetensors",)"
    R"("c": "model-00002-of-00002.safetensors"}})";

// The error opening a sharded checkpoint with `index` (which must fail).
std::string indexError(const std::string &index) {
  std::string dir = tempDir();
  std::string path = shardedCheckpoint(dir, index);
  auto ckpt = Checkpoint::open(path);
  EXPECT_FALSE(ckpt) << "opened: " << index;
  if (ckpt)
    return "";
  EXPECT_HAS(ckpt.status().message(), "checkpoint index '" + path + "'");
  return ckpt.status().message();
}

// kGoodIndex with `from` replaced by `to`.
std::string goodIndexWith(const std::string &from, const std::string &to) {
  std::string s = kGoodIndex;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}
} // namespace

TEST(SafetensorsIndex, OpensIndexAndDirectory) {
  std::string dir = tempDir();
  std::string index = shardedCheckpoint(dir, kGoodIndex);
  for (const std::string &path : {index, dir, dir + "/"}) {
    SCOPED_TRACE(path);
    auto ckpt = Checkpoint::open(path);
    ASSERT_TRUE(ckpt) << ckpt.status().message();
    EXPECT_EQ(ckpt->path(), index);
    EXPECT_EQ(ckpt->numShards(), 2u);
    EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_TRUE(ckpt->contains("c"));
    EXPECT_FALSE(ckpt->contains("d"));
    ASSERT_NE(ckpt->shardOf("c"), nullptr);
    EXPECT_EQ(ckpt->shardOf("c")->path(),
              dir + "/model-00002-of-00002.safetensors");
    EXPECT_EQ(ckpt->shardOf("a"), ckpt->shardOf("b")); // one shard, once
    EXPECT_EQ(ckpt->shardOf("d"), nullptr);
    EXPECT_EQ(*ckpt->shardOf("c")->readFloats("c", {4}), ramp(4, 0.3f));
  }
}

TEST(SafetensorsIndex, IndexIsToldByContentToo) {
  // An index under another name: JSON text, not a safetensors file.
  std::string dir = tempDir();
  shardedCheckpoint(dir, kGoodIndex);
  std::string renamed = dir + "/weights.idx";
  writeBytes(renamed, kGoodIndex);
  auto ckpt = Checkpoint::open(renamed);
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  EXPECT_EQ(ckpt->numShards(), 2u);
  // A safetensors file whose header length starts with the byte '{' (123)
  // is still a safetensors file.
  std::string header =
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.append(123 - header.size(), ' ');
  std::string path = dir + "/brace.safetensors";
  writeBytes(path, rawFile(header, std::string(4, '\0')));
  auto brace = Checkpoint::open(path);
  ASSERT_TRUE(brace) << brace.status().message();
  EXPECT_EQ(brace->names(), std::vector<std::string>{"w"});
}

TEST(SafetensorsIndex, DirectoryNeedsExactlyOneOfTheTwoFiles) {
  std::string dir = tempDir();
  auto empty = Checkpoint::open(dir);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.status().message(),
            "checkpoint directory '" + dir +
                "' holds neither model.safetensors nor "
                "model.safetensors.index.json");
  ASSERT_TRUE(writeSafetensors(
      dir + "/model.safetensors",
      {{"x", HostTensor::fromFloats(DType::F32, {1}, {2.5f})}}));
  auto single = Checkpoint::open(dir);
  ASSERT_TRUE(single) << single.status().message();
  EXPECT_EQ(single->path(), dir + "/model.safetensors");
  EXPECT_EQ(single->numShards(), 1u);
  shardedCheckpoint(dir, kGoodIndex);
  auto both = Checkpoint::open(dir);
  ASSERT_FALSE(both);
  EXPECT_HAS(both.status().message(),
             "holds both model.safetensors and model.safetensors.index.json; "
             "pass the one to load with --weights");
}

// A PyTorch checkpoint (save_pretrained with safe_serialization=False) is
// never read: the errors say what was found and how to convert it.
TEST(SafetensorsIndex, PyTorchCheckpointIsNamedNotRead) {
  const std::string convert =
      "Braid reads safetensors only, not PyTorch's pickled .bin files: "
      "convert the checkpoint with transformers, e.g. "
      "AutoModelForCausalLM.from_pretrained(DIR).save_pretrained(OUT, "
      "safe_serialization=True)";
  // torch.save's zip archive.
  const std::string zip = std::string("PK\3\4") + std::string(60, '\0');
  std::string dir = tempDir();
  writeBytes(dir + "/pytorch_model.bin", zip);
  writeBytes(dir + "/config.json", "{}");
  auto single = Checkpoint::open(dir);
  ASSERT_FALSE(single);
  EXPECT_EQ(single.status().message(),
            "checkpoint directory '" + dir +
                "' holds neither model.safetensors nor "
                "model.safetensors.index.json but a PyTorch checkpoint "
                "('pytorch_model.bin'); " +
                convert);
  // Sharded: the first three files named, and the count of the others.
  std::string shards = tempDir("_shards");
  for (const char *name :
       {"pytorch_model-00001-of-00003.bin", "pytorch_model-00002-of-00003.bin",
        "pytorch_model-00003-of-00003.bin", "pytorch_model.bin.index.json"})
    writeBytes(shards + "/" + name, zip);
  auto sharded = Checkpoint::open(shards);
  ASSERT_FALSE(sharded);
  EXPECT_EQ(sharded.status().message(),
            "checkpoint directory '" + shards +
                "' holds neither model.safetensors nor "
                "model.safetensors.index.json but a PyTorch checkpoint "
                "('pytorch_model-00001-of-00003.bin', "
                "'pytorch_model-00002-of-00003.bin', "
                "'pytorch_model-00003-of-00003.bin' and 1 more); " +
                convert);
  // Other .bin files (a Trainer's training_args.bin) are no checkpoint.
  std::string other = tempDir("_other");
  writeBytes(other + "/training_args.bin", zip);
  auto none = Checkpoint::open(other);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message(),
            "checkpoint directory '" + other +
                "' holds neither model.safetensors nor "
                "model.safetensors.index.json");
  // The file itself, by name or by content; its index's shards.
  for (const std::string &path :
       {dir + "/pytorch_model.bin", dir + "/weights.pt"}) {
    writeBytes(path, zip);
    auto file = Checkpoint::open(path);
    ASSERT_FALSE(file);
    EXPECT_HAS(file.status().message(), "checkpoint '" + path + "': ");
    EXPECT_HAS(file.status().message(), "; " + convert);
  }
  writeBytes(dir + "/pytorch_model.bin.index.json",
             R"({"weight_map": {"w": "pytorch_model.bin"}})");
  auto index = Checkpoint::open(dir + "/pytorch_model.bin.index.json");
  ASSERT_FALSE(index);
  EXPECT_HAS(index.status().message(), "shard 'pytorch_model.bin': ");
  EXPECT_HAS(index.status().message(), "; " + convert);
  // A corrupt safetensors file gets no such advice.
  writeBytes(dir + "/bad.safetensors", "12345678");
  auto bad = Checkpoint::open(dir + "/bad.safetensors");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message().find(convert), std::string::npos);
}

TEST(SafetensorsIndex, ShardNamesMustStayInTheDirectory) {
  // Each name below reaches a real copy of the shard: without the check the
  // checkpoint would open.
  std::string dir = tempDir();
  std::string shard = dir + "/model-00002-of-00002.safetensors";
  shardedCheckpoint(dir, kGoodIndex);
  ASSERT_EQ(std::system(("mkdir '" + dir + "/sub'").c_str()), 0);
  std::string upName =
      "braid_escape_" + std::to_string(::getpid()) + ".safetensors";
  ASSERT_EQ(std::system(
                ("cp '" + shard + "' '" + dir + "/../" + upName + "'").c_str()),
            0);
  auto tryIndex = [&](const std::string &name) {
    std::string index =
        goodIndexWith("\"c\": \"model-00002-of-00002.safetensors\"",
                      "\"c\": \"" + name + "\"");
    writeBytes(dir + "/model.safetensors.index.json", index);
    auto ckpt = Checkpoint::open(dir);
    EXPECT_FALSE(ckpt) << "opened with shard " << name;
    return ckpt ? std::string() : ckpt.status().message();
  };
  EXPECT_HAS(tryIndex("../" + upName),
             "tensor 'c' is mapped to shard \"../" + upName +
                 "\", whose name has a '..' path component (shards are "
                 "files inside the index's directory)");
  EXPECT_HAS(tryIndex("sub/../model-00002-of-00002.safetensors"),
             "has a '..' path component");
  EXPECT_HAS(tryIndex(shard), "whose name is an absolute path");
  std::remove((dir + "/../" + upName).c_str());
  EXPECT_HAS(indexError(goodIndexWith("\"c\": \"model-00002",
                                      "\"c\": \"./model-00002")),
             "has a '.' path component");
  EXPECT_HAS(indexError(goodIndexWith("\"c\": \"model-00002",
                                      "\"c\": \"sub//model-00002")),
             "has an empty path component");
  EXPECT_HAS(indexError(goodIndexWith(
                 "\"c\": \"model-00002-of-00002.safetensors\"", "\"c\": \"\"")),
             "whose name is empty");
  EXPECT_HAS(indexError(goodIndexWith("\"c\": \"model-00002",
                                      "\"c\": \"model\\u0000-00002")),
             "holds a NUL byte");
}

TEST(SafetensorsIndex, ShardsAndWeightMapMustAgree) {
  // Listed in weight_map, absent from its shard.
  EXPECT_HAS(
      indexError(goodIndexWith("\"c\": \"model-00002-of-00002.safetensors\"",
                               "\"c\": \"model-00002-of-00002.safetensors\", "
                               "\"d\": \"model-00002-of-00002.safetensors\"")),
      "tensor 'd' is mapped to shard 'model-00002-of-00002."
      "safetensors', which does not hold it");
  // In a shard, mapped to the other one.
  EXPECT_HAS(
      indexError(goodIndexWith("\"b\": \"model-00001", "\"b\": \"model-00002")),
      "shard 'model-00001-of-00002.safetensors' holds tensor 'b', "
      "which weight_map maps to shard "
      "'model-00002-of-00002.safetensors'");
  // In a shard, not listed at all.
  EXPECT_HAS(indexError(goodIndexWith(
                 "\"a\": \"model-00001-of-00002.safetensors\",", "")),
             "shard 'model-00001-of-00002.safetensors' holds tensor 'a', "
             "which weight_map does not list");
  // A shard file that is not there.
  EXPECT_HAS(
      indexError(goodIndexWith("\"c\": \"model-00002", "\"c\": \"model-00003")),
      "shard 'model-00003-of-00002.safetensors': cannot open "
      "checkpoint '");
  // A shard that is not a valid safetensors file.
  std::string dir = tempDir("_corrupt");
  std::string path = shardedCheckpoint(dir, kGoodIndex);
  writeBytes(dir + "/model-00002-of-00002.safetensors", "{\"c\": 1}");
  auto corrupt = Checkpoint::open(path);
  ASSERT_FALSE(corrupt);
  EXPECT_HAS(corrupt.status().message(),
             "shard 'model-00002-of-00002.safetensors': checkpoint '");
}

TEST(SafetensorsIndex, HostileIndexText) {
  EXPECT_HAS(indexError("{\"weight_map\": {"), "is not valid JSON");
  EXPECT_HAS(indexError("[1, 2]"), "is not a sharded checkpoint index");
  EXPECT_HAS(indexError("{\"metadata\": {}}"),
             "is not a sharded checkpoint index: expected a JSON object with "
             "a \"weight_map\" object");
  EXPECT_HAS(indexError("{\"weight_map\": [\"a\"]}"),
             "is not a sharded checkpoint index");
  EXPECT_HAS(indexError("{\"weight_map\": {}}"), "weight_map lists no tensors");
  EXPECT_HAS(indexError(goodIndexWith(
                 "\"c\": \"model-00002-of-00002.safetensors\"", "\"c\": 2")),
             "weight_map entry for tensor 'c' is not a shard file name: 2");
  EXPECT_HAS(indexError(goodIndexWith(
                 "\"c\": \"model-00002-of-00002.safetensors\"",
                 "\"c\": [\"model-00002-of-00002.safetensors\"]")),
             "weight_map entry for tensor 'c' is not a shard file name");
  EXPECT_HAS(indexError(goodIndexWith(
                 "\"c\": \"model-00002-of-00002.safetensors\"", "\"c\": null")),
             "weight_map entry for tensor 'c' is not a shard file name: null");
  // A key twice: the parser would keep the last one silently.
  EXPECT_HAS(
      indexError(goodIndexWith("\"c\": \"model-00002-of-00002.safetensors\"",
                               "\"c\": \"model-00002-of-00002.safetensors\", "
                               "\"a\": \"model-00002-of-00002.safetensors\"")),
      "weight_map lists tensor 'a' twice");
  EXPECT_HAS(
      indexError(
          std::string(kGoodIndex)
              .replace(1, 0, "\"weight_map\": {\"zz\": \"x.safetensors\"}, ")),
      "key 'weight_map' appears twice");
  // Duplicate keys elsewhere (metadata) are not weight_map's business.
  std::string dir = tempDir("_meta");
  auto meta = Checkpoint::open(shardedCheckpoint(
      dir, goodIndexWith("{\"total_size\": 36}",
                         "{\"total_size\": 36, \"total_size\": 37}")));
  EXPECT_TRUE(meta) << meta.status().message();
  // Nesting is bounded (here inside the ignored metadata).
  std::string deep = std::string(kGoodIndex)
                         .replace(1, 0,
                                  "\"deep\": " + std::string(100, '[') +
                                      std::string(100, ']') + ", ");
  EXPECT_HAS(indexError(deep), "nests arrays and objects deeper than 64 "
                               "levels");
  std::string ok = std::string(kGoodIndex)
                       .replace(1, 0,
                                "\"deep\": " + std::string(60, '[') +
                                    std::string(60, ']') + ", ");
  auto shallow = Checkpoint::open(shardedCheckpoint(tempDir("_ok"), ok));
  EXPECT_TRUE(shallow) << shallow.status().message();
}

TEST(SafetensorsIndex, IndexSizeIsBounded) {
  std::string dir = tempDir();
  std::string path = dir + "/model.safetensors.index.json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << kGoodIndex;
  }
  // Sparse: nothing is written, the size alone is refused.
  ASSERT_EQ(::truncate(path.c_str(), off_t(kMaxCheckpointIndexBytes + 1)), 0);
  auto big = Checkpoint::open(path);
  ASSERT_FALSE(big);
  EXPECT_HAS(big.status().message(),
             "checkpoint index '" + path + "' is " +
                 std::to_string(kMaxCheckpointIndexBytes + 1) +
                 " bytes, more than the limit of ");
}

// The same parameters from a single file and from its shards, every rank.
TEST(SafetensorsIndex, ShardedCheckpointLoadsLikeSingleFile) {
  PlanBuilder pb = lmPlan(2, DType::F32);
  LoadedPlan plan = load(pb);
  auto tensors = checkpointFor(pb, 11, DType::F32);
  std::string dir = tempDir();
  std::string single = dir + "/single.safetensors";
  ASSERT_TRUE(writeSafetensors(single, tensors));
  std::vector<std::pair<std::string, HostTensor>> first(tensors.begin(),
                                                        tensors.begin() + 2),
      second(tensors.begin() + 2, tensors.end());
  ASSERT_TRUE(writeSafetensors(dir + "/s1.safetensors", first));
  ASSERT_TRUE(writeSafetensors(dir + "/s2.safetensors", second));
  std::string index = "{\"weight_map\": {";
  for (size_t i = 0; i < tensors.size(); ++i)
    index += std::string(i ? ", " : "") + "\"" + tensors[i].first + "\": \"" +
             (i < 2 ? "s1" : "s2") + ".safetensors\"";
  writeBytes(dir + "/model.safetensors.index.json", index + "}}");

  auto sharded = Checkpoint::open(dir);
  ASSERT_TRUE(sharded) << sharded.status().message();
  auto want = loadedRunner(plan, single);
  ASSERT_TRUE(want);
  auto runner = ThreadedRunner::create(plan, 999);
  ASSERT_TRUE(runner);
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(loadCheckpointParameters((*runner)->rank(r), plan, r, *sharded));
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ((*runner)->rank(r).parameter(i).bytes,
                want->rank(r).parameter(i).bytes)
          << "rank " << r << " parameter " << i;
  }
}

//===----------------------------------------------------------------------===//
// Unused checkpoint tensors
//===----------------------------------------------------------------------===//

TEST(SafetensorsUnused, KnownBuffers) {
  for (const char *name :
       {"model.layers.0.self_attn.rotary_emb.inv_freq",
        "model.rotary_emb.inv_freq", "rotary_emb.inv_freq", "h.0.attn.bias",
        "h.11.attn.masked_bias", "transformer.h.3.attn.bias",
        "gpt_neox.layers.0.attention.bias",
        "gpt_neox.layers.12.attention.masked_bias",
        "gpt_neox.layers.0.attention.rotary_emb.inv_freq",
        "layers.0.attention.bias", "layers.7.attention.masked_bias",
        "layers.0.self_attn.rotary_emb.inv_freq"})
    EXPECT_TRUE(isKnownUnusedBuffer(name)) << name;
  for (const char *name :
       {"h.0.attn.c_attn.bias", "model.layers.0.self_attn.q_proj.bias",
        "h.attn.bias", "h.x.attn.bias", "foo.h.0.attn.bias",
        "transformer.h.0.attn.bias.extra", "inv_freq", "lm_head.weight",
        "model.layers.0.self_attn.rotary_emb.inv_freq2",
        "gpt_neox.layers.0.attention.query_key_value.bias",
        "gpt_neox.layers.0.attention.dense.bias",
        "gpt_neox.layers.attention.bias", "gpt_neox.layers.0.attn.bias",
        "h.0.attention.bias", "layers.0.attention.dense.bias",
        "layers.0.self_attn.q_proj.bias", "model.layers.0.attention.bias",
        "layers.attention.bias"})
    EXPECT_FALSE(isKnownUnusedBuffer(name)) << name;
}

TEST(SafetensorsUnused, UnusedTensorsAreAnErrorUnlessAllowed) {
  PlanBuilder pb = lmPlan(2, DType::F32);
  LoadedPlan plan = load(pb);
  auto tensors = checkpointFor(pb, 3, DType::F32);
  HostTensor small = HostTensor::fromFloats(DType::F32, {2}, {1, 2});
  for (const char *extra : {"extra.0", "extra.1", "extra.2", "extra.3",
                            "extra.4", "extra.5", "extra.6"})
    tensors.emplace_back(extra, small);
  // Known buffers are never named, allowed or not.
  tensors.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", small);
  tensors.emplace_back("h.0.attn.masked_bias", small);
  std::string path = tempPath();
  ASSERT_TRUE(writeSafetensors(path, tensors));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.status().message();
  Checkpoint ckpt(*file);

  auto match = matchCheckpoint(plan.root(), ckpt);
  ASSERT_TRUE(match) << match.status().message();
  EXPECT_EQ(match->sources, (std::vector<std::string>{
                                "model.embed_tokens.weight",
                                "model.norm.weight", "mlp.up_proj.weight",
                                "mlp.down_proj.weight", "lm_head.weight"}));
  EXPECT_EQ(match->unused.size(), 7u);
  EXPECT_EQ(match->skipped,
            (std::vector<std::string>{
                "h.0.attn.masked_bias",
                "model.layers.0.self_attn.rotary_emb.inv_freq"}));

  auto runner = ThreadedRunner::create(plan, 0);
  ASSERT_TRUE(runner);
  Status st = loadCheckpointParameters((*runner)->rank(0), plan, 0, ckpt);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            "checkpoint '" + path +
                "' holds 7 tensors the plan does not use: 'extra.0', "
                "'extra.1', 'extra.2', 'extra.3', 'extra.4' and 2 more (a "
                "checkpoint for another model or config? "
                "--allow-unused-weights loads it anyway)");
  CheckpointLoadOptions lo;
  lo.allowUnusedWeights = true;
  auto allowed = checkCheckpoint(plan.root(), ckpt, lo);
  ASSERT_TRUE(allowed) << allowed.status().message();
  EXPECT_EQ(allowed->unused.size(), 7u);
  for (int r = 0; r < 2; ++r)
    ASSERT_OK(loadCheckpointParameters((*runner)->rank(r), plan, r, ckpt, lo));
  EXPECT_EQ((*runner)->rank(0).parameter(1).toFloats(),
            tensors[1].second.toFloats());
}
