//===- Interpreter.cpp - CPU reference interpreter ------------------------===//
#include "runtime/Interpreter.h"
#include "runtime/P2PGroups.h"
#include "runtime/CheckedMath.h"
#include "runtime/Threads.h"
#include "runtime/Weights.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

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
  /// Strict mode (Interpreter.h): streams in an order drawn from `rng`.
  Status runOpsStrict(std::mt19937_64 &rng);
  int rank() const { return in_.rank_; }

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
      return in_.parameterData(x.ref());
    case TensorKind::PackedParameter:
      return in_.packs_[size_t(x.ref())].bytes.data();
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
  class Strict;

  struct Pending {
    const plan::Op *start = nullptr;
    int payload = -1; // tensor the wait writes
    ByteTensor data;
    std::optional<uint64_t> sendTicket; // a posted send_start's message
    std::optional<uint64_t> recvTicket; // a posted recv_start
  };

  FTensor loadF(int t) {
    FTensor x{shapeOf(t), {}};
    x.data.resize(size_t(numElements(x.shape)));
    loadAsFloat(tensor(t).dtype(), storage(t), int64_t(x.data.size()),
                x.data.data());
    return x;
  }
  /// Tensor t read in place (FView): kernels convert what they read.
  FView viewF(int t) { return {shapeOf(t), storage(t), tensor(t).dtype()}; }
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
  /// RunOptions::checkFinite: `written` are the tensors op `source`'s
  /// execution just wrote (its results, or an async payload).
  Status checkFinite(const std::vector<int> &written, const plan::Op &source);
  /// The tensors op `op` wrote when it ran in plan order (a wait writes its
  /// start's payload); `source` becomes the op whose operands they came
  /// from.
  std::vector<int> writtenBy(const plan::Op &op, const plan::Op *&source);
  /// "tensor 5 (parameter 'w')" and the like, for messages.
  std::string describeTensor(int t) const;
  /// Runs collective `op` (sync opcode or async start). `input`, when
  /// given, replaces the operand's current bytes.
  Expected<ByteTensor> collective(const plan::Op &op,
                                  const ByteTensor *input = nullptr);
  /// The point-to-point channel of send/recv `op`: its group instance and
  /// stream (one NCCL communicator), this rank and the peer.
  Communicator::Channel channelOf(const plan::Op &op) const {
    return p2pChannel(plan_, op, in_.rank_);
  }
  /// The message of posted receive `ticket` of recv `op`, checked against
  /// its result's size.
  Expected<ByteTensor> receive(const plan::Op &op, uint64_t ticket) {
    int t = op.results()->Get(0);
    auto got = in_.comm_.awaitReceived(channelOf(op), ticket);
    if (!got)
      return got.status();
    if (got->size() != byteSize(t))
      return errorf("received ", got->size(), " bytes for a tensor of ",
                    byteSize(t));
    return ByteTensor{shapeOf(t), dtypeSize(tensor(t).dtype()), got.take()};
  }
  /// Ops [first, end) issued as one group (P2PGroups.h): every send and
  /// send_start posted, then every receive and recv_start posted, then
  /// the receives' messages taken, then every send waited for. `start(oi)`
  /// issues a start the mode's way (it never blocks).
  Status runP2PGroup(unsigned first, unsigned end,
                     const std::function<Status(unsigned)> &start);
  /// `st` prefixed with the rank, function and op `oi`.
  Status opError(unsigned oi, const Status &st) const;
  void recordTime(unsigned oi, std::chrono::steady_clock::time_point stepStart,
                  std::chrono::steady_clock::time_point opStart);
  Expected<ByteTensor> reduce(const std::vector<Bytes> &all, int t,
                              plan::ReduceKind kind);

  Interpreter &in_;
  const plan::Plan &plan_;
  const plan::Function &f_;
  uint8_t *arena_;
  std::vector<Pending> pending_;
};
} // namespace braid::rt

Status OpRunner::opError(unsigned oi, const Status &st) const {
  const plan::Op &op = *f_.ops()->Get(oi);
  std::string where = "rank " + std::to_string(in_.rank_) + ": function '" +
                      f_.name()->str() + "': op " + std::to_string(oi) + " (" +
                      opcodeName(op.opcode()) + ")";
  if (op.loc())
    where += " at " + op.loc()->str();
  return errorf(where, ": ", st.message());
}

void OpRunner::recordTime(unsigned oi,
                          std::chrono::steady_clock::time_point stepStart,
                          std::chrono::steady_clock::time_point opStart) {
  if (!in_.profiling_)
    return;
  auto now = std::chrono::steady_clock::now();
  OpTime t = opTimeOf(f_, int(oi));
  t.start = std::chrono::duration<double>(opStart - stepStart).count();
  t.seconds = std::chrono::duration<double>(now - opStart).count();
  in_.profile_.push_back(std::move(t));
}

Status OpRunner::runP2PGroup(unsigned first, unsigned end,
                             const std::function<Status(unsigned)> &start) {
  // Every send first (in plan order: the channel's order), then every
  // receive posted, then the receives' messages taken, then the sends'
  // completions: the group is issued at once, as NCCL issues it, so a
  // receive's message may come from a peer that waits for another receive
  // of the group first, and a group never waits for itself.
  std::vector<std::pair<Communicator::Channel, uint64_t>> posted;
  for (unsigned oi = first; oi < end; ++oi) {
    const plan::Op &op = *f_.ops()->Get(oi);
    if (op.opcode() == OpCode::SendStart) {
      BRAID_RETURN_IF_ERROR(start(oi));
    } else if (op.opcode() == OpCode::Send) {
      auto ticket =
          in_.comm_.postSend(channelOf(op), loadB(op.operands()->Get(0)).data);
      if (!ticket)
        return opError(oi, ticket.status());
      posted.push_back({channelOf(op), *ticket});
    }
  }
  std::vector<std::pair<unsigned, uint64_t>> receives;
  for (unsigned oi = first; oi < end; ++oi) {
    const plan::Op &op = *f_.ops()->Get(oi);
    if (op.opcode() == OpCode::RecvStart) {
      if (Status st = start(oi); !st)
        return opError(oi, st);
    } else if (op.opcode() == OpCode::Recv) {
      auto ticket = in_.comm_.postRecv(channelOf(op));
      if (!ticket)
        return opError(oi, ticket.status());
      receives.push_back({oi, *ticket});
    }
  }
  for (auto [oi, ticket] : receives) {
    const plan::Op &op = *f_.ops()->Get(oi);
    auto got = receive(op, ticket);
    Status st = got ? storeB(op.results()->Get(0), *got) : got.status();
    if (st && in_.options_.checkFinite)
      st = checkFinite({op.results()->Get(0)}, op);
    if (!st)
      return opError(oi, st);
  }
  for (const auto &[channel, ticket] : posted)
    BRAID_RETURN_IF_ERROR(in_.comm_.awaitTaken(channel, ticket));
  return Status::ok();
}

Status OpRunner::runOps() {
  if (!f_.ops())
    return Status::ok();
  in_.profile_.clear();
  auto stepStart = std::chrono::steady_clock::now();
  std::vector<int> groupEnds = p2pGroupEnds(f_);
  for (unsigned oi = 0; oi < f_.ops()->size(); ++oi) {
    const plan::Op &op = *f_.ops()->Get(oi);
    auto opStart = std::chrono::steady_clock::now();
    if (groupEnds[oi] >= 0) {
      // The whole group now; its members' times are the group's.
      unsigned end = unsigned(groupEnds[oi]);
      BRAID_RETURN_IF_ERROR(runP2PGroup(
          oi, end, [&](unsigned k) { return compute(*f_.ops()->Get(k)); }));
      for (; oi < end; ++oi)
        recordTime(oi, stepStart, opStart);
      --oi;
      continue;
    }
    Status st = compute(op);
    recordTime(oi, stepStart, opStart);
    if (st && in_.options_.checkFinite) {
      const plan::Op *source = &op;
      std::vector<int> written = writtenBy(op, source);
      st = checkFinite(written, *source);
    }
    if (!st)
      return opError(oi, st);
  }
  return Status::ok();
}

std::vector<int> OpRunner::writtenBy(const plan::Op &op,
                                     const plan::Op *&source) {
  if (op.opcode() == OpCode::Wait) {
    const Pending &p = pending_[size_t(op.handle())];
    if (p.payload < 0 || !p.start)
      return {};
    source = p.start;
    return {p.payload};
  }
  if (isAsyncStartOpcode(op.opcode()) || !op.results())
    return {}; // the payload is written at the wait
  return std::vector<int>(op.results()->begin(), op.results()->end());
}

std::string OpRunner::describeTensor(int t) const {
  const plan::Tensor &x = tensor(t);
  std::string s = "tensor " + std::to_string(t);
  switch (x.kind()) {
  case TensorKind::Parameter:
    return s + " (parameter '" +
           plan_.parameters()->Get(unsigned(x.ref()))->name()->str() + "')";
  case TensorKind::PackedParameter: {
    // The pieces by name: 'q_proj.weight' + 'k_proj.weight' + ...
    std::string names;
    for (int i : *plan_.parameter_packs()->Get(unsigned(x.ref()))->pieces())
      names += (names.empty() ? "'" : " + '") +
               plan_.parameters()->Get(unsigned(i))->name()->str() + "'";
    return s + " (parameter pack " + std::to_string(x.ref()) + ": " + names +
           ")";
  }
  case TensorKind::State:
    return s + " (state slot '" +
           plan_.state()->Get(unsigned(x.ref()))->name()->str() + "')";
  case TensorKind::Input:
    return s + " (input '" +
           f_.inputs()->Get(unsigned(x.ref()))->name()->str() + "')";
  default:
    return s;
  }
}

Status OpRunner::checkFinite(const std::vector<int> &written,
                             const plan::Op &source) {
  // The first non-finite element of float tensor t, or -1.
  auto firstBad = [&](int t, float &value) -> int64_t {
    if (!isFloatType(tensor(t).dtype()))
      return -1;
    FTensor x = loadF(t);
    for (size_t i = 0; i < x.data.size(); ++i)
      if (!std::isfinite(x.data[i])) {
        value = x.data[i];
        return int64_t(i);
      }
    return -1;
  };
  for (int t : written) {
    float value = 0;
    int64_t at = firstBad(t, value);
    if (at < 0)
      continue;
    std::ostringstream os;
    os << "result " << describeTensor(t) << " " << formatShape(shapeOf(t))
       << " x " << dtypeName(tensor(t).dtype()) << " holds " << value
       << " at element " << at << " (the first op whose output is not "
       << "finite)";
    std::string cause = "; every operand is finite, so this op produced it";
    if (source.operands())
      for (int u : *source.operands()) {
        float bad = 0;
        int64_t where = firstBad(u, bad);
        if (where >= 0) {
          std::ostringstream c;
          c << "; operand " << describeTensor(u) << " already holds " << bad
            << " at element " << where;
          cause = c.str();
          break;
        }
      }
    return errorf(os.str(), cause);
  }
  return Status::ok();
}

Status OpRunner::compute(const plan::Op &op) {
  auto operand = [&](unsigned i) { return op.operands()->Get(i); };
  auto result = [&](unsigned i) { return op.results()->Get(i); };
  switch (op.opcode()) {
  case OpCode::Matmul: {
    auto y = matmul(viewF(operand(0)), viewF(operand(1)), op.transpose_a(),
                    op.transpose_b(), in_.matmulThreads_);
    // The epilogue works on the f32 result before the one rounding: the
    // separate add and gelu ops' arithmetic, so bit for bit theirs in f32.
    if (y && op.matmul_bias())
      y = binary(BinaryKind::Add, *y, loadF(operand(2)));
    if (y && op.matmul_residual())
      y = binary(BinaryKind::Add, *y, loadF(operand(op.matmul_bias() ? 3 : 2)));
    if (y && op.matmul_gelu())
      y = gelu(*y, op.gelu_approximation() == plan::GeluApproximation::Tanh
                       ? GeluKind::Tanh
                       : GeluKind::Erf);
    return store(result(0), std::move(y));
  }
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
                 rope(loadF(operand(0)), loadI(operand(1)), ropeParamsOf(op)));
  case OpCode::Attention: {
    AttentionParams p = attentionParamsOf(op);
    if (op.operands()->size() == 3)
      return store(result(0), attention(loadF(operand(0)), loadF(operand(1)),
                                        loadF(operand(2)), p));
    // The caches stay in their storage: a step converts only the entries
    // it attends to and writes only the new ones (after copying the entry
    // cache when the updated one lives elsewhere).
    auto cache = [&](int entry, int updated) {
      return StoredCache{shapeOf(updated), tensor(updated).dtype(),
                         storage(entry), storage(updated)};
    };
    // The loader checked each updated cache's dtype against its cache's
    // (needSame), not its shape.
    for (auto [entry, updated] :
         {std::pair{operand(3), result(1)}, std::pair{operand(4), result(2)}})
      if (shapeOf(updated) != shapeOf(entry))
        return errorf("attention: updated cache tensor ", updated, " is ",
                      formatShape(shapeOf(updated)), "; its cache is ",
                      formatShape(shapeOf(entry)));
    return store(result(0),
                 attentionWithStoredCache(
                     loadF(operand(0)), loadF(operand(1)), loadF(operand(2)),
                     cache(operand(3), result(1)), cache(operand(4), result(2)),
                     loadI(operand(5)), p));
  }
  case OpCode::Silu:
    return storeF(result(0), silu(loadF(operand(0))));
  case OpCode::Swiglu:
    return store(result(0), swiglu(loadF(operand(0)), loadF(operand(1))));
  case OpCode::AddRmsNorm: {
    // The pair exactly: the sum is stored (rounded to its dtype), then the
    // norm reads it back.
    BRAID_RETURN_IF_ERROR(
        store(result(0),
              binary(BinaryKind::Add, loadF(operand(0)), loadF(operand(1)))));
    return store(result(1),
                 rmsNorm(loadF(result(0)), loadF(operand(2)), op.epsilon()));
  }
  case OpCode::Gelu:
    return storeF(result(0),
                  gelu(loadF(operand(0)),
                       op.gelu_approximation() == plan::GeluApproximation::Tanh
                           ? GeluKind::Tanh
                           : GeluKind::Erf));
  case OpCode::Activation:
    return storeF(result(0), activation(loadF(operand(0)), op.activation()));
  case OpCode::Embedding: {
    FView table = viewF(operand(1));
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
    if (p.sendTicket) {
      // A send completes when its receive has run (NCCL's rendezvous).
      uint64_t ticket = *p.sendTicket;
      p.sendTicket.reset();
      return in_.comm_.awaitTaken(channelOf(*p.start), ticket);
    }
    if (p.recvTicket) {
      uint64_t ticket = *p.recvTicket;
      p.recvTicket.reset();
      auto y = receive(*p.start, ticket);
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
      // Posted now (a send to it may complete meanwhile), received at the
      // wait.
      auto ticket = in_.comm_.postRecv(channelOf(op));
      if (!ticket)
        return ticket.status();
      p->recvTicket = *ticket;
      p->start = &op;
      p->payload = result(0);
      return Status::ok();
    }
    if (op.opcode() == OpCode::SendStart) {
      // Posted now, completed at the wait: the peer may take it meanwhile.
      auto ticket =
          in_.comm_.postSend(channelOf(op), loadB(op.operands()->Get(0)).data);
      if (!ticket)
        return ticket.status();
      p->start = &op;
      p->sendTicket = *ticket;
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
      p->start = &op;
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

Expected<ByteTensor> OpRunner::collective(const plan::Op &op,
                                          const ByteTensor *input) {
  GroupPosition g = groupPosition(plan_, op.group(), in_.rank_);
  Communicator &comm = in_.comm_;
  if (in_.testStuck_)
    return comm.stall();
  OpCode code = syncOpcode(op.opcode());
  if (code == OpCode::Send) {
    BRAID_RETURN_IF_ERROR(
        comm.send(channelOf(op),
                  input ? input->data : loadB(op.operands()->Get(0)).data));
    return ByteTensor{};
  }
  if (code == OpCode::Recv) {
    auto ticket = comm.postRecv(channelOf(op));
    if (!ticket)
      return ticket.status();
    return receive(op, *ticket);
  }
  int in = op.operands()->Get(0), out = op.results()->Get(0);
  ByteTensor mine = input ? *input : loadB(in);
  auto all =
      comm.exchange(g.instanceKey, int(op.stream()), g.size, g.rankInGroup,
                    {in_.rank_, collectiveSignature(f_, op), mine.data});
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

//===----------------------------------------------------------------------===//
// Strict mode
//===----------------------------------------------------------------------===//

namespace {
// All-ones bytes: a quiet NaN in f32, f16 and bf16 alike, -1 in integers.
constexpr uint8_t kPoison = 0xFF;
} // namespace

// One strict step of one rank. Streams are FIFO queues of their ops; each
// turn runs the head of a randomly chosen stream whose dependencies (the
// recorder of each waited event, a wait's start) have run. Async
// collectives run at their wait, as late as hardware may; arena bytes that
// a correct plan does not read at that moment hold the poison pattern.
class OpRunner::Strict {
public:
  Strict(OpRunner &r, std::mt19937_64 &rng)
      : r_(r), f_(r.f_), rng_(rng), numOps_(f_.ops() ? f_.ops()->size() : 0),
        executed_(numOps_, false), async_(size_t(f_.num_handles())) {}

  Status run();

private:
  // An async collective, by handle.
  struct Async {
    int start = -1; // op index of the *_start
    bool ran = false;
    ByteTensor input; // the operand as it was at the start
    std::optional<uint64_t> sendTicket; // issued send, until it completes
    std::optional<uint64_t> recvTicket; // receive posted at its start
  };
  struct Range {
    size_t begin, end;
  };

  const plan::Op &op(int oi) const { return *f_.ops()->Get(unsigned(oi)); }
  bool inArena(int t) const {
    TensorKind k = r_.tensor(t).kind();
    return k == TensorKind::Activation || k == TensorKind::Input;
  }
  Range range(int t) const {
    size_t b = size_t(r_.tensor(t).buffer_offset());
    return {b, b + r_.byteSize(t)};
  }
  void prepare();
  Status execute(int oi);
  Status start(int oi);
  /// Issues async collective `h`: runs it, or posts a send.
  Status issueAsync(int h);
  /// Issues `h` and completes it (a send: until its receive took it).
  Status runAsync(int h);
  /// Runs the started collectives NCCL runs before op `ci` (see the
  /// definition); `self`: ci's own handle when it is a start, else -1.
  Status runEarlier(int ci, int self);
  /// The sync sends and receives [oi, end) as one group (P2PGroups.h).
  Status executeGroup(int oi, int end);
  void written(int t);
  void read(int t);
  void poison(Range target, std::vector<Range> keep);
  std::string stuckMessage(const std::vector<size_t> &head) const;

  OpRunner &r_;
  const plan::Function &f_;
  std::mt19937_64 &rng_;
  unsigned numOps_;
  std::vector<std::vector<int>> deps_;   // per op: ops that must run first
  std::vector<std::vector<int>> queues_; // per stream: ops in plan order
  std::vector<bool> executed_;
  std::vector<int> groupEnds_;  // P2PGroups.h
  std::vector<int> groupHead_;  // per op: the head of its group, or -1
  std::vector<bool> ranInGroup_; // later members of a group already run
  std::vector<Async> async_;
  std::vector<int> pending_;   // started, not yet run handles, in start order
  std::vector<int> readsLeft_; // per arena tensor
  std::vector<bool> pinned_;   // read after the last op: never poisoned
  std::set<int> live_;         // arena tensors whose bytes hold a value
};

void OpRunner::Strict::prepare() {
  groupEnds_ = p2pGroupEnds(f_);
  groupHead_.assign(numOps_, -1);
  for (unsigned h = 0; h < numOps_; ++h)
    for (int k = int(h); k < groupEnds_[h]; ++k)
      groupHead_[size_t(k)] = int(h);
  ranInGroup_.assign(numOps_, false);
  size_t numTensors = f_.tensors() ? f_.tensors()->size() : 0;
  readsLeft_.assign(numTensors, 0);
  pinned_.assign(numTensors, false);
  if (f_.outputs())
    for (const plan::Binding *b : *f_.outputs())
      pinned_[size_t(b->tensor())] = true;
  if (f_.state())
    for (const plan::StateBinding *b : *f_.state())
      pinned_[size_t(b->output())] = true;

  queues_.assign(size_t(std::max(f_.num_streams(), 1)), {});
  deps_.assign(numOps_, {});
  std::vector<int> lastRecorder(size_t(f_.num_events()), -1);
  std::vector<int> startOf(async_.size(), -1);
  for (unsigned oi = 0; oi < numOps_; ++oi) {
    const plan::Op &o = op(int(oi));
    queues_[size_t(o.stream())].push_back(int(oi));
    // A wait refers to the latest record earlier in plan order.
    if (o.wait_events())
      for (int e : *o.wait_events())
        if (lastRecorder[size_t(e)] >= 0)
          deps_[oi].push_back(lastRecorder[size_t(e)]);
    if (o.record_events())
      for (int e : *o.record_events())
        lastRecorder[size_t(e)] = int(oi);
    if (o.opcode() == OpCode::Wait)
      deps_[oi].push_back(startOf[size_t(o.handle())]);
    else if (isAsyncStartOpcode(o.opcode()))
      startOf[size_t(o.handle())] = int(oi);
    // A start's operand is read by the collective, which a wait runs.
    if (o.operands())
      for (int t : *o.operands())
        if (inArena(t))
          ++readsLeft_[size_t(t)];
  }

  // Inputs hold the caller's values; an unread one is dead at once.
  for (size_t t = 0; t < numTensors; ++t)
    if (r_.tensor(int(t)).kind() == TensorKind::Input)
      written(int(t));
}

Status OpRunner::Strict::run() {
  prepare();
  auto stepStart = std::chrono::steady_clock::now();
  std::vector<size_t> head(queues_.size(), 0);
  std::vector<size_t> ready;
  for (unsigned n = 0; n < numOps_; ++n) {
    ready.clear();
    for (size_t s = 0; s < queues_.size(); ++s) {
      if (head[s] == queues_[s].size())
        continue;
      const std::vector<int> &deps = deps_[size_t(queues_[s][head[s]])];
      if (std::all_of(deps.begin(), deps.end(),
                      [&](int d) { return bool(executed_[size_t(d)]); }))
        ready.push_back(s);
    }
    // Plan order is a valid serialization, so a loaded plan never stalls.
    if (ready.empty())
      return errorf("rank ", r_.rank(), ": function '", f_.name()->str(),
                    "': strict mode: no stream can run (malformed plan): ",
                    stuckMessage(head));
    // `%` rather than a distribution: the same choices on every platform.
    size_t s = ready[size_t(rng_() % ready.size())];
    int oi = queues_[s][head[s]++];
    auto opStart = std::chrono::steady_clock::now();
    Status st = execute(oi);
    r_.recordTime(unsigned(oi), stepStart, opStart);
    if (!st)
      return r_.opError(unsigned(oi), st);
    executed_[size_t(oi)] = true;
  }
  return Status::ok();
}

std::string
OpRunner::Strict::stuckMessage(const std::vector<size_t> &head) const {
  std::string msg;
  for (size_t s = 0; s < queues_.size(); ++s) {
    if (head[s] == queues_[s].size())
      continue;
    int oi = queues_[s][head[s]];
    msg += (msg.empty() ? "" : "; ") + std::string("stream ") +
           std::to_string(s) + " waits at op " + std::to_string(oi) + " for op";
    for (int d : deps_[size_t(oi)])
      if (!executed_[size_t(d)])
        msg += " " + std::to_string(d);
  }
  return msg;
}

Status OpRunner::Strict::execute(int oi) {
  const plan::Op &o = op(oi);
  if (ranInGroup_[size_t(oi)])
    return Status::ok();
  if (groupEnds_[size_t(oi)] >= 0)
    return executeGroup(oi, groupEnds_[size_t(oi)]);
  if (o.opcode() == OpCode::Wait)
    return runAsync(o.handle());
  if (isAsyncStartOpcode(o.opcode()))
    return start(oi);
  if (isCollectiveOpcode(o.opcode()))
    BRAID_RETURN_IF_ERROR(runEarlier(oi, -1));
  BRAID_RETURN_IF_ERROR(r_.compute(o));
  // Checked before the bookkeeping below may poison a dead result.
  if (r_.in_.options_.checkFinite && o.results())
    BRAID_RETURN_IF_ERROR(r_.checkFinite(
        std::vector<int>(o.results()->begin(), o.results()->end()), o));
  // Results first: an operand that dies here may share their bytes.
  if (o.results())
    for (int t : *o.results())
      written(t);
  if (o.operands())
    for (int t : *o.operands())
      read(t);
  return Status::ok();
}

// The start only issues the collective: its payload is undefined until the
// collective writes it. The operand is remembered so that the collective,
// which may read it any time until the wait, sees a change as undefined.
Status OpRunner::Strict::start(int oi) {
  const plan::Op &o = op(oi);
  // A lone send or receive is posted (visible to its peer) when its channel
  // reaches it: after the channel's earlier ops (runEarlier).
  if ((o.opcode() == OpCode::RecvStart || o.opcode() == OpCode::SendStart) &&
      groupHead_[size_t(oi)] < 0)
    BRAID_RETURN_IF_ERROR(runEarlier(oi, -1));
  Async &a = async_[size_t(o.handle())];
  a.start = oi;
  if (o.opcode() == OpCode::RecvStart) {
    // Posted now, as NCCL issues it: a peer's send to it may complete
    // before this rank reaches the wait.
    auto ticket = r_.in_.comm_.postRecv(r_.channelOf(o));
    if (!ticket)
      return ticket.status();
    a.recvTicket = *ticket;
  }
  if (o.opcode() == OpCode::SendStart) {
    // Posted now with the operand as it is; issueAsync checks it has not
    // changed by then (hardware may read it any time until the wait).
    auto ticket = r_.in_.comm_.postSend(r_.channelOf(o),
                                        r_.loadB(o.operands()->Get(0)).data);
    if (!ticket)
      return ticket.status();
    a.sendTicket = *ticket;
  }
  std::vector<Range> operands;
  if (o.operands() && o.operands()->size() > 0) {
    int in = o.operands()->Get(0);
    a.input = r_.loadB(in);
    if (inArena(in))
      operands.push_back(range(in));
  }
  if (o.results() && o.results()->size() > 0) {
    int payload = o.results()->Get(0);
    if (inArena(payload)) {
      // An in-place collective's payload is its operand: keep those bytes.
      poison(range(payload), operands);
      live_.insert(payload);
    }
  }
  pending_.push_back(o.handle());
  return Status::ok();
}

// NCCL runs the collectives issued on one communicator and stream in issue
// order, so the earlier-started ones of `ci`'s group and stream run first.
// A receive first issues (posts) every send this rank has started, which
// the peer may be waiting for; those sends complete at their waits. The
// members of one point-to-point group (P2PGroups.h: adjacent sends and
// receives, issued between ncclGroupStart and ncclGroupEnd) progress
// together, so a send need not wait for an earlier receive of its own
// group, nor a receive for a send; outside a group they wait like any
// other op of the channel (a lone send blocks its stream until its receive
// is posted), so an exchange NCCL would deadlock on ends at the timeout.
Status OpRunner::Strict::runEarlier(int ci, int self) {
  const plan::Op &c = op(ci);
  OpCode code = syncOpcode(c.opcode());
  std::vector<int> pending = pending_; // runAsync edits pending_
  if (code == OpCode::Recv)
    for (int h : pending)
      if (h != self &&
          syncOpcode(op(async_[size_t(h)].start).opcode()) == OpCode::Send)
        BRAID_RETURN_IF_ERROR(issueAsync(h));
  for (int h : pending) {
    if (h == self)
      break;
    const int pi = async_[size_t(h)].start;
    const plan::Op &p = op(pi);
    if (p.group() != c.group() || p.stream() != c.stream())
      continue;
    OpCode pc = syncOpcode(p.opcode());
    const bool sameGroup = groupHead_[size_t(pi)] >= 0 &&
                           groupHead_[size_t(pi)] == groupHead_[size_t(ci)];
    if (sameGroup && ((code == OpCode::Send && pc == OpCode::Recv) ||
                      (code == OpCode::Recv && pc == OpCode::Send)))
      continue;
    BRAID_RETURN_IF_ERROR(runAsync(h));
  }
  return Status::ok();
}

Status OpRunner::Strict::executeGroup(int oi, int end) {
  BRAID_RETURN_IF_ERROR(runEarlier(oi, -1));
  BRAID_RETURN_IF_ERROR(r_.runP2PGroup(
      unsigned(oi), unsigned(end), [&](unsigned k) { return start(int(k)); }));
  for (int k = oi; k < end; ++k) {
    const plan::Op &m = op(k);
    if (k > oi)
      ranInGroup_[size_t(k)] = true;
    if (isAsyncStartOpcode(m.opcode()))
      continue; // start() kept its books
    if (m.results())
      for (int t : *m.results())
        written(t);
    if (m.operands())
      for (int t : *m.operands())
        read(t);
  }
  return Status::ok();
}

Status OpRunner::Strict::runAsync(int h) {
  BRAID_RETURN_IF_ERROR(issueAsync(h));
  Async &a = async_[size_t(h)];
  if (!a.sendTicket)
    return Status::ok();
  uint64_t ticket = *a.sendTicket;
  a.sendTicket.reset();
  return r_.in_.comm_.awaitTaken(r_.channelOf(op(a.start)), ticket);
}

Status OpRunner::Strict::issueAsync(int h) {
  Async &a = async_[size_t(h)];
  if (a.ran)
    return Status::ok();
  a.ran = true;
  const plan::Op &o = op(a.start);
  BRAID_RETURN_IF_ERROR(runEarlier(a.start, h)); // while h marks its place
  pending_.erase(std::find(pending_.begin(), pending_.end(), h));
  std::optional<ByteTensor> input;
  bool changed = false;
  if (o.operands() && o.operands()->size() > 0) {
    // Elements that changed since the start are undefined: hardware may
    // have read them at either time.
    input = r_.loadB(o.operands()->Get(0));
    size_t elem = std::max<size_t>(input->elemSize, 1);
    for (size_t i = 0; i + elem <= input->data.size(); i += elem)
      if (std::memcmp(&input->data[i], &a.input.data[i], elem) != 0) {
        std::memset(&input->data[i], kPoison, elem);
        changed = true;
      }
  }
  if (o.opcode() == OpCode::SendStart) {
    // Posted at its start; completed at its wait (runAsync). Bytes changed
    // since the start are undefined on hardware: an error here.
    if (changed)
      return errorf("send of op ", a.start,
                    ": its operand changed between the start and the wait "
                    "(the GPU may send either value)");
    if (o.operands())
      for (int t : *o.operands())
        read(t);
    return Status::ok();
  }
  auto y = a.recvTicket ? r_.receive(o, *a.recvTicket)
                        : r_.collective(o, input ? &*input : nullptr);
  if (!y)
    return errorf("collective of op ", a.start, " (", opcodeName(o.opcode()),
                  "): ", y.status().message());
  if (o.results() && o.results()->size() > 0) {
    int payload = o.results()->Get(0);
    BRAID_RETURN_IF_ERROR(r_.storeB(payload, *y));
    if (r_.in_.options_.checkFinite)
      BRAID_RETURN_IF_ERROR(r_.checkFinite({payload}, o));
    written(payload);
  }
  if (o.operands())
    for (int t : *o.operands())
      read(t);
  return Status::ok();
}

void OpRunner::Strict::written(int t) {
  if (!inArena(t))
    return;
  live_.insert(t);
  if (readsLeft_[size_t(t)] == 0)
    read(t); // never read: dead at once
}

// After the last read the buffer is dead: poison it, except where another
// live tensor (an in-place result, an output) holds its bytes now.
void OpRunner::Strict::read(int t) {
  if (!inArena(t))
    return;
  int &left = readsLeft_[size_t(t)];
  if (left > 0 && --left > 0)
    return;
  if (pinned_[size_t(t)] || !live_.count(t))
    return;
  live_.erase(t);
  std::vector<Range> keep;
  Range mine = range(t);
  for (int other : live_) {
    Range o = range(other);
    if (o.begin < mine.end && mine.begin < o.end)
      keep.push_back(o);
  }
  poison(mine, std::move(keep));
}

void OpRunner::Strict::poison(Range target, std::vector<Range> keep) {
  std::sort(keep.begin(), keep.end(),
            [](const Range &a, const Range &b) { return a.begin < b.begin; });
  size_t at = target.begin;
  for (const Range &k : keep) {
    if (k.end <= at || k.begin >= target.end)
      continue;
    if (k.begin > at)
      std::memset(r_.arena_ + at, kPoison, k.begin - at);
    at = std::max(at, k.end);
  }
  if (at < target.end)
    std::memset(r_.arena_ + at, kPoison, target.end - at);
}

Status OpRunner::runOpsStrict(std::mt19937_64 &rng) {
  in_.profile_.clear();
  return Strict(*this, rng).run();
}

// Plans may legally ask for more memory than the machine has; report that as
// an error instead of terminating on std::bad_alloc.
Expected<std::unique_ptr<Interpreter>>
Interpreter::create(LoadedPlan plan, int rank, Communicator &comm,
                    SyntheticWeights weights, bool syntheticWeights) {
  try {
    return createImpl(std::move(plan), rank, comm, weights, syntheticWeights);
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
                        SyntheticWeights weights, bool syntheticWeights) {
  const plan::Plan &root = plan.root();
  if (rank < 0 || rank >= root.world_size())
    return errorf("rank ", rank, " is outside world_size ", root.world_size());
  if (comm.worldSize() != root.world_size())
    return errorf("communicator has ", comm.worldSize(),
                  " ranks, the plan needs ", root.world_size());
  std::unique_ptr<Interpreter> in(new Interpreter(std::move(plan), rank, comm));
  const plan::Plan &p = in->plan_.root();
  // A pack holds its pieces: each is generated on its own, then moved in.
  in->packing_ = parameterPacking(p);
  for (const ParameterPacking::Pack &pack : in->packing_.packs)
    in->packs_.emplace_back(pack.dtype, pack.shape);
  if (p.parameters())
    for (unsigned i = 0; i < p.parameters()->size(); ++i) {
      const plan::Parameter &param = *p.parameters()->Get(i);
      const ParameterPacking::Place &place = in->packing_.places[i];
      if (!syntheticWeights) {
        // Unset until setParameter: no bytes (a pack's pieces live, zeroed,
        // in the pack), so that a checkpoint's values are the only copy.
        HostTensor unset;
        unset.dtype = param.dtype();
        unset.shape = parameterShapes(param).local;
        in->params_.push_back(std::move(unset));
        in->unset_.push_back(true);
        ++in->unsetCount_;
        continue;
      }
      in->unset_.push_back(false);
      auto value = initialParameterValue(p, param, rank, weights);
      if (!value)
        return value.status();
      HostTensor local = value.take();
      if (place.pack >= 0) {
        if (!local.bytes.empty())
          std::memcpy(in->packs_[size_t(place.pack)].bytes.data() +
                          place.offset,
                      local.bytes.data(), local.bytes.size());
        local.bytes = {};
      }
      in->params_.push_back(std::move(local));
    }
  in->resetState();
  return in;
}

void Interpreter::setRunOptions(const RunOptions &options) {
  options_ = options;
  // SplitMix64 of (seed, rank): every rank draws its own stream order.
  uint64_t z = options.strictSeed + 0x9e3779b97f4a7c15ull * uint64_t(rank_ + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  strictRng_.seed(z ^ (z >> 31));
}

void Interpreter::resetState() {
  state_.clear();
  const plan::Plan &p = plan_.root();
  if (p.state())
    for (const plan::StateSlot *s : *p.state())
      state_.emplace_back(s->dtype(),
                          Shape(s->shape()->begin(), s->shape()->end()));
}

uint8_t *Interpreter::parameterData(int index) {
  const ParameterPacking::Place &place = packing_.places[size_t(index)];
  if (place.pack < 0)
    return params_[size_t(index)].bytes.data();
  return packs_[size_t(place.pack)].bytes.data() + place.offset;
}

const uint8_t *Interpreter::parameterData(int index) const {
  return const_cast<Interpreter *>(this)->parameterData(index);
}

HostTensor Interpreter::parameter(int index) const {
  const HostTensor &p = params_[size_t(index)];
  if (packing_.places[size_t(index)].pack < 0)
    return p;
  HostTensor local(p.dtype, p.shape);
  if (!local.bytes.empty())
    std::memcpy(local.bytes.data(), parameterData(index), local.bytes.size());
  return local;
}

Status Interpreter::setParameter(std::string_view name, HostTensor local) {
  auto slot = parameterSlotFor(plan_.root(), name, local);
  if (!slot)
    return slot.status();
  size_t bytes = size_t(numElements(local.shape)) * dtypeSize(local.dtype);
  if (local.bytes.size() != bytes)
    return errorf("parameter '", name, "': ", local.bytes.size(),
                  " bytes for a ", formatShape(local.shape), " x ",
                  dtypeName(local.dtype), " tensor of ", bytes);
  if (packing_.places[*slot].pack < 0) {
    params_[*slot] = std::move(local);
  } else if (bytes) { // in place: the pack reads the new values
    std::memcpy(parameterData(int(*slot)), local.bytes.data(), bytes);
  }
  if (unset_[*slot]) {
    unset_[*slot] = false;
    --unsetCount_;
  }
  return Status::ok();
}

Expected<TensorMap> Interpreter::runImpl(std::string_view function,
                                         const TensorMap &inputs) {
  int fi = plan_.functionIndex(function);
  if (fi < 0)
    return errorf("plan has no function '", function, "'");
  if (unsetCount_ > 0) {
    size_t first =
        size_t(std::find(unset_.begin(), unset_.end(), true) - unset_.begin());
    return errorf(
        unsetCount_, " parameter(s) never set, the first '",
        plan_.root().parameters()->Get(unsigned(first))->name()->str(),
        "' (a runner without synthetic weights runs once every "
        "parameter is set)");
  }
  const plan::Function &f = *plan_.root().functions()->Get(unsigned(fi));
  std::vector<uint8_t> &arena = arenas_[fi];
  arena.resize(size_t(f.arena_size()));
  // Strict: nothing a step did not write is defined, not even last step's.
  if (options_.strict)
    std::fill(arena.begin(), arena.end(), kPoison);
  OpRunner runner(*this, f, arena.data());

  auto bound = bindInputs(f, inputs);
  if (!bound)
    return bound.status();
  for (const BoundInput &in : *bound)
    if (!in.value->bytes.empty())
      std::memcpy(runner.storage(in.tensor), in.value->bytes.data(),
                  in.value->bytes.size());

  BRAID_RETURN_IF_ERROR(options_.strict ? runner.runOpsStrict(strictRng_)
                                        : runner.runOps());

  // The outputs are read before the state copy-back: an output that is a
  // state slot's storage holds the function's value of it (the entry value,
  // or one computed in place), which the copy-back may replace.
  TensorMap outputs;
  if (f.outputs())
    for (const plan::Binding *b : *f.outputs()) {
      int t = b->tensor();
      HostTensor h(runner.tensor(t).dtype(), runner.shapeOf(t));
      if (!h.bytes.empty())
        std::memcpy(h.bytes.data(), runner.storage(t), h.bytes.size());
      outputs[b->name()->str()] = std::move(h);
    }
  // Every slot is assigned at once: slots may come back permuted (slot 0 <-
  // slot 1's tensor and slot 1 <- slot 0's), so a source that is another
  // slot's storage is copied aside before any slot is written. Other
  // sources (arena tensors) cannot be overwritten by a slot write.
  if (f.state()) {
    std::vector<std::vector<uint8_t>> saved(f.state()->size());
    for (unsigned i = 0; i < f.state()->size(); ++i) {
      const plan::StateBinding *b = f.state()->Get(i);
      uint8_t *src = runner.storage(b->output());
      if (runner.tensor(b->output()).kind() == TensorKind::State &&
          src != state_[size_t(b->slot())].bytes.data())
        saved[i].assign(src, src + runner.byteSize(b->output()));
    }
    for (unsigned i = 0; i < f.state()->size(); ++i) {
      const plan::StateBinding *b = f.state()->Get(i);
      HostTensor &slot = state_[size_t(b->slot())];
      const uint8_t *src =
          saved[i].empty() ? runner.storage(b->output()) : saved[i].data();
      if (src != slot.bytes.data() && !slot.bytes.empty())
        std::memmove(slot.bytes.data(), src, slot.bytes.size());
    }
  }
  return outputs;
}

Expected<RankBytes> braid::rt::hostBytesPerRank(const plan::Plan &p) {
  // Each size is bounded by the loader; their sums are checked all the
  // same (a plan may list millions of parameters).
  auto bytesOf = [](auto shape, DType dtype) -> std::optional<int64_t> {
    Shape s = shape ? Shape(shape->begin(), shape->end()) : Shape{};
    std::optional<int64_t> n = braid::checkedProduct(s);
    return n ? braid::checkedMul(*n, int64_t(dtypeSize(dtype))) : n;
  };
  RankBytes r;
  std::vector<int64_t> params, state, arenas;
  if (p.parameters())
    for (const plan::Parameter *param : *p.parameters()) {
      auto b = bytesOf(param->local_shape(), param->dtype());
      if (!b)
        return errorf("parameter '", param->name()->str(),
                      "' has more bytes than int64 holds");
      params.push_back(*b);
    }
  if (p.state())
    for (const plan::StateSlot *slot : *p.state()) {
      auto b = bytesOf(slot->shape(), slot->dtype());
      if (!b)
        return errorf("state slot '", slot->name()->str(),
                      "' has more bytes than int64 holds");
      state.push_back(*b);
    }
  if (p.functions())
    for (const plan::Function *f : *p.functions())
      arenas.push_back(f->arena_size());
  auto sp = braid::checkedSum(params), ss = braid::checkedSum(state),
       sa = braid::checkedSum(arenas);
  std::optional<int64_t> total =
      sp && ss && sa
          ? braid::checkedSum(std::initializer_list<int64_t>{*sp, *ss, *sa})
          : std::nullopt;
  if (!total)
    return errorf("one rank's parameters, state and arenas add up to more "
                  "bytes than int64 holds");
  r.parameters = *sp;
  r.state = *ss;
  r.arenas = *sa;
  r.total = *total;
  return r;
}

MemoryLimit braid::rt::hostMemoryLimit() {
  MemoryLimit m;
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && pageSize > 0) {
    std::optional<int64_t> phys =
        braid::checkedMul(int64_t(pages), int64_t(pageSize));
    m.bytes = phys ? *phys : std::numeric_limits<int64_t>::max();
    m.source = "physical memory";
  }
  auto consider = [&](uint64_t bytes, const char *source) {
    if (bytes == 0 || bytes >= uint64_t(std::numeric_limits<int64_t>::max()))
      return;
    if (m.bytes == 0 || int64_t(bytes) < m.bytes) {
      m.bytes = int64_t(bytes);
      m.source = source;
    }
  };
  for (auto [resource, name] :
       {std::pair<int, const char *>{RLIMIT_AS, "ulimit -v (RLIMIT_AS)"},
        {RLIMIT_DATA, "ulimit -d (RLIMIT_DATA)"}}) {
    struct rlimit lim;
    if (::getrlimit(resource, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
      consider(uint64_t(lim.rlim_cur), name);
  }
  // A container's memory limit (cgroup v2, then v1): "max" or a number.
  for (const char *path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    uint64_t bytes = 0;
    if (in >> bytes)
      consider(bytes, "the cgroup memory limit");
  }
  if (m.bytes == 0) {
    m.bytes = std::numeric_limits<int64_t>::max();
    m.source = "no known limit";
  }
  return m;
}

Status braid::rt::checkHostResources(const plan::Plan &plan,
                                     const RunnerOptions &options) {
  int world = plan.world_size();
  if (world > options.maxRanks)
    return errorf("the plan has world_size ", world,
                  "; the CPU interpreter runs every rank as a thread of "
                  "this process, at most ",
                  options.maxRanks, " (is world_size corrupted?)");
  auto perRank = hostBytesPerRank(plan);
  if (!perRank)
    return perRank.status();
  MemoryLimit limit = hostMemoryLimit();
  if (options.memoryLimitBytes > 0)
    limit = {options.memoryLimitBytes, "the configured limit"};
  std::optional<int64_t> total = braid::checkedMul(perRank->total, world);
  if (!total || *total > limit.bytes)
    return errorf(
        "the plan needs ", perRank->total, " bytes per rank (parameters ",
        perRank->parameters, ", state ", perRank->state, ", arenas ",
        perRank->arenas, ") x ", world, " ranks = ",
        total ? std::to_string(*total) : std::string("more than int64 holds"),
        " bytes of host memory, more than the ", limit.bytes, " bytes of ",
        limit.source);
  return Status::ok();
}

Expected<std::unique_ptr<ThreadedRunner>>
ThreadedRunner::create(LoadedPlan plan, uint64_t seed) {
  RunnerOptions options;
  options.weights.seed = seed;
  return create(std::move(plan), options);
}

Expected<std::unique_ptr<ThreadedRunner>>
ThreadedRunner::create(LoadedPlan plan, const RunnerOptions &options) {
  BRAID_RETURN_IF_ERROR(checkHostResources(plan.root(), options));
  std::unique_ptr<ThreadedRunner> r(new ThreadedRunner());
  r->plan_ = plan;
  r->checkCommunication_ = options.checkCommunication;
  int world = plan.root().world_size();
  r->comm_ = std::make_unique<Communicator>(world, options.collectiveTimeout);
  for (int i = 0; i < world; ++i) {
    auto in = Interpreter::create(plan, i, *r->comm_, options.weights,
                                  options.syntheticWeights);
    if (!in)
      return in.status();
    (*in)->setTestStuck(i == options.testStuckRank);
    // Cores the rank threads leave idle (tp 1 on two cores: one).
    (*in)->setMatmulThreads(int(
        std::max(1u, std::thread::hardware_concurrency()) / unsigned(world)));
    r->ranks_.push_back(in.take());
  }
  return r;
}

void ThreadedRunner::setRunOptions(const RunOptions &options) {
  for (auto &r : ranks_)
    r->setRunOptions(options);
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
  // A send without its receive would end at the collective timeout; with
  // the whole assignment known it is an error now.
  if (checkCommunication_)
    BRAID_RETURN_IF_ERROR(matching_.check(plan_, functions));
  std::vector<std::optional<Expected<TensorMap>>> results(world);
  BRAID_RETURN_IF_ERROR(runOnThreads(
      world,
      [&](size_t r) {
        results[r] =
            ranks_[r]->run(functions[r], inputs[inputs.size() == 1 ? 0 : r]);
        if (!results[r]->hasValue())
          comm_->abort(); // release ranks blocked in collectives
      },
      "the rank threads"));
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
