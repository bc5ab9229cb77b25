//===- InsertEvents.cpp - braid-insert-events -----------------------------===//
#include "passes/Passes.h"
#include "passes/analysis/ScheduleAnalysis.h"
#include "passes/analysis/ScheduleConflicts.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDINSERTEVENTSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;
namespace sched = ::braid::sched;

namespace {
struct BraidInsertEventsPass
    : public mlir::braid::impl::BraidInsertEventsPassBase<BraidInsertEventsPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      bool scheduled = false;
      func.walk([&](Operation *op) { scheduled |= getStream(op).has_value(); });
      if (!scheduled)
        continue;
      if (replace)
        eraseEvents(func);
      if (failed(insertEvents(func)))
        return signalPassFailure();
    }
  }

  /// Every event_wait, then every event_record (the waits use them).
  static void eraseEvents(func::FuncOp func) {
    SmallVector<Operation *> waits, records;
    func.walk([&](Operation *op) {
      if (isa<EventWaitOp>(op))
        waits.push_back(op);
      else if (isa<EventRecordOp>(op))
        records.push_back(op);
    });
    for (Operation *op : waits)
      op->erase();
    for (Operation *op : records)
      op->erase();
  }

  LogicalResult insertEvents(func::FuncOp func) {
    auto memory = readAttachedMemoryPlan(func);
    if (failed(memory))
      return failure();
    auto s = buildFunctionSchedule(func, *memory ? &**memory : nullptr);
    if (failed(s))
      return failure();
    sched::CheckOptions options;
    options.concurrentCommunicators = concurrentCommunicators;
    sched::ScheduleChecker checker(s->numStreams, s->accesses, s->collectives,
                                   options);
    const sched::HappensBefore &hb = checker.happensBefore();
    // waitsFor[i]: the ops op i must wait for through an event.
    std::vector<SmallVector<int>> waitsFor(s->ops.size());
    for (size_t i = 0; i < s->ops.size(); ++i) {
      if (!checker.append(s->sched[i]))
        return emitOpErrorAt(s->ops[i]) << "has a malformed schedule",
               failure();
      std::vector<sched::Conflict> conflicts;
      checker.conflicts(conflicts);
      // Per predecessor stream only the latest op matters (stream order
      // covers the earlier ones).
      std::map<int, int> latest;
      for (const sched::Conflict &c : conflicts) {
        if (!c.repairable) {
          // The verifier's wording, and why no event of ours fixes it.
          emitScheduleConflict(*s, c).attachNote(s->ops[i]->getLoc())
              << "braid-insert-events cannot repair this with an event: "
              << (c.kind == sched::Conflict::Clobber ||
                          c.kind == sched::Conflict::Overlap
                      ? "the bytes must change (plan memory after the "
                        "schedule, or give the op other bytes)"
                      : "an op or a wait must move");
          return failure();
        }
        auto [it, inserted] = latest.try_emplace(hb.stream(c.first), c.first);
        if (!inserted && hb.position(c.first) > hb.position(it->second))
          it->second = c.first;
      }
      SmallVector<int> candidates;
      for (auto [stream, op] : latest)
        candidates.push_back(op);
      // Transitive reduction: a candidate another one already orders after
      // is covered by waiting for that one.
      for (int c : candidates) {
        bool covered = llvm::any_of(candidates, [&](int d) {
          return d != c && hb.before(c, d);
        });
        if (!covered) {
          checker.addAfter(c);
          waitsFor[i].push_back(c);
        }
      }
      checker.commit();
    }
    materialize(*s, waitsFor);
    return success();
  }

  /// One event_record right after each op some op waits for, one
  /// event_wait right before each waiting op per predecessor. Neither goes
  /// inside a point-to-point group (PointToPointGroups.h): an event there
  /// would split the group in the plan and its exchange could deadlock, so
  /// a record follows the group's last member and a wait precedes its
  /// first (which orders the whole group, as the runtime issues it). The
  /// record still precedes the wait: a producer on another stream cannot
  /// sit between a group's members (it would end the group), so it and its
  /// group come before the consumer's group.
  static void materialize(const FunctionSchedule &s,
                          const std::vector<SmallVector<int>> &waitsFor) {
    llvm::DenseMap<int, Value> events;
    for (size_t i = 0; i < waitsFor.size(); ++i) {
      for (int a : waitsFor[i]) {
        Value &event = events[a];
        Operation *producer = s.ops[size_t(
            s.groupLast[size_t(a)] >= 0 ? s.groupLast[size_t(a)] : a)];
        if (!event) {
          OpBuilder b(producer->getContext());
          b.setInsertionPointAfter(producer);
          auto record = EventRecordOp::create(b, producer->getLoc());
          setStream(record, s.sched[size_t(a)].stream);
          event = record.getEvent();
        }
        Operation *consumer =
            s.ops[s.groupFirst[i] >= 0 ? size_t(s.groupFirst[i]) : i];
        OpBuilder b(consumer);
        auto wait = EventWaitOp::create(b, consumer->getLoc(), event);
        setStream(wait, s.sched[i].stream);
      }
    }
  }
};
} // namespace
