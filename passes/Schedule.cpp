//===- Schedule.cpp - braid-schedule --------------------------------------===//
//
// Latency-hiding list scheduling (see Passes.td): collectives become
// `*_start` / `braid.wait` pairs where compute can run while they fly.
//
//===----------------------------------------------------------------------===//
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/cost/CostModel.h"
#include "passes/cost/Target.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDSCHEDULEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;
namespace cost = ::braid::cost;

namespace {

/// A synchronous tensor collective that has an asynchronous form and no
/// schedule or placement attributes yet.
bool canRunAsync(Operation *op) {
  return hasAsyncForm(op) && op->getDiscardableAttrDictionary().empty();
}

/// Parameters and packs are resident: they are placed just before their
/// first reader, not scheduled.
bool isResident(Operation *op) { return isa<ParameterOp, ParameterPackOp>(op); }

/// One node of the function's dependence graph. An async collective is two
/// nodes: its start (reads the operand) and its wait (yields the result).
struct Node {
  enum Kind { Other, Start, Wait } kind = Other;
  Operation *op = nullptr; // the original op (the collective, for both halves)
  int order = 0;           // tie-break: original position
  SmallVector<int, 4> succs;
  int preds = 0;
};

/// The schedule of one function: its nodes in issue order.
struct Order {
  std::vector<Node> nodes;
  std::vector<int> sequence;
};

/// The estimated time on the compute stream and on each group's
/// communication stream while a schedule is built.
struct Clock {
  double compute = 0;
  llvm::StringMap<double> groupFree; // group -> when its stream is free

  /// A collective issued now on its group's stream: when it ends.
  double start(Operation *op, double seconds) {
    auto coll = cast<CollectiveOpInterface>(op);
    double &free = groupFree[coll.getGroupAttr().getValue()];
    free = std::max(compute, free) + seconds;
    return free;
  }
};

class FunctionScheduler {
public:
  FunctionScheduler(func::FuncOp func, const cost::CostModel &model)
      : func_(func), model_(model) {
    llvm::DenseMap<Operation *, int> index;
    for (Operation &op : func.getBody().front())
      if (!isResident(&op) && !op.hasTrait<OpTrait::IsTerminator>()) {
        index[&op] = int(ops_.size());
        ops_.push_back(&op);
      }
    // What every schedule and every live-bytes count asks, by op index: the
    // ops each op reads, and each value's bytes and readers.
    defs_.resize(ops_.size());
    for (auto [i, op] : llvm::enumerate(ops_))
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (auto it = index.find(def);
              it != index.end() && !llvm::is_contained(defs_[i], it->second))
            defs_[i].push_back(it->second);
    auto describe = [&](Value v, int def) {
      if (!needsArenaBuffer(v) || viewOf(v))
        return;
      Live l{def, tensorBytes(v.getType())};
      for (Operation *user : v.getUsers()) {
        if (user->hasTrait<OpTrait::IsTerminator>())
          l.toEnd = true;
        else if (auto it = index.find(user); it != index.end())
          l.readers.push_back(it->second);
      }
      values_.push_back(std::move(l));
    };
    for (BlockArgument arg : func.getBody().front().getArguments())
      describe(arg, -1);
    for (auto [i, op] : llvm::enumerate(ops_))
      for (Value r : op->getResults())
        describe(r, int(i));
  }

  /// List-schedules with the collectives in `async` as start/wait pairs
  /// against an estimated clock (compute stream, one stream per group): a
  /// ready start first (as early as possible); then a wait whose
  /// collective has already ended by the compute clock (it costs nothing,
  /// and what it unblocks may start the next collective); then ready
  /// compute in its original order; and any other wait only when nothing
  /// else is ready (as late as possible), the earliest-ending first.
  Order schedule(const llvm::DenseSet<Operation *> &async) const {
    Order o;
    // By op index: the node yielding its results, the node reading operands.
    std::vector<int> producer(ops_.size()), consumer(ops_.size());
    for (auto [i, op] : llvm::enumerate(ops_)) {
      if (async.contains(op)) {
        int s = int(o.nodes.size());
        o.nodes.push_back({Node::Start, op, int(2 * i)});
        o.nodes.push_back({Node::Wait, op, int(2 * i + 1)});
        o.nodes[size_t(s)].succs.push_back(s + 1);
        ++o.nodes[size_t(s + 1)].preds;
        consumer[i] = s;
        producer[i] = s + 1;
      } else {
        int n = int(o.nodes.size());
        o.nodes.push_back({Node::Other, op, int(2 * i)});
        consumer[i] = producer[i] = n;
      }
    }
    auto edge = [&](int from, int to) {
      o.nodes[size_t(from)].succs.push_back(to);
      ++o.nodes[size_t(to)].preds;
    };
    int lastCollective = -1;
    for (auto [i, op] : llvm::enumerate(ops_)) {
      int reader = consumer[i];
      for (int def : defs_[i])
        edge(producer[size_t(def)], reader);
      // Collectives are issued in their original order on every rank: a
      // start never passes another collective's start or sync op.
      if (isa<CollectiveOpInterface>(op)) {
        if (lastCollective >= 0)
          edge(lastCollective, reader);
        lastCollective = reader;
      }
    }
    std::vector<int> preds(o.nodes.size());
    for (auto [i, n] : llvm::enumerate(o.nodes))
      preds[i] = n.preds;
    // Ready sets by priority; starts and compute by original order, waits
    // by when their collective is estimated to end.
    std::set<std::pair<int, int>> starts, others;
    std::set<std::pair<double, int>> waits;
    std::vector<double> endsAt(o.nodes.size(), 0); // wait node -> its end
    Clock clock;
    auto makeReady = [&](int n) {
      const Node &node = o.nodes[size_t(n)];
      if (node.kind == Node::Start)
        starts.insert({node.order, n});
      else if (node.kind == Node::Wait)
        waits.insert({endsAt[size_t(n)], n});
      else
        others.insert({node.order, n});
    };
    for (size_t n = 0; n < o.nodes.size(); ++n)
      if (preds[n] == 0)
        makeReady(int(n));
    while (!starts.empty() || !others.empty() || !waits.empty()) {
      int n;
      if (!starts.empty()) {
        n = starts.begin()->second;
        starts.erase(starts.begin());
      } else if (!waits.empty() &&
                 (others.empty() || waits.begin()->first <= clock.compute)) {
        n = waits.begin()->second;
        waits.erase(waits.begin());
      } else {
        n = others.begin()->second;
        others.erase(others.begin());
      }
      const Node &node = o.nodes[size_t(n)];
      if (node.kind == Node::Start)
        endsAt[size_t(n) + 1] = clock.start(node.op, costOf(node.op));
      else if (node.kind == Node::Wait)
        clock.compute = std::max(clock.compute, endsAt[size_t(n)]);
      else if (isa<CollectiveOpInterface>(node.op))
        clock.compute = clock.start(node.op, costOf(node.op));
      else
        clock.compute += costOf(node.op);
      o.sequence.push_back(n);
      for (int s : node.succs)
        if (--preds[size_t(s)] == 0)
          makeReady(s);
    }
    return o;
  }

  /// Device seconds `op` takes on its stream, with a kernel's graph launch
  /// gap (the cost model's prices; contention is left out).
  double costOf(Operation *op) const { return priced(op).seconds; }
  bool isCompute(Operation *op) const { return priced(op).compute; }

  struct Priced {
    double seconds = 0;
    bool compute = false;
  };
  const Priced &priced(Operation *op) const {
    auto [it, inserted] = costs_.try_emplace(op);
    if (inserted) {
      cost::OpCost c = model_.cost(op);
      it->second.seconds =
          c.seconds + (c.kernel ? model_.target().graphLaunchUs * 1e-6 : 0.0);
      it->second.compute = c.cls == cost::OpClass::Compute;
    }
    return it->second;
  }

  /// Device seconds of compute (with each kernel's launch gap) issued
  /// between each async collective's start and its wait: what it can hide
  /// behind.
  std::vector<std::pair<Operation *, double>>
  hiddenCompute(const Order &o) const {
    // Compute issued so far; a pair hides what was issued between its halves.
    double issued = 0;
    llvm::DenseMap<Operation *, double> atStart;
    std::vector<std::pair<Operation *, double>> hidden;
    for (int n : o.sequence) {
      const Node &node = o.nodes[size_t(n)];
      if (node.kind == Node::Start)
        atStart[node.op] = issued;
      else if (node.kind == Node::Wait)
        hidden.push_back({node.op, issued - atStart.lookup(node.op)});
      else if (isCompute(node.op))
        issued += costOf(node.op);
    }
    return hidden;
  }

  /// The most arena bytes live at once in `o`: a value from its producer
  /// to its last reader, an async collective's operand until its wait and
  /// its payload from its start (MemoryPlan's rules; views are free).
  int64_t peakLiveBytes(const Order &o) const {
    // By op index: where its results appear (start or whole op) and where
    // it stops reading (wait or whole op).
    std::vector<int> startPos(ops_.size(), 0), endPos(ops_.size(), 0);
    for (auto [pos, n] : llvm::enumerate(o.sequence)) {
      const Node &node = o.nodes[size_t(n)];
      size_t i = size_t(node.order / 2);
      if (node.kind != Node::Wait)
        startPos[i] = int(pos);
      if (node.kind != Node::Start)
        endPos[i] = int(pos);
    }
    int end = int(o.sequence.size());
    std::vector<int64_t> delta(size_t(end) + 2, 0);
    for (const Live &l : values_) {
      int from = l.def < 0 ? 0 : startPos[size_t(l.def)];
      int to = from;
      if (l.toEnd)
        to = end;
      else
        // A collective reads its operand until it completes (its wait).
        for (int reader : l.readers)
          to = std::max(to, endPos[size_t(reader)]);
      delta[size_t(from)] += l.bytes;
      delta[size_t(to) + 1] -= l.bytes;
    }
    int64_t now = 0, peak = 0;
    for (int64_t d : delta) {
      now += d;
      peak = std::max(peak, now);
    }
    return peak;
  }

  /// Rewrites the function in `o`'s order, async collectives as pairs.
  void apply(const Order &o) {
    Block &body = func_.getBody().front();
    Operation *terminator = body.getTerminator();
    OpBuilder b(terminator);
    llvm::DenseSet<Operation *> placed;
    // Resident operands go right before their first reader.
    std::function<void(Operation *)> placeResidents = [&](Operation *op) {
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (isResident(def) && placed.insert(def).second) {
            placeResidents(def);
            def->moveBefore(terminator);
          }
    };
    llvm::DenseMap<Operation *, Value> handles;
    for (int n : o.sequence) {
      const Node &node = o.nodes[size_t(n)];
      Operation *op = node.op;
      placeResidents(op);
      if (node.kind == Node::Other) {
        op->moveBefore(terminator);
        continue;
      }
      if (node.kind == Node::Start) {
        b.setInsertionPoint(terminator);
        handles[op] = createAsyncStart(b, op)->getResult(0);
        continue;
      }
      b.setInsertionPoint(terminator);
      Value result = WaitOp::create(b, op->getLoc(), op->getResult(0).getType(),
                                    handles.lookup(op))
                         .getResult();
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
    }
    placeResidents(terminator);
  }

  const std::vector<Operation *> &ops() const { return ops_; }

private:
  mutable func::FuncOp func_;
  const cost::CostModel &model_;
  std::vector<Operation *> ops_;
  std::vector<SmallVector<int, 4>> defs_; // by op: the ops it reads
  /// A value that takes arena bytes: its defining op (-1: an argument),
  /// its size, the ops that read it and whether the function returns it.
  struct Live {
    int def = -1;
    int64_t bytes = 0;
    SmallVector<int, 2> readers;
    bool toEnd = false;
  };
  std::vector<Live> values_;
  mutable llvm::DenseMap<Operation *, Priced> costs_;
};

struct BraidSchedulePass
    : public mlir::braid::impl::BraidSchedulePassBase<BraidSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::Expected<cost::Target> tgt = cost::resolveTarget(target);
    if (!tgt) {
      emitError(module.getLoc(), "braid-schedule: ")
          << llvm::toString(tgt.takeError());
      return signalPassFailure();
    }
    // -1 is each bound's default; any other negative, NaN or infinity
    // would silently mean the default too.
    if (maxExtraLiveBytes < -1) {
      emitError(module.getLoc(), "braid-schedule: max-extra-live-bytes "
                                 "must be a byte count, 0 or more (-1: a "
                                 "tenth of the target GPU's memory), got ")
          << int64_t(maxExtraLiveBytes);
      return signalPassFailure();
    }
    if (!std::isfinite(double(minHiddenUs)) ||
        (minHiddenUs < 0 && minHiddenUs != -1)) {
      emitError(module.getLoc(), "braid-schedule: min-hidden-us must be a "
                                 "time in us, 0 or more (-1: two graph "
                                 "launches of the target), got ")
          << double(minHiddenUs);
      return signalPassFailure();
    }
    cost::CostModel model(*tgt, cost::LaunchMode::Graph, module);
    // Every collective would cost infinity: nothing to decide by.
    if (std::string problem = model.fitProblem(); !problem.empty()) {
      if (report)
        for (auto func : module.getOps<func::FuncOp>())
          if (!func.isExternal())
            emitRemark(func.getLoc())
                << "braid-schedule: left alone, not priced: " << problem;
      return;
    }
    // Default bound: a tenth of the GPU's memory.
    int64_t bound = maxExtraLiveBytes >= 0
                        ? int64_t(maxExtraLiveBytes)
                        : int64_t(tgt->memoryGiB * double(1ull << 30) / 10);
    // Default: the two cross-stream dependencies an async pair adds (its
    // start waits for the operand's stream, the wait for the start's),
    // priced as graph nodes.
    minHidden_ =
        (minHiddenUs >= 0 ? double(minHiddenUs) : 2 * tgt->graphLaunchUs) *
        1e-6;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.getBody().hasOneBlock())
        continue;
      if (isScheduled(func))
        continue; // already scheduled: nothing to decide here
      scheduleFunction(func, model, bound);
    }
  }

  double minHidden_ = 0;

  void scheduleFunction(func::FuncOp func, const cost::CostModel &model,
                        int64_t bound) {
    FunctionScheduler s(func, model);
    llvm::DenseSet<Operation *> async;
    for (Operation *op : s.ops())
      if (canRunAsync(op))
        async.insert(op);
    if (async.empty())
      return;
    int64_t base = s.peakLiveBytes(s.schedule({}));
    Order order = s.schedule(async);
    // A pair that hides no more than it costs stays synchronous; then, while
    // the schedule holds more than `bound` extra bytes live, the async
    // collective started last goes back to synchronous.
    for (;;) {
      std::vector<std::pair<Operation *, double>> hidden =
          s.hiddenCompute(order);
      bool changed = false;
      for (auto [op, seconds] : hidden)
        if (seconds <= minHidden_ || seconds <= 0) {
          async.erase(op);
          changed = true;
        }
      if (!changed && !async.empty() && s.peakLiveBytes(order) - base > bound) {
        Operation *last = nullptr;
        for (int n : order.sequence)
          if (order.nodes[size_t(n)].kind == Node::Start &&
              async.contains(order.nodes[size_t(n)].op))
            last = order.nodes[size_t(n)].op;
        async.erase(last);
        changed = true;
      }
      if (!changed)
        break;
      order = s.schedule(async);
    }
    if (report) {
      int64_t extra = s.peakLiveBytes(order) - base;
      emitRemark(func.getLoc())
          << "braid-schedule: " << async.size() << " of "
          << llvm::count_if(s.ops(), canRunAsync) << " collectives async, "
          << extra << " extra bytes live at the peak (bound " << bound << ")";
    }
    s.apply(order);
  }
};

} // namespace
