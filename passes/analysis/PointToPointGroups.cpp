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
  for (Operation &op : body) {
    if (isa<ParameterOp, ParameterPackOp, EventWaitOp>(op))
      continue; // not plan ops (a wait only delays the next op of its stream)
    if (isa<EventRecordOp>(op)) {
      // The export records it on the last op issued on its stream: on the
      // run's stream that is the last member, which ends the run.
      if (!run.empty() && getStream(&op).value_or(0) == stream)
        close();
      continue;
    }
    if (!isa<SendOp, RecvOp, SendStartOp, RecvStartOp>(op)) {
      close();
      continue;
    }
    int64_t s = getStream(&op).value_or(0);
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
