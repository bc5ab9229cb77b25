//===- FuseCollectives.cpp - braid-fuse-collectives -----------------------===//
//
// all_reduce(a) + all_reduce(b) -> all_reduce(a + b), with replicated
// terms added after either reduction moved out of the way; and independent
// all_reduces packed into one up to a byte budget (see Passes.td).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDFUSECOLLECTIVESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// One summand of the outer add: a synchronous all_reduce sum, optionally
/// followed by `+ replicated` (a bias), each link used only here.
struct ReducedTerm {
  AllReduceOp reduce;
  AddOp biasAdd;  // null: the summand is the reduction itself
  Value bias;     // biasAdd's other operand
};

std::optional<ReducedTerm> matchTerm(Value v) {
  ReducedTerm t;
  if (auto add = v.getDefiningOp<AddOp>()) {
    // all_reduce(x) + p, with p not a reduction of its own (p is added to
    // every rank's full sum: replicated).
    if (!v.hasOneUse())
      return std::nullopt;
    auto r = add.getLhs().getDefiningOp<AllReduceOp>();
    if (!r || add.getLhs().getType() != add.getType())
      return std::nullopt;
    t.biasAdd = add;
    t.bias = add.getRhs();
    t.reduce = r;
  } else if (auto r = v.getDefiningOp<AllReduceOp>()) {
    t.reduce = r;
  } else {
    return std::nullopt;
  }
  if (t.reduce.getKind() != ReduceKind::sum || !t.reduce->hasOneUse())
    return std::nullopt;
  return t;
}

struct BraidFuseCollectivesPass
    : public braid::impl::BraidFuseCollectivesPassBase<
          BraidFuseCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (combineBytes < 0) {
      emitError(getOperation()->getLoc(),
                "braid-fuse-collectives: combine-bytes must be a byte count, "
                "0 or more (0: never), got ")
          << int64_t(combineBytes);
      return signalPassFailure();
    }
    if (fold)
      foldAll();
    if (combineBytes > 0)
      getOperation().walk([&](Block *block) { combineIndependent(*block); });
  }

  void foldAll() {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp op) { adds.push_back(op); });
    for (AddOp op : adds)
      if (foldSum(op))
        ++numFolded;
    SmallVector<AllGatherOp> gathers;
    getOperation().walk([&](AllGatherOp op) { gathers.push_back(op); });
    for (AllGatherOp op : gathers)
      if (foldGatherOfScatter(op))
        ++numFolded;
  }

  static int64_t bytesOf(Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getNumElements() *
           int64_t(t.getElementType().getIntOrFloatBitWidth() / 8);
  }

  /// Packs runs of independent synchronous all_reduces of one group, kind
  /// and element type, at most combineBytes together, into one all_reduce
  /// of their flattened concatenation, placed at the last of them: each
  /// element is reduced exactly as before. A run ends at any other
  /// collective of the group (collectives of one group are never
  /// reordered) and before an op that reads one of its results (the packed
  /// reduction would come too late for it; this is also what keeps a
  /// member from depending on another).
  void combineIndependent(Block &block) {
    SmallVector<AllReduceOp> run;
    int64_t runBytes = 0;
    auto flush = [&] {
      if (run.size() > 1) {
        emitCombined(run);
        numCombined += run.size();
      }
      run.clear();
      runBytes = 0;
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      bool readsRun = llvm::any_of(op.getOperands(), [&](Value v) {
        return llvm::any_of(run, [&](AllReduceOp m) { return v == m.getResult(); });
      });
      if (readsRun)
        flush();
      auto collective = dyn_cast<CollectiveOpInterface>(op);
      if (!collective)
        continue;
      auto ar = dyn_cast<AllReduceOp>(op);
      bool joins = ar && !run.empty() &&
                   ar.getGroupAttr() == run.front().getGroupAttr() &&
                   ar.getKind() == run.front().getKind() &&
                   getElementTypeOrSelf(ar.getType()) ==
                       getElementTypeOrSelf(run.front().getType()) &&
                   runBytes + bytesOf(ar.getResult()) <= combineBytes;
      if (!joins)
        flush();
      if (ar && bytesOf(ar.getResult()) <= combineBytes) {
        run.push_back(ar);
        runBytes += bytesOf(ar.getResult());
      }
    }
    flush();
  }

  void emitCombined(ArrayRef<AllReduceOp> run) {
    AllReduceOp last = run.back();
    OpBuilder b(last);
    Location loc = last.getLoc();
    Type elem = getElementTypeOrSelf(last.getType());
    SmallVector<Value> flat;
    int64_t total = 0;
    for (AllReduceOp m : run) {
      auto type = cast<RankedTensorType>(m.getType());
      int64_t n = type.getNumElements();
      flat.push_back(type.getRank() == 1
                         ? m.getInput()
                         : ReshapeOp::create(b, loc,
                                             RankedTensorType::get({n}, elem),
                                             m.getInput())
                               .getResult());
      total += n;
    }
    auto packedType = RankedTensorType::get({total}, elem);
    Value packed = ConcatOp::create(b, loc, packedType, flat,
                                    b.getI64IntegerAttr(0));
    Value reduced = AllReduceOp::create(b, loc, packedType, packed,
                                        last.getGroupAttr(), last.getKindAttr());
    int64_t offset = 0;
    for (AllReduceOp m : run) {
      auto type = cast<RankedTensorType>(m.getType());
      int64_t n = type.getNumElements();
      Value piece = SliceOp::create(b, loc, RankedTensorType::get({n}, elem),
                                    reduced, ArrayRef<int64_t>{offset},
                                    ArrayRef<int64_t>{n});
      m.getResult().replaceAllUsesWith(
          type.getRank() == 1
              ? piece
              : ReshapeOp::create(b, loc, type, piece).getResult());
      offset += n;
    }
    for (AllReduceOp m : run)
      m.erase();
  }

  /// all_gather(reduce_scatter(x, sum, d), d) over one group is
  /// all_reduce(x) when nothing else reads the shard (one collective
  /// instead of two, the same sums).
  bool foldGatherOfScatter(AllGatherOp gather) {
    auto scatter = gather.getInput().getDefiningOp<ReduceScatterOp>();
    if (!scatter || !scatter->hasOneUse() ||
        scatter.getKind() != ReduceKind::sum ||
        scatter.getGroup() != gather.getGroup() ||
        scatter.getDim() != gather.getDim() ||
        scatter.getInput().getType() != gather.getType() ||
        scatter->getBlock() != gather->getBlock())
      return false;
    // Moving the reduction to the gather must not reorder collectives.
    for (Operation *it = scatter->getNextNode(); it && it != gather;
         it = it->getNextNode())
      if (isa<CollectiveOpInterface>(it))
        return false;
    OpBuilder builder(gather);
    auto reduced = AllReduceOp::create(
        builder, gather.getLoc(), gather.getType(), scatter.getInput(),
        gather.getGroupAttr(), scatter.getKindAttr());
    gather.getResult().replaceAllUsesWith(reduced.getResult());
    gather.erase();
    scatter.erase();
    return true;
  }

  bool foldSum(AddOp op) {
    std::optional<ReducedTerm> a = matchTerm(op.getLhs()),
                               b = matchTerm(op.getRhs());
    if (!a || !b || a->reduce == b->reduce)
      return false;
    AllReduceOp ra = a->reduce, rb = b->reduce;
    if (ra.getGroup() != rb.getGroup() ||
        ra.getInput().getType() != rb.getInput().getType() ||
        ra.getType() != op.getType())
      return false;
    // Two biases must add to something that still broadcasts to the sum.
    if (a->bias && b->bias && a->bias.getType() != b->bias.getType())
      return false;
    // Everything the new ops read is defined before `op` in this block
    // (they are: operands of ops before `op`), and nothing between the two
    // reductions and `op` may be another collective of the group, or the
    // fold would reorder collectives against each other.
    Block *block = op->getBlock();
    if (ra->getBlock() != block || rb->getBlock() != block)
      return false;
    Operation *first = ra->isBeforeInBlock(rb) ? ra : rb;
    for (Operation *it = first->getNextNode(); it && it != op;
         it = it->getNextNode())
      if (it != ra && it != rb && isa<CollectiveOpInterface>(it))
        return false;

    OpBuilder builder(op);
    Location loc = op.getLoc();
    Value sum = AddOp::create(builder, loc, ra.getInput().getType(),
                              ra.getInput(), rb.getInput());
    auto reduced = AllReduceOp::create(builder, ra.getLoc(), ra.getType(), sum,
                                       ra.getGroupAttr(), ra.getKindAttr());
    Value result = reduced.getResult();
    Value bias = a->bias ? a->bias : b->bias;
    if (a->bias && b->bias)
      bias = AddOp::create(builder, loc, a->bias.getType(), a->bias, b->bias);
    if (bias)
      result = AddOp::create(builder, loc, op.getType(), result, bias);
    op.getResult().replaceAllUsesWith(result);
    op.erase();
    for (AddOp dead : {a->biasAdd, b->biasAdd})
      if (dead)
        dead.erase();
    ra.erase();
    rb.erase();
    return true;
  }
};
} // namespace
