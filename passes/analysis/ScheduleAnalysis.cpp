//===- ScheduleAnalysis.cpp - IR view for happens-before and races --------===//
#include "passes/analysis/ScheduleAnalysis.h"
#include "passes/analysis/PointToPointGroups.h"

#include "dialect/BraidOps.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::braid;
namespace sched = ::braid::sched;

namespace {
/// Storage spaces: the arena is 0, state slot of argument k is 1 + k, and
/// a value without a planned buffer gets a space of its own after those.
constexpr int64_t kArenaSpace = 0;
} // namespace

std::string FunctionSchedule::describeSpace(int64_t space) const {
  if (space >= 0 && size_t(space) < spaceNames.size())
    return spaceNames[size_t(space)];
  return "storage " + std::to_string(space);
}

FailureOr<FunctionSchedule>
mlir::braid::buildFunctionSchedule(func::FuncOp func,
                                   const FunctionMemoryPlan *memory) {
  if (!func.getBody().hasOneBlock())
    return emitOpErrorAt(func) << "scheduling needs a single-block body",
           failure();
  Block &body = func.getBody().front();
  FunctionSchedule s;
  s.spaceNames.push_back("the arena");
  llvm::StringMap<unsigned> stateArgs; // slot name -> argument
  for (BlockArgument arg : body.getArguments()) {
    auto state = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   "braid.state");
    if (state)
      stateArgs[state.getValue()] = arg.getArgNumber();
    s.spaceNames.push_back(state ? "state '" + state.getValue().str() + "'"
                                 : "argument #" +
                                       std::to_string(arg.getArgNumber()));
  }
  llvm::DenseMap<Value, int64_t> ownSpace;
  auto location = [&](Value v) -> std::optional<sched::Access> {
    if (!isa<RankedTensorType>(v.getType()) || v.getDefiningOp<ParameterOp>() ||
        v.getDefiningOp<ParameterPackOp>())
      return std::nullopt; // parameters are read-only
    // An empty tensor has no bytes to race on or overlap.
    int64_t bytes = tensorBytes(v.getType());
    if (bytes == 0)
      return std::nullopt;
    if (memory) {
      auto it = memory->offsets.find(v);
      if (it != memory->offsets.end())
        return sched::Access{kArenaSpace, it->second, it->second + bytes,
                             false};
    }
    if (std::optional<unsigned> arg = stateArgumentOf(v))
      return sched::Access{1 + int64_t(*arg), 0, bytes, false};
    auto [it, inserted] = ownSpace.try_emplace(v, int64_t(s.spaceNames.size()));
    if (inserted) {
      std::string name;
      llvm::raw_string_ostream os(name);
      os << "the value of ";
      if (Operation *def = v.getDefiningOp())
        os << "'" << def->getName() << "'";
      else
        os << "argument #" << cast<BlockArgument>(v).getArgNumber();
      s.spaceNames.push_back(os.str());
    }
    return sched::Access{it->second, 0, bytes, false};
  };

  // With memory planned, a view placed inside its source's buffer is those
  // bytes: its op writes nothing, and its readers must see the write of the
  // value that owns the bytes.
  auto placedView = [&](Value v) {
    if (!memory)
      return false;
    std::optional<ViewOf> view = viewOf(v);
    if (!view)
      return false;
    auto at = memory->offsets.find(v), src = memory->offsets.find(view->source);
    return at != memory->offsets.end() && src != memory->offsets.end() &&
           at->second == src->second + view->byteOffset;
  };
  auto owner = [&](Value v) {
    while (placedView(v))
      v = v.getDefiningOp()->getOperand(0);
    return v;
  };

  // The inputs, copied in before the first op (state slots are their own
  // storage, so only arena arguments can share bytes).
  for (BlockArgument arg : body.getArguments())
    if (!stateArgumentOf(arg))
      if (auto a = location(arg)) {
        a->write = true;
        s.entryArguments.push_back(arg);
        s.entryAccesses.push_back(*a);
      }

  for (Operation &op : body) {
    if (isa<ParameterOp, ParameterPackOp>(op))
      continue;
    s.index[&op] = int(s.ops.size());
    s.ops.push_back(&op);
  }
  s.sched.resize(s.ops.size());
  s.accesses.resize(s.ops.size());
  s.groupLast.assign(s.ops.size(), -1);
  s.groupFirst.assign(s.ops.size(), -1);
  for (const auto &[member, span] : findPointToPointGroups(body)) {
    size_t m = size_t(s.index.lookup(member));
    s.groupFirst[m] = s.index.lookup(span.first);
    s.groupLast[m] = s.index.lookup(span.second);
  }
  // Where a value's readers find it written: its producer, or the last
  // member of the group a sync send or receive is issued in.
  auto writtenAt = [&](Operation *def) {
    int i = s.index.lookup_or(def, -1);
    if (i >= 0 && s.groupLast[size_t(i)] > i &&
        !def->hasTrait<OpTrait::BraidAsyncStart>())
      return s.groupLast[size_t(i)];
    return i;
  };
  llvm::StringMap<int64_t> groupIds;
  std::vector<int> lastOfStream;
  for (auto [i, op] : llvm::enumerate(s.ops)) {
    sched::SchedOp &so = s.sched[i];
    sched::OpAccesses &acc = s.accesses[i];
    bool terminator = op->hasTrait<OpTrait::IsTerminator>();
    so.stream = terminator ? 0 : int(getStream(op).value_or(0));
    s.numStreams = std::max(s.numStreams, so.stream + 1);
    if (auto wait = dyn_cast<EventWaitOp>(op)) {
      auto record = wait.getEvent().getDefiningOp<EventRecordOp>();
      if (!record)
        return emitOpErrorAt(op) << "event must come from a "
                                    "braid.event_record of this function",
               failure();
      so.after.push_back(s.index.lookup(record));
    }
    if (auto wait = dyn_cast<WaitOp>(op))
      so.after.push_back(s.index.lookup(wait.getHandle().getDefiningOp()));
    if (terminator) // the runtime joins every stream before it reads results
      for (int last : lastOfStream)
        if (last >= 0)
          so.after.push_back(last);
    if (size_t(so.stream) >= lastOfStream.size())
      lastOfStream.resize(size_t(so.stream) + 1, -1);
    lastOfStream[size_t(so.stream)] = int(i);

    auto read = [&](Value v, int inPlace = 0) {
      if (auto a = location(v)) {
        // The read must see its producer's write (entry values: none).
        Operation *def = owner(v).getDefiningOp();
        a->expectWriter = def ? writtenAt(def) : -1;
        a->inPlace = inPlace;
        acc.accesses.push_back(*a);
      }
    };
    auto write = [&](Value v, int inPlace = 0) {
      if (placedView(v))
        return;
      if (auto a = location(v)) {
        a->write = true;
        a->inPlace = inPlace;
        acc.accesses.push_back(*a);
      }
    };
    if (isa<WaitOp, EventRecordOp, EventWaitOp>(op))
      continue; // no bytes of their own (a wait completes its start's)
    // Which result an op may compute in place of which operand: the list
    // the plan loader uses too.
    llvm::StringRef mnemonic = op->getName().stripDialect();
    auto inPlace = [&](bool isResult, unsigned k) {
      return sched::inPlaceTag({mnemonic.data(), mnemonic.size()}, isResult, k);
    };
    for (OpOperand &use : op->getOpOperands())
      read(use.get(), inPlace(false, use.getOperandNumber()));
    if (terminator)
      acc.overlapsItself = true; // the state copy-back goes through scratch
    if (auto coll = dyn_cast<CollectiveOpInterface>(op)) {
      sched::CollectiveUse use;
      use.begin = use.end = int(i);
      use.group = groupIds
                      .try_emplace(coll.getGroupAttr().getValue(),
                                   int64_t(groupIds.size()))
                      .first->second;
      if (coll.isAsyncStart()) {
        Operation *waitOp = *op->getResult(0).getUsers().begin();
        use.end = s.index.lookup(waitOp);
        acc.inFlightUntil = use.end;
        for (Value r : waitOp->getResults())
          write(r);
      } else if (s.groupLast[i] > int(i)) {
        // Issued with the rest of its group: it runs until the group does.
        use.end = s.groupLast[i];
        acc.inFlightUntil = use.end;
      }
      s.collectives.push_back(use);
    }
    if (!op->hasTrait<OpTrait::BraidAsyncStart>())
      for (OpResult r : op->getResults())
        write(r, inPlace(true, r.getResultNumber()));
    if (terminator) {
      // State copy-back: result i replaces its slot unless already there.
      for (auto [r, v] : llvm::enumerate(op->getOperands())) {
        auto name = func.getResultAttrOfType<StringAttr>(r, "braid.state");
        auto arg = name ? stateArgs.find(name.getValue()) : stateArgs.end();
        if (arg == stateArgs.end() || stateArgumentOf(v) == arg->second)
          continue;
        acc.accesses.push_back(sched::Access{
            1 + int64_t(arg->second), 0,
            std::max<int64_t>(
                tensorBytes(body.getArgument(arg->second).getType()), 1),
            true});
      }
    }
  }
  return s;
}

Ordering mlir::braid::happensBeforeOrdering(func::FuncOp func,
                                            const FunctionSchedule &schedule,
                                            const sched::HappensBefore &hb) {
  // Block position -> schedule index; parameters never define or use an
  // arena buffer, so they need none. And each stream's ops by position.
  std::vector<int> at;
  std::vector<std::vector<int>> positionsOf(size_t(hb.numStreams()));
  for (auto [p, op] : llvm::enumerate(func.getBody().front())) {
    int x = schedule.index.lookup_or(&op, -1);
    at.push_back(x);
    if (x >= 0)
      positionsOf[size_t(hb.stream(x))].push_back(int(p));
  }
  int end = int(at.size()); // after the terminator: the runtime's reads
  auto before = [at, end, &hb](int a, int b) {
    if (a == b)
      return false;
    if (a < 0 || b >= end)
      return a < b; // entry precedes all; the runtime's reads follow all
    if (b < 0 || a >= end)
      return false;
    int x = at[size_t(a)], y = at[size_t(b)];
    if (x < 0 || y < 0)
      return a < b;
    return hb.before(x, y);
  };
  auto horizon = [at = std::move(at), positionsOf = std::move(positionsOf),
                  end, &hb](int p) {
    if (p < 0 || p >= end || at[size_t(p)] < 0)
      return p - 1;
    // The first op of each stream that does not happen before p.
    const int32_t *clock = hb.clock(at[size_t(p)]);
    int h = p - 1;
    for (size_t s = 0; s < positionsOf.size(); ++s)
      if (size_t(clock[s]) < positionsOf[s].size())
        h = std::min(h, positionsOf[s][size_t(clock[s])] - 1);
    return h;
  };
  return {before, horizon};
}
