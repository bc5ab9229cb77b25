//===- GemmFusion.cpp - Matmul -> bias add -> tanh GELU as one GEMM --------===//
#include "runtime/cuda/GemmFusion.h"

#include <vector>

using namespace braid::rt;
using namespace braid::rt::cuda;
using braid::plan::OpCode;
using braid::plan::TensorKind;

namespace {

std::vector<std::vector<int>> readersOf(const braid::plan::Function &f) {
  std::vector<std::vector<int>> readers(f.tensors()->size());
  for (unsigned i = 0; i < f.ops()->size(); ++i)
    if (const auto *operands = f.ops()->Get(i)->operands())
      for (int t : *operands)
        readers[size_t(t)].push_back(int(i));
  return readers;
}

bool escapes(const braid::plan::Function &f, int t) {
  if (f.outputs())
    for (const auto *b : *f.outputs())
      if (b->tensor() == t)
        return true;
  if (f.state())
    for (const auto *b : *f.state())
      if (b->output() == t)
        return true;
  return false;
}

std::vector<int64_t> shapeOf(const braid::plan::Tensor &t) {
  return t.shape() ? std::vector<int64_t>(t.shape()->begin(), t.shape()->end())
                   : std::vector<int64_t>();
}

// Arena ranges as the memory plan reserved them (the loader has checked
// each holds its tensor).
bool overlap(const braid::plan::Tensor &a, const braid::plan::Tensor &b) {
  auto arena = [](const braid::plan::Tensor &t) {
    return t.kind() == TensorKind::Activation || t.kind() == TensorKind::Input;
  };
  if (!arena(a) || !arena(b))
    return false; // parameters, packs and state have their own allocations
  int64_t a0 = a.buffer_offset(), b0 = b.buffer_offset();
  return a0 < b0 + b.buffer_size() && b0 < a0 + a.buffer_size();
}

} // namespace

std::map<int, GemmEpilogue>
cuda::findGemmEpilogues(const braid::plan::Function &f) {
  std::map<int, GemmEpilogue> found;
  if (!f.ops() || !f.tensors() || f.num_streams() > 1)
    return found;
  auto readers = readersOf(f);
  auto tensor = [&](int t) { return f.tensors()->Get(unsigned(t)); };
  // `t`, produced by op `at`, is read by op at + 1 alone, which has no
  // events between it and op `at`, and nothing else sees `t`.
  auto onlyNextReads = [&](int t, int at) {
    unsigned next = unsigned(at + 1);
    if (next >= f.ops()->size() || readers[size_t(t)] != std::vector<int>{at + 1} ||
        escapes(f, t))
      return false;
    const auto &a = *f.ops()->Get(unsigned(at)), &b = *f.ops()->Get(next);
    bool events = (a.record_events() && a.record_events()->size()) ||
                  (b.wait_events() && b.wait_events()->size());
    return !events && a.stream() == b.stream();
  };
  for (unsigned i = 0; i < f.ops()->size(); ++i) {
    const auto &mm = *f.ops()->Get(i);
    if (mm.opcode() != OpCode::Matmul)
      continue;
    int r = mm.results()->Get(0);
    const auto &rt = *tensor(r);
    std::vector<int64_t> shape = shapeOf(rt);
    if (shape.empty())
      continue;
    GemmEpilogue e;
    int last = int(i), value = r;
    if (onlyNextReads(value, last)) {
      const auto &add = *f.ops()->Get(unsigned(last + 1));
      if (add.opcode() == OpCode::Add && add.operands()->size() == 2 &&
          add.operands()->Get(0) == value) {
        const auto &bias = *tensor(add.operands()->Get(1));
        const auto &out = *tensor(add.results()->Get(0));
        if (shapeOf(bias) == std::vector<int64_t>{shape.back()} &&
            bias.dtype() == rt.dtype() && shapeOf(out) == shape &&
            out.dtype() == rt.dtype()) {
          e.bias = add.operands()->Get(1);
          e.absorbed.push_back(last + 1);
          value = add.results()->Get(0);
          ++last;
        }
      }
    }
    if (onlyNextReads(value, last)) {
      const auto &gelu = *f.ops()->Get(unsigned(last + 1));
      const auto &out = *tensor(gelu.results()->Get(0));
      if (gelu.opcode() == OpCode::Gelu &&
          gelu.gelu_approximation() == braid::plan::GeluApproximation::Tanh &&
          shapeOf(out) == shape && out.dtype() == rt.dtype()) {
        e.gelu = true;
        e.absorbed.push_back(last + 1);
        value = gelu.results()->Get(0);
        ++last;
      }
    }
    if (e.absorbed.empty())
      continue;
    // The GEMM writes `value` while it reads its operands and the bias.
    const auto &out = *tensor(value);
    bool clash = overlap(out, *tensor(mm.operands()->Get(0))) ||
                 overlap(out, *tensor(mm.operands()->Get(1))) ||
                 (e.bias >= 0 && overlap(out, *tensor(e.bias)));
    if (clash)
      continue;
    e.output = value;
    found.emplace(int(i), e);
    i = unsigned(last); // the absorbed ops start no chain of their own
  }
  return found;
}
