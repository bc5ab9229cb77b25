//===- BraidOps.cpp - braid op verifiers and folders ----------------------===//
#include "dialect/BraidOps.h"
#include "dialect/ShapeChecks.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::braid;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Resolves `group` to its braid.device_group and returns the group size.
static FailureOr<int64_t> lookupGroupSize(Operation *op,
                                          FlatSymbolRefAttr group,
                                          SymbolTableCollection &tables) {
  auto g = tables.lookupNearestSymbolFrom<DeviceGroupOp>(op, group);
  if (!g)
    return op->emitOpError("group ")
           << group << " does not name a braid.device_group";
  // Normally verified with the group already; never divide by a bad size.
  if (failed(checkGroupSize(op->getLoc(), g.getSymName(), g.getSize())))
    return failure();
  return g.getSize();
}

/// Short op name for messages: "all_gather" for braid.all_gather.
static StringRef shortName(Operation *op) {
  return op->getName().stripDialect();
}

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// The type a collective produces: its result, or the payload of the handle
/// its start op returns.
template <typename OpT>
static Type collectiveResultType(OpT op) {
  if constexpr (OpT::template hasTrait<OpTrait::BraidAsyncStart>())
    return cast<HandleType>(op.getHandle().getType()).getPayload();
  else
    return op.getResult().getType();
}

LogicalResult mlir::braid::verifyTensorLimits(Operation *op) {
  auto check = [&](StringRef kind, unsigned i, Type type) -> LogicalResult {
    if (auto handle = dyn_cast<HandleType>(type)) {
      if (isa<NoneType>(handle.getPayload()))
        return success();
      return checkTensorType(op->getLoc(), shortName(op),
                             (kind + " #" + Twine(i) + " handle payload").str(),
                             handle.getPayload());
    }
    if (!isa<TensorType>(type))
      return success(); // events; other types are refused by the op's ODS
    return checkTensorType(op->getLoc(), shortName(op),
                           (kind + " #" + Twine(i)).str(), type);
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (failed(check("operand", i, v.getType())))
      return failure();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (failed(check("result", i, v.getType())))
      return failure();
  return success();
}

LogicalResult mlir::braid::verifyAsyncStartHandle(Operation *op) {
  Value handle = op->getResult(0);
  if (!isa<HandleType>(handle.getType()))
    return op->emitOpError("must return a !braid.handle");
  int64_t waits = 0;
  for (Operation *user : handle.getUsers()) {
    if (!isa<WaitOp>(user))
      return op->emitOpError("handle is used by '")
             << user->getName() << "'; only braid.wait may consume it";
    ++waits;
  }
  if (waits != 1)
    return op->emitOpError("handle must be consumed by exactly one "
                           "braid.wait, found ")
           << waits;
  return success();
}

//===----------------------------------------------------------------------===//
// Streams and the collective interface
//===----------------------------------------------------------------------===//

/// Streams a plan can name (the runtime keeps per-stream resources).
static constexpr int64_t kMaxStreams = 256;

std::optional<int64_t> mlir::braid::getStream(Operation *op) {
  if (auto s = op->getAttrOfType<IntegerAttr>(BraidDialect::kStreamAttrName))
    return s.getInt();
  return std::nullopt;
}

void mlir::braid::setStream(Operation *op, int64_t stream) {
  op->setAttr(BraidDialect::kStreamAttrName,
              IntegerAttr::get(IntegerType::get(op->getContext(), 64), stream));
}

bool mlir::braid::isScheduled(Operation *root) {
  return root
      ->walk([](Operation *op) {
        return getStream(op) || op->hasTrait<OpTrait::BraidAsyncStart>()
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

bool mlir::braid::hasAsyncForm(Operation *op) {
  auto coll = dyn_cast<CollectiveOpInterface>(op);
  if (!coll || coll.isAsyncStart() || op->getNumOperands() != 1 ||
      op->getNumResults() != 1)
    return false;
  std::string start = (op->getName().getStringRef() + "_start").str();
  return OperationName(start, op->getContext()).isRegistered();
}

Operation *mlir::braid::createAsyncStart(OpBuilder &b, Operation *op) {
  OperationState state(op->getLoc(),
                       (op->getName().getStringRef() + "_start").str());
  state.addOperands(op->getOperands());
  state.addAttributes(op->getAttrs());
  state.addTypes(HandleType::get(op->getContext(), op->getResult(0).getType()));
  return b.create(state);
}

bool mlir::braid::isUnscheduledOp(Operation *op) {
  return isa<ParameterOp, ParameterPackOp>(op) ||
         op->hasTrait<OpTrait::IsTerminator>();
}

/// The nearest op before (or after) `op` in its block that launches work.
static Operation *scheduledNeighbor(Operation *op, bool forward) {
  for (Operation *n = forward ? op->getNextNode() : op->getPrevNode(); n;
       n = forward ? n->getNextNode() : n->getPrevNode())
    if (!isUnscheduledOp(n))
      return n;
  return nullptr;
}

LogicalResult BraidDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  if (attr.getName() != kStreamAttrName)
    return success(); // braid.buffers etc.: checked by their readers
  auto value = dyn_cast<IntegerAttr>(attr.getValue());
  if (!value || !value.getType().isSignlessInteger(64))
    return op->emitOpError("braid.stream must be an i64 stream number, got ")
           << attr.getValue();
  if (value.getInt() < 0 || value.getInt() >= kMaxStreams)
    return op->emitOpError("braid.stream must be in [0, ")
           << kMaxStreams - 1 << "], got " << value.getInt();
  if (isUnscheduledOp(op))
    return op->emitOpError("launches no work and takes no braid.stream");
  // Every scheduled op of a block or none: checking both neighbours of each
  // op that has one makes the rule hold for the whole block in O(1) per op.
  for (bool forward : {false, true})
    if (Operation *n = scheduledNeighbor(op, forward); n && !getStream(n))
      return op->emitOpError("has a braid.stream but the ")
             << (forward ? "next" : "previous") << " op '" << n->getName()
             << "' does not; scheduled IR puts braid.stream on every op "
                "except parameters and terminators";
  return success();
}

//===----------------------------------------------------------------------===//
// Entry-function bindings: braid.input / braid.state arguments and
// braid.output / braid.state results name what a plan binds. Checked here so
// that the message names the function, the argument and the name instead of
// surfacing later as a plan the runtime refuses.
//===----------------------------------------------------------------------===//

static constexpr StringLiteral kInputAttr = "braid.input";
static constexpr StringLiteral kOutputAttr = "braid.output";
static constexpr StringLiteral kStateAttr = "braid.state";
static constexpr StringLiteral kShardedAttr = "braid.sharded";

/// "func.func @prefill"
static std::string functionLabel(Operation *op) {
  std::string s = op->getName().getStringRef().str();
  if (auto sym =
          op->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
    s += " @" + sym.getValue().str();
  return s;
}

/// No two arguments (or results) carry the same `attrName` value. The full
/// scan runs once per function, from the first entry carrying the attribute
/// (every later one finds an earlier carrier and stops), so verifying a
/// function stays linear in its number of arguments.
static LogicalResult
checkUniqueBinding(Operation *op, StringRef kind, unsigned index,
                   unsigned count, function_ref<DictionaryAttr(unsigned)> dict,
                   StringRef attrName) {
  for (unsigned j = index; j-- > 0;)
    if (DictionaryAttr d = dict(j); d && d.get(attrName))
      return success();
  llvm::StringMap<unsigned> seen;
  for (unsigned j = index; j < count; ++j) {
    DictionaryAttr d = dict(j);
    auto value = d ? d.getAs<StringAttr>(attrName) : StringAttr();
    if (!value)
      continue;
    auto [it, inserted] = seen.try_emplace(value.getValue(), j);
    if (!inserted)
      return emitError(op->getLoc())
             << functionLabel(op) << ": " << kind << " #" << j << " and "
             << kind << " #" << it->second << " are both " << attrName << " '"
             << value.getValue() << "'";
  }
  return success();
}

/// The checks both argument and result bindings share: a non-empty string
/// name, one role per entry, a tensor type the runtime can hold, and no name
/// bound twice.
static LogicalResult checkBinding(FunctionOpInterface fn, StringRef kind,
                                  unsigned index, NamedAttribute attr,
                                  StringRef otherRole, Type type,
                                  unsigned count,
                                  function_ref<DictionaryAttr(unsigned)> dict) {
  Operation *op = fn.getOperation();
  StringRef name = attr.getName().getValue();
  std::string label = functionLabel(op);
  auto value = dyn_cast<StringAttr>(attr.getValue());
  if (!value || value.getValue().empty())
    return emitError(op->getLoc())
           << label << ": " << kind << " #" << index << ": " << name
           << " must be a non-empty string, got " << attr.getValue();
  if (DictionaryAttr d = dict(index); d && d.get(otherRole))
    return emitError(op->getLoc())
           << label << ": " << kind << " #" << index << " is both " << name
           << " and " << otherRole;
  std::string what = (kind + " #" + Twine(index) + " (" + name + " '" +
                      value.getValue() + "')")
                         .str();
  if (failed(checkTensorType(op->getLoc(), label, what, type)))
    return failure();
  return checkUniqueBinding(op, kind, index, count, dict, name);
}

LogicalResult BraidDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kShardedAttr)
    return op->emitOpError() << name
                             << " is an attribute of a function's results "
                                "(outputs); inputs are whole";
  if (name != kInputAttr && name != kStateAttr)
    return success(); // braid.buffer: checked by its readers
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn || regionIndex != 0)
    return op->emitOpError() << name
                             << " is an attribute of a function's "
                                "arguments";
  return checkBinding(fn, "argument", argIndex, attr,
                      name == kInputAttr ? kStateAttr : kInputAttr,
                      fn.getArgumentTypes()[argIndex], fn.getNumArguments(),
                      [&](unsigned j) { return fn.getArgAttrDict(j); });
}

/// `braid.sharded = {group = @g, dim = d, size = n}` on a braid.output
/// result: each rank returns its block of dim d, and the whole output is
/// the blocks of @g's members in group-rank order, cut to n (the rest is
/// padding), so 1 <= n <= the result's dim d x @g's size.
static LogicalResult checkSharded(FunctionOpInterface fn, unsigned index,
                                  Attribute value) {
  Operation *op = fn.getOperation();
  auto diag = [&]() {
    return emitError(op->getLoc()) << functionLabel(op) << ": result #" << index
                                   << ": " << kShardedAttr << " ";
  };
  DictionaryAttr d = fn.getResultAttrDict(index);
  if (!d || !d.get(kOutputAttr))
    return diag() << "needs " << kOutputAttr
                  << " on the same result: only outputs are gathered";
  auto dict = dyn_cast<DictionaryAttr>(value);
  auto group = dict ? dict.getAs<FlatSymbolRefAttr>("group") : nullptr;
  auto dim = dict ? dict.getAs<IntegerAttr>("dim") : nullptr;
  auto size = dict ? dict.getAs<IntegerAttr>("size") : nullptr;
  // i64 only: getInt() of a wider integer would assert.
  auto isI64 = [](IntegerAttr a) {
    return a && a.getType().isSignlessInteger(64);
  };
  if (!group || !isI64(dim) || !isI64(size) || dict.size() != 3)
    return diag() << "must be {group = @g, dim = d : i64, size = n : i64}, "
                     "got "
                  << value;
  // Checked here too: the result's own binding may be verified later.
  Type resultType = fn.getResultTypes()[index];
  std::string what = ("result #" + Twine(index)).str();
  if (failed(
          checkTensorType(op->getLoc(), functionLabel(op), what, resultType)))
    return failure();
  auto type = cast<RankedTensorType>(resultType);
  int64_t rank = type.getRank();
  if (dim.getInt() < 0 || dim.getInt() >= rank)
    return diag() << "dim " << dim.getInt() << " is not a dim of "
                  << fn.getResultTypes()[index];
  auto g = SymbolTable::lookupNearestSymbolFrom<DeviceGroupOp>(op, group);
  if (!g)
    return diag() << "group " << group << " does not name a braid.device_group";
  if (failed(checkGroupSize(op->getLoc(), g.getSymName(), g.getSize())))
    return failure();
  // Both factors are at most 2^40 (checkTensorType) and 2^20
  // (checkGroupSize): the product fits.
  int64_t whole = type.getDimSize(dim.getInt()) * g.getSize();
  if (size.getInt() < 1 || size.getInt() > whole)
    return diag() << "size " << size.getInt() << " must be in [1, " << whole
                  << "]: " << g.getSize() << " blocks of "
                  << type.getDimSize(dim.getInt()) << " along dim "
                  << dim.getInt();
  // The gathered output is a tensor the runtime holds: the same limits.
  SmallVector<int64_t> shape(type.getShape());
  shape[size_t(dim.getInt())] = size.getInt();
  return checkTensorType(op->getLoc(), functionLabel(op),
                         what + " gathered (" + kShardedAttr.str() + ")",
                         type.clone(shape));
}

LogicalResult BraidDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name != kOutputAttr && name != kStateAttr && name != kShardedAttr)
    return success();
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn || regionIndex != 0)
    return op->emitOpError() << name
                             << " is an attribute of a function's "
                                "results";
  if (name == kShardedAttr)
    return checkSharded(fn, resultIndex, attr.getValue());
  auto resultDict = [&](unsigned j) { return fn.getResultAttrDict(j); };
  if (failed(checkBinding(fn, "result", resultIndex, attr,
                          name == kOutputAttr ? kStateAttr : kOutputAttr,
                          fn.getResultTypes()[resultIndex], fn.getNumResults(),
                          resultDict)))
    return failure();
  if (name != kStateAttr)
    return success();
  // A state result replaces the slot its argument reads: same type. Checked
  // for every state result from the first one (linear, as above).
  for (unsigned j = resultIndex; j-- > 0;)
    if (DictionaryAttr d = resultDict(j); d && d.get(kStateAttr))
      return success();
  llvm::StringMap<unsigned> argOf;
  for (unsigned a = 0; a < fn.getNumArguments(); ++a)
    if (DictionaryAttr d = fn.getArgAttrDict(a))
      if (auto state = d.getAs<StringAttr>(kStateAttr))
        argOf.try_emplace(state.getValue(), a);
  for (unsigned j = resultIndex; j < fn.getNumResults(); ++j) {
    DictionaryAttr d = resultDict(j);
    auto state = d ? d.getAs<StringAttr>(kStateAttr) : StringAttr();
    if (!state)
      continue;
    auto arg = argOf.find(state.getValue());
    if (arg == argOf.end())
      continue; // the exporter names a state no argument reads
    Type argType = fn.getArgumentTypes()[arg->second];
    if (argType != fn.getResultTypes()[j])
      return emitError(op->getLoc())
             << functionLabel(op) << ": result #" << j << " (" << kStateAttr
             << " '" << state.getValue() << "') is " << fn.getResultTypes()[j]
             << " but argument #" << arg->second << " of that state is "
             << argType;
  }
  return success();
}

Value mlir::braid::detail::sentValue(Operation *op) {
  return op->getNumOperands() ? op->getOperand(0) : Value();
}

Type mlir::braid::detail::receivedType(Operation *op) {
  if (op->hasTrait<OpTrait::BraidAsyncStart>()) {
    Type payload = cast<HandleType>(op->getResult(0).getType()).getPayload();
    return isa<NoneType>(payload) ? Type() : payload;
  }
  return op->getNumResults() ? op->getResult(0).getType() : Type();
}

Type mlir::braid::detail::sizingType(Operation *op) {
  // all_gather is sized by its output; recv sends nothing.
  switch (cast<CollectiveOpInterface>(op).getCollectiveKind()) {
  case CollectiveKind::all_gather:
  case CollectiveKind::recv:
    return receivedType(op);
  case CollectiveKind::all_reduce:
  case CollectiveKind::reduce_scatter:
  case CollectiveKind::all_to_all:
  case CollectiveKind::broadcast:
  case CollectiveKind::send:
    return sentValue(op).getType();
  }
  llvm_unreachable("unknown collective kind");
}

#include "dialect/BraidInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// DeviceGroupOp / ParameterOp
//===----------------------------------------------------------------------===//

LogicalResult DeviceGroupOp::verify() {
  if (failed(checkGroupSize(getLoc(), getSymName(), getSize())))
    return failure();
  // The mesh of this group and the ones declared before it. The scan stops
  // past kMaxDeviceGroups groups, so verifying every group stays linear in
  // the module's size; the last group checks the whole mesh.
  SmallVector<StringRef> names{getSymName()};
  SmallVector<int64_t> sizes{int64_t(getSize())};
  for (Operation *p = getOperation()->getPrevNode();
       p && (int64_t)names.size() <= kMaxDeviceGroups; p = p->getPrevNode())
    if (auto g = dyn_cast<DeviceGroupOp>(p)) {
      names.push_back(g.getSymName());
      sizes.push_back(int64_t(g.getSize()));
    }
  std::reverse(names.begin(), names.end());
  std::reverse(sizes.begin(), sizes.end());
  return checkMesh(getLoc(), names, sizes);
}

int64_t ParameterOp::getNumShards(int64_t groupSize) {
  if (!getShardDim())
    return 1;
  return getShards().value_or(groupSize);
}

LogicalResult
ParameterOp::verifySymbolUses(SymbolTableCollection &tables) {
  int64_t groupSize = 1;
  if (getGroupAttr()) {
    auto n = lookupGroupSize(*this, getGroupAttr(), tables);
    if (failed(n))
      return failure();
    groupSize = *n;
  } else if (getShards() || getBlocks()) {
    return emitOpError("shards/blocks need 'shard_dim ... on @group'");
  }
  ArrayRef<int64_t> padded;
  if (auto p = getPaddedShape())
    padded = *p;
  return checkParameter(getLoc(), getName(), getFullShape(), padded,
                        tensorType(getResult()), getShardDim(), groupSize,
                        getNumShards(groupSize), getNumBlocks());
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  RankedTensorType result = tensorType(getResult());
  if (failed(checkMatmul(getLoc(), tensorType(getA()), tensorType(getB()),
                         result, getTransposeA(), getTransposeB())))
    return failure();
  if (Value residual = getResidual()) {
    if (residual.getType() != result)
      return emitOpError("residual must be ")
             << result << " (the result's type), got " << residual.getType();
    if (getGelu())
      return emitOpError("cannot have both a residual and a GELU: cuBLASLt "
                         "adds the residual before the activation");
  }
  if (!getBias())
    return success();
  RankedTensorType bias = tensorType(getBias());
  if (bias.getElementType() != result.getElementType() || bias.getRank() != 1 ||
      bias.getDimSize(0) != result.getShape().back())
    return emitOpError("bias must be [")
           << result.getShape().back() << "] of " << result.getElementType()
           << " (the result's last dim and element type), got " << bias;
  return success();
}

LogicalResult AddOp::verify() {
  return checkBroadcastBinary(getLoc(), "add", tensorType(getLhs()),
                              tensorType(getRhs()), tensorType(getResult()));
}

LogicalResult MulOp::verify() {
  return checkBroadcastBinary(getLoc(), "mul", tensorType(getLhs()),
                              tensorType(getRhs()), tensorType(getResult()));
}

LogicalResult RmsNormOp::verify() {
  return checkNorm(getLoc(), "rms_norm", tensorType(getInput()),
                   {tensorType(getWeight())}, tensorType(getResult()),
                   getEpsilon().convertToDouble());
}

LogicalResult AddRmsNormOp::verify() {
  RankedTensorType x = tensorType(getInput());
  if (tensorType(getResidual()) != x || tensorType(getSum()) != x)
    return emitOpError("input, residual and sum must have one type, got ")
           << x << ", " << getResidual().getType() << " and "
           << getSum().getType();
  return checkNorm(getLoc(), "add_rms_norm", x, {tensorType(getWeight())},
                   tensorType(getResult()), getEpsilon().convertToDouble());
}

LogicalResult LayerNormOp::verify() {
  return checkNorm(getLoc(), "layer_norm", tensorType(getInput()),
                   {tensorType(getWeight()), tensorType(getBias())},
                   tensorType(getResult()), getEpsilon().convertToDouble());
}

LogicalResult RopeOp::verify() {
  if (failed(checkRope(getLoc(), tensorType(getInput()),
                       tensorType(getPositions()), tensorType(getResult()),
                       getTheta().convertToDouble(),
                       int64_t(getRotaryDim().value_or(0)))))
    return failure();
  int64_t headDim = tensorType(getInput()).getDimSize(3);
  int64_t rotary = headDim;
  if (std::optional<uint64_t> r = getRotaryDim()) {
    rotary = int64_t(*r);
    if (rotary < 2 || rotary > headDim || rotary % 2 != 0)
      return emitOpError("rotary_dim ")
             << rotary << " must be even and in [2, " << headDim
             << "], the head dim";
  }
  if (std::optional<ArrayRef<double>> inv = getInvFreq()) {
    int64_t pairs = rotary / 2;
    if (int64_t(inv->size()) != pairs)
      return emitOpError("inv_freq has ")
             << inv->size() << " frequencies; the "
             << (rotary == headDim ? "head dim " : "rotary dim ") << rotary
             << " has " << pairs << " pairs";
    for (auto [i, f] : llvm::enumerate(*inv))
      if (!(f > 0.0) || !std::isfinite(f))
        return emitOpError("inv_freq[")
               << i << "] is " << f << "; frequencies must be positive and "
               << "finite";
  }
  if (std::optional<APFloat> af = getAttentionFactor()) {
    double v = af->convertToDouble();
    if (!(v > 0.0) || !std::isfinite(v))
      return emitOpError("attention_factor must be positive and finite, got ")
             << v;
  }
  return success();
}

double AttentionOp::getScaleOrDefault() {
  if (auto s = getScale())
    return s->convertToDouble();
  return 1.0 / std::sqrt((double)getHeadDim());
}

LogicalResult AttentionOp::verify() {
  AttentionShapes s;
  s.q = tensorType(getQ());
  s.k = tensorType(getK());
  s.v = tensorType(getV());
  s.output = tensorType(getOutput());
  if (getKCache())
    s.kCache = tensorType(getKCache());
  if (getVCache())
    s.vCache = tensorType(getVCache());
  if (getPosition())
    s.position = tensorType(getPosition());
  auto caches = getUpdatedCache();
  if (caches.size() > 2)
    return emitOpError("returns at most 3 results, got ")
           << caches.size() + 1;
  if (caches.size() >= 1)
    s.kCacheOut = tensorType(caches[0]);
  if (caches.size() == 2)
    s.vCacheOut = tensorType(caches[1]);
  s.numHeads = getNumHeads();
  s.numKvHeads = getNumKvHeads();
  s.headDim = getHeadDim();
  if (auto sc = getScale())
    s.scale = sc->convertToDouble();
  if (std::optional<uint64_t> w = getSlidingWindow()) {
    if (int64_t(*w) < 1)
      return emitOpError("sliding_window must be >= 1, got ")
             << int64_t(*w);
    if (!getCausal())
      return emitOpError("sliding_window needs causal attention");
  }
  return checkAttention(getLoc(), s);
}

LogicalResult EmbeddingOp::verify() {
  return checkEmbedding(getLoc(), tensorType(getIds()), tensorType(getTable()),
                        tensorType(getResult()));
}

LogicalResult
EmbeddingOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (!getVocabGroupAttr())
    return success();
  return lookupGroupSize(*this, getVocabGroupAttr(), tables);
}

LogicalResult SoftmaxOp::verify() {
  return checkDim(getLoc(), "softmax", "dim", getDim(),
                  tensorType(getInput()).getRank());
}

LogicalResult SliceOp::verify() {
  return checkSlice(getLoc(), tensorType(getInput()), getOffsets(),
                    getSizes(), tensorType(getResult()));
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  // A slice covering the whole input is the input.
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult ConcatOp::verify() {
  SmallVector<RankedTensorType> inputs;
  for (Value v : getInputs())
    inputs.push_back(tensorType(v));
  return checkConcat(getLoc(), inputs, getDim(), tensorType(getResult()));
}

LogicalResult ParameterPackOp::verify() {
  SmallVector<RankedTensorType> pieces;
  llvm::SmallPtrSet<Value, 4> seen;
  for (auto [i, v] : llvm::enumerate(getPieces())) {
    if (!v.getDefiningOp<ParameterOp>())
      return emitOpError("piece ")
             << i << " is not a braid.parameter result: a pack is made of "
             << "parameters, which the runtime stores inside it";
    if (!seen.insert(v).second)
      return emitOpError("piece ") << i << " repeats an earlier piece";
    pieces.push_back(tensorType(v));
  }
  return checkConcat(getLoc(), pieces, 0, tensorType(getResult()),
                     "parameter_pack");
}

LogicalResult ReshapeOp::verify() {
  return checkReshape(getLoc(), tensorType(getInput()),
                      tensorType(getResult()));
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x): reshapes keep element order, so
  // only the final shape matters.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Collectives: one symbol-use verifier per sync/async pair.
//===----------------------------------------------------------------------===//

template <typename OpT, typename CheckFn>
static LogicalResult verifyCollective(OpT op, SymbolTableCollection &tables,
                                      CheckFn check) {
  FailureOr<int64_t> n = lookupGroupSize(op, op.getGroupAttr(), tables);
  if (failed(n))
    return failure();
  return check(*n);
}

template <typename OpT>
static LogicalResult verifyAllReduceLike(OpT op, SymbolTableCollection &t) {
  return verifyCollective(op, t, [&](int64_t) {
    return checkAllReduce(op.getLoc(), shortName(op), tensorType(op.getInput()),
                          collectiveResultType(op));
  });
}
LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyAllReduceLike(*this, t);
}
LogicalResult AllReduceStartOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyAllReduceLike(*this, t);
}

template <typename OpT>
static LogicalResult verifyAllGatherLike(OpT op, SymbolTableCollection &t) {
  return verifyCollective(op, t, [&](int64_t n) {
    return checkAllGather(op.getLoc(), shortName(op), tensorType(op.getInput()),
                          collectiveResultType(op), op.getDim(), n);
  });
}
LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyAllGatherLike(*this, t);
}
LogicalResult AllGatherStartOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyAllGatherLike(*this, t);
}

template <typename OpT>
static LogicalResult verifyReduceScatterLike(OpT op,
                                             SymbolTableCollection &t) {
  return verifyCollective(op, t, [&](int64_t n) {
    return checkReduceScatter(op.getLoc(), shortName(op),
                              tensorType(op.getInput()),
                              collectiveResultType(op), op.getDim(), n);
  });
}
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyReduceScatterLike(*this, t);
}
LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyReduceScatterLike(*this, t);
}

template <typename OpT>
static LogicalResult verifyAllToAllLike(OpT op, SymbolTableCollection &t) {
  return verifyCollective(op, t, [&](int64_t n) {
    return checkAllToAll(op.getLoc(), shortName(op), tensorType(op.getInput()),
                         collectiveResultType(op), op.getSplitDim(),
                         op.getConcatDim(), n);
  });
}
LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyAllToAllLike(*this, t);
}
LogicalResult AllToAllStartOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyAllToAllLike(*this, t);
}

template <typename OpT>
static LogicalResult verifyBroadcastLike(OpT op, SymbolTableCollection &t) {
  return verifyCollective(op, t, [&](int64_t n) {
    return checkBroadcast(op.getLoc(), shortName(op), tensorType(op.getInput()),
                          collectiveResultType(op), op.getRoot(), n);
  });
}
LogicalResult BroadcastOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyBroadcastLike(*this, t);
}
LogicalResult BroadcastStartOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyBroadcastLike(*this, t);
}

template <typename OpT>
static LogicalResult verifyPeerOp(OpT op, SymbolTableCollection &t) {
  return verifyCollective(op, t, [&](int64_t n) {
    return checkPeer(op.getLoc(), shortName(op), op.getPeer(), n);
  });
}
LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyPeerOp(*this, t);
}
LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &t) {
  return verifyPeerOp(*this, t);
}
LogicalResult SendStartOp::verifySymbolUses(SymbolTableCollection &t) {
  if (!isa<NoneType>(getHandle().getType().getPayload()))
    return emitOpError("handle payload must be none, got ")
           << getHandle().getType().getPayload();
  return verifyPeerOp(*this, t);
}
LogicalResult RecvStartOp::verifySymbolUses(SymbolTableCollection &t) {
  if (!isa<RankedTensorType>(getHandle().getType().getPayload()))
    return emitOpError("handle payload must be a ranked tensor, got ")
           << getHandle().getType().getPayload();
  return verifyPeerOp(*this, t);
}

LogicalResult WaitOp::verify() {
  Operation *start = getHandle().getDefiningOp();
  if (!start || !start->hasTrait<OpTrait::BraidAsyncStart>())
    return emitOpError("handle must come from a braid.*_start op");
  Type payload = getHandle().getType().getPayload();
  if (isa<NoneType>(payload)) {
    if (getResult())
      return emitOpError("waits on a send and produces no result");
    return success();
  }
  if (!getResult())
    return emitOpError("must produce the handle's payload ") << payload;
  if (getResult().getType() != payload)
    return emitOpError("result type ")
           << getResult().getType() << " does not match the handle payload "
           << payload;
  return success();
}

#define GET_OP_CLASSES
#include "dialect/BraidOps.cpp.inc"
