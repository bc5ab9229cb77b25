//===- FuseCollectives.cpp - braid-fuse-collectives -----------------------===//
//
// all_reduce(a) + all_reduce(b) -> all_reduce(a + b), with replicated
// terms added after either reduction moved out of the way (see Passes.td).
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
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp op) { adds.push_back(op); });
    for (AddOp op : adds)
      if (fold(op))
        ++numFolded;
    SmallVector<AllGatherOp> gathers;
    getOperation().walk([&](AllGatherOp op) { gathers.push_back(op); });
    for (AllGatherOp op : gathers)
      if (foldGatherOfScatter(op))
        ++numFolded;
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

  bool fold(AddOp op) {
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
