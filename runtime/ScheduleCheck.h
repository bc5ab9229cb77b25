//===- ScheduleCheck.h - Happens-before, races and hangs --------*- C++ -*-===//
//
// The one implementation of "is this multi-stream schedule safe", shared by
// the compiler (braid-verify-schedule, braid-insert-events,
// braid-plan-memory, through passes/analysis/) and the plan loader, which
// must refuse an unsafe hand-made or corrupted plan without MLIR.
//
// A schedule is a list of ops in a valid serial order (every dependency
// points backwards). Each op runs on a stream; besides the previous op of
// its stream it waits for the ops listed in `after` (an event's recorder, an
// async collective's start at its wait). Happens-before is the transitive
// closure, kept as one vector clock per op: O(ops x streams) to build, O(1)
// to query.
//
// Accesses name byte ranges of storage "spaces" (an arena, a state slot, a
// value that has no arena buffer yet). An async collective's accesses are
// in flight from its start until its wait (the latest moment it may run):
// any other access to those bytes in between conflicts, and after the wait
// only ops ordered after the wait are safe. The race check is FastTrack-like
// (last write and last read per stream, per elementary byte segment), so it
// also runs in O(ops x streams x segments touched), never pairwise.
//
// Reads also name the write they must see: a later write to the same bytes
// that is ordered before the read (a buffer reused too early on one stream)
// is reported as a clobber.
//
// Hang freedom: collectives issued on one communicator (group, stream) run in
// issue order (stream FIFO); collectives of different communicators share
// this rank's device, and NCCL kernels of two communicators launched in
// different orders on different ranks can deadlock, so unless the target
// declares concurrent communicators safe, a collective may begin only after
// the last collective of every other communicator has completed.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_SCHEDULECHECK_H
#define BRAID_RUNTIME_SCHEDULECHECK_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace braid::sched {

/// One op as the ordering analysis sees it.
struct SchedOp {
  int stream = 0;
  /// Earlier ops (indices) this op waits for besides its stream order.
  std::vector<int> after;
};

/// Vector clocks: clock(b)[s] is how many ops of stream s happen before or
/// are b. `before(a, b)` is a strict partial order contained in list order.
class HappensBefore {
public:
  explicit HappensBefore(int numStreams = 1) : numStreams_(numStreams) {}
  /// Builds the clocks of a whole list; false if an op is malformed.
  bool build(const std::vector<SchedOp> &ops);
  /// Appends one op (its `after` entries must be earlier ops, its stream in
  /// [0, numStreams)); false, leaving the clocks unchanged, if not.
  bool append(const SchedOp &op);
  /// Joins op `a`'s clock into the last appended op's.
  void joinIntoLast(int a);

  bool before(int a, int b) const {
    return a != b && clock(b)[stream_[size_t(a)]] >= position_[size_t(a)];
  }
  int numOps() const { return int(stream_.size()); }
  int numStreams() const { return numStreams_; }
  int stream(int op) const { return stream_[size_t(op)]; }
  /// 1-based position of `op` among its stream's ops.
  int position(int op) const { return position_[size_t(op)]; }
  const int32_t *clock(int op) const {
    return clocks_.data() + size_t(op) * size_t(numStreams_);
  }

private:
  int numStreams_ = 1;
  std::vector<int> stream_, position_;
  std::vector<int> lastOfStream_; // -1: none yet
  std::vector<int32_t> clocks_; // numOps x numStreams
};

/// Bytes [begin, end) of storage `space`, read or written.
struct Access {
  int64_t space = 0;
  int64_t begin = 0, end = 0;
  bool write = false;
  /// For a read of a value: the op whose write it must see (its producer;
  /// for an async result, the wait), -1 for a value present at entry. Any
  /// other last writer of those bytes clobbered the value (a buffer reused
  /// too early). kAnyWriter: no expectation.
  int expectWriter = kAnyWriter;
  static constexpr int kAnyWriter = -2;
  /// Nonzero on a read and a write of one op that may occupy exactly the
  /// same bytes: the op computes that result in place of that operand
  /// (inPlaceTag). Any other overlap between an op's own accesses is a
  /// conflict.
  int inPlace = 0;
};

/// The Access::inPlace tag of operand or result `index` of an op named
/// `mnemonic` (its name in the IR without "braid." and in the plan:
/// "attention", "add"); 0 where it may not share bytes with the op's other
/// accesses. The one list of what runs in place, used by the verifier and
/// the plan loader: attention reads its k cache (operand 3) before it
/// writes the updated k cache (result 1), tag 1, and v (4) into v (2),
/// tag 2; elementwise ops read element e before they write it (on the GPU
/// in the same thread), tag 1 on every operand and the result.
int inPlaceTag(std::string_view mnemonic, bool isResult, unsigned index);

struct OpAccesses {
  std::vector<Access> accesses;
  /// For an async collective's start: the op (its wait) until which these
  /// accesses are in flight; -1 for ops that finish when they complete.
  int inFlightUntil = -1;
  /// Its accesses may overlap each other: the function's end, whose state
  /// copy-back goes through scratch as one simultaneous assignment.
  bool overlapsItself = false;
};

/// A collective, for the hang rule.
struct CollectiveUse {
  int begin = 0;     // the op that issues it (sync op or start)
  int end = 0;       // the op after which it has completed (itself or wait)
  int64_t group = 0; // with the begin op's stream: its communicator
};

struct Conflict {
  /// Race: unordered accesses. Hang: unordered collectives of two
  /// communicators. Clobber: `first` overwrote bytes of a value `second`
  /// still reads (ordered, but the wrong value). Overlap: one op (`first` =
  /// `second`) writes bytes it also reads or writes through another operand
  /// or result (kernels, cuBLASLt and NCCL assume they do not overlap).
  enum Kind { Race, Hang, Clobber, Overlap } kind = Race;
  int first = 0, second = 0; // op indices, first < second in list order
  Access access;             // Race: the bytes of `second` that conflict
  int64_t group = 0;         // Hang: the second collective's group
  /// False when no event can order the pair (`first` is a collective still
  /// in flight at `second`, or a clobber): the schedule itself must change.
  bool repairable = true;
};

struct CheckOptions {
  /// The target runs collectives of different communicators concurrently
  /// without deadlock (then only per-communicator order is required).
  bool concurrentCommunicators = false;
  /// Stop after this many conflicts (0: report all).
  size_t maxConflicts = 0;
};

/// The incremental checker. Ops are appended in list order; for each one,
/// `conflicts` reports the earlier ops it is not ordered after (given its
/// clock so far), `addAfter` may order it after more ops (what
/// braid-insert-events does with an event), and `commit` records its
/// accesses for the ops that follow.
class ScheduleChecker {
public:
  /// `accesses` (one entry per op that will be appended) fixes the byte
  /// segments; `collectives` lists every collective of the schedule.
  ScheduleChecker(int numStreams, std::vector<OpAccesses> accesses,
                  const std::vector<CollectiveUse> &collectives,
                  CheckOptions options = {});
  ~ScheduleChecker();

  /// Appends the next op; its `after` entries must be earlier ops. Returns
  /// false when the op is malformed (stream or `after` out of range).
  bool append(const SchedOp &op);
  /// Conflicts of the last appended op with earlier ops; a `repairable`
  /// one goes away with `addAfter(first)`.
  void conflicts(std::vector<Conflict> &out) const;
  /// Orders the last appended op after op `a` (< it).
  void addAfter(int a);
  /// Records the last appended op's accesses and collective.
  void commit();

  const HappensBefore &happensBefore() const { return hb_; }

private:
  struct Impl;
  HappensBefore hb_;
  std::unique_ptr<Impl> impl_;
};

/// Two values present at function entry (the inputs, copied in before the
/// first op) that share bytes: one overwrites the other before any op runs,
/// and no op's access shows it.
struct EntryOverlap {
  size_t first = 0, second = 0; // indices into the entries, first < second
  Access both;                  // the shared bytes
};
std::optional<EntryOverlap>
firstEntryOverlap(const std::vector<Access> &entries);

/// Checks a whole schedule: every unordered pair of accesses to the same
/// bytes (at least one a write) and every pair of collectives that may
/// deadlock. `ops` and `accesses` are parallel.
std::vector<Conflict> findConflicts(const std::vector<SchedOp> &ops,
                                    int numStreams,
                                    std::vector<OpAccesses> accesses,
                                    const std::vector<CollectiveUse> &collectives,
                                    const CheckOptions &options = {});

} // namespace braid::sched

#endif // BRAID_RUNTIME_SCHEDULECHECK_H
