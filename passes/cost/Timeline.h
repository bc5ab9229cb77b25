//===- Timeline.h - Simulated per-stream timeline of one step ---*- C++ -*-===//
//
// Replays an entry function on the cost model. Every op runs on a stream:
// `braid.stream` when the IR is scheduled, otherwise stream 0. An op starts
// when its stream is free, its operands are ready (an async payload at its
// collective's end; `braid.wait` makes the waiting stream block on it), its
// stream has passed every `braid.event_wait` (until the recording stream
// reached the `braid.event_record`) and, in eager mode, the host has launched
// it: the host issues kernels one after another at the eager launch cost, so
// short kernels can be launch-bound. Every kernel also costs the graph launch
// cost on the device (the per-node gap that CUDA Graph replay keeps). Ranks run
// the same program (SPMD): one rank's timeline is every rank's.
//
// Contention: a compute op that runs while a collective (issued before it,
// on another stream) is in flight progresses at the rate the collective
// leaves it (Target::collectiveSmFraction for compute-bound ops,
// collectiveMemoryFraction for memory-bound ones), so it ends later; the
// stretch is reported (`contention`).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_COST_TIMELINE_H
#define BRAID_PASSES_COST_TIMELINE_H

#include "passes/cost/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <vector>

namespace braid::cost {

struct TimelineEntry {
  mlir::Operation *op = nullptr;
  std::string name; // op name without the dialect prefix
  int stream = 0;
  double start = 0, end = 0; // seconds from step start
  double launch = 0; // the part of [start, end) that is launch overhead
  OpCost cost;
  int criticalPredecessor = -1; // entry whose end fixed this start
};

struct KindTotal {
  int64_t count = 0;
  double seconds = 0;
};

struct Timeline {
  std::string function;
  std::vector<TimelineEntry> entries;
  int numStreams = 1;
  double stepTime = 0;      // T: the makespan
  double computeTime = 0;   // C: sum of compute op times
  double commTime = 0;      // M: sum of collective times
  double serialTime = 0;    // T_serial: the same ops on one stream
  double exposedComm = 0;   // time a collective runs and no compute does
  double launchGaps = 0;    // T minus the busy time on the critical path
  double hiddenComm = 0;    // time a collective runs while compute does too
  double computeBusy = 0;   // union of compute intervals
  double commBusy = 0;      // union of collective intervals
  double contention = 0;    // compute time added by running collectives
  std::vector<int> criticalPath;
  double criticalCompute = 0, criticalComm = 0;
  std::map<std::string, KindTotal> byKind;

  double idealBound() const { return std::max(computeTime, commTime); }
  /// The share of the overlap possible that happened: collective time
  /// hidden behind compute over min(compute busy, collective busy), in
  /// [0, 1]; NaN when there is nothing to overlap.
  double overlapEfficiency() const;
};

/// Simulates `func` (single block). With `serial`, every op runs on stream
/// 0 (what the T_serial baseline measures).
Timeline simulate(mlir::func::FuncOp func, const CostModel &model,
                  bool serial = false);

/// The step time of `func` as simulate() gives it, without the serial
/// baseline simulate() also runs (what passes that price candidates need).
double stepTime(mlir::func::FuncOp func, const CostModel &model);

/// "12.345 ms" (three decimals); "6.7%" (one decimal), "n/a" for NaN.
std::string formatMs(double seconds);
std::string formatPercent(double fraction);

/// The report: a text table, or JSON for tools.
void printTimelineText(llvm::raw_ostream &os, const Timeline &t,
                       const CostModel &model);
llvm::json::Value timelineJson(const Timeline &t, const CostModel &model);

/// A Chrome trace event file (Perfetto, chrome://tracing): one process per
/// rank, one thread per stream, each op an "X" event with its shapes and
/// bytes; one function after another on the time axis.
llvm::json::Value chromeTrace(llvm::ArrayRef<Timeline> timelines,
                              const CostModel &model);

} // namespace braid::cost

#endif // BRAID_PASSES_COST_TIMELINE_H
