//===- Interpreter.cpp - CPU reference interpreter ------------------------===//
#include "runtime/Interpreter.h"
#include "runtime/Weights.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>

using namespace braid::rt;
using namespace braid::rt::cpu;
using braid::plan::OpCode;
using braid::plan::TensorKind;

namespace braid::rt {
// Executes the ops of one function on one rank; lives for one run().
class OpRunner {
public:
  OpRunner(Interpreter &in, const plan::Function &f, uint8_t *arena)
      : in_(in), plan_(in.plan_.root()), f_(f), arena_(arena),
        pending_(size_t(f.num_handles())) {}

  Status runOps();

  const plan::Tensor &tensor(int t) const {
    return *f_.tensors()->Get(unsigned(t));
  }
  Shape shapeOf(int t) const {
    Shape s;
    if (tensor(t).shape())
      for (int64_t d : *tensor(t).shape())
        s.push_back(d);
    return s;
  }
  uint8_t *storage(int t) {
    const plan::Tensor &x = tensor(t);
    switch (x.kind()) {
    case TensorKind::Parameter:
      return in_.params_[size_t(x.ref())].bytes.data();
    case TensorKind::State:
      return in_.state_[size_t(x.ref())].bytes.data();
    default:
      return arena_ + x.buffer_offset();
    }
  }
  size_t byteSize(int t) const {
    return size_t(numElements(shapeOf(t))) * dtypeSize(tensor(t).dtype());
  }

private:
  struct Pending {
    bool deferredRecv = false;
    const plan::Op *start = nullptr;
    int payload = -1; // tensor the wait writes
    ByteTensor data;
  };

  FTensor loadF(int t) {
    FTensor x{shapeOf(t), {}};
    x.data.resize(size_t(numElements(x.shape)));
    loadAsFloat(tensor(t).dtype(), storage(t), int64_t(x.data.size()),
                x.data.data());
    return x;
  }
  ITensor loadI(int t) {
    ITensor x{shapeOf(t), {}};
    x.data.resize(size_t(numElements(x.shape)));
    loadAsInt(tensor(t).dtype(), storage(t), int64_t(x.data.size()),
              x.data.data());
    return x;
  }
  ByteTensor loadB(int t) {
    ByteTensor x{shapeOf(t), dtypeSize(tensor(t).dtype()), {}};
    x.data.assign(storage(t), storage(t) + byteSize(t));
    return x;
  }
  Status storeF(int t, const FTensor &x) {
    if (x.shape != shapeOf(t))
      return errorf("computed result shape ", formatShape(x.shape),
                    " but the plan says tensor ", t, " is ",
                    formatShape(shapeOf(t)));
    storeFromFloat(tensor(t).dtype(), x.data.data(), int64_t(x.data.size()),
                   storage(t));
    return Status::ok();
  }
  Status storeB(int t, const ByteTensor &x, bool exactShape = true) {
    if ((exactShape && x.shape != shapeOf(t)) ||
        x.elemSize != dtypeSize(tensor(t).dtype()) ||
        x.data.size() != byteSize(t))
      return errorf("result ", formatShape(x.shape), " (", x.elemSize,
                    "-byte elements) does not fit tensor ", t, " ",
                    formatShape(shapeOf(t)), " x ",
                    dtypeName(tensor(t).dtype()));
    if (!x.data.empty())
      std::memmove(storage(t), x.data.data(), x.data.size());
    return Status::ok();
  }
  template <typename T> Status store(int t, Expected<T> x) {
    if (!x)
      return x.status();
    return storeF(t, *x);
  }

  Status compute(const plan::Op &op);
  Expected<ByteTensor> collective(const plan::Op &op);
  Expected<ByteTensor> reduce(const std::vector<Bytes> &all, int t,
                              plan::ReduceKind kind);

  Interpreter &in_;
  const plan::Plan &plan_;
  const plan::Function &f_;
  uint8_t *arena_;
  std::vector<Pending> pending_;
};
} // namespace braid::rt

Status OpRunner::runOps() {
  if (!f_.ops())
    return Status::ok();
  in_.profile_.clear();
  auto stepStart = std::chrono::steady_clock::now();
  for (unsigned oi = 0; oi < f_.ops()->size(); ++oi) {
    const plan::Op &op = *f_.ops()->Get(oi);
    auto opStart = std::chrono::steady_clock::now();
    Status st = compute(op);
    if (in_.profiling_) {
      auto now = std::chrono::steady_clock::now();
      OpTime t = opTimeOf(f_, int(oi));
      t.start = std::chrono::duration<double>(opStart - stepStart).count();
      t.seconds = std::chrono::duration<double>(now - opStart).count();
      in_.profile_.push_back(std::move(t));
    }
    if (!st) {
      std::string where = "rank " + std::to_string(in_.rank_) + ": function '" +
                          f_.name()->str() + "': op " + std::to_string(oi) +
                          " (" + opcodeName(op.opcode()) + ")";
      if (op.loc())
        where += " at " + op.loc()->str();
      return errorf(where, ": ", st.message());
    }
  }
  return Status::ok();
}

Status OpRunner::compute(const plan::Op &op) {
  auto operand = [&](unsigned i) { return op.operands()->Get(i); };
  auto result = [&](unsigned i) { return op.results()->Get(i); };
  switch (op.opcode()) {
  case OpCode::Matmul:
    return store(result(0), matmul(loadF(operand(0)), loadF(operand(1)),
                                   op.transpose_a(), op.transpose_b()));
  case OpCode::Add:
  case OpCode::Mul:
    return store(result(0), binary(op.opcode() == OpCode::Add ? BinaryKind::Add
                                                              : BinaryKind::Mul,
                                   loadF(operand(0)), loadF(operand(1))));
  case OpCode::RmsNorm:
    return store(result(0),
                 rmsNorm(loadF(operand(0)), loadF(operand(1)), op.epsilon()));
  case OpCode::LayerNorm:
    return store(result(0), layerNorm(loadF(operand(0)), loadF(operand(1)),
                                      loadF(operand(2)), op.epsilon()));
  case OpCode::Rope:
    return store(result(0),
                 rope(loadF(operand(0)), loadI(operand(1)), op.theta()));
  case OpCode::Attention: {
    AttentionParams p = attentionParamsOf(op);
    if (op.operands()->size() == 3)
      return store(result(0), attention(loadF(operand(0)), loadF(operand(1)),
                                        loadF(operand(2)), p));
    FTensor kc = loadF(operand(3)), vc = loadF(operand(4));
    auto o =
        attentionWithCache(loadF(operand(0)), loadF(operand(1)),
                           loadF(operand(2)), kc, vc, loadI(operand(5)), p);
    if (!o)
      return o.status();
    BRAID_RETURN_IF_ERROR(storeF(result(0), *o));
    BRAID_RETURN_IF_ERROR(storeF(result(1), kc));
    return storeF(result(2), vc);
  }
  case OpCode::Silu:
    return storeF(result(0), silu(loadF(operand(0))));
  case OpCode::Gelu:
    return storeF(result(0),
                  gelu(loadF(operand(0)),
                       op.gelu_approximation() == plan::GeluApproximation::Tanh
                           ? GeluKind::Tanh
                           : GeluKind::Erf));
  case OpCode::Embedding: {
    FTensor table = loadF(operand(1));
    int64_t start = embeddingVocabStart(plan_, op, in_.rank_, table.shape);
    return store(result(0), embedding(loadI(operand(0)), table, start));
  }
  case OpCode::Softmax:
    return store(result(0), softmax(loadF(operand(0)), op.dim()));
  case OpCode::Slice: {
    Shape offsets(op.offsets()->begin(), op.offsets()->end());
    Shape sizes(op.sizes()->begin(), op.sizes()->end());
    auto y = slice(loadB(operand(0)), offsets, sizes);
    if (!y)
      return y.status();
    return storeB(result(0), *y);
  }
  case OpCode::Concat: {
    std::vector<ByteTensor> ins;
    for (int t : *op.operands())
      ins.push_back(loadB(t));
    std::vector<const ByteTensor *> ptrs;
    for (const ByteTensor &b : ins)
      ptrs.push_back(&b);
    auto y = concat(ptrs, op.dim());
    if (!y)
      return y.status();
    return storeB(result(0), *y);
  }
  case OpCode::Reshape: {
    ByteTensor x = loadB(operand(0));
    BRAID_RETURN_IF_ERROR(checkReshape(x.shape, shapeOf(result(0))));
    x.shape = shapeOf(result(0));
    return storeB(result(0), x);
  }
  case OpCode::Wait: {
    Pending &p = pending_[size_t(op.handle())];
    if (p.deferredRecv) {
      auto y = collective(*p.start);
      if (!y)
        return y.status();
      p.data = y.take();
    }
    if (p.payload < 0)
      return Status::ok(); // send_start: nothing to yield
    return storeB(p.payload, p.data);
  }
  default: {
    bool start = syncOpcode(op.opcode()) != op.opcode();
    Pending *p = start ? &pending_[size_t(op.handle())] : nullptr;
    if (op.opcode() == OpCode::RecvStart) {
      // Received at the wait, so two ranks that both start a receive before
      // their send do not deadlock.
      p->deferredRecv = true;
      p->start = &op;
      p->payload = result(0);
      return Status::ok();
    }
    auto y = collective(op);
    if (!y)
      return y.status();
    if (!op.results() || op.results()->size() == 0)
      return Status::ok();
    if (p) {
      // Readable only after the wait: hold the payload until then.
      p->payload = result(0);
      p->data = y.take();
      return Status::ok();
    }
    return storeB(result(0), *y);
  }
  }
}

Expected<ByteTensor> OpRunner::reduce(const std::vector<Bytes> &all, int t,
                                      plan::ReduceKind kind) {
  plan::DType dt = tensor(t).dtype();
  int64_t n = numElements(shapeOf(t));
  size_t bytes = size_t(n) * dtypeSize(dt);
  for (const Bytes &b : all)
    if (b.size() != bytes)
      return errorf("ranks contributed ", b.size(), " and ", bytes,
                    " bytes to the same reduction");
  ByteTensor out{shapeOf(t), dtypeSize(dt), Bytes(bytes)};
  auto combine = [kind](auto a, auto b) {
    switch (kind) {
    case plan::ReduceKind::Sum:
      return a + b;
    case plan::ReduceKind::Max:
      return a > b ? a : b;
    case plan::ReduceKind::Min:
      return a < b ? a : b;
    case plan::ReduceKind::Prod:
      return a * b;
    }
    return a + b;
  };
  // Rank order, starting from rank 0: identical on every rank.
  if (isFloatType(dt)) {
    std::vector<float> acc(static_cast<size_t>(n)), x(acc.size());
    loadAsFloat(dt, all[0].data(), n, acc.data());
    for (size_t r = 1; r < all.size(); ++r) {
      loadAsFloat(dt, all[r].data(), n, x.data());
      for (size_t i = 0; i < acc.size(); ++i)
        acc[i] = combine(acc[i], x[i]);
    }
    storeFromFloat(dt, acc.data(), n, out.data.data());
  } else {
    std::vector<int64_t> acc(static_cast<size_t>(n)), x(acc.size());
    loadAsInt(dt, all[0].data(), n, acc.data());
    for (size_t r = 1; r < all.size(); ++r) {
      loadAsInt(dt, all[r].data(), n, x.data());
      for (size_t i = 0; i < acc.size(); ++i)
        acc[i] = combine(acc[i], x[i]);
    }
    HostTensor h = HostTensor::fromInts(dt, shapeOf(t), acc);
    out.data = std::move(h.bytes);
  }
  return out;
}

Expected<ByteTensor> OpRunner::collective(const plan::Op &op) {
  GroupPosition g = groupPosition(plan_, op.group(), in_.rank_);
  Communicator &comm = in_.comm_;
  OpCode code = syncOpcode(op.opcode());
  if (code == OpCode::Send) {
    BRAID_RETURN_IF_ERROR(comm.send(g.instanceKey, g.rankInGroup,
                                    int(op.peer()),
                                    loadB(op.operands()->Get(0)).data));
    return ByteTensor{};
  }
  if (code == OpCode::Recv) {
    int t = op.results()->Get(0);
    auto doRecv = [&]() -> Expected<ByteTensor> {
      auto got = comm.recv(g.instanceKey, int(op.peer()), g.rankInGroup);
      if (!got)
        return got.status();
      if (got->size() != byteSize(t))
        return errorf("received ", got->size(), " bytes for a tensor of ",
                      byteSize(t));
      return ByteTensor{shapeOf(t), dtypeSize(tensor(t).dtype()), got.take()};
    };
    return doRecv();
  }
  int in = op.operands()->Get(0), out = op.results()->Get(0);
  ByteTensor mine = loadB(in);
  auto all = comm.exchange(g.instanceKey, g.size, g.rankInGroup, mine.data);
  if (!all)
    return all.status();
  std::vector<ByteTensor> parts;
  for (Bytes &b : *all)
    parts.push_back(ByteTensor{mine.shape, mine.elemSize, std::move(b)});
  for (const ByteTensor &p : parts)
    if (p.data.size() != mine.data.size())
      return errorf("ranks contributed tensors of ", p.data.size(), " and ",
                    mine.data.size(), " bytes");
  switch (code) {
  case OpCode::AllReduce: {
    std::vector<Bytes> raw;
    for (ByteTensor &p : parts)
      raw.push_back(std::move(p.data));
    return reduce(raw, in, op.reduce_kind());
  }
  case OpCode::AllGather: {
    std::vector<const ByteTensor *> ptrs;
    for (const ByteTensor &p : parts)
      ptrs.push_back(&p);
    return concat(ptrs, op.dim());
  }
  case OpCode::ReduceScatter: {
    std::vector<Bytes> raw;
    for (ByteTensor &p : parts)
      raw.push_back(std::move(p.data));
    auto full = reduce(raw, in, op.reduce_kind());
    if (!full)
      return full.status();
    auto pieces = split(*full, op.dim(), g.size);
    if (!pieces)
      return pieces.status();
    return (*pieces)[size_t(g.rankInGroup)];
  }
  case OpCode::AllToAll: {
    // Rank j's piece `rank` of its split, concatenated in rank order.
    std::vector<ByteTensor> mineFromEach;
    for (const ByteTensor &p : parts) {
      auto pieces = split(p, op.split_dim(), g.size);
      if (!pieces)
        return pieces.status();
      mineFromEach.push_back((*pieces)[size_t(g.rankInGroup)]);
    }
    std::vector<const ByteTensor *> ptrs;
    for (const ByteTensor &p : mineFromEach)
      ptrs.push_back(&p);
    return concat(ptrs, op.concat_dim());
  }
  case OpCode::Broadcast: {
    ByteTensor r = parts[size_t(op.root())];
    r.shape = shapeOf(out);
    return r;
  }
  default:
    return errorf("not a collective");
  }
}

// Plans may legally ask for more memory than the machine has; report that as
// an error instead of terminating on std::bad_alloc.
Expected<std::unique_ptr<Interpreter>> Interpreter::create(LoadedPlan plan,
                                                           int rank,
                                                           Communicator &comm,
                                                           uint64_t seed) {
  try {
    return createImpl(std::move(plan), rank, comm, seed);
  } catch (const std::exception &e) { // bad_alloc, length_error
    return errorf("rank ", rank, ": out of memory for parameters and state (",
                  e.what(), ")");
  }
}

Expected<TensorMap> Interpreter::run(std::string_view function,
                                     const TensorMap &inputs) {
  try {
    return runImpl(function, inputs);
  } catch (const std::exception &e) { // bad_alloc, length_error
    return errorf("rank ", rank_, ": function '", function,
                  "': out of memory (arena or temporaries: ", e.what(), ")");
  }
}

Expected<std::unique_ptr<Interpreter>>
Interpreter::createImpl(LoadedPlan plan, int rank, Communicator &comm,
                        uint64_t seed) {
  const plan::Plan &root = plan.root();
  if (rank < 0 || rank >= root.world_size())
    return errorf("rank ", rank, " is outside world_size ", root.world_size());
  if (comm.worldSize() != root.world_size())
    return errorf("communicator has ", comm.worldSize(),
                  " ranks, the plan needs ", root.world_size());
  std::unique_ptr<Interpreter> in(new Interpreter(std::move(plan), rank, comm));
  const plan::Plan &p = in->plan_.root();
  if (p.parameters())
    for (const plan::Parameter *param : *p.parameters()) {
      auto value = initialParameterValue(p, *param, rank, seed);
      if (!value)
        return value.status();
      in->params_.push_back(value.take());
    }
  in->resetState();
  return in;
}

void Interpreter::resetState() {
  state_.clear();
  const plan::Plan &p = plan_.root();
  if (p.state())
    for (const plan::StateSlot *s : *p.state())
      state_.emplace_back(s->dtype(),
                          Shape(s->shape()->begin(), s->shape()->end()));
}

Status Interpreter::setParameter(std::string_view name, HostTensor local) {
  auto slot = parameterSlotFor(plan_.root(), name, local);
  if (!slot)
    return slot.status();
  params_[*slot] = std::move(local);
  return Status::ok();
}

Expected<TensorMap> Interpreter::runImpl(std::string_view function,
                                         const TensorMap &inputs) {
  int fi = plan_.functionIndex(function);
  if (fi < 0)
    return errorf("plan has no function '", function, "'");
  const plan::Function &f = *plan_.root().functions()->Get(unsigned(fi));
  std::vector<uint8_t> &arena = arenas_[fi];
  arena.resize(size_t(f.arena_size()));
  OpRunner runner(*this, f, arena.data());

  auto bound = bindInputs(f, inputs);
  if (!bound)
    return bound.status();
  for (const BoundInput &in : *bound)
    if (!in.value->bytes.empty())
      std::memcpy(runner.storage(in.tensor), in.value->bytes.data(),
                  in.value->bytes.size());

  BRAID_RETURN_IF_ERROR(runner.runOps());

  if (f.state())
    for (const plan::StateBinding *b : *f.state()) {
      HostTensor &slot = state_[size_t(b->slot())];
      uint8_t *src = runner.storage(b->output());
      if (src != slot.bytes.data() && !slot.bytes.empty())
        std::memmove(slot.bytes.data(), src, slot.bytes.size());
    }
  TensorMap outputs;
  if (f.outputs())
    for (const plan::Binding *b : *f.outputs()) {
      int t = b->tensor();
      HostTensor h(runner.tensor(t).dtype(), runner.shapeOf(t));
      if (!h.bytes.empty())
        std::memcpy(h.bytes.data(), runner.storage(t), h.bytes.size());
      outputs[b->name()->str()] = std::move(h);
    }
  return outputs;
}

Expected<std::unique_ptr<ThreadedRunner>>
ThreadedRunner::create(LoadedPlan plan, uint64_t seed) {
  std::unique_ptr<ThreadedRunner> r(new ThreadedRunner());
  int world = plan.root().world_size();
  r->comm_ = std::make_unique<Communicator>(world);
  for (int i = 0; i < world; ++i) {
    auto in = Interpreter::create(plan, i, *r->comm_, seed);
    if (!in)
      return in.status();
    r->ranks_.push_back(in.take());
  }
  return r;
}

Expected<std::vector<TensorMap>>
ThreadedRunner::run(std::string_view function,
                    const std::vector<TensorMap> &inputs) {
  return runPerRank(
      std::vector<std::string>(ranks_.size(), std::string(function)), inputs);
}

Expected<std::vector<TensorMap>>
ThreadedRunner::runPerRank(const std::vector<std::string> &functions,
                           const std::vector<TensorMap> &inputs) {
  size_t world = ranks_.size();
  if (functions.size() != world)
    return errorf("got functions for ", functions.size(), " ranks, world is ",
                  world);
  if (inputs.size() != 1 && inputs.size() != world)
    return errorf("got inputs for ", inputs.size(), " ranks, world is ", world);
  std::vector<std::optional<Expected<TensorMap>>> results(world);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      results[r] =
          ranks_[r]->run(functions[r], inputs[inputs.size() == 1 ? 0 : r]);
      if (!results[r]->hasValue())
        comm_->abort(); // release ranks blocked in collectives
    });
  for (std::thread &t : threads)
    t.join();
  std::vector<TensorMap> out;
  // Report the root cause, not the aborts it triggered elsewhere.
  for (size_t r = 0; r < world; ++r)
    if (!results[r]->hasValue() &&
        results[r]->status().message().find("aborted") == std::string::npos)
      return results[r]->status();
  for (size_t r = 0; r < world; ++r) {
    if (!results[r]->hasValue())
      return results[r]->status();
    out.push_back(results[r]->take());
  }
  return out;
}
