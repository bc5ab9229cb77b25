//===- FuseCompute.cpp - braid-fuse-compute -------------------------------===//
//
// Compute patterns the runtimes run as one op (see Passes.td):
// silu(gate) * up -> swiglu(gate, up); rms_norm(x + r) -> add_rms_norm,
// which also returns the sum; matmuls of one input against several weights
// -> one matmul against their parameter_pack, split by view slices.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "passes/MemoryPlan.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDFUSECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// Schedule and placement attributes (braid.stream, events, buffers) are
/// set by later passes; an op that has any is left alone.
bool hasDiscardableAttrs(Operation *op) {
  return !op->getDiscardableAttrDictionary().empty();
}

/// The silu of `v` when `v` is a silu result read only by `user`.
SiluOp siluOnlyFeeding(Value v, Operation *user) {
  auto silu = v.getDefiningOp<SiluOp>();
  if (!silu || !v.hasOneUse() || *v.getUsers().begin() != user ||
      hasDiscardableAttrs(silu))
    return nullptr;
  return silu;
}

/// The weight of `mm` when it is x * W^T with W a braid.parameter [N, K] of
/// x's element type, and `mm` carries no schedule attributes.
ParameterOp projectionWeight(MatmulOp mm) {
  auto w = mm.getB().getDefiningOp<ParameterOp>();
  if (!w || !mm.getTransposeB() || mm.getTransposeA() || mm.getBias() ||
      mm.getResidual() || mm.getGelu() || hasDiscardableAttrs(mm) ||
      w.getType().getRank() != 2)
    return nullptr;
  auto x = cast<RankedTensorType>(mm.getA().getType());
  if (x.getElementType() != w.getType().getElementType() ||
      mm.getType().getElementType() != x.getElementType() ||
      !mm.getType().hasStaticShape())
    return nullptr;
  return w;
}

/// Splitting a result of this type along its last dim gives views only
/// when all its rows are one row.
bool lastDimSplitIsView(RankedTensorType type) {
  ArrayRef<int64_t> shape = type.getShape();
  return !shape.empty() &&
         llvm::all_of(shape.drop_back(), [](int64_t d) { return d == 1; });
}

struct BraidFuseComputePass
    : public braid::impl::BraidFuseComputePassBase<BraidFuseComputePass> {
  using Base::Base;

  void runOnOperation() override {
    if (matmuls) {
      getOperation().walk([&](Block *block) { fuseMatmuls(*block); });
      order_.clear();
      getOperation().walk([&](Block *block) { number(*block); });
      // Only ropes of one fused result can pair: bucket them by it.
      SmallVector<RopeOp> ropes;
      llvm::DenseMap<Value, SmallVector<RopeOp>> byFused;
      getOperation().walk([&](RopeOp op) {
        if (std::optional<RopeSource> src = ropeSource(op)) {
          ropes.push_back(op);
          byFused[src->fused].push_back(op);
        }
      });
      llvm::SmallPtrSet<Operation *, 16> erased;
      for (RopeOp rope : ropes)
        if (!erased.count(rope))
          fuseAdjacentRopes(rope, byFused[ropeSource(rope)->fused], erased);
    }
    SmallVector<MulOp> muls;
    getOperation().walk([&](MulOp op) { muls.push_back(op); });
    for (MulOp mul : muls)
      fuseSwiglu(mul);
    SmallVector<RmsNormOp> norms;
    getOperation().walk([&](RmsNormOp op) { norms.push_back(op); });
    for (RmsNormOp norm : norms)
      fuseAddRmsNorm(norm);
    // Last: a residual add a norm reads is add_rms_norm's (it takes the
    // norm too); the ones left (GPT-2's, before a layer_norm) can be a
    // matmul's epilogue.
    if (epilogues) {
      SmallVector<MatmulOp> mms;
      getOperation().walk([&](MatmulOp op) { mms.push_back(op); });
      for (MatmulOp mm : mms)
        fuseEpilogue(mm);
    }
  }

  /// rms_norm(x + r): the sum may have other readers (the residual stream
  /// goes on); they read the fused op's sum. The fused op takes the norm's
  /// place when no other reader of the sum comes before it, else the add's
  /// place when the weight is already defined there; otherwise nothing.
  void fuseAddRmsNorm(RmsNormOp norm) {
    auto add = norm.getInput().getDefiningOp<AddOp>();
    if (!add || hasDiscardableAttrs(add) || hasDiscardableAttrs(norm))
      return;
    Type type = add.getType();
    if (add.getLhs().getType() != type || add.getRhs().getType() != type ||
        norm.getType() != type || add->getBlock() != norm->getBlock())
      return;
    Operation *at = norm;
    for (Operation *user : add->getUsers())
      if (user != norm &&
          (user->getBlock() != norm->getBlock() || user->isBeforeInBlock(norm)))
        at = add;
    if (at == add.getOperation()) {
      Operation *weight = norm.getWeight().getDefiningOp();
      if (weight && (weight->getBlock() != add->getBlock() ||
                     !weight->isBeforeInBlock(add)))
        return;
    }
    OpBuilder b(at);
    auto fused = AddRmsNormOp::create(b, norm.getLoc(), type, type,
                                      add.getLhs(), add.getRhs(),
                                      norm.getWeight(), norm.getEpsilonAttr());
    norm.replaceAllUsesWith(fused.getResult());
    add.replaceAllUsesWith(fused.getSum());
    norm.erase();
    add.erase();
  }

  /// Projections of one input (same block, same weight K and element
  /// type) become one matmul against the pack of their weights, in block
  /// order, at the first one's place; each result is a slice of it.
  /// Positions of a block's ops when a phase starts. The phases ask about
  /// those ops only, never about the ones they create; Block's own order
  /// would be renumbered from scratch after each fusion that inserts more
  /// ops at one place than its gaps hold, which makes a decode function of
  /// many layers quadratic.
  llvm::DenseMap<Operation *, int64_t> order_;

  void number(Block &block) {
    int64_t i = 0;
    for (Operation &op : block)
      order_[&op] = 2 * i++;
  }
  bool before(Operation *a, Operation *b) const {
    return order_.lookup(a) < order_.lookup(b);
  }
  /// Moves `op` (a parameter: no operands) just before `at`.
  void hoist(Operation *op, Operation *at) {
    if (before(op, at))
      return;
    op->moveBefore(at);
    order_[op] = order_.lookup(at) - 1;
  }

  void fuseMatmuls(Block &block) {
    number(block);
    llvm::MapVector<Value, SmallVector<MatmulOp>> byInput;
    for (Operation &op : block)
      if (auto mm = dyn_cast<MatmulOp>(op))
        if (projectionWeight(mm) && lastDimSplitIsView(mm.getType()))
          byInput[mm.getA()].push_back(mm);
    for (auto &[input, group] : byInput) {
      // One K and one result type but the last dim (the input fixes both).
      if (group.size() < 2)
        continue;
      llvm::SmallPtrSet<Operation *, 4> weights;
      bool distinct = llvm::all_of(group, [&](MatmulOp mm) {
        return weights.insert(projectionWeight(mm)).second;
      });
      if (!distinct)
        continue; // one weight twice: CSE's job, not a pack's
      fuseGroup(group);
    }
  }

  /// The bias add of each projection (its only reader: `add(mm, bias)`,
  /// bias a 1-D braid.parameter of the result's width), or none if any
  /// projection lacks one.
  static SmallVector<AddOp> biasAddsOf(ArrayRef<MatmulOp> group) {
    SmallVector<AddOp> adds;
    for (MatmulOp mm : group) {
      if (!mm->hasOneUse())
        return {};
      auto add = dyn_cast<AddOp>(*mm->getUsers().begin());
      if (!add || add.getLhs() != mm.getResult() ||
          add.getType() != mm.getType() || hasDiscardableAttrs(add) ||
          add->getBlock() != mm->getBlock())
        return {};
      auto bias = add.getRhs().getDefiningOp<ParameterOp>();
      if (!bias || bias.getType().getRank() != 1 ||
          bias.getType().getDimSize(0) != mm.getType().getShape().back() ||
          bias.getType().getElementType() != mm.getType().getElementType())
        return {};
      adds.push_back(add);
    }
    return adds;
  }

  void fuseGroup(ArrayRef<MatmulOp> group) {
    MatmulOp first = group.front();
    auto resultType = cast<RankedTensorType>(first.getType());
    SmallVector<Value> pieces;
    int64_t total = 0;
    for (MatmulOp mm : group) {
      ParameterOp w = projectionWeight(mm);
      // Parameters have no operands: defining them earlier is always valid.
      hoist(w, first);
      pieces.push_back(w.getResult());
      total += w.getType().getDimSize(0);
    }
    OpBuilder b(first);
    Location loc = b.getFusedLoc(llvm::to_vector(
        llvm::map_range(group, [](MatmulOp mm) { return mm.getLoc(); })));
    auto weightType = cast<RankedTensorType>(pieces.front().getType());
    auto packType = RankedTensorType::get({total, weightType.getDimSize(1)},
                                          weightType.getElementType());
    Value pack = ParameterPackOp::create(b, loc, packType, pieces);
    SmallVector<int64_t> shape(resultType.getShape());
    shape.back() = total;
    auto fusedType = RankedTensorType::get(shape, resultType.getElementType());
    Operation *fused =
        MatmulOp::create(b, loc, fusedType, first.getA(), pack,
                         /*transpose_a=*/false, /*transpose_b=*/true);
    // Per-projection biases (Qwen2's q/k/v) join as one add of their pack.
    SmallVector<AddOp> biasAdds = biasAddsOf(group);
    SmallVector<Operation *> replaced(group.begin(), group.end());
    if (!biasAdds.empty()) {
      SmallVector<Value> biases;
      for (AddOp add : biasAdds) {
        hoist(add.getRhs().getDefiningOp(), first);
        biases.push_back(add.getRhs());
      }
      Value biasPack = ParameterPackOp::create(
          b, loc, RankedTensorType::get({total}, resultType.getElementType()),
          biases);
      fused = AddOp::create(b, loc, fusedType, fused->getResult(0), biasPack);
      for (auto [i, add] : llvm::enumerate(biasAdds))
        replaced[i] = add;
    }
    SmallVector<int64_t> offsets(shape.size(), 0);
    SmallVector<Value> slices;
    for (MatmulOp mm : group) {
      SmallVector<int64_t> sizes(mm.getType().getShape());
      slices.push_back(SliceOp::create(b, mm.getLoc(), mm.getType(),
                                       fused->getResult(0), offsets, sizes));
      offsets.back() += sizes.back();
    }
    // The builder inserts before `first`: erase only when done with it.
    for (auto [i, slice] : llvm::enumerate(slices)) {
      Operation *mm = group[i];
      replaced[i]->getResult(0).replaceAllUsesWith(slice);
      replaced[i]->erase();
      if (replaced[i] != mm)
        mm->erase();
    }
  }

  /// Where a rope's input is heads [begin, end) of the last dim of one
  /// fused matmul's single-row result (reshape(slice(F))).
  struct RopeSource {
    Value fused;
    int64_t begin = 0, end = 0;
  };
  static std::optional<RopeSource> ropeSource(RopeOp rope) {
    auto reshape = rope.getInput().getDefiningOp<ReshapeOp>();
    auto slice =
        reshape ? reshape.getInput().getDefiningOp<SliceOp>() : nullptr;
    if (!slice || hasDiscardableAttrs(reshape) || hasDiscardableAttrs(slice))
      return std::nullopt;
    auto fusedType = cast<RankedTensorType>(slice.getInput().getType());
    auto in = cast<RankedTensorType>(rope.getInput().getType());
    if (!lastDimSplitIsView(fusedType) || in.getRank() != 4 ||
        fusedType.getRank() != 3 || in.getDimSize(0) != 1 ||
        in.getDimSize(1) != 1 || rope.getType() != in)
      return std::nullopt;
    return RopeSource{slice.getInput(), slice.getOffsets().back(),
                      slice.getOffsets().back() + slice.getSizes().back()};
  }

  /// Two ropes of one positions operand and one set of attributes that
  /// rotate adjacent head ranges of one fused result (Q and K of a fused
  /// QKV projection, one token) become one rope over both ranges: each
  /// head rotates by its own elements and the token's position only, so
  /// the result is the same, and a launch goes.
  void fuseAdjacentRopes(RopeOp rope, ArrayRef<RopeOp> ropes,
                         llvm::SmallPtrSetImpl<Operation *> &erased) {
    std::optional<RopeSource> a = ropeSource(rope);
    if (!a || hasDiscardableAttrs(rope))
      return;
    for (RopeOp other : ropes) {
      if (other == rope || erased.count(other) ||
          other->getBlock() != rope->getBlock() ||
          other.getPositions() != rope.getPositions() ||
          other->getAttrDictionary() != rope->getAttrDictionary())
        continue;
      std::optional<RopeSource> b = ropeSource(other);
      if (!b || b->fused != a->fused || b->begin != a->end)
        continue;
      auto typeA = cast<RankedTensorType>(rope.getType());
      auto typeB = cast<RankedTensorType>(other.getType());
      if (typeA.getDimSize(3) != typeB.getDimSize(3) ||
          typeA.getElementType() != typeB.getElementType())
        continue;
      // Insert before the earlier rope; both inputs must exist there.
      Operation *at = before(rope, other) ? rope.getOperation() : other;
      Operation *inputA = rope.getInput().getDefiningOp();
      Operation *inputB = other.getInput().getDefiningOp();
      if ((inputA != at && !before(inputA, at)) ||
          (inputB != at && !before(inputB, at)))
        continue;
      mergeRopes(rope, other, *a, at);
      erased.insert(rope);
      erased.insert(other);
      return;
    }
  }

  void mergeRopes(RopeOp first, RopeOp second, const RopeSource &src,
                  Operation *at) {
    auto typeA = cast<RankedTensorType>(first.getType());
    auto typeB = cast<RankedTensorType>(second.getType());
    int64_t headsA = typeA.getDimSize(2), headsB = typeB.getDimSize(2);
    int64_t dim = typeA.getDimSize(3);
    Type elem = typeA.getElementType();
    OpBuilder b(at);
    Location loc = b.getFusedLoc({first.getLoc(), second.getLoc()});
    Value both = SliceOp::create(
        b, loc, RankedTensorType::get({1, 1, (headsA + headsB) * dim}, elem),
        src.fused, ArrayRef<int64_t>{0, 0, src.begin},
        ArrayRef<int64_t>{1, 1, (headsA + headsB) * dim});
    auto headsType = RankedTensorType::get({1, 1, headsA + headsB, dim}, elem);
    Value heads = ReshapeOp::create(b, loc, headsType, both);
    auto rotated = RopeOp::create(
        b, loc, headsType, heads, first.getPositions(), first.getThetaAttr(),
        first.getInvFreqAttr(), first.getAttentionFactorAttr(),
        first.getRotaryDimAttr());
    Value outA = SliceOp::create(b, first.getLoc(), typeA, rotated,
                                 ArrayRef<int64_t>{0, 0, 0, 0},
                                 ArrayRef<int64_t>{1, 1, headsA, dim});
    Value outB = SliceOp::create(b, second.getLoc(), typeB, rotated,
                                 ArrayRef<int64_t>{0, 0, headsA, 0},
                                 ArrayRef<int64_t>{1, 1, headsB, dim});
    first.replaceAllUsesWith(outA);
    second.replaceAllUsesWith(outB);
    for (RopeOp rope : {first, second}) {
      Operation *reshape = rope.getInput().getDefiningOp();
      rope.erase();
      // The old reshape and slice, unless something else reads them.
      if (reshape->use_empty()) {
        Operation *slice = reshape->getOperand(0).getDefiningOp();
        reshape->erase();
        if (slice->use_empty())
          slice->erase();
      }
    }
  }

  /// The only reader of `v`, when `v` has exactly one use, in `v`'s block,
  /// without schedule attributes.
  static Operation *onlyReader(Value v) {
    if (!v.hasOneUse())
      return nullptr;
    Operation *user = *v.getUsers().begin();
    if (user->getBlock() != v.getParentBlock() || hasDiscardableAttrs(user))
      return nullptr;
    return user;
  }

  /// matmul -> add of an [N] bias -> tanh GELU or residual add, each the
  /// only reader of the one before (any part may be missing): one matmul
  /// with that epilogue (cuBLASLt's BIAS / GELU_BIAS, C with beta 1), at
  /// the last absorbed op's place. An exact (erf) GELU stays its own op:
  /// cuBLASLt has no epilogue for it.
  void fuseEpilogue(MatmulOp mm) {
    if (mm.getBias() || mm.getResidual() || mm.getGelu() ||
        hasDiscardableAttrs(mm))
      return;
    auto type = cast<RankedTensorType>(mm.getType());
    SmallVector<Operation *, 3> chain{mm}; // the ops the epilogue absorbs
    Value bias;
    if (auto add = dyn_cast_or_null<AddOp>(onlyReader(mm.getResult()))) {
      Value other =
          add.getLhs() == mm.getResult() ? add.getRhs() : add.getLhs();
      auto otherType = cast<RankedTensorType>(other.getType());
      if (add.getType() == type && otherType.getRank() == 1 &&
          otherType.getDimSize(0) == type.getShape().back() &&
          otherType.getElementType() == type.getElementType() &&
          other != mm.getResult()) {
        bias = other;
        chain.push_back(add);
      }
    }
    // Then a residual add (the result's type on both sides) or a tanh GELU:
    // cuBLASLt adds its C input before the activation, so not both.
    Value residual;
    GeluApproximationAttr gelu;
    Operation *next = onlyReader(chain.back()->getResult(0));
    Value sum = chain.back()->getResult(0);
    if (auto add = dyn_cast_or_null<AddOp>(next)) {
      Value other = add.getLhs() == sum ? add.getRhs() : add.getLhs();
      if (add.getType() == type && other.getType() == type && other != sum) {
        residual = other;
        chain.push_back(add);
      }
    } else if (auto g = dyn_cast_or_null<GeluOp>(next)) {
      if (g.getApproximation() == GeluApproximation::tanh &&
          g.getType() == type) {
        gelu = g.getApproximationAttr();
        chain.push_back(g);
      }
    }
    if (chain.size() == 1)
      return;
    Operation *last = chain.back();
    OpBuilder b(last);
    auto fused =
        MatmulOp::create(b, b.getFusedLoc({mm.getLoc(), last->getLoc()}), type,
                         mm.getA(), mm.getB(), bias, residual,
                         mm.getTransposeAAttr(), mm.getTransposeBAttr(), gelu);
    last->getResult(0).replaceAllUsesWith(fused.getResult());
    // Each absorbed op's only reader is the next: erase from the last.
    for (Operation *op : llvm::reverse(chain))
      op->erase();
  }

  void fuseSwiglu(MulOp mul) {
    Type type = mul.getType();
    if (mul.getLhs().getType() != type || mul.getRhs().getType() != type ||
        hasDiscardableAttrs(mul))
      return;
    // silu(g) * u, or u * silu(g): float products commute exactly.
    Value up = mul.getRhs();
    SiluOp silu = siluOnlyFeeding(mul.getLhs(), mul);
    if (!silu) {
      silu = siluOnlyFeeding(mul.getRhs(), mul);
      up = mul.getLhs();
    }
    if (!silu)
      return;
    OpBuilder b(mul);
    Value y = SwigluOp::create(b, mul.getLoc(), type, silu.getInput(), up);
    mul.replaceAllUsesWith(y);
    mul.erase();
    silu.erase();
  }
};

} // namespace
