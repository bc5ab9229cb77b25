//===- SafetensorsFuzzer.cpp - libFuzzer target for safetensors files -----===//
//
// Feeds arbitrary bytes to braid::rt::SafetensorsFile as a checkpoint file.
// The API takes a path (it maps the file), so the bytes go to a memfd that
// is opened again through /proc/self/fd/N: the same open/fstat/mmap path a
// real file takes. A file that opens promises that every tensor can be read
// without further bounds checks, so the target then
//   1. reads every tensor as fp32 with the shape its header states (and once
//      with a wrong shape, which must be refused);
//   2. loads the parameters of two small plans from it, as braid-run
//      --weights does: a tp=2 Megatron MLP (fp32; a column- and a row-
//      parallel weight, cut per rank) and a tp=1 bf16 plan that also has a
//      GPT-2 style name ("h.0.ln_1.weight", found as
//      "transformer.h.0.ln_1.weight") and a tied "lm_head.weight" (found as
//      "model.embed_tokens.weight");
//   3. reads it as a reference logits file, as braid-run --check-against
//      does (readReferenceLogits, for any bytes, opened or not), and checks
//      and compares one that reads against a small run (batch 2, a 2-token
//      prompt, vocabulary 4, prefill with every position and 2 decode
//      steps).
// Open, read and load errors are expected and ignored; a crash, a sanitizer
// report (ASan, UBSan), a leak or a hang is a bug.
//
// Seeds: fuzz/seeds/make-safetensors-seeds.py writes files whose names and
// shapes match these plans. Dictionary: fuzz/dict/safetensors.dict.
//
//===----------------------------------------------------------------------===//
#include "runtime/HostTensor.h"
#include "runtime/PlanLoader.h"
#include "runtime/ReferenceLogits.h"
#include "runtime/Safetensors.h"
#include "test/runtime/PlanTestUtil.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace braid;
using namespace braid::rt;

namespace {

struct Fixture {
  int fd = -1;
  std::string path;
  std::vector<LoadedPlan> plans;
};

LoadedPlan mustLoad(const test::PlanBuilder &b, const char *what) {
  auto plan = loadPlan(b.finish());
  if (!plan) {
    std::fprintf(stderr, "safetensors-fuzzer: the %s plan does not load: %s\n",
                 what, plan.status().message().c_str());
    std::abort();
  }
  return plan.take();
}

Fixture &fixture() {
  static Fixture *f = [] {
    auto *fx = new Fixture;
    fx->fd = ::memfd_create("braid-safetensors-fuzz", MFD_CLOEXEC);
    if (fx->fd < 0) {
      std::perror("safetensors-fuzzer: memfd_create");
      std::abort();
    }
    fx->path = "/proc/self/fd/" + std::to_string(fx->fd);

    // hidden 8, intermediate 16: up_proj [16, 8] column-parallel (rows cut),
    // down_proj [8, 16] row-parallel (columns cut).
    fx->plans.push_back(mustLoad(
        test::megatronMlpPlan(/*tp=*/2, /*hidden=*/8, /*inter=*/16,
                              /*batch=*/1, /*tokens=*/2, DType::F32),
        "tp=2 MLP"));

    test::PlanBuilder b =
        test::megatronMlpPlan(1, 8, 16, 1, 2, DType::BF16);
    b.param("h.0.ln_1.weight", {8}, {8}, DType::BF16);
    b.param("lm_head.weight", {32, 8}, {32, 8}, DType::BF16);
    fx->plans.push_back(mustLoad(b, "tp=1 bf16"));
    return fx;
  }();
  return *f;
}

bool writeAll(int fd, const uint8_t *data, size_t size) {
  if (::ftruncate(fd, 0) != 0)
    return false;
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, data + done, size - done, off_t(done));
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

// The shapes the header states, read independently of the runtime's parser
// (only to ask for the right shape; anything odd is skipped).
std::vector<std::pair<std::string, Shape>> headerShapes(const uint8_t *data,
                                                        size_t size) {
  std::vector<std::pair<std::string, Shape>> out;
  if (size < 8)
    return out;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | data[i];
  if (n > size - 8)
    return out;
  auto j = nlohmann::json::parse(data + 8, data + 8 + n, nullptr,
                                 /*allow_exceptions=*/false);
  if (!j.is_object())
    return out;
  for (const auto &[name, entry] : j.items()) {
    if (!entry.is_object() || !entry.contains("shape") ||
        !entry["shape"].is_array())
      continue;
    Shape shape;
    bool ok = true;
    for (const auto &d : entry["shape"]) {
      if (!d.is_number_integer()) {
        ok = false;
        break;
      }
      shape.push_back(d.is_number_unsigned() ? int64_t(d.get<uint64_t>())
                                             : d.get<int64_t>());
    }
    if (ok)
      out.emplace_back(name, std::move(shape));
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  (void)fixture();
  return 0;
}

/// A run the reference file is checked against: batch 2, prompt 2,
/// vocabulary 4, prefill (every position) and 2 decode steps.
static void checkAsReference(const std::string &path) {
  auto ref = readReferenceLogits(path);
  if (!ref)
    return;
  GenerationShape shape;
  shape.batch = 2;
  shape.promptLength = 2;
  shape.vocab = 4;
  std::vector<StepRecord> steps(3);
  for (int k = 0; k < 3; ++k) {
    StepRecord &r = steps[size_t(k)];
    r.positions = k == 0 ? 2 : 1;
    r.inputIds = k == 0 ? std::vector<int64_t>{1, 2, 3, 0}
                        : std::vector<int64_t>{2, 2};
    r.allLogits.assign(size_t(2 * r.positions * 4), float(k));
    r.logits.assign(8, float(k));
    r.nextToken = {0, 0};
  }
  (void)referenceScale(*ref, steps.size());
  (void)checkReferenceCovers(*ref, shape, {1, 2, 3, 0}, 2);
  (void)compareWithReference(*ref, shape, steps, 1e-5, 1e-4);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Fixture &fx = fixture();
  if (!writeAll(fx.fd, data, size))
    return 0;
  checkAsReference(fx.path);
  auto file = SafetensorsFile::open(fx.path);
  if (!file)
    return 0;

  // Every tensor, with the shape its header states and with a wrong one.
  volatile float sink = 0;
  for (const auto &[name, shape] : headerShapes(data, size)) {
    if (!file->contains(name))
      continue;
    if (auto values = file->readFloats(name, shape); values && !values->empty())
      sink = sink + (*values)[0] + values->back();
    Shape wrong = shape;
    wrong.push_back(1);
    (void)file->readFloats(name, wrong);
  }
  for (const std::string &name : file->names())
    (void)file->readFloats(name, {});

  // Every rank's parameters of each plan, as braid-run --weights loads them.
  for (const LoadedPlan &plan : fx.plans)
    for (int rank = 0; rank < plan.root().world_size(); ++rank)
      (void)loadCheckpointParameters(
          [&](const std::string &, HostTensor local) -> Status {
            if (!local.bytes.empty())
              sink = sink + float(local.bytes.front() ^ local.bytes.back());
            return Status::ok();
          },
          plan, rank, *file);
  return 0;
}
