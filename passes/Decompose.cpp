//===- Decompose.cpp - braid-decompose ------------------------------------===//
//
// Token-chunk decomposition (see Passes.td): a prefill function's tokens
// cut into k chunks whose ops interleave (side by side, or skewed as a
// software pipeline), so that braid-schedule can run chunk i's collectives
// while chunk i+1 computes. The count, the order and the form (the
// function or a variant of it) are chosen by pricing scheduled copies.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "passes/cost/CostModel.h"
#include "passes/cost/Target.h"
#include "passes/cost/Timeline.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Threading.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

#include <set>
#include <tuple>

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDDECOMPOSEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;
namespace cost = ::braid::cost;

namespace {

/// Tokens run along dim 1 ([batch, tokens, ...]) of every token value.
constexpr unsigned kTokenDim = 1;

} // namespace

SmallVector<BlockArgument> mlir::braid::tokenInputs(func::FuncOp func) {
  auto candidate = [&](BlockArgument arg) -> RankedTensorType {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!func.getArgAttr(arg.getArgNumber(), "braid.input") || !t ||
        t.getRank() < 2)
      return {};
    return t;
  };
  // The token count is the `positions` input's (braid-run's contract: one
  // position per token), else the first candidate's: a hand-written
  // function may have a [batch, 1] row index before its tokens.
  int64_t tokens = -1;
  for (BlockArgument arg : func.getArguments()) {
    RankedTensorType t = candidate(arg);
    if (!t)
      continue;
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "braid.input");
    if (name && name.getValue() == "positions") {
      tokens = t.getDimSize(kTokenDim);
      break;
    }
    if (tokens < 0)
      tokens = t.getDimSize(kTokenDim);
  }
  SmallVector<BlockArgument> inputs;
  for (BlockArgument arg : func.getArguments())
    if (RankedTensorType t = candidate(arg);
        t && t.getDimSize(kTokenDim) == tokens)
      inputs.push_back(arg);
  return inputs;
}

/// A decode step's token inputs (tokenInputs) hold one token each: nothing
/// to cut.
static bool holdsOneToken(ArrayRef<BlockArgument> tokenInputs) {
  return !tokenInputs.empty() &&
         cast<RankedTensorType>(tokenInputs.front().getType())
                 .getDimSize(kTokenDim) <= 1;
}

std::optional<SmallVector<int>>
mlir::braid::parseChunkCounts(StringRef chunks) {
  SmallVector<int> counts;
  SmallVector<StringRef> pieces;
  chunks.split(pieces, ',');
  for (StringRef piece : pieces) {
    int k = 0;
    if (piece.trim().getAsInteger(10, k) || k < 1)
      return std::nullopt;
    counts.push_back(k);
  }
  return counts;
}

namespace {

RankedTensorType chunkType(Type type, int k) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[kTokenDim] /= k;
  return RankedTensorType::get(shape, t.getElementType());
}

/// Sets the chunk ops are created for, for one scope.
class ChunkScope {
public:
  ChunkScope(int &chunk, int value) : chunk_(chunk) { chunk_ = value; }
  ~ChunkScope() { chunk_ = -1; }

private:
  int &chunk_;
};

/// Rewrites one function into k interleaved chunks, or says why not.
class Decomposer {
public:
  /// With `skewed`, apply() leaves the chunks in a software pipeline
  /// (skew()), else side by side.
  Decomposer(func::FuncOp func, int k, bool skewed = false)
      : func_(func), k_(k), skewed_(skewed) {}

  /// The reason the function cannot be decomposed, or "" if it can be (a
  /// dry run: nothing changes).
  std::string check() {
    dryRun_ = true;
    std::string why = run();
    dryRun_ = false;
    return why;
  }

  /// Decomposes (after a successful check()); "" or what went wrong.
  std::string apply() { return run(); }

private:
  bool isToken(Value v) const { return tokens_.count(v) > 0; }

  /// A value with a token dim that k divides, else "".
  std::string divisible(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getRank() < 2 || t.getDimSize(kTokenDim) % k_ != 0)
      return "a token value of shape without " + std::to_string(k_) +
             " equal chunks along dim 1";
    return "";
  }

  Value remapped(Value v) const {
    auto it = remap_.find(v);
    return it == remap_.end() ? v : it->second;
  }

  /// Creates `op` again with `operands` and `types` (its attributes,
  /// `attrs` overriding), before the terminator.
  Operation *recreate(Operation *op, ValueRange operands, TypeRange types,
                      ArrayRef<NamedAttribute> attrs = {}) {
    OpBuilder b(terminator_);
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(operands);
    NamedAttrList all(op->getAttrs());
    for (NamedAttribute a : attrs)
      all.set(a.getName(), a.getValue());
    state.addAttributes(all);
    state.addTypes(types);
    Operation *created = b.create(state);
    if (chunk_ >= 0)
      chunkOf_[created] = chunk_;
    return created;
  }

  std::string run() {
    Block &body = func_.getBody().front();
    terminator_ = body.getTerminator();
    tokens_.clear();
    remap_.clear();
    pinnedFrom_.clear();
    joins_.clear();
    joined_.clear();
    splitOver_.clear();
    exchangedOver_.clear();
    exchangeSplits_.clear();
    cutCollective_ = false;
    chunkOf_.clear();
    SmallVector<Operation *> old;
    for (Operation &op : body)
      if (&op != terminator_)
        old.push_back(&op);
    SmallVector<BlockArgument> inputs = tokenInputs(func_);
    if (holdsOneToken(inputs))
      return "one token (a decode step): nothing to cut";
    for (BlockArgument arg : inputs) {
      auto t = cast<RankedTensorType>(arg.getType());
      if (std::string why = divisible(arg); !why.empty())
        return why;
      if (dryRun_) {
        tokens_[arg] = {};
        continue;
      }
      OpBuilder b(&body, body.begin());
      int64_t c = t.getDimSize(kTokenDim) / k_;
      for (int i = 0; i < k_; ++i) {
        SmallVector<int64_t> offsets(t.getRank(), 0), sizes(t.getShape());
        offsets[kTokenDim] = i * c;
        sizes[kTokenDim] = c;
        auto chunk = SliceOp::create(b, arg.getLoc(), chunkType(t, k_), arg,
                                     offsets, sizes);
        chunkOf_[chunk] = i;
        tokens_[arg].push_back(chunk);
      }
    }
    if (tokens_.empty())
      return "no token inputs";
    for (Operation *op : old)
      if (std::string why = visit(op); !why.empty())
        return why;
    if (llvm::any_of(terminator_->getOperands(),
                     [&](Value v) { return isSplit(v); }))
      return "an output split along the tokens over a group";
    if (llvm::any_of(terminator_->getOperands(),
                     [&](Value v) { return isExchanged(v); }))
      return "an output of an all_to_all concatenating tokens from every "
             "rank";
    if (dryRun_)
      return "";
    // Outputs: token values are the chunks concatenated; the rest as
    // remapped (the last chunk's caches).
    for (OpOperand &use : terminator_->getOpOperands())
      use.set(isToken(use.get()) ? join(use.get()) : remapped(use.get()));
    for (Operation *op : llvm::reverse(old))
      if (op->getBlock() && op->use_empty() &&
          !isa<ParameterOp, ParameterPackOp>(op))
        op->erase();
    // Slices and reshapes made for the old first-token position, unread.
    SmallVector<Operation *> dead;
    for (Operation &op : llvm::reverse(body))
      if (!isa<ParameterOp, ParameterPackOp>(op) && isOpTriviallyDead(&op))
        dead.push_back(&op);
    for (Operation *op : dead)
      if (isOpTriviallyDead(op))
        op->erase();
    if (skewed_)
      skew(body);
    return "";
  }

  /// Reorders the body as a software pipeline in which chunk c runs c
  /// collectives behind chunk 0. Side by side (the order visit() creates),
  /// the chunks' copies of one collective are adjacent in the program, and
  /// collectives keep their program order on their stream: with sequence
  /// parallelism chunk 0's all_gather queues behind every chunk's
  /// reduce_scatter, the last of which waits for the last chunk's matmul,
  /// so that pair is exposed in every layer. Skewed, one chunk's
  /// collectives fly while the other chunks compute, at the price of
  /// filling and draining the pipeline once per step. An op's place is
  /// (collectives on its longest input path + its chunk, its chunk, its
  /// position side by side), taken in dependence order; an op of no chunk
  /// counts as chunk 0 and comes when its operands are there.
  void skew(Block &body) {
    SmallVector<Operation *> ops;
    llvm::DenseMap<Operation *, int> index;
    for (Operation &op : body)
      if (&op != terminator_) {
        index[&op] = int(ops.size());
        ops.push_back(&op);
      }
    std::vector<int64_t> depth(ops.size(), 0);
    std::vector<int> pending(ops.size(), 0);
    std::vector<SmallVector<int, 4>> users(ops.size());
    for (auto [i, op] : llvm::enumerate(ops)) {
      llvm::SmallDenseSet<int, 4> seen;
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        auto it = def ? index.find(def) : index.end();
        if (it == index.end() || !seen.insert(it->second).second)
          continue;
        int d = it->second;
        depth[i] = std::max(depth[i],
                            depth[size_t(d)] + isa<CollectiveOpInterface>(def));
        users[size_t(d)].push_back(int(i));
        ++pending[i];
      }
    }
    using Key = std::tuple<int64_t, int, int>;
    auto key = [&](int i) {
      int chunk = chunkOf_.lookup(ops[size_t(i)]);
      return Key{depth[size_t(i)] + chunk, chunk, i};
    };
    std::set<Key> ready;
    for (size_t i = 0; i < ops.size(); ++i)
      if (pending[i] == 0)
        ready.insert(key(int(i)));
    while (!ready.empty()) {
      int i = std::get<2>(*ready.begin());
      ready.erase(ready.begin());
      ops[size_t(i)]->moveBefore(terminator_);
      for (int u : users[size_t(i)])
        if (--pending[size_t(u)] == 0)
          ready.insert(key(u));
    }
  }

  /// One op: moved as it is when it reads no token value, else once per
  /// chunk (or once, on the chunk holding a token slice). An op the chunks
  /// cannot pass through joins them: it runs once on their concatenation,
  /// and so does everything after it that reads its results.
  std::string visit(Operation *op) {
    if (isa<ParameterOp, ParameterPackOp>(op))
      return "";
    bool readsTokens =
        llvm::any_of(op->getOperands(), [&](Value v) { return isToken(v); });
    if (!readsTokens) {
      bool readsJoined =
          llvm::any_of(op->getOperands(), [&](Value v) { return isJoined(v); });
      if (isa<AttentionOp>(op) && !readsJoined)
        return "an attention whose inputs are not token values";
      return runWhole(op, /*resultsJoined=*/readsJoined);
    }
    std::string why = uncuttable(op);
    if (why.empty()) {
      if (auto slice = dyn_cast<SliceOp>(op))
        return visitSlice(slice);
      if (auto attention = dyn_cast<AttentionOp>(op))
        return visitAttention(attention);
      return visitTokenWise(op);
    }
    // Conservatively refused rather than joined: a collective (the chunks
    // exist to overlap them), an op before any collective was cut (the cut
    // would hide nothing), and a value split or exchanged by chunk (its
    // chunks hold other tokens than the whole value: concatenated, they
    // are not it).
    if (isa<CollectiveOpInterface>(op) || !cutCollective_ ||
        llvm::any_of(op->getOperands(),
                     [&](Value v) { return isSplit(v) || isExchanged(v); }))
      return why;
    return runWhole(op, /*resultsJoined=*/true);
  }

  /// Why the chunks cannot pass through `op`, which reads a token value; ""
  /// if each chunk can run its own copy.
  std::string uncuttable(Operation *op) const {
    for (Value r : op->getResults())
      if (std::string why = divisible(r);
          !why.empty() && !isa<SliceOp, AttentionOp>(op))
        return why;
    if (std::string why = splitRefusal(op); !why.empty())
      return why;
    if (auto slice = dyn_cast<SliceOp>(op))
      return isExchanged(slice.getInput()) ? "" : sliceRefusal(slice);
    if (auto attention = dyn_cast<AttentionOp>(op))
      return attentionRefusal(attention);
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      auto in = cast<RankedTensorType>(reshape.getInput().getType());
      auto out = cast<RankedTensorType>(reshape.getType());
      if (out.getRank() < 2 || in.getDimSize(0) != out.getDimSize(0) ||
          in.getDimSize(kTokenDim) != out.getDimSize(kTokenDim))
        return "a reshape that moves the token dim";
    }
    if (auto coll = dyn_cast<CollectiveOpInterface>(op)) {
      if (!isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp>(op))
        return ("a '" + op->getName().getStringRef() + "' over token values")
            .str();
      // Along the tokens only when each chunk splits over the group.
      if (auto scatter = dyn_cast<ReduceScatterOp>(op))
        if (scatter.getDim() == int64_t(kTokenDim) &&
            !divisible(scatter.getResult()).empty())
          return "a reduce_scatter along the tokens whose chunks do not "
                 "split over the group";
      if (auto exchange = dyn_cast<AllToAllOp>(op)) {
        if (exchangesTokens(op) &&
            cast<RankedTensorType>(exchange.getType()).getDimSize(kTokenDim) /
                    k_ % groupSize(exchange.getGroupAttr()) !=
                0)
          return "an all_to_all exchanging tokens whose chunks do not "
                 "split over the group";
        if (exchange.getSplitDim() == int64_t(kTokenDim) &&
            !divisible(exchange.getResult()).empty())
          return "an all_to_all splitting the tokens whose chunks do not "
                 "split over the group";
      }
    } else if (!isa<MatmulOp, AddOp, MulOp, SiluOp, GeluOp, ActivationOp,
                    SwigluOp, RmsNormOp, AddRmsNormOp, LayerNormOp, RopeOp,
                    EmbeddingOp, ReshapeOp, SoftmaxOp, ConcatOp>(op)) {
      return ("a '" + op->getName().getStringRef() + "' over token values")
          .str();
    }
    if (auto softmax = dyn_cast<SoftmaxOp>(op))
      if (softmax.getDim() == int64_t(kTokenDim))
        return "a softmax along the tokens";
    if (auto concat = dyn_cast<ConcatOp>(op))
      if (concat.getDim() == int64_t(kTokenDim))
        return "a concat along the tokens";
    // Operands whose dim 1 is not the result's tokens: a matmul's b and
    // an embedding's table are shared by every chunk, so they must not be
    // token values; a matmul with transpose_a contracts over its rows.
    if (auto matmul = dyn_cast<MatmulOp>(op)) {
      if (isToken(matmul.getB()))
        return "a matmul whose b is a token value";
      auto a = cast<RankedTensorType>(matmul.getA().getType());
      // Tokens in a's batch dims: rank >= 3; [T, K] would cut K. Then b
      // is shared: unbatched, or batched over a's leading batch dim only.
      if (!isToken(matmul.getA()) || a.getRank() < 3)
        return "a matmul whose a holds the tokens in its rows or "
               "contraction";
      if (matmul.getTransposeA())
        return "a matmul contracting over the tokens (transpose_a)";
      if (a.getRank() > 3 &&
          cast<RankedTensorType>(matmul.getB().getType()).getRank() > 2)
        return "a batched matmul whose b has the tokens' batch dim";
    }
    // Broadcasting aligns trailing dims: a token operand of lower rank
    // than the result would line its tokens up with another dim.
    if (isa<AddOp, MulOp>(op))
      for (Value v : op->getOperands())
        if (isToken(v) &&
            cast<RankedTensorType>(v.getType()).getRank() !=
                cast<RankedTensorType>(op->getResult(0).getType()).getRank())
          return ("a '" + op->getName().getStringRef() +
                  "' broadcasting a token value of lower rank")
              .str();
    if (auto embedding = dyn_cast<EmbeddingOp>(op))
      if (isToken(embedding.getTable()))
        return "an embedding whose table is a token value";
    // A rope rotates each token by its own position.
    if (auto rope = dyn_cast<RopeOp>(op))
      if (!isToken(rope.getPositions()))
        return "a rope whose positions are not token values";
    // Every other operand is shared by all chunks, so it must not carry
    // the tokens: a broadcast bias or a weight, never a whole activation.
    for (Value v : op->getOperands())
      if (!isToken(v)) {
        auto t = dyn_cast<RankedTensorType>(v.getType());
        auto r = cast<RankedTensorType>(op->getResult(0).getType());
        bool weight = isa<MatmulOp>(op) && v == op->getOperand(1);
        bool table = isa<EmbeddingOp>(op) && v == op->getOperand(1);
        if (t && !weight && !table && t.getRank() >= r.getRank() - 1)
          return ("a '" + op->getName().getStringRef() +
                  "' reading a token value and a whole one")
              .str();
      }
    return "";
  }

  /// Token values split along the tokens over a group, by chunk: a
  /// reduce_scatter along the tokens gives rank r piece r of each chunk,
  /// not piece r of the whole, so the chunks hold other tokens than the
  /// whole op's result. Only token-wise ops may read them, until an
  /// all_gather along the tokens over that group makes each chunk whole
  /// again; the result is then what the whole function computes.
  bool isSplit(Value v) const { return splitOver_.count(v) > 0; }
  bool isExchanged(Value v) const { return exchangedOver_.count(v) > 0; }

  /// Why `op` cannot read the split values it reads (or would split again
  /// or gather what is not split); "" if it can.
  std::string splitRefusal(Operation *op) const {
    // An exchange's result is n pieces along the tokens, one from each
    // rank: only its first (rank 0's, of each chunk when cut) is read.
    for (Value v : op->getOperands()) {
      Attribute g = exchangedOver_.lookup(v);
      if (!g)
        continue;
      auto slice = dyn_cast<SliceOp>(op);
      auto t = cast<RankedTensorType>(v.getType());
      if (!slice || slice.getOffsets()[kTokenDim] != 0 ||
          slice.getSizes()[kTokenDim] * groupSize(cast<FlatSymbolRefAttr>(g)) !=
              t.getDimSize(kTokenDim))
        return ("a '" + op->getName().getStringRef() +
                "' reading an all_to_all concatenating tokens from every rank "
                "other than by its first piece")
            .str();
    }
    Attribute group;
    bool split = false, whole = false;
    for (Value v : op->getOperands()) {
      if (!isToken(v))
        continue;
      Attribute g = splitOver_.lookup(v);
      if (g && group && g != group)
        return ("a '" + op->getName().getStringRef() +
                "' reading token values split over two groups")
            .str();
      if (g)
        group = g;
      (g ? split : whole) = true;
    }
    if (gathersTokens(op)) {
      std::string what = op->getName().stripDialect().str() +
                         (isa<AllGatherOp>(op) ? " along" : " gathering");
      // An all_to_all of whole tokens is an exchange (its first piece is
      // rank 0's chunk: plain TP's heads on whole weights under Ulysses).
      if (!split && isa<AllToAllOp>(op))
        return "";
      if (!split)
        return "an " + what + " the tokens of a value not split along them";
      if (group != cast<CollectiveOpInterface>(op).getGroupAttr())
        return "an " + what +
               " the tokens over another group than the one that split them";
      return "";
    }
    if (!split)
      return "";
    if (whole)
      return ("a '" + op->getName().getStringRef() +
              "' reading token values split along the tokens and whole ones")
          .str();
    if (splitsTokens(op))
      return ("a '" + op->getName().getStringRef() +
              "' splitting tokens already split")
          .str();
    if (isa<AttentionOp>(op))
      return "an attention over tokens split over a group";
    // Any other collective combines ranks' pieces, which cut are pieces of
    // a chunk, not of the whole: other tokens.
    if (isa<CollectiveOpInterface>(op))
      return ("a '" + op->getName().getStringRef() +
              "' combining tokens split over a group")
          .str();
    if (auto slice = dyn_cast<SliceOp>(op); slice && !takesAllTokens(slice))
      return "a slice of tokens split over a group";
    return "";
  }

  /// What `op`'s token results are split over: a reduce_scatter along the
  /// tokens splits, an all_gather along them joins, the rest keep their
  /// operands' split.
  void recordSplit(Operation *op) {
    Attribute group;
    for (Value v : op->getOperands())
      if (Attribute g = splitOver_.lookup(v))
        group = g;
    bool exchange = exchangesTokens(op) ||
                    (gathersTokens(op) && isa<AllToAllOp>(op) && !group);
    if (exchange) {
      exchangedOver_[op->getResult(0)] =
          cast<CollectiveOpInterface>(op).getGroupAttr();
      if (exchangesTokens(op))
        exchangeSplits_.insert(op->getResult(0));
      return;
    }
    if (splitsTokens(op))
      group = cast<CollectiveOpInterface>(op).getGroupAttr();
    if (gathersTokens(op))
      group = {};
    // An exchange's first piece: split when the exchange split the tokens.
    if (auto slice = dyn_cast<SliceOp>(op))
      if (exchangeSplits_.contains(slice.getInput()))
        group = exchangedOver_.lookup(slice.getInput());
    if (group)
      for (Value r : op->getResults())
        splitOver_[r] = group;
  }

  /// A reduce_scatter along the tokens, or an all_to_all splitting them
  /// (Ulysses, after attention): rank r keeps piece r of each chunk.
  static bool splitsTokens(Operation *op) {
    if (auto scatter = dyn_cast<ReduceScatterOp>(op))
      return scatter.getDim() == int64_t(kTokenDim);
    if (auto exchange = dyn_cast<AllToAllOp>(op))
      return exchange.getSplitDim() == int64_t(kTokenDim) &&
             exchange.getConcatDim() != int64_t(kTokenDim);
    return false;
  }

  /// An all_to_all splitting and concatenating the tokens: piece j of its
  /// result is rank j's piece r (under sequence parallelism, of a value
  /// every rank holds whole, so the first piece is this rank's shard), and
  /// its first piece is split. (recordSplit also makes an exchange of an
  /// all_to_all gathering whole tokens: its first piece is rank 0's chunk.)
  static bool exchangesTokens(Operation *op) {
    auto exchange = dyn_cast<AllToAllOp>(op);
    return exchange && exchange.getSplitDim() == int64_t(kTokenDim) &&
           exchange.getConcatDim() == int64_t(kTokenDim);
  }

  int64_t groupSize(FlatSymbolRefAttr group) const {
    func::FuncOp func = func_;
    auto g = SymbolTable::lookupNearestSymbolFrom<DeviceGroupOp>(func, group);
    return g ? int64_t(g.getSize()) : 1;
  }

  /// An all_gather along the tokens, or an all_to_all concatenating them
  /// (Ulysses, before attention): the ranks' pieces of a chunk, in rank
  /// order, are that chunk.
  static bool gathersTokens(Operation *op) {
    if (auto gather = dyn_cast<AllGatherOp>(op))
      return gather.getDim() == int64_t(kTokenDim);
    if (auto exchange = dyn_cast<AllToAllOp>(op))
      return exchange.getConcatDim() == int64_t(kTokenDim) &&
             exchange.getSplitDim() != int64_t(kTokenDim);
    return false;
  }

  /// A token-wise op: one copy per chunk.
  std::string visitTokenWise(Operation *op) {
    if (isa<CollectiveOpInterface>(op))
      cutCollective_ = true;
    recordSplit(op);
    if (dryRun_) {
      for (Value r : op->getResults())
        tokens_[r] = {};
      return "";
    }
    for (int i = 0; i < k_; ++i) {
      ChunkScope scope(chunk_, i);
      SmallVector<Value> operands;
      for (Value v : op->getOperands())
        operands.push_back(isToken(v) ? tokens_[v][size_t(i)] : remapped(v));
      SmallVector<Type> types;
      for (Value r : op->getResults())
        types.push_back(chunkType(r.getType(), k_));
      Operation *chunk = recreate(op, operands, types);
      for (auto [r, c] : llvm::zip_equal(op->getResults(), chunk->getResults()))
        tokens_[r].push_back(c);
    }
    return "";
  }

  /// `op` once, as it was, on the joined chunks of the token values it
  /// reads; with `resultsJoined` its results are whole values made from
  /// chunks.
  std::string runWhole(Operation *op, bool resultsJoined) {
    if (resultsJoined)
      for (Value r : op->getResults())
        joined_.insert(r);
    if (dryRun_)
      return "";
    for (OpOperand &use : op->getOpOperands())
      use.set(isToken(use.get()) ? join(use.get()) : remapped(use.get()));
    op->moveBefore(terminator_);
    return "";
  }

  bool isJoined(Value v) const { return joined_.contains(v); }

  /// The chunks of token value `v` concatenated (once), after the ops
  /// created so far.
  Value join(Value v) {
    if (isa<BlockArgument>(v))
      return v; // an input: its chunks are slices of it
    Value &whole = joins_[v];
    if (!whole) {
      OpBuilder b(terminator_);
      whole = ConcatOp::create(b, v.getLoc(), v.getType(), tokens_[v],
                               b.getI64IntegerAttr(kTokenDim));
    }
    return whole;
  }

  /// A slice of a range of tokens must lie inside one chunk.
  static bool takesAllTokens(SliceOp slice) {
    auto t = cast<RankedTensorType>(slice.getInput().getType());
    return slice.getOffsets()[kTokenDim] == 0 &&
           slice.getSizes()[kTokenDim] == t.getDimSize(kTokenDim);
  }

  std::string sliceRefusal(SliceOp slice) const {
    if (takesAllTokens(slice))
      return "";
    auto t = cast<RankedTensorType>(slice.getInput().getType());
    ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
    int64_t c = t.getDimSize(kTokenDim) / k_;
    if (offsets[kTokenDim] / c !=
        (offsets[kTokenDim] + sizes[kTokenDim] - 1) / c)
      return "a slice of tokens across chunks";
    return "";
  }

  /// Along other dims: per chunk. Along the tokens: a range inside one
  /// chunk is a slice of that chunk (the last token, say), shared after.
  std::string visitSlice(SliceOp slice) {
    Value in = slice.getInput();
    auto t = cast<RankedTensorType>(in.getType());
    ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
    int64_t c = t.getDimSize(kTokenDim) / k_;
    // The first piece of an exchange: per chunk, its first piece.
    bool firstPiece = isExchanged(in);
    if (takesAllTokens(slice) || firstPiece) {
      recordSplit(slice);
      if (dryRun_) {
        tokens_[slice.getResult()] = {};
        return "";
      }
      SmallVector<int64_t> chunkSizes(sizes);
      chunkSizes[kTokenDim] = sizes[kTokenDim] / k_;
      for (int i = 0; i < k_; ++i) {
        ChunkScope scope(chunk_, i);
        tokens_[slice.getResult()].push_back(
            recreate(slice, {tokens_[in][size_t(i)]},
                     {chunkType(slice.getType(), k_)},
                     {NamedAttribute(slice.getSizesAttrName(),
                                     DenseI64ArrayAttr::get(slice.getContext(),
                                                            chunkSizes))})
                ->getResult(0));
      }
      return "";
    }
    int64_t j = offsets[kTokenDim] / c;
    if (dryRun_)
      return "";
    SmallVector<int64_t> local(offsets);
    local[kTokenDim] -= j * c;
    ChunkScope scope(chunk_, int(j));
    Operation *pinned = recreate(
        slice, {tokens_[in][size_t(j)]}, {slice.getType()},
        {NamedAttribute(slice.getOffsetsAttrName(),
                        DenseI64ArrayAttr::get(slice.getContext(), local))});
    remap_[slice.getResult()] = pinned->getResult(0);
    pinnedFrom_[pinned->getResult(0)] = slice;
    return "";
  }

  /// The position's first-token slice, looked through the pinned copy.
  SliceOp firstTokenSlice(AttentionOp attention) const {
    Value position = attention.getPosition();
    auto reshape = position.getDefiningOp<ReshapeOp>();
    auto first = reshape ? reshape.getInput().getDefiningOp<SliceOp>()
                         : position.getDefiningOp<SliceOp>();
    // Moved ops read the pinned copy: look through to the original slice.
    if (first && pinnedFrom_.count(first.getResult()))
      first = pinnedFrom_.lookup(first.getResult());
    return first;
  }

  std::string attentionRefusal(AttentionOp attention) const {
    if (!attention.hasCache() || !isToken(attention.getQ()) ||
        !isToken(attention.getK()) || !isToken(attention.getV()) ||
        isToken(attention.getKCache()) || isToken(attention.getVCache()))
      return "an attention without a KV cache, or over token caches";
    // Without the mask a query reads keys of later chunks.
    if (!attention.getCausal())
      return "a non-causal attention";
    // Chunk c writes its keys at the position of its first token, the
    // whole op at the first token's + c * (tokens per chunk): the same
    // only for consecutive positions, which the `positions` input holds
    // by contract (braid-run passes each sequence's 0, 1, 2, ... from its
    // start).
    SliceOp first = firstTokenSlice(attention);
    auto input = first ? dyn_cast<BlockArgument>(first.getInput()) : nullptr;
    func::FuncOp func = func_;
    auto name = input ? func.getArgAttrOfType<StringAttr>(input.getArgNumber(),
                                                          "braid.input")
                      : StringAttr();
    if (!first || !isToken(first.getInput()) || !name ||
        name.getValue() != "positions" || first.getOffsets()[kTokenDim] != 0 ||
        first.getSizes()[kTokenDim] != 1)
      return "an attention position that is not the first token's of the "
             "positions input";
    return "";
  }

  /// Causal attention over a KV cache: chunk i writes its keys at its
  /// first position and reads the rows chunks < i wrote, so the chunks
  /// thread the caches. Its position is `reshape(slice(P))` of the first
  /// token of a token value P (the positions input): chunk i's is the
  /// first token of P's chunk i.
  std::string visitAttention(AttentionOp attention) {
    auto reshape = attention.getPosition().getDefiningOp<ReshapeOp>();
    SliceOp first = firstTokenSlice(attention);
    if (dryRun_) {
      tokens_[attention.getOutput()] = {};
      return "";
    }
    Value kCache = remapped(attention.getKCache());
    Value vCache = remapped(attention.getVCache());
    for (int i = 0; i < k_; ++i) {
      ChunkScope scope(chunk_, i);
      Value pos = recreate(first, {tokens_[first.getInput()][size_t(i)]},
                           {first.getType()})
                      ->getResult(0);
      if (reshape)
        pos = recreate(reshape, {pos}, {reshape.getType()})->getResult(0);
      Operation *chunk =
          recreate(attention,
                   {tokens_[attention.getQ()][size_t(i)],
                    tokens_[attention.getK()][size_t(i)],
                    tokens_[attention.getV()][size_t(i)], kCache, vCache, pos},
                   {chunkType(attention.getOutput().getType(), k_),
                    kCache.getType(), vCache.getType()});
      tokens_[attention.getOutput()].push_back(chunk->getResult(0));
      kCache = chunk->getResult(1);
      vCache = chunk->getResult(2);
    }
    remap_[attention.getUpdatedCache()[0]] = kCache;
    remap_[attention.getUpdatedCache()[1]] = vCache;
    return "";
  }

  func::FuncOp func_;
  int k_;
  bool skewed_;
  bool dryRun_ = false;
  Operation *terminator_ = nullptr;
  llvm::DenseMap<Value, SmallVector<Value>> tokens_; // token value -> chunks
  llvm::DenseMap<Value, Value> remap_;        // shared value -> its replacement
  llvm::DenseMap<Value, SliceOp> pinnedFrom_; // pinned slice -> original
  llvm::DenseMap<Value, Value> joins_;        // token value -> its concat
  llvm::DenseSet<Value> joined_; // whole values computed from joined chunks
  bool cutCollective_ = false;   // a collective runs once per chunk
  llvm::DenseMap<Value, Attribute> splitOver_; // split token value -> group
  /// all_to_all results that split and concatenate the tokens -> group.
  llvm::DenseMap<Value, Attribute> exchangedOver_;
  llvm::DenseSet<Value> exchangeSplits_; // exchanges whose first piece is split
  int chunk_ = -1;                            // the chunk being created
  llvm::DenseMap<Operation *, int> chunkOf_;  // created op -> its chunk
};

struct BraidDecomposePass
    : public mlir::braid::impl::BraidDecomposePassBase<BraidDecomposePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::Expected<cost::Target> tgt = cost::resolveTarget(target);
    if (!tgt) {
      emitError(module.getLoc(), "braid-decompose: ")
          << llvm::toString(tgt.takeError());
      return signalPassFailure();
    }
    if (order != "auto" && order != "side-by-side" && order != "skewed") {
      emitError(module.getLoc(), "braid-decompose: order must be 'auto', "
                                 "'side-by-side' or 'skewed', got '")
          << order << "'";
      return signalPassFailure();
    }
    std::optional<SmallVector<int>> candidates = parseChunkCounts(chunks);
    if (!candidates) {
      emitError(module.getLoc(),
                "braid-decompose: chunks must be a list of positive "
                "counts, got '")
          << chunks << "'";
      return signalPassFailure();
    }
    // A target smaller than the module prices every collective at
    // infinity: then nothing is chosen by price (a count given alone still
    // applies).
    std::string fitProblem =
        cost::CostModel(*tgt, cost::LaunchMode::Graph, module).fitProblem();
    // Functions, and the variants braid-sequence-parallel left beside them.
    SmallVector<func::FuncOp> funcs;
    llvm::StringMap<SmallVector<func::FuncOp>> variants;
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      if (auto of = func->getAttrOfType<StringAttr>(kVariantOfAttr))
        variants[of.getValue()].push_back(func);
      else if (!func.isExternal() && func.getBody().hasOneBlock())
        funcs.push_back(func);
    }
    for (func::FuncOp func : funcs) {
      SmallVector<func::FuncOp> mine = variants.lookup(func.getSymName());
      variants.erase(func.getSymName());
      if (isScheduled(func) || llvm::any_of(mine, [](func::FuncOp v) {
            return v.isExternal() || !v.getBody().hasOneBlock() ||
                   isScheduled(v);
          })) {
        if (!mine.empty()) {
          emitError(func.getLoc(), "braid-decompose: @")
              << func.getSymName()
              << " and its variants must be unscheduled single-block "
                 "functions";
          return signalPassFailure();
        }
        continue;
      }
      if (failed(decomposeFunction(module, func, mine, *tgt, *candidates,
                                   fitProblem)))
        return signalPassFailure();
    }
    for (auto &[of, orphans] : variants) {
      emitError(orphans.front().getLoc(), "braid-decompose: a variant of @")
          << of << ", which is not a function here";
      return signalPassFailure();
    }
  }

  /// The step braid-estimate gives `func` cut into `k` chunks (in the
  /// pipeline order with `skewed`), then scheduled (schedule, streams) on a
  /// copy of the module.
  std::optional<double> estimate(ModuleOp module, StringRef name, int k,
                                 bool skewed, const cost::Target &tgt) {
    // The copy holds this function only: scheduling the others would price
    // nothing.
    OwningOpRef<ModuleOp> copy(ModuleOp::create(module.getLoc()));
    copy.get()->setAttrs(module->getAttrDictionary());
    OpBuilder b(copy->getBodyRegion());
    for (Operation &op : module.getBody()->getOperations()) {
      auto other = dyn_cast<func::FuncOp>(op);
      if (!other || other.getSymName() == name)
        b.clone(op);
    }
    auto func = copy->lookupSymbol<func::FuncOp>(name);
    // `k` passed check() on the original already.
    if (k > 1 && !Decomposer(func, k, skewed).apply().empty())
      return std::nullopt;
    PassManager pm(copy->getContext());
    pm.enableVerifier(false); // a copy that is priced and thrown away
    ::braid::addSchedulingPasses(pm, target, /*report=*/false,
                                 /*events=*/false);
    if (failed(pm.run(*copy)))
      return std::nullopt;
    cost::CostModel model(tgt, cost::LaunchMode::Graph, *copy);
    return cost::stepTime(func, model);
  }

  /// One way to compile a function: which form (the function or one of its
  /// variants), how many chunks, in which order.
  struct Choice {
    func::FuncOp form;
    int k = 1;
    bool skewed = false;
  };

  LogicalResult decomposeFunction(ModuleOp module, func::FuncOp func,
                                  ArrayRef<func::FuncOp> variants,
                                  const cost::Target &tgt,
                                  ArrayRef<int> candidates,
                                  StringRef fitProblem) {
    SmallVector<func::FuncOp> forms{func};
    forms.append(variants.begin(), variants.end());
    // A count that cannot apply is reported and skipped.
    SmallVector<std::tuple<std::string, int, std::string>> refused;
    SmallVector<Choice> legal;
    for (func::FuncOp form : forms)
      for (int k : candidates) {
        if (k == 1) {
          legal.push_back({form, 1, false});
          continue;
        }
        std::string why = Decomposer(form, k).check();
        if (!why.empty()) {
          refused.push_back({form == func
                                 ? std::string()
                                 : ("@" + form.getSymName() + " ").str(),
                             k, why});
          continue;
        }
        if (order != "skewed")
          legal.push_back({form, k, false});
        if (order != "side-by-side")
          legal.push_back({form, k, true});
      }
    // Nothing legal (one count forced, and refused): the function as it is,
    // which the user who forced the count is told about (not for a decode
    // step, which no count ever cuts).
    Choice best = legal.empty() ? Choice{func} : legal.front();
    if (legal.empty() && !refused.empty() && !holdsOneToken(tokenInputs(func)))
      emitWarning(func.getLoc(), "braid-decompose: ")
          << std::get<1>(refused.front()) << " chunks cannot apply ("
          << std::get<2>(refused.front()) << "): the function stays whole";
    std::string decision;
    llvm::raw_string_ostream os(decision);
    if (legal.size() > 1 && !fitProblem.empty()) {
      // Unpriced: the first legal choice, the function as it is unless a
      // count was forced (side by side then).
      best = legal.front();
      os << "not priced: " << fitProblem;
    } else if (legal.size() > 1) {
      // The cost model picks: the fastest scheduled step; ties to the
      // function as it is, fewer chunks, then side by side.
      // Each choice is priced on its own copy: in parallel where the
      // context has threads.
      SmallVector<std::optional<double>> times(legal.size());
      SmallVector<std::string> names;
      for (Choice c : legal)
        names.push_back(c.form.getSymName().str());
      mlir::parallelFor(module.getContext(), 0, legal.size(), [&](size_t i) {
        times[i] = estimate(module, names[i], legal[i].k, legal[i].skewed, tgt);
      });
      std::optional<double> bestTime;
      func::FuncOp shown = func;
      for (auto [c, t] : llvm::zip_equal(legal, times)) {
        if (c.form != shown) {
          os << " with @" << c.form.getSymName() << ":";
          shown = c.form;
        }
        if (t)
          os << " k=" << c.k << (c.skewed ? " skewed" : "") << ": "
             << llvm::format("%.3f", *t * 1e3) << " ms;";
        if (t && (!bestTime || *t < *bestTime * (1 - 1e-9))) {
          bestTime = t;
          best = c;
        }
      }
    }
    std::string chosen = best.form.getSymName().str();
    // The chosen form takes the function's place and name.
    if (best.form != func)
      func.getBody().takeBody(best.form.getBody());
    for (func::FuncOp variant : variants)
      variant.erase();
    auto [form, k, skewed] = best;
    if (k > 1) {
      if (std::string why = Decomposer(func, k, skewed).apply(); !why.empty())
        return emitError(func.getLoc(), "braid-decompose: ") << why;
      func->setAttr(
          kTokenChunksAttr,
          IntegerAttr::get(IntegerType::get(func.getContext(), 64), k));
    }
    if (report) {
      auto remark = emitRemark(func.getLoc())
                    << "braid-decompose: " << k
                    << (k == 1 ? " chunk" : " chunks")
                    << (k > 1 ? (skewed ? ", skewed" : ", side by side") : "");
      if (!variants.empty())
        remark << (form == func ? ", as it is" : ", the variant @" + chosen);
      if (!decision.empty())
        remark << (fitProblem.empty() ? " (estimated" : " (") << decision
               << ")";
      for (auto &[which, k, why] : refused)
        remark << "; " << which << "k=" << k << " refused: " << why;
    }
    return success();
  }
};

} // namespace
