//===- PlanText.cpp - Readable dump of a plan -----------------------------===//
#include "runtime/PlanText.h"
#include "runtime/HostTensor.h"
#include "runtime/PlanLoader.h"

#include <sstream>

using namespace braid::rt;
using braid::plan::OpCode;
using braid::plan::TensorKind;

namespace {

template <typename Vec> void printList(std::ostream &os, const Vec *v) {
  os << "[";
  if (v)
    for (unsigned i = 0; i < v->size(); ++i)
      os << (i ? ", " : "") << v->Get(i);
  os << "]";
}

void printShape(std::ostream &os, const flatbuffers::Vector<int64_t> *shape) {
  if (!shape || shape->size() == 0) {
    os << "scalar";
    return;
  }
  for (unsigned i = 0; i < shape->size(); ++i)
    os << (i ? "x" : "") << shape->Get(i);
}

const char *kindName(TensorKind kind) {
  switch (kind) {
  case TensorKind::Activation:
    return "activation";
  case TensorKind::Parameter:
    return "param";
  case TensorKind::Input:
    return "input";
  case TensorKind::State:
    return "state";
  case TensorKind::PackedParameter:
    return "pack";
  }
  return "?";
}

/// The attributes `op`'s opcode reads, as ` {a = 1, b = 2}` (or nothing).
void printAttributes(std::ostream &os, const braid::plan::Op &op) {
  std::ostringstream a;
  auto add = [&](const char *name) -> std::ostream & {
    a << (a.tellp() > 0 ? ", " : "") << name << " = ";
    return a;
  };
  switch (syncOpcode(op.opcode())) {
  case OpCode::Matmul:
    if (op.transpose_a())
      add("transpose_a") << "true";
    if (op.transpose_b())
      add("transpose_b") << "true";
    if (op.matmul_bias())
      add("bias") << "true"; // the operand after a and b
    if (op.matmul_residual())
      add("residual") << "true"; // the last operand
    if (op.matmul_gelu())
      add("gelu") << (op.gelu_approximation() ==
                              braid::plan::GeluApproximation::Tanh
                          ? "tanh"
                          : "none");
    break;
  case OpCode::RmsNorm:
  case OpCode::LayerNorm:
  case OpCode::AddRmsNorm:
    add("epsilon") << op.epsilon();
    break;
  case OpCode::Rope:
    add("theta") << op.theta();
    if (op.rope_inv_freq() && op.rope_inv_freq()->size() > 0) {
      // The scaled frequencies, first and last (the table can be long).
      const auto *inv = op.rope_inv_freq();
      add("inv_freq") << "[" << inv->Get(0) << " .. "
                      << inv->Get(inv->size() - 1) << "] x" << inv->size();
    }
    if (op.rope_attention_factor() != 1.0)
      add("attention_factor") << op.rope_attention_factor();
    if (op.rope_rotary_dim() != 0)
      add("rotary_dim") << op.rope_rotary_dim();
    break;
  case OpCode::Attention:
    if (op.causal())
      add("causal") << "true";
    add("num_heads") << op.num_heads();
    add("num_kv_heads") << op.num_kv_heads();
    add("head_dim") << op.head_dim();
    if (op.scale() != 0.0)
      add("scale") << op.scale();
    if (op.sliding_window() != 0)
      add("sliding_window") << op.sliding_window();
    break;
  case OpCode::Gelu:
    add("approximation")
        << (op.gelu_approximation() == braid::plan::GeluApproximation::Tanh
                ? "tanh"
                : "none");
    break;
  case OpCode::Activation:
    add("kind") << activationKindName(op.activation());
    break;
  case OpCode::Embedding:
    if (op.vocab_group() >= 0)
      add("vocab_group") << op.vocab_group();
    break;
  case OpCode::Softmax:
  case OpCode::Concat:
    add("dim") << op.dim();
    break;
  case OpCode::Slice:
    printList(add("offsets"), op.offsets());
    printList(add("sizes"), op.sizes());
    break;
  case OpCode::AllReduce:
    add("reduce") << reduceName(op.reduce_kind());
    break;
  case OpCode::AllGather:
    add("dim") << op.dim();
    break;
  case OpCode::ReduceScatter:
    add("reduce") << reduceName(op.reduce_kind());
    add("dim") << op.dim();
    break;
  case OpCode::AllToAll:
    add("split_dim") << op.split_dim();
    add("concat_dim") << op.concat_dim();
    break;
  case OpCode::Broadcast:
    add("root") << op.root();
    break;
  case OpCode::Send:
  case OpCode::Recv:
    add("peer") << op.peer();
    break;
  default:
    break;
  }
  if (op.group() >= 0)
    add("group") << op.group();
  if (op.handle() >= 0)
    add("handle") << op.handle();
  if (op.stream() != 0)
    add("stream") << op.stream();
  if (op.wait_events() && op.wait_events()->size())
    printList(add("wait_events"), op.wait_events());
  if (op.record_events() && op.record_events()->size())
    printList(add("record_events"), op.record_events());
  if (a.tellp() > 0)
    os << " {" << a.str() << "}";
}

void printIds(std::ostream &os, const flatbuffers::Vector<int32_t> *ids) {
  if (!ids)
    return;
  for (unsigned i = 0; i < ids->size(); ++i)
    os << (i ? ", %" : "%") << ids->Get(i);
}

} // namespace

void braid::rt::printPlan(std::ostream &os, const plan::Plan &p) {
  os << "plan version " << p.version() << " world " << p.world_size() << "\n";
  if (p.groups())
    for (unsigned i = 0; i < p.groups()->size(); ++i) {
      const plan::DeviceGroup *g = p.groups()->Get(i);
      os << "group " << i << " @" << g->name()->str() << " size " << g->size()
         << " stride " << g->stride() << "\n";
    }
  if (p.parameters())
    for (unsigned i = 0; i < p.parameters()->size(); ++i) {
      const plan::Parameter *q = p.parameters()->Get(i);
      os << "param " << i << " \"" << q->name()->str() << "\" "
         << dtypeName(q->dtype()) << " ";
      printShape(os, q->local_shape());
      os << " full ";
      printShape(os, q->full_shape());
      if (q->padded_shape() && q->padded_shape()->size()) {
        os << " padded ";
        printShape(os, q->padded_shape());
      }
      if (const plan::ShardRule *s = q->shard())
        os << " shard dim " << s->dim() << " group " << s->group()
           << " shards " << s->shards() << " blocks " << s->blocks();
      os << "\n";
    }
  if (p.parameter_packs()) {
    // "pack 0 f32 12x4 = param 1 + param 2": the pieces stacked on dim 0.
    ParameterPacking packing = parameterPacking(p);
    for (unsigned i = 0; i < p.parameter_packs()->size(); ++i) {
      const ParameterPacking::Pack &pack = packing.packs[i];
      os << "pack " << i << " " << dtypeName(pack.dtype) << " ";
      for (size_t d = 0; d < pack.shape.size(); ++d)
        os << (d ? "x" : "") << pack.shape[d];
      const auto *pieces = p.parameter_packs()->Get(i)->pieces();
      for (unsigned j = 0; j < pieces->size(); ++j)
        os << (j ? " + " : " = ") << "param " << pieces->Get(j);
      os << "\n";
    }
  }
  if (p.state())
    for (unsigned i = 0; i < p.state()->size(); ++i) {
      const plan::StateSlot *s = p.state()->Get(i);
      os << "state " << i << " \"" << s->name()->str() << "\" "
         << dtypeName(s->dtype()) << " ";
      printShape(os, s->shape());
      os << "\n";
    }
  if (!p.functions())
    return;
  for (const plan::Function *f : *p.functions()) {
    os << "func \"" << f->name()->str() << "\" arena " << f->arena_size()
       << " streams " << f->num_streams() << " events " << f->num_events()
       << " handles " << f->num_handles() << "\n";
    if (f->tensors())
      for (const plan::Tensor *t : *f->tensors()) {
        os << "  %" << t->id() << " " << kindName(t->kind());
        if (t->ref() >= 0)
          os << " " << t->ref();
        os << " " << dtypeName(t->dtype()) << " ";
        printShape(os, t->shape());
        if (t->buffer_offset() >= 0)
          os << " at " << t->buffer_offset() << " +" << t->buffer_size();
        os << "\n";
      }
    if (f->inputs())
      for (const plan::Binding *b : *f->inputs())
        os << "  input \"" << b->name()->str() << "\" %" << b->tensor()
           << "\n";
    if (f->ops())
      for (const plan::Op *op : *f->ops()) {
        os << "  ";
        if (op->results() && op->results()->size()) {
          printIds(os, op->results());
          os << " = ";
        }
        const char *name = opcodeName(op->opcode());
        os << (name ? name : "?");
        if (op->operands() && op->operands()->size()) {
          os << " ";
          printIds(os, op->operands());
        }
        printAttributes(os, *op);
        os << "\n";
      }
    if (f->outputs())
      for (const plan::Binding *b : *f->outputs()) {
        os << "  output \"" << b->name()->str() << "\" %" << b->tensor();
        if (b->shard_group() != -1)
          os << " sharded over group " << b->shard_group() << " dim "
             << b->shard_dim() << " size " << b->full_size();
        os << "\n";
      }
    if (f->state())
      for (const plan::StateBinding *b : *f->state())
        os << "  state " << b->slot() << " %" << b->input() << " -> %"
           << b->output() << (b->input() == b->output() ? " (unchanged)" : "")
           << "\n";
  }
}
