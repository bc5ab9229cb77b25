//===- PlanLoader.cpp - Load and verify a FlatBuffers plan ----------------===//
#include "runtime/PlanLoader.h"
#include "runtime/CheckedMath.h"
#include "runtime/HostTensor.h"
#include "runtime/P2PGroups.h"
#include "runtime/ScheduleCheck.h"
#include "runtime/Views.h"
#include "runtime/cpu/ShapeRules.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace braid::rt;
using braid::plan::OpCode;
using braid::plan::TensorKind;
using braid::checkedAdd;
using braid::checkedMul;
using braid::checkedProduct;
using braid::checkedSum;

int LoadedPlan::functionIndex(std::string_view name) const {
  if (!root_->functions())
    return -1;
  for (unsigned i = 0; i < root_->functions()->size(); ++i)
    if (root_->functions()->Get(i)->name()->string_view() == name)
      return int(i);
  return -1;
}

const braid::plan::Function *LoadedPlan::function(std::string_view name) const {
  int i = functionIndex(name);
  return i < 0 ? nullptr : root_->functions()->Get(unsigned(i));
}

const char *braid::rt::reduceName(plan::ReduceKind kind) {
  switch (kind) {
  case plan::ReduceKind::Sum:
    return "sum";
  case plan::ReduceKind::Max:
    return "max";
  case plan::ReduceKind::Min:
    return "min";
  case plan::ReduceKind::Prod:
    return "prod";
  }
  return "?";
}

const char *braid::rt::activationKindName(plan::ActivationKind kind) {
  switch (kind) {
  case plan::ActivationKind::Relu:
    return "relu";
  case plan::ActivationKind::Relu2:
    return "relu2";
  case plan::ActivationKind::Relu6:
    return "relu6";
  case plan::ActivationKind::LeakyRelu:
    return "leaky_relu";
  case plan::ActivationKind::QuickGelu:
    return "quick_gelu";
  case plan::ActivationKind::Sigmoid:
    return "sigmoid";
  case plan::ActivationKind::Tanh:
    return "tanh";
  case plan::ActivationKind::Mish:
    return "mish";
  case plan::ActivationKind::Hardswish:
    return "hardswish";
  case plan::ActivationKind::Gelu10:
    return "gelu_10";
  case plan::ActivationKind::Laplace:
    return "laplace";
  case plan::ActivationKind::SqrtSoftplus:
    return "sqrtsoftplus";
  }
  return "?";
}

const char *braid::rt::opcodeName(OpCode op) {
  switch (op) {
#define CASE(E, S)                                                             \
  case OpCode::E:                                                              \
    return S;
    CASE(Matmul, "matmul")
    CASE(Add, "add")
    CASE(Mul, "mul")
    CASE(RmsNorm, "rms_norm")
    CASE(LayerNorm, "layer_norm")
    CASE(Rope, "rope")
    CASE(Attention, "attention")
    CASE(Silu, "silu")
    CASE(Swiglu, "swiglu")
    CASE(AddRmsNorm, "add_rms_norm")
    CASE(Gelu, "gelu")
    CASE(Activation, "activation")
    CASE(Embedding, "embedding")
    CASE(Softmax, "softmax")
    CASE(Slice, "slice")
    CASE(Concat, "concat")
    CASE(Reshape, "reshape")
    CASE(AllReduce, "all_reduce")
    CASE(AllGather, "all_gather")
    CASE(ReduceScatter, "reduce_scatter")
    CASE(AllToAll, "all_to_all")
    CASE(Broadcast, "broadcast")
    CASE(Send, "send")
    CASE(Recv, "recv")
    CASE(AllReduceStart, "all_reduce_start")
    CASE(AllGatherStart, "all_gather_start")
    CASE(ReduceScatterStart, "reduce_scatter_start")
    CASE(AllToAllStart, "all_to_all_start")
    CASE(BroadcastStart, "broadcast_start")
    CASE(SendStart, "send_start")
    CASE(RecvStart, "recv_start")
    CASE(Wait, "wait")
#undef CASE
  }
  return nullptr;
}

OpCode braid::rt::syncOpcode(OpCode op) {
  switch (op) {
  case OpCode::AllReduceStart:
    return OpCode::AllReduce;
  case OpCode::AllGatherStart:
    return OpCode::AllGather;
  case OpCode::ReduceScatterStart:
    return OpCode::ReduceScatter;
  case OpCode::AllToAllStart:
    return OpCode::AllToAll;
  case OpCode::BroadcastStart:
    return OpCode::Broadcast;
  case OpCode::SendStart:
    return OpCode::Send;
  case OpCode::RecvStart:
    return OpCode::Recv;
  default:
    return op;
  }
}

bool braid::rt::isCollectiveOpcode(OpCode opcode) {
  switch (syncOpcode(opcode)) {
  case OpCode::AllReduce:
  case OpCode::AllGather:
  case OpCode::ReduceScatter:
  case OpCode::AllToAll:
  case OpCode::Broadcast:
  case OpCode::Send:
  case OpCode::Recv:
    return true;
  default:
    return false;
  }
}

GroupPosition braid::rt::groupPosition(const plan::Plan &plan, int group,
                                       int worldRank) {
  const plan::DeviceGroup *g = plan.groups()->Get(unsigned(group));
  return groupPosition(group, g->size(), g->stride(), plan.world_size(),
                       worldRank);
}

int64_t braid::rt::embeddingVocabStart(const plan::Plan &plan,
                                       const plan::Op &op, int worldRank,
                                       const std::vector<int64_t> &table) {
  if (op.vocab_group() < 0 || table.empty())
    return 0;
  return groupPosition(plan, op.vocab_group(), worldRank).rankInGroup *
         table[0];
}

/// Every dim in [0, 2^40] and the element count at most 2^40: keeps all
/// later size arithmetic (bytes, offsets, slices) far from overflow.
static bool shapeWithinLimits(const Shape &shape) {
  for (int64_t d : shape)
    if (d < 0 || d > braid::kMaxTensorElements)
      return false;
  std::optional<int64_t> elems = braid::checkedProduct(shape);
  // A zero dim must not hide huge others: kernels loop over them.
  std::optional<int64_t> extent = braid::checkedShapeExtent(shape);
  return elems && *elems <= braid::kMaxTensorElements && extent &&
         *extent <= braid::kMaxTensorElements;
}

namespace {
struct Arity {
  int operands; // -1: one or more
  int results;
  bool collective;
  bool asyncStart;
};

Arity arityOf(OpCode op) {
  switch (op) {
  case OpCode::Matmul:
  case OpCode::Add:
  case OpCode::Mul:
  case OpCode::Swiglu:
  case OpCode::RmsNorm:
  case OpCode::Rope:
  case OpCode::Embedding:
    return {2, 1, false, false};
  case OpCode::LayerNorm:
    return {3, 1, false, false};
  case OpCode::AddRmsNorm:
    return {3, 2, false, false};
  case OpCode::Attention:
    return {3, 1, false, false}; // or 6 -> 3, handled by the caller
  case OpCode::Silu:
  case OpCode::Gelu:
  case OpCode::Activation:
  case OpCode::Softmax:
  case OpCode::Slice:
  case OpCode::Reshape:
    return {1, 1, false, false};
  case OpCode::Concat:
    return {-1, 1, false, false};
  case OpCode::AllReduce:
  case OpCode::AllGather:
  case OpCode::ReduceScatter:
  case OpCode::AllToAll:
  case OpCode::Broadcast:
    return {1, 1, true, false};
  case OpCode::Send:
    return {1, 0, true, false};
  case OpCode::Recv:
    return {0, 1, true, false};
  case OpCode::AllReduceStart:
  case OpCode::AllGatherStart:
  case OpCode::ReduceScatterStart:
  case OpCode::AllToAllStart:
  case OpCode::BroadcastStart:
    return {1, 1, true, true};
  case OpCode::SendStart:
    return {1, 0, true, true};
  case OpCode::RecvStart:
    return {0, 1, true, true};
  case OpCode::Wait:
    return {0, 0, false, false};
  }
  return {-2, -2, false, false};
}

template <typename T> Shape toShape(const flatbuffers::Vector<T> *v) {
  Shape s;
  if (v)
    for (auto d : *v)
      s.push_back(int64_t(d));
  return s;
}

bool validDType(braid::plan::DType d) {
  return int(d) >= 0 && int(d) <= int(braid::plan::DType::I64);
}

int numParameterPacks(const braid::plan::Plan &plan) {
  return plan.parameter_packs() ? int(plan.parameter_packs()->size()) : 0;
}

// The local shape of pack `k` of a plan whose packs passed
// checkParameterPacks: its pieces' local shapes stacked on dim 0.
Shape packShape(const braid::plan::Plan &plan, int k) {
  const braid::plan::ParameterPack *pack =
      plan.parameter_packs()->Get(unsigned(k));
  Shape shape;
  for (int i : *pack->pieces()) {
    Shape local = toShape(plan.parameters()->Get(unsigned(i))->local_shape());
    if (shape.empty())
      shape = local;
    else
      shape[0] += local[0];
  }
  return shape;
}

// The dtype of pack `k` (its pieces'), on a checked plan.
braid::plan::DType packDType(const braid::plan::Plan &plan, int k) {
  int first = plan.parameter_packs()->Get(unsigned(k))->pieces()->Get(0);
  return plan.parameters()->Get(unsigned(first))->dtype();
}

// Checks one function; `fn` is the prefix every message starts with.
class FunctionChecker {
public:
  FunctionChecker(const braid::plan::Plan &plan, const braid::plan::Function &f)
      : plan_(plan), f_(f), fn_("function '" + f.name()->str() + "': ") {}

  Status run() {
    BRAID_RETURN_IF_ERROR(checkTensors());
    BRAID_RETURN_IF_ERROR(checkBindings());
    BRAID_RETURN_IF_ERROR(checkOps());
    return Status::ok();
  }

private:
  int numTensors() const {
    return f_.tensors() ? int(f_.tensors()->size()) : 0;
  }
  const braid::plan::Tensor *tensor(int i) const {
    return f_.tensors()->Get(unsigned(i));
  }
  int numGroups() const {
    return plan_.groups() ? int(plan_.groups()->size()) : 0;
  }

  Status checkTensors() {
    int64_t arena = f_.arena_size();
    if (arena < 0)
      return errorf(fn_, "arena_size ", arena, " is negative");
    int numParams = plan_.parameters() ? int(plan_.parameters()->size()) : 0;
    int numSlots = plan_.state() ? int(plan_.state()->size()) : 0;
    int numInputs = f_.inputs() ? int(f_.inputs()->size()) : 0;
    for (int i = 0; i < numTensors(); ++i) {
      const braid::plan::Tensor *t = tensor(i);
      if (t->id() != i)
        return errorf(fn_, "tensor at position ", i, " has id ", t->id());
      if (!validDType(t->dtype()))
        return errorf(fn_, "tensor ", i, " has unknown dtype ",
                      int(t->dtype()));
      Shape shape = toShape(t->shape());
      if (!shapeWithinLimits(shape))
        return errorf(fn_, "tensor ", i, " has invalid or too large shape ",
                      formatShape(shape));
      int64_t bytes = numElements(shape) * int64_t(dtypeSize(t->dtype()));
      switch (t->kind()) {
      case TensorKind::Activation:
      case TensorKind::Input: {
        if (t->kind() == TensorKind::Activation && t->ref() != -1)
          return errorf(fn_, "activation tensor ", i, " has ref ", t->ref(),
                        " (must be -1)");
        if (t->kind() == TensorKind::Input &&
            (t->ref() < 0 || t->ref() >= numInputs ||
             f_.inputs()->Get(unsigned(t->ref()))->tensor() != i))
          return errorf(fn_, "input tensor ", i, " has ref ", t->ref(),
                        " which is not an input binding naming it");
        int64_t off = t->buffer_offset(), size = t->buffer_size();
        if (off < 0 || size < 0 || off > arena || size > arena - off)
          return errorf(fn_, "tensor ", i, " buffer [", off, ", ", off, "+",
                        size, ") is outside the arena of ", arena, " bytes");
        if (size < bytes)
          return errorf(fn_, "tensor ", i, " of shape ", formatShape(shape),
                        " x ", dtypeName(t->dtype()), " needs ", bytes,
                        " bytes but its buffer has ", size);
        // Kernels index a buffer as an array of its elements (on the GPU a
        // misaligned one faults).
        if (int64_t es = int64_t(dtypeSize(t->dtype())); es && off % es)
          return errorf(fn_, "tensor ", i, " (", dtypeName(t->dtype()),
                        ") at arena offset ", off, " is not aligned to its ",
                        es, "-byte elements");
        break;
      }
      case TensorKind::Parameter: {
        if (t->ref() < 0 || t->ref() >= numParams)
          return errorf(fn_, "parameter tensor ", i, " refers to parameter ",
                        t->ref(), " of ", numParams);
        const braid::plan::Parameter *p =
            plan_.parameters()->Get(unsigned(t->ref()));
        if (toShape(p->local_shape()) != shape || p->dtype() != t->dtype())
          return errorf(fn_, "parameter tensor ", i, " is ", formatShape(shape),
                        " x ", dtypeName(t->dtype()), " but parameter '",
                        p->name()->str(), "' is ",
                        formatShape(toShape(p->local_shape())), " x ",
                        dtypeName(p->dtype()));
        if (t->buffer_offset() != -1)
          return errorf(fn_, "parameter tensor ", i,
                        " must have buffer_offset -1 (not in the arena)");
        break;
      }
      case TensorKind::PackedParameter: {
        int numPacks = numParameterPacks(plan_);
        if (t->ref() < 0 || t->ref() >= numPacks)
          return errorf(fn_, "packed parameter tensor ", i,
                        " refers to parameter pack ", t->ref(), " of ",
                        numPacks);
        Shape pack = packShape(plan_, t->ref());
        braid::plan::DType dtype = packDType(plan_, t->ref());
        if (pack != shape || dtype != t->dtype())
          return errorf(fn_, "packed parameter tensor ", i, " is ",
                        formatShape(shape), " x ", dtypeName(t->dtype()),
                        " but parameter pack ", t->ref(), " is ",
                        formatShape(pack), " x ", dtypeName(dtype));
        if (t->buffer_offset() != -1)
          return errorf(fn_, "packed parameter tensor ", i,
                        " must have buffer_offset -1 (not in the arena)");
        break;
      }
      case TensorKind::State: {
        if (t->ref() < 0 || t->ref() >= numSlots)
          return errorf(fn_, "state tensor ", i, " refers to slot ", t->ref(),
                        " of ", numSlots);
        const braid::plan::StateSlot *s =
            plan_.state()->Get(unsigned(t->ref()));
        if (toShape(s->shape()) != shape || s->dtype() != t->dtype())
          return errorf(fn_, "state tensor ", i, " is ", formatShape(shape),
                        " but slot '", s->name()->str(), "' is ",
                        formatShape(toShape(s->shape())));
        if (t->buffer_offset() != -1)
          return errorf(fn_, "state tensor ", i,
                        " must have buffer_offset -1 (not in the arena)");
        break;
      }
      default:
        return errorf(fn_, "tensor ", i, " has unknown kind ", int(t->kind()));
      }
    }
    return Status::ok();
  }

  // `what` is the full message prefix ("function 'f': op 3 (add): operand").
  Status checkTensorRef(const std::string &what, int id) {
    if (id < 0 || id >= numTensors())
      return errorf(what, " names tensor ", id, " but there are ",
                    numTensors());
    return Status::ok();
  }

  /// A sharded output names a group, a dim of its tensor, and a whole
  /// that the group's blocks cover; inputs are never sharded.
  Status checkSharding(const char *which, const braid::plan::Binding &b) {
    if (b.shard_group() == -1)
      return Status::ok();
    std::string what = fn_ + which + " '" + b.name()->str() + "'";
    if (std::string(which) != "output")
      return errorf(what, " is sharded; only outputs may be");
    if (b.shard_group() < 0 || b.shard_group() >= numGroups())
      return errorf(what, " is sharded over group ", b.shard_group(), " of ",
                    numGroups());
    Shape shape = toShape(tensor(b.tensor())->shape());
    if (b.shard_dim() < 0 || b.shard_dim() >= int64_t(shape.size()))
      return errorf(what, " is sharded along dim ", b.shard_dim(),
                    " of a rank-", shape.size(), " tensor");
    // A group may have up to 2^31 - 1 ranks and a dim 2^40: checked.
    int64_t ranks = plan_.groups()->Get(unsigned(b.shard_group()))->size();
    int64_t rows = shape[size_t(b.shard_dim())];
    int64_t whole = braid::checkedMul(rows, ranks)
                        .value_or(std::numeric_limits<int64_t>::max());
    if (b.full_size() < 1 || b.full_size() > whole)
      return errorf(what, " has full size ", b.full_size(), " along dim ",
                    b.shard_dim(), "; its ", ranks, " blocks of ", rows,
                    " hold 1 to ", whole);
    // The gathered output is a tensor too: the same limits.
    shape[size_t(b.shard_dim())] = b.full_size();
    if (!shapeWithinLimits(shape))
      return errorf(what, " gathered is ", formatShape(shape),
                    ", too large a tensor");
    return Status::ok();
  }

  Status checkBindings() {
    for (const char *which : {"input", "output"}) {
      auto *list = std::string(which) == "input" ? f_.inputs() : f_.outputs();
      if (!list)
        continue;
      std::set<std::string> names;
      for (unsigned i = 0; i < list->size(); ++i) {
        const braid::plan::Binding *b = list->Get(i);
        if (!names.insert(b->name()->str()).second)
          return errorf(fn_, which, " name '", b->name()->str(),
                        "' is bound twice");
        BRAID_RETURN_IF_ERROR(checkTensorRef(fn_ + which, b->tensor()));
        if (list == f_.inputs() &&
            tensor(b->tensor())->kind() != TensorKind::Input)
          return errorf(fn_, "input '", b->name()->str(), "' tensor ",
                        b->tensor(), " is not of kind Input");
        BRAID_RETURN_IF_ERROR(checkSharding(which, *b));
      }
    }
    if (f_.state()) {
      int numSlots = plan_.state() ? int(plan_.state()->size()) : 0;
      for (const braid::plan::StateBinding *b : *f_.state()) {
        if (b->slot() < 0 || b->slot() >= numSlots)
          return errorf(fn_, "state binding names slot ", b->slot(), " of ",
                        numSlots);
        BRAID_RETURN_IF_ERROR(
            checkTensorRef(fn_ + "state binding input", b->input()));
        BRAID_RETURN_IF_ERROR(
            checkTensorRef(fn_ + "state binding output", b->output()));
        const braid::plan::Tensor *in = tensor(b->input());
        if (in->kind() != TensorKind::State || in->ref() != b->slot())
          return errorf(fn_, "state binding for slot ", b->slot(),
                        " reads tensor ", b->input(),
                        " which is not a State tensor of that slot");
        const braid::plan::Tensor *out = tensor(b->output());
        const braid::plan::StateSlot *s =
            plan_.state()->Get(unsigned(b->slot()));
        if (toShape(out->shape()) != toShape(s->shape()) ||
            out->dtype() != s->dtype())
          return errorf(fn_, "state binding for slot '", s->name()->str(),
                        "' writes tensor ", b->output(), " of shape ",
                        formatShape(toShape(out->shape())), ", slot is ",
                        formatShape(toShape(s->shape())));
      }
    }
    return Status::ok();
  }

  Status checkGroup(const std::string &op, const char *what, int g) {
    if (g < 0 || g >= numGroups())
      return errorf(op, what, " ", g, " is not a device group (have ",
                    numGroups(), ")");
    return Status::ok();
  }

  Shape shapeOf(int t) const { return toShape(tensor(t)->shape()); }

  // Shape rules the runtimes rely on before running anything: a mismatch in
  // a collective would otherwise hang or corrupt a peer on a GPU, and a
  // matmul runs in cuBLASLt, which checks nothing. Compute kernels check the
  // rest of their rules when they run.
  Status checkShapes(const std::string &where, const braid::plan::Op &op) {
    auto in = [&](unsigned i) { return shapeOf(op.operands()->Get(i)); };
    auto out = [&](unsigned i) { return shapeOf(op.results()->Get(i)); };
    auto dt = [&](int t) { return tensor(t)->dtype(); };
    auto mismatch = [&](const Shape &got, const Shape &want) {
      return errorf(where, "result shape ", formatShape(got), " should be ",
                    formatShape(want));
    };
    OpCode code = op.opcode();
    if (int(code) >= int(OpCode::AllReduceStart) && code != OpCode::Wait)
      code = OpCode(int(code) - int(OpCode::AllReduceStart) +
                    int(OpCode::AllReduce));
    int n = 1;
    if (op.group() >= 0 && op.group() < numGroups())
      n = plan_.groups()->Get(unsigned(op.group()))->size();
    switch (code) {
    case OpCode::AddRmsNorm: {
      Shape x = in(0);
      if (in(1) != x)
        return errorf(where, "residual shape ", formatShape(in(1)),
                      " should be ", formatShape(x),
                      " (add_rms_norm does not broadcast)");
      if (x.empty() || in(2) != Shape{x.back()})
        return errorf(where, "weight shape ", formatShape(in(2)),
                      " should be [", x.empty() ? 0 : x.back(), "]");
      if (out(0) != x)
        return mismatch(out(0), x);
      if (out(1) != x)
        return mismatch(out(1), x);
      break;
    }
    case OpCode::Swiglu:
      if (in(1) != in(0))
        return errorf(where, "operand 1 shape ", formatShape(in(1)),
                      " should be ", formatShape(in(0)),
                      " (swiglu does not broadcast)");
      if (out(0) != in(0))
        return mismatch(out(0), in(0));
      break;
    case OpCode::Add:
    case OpCode::Mul:
    case OpCode::Silu:
    case OpCode::Gelu:
    case OpCode::Activation:
    case OpCode::Softmax:
    case OpCode::RmsNorm:
    case OpCode::LayerNorm:
    case OpCode::Rope:
    case OpCode::AllReduce:
    case OpCode::Broadcast:
      if (out(0) != in(0))
        return mismatch(out(0), in(0));
      break;
    case OpCode::Matmul: {
      // cuBLASLt trusts the shapes it is given: operands that disagree, or
      // a result smaller than A x B, read the wrong elements or write past
      // the result's buffer. The CPU kernel's rules (ShapeRules.h), also
      // what the GEMM's strided batches can express.
      int ta = op.operands()->Get(0), tb = op.operands()->Get(1);
      auto dims = cpu::checkMatmulShapes(in(0), in(1), op.transpose_a(),
                                         op.transpose_b());
      if (!dims) {
        std::string why = dims.status().message();
        if (why.rfind("matmul: ", 0) == 0) // `where` names the op already
          why = why.substr(8);
        return errorf(where, "a (tensor ", ta, ") and b (tensor ", tb,
                      "): ", why);
      }
      if (out(0) != dims->result)
        return errorf(where, "result (tensor ", op.results()->Get(0),
                      ") shape ", formatShape(out(0)), " should be ",
                      formatShape(dims->result), ", a ", formatShape(in(0)),
                      op.transpose_a() ? "^T" : "", " x b ", formatShape(in(1)),
                      op.transpose_b() ? "^T" : "");
      // The epilogue reads bias[n] for every row: it must be [N].
      if (op.matmul_bias() &&
          (in(2).size() != 1 || out(0).empty() || in(2)[0] != out(0).back()))
        return errorf(where, "bias (tensor ", op.operands()->Get(2), ") shape ",
                      formatShape(in(2)), " should be [",
                      out(0).empty() ? 0 : out(0).back(),
                      "], the result's last dim");
      if (op.matmul_residual()) {
        unsigned r = op.matmul_bias() ? 3 : 2;
        if (in(r) != out(0))
          return errorf(where, "residual (tensor ", op.operands()->Get(r),
                        ") shape ", formatShape(in(r)),
                        " should be the result's ", formatShape(out(0)));
        if (op.matmul_gelu())
          return errorf(where, "has both a residual and a GELU epilogue; "
                               "cuBLASLt adds the residual before the GELU");
      }
      break;
    }
    case OpCode::Reshape: {
      // Tensor shapes are bounded (shapeWithinLimits), but the element
      // counts are compared checked all the same: a wrapped product must
      // never make two shapes look alike.
      std::optional<int64_t> a = checkedProduct(in(0)),
                             b = checkedProduct(out(0));
      if (!a || !b || *a != *b)
        return errorf(where, "reshape ", formatShape(in(0)), " -> ",
                      formatShape(out(0)), " changes the element count");
      break;
    }
    case OpCode::Slice: {
      Shape sizes(op.sizes()->begin(), op.sizes()->end());
      Shape x = in(0);
      for (size_t d = 0; d < x.size(); ++d) {
        int64_t offset = op.offsets()->Get(unsigned(d));
        // offset + size may not fit int64 (both come from the file).
        std::optional<int64_t> end = checkedAdd(offset, sizes[d]);
        if (offset < 0 || sizes[d] < 0 || !end || *end > x[d])
          return errorf(where, "dim ", d, " slice [", offset, ", +", sizes[d],
                        ") exceeds size ", x[d]);
      }
      if (out(0) != sizes)
        return mismatch(out(0), sizes);
      break;
    }
    case OpCode::Concat: {
      // The runtimes size the result from these rules, so they hold before
      // anything runs (the kernels check them again).
      Shape first = in(0);
      int64_t d = op.dim();
      if (d < 0 || d >= int64_t(first.size()))
        return errorf(where, "dim ", d, " out of range for ",
                      formatShape(first));
      std::vector<int64_t> along;
      for (unsigned i = 0; i < op.operands()->size(); ++i) {
        Shape x = in(i);
        Shape a = x, b = first;
        if (a.size() == b.size())
          a[size_t(d)] = b[size_t(d)] = 0;
        if (a != b)
          return errorf(where, "operand ", i, " ", formatShape(x),
                        " differs from operand 0 ", formatShape(first),
                        " outside dim ", d);
        if (dt(op.operands()->Get(i)) != dt(op.operands()->Get(0)))
          return errorf(where, "operand ", i, " is ",
                        dtypeName(dt(op.operands()->Get(i))),
                        " but operand 0 is ",
                        dtypeName(dt(op.operands()->Get(0))));
        along.push_back(x[size_t(d)]);
      }
      std::optional<int64_t> total = checkedSum(along);
      if (!total)
        return errorf(where, "the operands' sizes along dim ", d,
                      " add up to more than int64 holds");
      Shape expect = first;
      expect[size_t(d)] = *total;
      if (out(0) != expect)
        return mismatch(out(0), expect);
      break;
    }
    case OpCode::AllGather:
    case OpCode::ReduceScatter: {
      Shape x = in(0);
      int64_t d = op.dim();
      if (d < 0 || d >= int64_t(x.size()))
        return errorf(where, "dim ", d, " out of range for ", formatShape(x));
      if (code == OpCode::AllGather) {
        std::optional<int64_t> gathered = checkedMul(x[size_t(d)], n);
        if (!gathered)
          return errorf(where, "dim ", d, " of size ", x[size_t(d)],
                        " times group size ", n, " does not fit int64");
        x[size_t(d)] = *gathered;
      } else {
        if (x[size_t(d)] % n)
          return errorf(where, "dim ", d, " of size ", x[size_t(d)],
                        " is not divisible by group size ", n);
        x[size_t(d)] /= n;
      }
      if (out(0) != x)
        return mismatch(out(0), x);
      break;
    }
    case OpCode::AllToAll: {
      Shape x = in(0);
      int64_t sd = op.split_dim(), cd = op.concat_dim();
      if (sd < 0 || cd < 0 || sd >= int64_t(x.size()) ||
          cd >= int64_t(x.size()) || x[size_t(sd)] % n)
        return errorf(where, "split ", sd, " / concat ", cd, " invalid for ",
                      formatShape(x), " over ", n, " ranks");
      x[size_t(sd)] /= n;
      std::optional<int64_t> gathered = checkedMul(x[size_t(cd)], n);
      if (!gathered)
        return errorf(where, "concat dim ", cd, " of size ", x[size_t(cd)],
                      " times group size ", n, " does not fit int64");
      x[size_t(cd)] = *gathered;
      if (out(0) != x)
        return mismatch(out(0), x);
      break;
    }
    default:
      break;
    }
    // Collectives move bytes: source and destination dtypes must agree.
    bool moves = code == OpCode::AllReduce || code == OpCode::AllGather ||
                 code == OpCode::ReduceScatter || code == OpCode::AllToAll ||
                 code == OpCode::Broadcast || code == OpCode::Reshape ||
                 code == OpCode::Slice || code == OpCode::Concat;
    if (moves && dt(op.operands()->Get(0)) != dt(op.results()->Get(0)))
      return errorf(where, "operand is ", dtypeName(dt(op.operands()->Get(0))),
                    " but result is ", dtypeName(dt(op.results()->Get(0))));
    return Status::ok();
  }

  // Attributes whose bad values the kernels would turn into wrong numbers
  // rather than errors: enums outside their enum (the runtimes would run
  // another function), RoPE's frequency table (one positive, finite value
  // per rotated pair) and the sliding window (causal only).
  Status checkAttributes(const std::string &where, const braid::plan::Op &op) {
    using braid::plan::ActivationKind;
    using braid::plan::GeluApproximation;
    bool gelu = op.opcode() == OpCode::Gelu ||
                (op.opcode() == OpCode::Matmul && op.matmul_gelu());
    if (gelu && (op.gelu_approximation() < GeluApproximation::MIN ||
                 op.gelu_approximation() > GeluApproximation::MAX))
      return errorf(where, "unknown GELU approximation ",
                    int(op.gelu_approximation()));
    if (op.opcode() == OpCode::Activation &&
        (op.activation() < ActivationKind::MIN ||
         op.activation() > ActivationKind::MAX))
      return errorf(where, "unknown activation kind ", int(op.activation()));
    if (op.opcode() == OpCode::Rope) {
      Shape x = shapeOf(op.operands()->Get(0));
      int64_t headDim = x.empty() ? 0 : x.back();
      int64_t rotary = op.rope_rotary_dim() ? op.rope_rotary_dim() : headDim;
      if (op.rope_rotary_dim() != 0 &&
          (rotary < 2 || rotary > headDim || rotary % 2 != 0))
        return errorf(where, "rope_rotary_dim ", rotary,
                      " must be 0 (the whole head) or even and in [2, ",
                      headDim, "]");
      if (const auto *inv = op.rope_inv_freq(); inv && inv->size() > 0) {
        int64_t pairs = rotary / 2;
        if (int64_t(inv->size()) != pairs)
          return errorf(where, "rope_inv_freq has ", inv->size(),
                        " frequencies; the input ", formatShape(x), " has ",
                        pairs, " rotated pairs");
        for (unsigned i = 0; i < inv->size(); ++i)
          if (!(inv->Get(i) > 0.0) || !std::isfinite(inv->Get(i)))
            return errorf(where, "rope_inv_freq[", i, "] is ", inv->Get(i),
                          "; frequencies must be positive and finite");
      }
      double af = op.rope_attention_factor();
      if (!(af > 0.0) || !std::isfinite(af))
        return errorf(where, "rope_attention_factor ", af,
                      " must be positive and finite");
    }
    if (op.opcode() == OpCode::Attention) {
      if (op.sliding_window() < 0)
        return errorf(where, "sliding_window ", op.sliding_window(),
                      " must be >= 0 (0: none)");
      if (op.sliding_window() > 0 && !op.causal())
        return errorf(where, "sliding_window needs causal attention");
    }
    return Status::ok();
  }

  // Operand and result dtypes, as the dialect types them: the kernels read
  // ids and positions as integers and do float math on floats, so a float
  // tensor feeding token ids (or an f16 operand of a bf16 GEMM) would run
  // and compute garbage. Collectives and layout ops move bytes: their
  // result has their operand's dtype (checked in checkShapes).
  Status checkDTypes(const std::string &where, const braid::plan::Op &op) {
    auto operand = [&](unsigned i) { return op.operands()->Get(i); };
    auto result = [&](unsigned i) { return op.results()->Get(i); };
    auto dt = [&](int t) { return tensor(t)->dtype(); };
    auto needFloat = [&](const char *what, int t) -> Status {
      if (!isFloatType(dt(t)))
        return errorf(where, what, " (tensor ", t, ") is ", dtypeName(dt(t)),
                      ", must be floating point (f32, f16 or bf16)");
      return Status::ok();
    };
    auto needInt = [&](const char *what, int t) -> Status {
      if (isFloatType(dt(t)))
        return errorf(where, what, " (tensor ", t, ") is ", dtypeName(dt(t)),
                      ", must be an integer type (i32 or i64)");
      return Status::ok();
    };
    auto needSame = [&](const char *what, int t, const char *like,
                        int u) -> Status {
      if (dt(t) != dt(u))
        return errorf(where, what, " (tensor ", t, ") is ", dtypeName(dt(t)),
                      " but ", like, " (tensor ", u, ") is ", dtypeName(dt(u)));
      return Status::ok();
    };
    switch (op.opcode()) {
    case OpCode::Matmul:
      if (op.matmul_bias())
        BRAID_RETURN_IF_ERROR(
            needSame("the bias", operand(2), "operand 0", operand(0)));
      if (op.matmul_residual())
        BRAID_RETURN_IF_ERROR(needSame("the residual",
                                       operand(op.matmul_bias() ? 3 : 2),
                                       "operand 0", operand(0)));
      [[fallthrough]];
    case OpCode::Add:
    case OpCode::Mul:
    case OpCode::Swiglu:
      BRAID_RETURN_IF_ERROR(needFloat("operand 0", operand(0)));
      BRAID_RETURN_IF_ERROR(
          needSame("operand 1", operand(1), "operand 0", operand(0)));
      return needSame("the result", result(0), "operand 0", operand(0));
    case OpCode::AddRmsNorm:
      BRAID_RETURN_IF_ERROR(needFloat("the input", operand(0)));
      BRAID_RETURN_IF_ERROR(
          needSame("the residual", operand(1), "the input", operand(0)));
      BRAID_RETURN_IF_ERROR(
          needSame("the weight", operand(2), "the input", operand(0)));
      BRAID_RETURN_IF_ERROR(
          needSame("the sum", result(0), "the input", operand(0)));
      return needSame("the result", result(1), "the input", operand(0));
    case OpCode::RmsNorm:
    case OpCode::LayerNorm:
      BRAID_RETURN_IF_ERROR(needFloat("the input", operand(0)));
      BRAID_RETURN_IF_ERROR(
          needSame("the weight", operand(1), "the input", operand(0)));
      if (op.opcode() == OpCode::LayerNorm)
        BRAID_RETURN_IF_ERROR(
            needSame("the bias", operand(2), "the input", operand(0)));
      return needSame("the result", result(0), "the input", operand(0));
    case OpCode::Silu:
    case OpCode::Gelu:
    case OpCode::Activation:
    case OpCode::Softmax:
      BRAID_RETURN_IF_ERROR(needFloat("the input", operand(0)));
      return needSame("the result", result(0), "the input", operand(0));
    case OpCode::Rope:
      BRAID_RETURN_IF_ERROR(needFloat("the input", operand(0)));
      BRAID_RETURN_IF_ERROR(needInt("positions", operand(1)));
      return needSame("the result", result(0), "the input", operand(0));
    case OpCode::Embedding:
      BRAID_RETURN_IF_ERROR(needInt("ids", operand(0)));
      BRAID_RETURN_IF_ERROR(needFloat("the table", operand(1)));
      return needSame("the result", result(0), "the table", operand(1));
    case OpCode::Attention:
      BRAID_RETURN_IF_ERROR(needFloat("q", operand(0)));
      BRAID_RETURN_IF_ERROR(needSame("k", operand(1), "q", operand(0)));
      BRAID_RETURN_IF_ERROR(needSame("v", operand(2), "q", operand(0)));
      BRAID_RETURN_IF_ERROR(needSame("the output", result(0), "q", operand(0)));
      if (op.operands()->size() == 6) {
        BRAID_RETURN_IF_ERROR(needFloat("k_cache", operand(3)));
        BRAID_RETURN_IF_ERROR(
            needSame("v_cache", operand(4), "k_cache", operand(3)));
        BRAID_RETURN_IF_ERROR(needInt("position", operand(5)));
        BRAID_RETURN_IF_ERROR(
            needSame("the updated k_cache", result(1), "k_cache", operand(3)));
        BRAID_RETURN_IF_ERROR(
            needSame("the updated v_cache", result(2), "v_cache", operand(4)));
      }
      return Status::ok();
    default:
      return Status::ok();
    }
  }

  Status checkOps() {
    // Which op defines each tensor; entry tensors are defined up front.
    std::vector<int> producer(size_t(numTensors()), -1);
    std::vector<bool> defined(size_t(numTensors()), false);
    for (int i = 0; i < numTensors(); ++i)
      defined[size_t(i)] = tensor(i)->kind() != TensorKind::Activation;
    if (f_.num_streams() < 1 || f_.num_events() < 0 || f_.num_handles() < 0)
      return errorf(fn_, "num_streams ", f_.num_streams(), ", num_events ",
                    f_.num_events(), ", num_handles ", f_.num_handles(),
                    " are invalid");
    std::vector<bool> recorded(size_t(f_.num_events()), false);
    // Handle state: 0 unused, 1 started, 2 waited; payload tensor per handle.
    std::vector<int> handleState(size_t(f_.num_handles()), 0);
    std::vector<int> handlePayload(size_t(f_.num_handles()), -1);
    unsigned numOps = f_.ops() ? f_.ops()->size() : 0;
    // First pass: each tensor has at most one producer; op results may not
    // be parameters or inputs. A State result means an in-place update.
    for (unsigned oi = 0; oi < numOps; ++oi) {
      const braid::plan::Op *op = f_.ops()->Get(oi);
      if (!op->results())
        continue;
      for (int r : *op->results()) {
        if (r < 0 || r >= numTensors())
          continue; // reported in order below
        if (producer[size_t(r)] != -1)
          return errorf(fn_, "tensor ", r, " is produced by op ",
                        producer[size_t(r)], " and op ", oi);
        TensorKind k = tensor(r)->kind();
        if (k == TensorKind::Parameter || k == TensorKind::Input)
          return errorf(fn_, "op ", oi, " writes tensor ", r,
                        " which is a parameter or input");
        if (k == TensorKind::PackedParameter)
          return errorf(fn_, "op ", oi, " writes tensor ", r,
                        " which is a packed parameter (read-only)");
        producer[size_t(r)] = int(oi);
        defined[size_t(r)] = false;
      }
    }
    for (unsigned oi = 0; oi < numOps; ++oi) {
      const braid::plan::Op *op = f_.ops()->Get(oi);
      const char *name = opcodeName(op->opcode());
      if (!name)
        return errorf(fn_, "op ", oi, " has unknown opcode ",
                      int(op->opcode()));
      std::string where = fn_ + "op " + std::to_string(oi) + " (" + name + ")";
      if (op->loc())
        where += " at " + op->loc()->str();
      where += ": ";
      Arity a = arityOf(op->opcode());
      int nOperands = op->operands() ? int(op->operands()->size()) : 0;
      int nResults = op->results() ? int(op->results()->size()) : 0;
      bool arityOk =
          a.operands == -1 ? nOperands >= 1 : nOperands == a.operands;
      arityOk = arityOk && nResults == a.results;
      if (op->opcode() == OpCode::Attention)
        arityOk = (nOperands == 3 && nResults == 1) ||
                  (nOperands == 6 && nResults == 3);
      // A matmul with a bias epilogue reads the bias as a third operand.
      if (op->opcode() == OpCode::Matmul)
        arityOk = nOperands ==
                      2 + int(op->matmul_bias()) + int(op->matmul_residual()) &&
                  nResults == 1;
      if (!arityOk)
        return errorf(where, "has ", nOperands, " operands and ", nResults,
                      " results");
      if (op->stream() < 0 || op->stream() >= f_.num_streams())
        return errorf(where, "stream ", op->stream(), " is not below ",
                      f_.num_streams());
      if (op->wait_events())
        for (int e : *op->wait_events()) {
          if (e < 0 || e >= f_.num_events())
            return errorf(where, "waits on event ", e, " of ", f_.num_events());
          if (!recorded[size_t(e)])
            return errorf(where, "waits on event ", e,
                          " before any op records it");
        }
      if (op->operands())
        for (int t : *op->operands()) {
          BRAID_RETURN_IF_ERROR(checkTensorRef(where + "operand", t));
          if (!defined[size_t(t)])
            return errorf(where, "operand tensor ", t,
                          producer[size_t(t)] == -1
                              ? " is never defined"
                              : " is used before it is defined");
        }
      if (op->results())
        for (int t : *op->results())
          BRAID_RETURN_IF_ERROR(checkTensorRef(where + "result", t));
      if (a.collective) {
        BRAID_RETURN_IF_ERROR(checkGroup(where, "group", op->group()));
        int size = plan_.groups()->Get(unsigned(op->group()))->size();
        bool p2p = op->opcode() == OpCode::Send ||
                   op->opcode() == OpCode::Recv ||
                   op->opcode() == OpCode::SendStart ||
                   op->opcode() == OpCode::RecvStart;
        bool bcast = op->opcode() == OpCode::Broadcast ||
                     op->opcode() == OpCode::BroadcastStart;
        if (p2p && (op->peer() < 0 || op->peer() >= size))
          return errorf(where, "peer ", op->peer(),
                        " is not a rank of a group of ", size);
        if (bcast && (op->root() < 0 || op->root() >= size))
          return errorf(where, "root ", op->root(),
                        " is not a rank of a group of ", size);
      }
      if (op->opcode() == OpCode::Embedding && op->vocab_group() != -1)
        BRAID_RETURN_IF_ERROR(
            checkGroup(where, "vocab_group", op->vocab_group()));
      if (op->opcode() == OpCode::Slice) {
        size_t rank = tensor(op->operands()->Get(0))->shape()
                          ? tensor(op->operands()->Get(0))->shape()->size()
                          : 0;
        if (!op->offsets() || !op->sizes() || op->offsets()->size() != rank ||
            op->sizes()->size() != rank)
          return errorf(where, "offsets and sizes need ", rank, " entries");
      }
      BRAID_RETURN_IF_ERROR(checkShapes(where, *op));
      BRAID_RETURN_IF_ERROR(checkDTypes(where, *op));
      BRAID_RETURN_IF_ERROR(checkAttributes(where, *op));
      bool isStart = a.asyncStart, isWait = op->opcode() == OpCode::Wait;
      if (isStart || isWait) {
        int h = op->handle();
        if (h < 0 || h >= f_.num_handles())
          return errorf(where, "handle ", h, " is not below num_handles ",
                        f_.num_handles());
        if (isStart) {
          if (handleState[size_t(h)] != 0)
            return errorf(where, "handle ", h, " is started twice");
          handleState[size_t(h)] = 1;
          handlePayload[size_t(h)] = nResults ? op->results()->Get(0) : -1;
        } else {
          if (handleState[size_t(h)] != 1)
            return errorf(where, "handle ", h,
                          handleState[size_t(h)] == 0
                              ? " is waited before it is started"
                              : " is waited twice");
          handleState[size_t(h)] = 2;
          // The payload becomes readable only now.
          if (handlePayload[size_t(h)] >= 0)
            defined[size_t(handlePayload[size_t(h)])] = true;
        }
      } else if (op->handle() != -1) {
        return errorf(where, "carries handle ", op->handle(),
                      " but is not an async start or wait");
      }
      if (!isStart && op->results())
        for (int t : *op->results())
          defined[size_t(t)] = true;
      if (op->record_events())
        for (int e : *op->record_events()) {
          if (e < 0 || e >= f_.num_events())
            return errorf(where, "records event ", e, " of ", f_.num_events());
          recorded[size_t(e)] = true;
        }
    }
    for (size_t h = 0; h < handleState.size(); ++h)
      if (handleState[h] == 1)
        return errorf(fn_, "handle ", h, " is started but never waited");
    if (f_.outputs())
      for (const braid::plan::Binding *b : *f_.outputs())
        if (!defined[size_t(b->tensor())])
          return errorf(fn_, "output '", b->name()->str(), "' tensor ",
                        b->tensor(), " is never defined");
    if (f_.state())
      for (const braid::plan::StateBinding *b : *f_.state())
        if (!defined[size_t(b->output())])
          return errorf(fn_, "state slot ", b->slot(), " output tensor ",
                        b->output(), " is never defined");
    return Status::ok();
  }

  const braid::plan::Plan &plan_;
  const braid::plan::Function &f_;
  std::string fn_;
};
} // namespace

Shape braid::rt::tensorShape(const plan::Tensor &t) {
  return toShape(t.shape());
}

// The FlatBuffers Verifier (2.0.8, and later versions alike) checks that a
// vector's length prefix is 4-byte aligned and that its bytes are inside the
// buffer, but not that its elements are aligned for their type. A corrupted
// plan can therefore place a [long] or [double] vector at an address that is
// 4 but not 8 modulo 8, and every read of it (toShape, offsets, sizes,
// rope_inv_freq) is a misaligned 8-byte load: undefined behavior, a fault on
// strict-alignment targets.
// FlatBufferBuilder always aligns non-empty vectors to their element size,
// so this rejects only corrupted plans. Checked before any element is read.
// An empty vector (a scalar's shape) has no element to read, and the
// builder does not align it (PreAlign skips a zero length).
template <typename T>
static bool alignedVector(const flatbuffers::Vector<T> *v) {
  return !v || v->size() == 0 ||
         reinterpret_cast<uintptr_t>(v->Data()) % alignof(T) == 0;
}

static Status checkVectorAlignment(const braid::plan::Plan &root) {
  auto misaligned = [](const std::string &what) {
    return errorf("plan is corrupted: ", what,
                  " vector is not aligned for its 8-byte elements");
  };
  if (root.parameters())
    for (const braid::plan::Parameter *p : *root.parameters())
      if (!alignedVector(p->full_shape()) || !alignedVector(p->local_shape()) ||
          !alignedVector(p->padded_shape()))
        return misaligned("parameter '" + p->name()->str() + "' shape");
  if (root.state())
    for (const braid::plan::StateSlot *s : *root.state())
      if (!alignedVector(s->shape()))
        return misaligned("state slot '" + s->name()->str() + "' shape");
  if (root.functions())
    for (const braid::plan::Function *f : *root.functions()) {
      std::string fn = "function '" + f->name()->str() + "': ";
      if (f->tensors())
        for (unsigned i = 0; i < f->tensors()->size(); ++i)
          if (!alignedVector(f->tensors()->Get(i)->shape()))
            return misaligned(fn + "tensor " + std::to_string(i) + " shape");
      if (f->ops())
        for (unsigned i = 0; i < f->ops()->size(); ++i) {
          const braid::plan::Op *op = f->ops()->Get(i);
          if (!alignedVector(op->offsets()) || !alignedVector(op->sizes()))
            return misaligned(fn + "op " + std::to_string(i) +
                              " offsets/sizes");
          if (!alignedVector(op->rope_inv_freq()))
            return misaligned(fn + "op " + std::to_string(i) +
                              " rope_inv_freq");
        }
    }
  return Status::ok();
}

// Plan.parameter_packs, on a plan whose parameters passed their checks:
// every piece a parameter of at most one pack, the pieces of a pack of one
// dtype, rank >= 1 and the same dims but dim 0, the stacked shape within
// the tensor limits.
static Status checkParameterPacks(const braid::plan::Plan &plan) {
  int numParams = plan.parameters() ? int(plan.parameters()->size()) : 0;
  std::vector<int> packOf(size_t(numParams), -1);
  for (int k = 0; k < numParameterPacks(plan); ++k) {
    const braid::plan::ParameterPack *pack =
        plan.parameter_packs()->Get(unsigned(k));
    std::string pn = "parameter pack " + std::to_string(k) + ": ";
    const flatbuffers::Vector<int32_t> *pieces = pack->pieces();
    if (pieces->size() == 0)
      return errorf("parameter pack ", k, " has no pieces");
    const braid::plan::Parameter *first = nullptr;
    Shape firstShape;
    std::vector<int64_t> rows;
    for (unsigned j = 0; j < pieces->size(); ++j) {
      int i = pieces->Get(j);
      if (i < 0 || i >= numParams)
        return errorf(pn, "piece ", j, " is parameter ", i, " but there are ",
                      numParams);
      const braid::plan::Parameter *p = plan.parameters()->Get(unsigned(i));
      std::string name = "'" + p->name()->str() + "'";
      if (packOf[size_t(i)] == k)
        return errorf(pn, "parameter ", name, " is a piece twice");
      if (packOf[size_t(i)] >= 0)
        return errorf(pn, "parameter ", name,
                      " is already a piece of parameter pack ",
                      packOf[size_t(i)], " (a parameter is in one pack)");
      packOf[size_t(i)] = k;
      Shape local = toShape(p->local_shape());
      if (local.empty())
        return errorf(pn, "piece ", name,
                      " has rank 0; pieces are stacked along dim 0");
      if (!first) {
        first = p;
        firstShape = local;
      } else if (p->dtype() != first->dtype()) {
        return errorf(pn, "piece ", name, " is ", dtypeName(p->dtype()),
                      " but piece '", first->name()->str(), "' is ",
                      dtypeName(first->dtype()),
                      "; the pieces of a pack share their dtype");
      } else if (local.size() != firstShape.size() ||
                 !std::equal(local.begin() + 1, local.end(),
                             firstShape.begin() + 1)) {
        return errorf(pn, "piece ", name, " is ", formatShape(local),
                      " but piece '", first->name()->str(), "' is ",
                      formatShape(firstShape),
                      "; the pieces of a pack share every dim but dim 0");
      }
      rows.push_back(local[0]);
    }
    std::optional<int64_t> stacked = checkedSum(rows);
    Shape shape = firstShape;
    shape[0] = stacked ? *stacked : -1;
    if (!stacked || !shapeWithinLimits(shape))
      return errorf(pn, "its pieces stacked on dim 0 (", pieces->size(),
                    " pieces, first ", formatShape(firstShape),
                    ") make a tensor that is too large");
  }
  return Status::ok();
}

ParameterPacking braid::rt::parameterPacking(const plan::Plan &plan) {
  ParameterPacking packing;
  packing.places.resize(plan.parameters() ? plan.parameters()->size() : 0);
  for (int k = 0; k < numParameterPacks(plan); ++k) {
    ParameterPacking::Pack pack;
    pack.shape = packShape(plan, k);
    pack.dtype = packDType(plan, k);
    // Row-major: dim 0 outermost, so the pieces lie end to end.
    for (int i : *plan.parameter_packs()->Get(unsigned(k))->pieces()) {
      const plan::Parameter *p = plan.parameters()->Get(unsigned(i));
      packing.places[size_t(i)] = {k, pack.bytes};
      pack.bytes += numElements(toShape(p->local_shape())) *
                    int64_t(dtypeSize(p->dtype()));
    }
    packing.packs.push_back(std::move(pack));
  }
  return packing;
}

Status braid::rt::checkPlanSemantics(const plan::Plan &plan) {
  BRAID_RETURN_IF_ERROR(checkVectorAlignment(plan));
  if (plan.version() < kOldestPlanFormatVersion ||
      plan.version() > kPlanFormatVersion)
    return errorf("plan format version ", plan.version(),
                  " is not one this runtime reads (", kOldestPlanFormatVersion,
                  " to ", kPlanFormatVersion, ")");
  int world = plan.world_size();
  if (world < 1)
    return errorf("world_size ", world, " must be >= 1");
  int numGroups = plan.groups() ? int(plan.groups()->size()) : 0;
  for (int g = 0; g < numGroups; ++g) {
    const plan::DeviceGroup *dg = plan.groups()->Get(unsigned(g));
    std::optional<int64_t> span =
        checkedMul(int64_t(dg->size()), int64_t(dg->stride()));
    if (dg->size() < 1 || dg->stride() < 1 || !span || world % *span != 0)
      return errorf("device group '", dg->name()->str(), "': size ", dg->size(),
                    " x stride ", dg->stride(), " does not tile world_size ",
                    world);
  }
  if (plan.parameters())
    for (const plan::Parameter *p : *plan.parameters()) {
      std::string pn = "parameter '" + p->name()->str() + "': ";
      if (!validDType(p->dtype()))
        return errorf(pn, "unknown dtype ", int(p->dtype()));
      Shape full = toShape(p->full_shape()), local = toShape(p->local_shape());
      Shape padded = toShape(p->padded_shape());
      if (padded.empty())
        padded = full;
      if (padded.size() != full.size() || local.size() != full.size())
        return errorf(pn, "full ", formatShape(full), ", padded ",
                      formatShape(padded), " and local ", formatShape(local),
                      " differ in rank");
      for (size_t d = 0; d < full.size(); ++d)
        if (full[d] <= 0 || padded[d] < full[d])
          return errorf(pn, "full shape ", formatShape(full), " / padded ",
                        formatShape(padded), " invalid in dim ", d);
      if (!shapeWithinLimits(padded))
        return errorf(pn, "shape ", formatShape(padded), " is too large");
      Shape expect = padded;
      if (const plan::ShardRule *s = p->shard()) {
        if (s->group() < 0 || s->group() >= numGroups)
          return errorf(pn, "shard group ", s->group(),
                        " is not a device group");
        int size = plan.groups()->Get(unsigned(s->group()))->size();
        int shards = s->shards() ? s->shards() : size;
        if (s->dim() < 0 || s->dim() >= int(full.size()))
          return errorf(pn, "shard dim ", s->dim(), " out of range for ",
                        formatShape(full));
        // shards x blocks is computed checked: a product that wrapped to 0
        // would divide by zero.
        std::optional<int64_t> pieces =
            checkedMul(int64_t(shards), int64_t(s->blocks()));
        if (shards < 1 || size % shards || s->blocks() < 1 || !pieces ||
            *pieces < 1 || padded[size_t(s->dim())] % *pieces)
          return errorf(pn, "dim ", s->dim(), " of size ",
                        padded[size_t(s->dim())], " cannot be cut into ",
                        s->blocks(), " blocks x ", shards,
                        " shards for a group of ", size);
        expect[size_t(s->dim())] /= shards;
      }
      if (expect != local)
        return errorf(pn, "local shape ", formatShape(local), " should be ",
                      formatShape(expect));
    }
  BRAID_RETURN_IF_ERROR(checkParameterPacks(plan));
  if (plan.state())
    for (const plan::StateSlot *s : *plan.state()) {
      if (!validDType(s->dtype()))
        return errorf("state slot '", s->name()->str(), "': unknown dtype");
      if (!shapeWithinLimits(toShape(s->shape())))
        return errorf("state slot '", s->name()->str(),
                      "': invalid or too large shape ",
                      formatShape(toShape(s->shape())));
    }
  std::set<std::string> names;
  if (plan.functions())
    for (const plan::Function *f : *plan.functions()) {
      if (!names.insert(f->name()->str()).second)
        return errorf("function '", f->name()->str(), "' is defined twice");
      BRAID_RETURN_IF_ERROR(FunctionChecker(plan, *f).run());
    }
  return Status::ok();
}

namespace {
/// The plan-level twin of braid-verify-schedule: streams, events and waits
/// True when op `op` of `f` is a reshape or contiguous slice whose result
/// the plan places exactly on its operand's bytes (runtime/Views.h): the
/// runtimes copy nothing, so the op only reads.
static bool isPlacedView(const braid::plan::Function &f,
                         const braid::plan::Op &op) {
  if ((op.opcode() != OpCode::Reshape && op.opcode() != OpCode::Slice) ||
      !op.operands() || op.operands()->size() != 1 || !op.results() ||
      op.results()->size() != 1)
    return false;
  const braid::plan::Tensor *x =
      f.tensors()->Get(unsigned(op.operands()->Get(0)));
  const braid::plan::Tensor *y =
      f.tensors()->Get(unsigned(op.results()->Get(0)));
  auto inArena = [](const braid::plan::Tensor *t) {
    return t->kind() == TensorKind::Activation ||
           t->kind() == TensorKind::Input;
  };
  if (!inArena(x) || !inArena(y) || x->dtype() != y->dtype())
    return false;
  Shape in =
      x->shape() ? Shape(x->shape()->begin(), x->shape()->end()) : Shape{};
  std::optional<int64_t> start = 0;
  if (op.opcode() == OpCode::Slice) {
    if (!op.offsets() || !op.sizes() || op.offsets()->size() != in.size() ||
        op.sizes()->size() != in.size())
      return false;
    Shape offsets(op.offsets()->begin(), op.offsets()->end());
    Shape sizes(op.sizes()->begin(), op.sizes()->end());
    start = braid::contiguousSliceStart(in.data(), offsets.data(), sizes.data(),
                                        in.size());
  }
  return start &&
         y->buffer_offset() ==
             x->buffer_offset() + *start * int64_t(dtypeSize(x->dtype()));
}

/// The schedule of `f` is safe: its streams, events and waits must order
/// every pair of accesses to the same bytes (one a write) and every two
/// collectives of different communicators, and no op's accesses may
/// overlap unless it computes in place. Runs on a plan that
/// passed the semantic checks, so every index is in range.
Status checkFunctionSchedule(const braid::plan::Function &f) {
  namespace sched = braid::sched;
  unsigned n = f.ops() ? f.ops()->size() : 0;
  std::vector<sched::SchedOp> ops(n + 1); // + the join before results
  std::vector<sched::OpAccesses> accesses(n + 1);
  std::vector<sched::CollectiveUse> collectives;
  std::vector<int> lastRecorder(size_t(f.num_events()), -1);
  std::vector<int> startOf(size_t(f.num_handles()), -1);
  std::vector<int> waitOf(size_t(f.num_handles()), -1);
  for (unsigned i = 0; i < n; ++i) {
    const braid::plan::Op *op = f.ops()->Get(i);
    if (op->opcode() == OpCode::Wait)
      waitOf[size_t(op->handle())] = int(i);
  }
  // Adjacent sends and receives issued as one group run concurrently
  // (P2PGroups.h): a sync member's accesses are in flight until the
  // group's last member, its results written by then.
  const std::vector<int> groupLast = p2pGroupLasts(p2pGroupEnds(f));
  // The op whose write each tensor's readers must see: its producer, the
  // wait for an async payload, the last member of a sync member's group,
  // -1 for entry tensors. A placed view's readers see its operand's writer.
  std::vector<int> writer(f.tensors() ? f.tensors()->size() : 0, -1);
  std::vector<bool> view(n, false);
  for (unsigned i = 0; i < n; ++i) {
    const braid::plan::Op *op = f.ops()->Get(i);
    view[i] = isPlacedView(f, *op);
    if (op->results())
      for (int t : *op->results())
        writer[size_t(t)] = view[i] ? writer[size_t(op->operands()->Get(0))]
                            : arityOf(op->opcode()).asyncStart
                                ? waitOf[size_t(op->handle())]
                                : std::max(int(i), groupLast[i]);
  }
  auto location = [&](int t, bool write) -> std::optional<sched::Access> {
    const braid::plan::Tensor *x = f.tensors()->Get(unsigned(t));
    Shape shape = x->shape() ? Shape(x->shape()->begin(), x->shape()->end())
                             : Shape{};
    // An empty tensor has no bytes to race on or overlap.
    int64_t bytes = numElements(shape) * int64_t(dtypeSize(x->dtype()));
    if (bytes == 0)
      return std::nullopt;
    switch (x->kind()) {
    case TensorKind::Parameter:
    case TensorKind::PackedParameter:
      return std::nullopt; // read-only
    case TensorKind::State:
      return sched::Access{1 + int64_t(x->ref()), 0, bytes, write,
                           write ? sched::Access::kAnyWriter : writer[size_t(t)]};
    default:
      return sched::Access{0, x->buffer_offset(), x->buffer_offset() + bytes,
                           write,
                           write ? sched::Access::kAnyWriter : writer[size_t(t)]};
    }
  };
  std::vector<int> lastOfStream(size_t(f.num_streams()), -1);
  for (unsigned i = 0; i < n; ++i) {
    const braid::plan::Op *op = f.ops()->Get(i);
    sched::SchedOp &so = ops[i];
    sched::OpAccesses &acc = accesses[i];
    so.stream = op->stream();
    lastOfStream[size_t(so.stream)] = int(i);
    if (op->wait_events())
      for (int e : *op->wait_events())
        so.after.push_back(lastRecorder[size_t(e)]);
    bool start = arityOf(op->opcode()).asyncStart;
    if (op->opcode() == OpCode::Wait)
      so.after.push_back(startOf[size_t(op->handle())]);
    const char *name = opcodeName(op->opcode()); // valid: checked earlier
    std::string_view mnemonic = name ? name : "";
    if (op->operands())
      for (unsigned k = 0; k < op->operands()->size(); ++k)
        if (auto a = location(op->operands()->Get(k), false)) {
          a->inPlace = sched::inPlaceTag(mnemonic, false, k);
          acc.accesses.push_back(*a);
        }
    if (op->results() && !view[i])
      for (unsigned k = 0; k < op->results()->size(); ++k)
        if (auto a = location(op->results()->Get(k), true)) {
          a->inPlace = sched::inPlaceTag(mnemonic, true, k);
          acc.accesses.push_back(*a);
        }
    if (start) {
      startOf[size_t(op->handle())] = int(i);
      acc.inFlightUntil = waitOf[size_t(op->handle())];
    } else if (groupLast[i] > int(i)) {
      acc.inFlightUntil = groupLast[i];
    }
    if (arityOf(op->opcode()).collective)
      collectives.push_back({int(i),
                             start ? waitOf[size_t(op->handle())]
                                   : std::max(int(i), groupLast[i]),
                             op->group()});
    if (op->record_events())
      for (int e : *op->record_events())
        lastRecorder[size_t(e)] = int(i);
  }
  // The runtime joins every stream, reads the outputs and copies state back
  // (through scratch: its accesses may overlap).
  accesses[n].overlapsItself = true;
  for (int last : lastOfStream)
    if (last >= 0)
      ops[n].after.push_back(last);
  if (f.outputs())
    for (const braid::plan::Binding *b : *f.outputs())
      if (auto a = location(b->tensor(), false))
        accesses[n].accesses.push_back(*a);
  if (f.state())
    for (const braid::plan::StateBinding *b : *f.state()) {
      if (auto a = location(b->output(), false))
        accesses[n].accesses.push_back(*a);
      const braid::plan::Tensor *out = f.tensors()->Get(unsigned(b->output()));
      if (out->kind() != TensorKind::State || out->ref() != b->slot())
        if (auto a = location(b->input(), true))
          accesses[n].accesses.push_back(*a);
    }
  // The inputs are copied in before the first op: two that share bytes
  // overwrite each other where no op's access shows it.
  std::vector<sched::Access> entries;
  std::vector<const braid::plan::Binding *> entryBindings;
  if (f.inputs())
    for (const braid::plan::Binding *b : *f.inputs())
      if (auto a = location(b->tensor(), true)) {
        entries.push_back(*a);
        entryBindings.push_back(b);
      }
  if (auto o = sched::firstEntryOverlap(entries))
    return errorf("function '", f.name()->str(), "': inputs '",
                  entryBindings[o->first]->name()->str(), "' and '",
                  entryBindings[o->second]->name()->str(), "' share bytes [",
                  o->both.begin, ", ", o->both.end, ") of ",
                  o->both.space == 0
                      ? std::string("the arena")
                      : "state slot " + std::to_string(o->both.space - 1),
                  " (each is copied in before the first op)");
  sched::CheckOptions options;
  options.maxConflicts = 1;
  auto conflicts = sched::findConflicts(ops, f.num_streams(), accesses,
                                        collectives, options);
  if (conflicts.empty())
    return Status::ok();
  const sched::Conflict &c = conflicts.front();
  auto name = [&](int i) -> std::string {
    if (unsigned(i) >= n)
      return "the end of the function";
    const braid::plan::Op *op = f.ops()->Get(unsigned(i));
    std::string s = "op " + std::to_string(i) + " (" +
                    opcodeName(op->opcode()) + ", stream " +
                    std::to_string(op->stream());
    // The IR location the plan carries, as the loader's other refusals say.
    if (op->loc())
      s += ", at " + op->loc()->str();
    return s + ")";
  };
  const std::string bytes =
      "bytes [" + std::to_string(c.access.begin) + ", " +
      std::to_string(c.access.end) + ") of " +
      (c.access.space == 0 ? std::string("the arena")
                           : "state slot " + std::to_string(c.access.space - 1));
  if (c.kind == sched::Conflict::Overlap)
    return errorf("function '", f.name()->str(), "': ", name(c.first),
                  " writes ", bytes,
                  " that it also reads or writes through another operand or "
                  "result; only elementwise ops and attention's KV caches "
                  "(each into its own updated cache) run in place, at "
                  "exactly their operand's bytes");
  if (c.kind == sched::Conflict::Clobber)
    return errorf("function '", f.name()->str(), "': ", name(c.first),
                  " overwrites ", bytes, " before ", name(c.second),
                  " reads the value they held (a buffer reused too early)");
  if (c.kind == sched::Conflict::Race && size_t(c.second) < groupLast.size() &&
      groupLast[size_t(c.first)] >= 0 &&
      groupLast[size_t(c.first)] == groupLast[size_t(c.second)])
    return errorf("function '", f.name()->str(), "': ", name(c.first), " and ",
                  name(c.second),
                  " are adjacent sends and receives on one stream and group, "
                  "issued as one group that runs them concurrently: both "
                  "access ",
                  bytes, " and at least one writes");
  std::string what =
      c.kind == sched::Conflict::Race
          ? "both access " + bytes + " and at least one writes"
          : std::string("collectives of two communicators may run "
                        "concurrently and deadlock");
  // An async collective between its start and its wait: the second op may
  // be ordered after the start, but the collective runs until the wait.
  if (!c.repairable &&
      arityOf(f.ops()->Get(unsigned(c.first))->opcode()).asyncStart)
    return errorf("function '", f.name()->str(), "': ", name(c.second),
                  " runs while ", name(c.first),
                  " is in flight (until its wait): ", what,
                  "; no event can order them");
  return errorf("function '", f.name()->str(), "': ", name(c.first), " and ",
                name(c.second), " are not ordered by streams, events or "
                "waits: ", what);
}
} // namespace

Expected<LoadedPlan> braid::rt::loadPlan(std::vector<uint8_t> bytes,
                                         const LoadOptions &options) {
  if (bytes.size() < 8)
    return errorf("plan is truncated: ", bytes.size(),
                  " bytes is smaller than a FlatBuffers header");
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), plan::PlanIdentifier()))
    return errorf(
        "not a Braid plan: file identifier is '",
        std::string(reinterpret_cast<const char *>(bytes.data()) + 4, 4),
        "', expected '", plan::PlanIdentifier(), "'");
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!plan::VerifyPlanBuffer(verifier))
    return errorf("plan failed FlatBuffers verification (truncated or "
                  "corrupted, ",
                  bytes.size(), " bytes)");
  LoadedPlan lp;
  lp.bytes_ = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  lp.root_ = plan::GetPlan(lp.bytes_->data());
  BRAID_RETURN_IF_ERROR(checkPlanSemantics(*lp.root_));
  if (options.checkSchedule)
    BRAID_RETURN_IF_ERROR(checkPlanSchedule(lp));
  return lp;
}

Status braid::rt::checkPlanSchedule(const LoadedPlan &plan) {
  if (plan.root().functions())
    for (const braid::plan::Function *f : *plan.root().functions())
      BRAID_RETURN_IF_ERROR(checkFunctionSchedule(*f));
  return Status::ok();
}

Expected<RegularFile> braid::rt::openRegularFile(const std::string &path,
                                                 const char *what) {
  // The type is checked before open(): opening a FIFO blocks until a writer
  // comes, and reading a directory fails only at the first read.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errorf("cannot open ", what, " '", path,
                  "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return errorf(what, " '", path, "' is not a regular file (",
                  S_ISDIR(st.st_mode)    ? "a directory"
                  : S_ISFIFO(st.st_mode) ? "a FIFO"
                  : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)
                      ? "a device"
                      : "a socket or other special file",
                  ")");
  // O_NONBLOCK: should the path be swapped for a FIFO after the stat, open()
  // still returns at once (and the fstat below refuses it).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return errorf("cannot open ", what, " '", path,
                  "': ", std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return errorf(what, " '", path, "' is not a regular file");
  }
  return RegularFile{fd, uint64_t(st.st_size)};
}

Expected<std::vector<uint8_t>>
braid::rt::readRegularFile(const std::string &path, const char *what,
                           uint64_t maxBytes) {
  auto file = openRegularFile(path, what);
  if (!file)
    return file.status();
  int fd = file->fd;
  if (file->size > maxBytes) {
    ::close(fd);
    return errorf(what, " '", path, "' is ", file->size,
                  " bytes, more than the limit of ", maxBytes);
  }
  std::vector<uint8_t> bytes(size_t(file->size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) { // an error, or the file shrank under us
      int err = n < 0 ? errno : 0;
      ::close(fd);
      return errorf("cannot read ", what, " '", path, "': ",
                    err ? std::strerror(err) : "it shrank while being read");
    }
    got += size_t(n);
  }
  ::close(fd);
  return bytes;
}

Expected<LoadedPlan> braid::rt::loadPlanFile(const std::string &path,
                                             const LoadOptions &options) {
  // FlatBuffers addresses at most 2 GiB (32-bit offsets).
  auto bytes = readRegularFile(path, "plan", uint64_t(1) << 31);
  if (!bytes)
    return bytes.status();
  auto plan = loadPlan(bytes.take(), options);
  if (!plan)
    return errorf(path, ": ", plan.status().message());
  return plan;
}

Expected<std::vector<BoundInput>>
braid::rt::bindInputs(const plan::Function &f,
                      const std::map<std::string, HostTensor> &inputs) {
  std::string function = f.name()->str();
  std::vector<BoundInput> bound;
  if (f.inputs())
    for (const plan::Binding *b : *f.inputs()) {
      auto it = inputs.find(b->name()->str());
      if (it == inputs.end())
        return errorf("function '", function, "': missing input '",
                      b->name()->str(), "'");
      const plan::Tensor &t = *f.tensors()->Get(unsigned(b->tensor()));
      Shape shape = t.shape() ? Shape(t.shape()->begin(), t.shape()->end())
                              : Shape{};
      const HostTensor &h = it->second;
      if (h.dtype != t.dtype() || h.shape != shape ||
          h.bytes.size() != size_t(numElements(shape)) * dtypeSize(t.dtype()))
        return errorf("function '", function, "': input '", b->name()->str(),
                      "' must be ", formatShape(shape), " x ",
                      dtypeName(t.dtype()), ", got ", formatShape(h.shape),
                      " x ", dtypeName(h.dtype));
      bound.push_back({b->tensor(), &h});
    }
  if (bound.size() != inputs.size())
    for (const auto &kv : inputs) {
      bool known = false;
      if (f.inputs())
        for (const plan::Binding *b : *f.inputs())
          known |= b->name()->string_view() == kv.first;
      if (!known)
        return errorf("function '", function, "' has no input '", kv.first,
                      "'");
    }
  return bound;
}
