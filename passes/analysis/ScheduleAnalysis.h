//===- ScheduleAnalysis.h - IR view for happens-before and races -*- C++ -*-===//
//
// Builds, from one scheduled function, what runtime/ScheduleCheck.h reasons
// about: the ops in block order with their streams and cross-stream waits
// (happens-before), the bytes each op reads and writes (buffer accesses:
// SSA values, arena ranges once memory is planned, state slots, async
// in-flight windows) and the collectives with their communicators. The
// same checker then serves braid-verify-schedule, braid-insert-events and
// braid-plan-memory, and the plan loader runs it on the exported plan.
//
// IR semantics: an op without `braid.stream` runs on stream 0. An
// `event_wait` orders its stream after the `event_record` that made its
// event; a `braid.wait` orders its stream after its collective's start, and
// the collective may touch its input and result until that wait. The
// terminator is where the runtime joins every stream and reads outputs and
// state (and copies state back).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_ANALYSIS_SCHEDULEANALYSIS_H
#define BRAID_PASSES_ANALYSIS_SCHEDULEANALYSIS_H

#include "dialect/Diagnostics.h"
#include "passes/MemoryPlan.h"
#include "runtime/ScheduleCheck.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace mlir::braid {

struct FunctionSchedule {
  /// Every op that launches work or orders streams, in block order, then
  /// the terminator (the join). Parameters are not in it.
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, int> index;
  std::vector<::braid::sched::SchedOp> sched;
  std::vector<::braid::sched::OpAccesses> accesses;
  std::vector<::braid::sched::CollectiveUse> collectives;
  /// Per op: the last member of the point-to-point group it is issued in
  /// (PointToPointGroups.h), -1 when it is not in one. A member's accesses
  /// are in flight until then, and its results written by then.
  std::vector<int> groupLast;
  /// Per op: the first member of its point-to-point group, -1 when none.
  std::vector<int> groupFirst;
  /// The arguments that are not state, with their bytes: the runtime
  /// copies them in before the first op (sched::firstEntryOverlap).
  SmallVector<BlockArgument> entryArguments;
  std::vector<::braid::sched::Access> entryAccesses;
  int numStreams = 1;
  /// Human names of storage spaces, for messages.
  std::vector<std::string> spaceNames;

  /// "the arena", "state 'k_cache'", "the value of <op>".
  std::string describeSpace(int64_t space) const;
};

/// Builds the schedule view of `func`. With `memory`, arena values are
/// located by their planned bytes (reuse becomes visible); without, every
/// value is its own storage. Fails with an error on malformed scheduling
/// (an event or handle that does not come from the expected op).
FailureOr<FunctionSchedule>
buildFunctionSchedule(func::FuncOp func, const FunctionMemoryPlan *memory);

/// Happens-before over block positions (as MemoryPlan's Ordering wants):
/// positions of ops in `func`'s block, -1 is function entry.
Ordering happensBeforeOrdering(func::FuncOp func,
                               const FunctionSchedule &schedule,
                               const ::braid::sched::HappensBefore &hb);

} // namespace mlir::braid

#endif // BRAID_PASSES_ANALYSIS_SCHEDULEANALYSIS_H
