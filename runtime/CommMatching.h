//===- CommMatching.h - Collectives and messages meet partners -*- C++ -*-===//
//
// A send nobody receives, a receive nobody sends, or a collective that a
// member of its group never joins blocks its stream: the CPU interpreter
// until the collective timeout, NCCL forever. Whether they match depends on
// which function each rank runs (a pipeline's stages pair their sends with
// each other's receives, and share collectives on groups that span them),
// so the plan loader and the schedule verifier, which see one function at a
// time, cannot tell. Before a step the runners know the assignment; this
// checks it.
//
// Messages pair per channel (group instance, stream, sender, receiver: one
// NCCL communicator and peer), the k-th send with the k-th receive, and a
// pair must move the same number of bytes. Collectives match per
// communicator (group instance and stream): every member issues the same
// number, and the k-th of each agree in kind, element type, bytes and
// attributes (reduction, dims, root), as NCCL requires.
//
// Matching is necessary, not sufficient: NCCL runs a communicator's
// collectives, sends and receives in issue order, and only adjacent
// point-to-point ops go out together (P2PGroups.h), so two ranks that each
// send before they receive, apart, deadlock, and so do a send queued
// behind a collective whose other member waits on the receive first. The
// loader's hang rule orders a rank's communicators one after another, so
// two stages that meet on two communicators in opposite orders deadlock
// too. The check then advances every rank's issue units (point-to-point
// groups, lone ops and collectives) in plan order and refuses an
// assignment that leaves one stuck. Conservative as the strict
// interpreter is: NCCL may complete small lone sends from its buffers.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_COMMMATCHING_H
#define BRAID_RUNTIME_COMMMATCHING_H

#include "runtime/Communicator.h"
#include "runtime/PlanLoader.h"
#include "runtime/Status.h"
#include "runtime/plan_generated.h"

#include <set>
#include <string>
#include <vector>

namespace braid::rt {

/// The channel of send or receive `op` run by world rank `worldRank`: its
/// group instance and stream (one NCCL communicator), the sending and the
/// receiving member (ranks in the group). The one rule for the check below
/// and the interpreter's messages.
Communicator::Channel p2pChannel(const plan::Plan &plan, const plan::Op &op,
                                 int worldRank);

/// What every member's k-th collective on a communicator must agree on, as
/// NCCL requires: the collective, its reduction or root, the element type
/// and how many elements go in and come out (dims are each rank's own
/// layout). The check below compares it across members before a step, and
/// the interpreter where the members meet (a step run without the check).
std::string collectiveSignature(const plan::Function &f, const plan::Op &op);

/// Checks that the point-to-point ops pair up, that the collectives of
/// every communicator match across its members, and that all of them can
/// complete in the order each communicator issues them, when world rank r
/// runs function number `functionOfRank[r]` of `plan` (one entry per world
/// rank; -1: that rank runs nothing). The plan must have passed the
/// loader's checks (groups, peers and tensors in range). The error names
/// the ranks, their functions and the op that has no partner, disagrees
/// with it, or never completes.
Status checkCommunicationMatching(const plan::Plan &plan,
                                  const std::vector<int> &functionOfRank);

/// checkCommunicationMatching with world rank r running the function named
/// `functionOfRank[r]`, remembering the assignments that passed, so a
/// runner pays for it once per assignment, not once per step. A name the
/// plan lacks is left to the step to report. Not thread-safe: a runner runs
/// one step at a time.
class CommMatchingCache {
public:
  Status check(const LoadedPlan &plan,
               const std::vector<std::string> &functionOfRank);

private:
  std::set<std::vector<std::string>> passed_;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_COMMMATCHING_H
