//===- PlanLoaderFuzzer.cpp - libFuzzer target for the plan loader -------===//
//
// Feeds arbitrary bytes to braid::rt::loadPlan. The loader promises that a
// plan that loads never makes the interpreter read outside its own storage,
// so a plan that loads and is small enough to run quickly is also executed:
// every function once, on zero-filled inputs, through a ThreadedRunner.
// Load and run errors are expected and ignored; a crash, a sanitizer report
// (ASan, UBSan), a leak or a hang is a bug.
//
// Deterministic: fixed weight seed, zero inputs, functions in plan order.
//
//===----------------------------------------------------------------------===//
#include "runtime/HostTensor.h"
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace braid;
using namespace braid::rt;

namespace {

// What "small" means: a run must stay fast and far from the RSS limit.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 20;
constexpr int64_t kMaxStorageElements = int64_t(1) << 20; // params + state
constexpr unsigned kMaxOpsPerFunction = 256;

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
  if (p.world_size() != 1)
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
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  auto plan = loadPlan(std::move(bytes));
  if (plan)
    execute(*plan);
  return 0;
}
