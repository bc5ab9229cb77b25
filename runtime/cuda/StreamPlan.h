//===- StreamPlan.h - Communicators, workspaces, events ---------*- C++ -*-===//
//
// What the CUDA executor decides about streams before it touches a GPU, as
// pure functions of the plan (so they are tested without a device):
//
// - Communicators: one NCCL communicator per (device group, stream) pair that
//   a collective of the plan uses (two streams must never share one: NCCL
//   runs one communicator's operations in issue order on one stream, and
//   two streams issuing on it concurrently can deadlock). Every rank creates
//   its communicators in the same order, sorted by (group, stream), so the
//   blocking ncclCommInitRank calls pair up across ranks; each needs one
//   NCCL unique id per (group instance, stream).
// - Workspaces: one cuBLASLt workspace per stream that runs a GEMM (split-K
//   GEMMs keep partial sums there; two streams sharing one would race).
// - Events: a plan op's wait_events/record_events map to CUDA event waits
//   and records on its stream. A Wait on another stream than its *_start
//   additionally needs an executor event recorded on the start's stream
//   right after the collective is issued, which the Wait's stream waits for
//   (in a CUDA Graph capture: a fork/join edge). The streams > 0 that a
//   function uses fork from stream 0 at step start and join it at the end.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_STREAMPLAN_H
#define BRAID_RUNTIME_CUDA_STREAMPLAN_H

#include "runtime/Status.h"
#include "runtime/plan_generated.h"

#include <cstdint>
#include <tuple>
#include <vector>

namespace braid::rt::cuda {

/// A communicator of the plan: the collectives of `group` on `stream`.
struct CommKey {
  int group = 0, stream = 0;
  friend bool operator<(const CommKey &a, const CommKey &b) {
    return std::tie(a.group, a.stream) < std::tie(b.group, b.stream);
  }
  friend bool operator==(const CommKey &a, const CommKey &b) {
    return a.group == b.group && a.stream == b.stream;
  }
};

/// One NCCL unique id: a group instance (GroupPosition::instanceKey) on a
/// stream.
struct CommIdKey {
  int64_t instance = 0;
  int stream = 0;
  friend bool operator<(const CommIdKey &a, const CommIdKey &b) {
    return std::tie(a.instance, a.stream) < std::tie(b.instance, b.stream);
  }
  friend bool operator==(const CommIdKey &a, const CommIdKey &b) {
    return a.instance == b.instance && a.stream == b.stream;
  }
};

/// Every (group, stream) pair a collective of any function of `p` uses,
/// sorted: the order in which every rank creates its communicators. The
/// same on every rank (it depends on the plan alone).
std::vector<CommKey> planCommunicators(const plan::Plan &p);

/// The NCCL unique ids a run of `p` needs: for each communicator of
/// planCommunicators, one per instance of its group (over all world
/// ranks); sorted, which is the order rank 0 broadcasts them in.
std::vector<CommIdKey> planCommunicatorIds(const plan::Plan &p);

/// The id world rank `worldRank` passes to ncclCommInitRank for `comm`.
CommIdKey communicatorIdOf(const plan::Plan &p, const CommKey &comm,
                           int worldRank);

/// Streams that need a cuBLASLt workspace: entry s is true when a matmul of
/// some function runs on stream s. Sized to the largest num_streams.
std::vector<bool> planGemmStreams(const plan::Plan &p);

/// How one function's ops drive streams, events and communicators.
struct StreamPlan {
  struct OpSync {
    /// Plan events waited on the op's stream before it (those with a
    /// record earlier in plan order; a wait on none is a no-op).
    std::vector<int> waitEvents;
    /// A Wait whose start ran on another stream: the executor event (index
    /// into handle events) its stream waits for first; -1 for none.
    int waitHandleEvent = -1;
    /// A start whose Wait is on another stream: the executor event recorded
    /// on the start's stream right after the collective is issued; -1.
    int recordHandleEvent = -1;
    /// Plan events recorded on the op's stream after it.
    std::vector<int> recordEvents;
    /// A collective's communicator: its index in planCommunicators; -1.
    int comm = -1;
  };
  std::vector<OpSync> ops; // by op index
  /// Executor-owned events for cross-stream Waits.
  int numHandleEvents = 0;
  /// Streams > 0 that run an op: forked from stream 0 at step start (after
  /// the inputs are copied) and joined back before the step ends; a graph
  /// capture needs exactly these edges.
  std::vector<int> forkedStreams;
};

/// The stream plan of `f`; `comms` is planCommunicators of its plan. Errors
/// on a malformed schedule (stream, event or handle out of range, a Wait
/// without a start), which the plan loader normally refuses first.
Expected<StreamPlan> planFunctionStreams(const plan::Function &f,
                                         const std::vector<CommKey> &comms);

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_STREAMPLAN_H
