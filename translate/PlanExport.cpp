//===- PlanExport.cpp - braid IR -> FlatBuffers plan ----------------------===//
#include "translate/PlanExport.h"

#include "dialect/BraidOps.h"
#include "dialect/Diagnostics.h"
#include "dialect/ShapeChecks.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "runtime/GroupLayout.h"
#include "runtime/P2PGroups.h"
#include "runtime/PlanLoader.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

using namespace mlir;
using namespace mlir::braid;
namespace plan = ::braid::plan;

namespace {

FailureOr<plan::DType> dtypeOf(Location loc, Type type) {
  Type element = type;
  if (auto t = dyn_cast<ShapedType>(type))
    element = t.getElementType();
  if (element.isF32())
    return plan::DType::F32;
  if (element.isF16())
    return plan::DType::F16;
  if (element.isBF16())
    return plan::DType::BF16;
  if (element.isInteger(32))
    return plan::DType::I32;
  if (element.isInteger(64))
    return plan::DType::I64;
  return emitError(loc) << "the plan has no element type " << element,
         failure();
}

std::vector<int64_t> shapeOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  return std::vector<int64_t>(t.getShape().begin(), t.getShape().end());
}

plan::ReduceKind reduceKindOf(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::sum:
    return plan::ReduceKind::Sum;
  case ReduceKind::max:
    return plan::ReduceKind::Max;
  case ReduceKind::min:
    return plan::ReduceKind::Min;
  case ReduceKind::prod:
    return plan::ReduceKind::Prod;
  }
  return plan::ReduceKind::Sum;
}

/// Calls `fn` with `op` as `Sync` or as `Start`: the two forms of a
/// collective share their arguments.
template <typename Sync, typename Start, typename Fn>
void withEitherForm(Operation *op, Fn fn) {
  if (auto start = dyn_cast<Start>(op))
    fn(start);
  else
    fn(cast<Sync>(op));
}

/// Sets the opcode of collective `c` from its kind and form, and the
/// attributes only its kind carries.
void exportCollective(CollectiveOpInterface c, plan::OpT &o) {
  Operation *op = c.getOperation();
  auto opcode = [&](plan::OpCode sync, plan::OpCode start) {
    o.opcode = c.isAsyncStart() ? start : sync;
  };
  switch (c.getCollectiveKind()) {
  case CollectiveKind::all_reduce:
    opcode(plan::OpCode::AllReduce, plan::OpCode::AllReduceStart);
    withEitherForm<AllReduceOp, AllReduceStartOp>(
        op, [&](auto m) { o.reduce_kind = reduceKindOf(m.getKind()); });
    break;
  case CollectiveKind::all_gather:
    opcode(plan::OpCode::AllGather, plan::OpCode::AllGatherStart);
    withEitherForm<AllGatherOp, AllGatherStartOp>(
        op, [&](auto m) { o.dim = m.getDim(); });
    break;
  case CollectiveKind::reduce_scatter:
    opcode(plan::OpCode::ReduceScatter, plan::OpCode::ReduceScatterStart);
    withEitherForm<ReduceScatterOp, ReduceScatterStartOp>(op, [&](auto m) {
      o.reduce_kind = reduceKindOf(m.getKind());
      o.dim = m.getDim();
    });
    break;
  case CollectiveKind::all_to_all:
    opcode(plan::OpCode::AllToAll, plan::OpCode::AllToAllStart);
    withEitherForm<AllToAllOp, AllToAllStartOp>(op, [&](auto m) {
      o.split_dim = m.getSplitDim();
      o.concat_dim = m.getConcatDim();
    });
    break;
  case CollectiveKind::broadcast:
    opcode(plan::OpCode::Broadcast, plan::OpCode::BroadcastStart);
    withEitherForm<BroadcastOp, BroadcastStartOp>(
        op, [&](auto m) { o.root = m.getRoot(); });
    break;
  case CollectiveKind::send:
    opcode(plan::OpCode::Send, plan::OpCode::SendStart);
    withEitherForm<SendOp, SendStartOp>(op,
                                        [&](auto m) { o.peer = m.getPeer(); });
    break;
  case CollectiveKind::recv:
    opcode(plan::OpCode::Recv, plan::OpCode::RecvStart);
    withEitherForm<RecvOp, RecvStartOp>(op,
                                        [&](auto m) { o.peer = m.getPeer(); });
    break;
  }
}

std::string locationString(Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

/// Module-wide tables: groups, parameters and state slots, shared by every
/// function of the plan.
class PlanExporter {
public:
  PlanExporter(ModuleOp module, const ::braid::ExportOptions &options)
      : module_(module), options_(options) {}

  FailureOr<std::vector<uint8_t>> run();

private:
  LogicalResult collectGroups();
  FailureOr<int> groupIndex(Operation *op, StringRef symbol);
  FailureOr<int> parameterIndex(ParameterOp op);
  FailureOr<int> packIndex(ParameterPackOp op);
  FailureOr<int> stateSlot(func::FuncOp func, unsigned argNumber);
  LogicalResult exportFunction(func::FuncOp func);

  ModuleOp module_;
  ::braid::ExportOptions options_;
  plan::PlanT plan_;
  llvm::StringMap<int> groups_;
  llvm::StringMap<int> parameters_;
  std::map<std::vector<int>, int> packs_; // pieces -> pack index
  llvm::StringMap<int> slots_;
};

/// Per-function state: tensor ids and async handle ids.
class FunctionExporter {
public:
  FunctionExporter(plan::FunctionT &out, const FunctionMemoryPlan &memory)
      : out_(out), memory_(memory) {}

  /// Tensor id of `v`, creating the tensor on first sight; a handle maps to
  /// the payload its wait yields.
  FailureOr<int> tensorId(Value v);
  FailureOr<int> handleId(Value handle);
  int numHandles() const { return int(handles_.size()); }

  // Kind/ref decisions made by the module exporter before ids are used.
  llvm::DenseMap<Value, std::pair<plan::TensorKind, int>> roles;

private:
  plan::FunctionT &out_;
  const FunctionMemoryPlan &memory_;
  llvm::DenseMap<Value, int> ids_;
  llvm::DenseMap<Value, int> handles_;
};

} // namespace

FailureOr<int> FunctionExporter::tensorId(Value v) {
  if (isa<HandleType>(v.getType())) {
    // The payload is the wait's result (send_start has none: no tensor).
    for (Operation *user : v.getUsers())
      if (auto wait = dyn_cast<WaitOp>(user))
        if (wait.getResult())
          return tensorId(wait.getResult());
    return emitError(v.getLoc()) << "async handle has no waited payload",
           failure();
  }
  auto it = ids_.find(v);
  if (it != ids_.end())
    return it->second;
  // Braid ops and bound arguments are verified; values of other ops are
  // checked here, so a plan never holds a tensor the runtime refuses.
  std::string what, owner = "function";
  if (auto result = dyn_cast<OpResult>(v)) {
    owner = result.getOwner()->getName().getStringRef().str();
    what = "result #" + std::to_string(result.getResultNumber());
  } else {
    what = "argument #" + std::to_string(cast<BlockArgument>(v).getArgNumber());
  }
  if (failed(checkTensorType(v.getLoc(), owner, what, v.getType())))
    return failure();
  auto dtype = dtypeOf(v.getLoc(), v.getType());
  if (failed(dtype))
    return failure();
  auto t = std::make_unique<plan::TensorT>();
  t->id = int(out_.tensors.size());
  t->shape = shapeOf(v.getType());
  t->dtype = *dtype;
  auto role = roles.find(v);
  if (role != roles.end()) {
    t->kind = role->second.first;
    t->ref = role->second.second;
  }
  if (t->kind == plan::TensorKind::Activation ||
      t->kind == plan::TensorKind::Input) {
    auto offset = memory_.offsets.find(v);
    if (offset == memory_.offsets.end())
      return emitError(v.getLoc()) << "value has no arena buffer", failure();
    t->buffer_offset = offset->second;
    t->buffer_size = memory_.sizes.lookup(v);
  }
  if (auto result = dyn_cast<OpResult>(v)) {
    t->name = result.getOwner()->getName().stripDialect().str() + "." +
              std::to_string(result.getResultNumber());
  } else {
    t->name = "arg" + std::to_string(cast<BlockArgument>(v).getArgNumber());
  }
  int id = t->id;
  out_.tensors.push_back(std::move(t));
  ids_[v] = id;
  return id;
}

FailureOr<int> FunctionExporter::handleId(Value handle) {
  auto it = handles_.find(handle);
  if (it != handles_.end())
    return it->second;
  int id = int(handles_.size());
  handles_[handle] = id;
  return id;
}

LogicalResult PlanExporter::collectGroups() {
  // The verifier bounds every group and the mesh; checked again here so the
  // int32 fields of the plan can never truncate a size.
  SmallVector<StringRef> names;
  SmallVector<int64_t> sizes64;
  for (auto group : module_.getOps<DeviceGroupOp>()) {
    names.push_back(group.getSymName());
    sizes64.push_back(int64_t(group.getSize()));
    if (failed(checkGroupSize(group.getLoc(), names.back(), sizes64.back())) ||
        failed(checkMesh(group.getLoc(), names, sizes64)))
      return failure();
  }
  std::vector<int> sizes(sizes64.begin(), sizes64.end());
  ::braid::rt::MeshLayout mesh = ::braid::rt::meshLayout(sizes);
  for (auto [i, group] : llvm::enumerate(module_.getOps<DeviceGroupOp>())) {
    auto g = std::make_unique<plan::DeviceGroupT>();
    g->name = group.getSymName().str();
    g->size = sizes[i];
    g->stride = mesh.strides[i];
    groups_[g->name] = int(plan_.groups.size());
    plan_.groups.push_back(std::move(g));
  }
  plan_.world_size = mesh.worldSize;
  return success();
}

FailureOr<int> PlanExporter::groupIndex(Operation *op, StringRef symbol) {
  auto it = groups_.find(symbol);
  if (it == groups_.end())
    return emitOpErrorAt(op, "names group @")
               << symbol << ", which is not a braid.device_group of the module",
           failure();
  return it->second;
}

FailureOr<int> PlanExporter::parameterIndex(ParameterOp op) {
  auto p = std::make_unique<plan::ParameterT>();
  p->name = op.getName().str();
  p->full_shape.assign(op.getFullShape().begin(), op.getFullShape().end());
  p->local_shape = shapeOf(op.getType());
  auto dtype = dtypeOf(op.getLoc(), op.getType());
  if (failed(dtype))
    return failure();
  p->dtype = *dtype;
  if (auto dim = op.getShardDim()) {
    auto group = groupIndex(op, *op.getGroup());
    if (failed(group))
      return failure();
    p->shard = std::make_unique<plan::ShardRuleT>();
    p->shard->dim = int(*dim);
    p->shard->group = *group;
    p->shard->shards = int(op.getShards().value_or(0));
    p->shard->blocks = int(op.getBlocks().value_or(1));
  }
  if (auto padded = op.getPaddedShape())
    p->padded_shape.assign(padded->begin(), padded->end());

  auto [it, inserted] =
      parameters_.try_emplace(p->name, int(plan_.parameters.size()));
  if (inserted) {
    plan_.parameters.push_back(std::move(p));
    return it->second;
  }
  // Every function reads the same parameter: the declarations must agree.
  const plan::ParameterT &seen = *plan_.parameters[size_t(it->second)];
  bool sameShard = (!seen.shard && !p->shard) ||
                   (seen.shard && p->shard &&
                    seen.shard->dim == p->shard->dim &&
                    seen.shard->group == p->shard->group &&
                    seen.shard->shards == p->shard->shards &&
                    seen.shard->blocks == p->shard->blocks);
  if (seen.full_shape != p->full_shape || seen.local_shape != p->local_shape ||
      seen.dtype != p->dtype || seen.padded_shape != p->padded_shape ||
      !sameShard)
    return emitOpErrorAt(op, "declares parameter '")
               << p->name
               << "' differently from an earlier function (shape, dtype, "
                  "padding or shard rule)",
           failure();
  return it->second;
}

FailureOr<int> PlanExporter::packIndex(ParameterPackOp op) {
  std::vector<int> pieces;
  for (Value v : op.getPieces()) {
    auto index = parameterIndex(v.getDefiningOp<ParameterOp>());
    if (failed(index))
      return failure();
    pieces.push_back(*index);
  }
  auto [it, inserted] =
      packs_.try_emplace(pieces, int(plan_.parameter_packs.size()));
  if (!inserted)
    return it->second;
  // The runtime stores each piece inside its one pack.
  for (const auto &[other, index] : packs_)
    if (index != it->second)
      for (int piece : pieces)
        if (llvm::is_contained(other, piece))
          return emitOpErrorAt(op, "packs parameter '")
                     << plan_.parameters[size_t(piece)]->name
                     << "' that another pack also holds; a parameter is "
                        "stored in at most one pack",
                 failure();
  auto pack = std::make_unique<plan::ParameterPackT>();
  pack->pieces = std::move(pieces);
  plan_.parameter_packs.push_back(std::move(pack));
  return it->second;
}

FailureOr<int> PlanExporter::stateSlot(func::FuncOp func, unsigned arg) {
  auto name = func.getArgAttrOfType<StringAttr>(arg, "braid.state");
  Type type = func.getArgument(arg).getType();
  auto dtype = dtypeOf(func.getArgument(arg).getLoc(), type);
  if (failed(dtype))
    return failure();
  auto [it, inserted] =
      slots_.try_emplace(name.getValue(), int(plan_.state.size()));
  if (inserted) {
    auto s = std::make_unique<plan::StateSlotT>();
    s->name = name.getValue().str();
    s->shape = shapeOf(type);
    s->dtype = *dtype;
    plan_.state.push_back(std::move(s));
    return it->second;
  }
  const plan::StateSlotT &seen = *plan_.state[size_t(it->second)];
  if (seen.shape != shapeOf(type) || seen.dtype != *dtype)
    return emitOpErrorAt(func, "state '")
               << name.getValue() << "' (argument #" << arg
               << ") has a different type than in an earlier function",
           failure();
  return it->second;
}

LogicalResult PlanExporter::exportFunction(func::FuncOp func) {
  FailureOr<std::optional<FunctionMemoryPlan>> attached =
      readAttachedMemoryPlan(func);
  if (failed(attached))
    return failure();
  FunctionMemoryPlan memory;
  if (*attached) {
    memory = std::move(**attached);
  } else {
    // Unplanned IR: one buffer after another, no reuse.
    auto planned = planFunctionMemory(func, /*reuse=*/false);
    if (failed(planned))
      return failure();
    memory = std::move(*planned);
  }

  auto out = std::make_unique<plan::FunctionT>();
  out->name = func.getSymName().str();
  out->arena_size = memory.arenaSize;
  FunctionExporter fx(*out, memory);

  // Roles of arguments: inputs and state slots.
  llvm::StringMap<int> stateArgTensor;
  for (BlockArgument arg : func.getArguments()) {
    unsigned n = arg.getArgNumber();
    if (auto input = func.getArgAttrOfType<StringAttr>(n, "braid.input")) {
      fx.roles[arg] = {plan::TensorKind::Input, int(out->inputs.size())};
      auto id = fx.tensorId(arg);
      if (failed(id))
        return failure();
      auto b = std::make_unique<plan::BindingT>();
      b->name = input.getValue().str();
      b->tensor = *id;
      out->inputs.push_back(std::move(b));
    } else if (func.getArgAttr(n, "braid.state")) {
      auto slot = stateSlot(func, n);
      if (failed(slot))
        return failure();
      fx.roles[arg] = {plan::TensorKind::State, *slot};
      auto id = fx.tensorId(arg);
      if (failed(id))
        return failure();
      stateArgTensor[func.getArgAttrOfType<StringAttr>(n, "braid.state")
                         .getValue()] = *id;
    } else {
      return emitOpErrorAt(func, "argument #")
                 << n
                 << " is neither a 'braid.input' nor a 'braid.state'; the "
                    "plan cannot bind it",
             failure();
    }
  }

  auto &ops = out->ops;
  int numEvents = 0;
  // An IR event is the plan events a wait on it must wait for (below).
  llvm::DenseMap<Value, SmallVector<int>> eventIds;
  std::map<int64_t, int> lastOpOfStream;              // plan op index
  std::map<int64_t, std::vector<int>> pendingWaits;   // events per stream
  std::vector<int64_t> eventStream; // the stream each plan event is recorded on
  // Events of waits on another stream than their start: (start op, event).
  std::vector<std::pair<int, int>> recordAfterGroup;
  llvm::DenseMap<Value, std::pair<int, int64_t>> startOf; // handle -> op, stream
  for (Operation &op : func.getBody().front()) {
    if (auto param = dyn_cast<ParameterOp>(op)) {
      auto index = parameterIndex(param);
      if (failed(index))
        return failure();
      fx.roles[param.getResult()] = {plan::TensorKind::Parameter, *index};
      continue;
    }
    if (auto pack = dyn_cast<ParameterPackOp>(op)) {
      auto index = packIndex(pack);
      if (failed(index))
        return failure();
      fx.roles[pack.getResult()] = {plan::TensorKind::PackedParameter, *index};
      continue;
    }
    // Events are attributes of plan ops: a record marks the last op issued
    // so far on its stream, a wait holds back the next op on its stream.
    // An IR record also covers what its stream has waited for since that
    // op (as cudaEventRecord after cudaStreamWaitEvent does): those waits
    // are not on any plan op yet, so a wait on this event waits for their
    // events too.
    if (auto record = dyn_cast<EventRecordOp>(op)) {
      int64_t stream = getStream(&op).value_or(0);
      SmallVector<int> ids;
      if (auto last = lastOpOfStream.find(stream);
          last != lastOpOfStream.end()) {
        ids.push_back(numEvents++);
        eventStream.push_back(stream);
        ops[size_t(last->second)]->record_events.push_back(ids.back());
      }
      if (auto waits = pendingWaits.find(stream); waits != pendingWaits.end())
        ids.append(waits->second.begin(), waits->second.end());
      // Empty: nothing issued or awaited yet, the event is complete.
      eventIds[record.getEvent()] = std::move(ids);
      continue;
    }
    if (auto wait = dyn_cast<EventWaitOp>(op)) {
      auto ids = eventIds.find(wait.getEvent());
      if (ids != eventIds.end()) {
        int64_t stream = getStream(&op).value_or(0);
        std::vector<int> &waits = pendingWaits[stream];
        // An event recorded on this very stream (relayed back to it) is
        // already behind it: waiting for it would only hold back the next
        // op, and split a point-to-point group that op belongs to.
        for (int id : ids->second)
          if (eventStream[size_t(id)] != stream &&
              !llvm::is_contained(waits, id))
            waits.push_back(id);
      }
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        auto id = fx.tensorId(value);
        if (failed(id))
          return failure();
        if (auto name = func.getResultAttrOfType<StringAttr>(i, "braid.output")) {
          auto b = std::make_unique<plan::BindingT>();
          b->name = name.getValue().str();
          b->tensor = *id;
          // Verified by the dialect: {group, dim, size}.
          if (auto sharded = func.getResultAttrOfType<DictionaryAttr>(
                  i, "braid.sharded")) {
            auto group = groupIndex(
                func, sharded.getAs<FlatSymbolRefAttr>("group").getValue());
            if (failed(group))
              return failure();
            b->shard_group = *group;
            b->shard_dim = sharded.getAs<IntegerAttr>("dim").getInt();
            b->full_size = sharded.getAs<IntegerAttr>("size").getInt();
          }
          out->outputs.push_back(std::move(b));
        } else if (auto state =
                       func.getResultAttrOfType<StringAttr>(i, "braid.state")) {
          auto in = stateArgTensor.find(state.getValue());
          if (in == stateArgTensor.end())
            return emitOpErrorAt(func, "result #")
                       << i << " updates state '" << state.getValue()
                       << "' that no argument reads",
                   failure();
          auto b = std::make_unique<plan::StateBindingT>();
          b->slot = slots_.lookup(state.getValue());
          b->input = in->second;
          b->output = *id;
          out->state.push_back(std::move(b));
        } else {
          return emitOpErrorAt(func, "result #")
                     << i << " is neither a 'braid.output' nor a "
                     << "'braid.state'; the plan cannot bind it",
                 failure();
        }
      }
      continue;
    }
    // Results of ops that update state in place alias their slot.
    for (Value r : op.getResults())
      if (auto arg = stateArgumentOf(r); arg && !isa<BlockArgument>(r))
        fx.roles[r] = fx.roles.lookup(func.getArgument(*arg));

    auto o = std::make_unique<plan::OpT>();
    if (!isa<UnknownLoc>(op.getLoc()))
      o->loc = locationString(op.getLoc());
    bool isStart = op.hasTrait<OpTrait::BraidAsyncStart>();
    LogicalResult ok =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](MatmulOp m) {
              o->opcode = plan::OpCode::Matmul;
              o->transpose_a = m.getTransposeA();
              o->transpose_b = m.getTransposeB();
              o->matmul_bias = bool(m.getBias());
              o->matmul_residual = bool(m.getResidual());
              if (auto gelu = m.getGelu()) {
                o->matmul_gelu = true;
                o->gelu_approximation = *gelu == GeluApproximation::tanh
                                            ? plan::GeluApproximation::Tanh
                                            : plan::GeluApproximation::None;
              }
              return success();
            })
            .Case([&](AddOp) {
              o->opcode = plan::OpCode::Add;
              return success();
            })
            .Case([&](MulOp) {
              o->opcode = plan::OpCode::Mul;
              return success();
            })
            .Case([&](RmsNormOp m) {
              o->opcode = plan::OpCode::RmsNorm;
              o->epsilon = m.getEpsilon().convertToDouble();
              return success();
            })
            .Case([&](AddRmsNormOp m) {
              o->opcode = plan::OpCode::AddRmsNorm;
              o->epsilon = m.getEpsilon().convertToDouble();
              return success();
            })
            .Case([&](LayerNormOp m) {
              o->opcode = plan::OpCode::LayerNorm;
              o->epsilon = m.getEpsilon().convertToDouble();
              return success();
            })
            .Case([&](RopeOp m) {
              o->opcode = plan::OpCode::Rope;
              o->theta = m.getTheta().convertToDouble();
              if (std::optional<ArrayRef<double>> inv = m.getInvFreq())
                o->rope_inv_freq.assign(inv->begin(), inv->end());
              if (std::optional<APFloat> af = m.getAttentionFactor())
                o->rope_attention_factor = af->convertToDouble();
              o->rope_rotary_dim = int64_t(m.getRotaryDim().value_or(0));
              return success();
            })
            .Case([&](AttentionOp m) {
              o->opcode = plan::OpCode::Attention;
              o->causal = m.getCausal();
              o->num_heads = m.getNumHeads();
              o->num_kv_heads = m.getNumKvHeads();
              o->head_dim = m.getHeadDim();
              o->scale = m.getScale() ? m.getScale()->convertToDouble() : 0.0;
              o->sliding_window = int64_t(m.getSlidingWindow().value_or(0));
              return success();
            })
            .Case([&](SiluOp) {
              o->opcode = plan::OpCode::Silu;
              return success();
            })
            .Case([&](SwigluOp) {
              o->opcode = plan::OpCode::Swiglu;
              return success();
            })
            .Case([&](GeluOp m) {
              o->opcode = plan::OpCode::Gelu;
              o->gelu_approximation =
                  m.getApproximation() == GeluApproximation::tanh
                      ? plan::GeluApproximation::Tanh
                      : plan::GeluApproximation::None;
              return success();
            })
            .Case([&](ActivationOp m) {
              o->opcode = plan::OpCode::Activation;
              o->activation = plan::ActivationKind(int(m.getKind()));
              return success();
            })
            .Case([&](EmbeddingOp m) {
              o->opcode = plan::OpCode::Embedding;
              if (auto vg = m.getVocabGroup()) {
                auto g = groupIndex(&op, *vg);
                if (failed(g))
                  return failure();
                o->vocab_group = *g;
              }
              return success();
            })
            .Case([&](SoftmaxOp m) {
              o->opcode = plan::OpCode::Softmax;
              o->dim = m.getDim();
              return success();
            })
            .Case([&](SliceOp m) {
              o->opcode = plan::OpCode::Slice;
              o->offsets.assign(m.getOffsets().begin(), m.getOffsets().end());
              o->sizes.assign(m.getSizes().begin(), m.getSizes().end());
              return success();
            })
            .Case([&](ConcatOp m) {
              o->opcode = plan::OpCode::Concat;
              o->dim = m.getDim();
              return success();
            })
            .Case([&](ReshapeOp) {
              o->opcode = plan::OpCode::Reshape;
              return success();
            })
            .Case([&](CollectiveOpInterface c) {
              exportCollective(c, *o);
              auto g = groupIndex(&op, c.getGroupAttr().getValue());
              if (failed(g))
                return failure();
              o->group = *g;
              return success();
            })
            .Case([&](WaitOp m) {
              o->opcode = plan::OpCode::Wait;
              auto h = fx.handleId(m.getHandle());
              if (failed(h))
                return failure();
              o->handle = *h;
              return success();
            })
            .Default([&](Operation *other) {
              return emitOpErrorAt(other, "has no plan opcode"), failure();
            });
    if (failed(ok))
      return failure();
    // Scheduled IR names each op's stream (verified by the dialect);
    // unscheduled IR runs on stream 0.
    int64_t stream = getStream(&op).value_or(0);
    o->stream = int(stream);
    out->num_streams = std::max(out->num_streams, o->stream + 1);
    if (auto waits = pendingWaits.find(stream); waits != pendingWaits.end()) {
      o->wait_events = std::move(waits->second);
      pendingWaits.erase(waits);
    }
    if (isStart)
      startOf[op.getResult(0)] = {int(ops.size()), stream};
    // A wait on another stream than its start waits for the collective
    // through an event recorded right after the start.
    if (auto wait = dyn_cast<WaitOp>(op)) {
      auto [startIndex, startStream] = startOf.lookup(wait.getHandle());
      if (startStream != stream) {
        int id = numEvents++;
        eventStream.push_back(startStream);
        recordAfterGroup.push_back({startIndex, id}); // placed below
        o->wait_events.push_back(id);
      }
    }
    lastOpOfStream[stream] = int(ops.size());

    if (!isa<WaitOp>(op)) {
      for (Value operand : op.getOperands()) {
        auto id = fx.tensorId(operand);
        if (failed(id))
          return failure();
        o->operands.push_back(*id);
      }
      if (isStart) {
        auto h = fx.handleId(op.getResult(0));
        if (failed(h))
          return failure();
        o->handle = *h;
        if (cast<CollectiveOpInterface>(op).getReceivedType()) {
          auto payload = fx.tensorId(op.getResult(0));
          if (failed(payload))
            return failure();
          o->results.push_back(*payload);
        }
      } else {
        for (Value r : op.getResults()) {
          auto id = fx.tensorId(r);
          if (failed(id))
            return failure();
          o->results.push_back(*id);
        }
      }
    }
    ops.push_back(std::move(o));
  }
  out->num_handles = fx.numHandles();
  // A wait on another stream than its start waits for an event recorded
  // after the start's point-to-point group (runtime/P2PGroups.h), not on a
  // member inside it: an event there would end the group early and split
  // an exchange that only completes as one (a deadlock); the group's work
  // completes together anyway. The groups are the finished plan's, found
  // without these events: one on a group's last member changes none.
  const std::vector<int> groupLast = ::braid::rt::p2pGroupLasts(
      ::braid::rt::p2pGroupEnds(ops.size(), [&](size_t i) {
        return ::braid::rt::p2pGroupView(*ops[i]);
      }));
  for (auto [start, id] : recordAfterGroup) {
    int last = groupLast[size_t(start)];
    ops[size_t(last >= 0 ? last : start)]->record_events.push_back(id);
  }
  out->num_events = numEvents;
  plan_.functions.push_back(std::move(out));
  return success();
}

FailureOr<std::vector<uint8_t>> PlanExporter::run() {
  plan_.version = ::braid::rt::kPlanFormatVersion;
  // Anything else at the top level (a nested module's functions, say)
  // would be left out of the plan without a word.
  for (Operation &op : module_.getBody()->getOperations())
    if (!isa<func::FuncOp, DeviceGroupOp>(op))
      return emitError(op.getLoc())
                 << "'" << op.getName()
                 << "' at the top level is not part of a plan: only "
                    "func.func and braid.device_group are exported",
             failure();
  if (failed(collectGroups()))
    return failure();
  for (auto func : module_.getOps<func::FuncOp>()) {
    if (func.isExternal() || func.isPrivate())
      continue;
    if (failed(exportFunction(func)))
      return failure();
  }
  if (plan_.functions.empty())
    return emitError(module_.getLoc(),
                     "no public function to export as a plan entry"),
           failure();

  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(plan::Plan::Pack(fbb, &plan_), plan::PlanIdentifier());
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                             fbb.GetBufferPointer() + fbb.GetSize());
  // The runtime's loader is the judge of a valid plan.
  ::braid::rt::LoadOptions structural;
  structural.checkSchedule = false;
  auto loaded = ::braid::rt::loadPlan(bytes, structural);
  if (!loaded)
    return emitError(module_.getLoc(),
                     "exported plan is rejected by the runtime "
                     "loader (an exporter bug): ")
               << loaded.status().message(),
           failure();
  // Never emit a schedule the runtime would refuse.
  if (options_.checkSchedule) {
    ::braid::rt::Status checked = ::braid::rt::checkPlanSchedule(*loaded);
    if (!checked) {
      // The loader counts plan ops; braid-verify-schedule, which checks the
      // same rules on the IR, names the ops at their locations.
      PassManager verify(module_.getContext());
      verify.enableVerifier(false);
      verify.addPass(createBraidVerifySchedulePass());
      bool named = failed(verify.run(module_));
      return emitError(module_.getLoc(),
                       "refusing to emit an unsafe schedule: ")
                 << checked.message()
                 << (named ? " (op numbers count the plan's ops; the errors "
                             "above name them in the IR)"
                           : " (op numbers count the plan's ops)"),
             failure();
    }
  }
  return bytes;
}

namespace braid {
FailureOr<std::vector<uint8_t>> exportPlan(ModuleOp module,
                                           const ExportOptions &options) {
  return PlanExporter(module, options).run();
}
} // namespace braid
