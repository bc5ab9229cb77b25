//===- PointToPointGroups.h - Sends, receives issued together -*- C++ -*-===//
//
// Both runtimes issue a run of adjacent point-to-point ops (send, recv,
// send_start, recv_start) on one stream and device group as one NCCL group
// (runtime/P2PGroups.h, read on the exported plan): its members run
// concurrently, so a member's operands are read and its results written
// until the run's last member has been issued. The verifier and the memory
// planner must see that, or a receive may land on bytes a send of the same
// group still reads, or two receives on the same bytes.
//
// This finds the runs in the IR as the exported plan will have them: it
// follows the export's event placement (translate/PlanExport.cpp), so a
// run ends at any op between two members that is not a parameter or an
// event (every such op is a plan op), at an event_record on the run's
// stream (it marks the last member), at an event_wait on the run's stream
// that holds back its next op (one whose event was recorded, or relayed,
// from another stream), at a change of stream or group, and before a
// member that reads what an earlier member received. A braid.wait on
// another stream records its event after its start's whole run, not inside
// it. Should the two ever differ, this must join more ops, never fewer: a
// run it joins is at worst checked or kept apart more strictly than needed.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_ANALYSIS_POINTTOPOINTGROUPS_H
#define BRAID_PASSES_ANALYSIS_POINTTOPOINTGROUPS_H

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"

#include <utility>

namespace mlir::braid {

/// The first and last member of the run each member of a run of two or
/// more belongs to (ops alone are not in the map).
using PointToPointGroups =
    llvm::DenseMap<Operation *, std::pair<Operation *, Operation *>>;

PointToPointGroups findPointToPointGroups(Block &body);

} // namespace mlir::braid

#endif // BRAID_PASSES_ANALYSIS_POINTTOPOINTGROUPS_H
