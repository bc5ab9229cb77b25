//===- SequenceParallel.cpp - braid-sequence-parallel ---------------------===//
//
// Megatron-style sequence parallelism (Korthikanti et al., 2022): between
// a row-parallel matmul's all_reduce and the next column-parallel matmul,
// the residual stream and its norms run on 1/tp of the tokens. See
// Passes.td for the rules.
//
//===----------------------------------------------------------------------===//
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
    for (Operation &op : body) {
      if (auto ar = dyn_cast<AllReduceOp>(op)) {
        if (std::string why = seedProblem(ar, region); why.empty()) {
          region.seeds.push_back(ar);
          region.values.insert(ar.getResult());
        } else if (region.whyNot.empty()) {
          region.whyNot = why;
        }
        continue;
      }
      if (isTokenWise(op, region.values)) {
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
    for (auto g : module_.getOps<DeviceGroupOp>())
      if (g.getSymName() == group.getValue())
        return int64_t(g.getSize());
    return 1;
  }

  static bool isTokenWise(Operation &op, const llvm::DenseSet<Value> &in) {
    if (op.getNumResults() != 1 || op.getNumRegions() != 0)
      return false;
    auto inRegion = [&](Value v) { return in.contains(v); };
    if (isa<AddOp, MulOp>(op)) {
      Value lhs = op.getOperand(0), rhs = op.getOperand(1);
      if (!inRegion(lhs))
        return false;
      if (inRegion(rhs))
        return rhs.getType() == lhs.getType();
      return isReplicatedParameter(rhs) && broadcastsOverTokens(rhs, lhs);
    }
    if (auto norm = dyn_cast<RmsNormOp>(op))
      return inRegion(norm.getInput()) &&
             isReplicatedParameter(norm.getWeight());
    if (auto norm = dyn_cast<LayerNormOp>(op))
      return inRegion(norm.getInput()) &&
             isReplicatedParameter(norm.getWeight()) &&
             isReplicatedParameter(norm.getBias());
    if (isa<SiluOp, GeluOp>(op))
      return inRegion(op.getOperand(0));
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

struct BraidSequenceParallelPass
    : public mlir::braid::impl::BraidSequenceParallelPassBase<
          BraidSequenceParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "off")
      return;
    if (mode != "megatron") {
      emitError(module.getLoc())
          << "braid-sequence-parallel: mode must be 'megatron' or 'off', got '"
          << mode << "'"
          << (mode == "ulysses" ? " (Ulysses is not implemented yet)" : "");
      return signalPassFailure();
    }
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
    SequenceParallelRewriter rewriter(module, pad);
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal() || !func.getBody().hasOneBlock())
        continue;
      Region region = rewriter.analyze(func);
      std::string name = ("@" + func.getSymName()).str();
      if (!region.whyNot.empty()) {
        say(name + ": left alone: " + region.whyNot);
        continue;
      }
      std::string priced;
      if (tgt) {
        // Price the rewritten function against the original on the
        // target's timeline; keep it only where the step gets faster.
        ::braid::cost::CostModel model(*tgt, ::braid::cost::LaunchMode::Graph, module);
        if (model.worldSize() > tgt->worldSize()) {
          say(name + ": left alone: the module spans " +
              std::to_string(model.worldSize()) + " ranks, target '" +
              tgt->name + "' has " + std::to_string(tgt->worldSize()));
          continue;
        }
        double before = ::braid::cost::simulate(func, model).stepTime;
        auto trial = cast<func::FuncOp>(func->clone());
        SequenceParallelRewriter(module, pad).rewrite(
            SequenceParallelRewriter(module, pad).analyze(trial));
        double after = ::braid::cost::simulate(trial, model).stepTime;
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
    }
  }

  void say(const std::string &line) {
    if (report)
      llvm::errs() << "braid-sequence-parallel: " << line << "\n";
  }
};

} // namespace
