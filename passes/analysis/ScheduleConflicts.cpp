//===- ScheduleConflicts.cpp - Schedule conflicts as errors ---------------===//
#include "passes/analysis/ScheduleConflicts.h"

#include "dialect/BraidOps.h"

using namespace mlir;
using namespace mlir::braid;
namespace sched = ::braid::sched;

/// "bytes [b, e) of the arena".
static std::string describeBytes(const FunctionSchedule &s,
                                 const sched::Access &a) {
  return "bytes [" + std::to_string(a.begin) + ", " + std::to_string(a.end) +
         ") of " + s.describeSpace(a.space);
}

InFlightDiagnostic mlir::braid::emitScheduleConflict(const FunctionSchedule &s,
                                                     const sched::Conflict &c) {
  Operation *first = s.ops[size_t(c.first)];
  Operation *second = s.ops[size_t(c.second)];
  auto streamOf = [&](int i) { return s.sched[size_t(i)].stream; };
  if (c.kind == sched::Conflict::Overlap) {
    InFlightDiagnostic d = emitOpErrorAt(second);
    d << "writes " << describeBytes(s, c.access)
      << " that it also reads or writes through another operand or "
         "result; only elementwise ops and attention's KV caches (each "
         "into its own updated cache) run "
         "in place, at exactly their operand's bytes";
    // An async collective writes its wait's results while in flight: the
    // buffer to move is likely the wait's.
    if (second->hasTrait<OpTrait::BraidAsyncStart>() &&
        !second->getResult(0).use_empty())
      d.attachNote((*second->getResult(0).getUsers().begin())->getLoc())
          << "the collective writes this wait's results while it reads "
             "its operand";
    return d;
  }
  if (c.kind == sched::Conflict::Race && s.groupLast[size_t(c.first)] >= 0 &&
      size_t(c.second) < s.groupLast.size() &&
      s.groupLast[size_t(c.first)] == s.groupLast[size_t(c.second)]) {
    InFlightDiagnostic d = emitOpErrorAt(second);
    d << "runs concurrently with '" << first->getName()
      << "': adjacent sends and receives on one stream and group are "
         "issued as one group (runtime/P2PGroups.h), and both access "
      << describeBytes(s, c.access)
      << " with at least one writing; give them distinct buffers or "
         "separate them";
    d.attachNote(first->getLoc()) << "the other member of the group";
    return d;
  }
  // An async collective between its start and its wait: `second` may be
  // ordered after the start, but the collective runs until the wait.
  if (!c.repairable && c.kind != sched::Conflict::Clobber &&
      first->hasTrait<OpTrait::BraidAsyncStart>()) {
    InFlightDiagnostic d = emitOpErrorAt(second);
    d << "on stream " << streamOf(c.second) << " runs while '"
      << first->getName() << "' on stream " << streamOf(c.first)
      << " is in flight (until its braid.wait): ";
    if (c.kind == sched::Conflict::Race)
      d << "both access " << describeBytes(s, c.access)
        << " and at least one writes; no event can order them (move the "
           "op after the wait, or give it other bytes)";
    else
      d << "collectives of two communicators may run concurrently and "
           "deadlock; no event can order them (issue it after the wait, or "
           "declare concurrent-communicators)";
    d.attachNote(first->getLoc()) << "the collective in flight";
    if (!first->getResult(0).use_empty())
      d.attachNote((*first->getResult(0).getUsers().begin())->getLoc())
          << "its wait";
    return d;
  }
  InFlightDiagnostic d = emitOpErrorAt(second);
  d << "on stream " << streamOf(c.second)
    << (c.kind == sched::Conflict::Clobber ? " reads a value clobbered by '"
                                           : " is not ordered with '")
    << first->getName() << "' on stream " << streamOf(c.first) << ": ";
  if (c.kind == sched::Conflict::Race)
    d << "both access " << describeBytes(s, c.access)
      << " and at least one writes";
  else if (c.kind == sched::Conflict::Clobber)
    d << "it reads " << describeBytes(s, c.access)
      << " after the other op overwrote the value they held (a buffer "
         "reused too early)";
  else
    d << "collectives of two communicators may run concurrently and "
         "deadlock (order them, or declare concurrent-communicators)";
  d.attachNote(first->getLoc()) << (c.kind == sched::Conflict::Clobber
                                        ? "the op that overwrote it"
                                        : "the other op of the unordered pair");
  return d;
}
