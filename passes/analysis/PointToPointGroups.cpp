//===- PointToPointGroups.cpp - Sends and receives issued as one group ----===//
#include "passes/analysis/PointToPointGroups.h"

#include "dialect/BraidOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace mlir::braid;

PointToPointGroups mlir::braid::findPointToPointGroups(Block &body) {
  PointToPointGroups groups;
  SmallVector<Operation *> run;
  llvm::DenseSet<Value> received;
  int64_t stream = 0;
  Attribute group;
  auto close = [&] {
    if (run.size() >= 2)
      for (Operation *member : run)
        groups[member] = {run.front(), run.back()};
    run.clear();
    received.clear();
  };
  // The export's events (translate/PlanExport.cpp), by the streams their
  // plan events are recorded on: a record covers the last op of its
  // stream, if any, and the waits its stream took since; a wait on a
  // stream holds back that stream's next op, except for events recorded on
  // that stream itself (already behind it).
  llvm::DenseSet<int64_t> issued; // streams with an op
  llvm::DenseMap<int64_t, llvm::DenseSet<int64_t>> pending;  // waits per stream
  llvm::DenseMap<Value, llvm::DenseSet<int64_t>> recordedOn; // per IR event
  for (Operation &op : body) {
    if (isa<ParameterOp, ParameterPackOp>(op))
      continue; // not plan ops
    int64_t s = getStream(&op).value_or(0);
    if (auto record = dyn_cast<EventRecordOp>(op)) {
      llvm::DenseSet<int64_t> &on = recordedOn[record.getEvent()];
      if (issued.contains(s))
        on.insert(s);
      on.insert(pending[s].begin(), pending[s].end());
      // On the run's stream it marks the last member, which ends the run.
      if (!run.empty() && s == stream)
        close();
      continue;
    }
    if (auto wait = dyn_cast<EventWaitOp>(op)) {
      bool holds = false;
      for (int64_t from : recordedOn.lookup(wait.getEvent()))
        if (from != s) {
          pending[s].insert(from);
          holds = true;
        }
      // It holds back the next op of its stream: on the run's stream, the
      // next member, which then starts a new run.
      if (holds && !run.empty() && s == stream)
        close();
      continue;
    }
    issued.insert(s);
    pending[s].clear();
    if (!isa<SendOp, RecvOp, SendStartOp, RecvStartOp>(op)) {
      close();
      continue;
    }
    Attribute g = cast<CollectiveOpInterface>(op).getGroupAttr();
    bool readsReceived = llvm::any_of(
        op.getOperands(), [&](Value v) { return received.contains(v); });
    if (run.empty() || s != stream || g != group || readsReceived) {
      close();
      stream = s;
      group = g;
    }
    run.push_back(&op);
    for (Value r : op.getResults())
      received.insert(r);
  }
  close();
  return groups;
}
