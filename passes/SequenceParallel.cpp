//===- SequenceParallel.cpp - braid-sequence-parallel ---------------------===//
//
// Megatron-style sequence parallelism (Korthikanti et al., 2022): between
// a row-parallel matmul's all_reduce and the next column-parallel matmul,
// the residual stream and its norms run on 1/tp of the tokens. See
// Passes.td for the rules.
//
//===----------------------------------------------------------------------===//
#include "passes/NarrowGathers.h"
#include "passes/Passes.h"

#include "passes/cost/Timeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDSEQUENCEPARALLELPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// The token dimension of [B, S, ...] activations; the batch dimension
/// serves when the tokens of one step do not divide (decode).
constexpr int64_t kTokenDim = 1, kBatchDim = 0;

/// A tensor every rank holds whole and that carries no token dimension a
/// region value would need cut: an unsharded parameter (through reshapes).
bool isReplicatedParameter(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape.getInput();
  auto param = v.getDefiningOp<ParameterOp>();
  return param && !param.getShardDim();
}

/// Whether every rank computes the same result for `op`, given which of
/// its operands every rank holds alike: an unsharded parameter, a
/// collective over `onlyGroup` (the module's one device group) that leaves
/// its ranks the same result, or a computation over such values alone (an
/// embedding only when its table is whole: a vocab-parallel one gives
/// partial sums). With several groups a collective over one of them says
/// nothing about the ranks of another: only its operand does.
bool producesReplicated(Operation &op, const llvm::DenseSet<Value> &replicated,
                        FlatSymbolRefAttr onlyGroup) {
  if (auto param = dyn_cast<ParameterOp>(op))
    return !param.getShardDim();
  if (isa<AllReduceOp, AllGatherOp, BroadcastOp>(op))
    return (onlyGroup && cast<CollectiveOpInterface>(op).getGroupAttr() ==
                             onlyGroup) ||
           replicated.contains(op.getOperand(0));
  if (auto emb = dyn_cast<EmbeddingOp>(op); emb && emb.getVocabGroup())
    return false;
  if (!isa<EmbeddingOp, AddOp, MulOp, RmsNormOp, LayerNormOp, SiluOp, GeluOp,
           ActivationOp, SwigluOp, ReshapeOp, SliceOp, ConcatOp, RopeOp,
           SoftmaxOp>(op))
    return false;
  return llvm::all_of(op.getOperands(),
                      [&](Value x) { return replicated.contains(x); });
}

/// `rhs` broadcasts against region value `lhs` without a batch or token
/// extent of its own: its dims aligned with lhs's first two (if any) are 1.
bool broadcastsOverTokens(Value rhs, Value lhs) {
  auto r = cast<RankedTensorType>(rhs.getType());
  auto l = cast<RankedTensorType>(lhs.getType());
  for (int64_t d : {kBatchDim, kTokenDim}) {
    int64_t aligned = d - (l.getRank() - r.getRank());
    if (aligned >= 0 && r.getDimSize(aligned) != 1)
      return false;
  }
  return true;
}

/// What the rewrite of one function found.
struct Region {
  FlatSymbolRefAttr group;
  int64_t groupSize = 1;
  int64_t dim = kTokenDim; // what the shards cut: the tokens, or the batch
  /// The token extent, and the multiple of the group size it is padded to
  /// (equal when the tokens divide or the batch is cut).
  int64_t tokens = 0, paddedTokens = 0;
  SmallVector<AllReduceOp> seeds;        // become reduce_scatters
  llvm::SetVector<Operation *> ops;      // token-wise ops on the shards
  llvm::DenseSet<Value> values;          // seeds' and ops' results
  std::string whyNot;                    // empty: something to rewrite
};

class SequenceParallelRewriter {
public:
  SequenceParallelRewriter(ModuleOp module, bool pad)
      : module_(module), pad_(pad) {}

  /// The all_reduces that can become reduce_scatters and the token-wise ops
  /// that then run on the shards, in block order.
  Region analyze(func::FuncOp func) const {
    Region region;
    Block &body = func.front();
    // What every rank holds alike, in block order: the step inputs (not
    // state), then what op after op computes from them alone.
    llvm::DenseSet<Value> replicated;
    FlatSymbolRefAttr onlyGroup;
    auto groups = llvm::to_vector(module_.getOps<DeviceGroupOp>());
    if (groups.size() == 1)
      onlyGroup = FlatSymbolRefAttr::get(groups.front().getSymNameAttr());
    for (BlockArgument arg : body.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), "braid.input"))
        replicated.insert(arg);
    for (Operation &op : body) {
      if (op.getNumResults() == 1 &&
          producesReplicated(op, replicated, onlyGroup))
        replicated.insert(op.getResult(0));
      if (auto ar = dyn_cast<AllReduceOp>(op)) {
        if (std::string why = seedProblem(ar, region); why.empty()) {
          region.seeds.push_back(ar);
          region.values.insert(ar.getResult());
        } else if (region.whyNot.empty()) {
          region.whyNot = why;
        }
        continue;
      }
      if (isTokenWise(op, region.values, replicated)) {
        region.ops.insert(&op);
        region.values.insert(op.getResult(0));
      }
    }
    if (region.seeds.empty()) {
      if (region.whyNot.empty())
        region.whyNot = "no all_reduce over the tokens";
      return region;
    }
    region.whyNot.clear();
    if (region.ops.empty())
      region.whyNot = "no token-wise op reads an all_reduce (nothing to run "
                      "on a token shard)";
    return region;
  }

  /// Rewrites `func` as `region` says (analyze's result for this func).
  void rewrite(const Region &region) {
    IRMapping shard;
    llvm::DenseSet<Operation *> replaced(region.ops.begin(), region.ops.end());
    for (AllReduceOp ar : region.seeds)
      replaced.insert(ar);
    SmallVector<Operation *> order;
    for (AllReduceOp ar : region.seeds)
      order.push_back(ar);
    order.append(region.ops.begin(), region.ops.end());
    llvm::sort(order, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *op : order) {
      OpBuilder b(op);
      Value result = op->getResult(0);
      auto type = shardType(result.getType(), region);
      if (auto ar = dyn_cast<AllReduceOp>(op)) {
        Value input = padTokens(b, ar.getLoc(), ar.getInput(), region);
        auto rs = ReduceScatterOp::create(b, ar.getLoc(), type, input,
                                          ar.getGroupAttr(), ar.getKindAttr(),
                                          b.getI64IntegerAttr(region.dim));
        shard.map(result, rs.getResult());
        continue;
      }
      // A replicated operand outside the region: this rank's rows of it.
      for (Value operand : op->getOperands())
        if (!shard.contains(operand) && operand.getType() == result.getType())
          shard.map(operand, scatterReplicated(b, op->getLoc(), operand,
                                               type, region));
      Operation *clone = b.clone(*op, shard);
      clone->getResult(0).setType(type);
      shard.map(result, clone->getResult(0));
    }
    // Readers outside the region get the whole tensor back: one all_gather
    // per value, right before its first such reader.
    for (Operation *op : order) {
      Value full = op->getResult(0);
      Operation *first = nullptr;
      for (OpOperand &use : full.getUses())
        if (!replaced.contains(use.getOwner())) {
          Operation *user = use.getOwner();
          if (!first || user->isBeforeInBlock(first))
            first = user;
        }
      if (!first)
        continue;
      OpBuilder b(first);
      auto fullType = cast<RankedTensorType>(full.getType());
      SmallVector<int64_t> gatheredShape(fullType.getShape());
      gatheredShape[region.dim] =
          shardType(fullType, region).getDimSize(region.dim) * region.groupSize;
      Value gathered = AllGatherOp::create(
          b, op->getLoc(),
          RankedTensorType::get(gatheredShape, fullType.getElementType()),
          shard.lookup(full), region.group, b.getI64IntegerAttr(region.dim));
      // Padding rows end here: they never reach a reader outside.
      if (gatheredShape != SmallVector<int64_t>(fullType.getShape()))
        gathered = SliceOp::create(b, op->getLoc(), fullType, gathered,
                                   SmallVector<int64_t>(fullType.getRank(), 0),
                                   fullType.getShape());
      full.replaceUsesWithIf(gathered, [&](OpOperand &use) {
        return !replaced.contains(use.getOwner());
      });
    }
    for (Operation *op : llvm::reverse(order))
      op->erase();
  }

private:
  std::string seedProblem(AllReduceOp ar, Region &region) const {
    if (ar.getKind() != ReduceKind::sum)
      return "an all_reduce is not a sum";
    auto type = cast<RankedTensorType>(ar.getType());
    if (type.getRank() < 2)
      return "an all_reduce has no token dimension";
    if (region.values.contains(ar.getInput()))
      return "an all_reduce reads a value already reduced";
    int64_t size = groupSize(ar.getGroupAttr());
    if (size < 2)
      return "the all_reduce's group has one rank";
    if (region.group && region.group != ar.getGroupAttr())
      return "all_reduces over two groups";
    int64_t batch = type.getDimSize(kBatchDim),
            tokens = type.getDimSize(kTokenDim);
    // Every shard of the function has the same [B, S] prefix, cut along
    // the same dim: the tokens when they divide, else the batch.
    if (!region.seeds.empty()) {
      auto first = cast<RankedTensorType>(region.seeds.front().getType());
      if (first.getDimSize(kBatchDim) != batch ||
          first.getDimSize(kTokenDim) != tokens)
        return "all_reduces over different batch or token extents";
    }
    int64_t dim = tokens % size == 0 ? kTokenDim
                  : batch % size == 0 ? kBatchDim
                                      : -1;
    int64_t padded = tokens;
    if (dim < 0) {
      if (!pad_)
        return llvm::formatv("neither the {0} tokens nor the batch of {1} "
                             "divide by the group size {2}, and padding is "
                             "off",
                             tokens, batch, size)
            .str();
      dim = kTokenDim;
      padded = (tokens + size - 1) / size * size;
    }
    region.group = ar.getGroupAttr();
    region.groupSize = size;
    region.dim = dim;
    region.tokens = tokens;
    region.paddedTokens = padded;
    return "";
  }

  int64_t groupSize(FlatSymbolRefAttr group) const {
    auto g = SymbolTable::lookupSymbolIn(module_, group);
    auto dg = llvm::dyn_cast_or_null<DeviceGroupOp>(g);
    return dg ? int64_t(dg.getSize()) : 1;
  }

  static bool isTokenWise(Operation &op, const llvm::DenseSet<Value> &in,
                          const llvm::DenseSet<Value> &replicated) {
    if (op.getNumResults() != 1 || op.getNumRegions() != 0)
      return false;
    auto inRegion = [&](Value v) { return in.contains(v); };
    if (isa<AddOp, MulOp>(op)) {
      Value lhs = op.getOperand(0), rhs = op.getOperand(1);
      if (!inRegion(lhs))
        return false;
      if (inRegion(rhs))
        return rhs.getType() == lhs.getType();
      if (isReplicatedParameter(rhs) && broadcastsOverTokens(rhs, lhs))
        return true;
      // A whole replicated tensor (GPT-2's position embeddings): the
      // rewrite takes this rank's rows of it (scatterReplicated).
      return rhs.getType() == lhs.getType() && replicated.contains(rhs);
    }
    if (auto norm = dyn_cast<RmsNormOp>(op))
      return inRegion(norm.getInput()) &&
             isReplicatedParameter(norm.getWeight());
    if (auto norm = dyn_cast<LayerNormOp>(op))
      return inRegion(norm.getInput()) &&
             isReplicatedParameter(norm.getWeight()) &&
             isReplicatedParameter(norm.getBias());
    if (isa<SiluOp, GeluOp, ActivationOp>(op))
      return inRegion(op.getOperand(0));
    if (isa<SwigluOp>(op))
      return inRegion(op.getOperand(0)) && inRegion(op.getOperand(1));
    return false;
  }

  /// The rows of `x` ([B, S, ...]) repeated along the tokens up to the
  /// padded extent: copies of real tokens, finite wherever the real ones
  /// are, computed on and then dropped after the all_gather. Built from
  /// slice and concat: no new op, no constant.
  static Value padTokens(OpBuilder &b, Location loc, Value x,
                         const Region &region) {
    if (region.paddedTokens == region.tokens || region.dim != kTokenDim)
      return x;
    auto t = cast<RankedTensorType>(x.getType());
    int64_t extra = region.paddedTokens - region.tokens;
    SmallVector<int64_t> shape(t.getShape());
    if (extra <= region.tokens) {
      // x followed by its first `extra` rows: one copy of S + extra rows,
      // what a dedicated pad op would move.
      shape[kTokenDim] = extra;
      Value head = SliceOp::create(
          b, loc, RankedTensorType::get(shape, t.getElementType()), x,
          SmallVector<int64_t>(t.getRank(), 0), shape);
      shape[kTokenDim] = region.paddedTokens;
      return ConcatOp::create(b, loc,
                              RankedTensorType::get(shape, t.getElementType()),
                              ValueRange{x, head},
                              b.getI64IntegerAttr(kTokenDim));
    }
    int64_t copies = (region.paddedTokens + region.tokens - 1) / region.tokens;
    shape[kTokenDim] = copies * region.tokens;
    Value repeated = ConcatOp::create(
        b, loc, RankedTensorType::get(shape, t.getElementType()),
        SmallVector<Value>(size_t(copies), x), b.getI64IntegerAttr(kTokenDim));
    if (shape[kTokenDim] == region.paddedTokens)
      return repeated;
    shape[kTokenDim] = region.paddedTokens;
    return SliceOp::create(b, loc,
                           RankedTensorType::get(shape, t.getElementType()),
                           repeated, SmallVector<int64_t>(t.getRank(), 0),
                           shape);
  }

  /// This rank's shard of a tensor every rank holds whole, with no new op:
  /// an all_to_all that splits and concatenates along the shard dim gives
  /// rank r piece r of every rank's copy, all the same, so the first of
  /// them is its shard. (Padded like the region first.)
  static Value scatterReplicated(OpBuilder &b, Location loc, Value x,
                                 RankedTensorType shardTy,
                                 const Region &region) {
    Value padded = padTokens(b, loc, x, region);
    auto t = cast<RankedTensorType>(padded.getType());
    Value exchanged = AllToAllOp::create(b, loc, t, padded, region.group,
                                         b.getI64IntegerAttr(region.dim),
                                         b.getI64IntegerAttr(region.dim));
    return SliceOp::create(b, loc, shardTy, exchanged,
                           SmallVector<int64_t>(t.getRank(), 0),
                           shardTy.getShape());
  }

  static RankedTensorType shardType(Type full, const Region &region) {
    auto t = cast<RankedTensorType>(full);
    SmallVector<int64_t> shape(t.getShape());
    if (region.dim == kTokenDim)
      shape[kTokenDim] = region.paddedTokens;
    shape[region.dim] /= region.groupSize;
    return RankedTensorType::get(shape, t.getElementType());
  }

  mutable ModuleOp module_;
  bool pad_;
};

//===----------------------------------------------------------------------===//
// Ulysses: attention on all tokens of a head shard, through all_to_all
//===----------------------------------------------------------------------===//

/// A q, k or v projection as the importer builds it after the Megatron
/// rewrite: all_gather(x_s) @ W^T (+ b), reshaped to heads, then per-head
/// ops (norm, rope) up to the attention.
struct Projection {
  AllGatherOp gather;
  MatmulOp matmul;
  ParameterOp weight;
  AddOp biasAdd;        // null without a bias
  ParameterOp bias;     // its sharded parameter
  ReshapeOp reshape;    // [B, S, h * D] -> [B, S, h, D]
};

/// The attention's output path: reshape to [B, S, h * D], the row-parallel
/// o_proj, and the reduction of its partial sums: the reduce_scatter of the
/// Megatron rewrite (Ulysses), or an all_reduce (plain TP).
struct OutputProjection {
  ReshapeOp reshape;
  MatmulOp matmul;
  ParameterOp weight;
  Operation *reduction = nullptr;
};

/// Whole-tensor counterpart of a column- or row-parallel parameter: the
/// same name and full shape, replicated (every rank holds all heads).
bool isPlainShard(ParameterOp p, FlatSymbolRefAttr group, int64_t dim,
                  int64_t groupSize, std::string &why) {
  if (!p || !p.getShardDim() || *p.getShardDim() != uint64_t(dim) ||
      p.getGroupAttr() != group) {
    why = "a projection weight is not sharded along its heads";
    return false;
  }
  if (p.getBlocks() || p.getPaddedShape()) {
    why = "fused or padded projection weights (GPT-2, GPT-NeoX) are not "
          "supported";
    return false;
  }
  if (p.getNumShards(groupSize) != groupSize) {
    why = llvm::formatv("'{0}' has {1} shards for {2} ranks: Ulysses needs "
                        "the KV heads divisible by tp",
                        p.getName(), p.getNumShards(groupSize), groupSize)
              .str();
    return false;
  }
  return true;
}

/// `sharded`: the projection reads the all_gather of the Megatron
/// rewrite (Ulysses); else any replicated hidden state (plain TP).
FailureOr<Projection> matchProjection(Value v, FlatSymbolRefAttr group,
                                      int64_t groupSize, bool sharded,
                                      std::string &why) {
  Projection p;
  for (;;) {
    if (auto rope = v.getDefiningOp<RopeOp>()) {
      v = rope.getInput();
    } else if (auto norm = v.getDefiningOp<RmsNormOp>();
               norm && isReplicatedParameter(norm.getWeight())) {
      v = norm.getInput(); // Qwen3's per-head q/k norm
    } else {
      break;
    }
  }
  if (v.getDefiningOp<SliceOp>()) {
    why = "fused q/k/v projections (GPT-2's c_attn, GPT-NeoX's "
          "query_key_value) are not supported";
    return failure();
  }
  p.reshape = v.getDefiningOp<ReshapeOp>();
  if (!p.reshape || !p.reshape->hasOneUse()) {
    why = "an attention input is not a reshaped projection";
    return failure();
  }
  Value x = p.reshape.getInput();
  if ((p.biasAdd = x.getDefiningOp<AddOp>())) {
    p.bias = p.biasAdd.getRhs().getDefiningOp<ParameterOp>();
    if (!p.biasAdd->hasOneUse() ||
        !isPlainShard(p.bias, group, 0, groupSize, why))
      return failure();
    x = p.biasAdd.getLhs();
  }
  if (x.getDefiningOp<SliceOp>()) {
    why = "fused q/k/v projections (GPT-2's c_attn, GPT-NeoX's "
          "query_key_value) are not supported";
    return failure();
  }
  p.matmul = x.getDefiningOp<MatmulOp>();
  if (!p.matmul || !p.matmul->hasOneUse() || !p.matmul.getTransposeB() ||
      p.matmul.getTransposeA() || p.matmul.getBias() ||
      p.matmul.getResidual() || p.matmul.getGelu()) {
    why = "an attention input is not an nn.Linear projection";
    return failure();
  }
  p.weight = p.matmul.getB().getDefiningOp<ParameterOp>();
  if (!isPlainShard(p.weight, group, 0, groupSize, why))
    return failure();
  if (!sharded)
    return p;
  p.gather = p.matmul.getA().getDefiningOp<AllGatherOp>();
  if (!p.gather || p.gather.getGroupAttr() != group ||
      p.gather.getDim() != kTokenDim) {
    why = "a projection does not read the sequence-parallel hidden state";
    return failure();
  }
  return p;
}

FailureOr<OutputProjection> matchOutput(AttentionOp att,
                                        FlatSymbolRefAttr group,
                                        int64_t groupSize, bool sharded,
                                        std::string &why) {
  OutputProjection o;
  why = "the attention output is not reshaped, projected and "
        "reduce-scattered";
  Value out = att.getOutput();
  if (!out.hasOneUse())
    return failure();
  o.reshape = dyn_cast<ReshapeOp>(*out.getUsers().begin());
  if (!o.reshape || !o.reshape->hasOneUse())
    return failure();
  o.matmul = dyn_cast<MatmulOp>(*o.reshape->getUsers().begin());
  if (!o.matmul || !o.matmul->hasOneUse() || !o.matmul.getTransposeB() ||
      o.matmul.getA() != o.reshape.getResult() || o.matmul.getBias() ||
      o.matmul.getResidual() || o.matmul.getGelu())
    return failure();
  o.weight = o.matmul.getB().getDefiningOp<ParameterOp>();
  if (!isPlainShard(o.weight, group, 1, groupSize, why))
    return failure();
  Operation *user = *o.matmul->getUsers().begin();
  if (sharded) {
    auto rs = dyn_cast<ReduceScatterOp>(user);
    if (!rs || rs.getGroupAttr() != group || rs.getDim() != kTokenDim ||
        rs.getKind() != ReduceKind::sum)
      return failure();
  } else {
    auto ar = dyn_cast<AllReduceOp>(user);
    if (!ar || ar.getGroupAttr() != group || ar.getKind() != ReduceKind::sum)
      return failure();
  }
  o.reduction = user;
  return o;
}

ParameterOp wholeParameter(OpBuilder &b, ParameterOp shard) {
  auto full = RankedTensorType::get(
      shard.getFullShape(),
      cast<RankedTensorType>(shard.getType()).getElementType());
  return ParameterOp::create(b, shard.getLoc(), full, shard.getNameAttr(),
                             shard.getFullShapeAttr(), IntegerAttr(),
                             FlatSymbolRefAttr(), IntegerAttr(), IntegerAttr(),
                             DenseI64ArrayAttr());
}

/// Rewrites every attention of `func` to read q/k/v and o_proj weights
/// whole. `sharded` (Ulysses; `func` already Megatron-rewritten over
/// `group` along the tokens, unpadded): projections on this rank's tokens
/// with every head, all_to_all to all tokens of a head shard and back.
/// Otherwise (the functions Ulysses cannot take, e.g. one-token decode,
/// which must read the same whole weights since a plan declares each
/// parameter once): projections of the replicated hidden state with every
/// head, this rank's heads taken by an all_to_all of identical pieces, and
/// the heads gathered back before o_proj, which then needs no all_reduce.
/// The error names what stops it.
LogicalResult applyWholeWeights(func::FuncOp func, FlatSymbolRefAttr group,
                                int64_t groupSize, bool sharded,
                                std::string &why, int &rewritten) {
  SmallVector<AttentionOp> attentions;
  func.walk([&](AttentionOp a) { attentions.push_back(a); });
  // Check every attention first: all or nothing.
  struct Site {
    AttentionOp att;
    std::array<Projection, 3> qkv;
    OutputProjection out;
  };
  SmallVector<Site> sites;
  for (AttentionOp att : attentions) {
    Site site{att, {}, {}};
    Value inputs[3] = {att.getQ(), att.getK(), att.getV()};
    for (int i = 0; i < 3; ++i) {
      auto p = matchProjection(inputs[i], group, groupSize, sharded, why);
      if (failed(p))
        return failure();
      site.qkv[size_t(i)] = *p;
    }
    auto out = matchOutput(att, group, groupSize, sharded, why);
    if (failed(out))
      return failure();
    site.out = *out;
    sites.push_back(site);
  }
  llvm::SetVector<Operation *> dead;
  for (Site &site : sites) {
    for (Projection &p : site.qkv) {
      // x_s @ W^T (+ b) on this rank's tokens with every head, then heads
      // out and tokens in: [B, S/n, h, D] -> [B, S, h/n, D], exactly the
      // tensor the head-sharded projection made.
      OpBuilder b(p.matmul);
      Value xs = sharded ? p.gather.getInput() : p.matmul.getA();
      auto xsType = cast<RankedTensorType>(xs.getType());
      auto fullW = wholeParameter(b, p.weight);
      auto projected = cast<RankedTensorType>(p.matmul.getType());
      SmallVector<int64_t> shape(projected.getShape());
      shape[kTokenDim] = xsType.getDimSize(kTokenDim);
      shape.back() *= groupSize;
      Type elem = projected.getElementType();
      Value m = MatmulOp::create(b, p.matmul.getLoc(),
                                 RankedTensorType::get(shape, elem), xs,
                                 fullW.getResult(), false, true);
      if (p.biasAdd) {
        auto fullB = wholeParameter(b, p.bias);
        m = AddOp::create(b, p.biasAdd.getLoc(), m.getType(), m,
                          fullB.getResult());
      }
      auto heads = cast<RankedTensorType>(p.reshape.getType());
      SmallVector<int64_t> hs(heads.getShape());
      hs[kTokenDim] = shape[kTokenDim];
      hs[2] *= groupSize;
      Value r = ReshapeOp::create(b, p.reshape.getLoc(),
                                  RankedTensorType::get(hs, elem), m);
      SmallVector<int64_t> exchanged(heads.getShape());
      exchanged[kTokenDim] = hs[kTokenDim] * groupSize;
      Value a = AllToAllOp::create(b, p.reshape.getLoc(),
                                   RankedTensorType::get(exchanged, elem), r,
                                   group, b.getI64IntegerAttr(2),
                                   b.getI64IntegerAttr(kTokenDim));
      // Replicated input: every rank sent the same tensor, so the first
      // S rows are this rank's heads.
      if (!sharded)
        a = SliceOp::create(b, p.reshape.getLoc(), heads, a,
                            SmallVector<int64_t>(heads.getRank(), 0),
                            heads.getShape());
      p.reshape.getResult().replaceAllUsesWith(a);
      for (Operation *op : {p.reshape.getOperation(),
                            p.biasAdd ? p.biasAdd.getOperation() : nullptr,
                            p.matmul.getOperation()})
        if (op)
          dead.insert(op);
      if (p.gather)
        dead.insert(p.gather);
      dead.insert(p.weight);
      if (p.bias)
        dead.insert(p.bias);
    }
    // Back: [B, S, h/n, D] -> [B, S/n, h, D], then o_proj with every head
    // on this rank's tokens: the shard the reduce_scatter gave, with no
    // reduction left to do.
    // Plain TP: all heads gathered from the ranks, o_proj whole, the
    // result already the sum the all_reduce made.
    OutputProjection &o = site.out;
    OpBuilder b(o.reduction);
    Location loc = o.reduction->getLoc();
    auto att = cast<RankedTensorType>(site.att.getOutput().getType());
    SmallVector<int64_t> back(att.getShape());
    if (sharded)
      back[kTokenDim] /= groupSize;
    back[2] *= groupSize;
    Type elem = att.getElementType();
    auto backType = RankedTensorType::get(back, elem);
    Value a = sharded
                  ? AllToAllOp::create(b, loc, backType, site.att.getOutput(),
                                       group, b.getI64IntegerAttr(kTokenDim),
                                       b.getI64IntegerAttr(2))
                        .getResult()
                  : AllGatherOp::create(b, loc, backType, site.att.getOutput(),
                                        group, b.getI64IntegerAttr(2))
                        .getResult();
    Value r = ReshapeOp::create(
        b, o.reshape.getLoc(),
        RankedTensorType::get({back[0], back[1], back[2] * back[3]}, elem), a);
    auto fullW = wholeParameter(b, o.weight);
    Type reducedType = o.reduction->getResult(0).getType();
    Value p = MatmulOp::create(b, o.matmul.getLoc(), reducedType, r,
                               fullW.getResult(), false, true);
    o.reduction->getResult(0).replaceAllUsesWith(p);
    for (Operation *op : {o.reduction, o.matmul.getOperation(),
                          o.reshape.getOperation()})
      dead.insert(op);
    dead.insert(o.weight);
    ++rewritten;
  }
  // Users first; a gather or a weight that something else still reads
  // stays.
  SmallVector<Operation *> order(dead.begin(), dead.end());
  llvm::sort(order, [](Operation *x, Operation *y) {
    return y->isBeforeInBlock(x);
  });
  for (Operation *op : order)
    if (op->use_empty())
      op->erase();
  return success();
}

struct BraidSequenceParallelPass
    : public mlir::braid::impl::BraidSequenceParallelPassBase<
          BraidSequenceParallelPass> {
  using Base::Base;

  /// More than one token per sequence in a step: braid-decompose can cut
  /// it into chunks, which changes how each form's collectives hide. A
  /// one-token step (decode) is never cut; it is priced here, unscheduled,
  /// rather than doubled through every pass that follows.
  static bool manyTokens(func::FuncOp func) {
    SmallVector<BlockArgument> inputs = tokenInputs(func);
    return !inputs.empty() && cast<RankedTensorType>(inputs.front().getType())
                                      .getDimSize(kTokenDim) > 1;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "off")
      return;
    if (mode != "megatron" && mode != "ulysses") {
      emitError(module.getLoc())
          << "braid-sequence-parallel: mode must be 'megatron', 'ulysses' or "
             "'off', got '"
          << mode << "'";
      return signalPassFailure();
    }
    bool ulysses = mode == "ulysses";
    std::optional<::braid::cost::Target> tgt;
    if (!force) {
      llvm::Expected<::braid::cost::Target> resolved = ::braid::cost::resolveTarget(target);
      if (!resolved) {
        emitError(module.getLoc())
            << "braid-sequence-parallel: " << llvm::toString(resolved.takeError());
        return signalPassFailure();
      }
      tgt = std::move(*resolved);
    }
    // One model for every function: it depends on the target and the
    // module's groups only.
    std::optional<::braid::cost::CostModel> model;
    if (tgt)
      model.emplace(*tgt, ::braid::cost::LaunchMode::Graph, module);
    // Why it cannot price this module ("": it can).
    std::string fitProblem = model ? model->fitProblem() : "";
    SequenceParallelRewriter rewriter(module, pad);
    SmallVector<func::FuncOp> plainFunctions; // no Ulysses: TP or Megatron
    FlatSymbolRefAttr ulyssesGroup;
    int64_t ulyssesGroupSize = 0;
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal() || !func.getBody().hasOneBlock())
        continue;
      Region region = rewriter.analyze(func);
      std::string name = ("@" + func.getSymName()).str();
      if (!region.whyNot.empty()) {
        say(name + ": left alone: " + region.whyNot);
        plainFunctions.push_back(func);
        continue;
      }
      // Ulysses needs every token of the attention real: not padded, not a
      // batch shard. It is asked for by name, so where it applies the
      // cost model is not asked; elsewhere the function gets Megatron
      // where it pays.
      bool ulyssesHere = ulysses && region.dim == kTokenDim &&
                         region.paddedTokens == region.tokens;
      if (ulysses && !ulyssesHere) {
        // Plain TP, with the whole weights the Ulysses functions declare
        // (below).
        say(name + ": Ulysses left alone: its tokens do not divide by the "
                   "group size (pad rows must not reach attention); plain "
                   "TP (on whole q/k/v/o weights where another function "
                   "runs Ulysses)");
        plainFunctions.push_back(func);
        continue;
      }
      std::string priced;
      if (tgt && !ulyssesHere && !fitProblem.empty()) {
        say(name + ": left alone: " + fitProblem);
        continue;
      }
      if (variants && tgt && !ulyssesHere && manyTokens(func)) {
        // Priced later, scheduled: the rewritten copy goes beside the
        // original for braid-decompose to choose.
        auto variant = cast<func::FuncOp>(func->clone());
        variant.setSymName((func.getSymName() + ".sp").str());
        variant.setPrivate();
        variant->setAttr(kVariantOfAttr, StringAttr::get(module.getContext(),
                                                         func.getSymName()));
        // Renamed (a suffix added) if the module has that name already.
        SymbolTable(module).insert(variant, std::next(func->getIterator()));
        Region trial = rewriter.analyze(variant);
        size_t sites = trial.seeds.size();
        rewriter.rewrite(trial);
        numReduceScatters += sites;
        say(llvm::formatv("{0}: {1} all_reduces -> reduce_scatter + "
                          "all_gather in the variant @{2}, which "
                          "braid-decompose prices scheduled against {0}",
                          name, sites, variant.getSymName())
                .str());
        continue;
      }
      if (tgt && !ulyssesHere) {
        // Price the rewritten function against the original on the
        // target's timeline; keep it only where the step gets faster.
        // Both as the pipeline will leave them: slices gather only their
        // rows (else a sliced gather SP does not touch counts whole
        // against the original only, and SP wins by its narrowing).
        auto original = cast<func::FuncOp>(func->clone());
        narrowSlicedGathers(original);
        double before = ::braid::cost::stepTime(original, *model);
        original.erase();
        auto trial = cast<func::FuncOp>(func->clone());
        rewriter.rewrite(rewriter.analyze(trial));
        narrowSlicedGathers(trial);
        double after = ::braid::cost::stepTime(trial, *model);
        trial.erase();
        priced = llvm::formatv(" step {0:F3} ms -> {1:F3} ms on {2}",
                               before * 1e3, after * 1e3, tgt->name)
                     .str();
        if (!(after < before)) {
          say(name + ": left alone: does not pay:" + priced);
          continue;
        }
      }
      size_t sites = region.seeds.size(), ops = region.ops.size();
      rewriter.rewrite(region);
      numReduceScatters += sites;
      std::string padded =
          region.paddedTokens != region.tokens
              ? llvm::formatv(" (padded from {0} to {1})", region.tokens,
                              region.paddedTokens)
                    .str()
              : "";
      say(llvm::formatv("{0}: {1} all_reduces -> reduce_scatter + all_gather "
                        "over {2} (dim {3}), {4} ops on 1/{5} of the {6}{7}{8}",
                        name, sites, region.group.getValue(), region.dim, ops,
                        region.groupSize,
                        region.dim == kTokenDim ? "tokens" : "sequences",
                        padded, priced.empty() ? " (forced)" : priced)
              .str());
      if (ulyssesHere) {
        std::string why;
        int attentions = 0;
        if (failed(applyWholeWeights(func, region.group, region.groupSize,
                                     /*sharded=*/true, why, attentions))) {
          emitError(func.getLoc())
              << "braid-sequence-parallel: Ulysses: " << why;
          return signalPassFailure();
        }
        numUlysses += attentions;
        ulyssesGroup = region.group;
        ulyssesGroupSize = region.groupSize;
        say(llvm::formatv("{0}: Ulysses: {1} attentions on all tokens of "
                          "1/{2} of the heads (all_to_all in and out; "
                          "q/k/v/o weights whole on every rank)",
                          name, attentions, region.groupSize)
                .str());
      }
    }
    if (!ulyssesGroup) {
      // Asked for by name and applied nowhere: the user is told, not only
      // --report (nor is the model checked for it: KV heads, fused q/k/v).
      if (ulysses && !plainFunctions.empty())
        emitWarning(module.getLoc(),
                    "braid-sequence-parallel: Ulysses applies to no "
                    "function (no function's tokens divide by the "
                    "group size, or none has a token region): plain "
                    "TP everywhere");
      return;
    }
    for (func::FuncOp func : plainFunctions) {
      std::string why;
      int attentions = 0;
      if (failed(applyWholeWeights(func, ulyssesGroup, ulyssesGroupSize,
                                   /*sharded=*/false, why, attentions))) {
        emitError(func.getLoc())
            << "braid-sequence-parallel: Ulysses: the other "
               "functions must read the same whole weights: "
            << why;
        return signalPassFailure();
      }
      if (attentions)
        say(llvm::formatv("@{0}: {1} attentions on whole q/k/v/o weights "
                          "(this rank's heads through all_to_all; heads "
                          "gathered before o_proj, no all_reduce)",
                          func.getSymName(), attentions)
                .str());
    }
  }

  void say(const std::string &line) {
    if (report)
      llvm::errs() << "braid-sequence-parallel: " << line << "\n";
  }
};

} // namespace
