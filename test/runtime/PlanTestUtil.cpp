//===- PlanTestUtil.cpp - Build small plans in tests ----------------------===//
#include "test/runtime/PlanTestUtil.h"

#include <cmath>

namespace braid::rt::test {

int FnBuilder::tensor(Shape shape, DType dtype, TensorKind kind, int ref) {
  auto t = std::make_unique<plan::TensorT>();
  t->id = int(fn_.tensors.size());
  t->dtype = dtype;
  t->kind = kind;
  t->ref = ref;
  int64_t bytes = numElements(shape) * int64_t(dtypeSize(dtype));
  t->shape = std::move(shape);
  if (kind == TensorKind::Activation || kind == TensorKind::Input) {
    t->buffer_offset = fn_.arena_size;
    t->buffer_size = bytes;
    fn_.arena_size += (bytes + 63) / 64 * 64; // 64-byte aligned bump
  }
  fn_.tensors.push_back(std::move(t));
  return int(fn_.tensors.size()) - 1;
}

int FnBuilder::input(const std::string &name, Shape shape, DType dtype) {
  int t = tensor(std::move(shape), dtype, TensorKind::Input,
                 int(fn_.inputs.size()));
  auto b = std::make_unique<plan::BindingT>();
  b->name = name;
  b->tensor = t;
  fn_.inputs.push_back(std::move(b));
  return t;
}

int FnBuilder::param(int index, const plan::PlanT &plan) {
  const plan::ParameterT &p = *plan.parameters[size_t(index)];
  return tensor(p.local_shape, p.dtype, TensorKind::Parameter, index);
}

int FnBuilder::packedParam(int index, const plan::PlanT &plan) {
  const plan::ParameterPackT &pack = *plan.parameter_packs[size_t(index)];
  const plan::ParameterT &first = *plan.parameters[size_t(pack.pieces[0])];
  Shape shape = first.local_shape;
  for (size_t j = 1; j < pack.pieces.size(); ++j)
    shape[0] += plan.parameters[size_t(pack.pieces[j])]->local_shape[0];
  return tensor(std::move(shape), first.dtype, TensorKind::PackedParameter,
                index);
}

int FnBuilder::state(int slot, const plan::PlanT &plan) {
  const plan::StateSlotT &s = *plan.state[size_t(slot)];
  return tensor(s.shape, s.dtype, TensorKind::State, slot);
}

void FnBuilder::output(const std::string &name, int tensor) {
  auto b = std::make_unique<plan::BindingT>();
  b->name = name;
  b->tensor = tensor;
  fn_.outputs.push_back(std::move(b));
}

plan::OpT &FnBuilder::op(OpCode code, std::vector<int> operands,
                         std::vector<int> results) {
  auto o = std::make_unique<plan::OpT>();
  o->opcode = code;
  o->operands = std::move(operands);
  o->results = std::move(results);
  fn_.ops.push_back(std::move(o));
  return *fn_.ops.back();
}

PlanBuilder::PlanBuilder(int worldSize) { plan_.world_size = worldSize; }

int PlanBuilder::group(const std::string &name, int size, int stride) {
  auto g = std::make_unique<plan::DeviceGroupT>();
  g->name = name;
  g->size = size;
  g->stride = stride;
  plan_.groups.push_back(std::move(g));
  return int(plan_.groups.size()) - 1;
}

int PlanBuilder::param(const std::string &name, Shape full, Shape local,
                       DType dtype, int shardDim, int group, int shards,
                       int blocks) {
  auto p = std::make_unique<plan::ParameterT>();
  p->name = name;
  p->full_shape = std::move(full);
  p->local_shape = std::move(local);
  p->dtype = dtype;
  if (shardDim >= 0) {
    p->shard = std::make_unique<plan::ShardRuleT>();
    p->shard->dim = shardDim;
    p->shard->group = group;
    p->shard->shards = shards;
    p->shard->blocks = blocks;
  }
  plan_.parameters.push_back(std::move(p));
  return int(plan_.parameters.size()) - 1;
}

int PlanBuilder::stateSlot(const std::string &name, Shape shape, DType dtype) {
  auto s = std::make_unique<plan::StateSlotT>();
  s->name = name;
  s->shape = std::move(shape);
  s->dtype = dtype;
  plan_.state.push_back(std::move(s));
  return int(plan_.state.size()) - 1;
}

int PlanBuilder::pack(std::vector<int> pieces) {
  auto p = std::make_unique<plan::ParameterPackT>();
  p->pieces = std::move(pieces);
  plan_.parameter_packs.push_back(std::move(p));
  return int(plan_.parameter_packs.size()) - 1;
}

FnBuilder PlanBuilder::function(const std::string &name) {
  auto f = std::make_unique<plan::FunctionT>();
  f->name = name;
  plan_.functions.push_back(std::move(f));
  return FnBuilder(*plan_.functions.back());
}

std::vector<uint8_t> PlanBuilder::finish() const {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(plan::Plan::Pack(fbb, &plan_), plan::PlanIdentifier());
  return std::vector<uint8_t>(fbb.GetBufferPointer(),
                              fbb.GetBufferPointer() + fbb.GetSize());
}

PlanBuilder sendRecvStages(int64_t n, int recvStream) {
  PlanBuilder pb(2);
  pb.group("pp", 2);
  FnBuilder s0 = pb.function("stage0");
  int x = s0.input("x", {n});
  plan::OpT &send = s0.op(plan::OpCode::Send, {x}, {});
  send.group = 0;
  send.peer = 1;
  FnBuilder s1 = pb.function("stage1");
  s1.input("x", {n});
  int y = s1.tensor({n});
  s1.fn().num_streams = recvStream + 1;
  plan::OpT &recv = s1.op(plan::OpCode::Recv, {}, {y});
  recv.group = 0;
  recv.peer = 0;
  recv.stream = recvStream;
  s1.output("y", y);
  return pb;
}

PlanBuilder exchangeStages(bool recvFirst, bool opBetween, bool async) {
  PlanBuilder pb(2);
  pb.group("pp", 2);
  for (int r = 0; r < 2; ++r) {
    FnBuilder f = pb.function("stage" + std::to_string(r));
    if (async)
      f.fn().num_handles = 2;
    int x = f.input("x", {2});
    int y = f.tensor({2}), z = f.tensor({2});
    for (int k = 0; k < 2; ++k) {
      if (k == 1 && opBetween)
        f.op(plan::OpCode::Add, {x, x}, {z});
      bool recv = (k == 0) == recvFirst;
      plan::OpCode code =
          recv ? (async ? plan::OpCode::RecvStart : plan::OpCode::Recv)
               : (async ? plan::OpCode::SendStart : plan::OpCode::Send);
      plan::OpT &o = recv ? f.op(code, {}, {y}) : f.op(code, {x}, {});
      o.group = 0;
      o.peer = 1 - r;
      if (async)
        o.handle = k;
    }
    if (async) { // the second started first
      f.op(plan::OpCode::Wait, {}, {}).handle = 1;
      f.op(plan::OpCode::Wait, {}, {}).handle = 0;
    }
    f.output("y", y);
  }
  return pb;
}

PlanBuilder groupReceivesStages(int64_t n) {
  PlanBuilder pb(3);
  pb.group("pp", 3);
  auto p2p = [](FnBuilder &f, plan::OpCode code, std::vector<int> in,
                std::vector<int> out, int peer) {
    plan::OpT &o = f.op(code, std::move(in), std::move(out));
    o.group = 0;
    o.peer = peer;
  };
  {
    FnBuilder f = pb.function("stage0");
    f.input("x", {n});
    int a = f.tensor({n}), b = f.tensor({n});
    p2p(f, plan::OpCode::Recv, {}, {a}, 2);
    p2p(f, plan::OpCode::Recv, {}, {b}, 1);
    f.output("a", a);
    f.output("b", b);
  }
  {
    FnBuilder f = pb.function("stage1");
    int x = f.input("x", {n});
    int t = f.tensor({n});
    p2p(f, plan::OpCode::Send, {x}, {}, 0);
    f.op(plan::OpCode::Add, {x, x}, {t});
    p2p(f, plan::OpCode::Send, {x}, {}, 2);
    f.output("t", t);
  }
  {
    FnBuilder f = pb.function("stage2");
    int x = f.input("x", {n});
    int r = f.tensor({n}), t = f.tensor({n});
    p2p(f, plan::OpCode::Recv, {}, {r}, 1);
    f.op(plan::OpCode::Add, {x, x}, {t});
    p2p(f, plan::OpCode::Send, {x}, {}, 0);
    f.output("r", r);
    f.output("t", t);
  }
  return pb;
}

PlanBuilder packedProjectionPlan(int tp) {
  PlanBuilder pb(tp);
  pb.group("tp", tp);
  int q = pb.param("q_proj.weight", {6, 8}, {6 / tp, 8}, DType::F32, 0, 0);
  int k = pb.param("k_proj.weight", {4, 8}, {4 / tp, 8}, DType::F32, 0, 0);
  int qk = pb.pack({q, k});
  FnBuilder f = pb.function("prefill");
  int x = f.input("x", {2, 3, 8});
  int p = f.packedParam(qk, pb.plan());
  int y = f.tensor({2, 3, 10 / tp}), yq = f.tensor({2, 3, 6 / tp}),
      yk = f.tensor({2, 3, 4 / tp});
  f.op(OpCode::Matmul, {x, p}, {y}).transpose_b = true;
  f.op(OpCode::Matmul, {x, f.param(q, pb.plan())}, {yq}).transpose_b = true;
  f.op(OpCode::Matmul, {x, f.param(k, pb.plan())}, {yk}).transpose_b = true;
  f.output("y", y);
  f.output("yq", yq);
  f.output("yk", yk);
  return pb;
}

PlanBuilder megatronMlpPlan(int tp, int64_t hidden, int64_t inter,
                            int64_t batch, int64_t tokens, DType dtype) {
  PlanBuilder pb(tp);
  pb.group("tp", tp);
  int norm = pb.param("model.norm.weight", {hidden}, {hidden}, dtype);
  int up = pb.param("mlp.up_proj.weight", {inter, hidden},
                    {inter / tp, hidden}, dtype, 0, 0);
  int down = pb.param("mlp.down_proj.weight", {hidden, inter},
                      {hidden, inter / tp}, dtype, 1, 0);
  FnBuilder f = pb.function("prefill");
  Shape act{batch, tokens, hidden}, mid{batch, tokens, inter / tp};
  int x = f.input("x", act, dtype);
  int n = f.tensor(act, dtype), h = f.tensor(mid, dtype);
  int a = f.tensor(mid, dtype), p = f.tensor(act, dtype);
  int y = f.tensor(act, dtype);
  f.op(OpCode::RmsNorm, {x, f.param(norm, pb.plan())}, {n}).epsilon = 1e-6;
  f.op(OpCode::Matmul, {n, f.param(up, pb.plan())}, {h}).transpose_b = true;
  f.op(OpCode::Gelu, {h}, {a}).gelu_approximation =
      plan::GeluApproximation::Tanh;
  f.op(OpCode::Matmul, {a, f.param(down, pb.plan())}, {p}).transpose_b = true;
  f.op(OpCode::AllReduce, {p}, {y}).group = 0;
  f.output("y", y);
  return pb;
}

PlanBuilder gpt2MlpPlan(DType dt, bool tanhGelu) {
  PlanBuilder pb;
  int w1 = pb.param("h.0.mlp.c_fc.weight", {64, 128}, {64, 128}, dt);
  int b1 = pb.param("h.0.mlp.c_fc.bias", {128}, {128}, dt);
  int w2 = pb.param("h.0.mlp.c_proj.weight", {128, 64}, {128, 64}, dt);
  int b2 = pb.param("h.0.mlp.c_proj.bias", {64}, {64}, dt);
  FnBuilder f = pb.function("prefill");
  int x = f.input("x", {2, 8, 64}, dt);
  int g = f.tensor({2, 8, 128}, dt), y = f.tensor({2, 8, 64}, dt);
  plan::OpT &up = f.op(
      OpCode::Matmul, {x, f.param(w1, pb.plan()), f.param(b1, pb.plan())}, {g});
  up.matmul_bias = true;
  up.matmul_gelu = true;
  up.gelu_approximation =
      tanhGelu ? plan::GeluApproximation::Tanh : plan::GeluApproximation::None;
  f.op(OpCode::Matmul, {g, f.param(w2, pb.plan()), f.param(b2, pb.plan())}, {y})
      .matmul_bias = true;
  f.output("y", y);
  return pb;
}

std::vector<float> wave(int64_t n, float phase) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(std::sin(0.37f * float(i) + phase) * 2.0f);
  return v;
}

PlanBuilder previousValuePlan(int64_t n) {
  PlanBuilder pb(1);
  int slot = pb.stateSlot("prev", {n});
  FnBuilder f = pb.function("step");
  int x = f.input("x", {n});
  int prev = f.state(slot, pb.plan());
  int y = f.tensor({n});
  f.op(OpCode::Silu, {x}, {y});
  f.output("prev", prev);
  auto bind = std::make_unique<plan::StateBindingT>();
  bind->slot = slot;
  bind->input = prev;
  bind->output = y;
  f.fn().state.push_back(std::move(bind));
  return pb;
}

PlanBuilder shardedOutputPlan() {
  PlanBuilder pb(4);
  pb.group("dp", 2);
  pb.group("tp", 2, 2);
  FnBuilder f = pb.function("decode");
  int x = f.input("x", {2, 3});
  int y = f.tensor({2, 3});
  f.op(OpCode::Reshape, {x}, {y});
  f.output("logits", y);
  plan::BindingT &b = *f.fn().outputs.back();
  b.shard_group = 1;
  b.shard_dim = 1;
  b.full_size = 5;
  return pb;
}

} // namespace braid::rt::test
