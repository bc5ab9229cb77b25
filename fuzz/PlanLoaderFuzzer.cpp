//===- PlanLoaderFuzzer.cpp - libFuzzer target for the plan loader -------===//
//
// Feeds arbitrary bytes to braid::rt::loadPlan. The loader promises that a
// plan that loads never makes the interpreter read outside its own storage,
// so a plan that loads and is small enough to run quickly is also executed
// on every rank (world size 1 or 2, ranks as threads of a ThreadedRunner):
//   1. every function once, on zero-filled inputs;
//   2. when the plan has the generation entry points (generationShape), the
//      loop braid-run drives: generate() with a synthetic prompt, a prefill
//      and two greedy decode steps, sharded logits gathered and each step
//      checked to give every rank the same logits, as braid-run does.
// Load, run and generation errors are expected and ignored; a crash, a
// sanitizer report (ASan, UBSan), a leak or a hang is a bug.
//
// Deterministic: fixed weight seed, zero inputs, functions in plan order,
// prompt seed 0.
//
// Mutations: half of them are libFuzzer's byte-level ones; the other half
// (LLVMFuzzerCustomMutator) unpack a plan that verifies, change it as a
// whole and pack it again, so the result is still a well-formed FlatBuffer
// and a consistent model:
//   - one dimension value (vocab, hidden, batch, a head count, ...)
//     replaced everywhere it occurs (every tensor, parameter and state
//     shape, slice offsets/sizes, op head counts): vocab 0, batch 0 or
//     hidden 2^32 as a consistent plan, which byte flips never reach;
//   - the world size or a group size set to 0, 1, 2, 3, -1 or 65538;
//   - one tensor's buffer offset or size, or a function's arena size, set
//     to a boundary value;
//   - a gathered output made sharded (its block as the whole), or a sharded
//     output's group, dim or full size (Binding.shard_*) set to a boundary
//     value.
//
//===----------------------------------------------------------------------===//
#include "runtime/Generation.h"
#include "runtime/HostTensor.h"
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"
#include "runtime/ShardedOutput.h"

#include "flatbuffers/flatbuffers.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace braid;
using namespace braid::rt;

namespace {

// What "small" means: a run must stay fast and far from the RSS limit.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 20;
constexpr int64_t kMaxStorageElements = int64_t(1) << 20; // params + state
constexpr unsigned kMaxOpsPerFunction = 256;
// Ranks are threads: two exercise every collective's exchange and the
// loader's group checks without multiplying the cost of a run.
constexpr int kMaxWorldSize = 2;
// generate(): tokens per prefill (batch x prompt) and the vocabulary, so the
// prompt and the logits copies stay small.
constexpr int64_t kMaxPromptTokens = 256;
constexpr int64_t kMaxVocab = int64_t(1) << 16;
constexpr int kDecodeSteps = 2;

// Elements of `shape`, or -1 when a dim is negative or the count exceeds
// `limit` (checked before each multiplication, so nothing overflows).
template <typename T>
int64_t boundedElements(const flatbuffers::Vector<T> *shape, int64_t limit) {
  int64_t n = 1;
  if (!shape)
    return n;
  for (T d : *shape) {
    if (d < 0)
      return -1;
    if (d != 0 && n > limit / int64_t(d))
      return -1;
    n *= int64_t(d);
  }
  return n;
}

bool isSmall(const plan::Plan &p) {
  if (p.world_size() < 1 || p.world_size() > kMaxWorldSize)
    return false;
  int64_t total = 0;
  auto add = [&](int64_t n) {
    if (n < 0 || n > kMaxStorageElements - total)
      return false;
    total += n;
    return true;
  };
  if (p.parameters())
    for (const plan::Parameter *param : *p.parameters()) {
      // The weight generator walks the full tensor's indices and the local
      // slice is cut from the padded one: bound all three.
      int64_t full = boundedElements(param->full_shape(), kMaxStorageElements);
      int64_t padded =
          boundedElements(param->padded_shape(), kMaxStorageElements);
      if (full < 0 || padded < 0 || !add(full) || !add(padded) ||
          !add(boundedElements(param->local_shape(), kMaxStorageElements)))
        return false;
    }
  if (p.state())
    for (const plan::StateSlot *s : *p.state())
      if (!add(boundedElements(s->shape(), kMaxStorageElements)))
        return false;
  if (p.functions())
    for (const plan::Function *f : *p.functions()) {
      if (f->arena_size() > kMaxArenaBytes)
        return false;
      if (f->ops() && f->ops()->size() > kMaxOpsPerFunction)
        return false;
    }
  return true;
}

// Zero-filled inputs of the dtype and shape the function's bindings name.
TensorMap zeroInputs(const plan::Function &f) {
  TensorMap inputs;
  if (!f.inputs())
    return inputs;
  for (const plan::Binding *b : *f.inputs()) {
    const plan::Tensor *t = f.tensors()->Get(unsigned(b->tensor()));
    Shape shape;
    if (t->shape())
      shape.assign(t->shape()->begin(), t->shape()->end());
    inputs[b->name()->str()] = HostTensor(t->dtype(), std::move(shape));
  }
  return inputs;
}

void execute(const LoadedPlan &plan) {
  const plan::Plan &root = plan.root();
  if (!isSmall(root))
    return;
  auto runner = ThreadedRunner::create(plan, /*seed=*/0);
  if (!runner)
    return;
  if (!root.functions())
    return;
  for (const plan::Function *f : *root.functions()) {
    // Errors are fine: the kernels reject what the loader does not check.
    (void)(*runner)->run(f->name()->string_view(), {zeroInputs(*f)});
  }

  // The generation loop, as braid-run drives it.
  auto shape = generationShape(root);
  if (!shape)
    return;
  // Bounds for speed only; what generate() must survive is whatever
  // generationShape() accepts, so check for overflow without assuming sane
  // numbers.
  if (shape->batch > 0 && shape->promptLength > kMaxPromptTokens / shape->batch)
    return;
  if (shape->vocab > kMaxVocab)
    return;
  if (shape->batch > kMaxPromptTokens || shape->promptLength > kMaxPromptTokens)
    return;
  // The same runner: generating the weights again would double the cost of
  // a run, and the KV cache left by the runs above is overwritten in order.
  ThreadedRunner &r = **runner;
  GenerationOptions options;
  options.prompt = syntheticPrompt(*shape, /*seed=*/0);
  options.decodeSteps = kDecodeSteps;
  StepFn step = [&](const std::string &function, const StepInputs &inputs)
      -> Expected<std::map<std::string, HostTensor>> {
    auto outs = r.run(function, {inputs});
    if (!outs)
      return outs.status();
    if (outs->empty())
      return errorf("no rank returned outputs");
    // braid-run's gather of logits the plan leaves sharded.
    if (const plan::Function *f = plan.function(function)) {
      std::vector<int> ranks(outs->size());
      for (size_t i = 0; i < ranks.size(); ++i)
        ranks[i] = int(i);
      BRAID_RETURN_IF_ERROR(gatherOutputs(root, *f, "logits", ranks, *outs));
    }
    // braid-run's check: every rank holds the same (gathered) logits.
    auto first = (*outs)[0].find("logits");
    for (size_t i = 1; i < outs->size(); ++i) {
      auto other = (*outs)[i].find("logits");
      if (first == (*outs)[0].end() || other == (*outs)[i].end() ||
          other->second.bytes != first->second.bytes)
        return errorf("rank ", i, " returned different logits than rank 0");
    }
    return (*outs)[0];
  };
  (void)generate(*shape, options, step);
}

} // namespace

namespace {

template <typename F> void forEachDimVector(plan::PlanT &p, F f) {
  for (auto &param : p.parameters) {
    f(param->full_shape);
    f(param->local_shape);
    f(param->padded_shape);
  }
  for (auto &slot : p.state)
    f(slot->shape);
  for (auto &fn : p.functions) {
    for (auto &t : fn->tensors)
      f(t->shape);
    for (auto &op : fn->ops) {
      f(op->offsets);
      f(op->sizes);
    }
  }
}

int64_t boundary(std::mt19937_64 &rng, int64_t v) {
  // Wrapping arithmetic: v may already be a boundary value.
  auto wrap = [](uint64_t x) { return int64_t(x); };
  const int64_t values[] = {0,
                            1,
                            2,
                            3,
                            -1,
                            wrap(uint64_t(v) + 1),
                            wrap(uint64_t(v) - 1),
                            wrap(uint64_t(v) * 2),
                            int64_t(1) << 31,
                            (int64_t(1) << 32) + 2,
                            int64_t(1) << 40,
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min()};
  return values[rng() % (sizeof(values) / sizeof(values[0]))];
}

// One structural mutation of `p`; false if there was nothing to change.
bool mutatePlan(plan::PlanT &p, std::mt19937_64 &rng) {
  switch (rng() % 5) {
  case 0:
  case 1: { // a dimension value, everywhere
    std::set<int64_t> dims;
    forEachDimVector(p, [&](std::vector<int64_t> &v) {
      dims.insert(v.begin(), v.end());
    });
    if (dims.empty())
      return false;
    auto it = dims.begin();
    std::advance(it, long(rng() % dims.size()));
    int64_t from = *it, to = boundary(rng, from);
    forEachDimVector(p, [&](std::vector<int64_t> &v) {
      for (int64_t &d : v)
        if (d == from)
          d = to;
    });
    for (auto &fn : p.functions) {
      for (auto &op : fn->ops)
        for (int64_t *field : {&op->num_heads, &op->num_kv_heads,
                               &op->head_dim})
          if (*field == from)
            *field = to;
      for (auto &b : fn->outputs)
        if (b->full_size == from)
          b->full_size = to;
    }
    return true;
  }
  case 3: { // an output's sharding
    std::vector<std::pair<plan::FunctionT *, plan::BindingT *>> outputs;
    for (auto &fn : p.functions)
      for (auto &b : fn->outputs)
        outputs.emplace_back(fn.get(), b.get());
    if (outputs.empty())
      return false;
    auto [fn, binding] = outputs[rng() % outputs.size()];
    plan::BindingT &b = *binding;
    if (b.shard_group == -1) {
      // Gathered: make it a consistent sharded one (its block, along its
      // last dim, as the whole), which the loader accepts.
      if (p.groups.empty() || b.tensor < 0 ||
          size_t(b.tensor) >= fn->tensors.size() ||
          fn->tensors[size_t(b.tensor)]->shape.empty())
        return false;
      const std::vector<int64_t> &shape = fn->tensors[size_t(b.tensor)]->shape;
      b.shard_group = int32_t(rng() % p.groups.size());
      b.shard_dim = int64_t(shape.size()) - 1;
      b.full_size = shape.back();
      return true;
    }
    switch (rng() % 3) {
    case 0:
      b.shard_group = int32_t(boundary(rng, b.shard_group));
      break;
    case 1:
      b.shard_dim = boundary(rng, b.shard_dim);
      break;
    default:
      b.full_size = boundary(rng, b.full_size);
    }
    return true;
  }
  case 2: { // world or group size
    int32_t sizes[] = {0, 1, 2, 3, -1, 65538};
    int32_t to = sizes[rng() % 6];
    if (p.groups.empty() || rng() % 2)
      p.world_size = to;
    else
      p.groups[rng() % p.groups.size()]->size = to;
    return true;
  }
  default: { // a buffer or an arena
    if (p.functions.empty())
      return false;
    plan::FunctionT &fn = *p.functions[rng() % p.functions.size()];
    if (fn.tensors.empty() || rng() % 4 == 0) {
      fn.arena_size = boundary(rng, fn.arena_size);
      return true;
    }
    plan::TensorT &t = *fn.tensors[rng() % fn.tensors.size()];
    if (rng() % 2)
      t.buffer_offset = boundary(rng, t.buffer_offset);
    else
      t.buffer_size = boundary(rng, t.buffer_size);
    return true;
  }
  }
}

} // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (rng() % 2 == 0)
    return LLVMFuzzerMutate(data, size, maxSize);
  // Only a plan that loads can be unpacked safely: the FlatBuffers Verifier
  // alone lets misaligned [long] vectors through, which UnPack then reads
  // (a UBSan report in this mutator, not in the code under test).
  std::vector<uint8_t> bytes(data, data + size);
  if (!loadPlan(bytes))
    return LLVMFuzzerMutate(data, size, maxSize);
  std::unique_ptr<plan::PlanT> p = plan::UnPackPlan(bytes.data());
  if (!p || !mutatePlan(*p, rng))
    return LLVMFuzzerMutate(data, size, maxSize);
  flatbuffers::FlatBufferBuilder fbb;
  plan::FinishPlanBuffer(fbb, plan::Plan::Pack(fbb, p.get()));
  if (fbb.GetSize() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, fbb.GetBufferPointer(), fbb.GetSize());
  return fbb.GetSize();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  auto plan = loadPlan(std::move(bytes));
  if (plan)
    execute(*plan);
  return 0;
}
