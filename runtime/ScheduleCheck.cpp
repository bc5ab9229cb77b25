//===- ScheduleCheck.cpp - Happens-before, races and hangs ----------------===//
#include "runtime/ScheduleCheck.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

using namespace braid::sched;

//===----------------------------------------------------------------------===//
// HappensBefore
//===----------------------------------------------------------------------===//

bool HappensBefore::append(const SchedOp &op) {
  int n = numOps();
  if (op.stream < 0 || op.stream >= numStreams_)
    return false;
  for (int a : op.after)
    if (a < 0 || a >= n)
      return false;
  if (lastOfStream_.empty())
    lastOfStream_.assign(size_t(numStreams_), -1);
  size_t width = size_t(numStreams_);
  clocks_.resize(clocks_.size() + width, 0);
  int32_t *c = clocks_.data() + size_t(n) * width;
  // Stream order: everything the previous op of this stream saw.
  if (int prev = lastOfStream_[size_t(op.stream)]; prev >= 0)
    std::copy(clock(prev), clock(prev) + width, c);
  stream_.push_back(op.stream);
  position_.push_back(c[op.stream] + 1);
  c[op.stream] += 1;
  lastOfStream_[size_t(op.stream)] = n;
  for (int a : op.after)
    joinIntoLast(a);
  return true;
}

void HappensBefore::joinIntoLast(int a) {
  int last = numOps() - 1;
  int32_t *c = clocks_.data() + size_t(last) * size_t(numStreams_);
  const int32_t *other = clock(a);
  for (int s = 0; s < numStreams_; ++s)
    c[s] = std::max(c[s], other[s]);
}

bool HappensBefore::build(const std::vector<SchedOp> &ops) {
  for (const SchedOp &op : ops)
    if (!append(op))
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// ScheduleChecker
//===----------------------------------------------------------------------===//

struct ScheduleChecker::Impl {
  struct Segment {
    int lastWrite = -1;
    std::vector<int> lastRead; // per stream, -1: none
    // Async collectives in flight over these bytes: (start op, writes).
    std::vector<std::pair<int, bool>> inFlight;
  };
  struct Space {
    std::vector<int64_t> bounds; // sorted, unique; segment k = [b[k], b[k+1])
    std::vector<Segment> segments;
  };

  int numStreams;
  CheckOptions options;
  std::vector<OpAccesses> accesses;
  std::unordered_map<int64_t, Space> spaces;
  // Starts whose in-flight accesses complete at a given wait.
  std::unordered_map<int, std::vector<int>> completesAt;
  // Collectives by the op that begins them, and the last one per
  // communicator (group, stream).
  std::unordered_map<int, CollectiveUse> collectiveAt;
  std::map<std::pair<int64_t, int>, CollectiveUse> lastOfCommunicator;

  template <typename Fn> void forSegments(const Access &a, Fn fn) {
    auto it = spaces.find(a.space);
    if (it == spaces.end() || a.end <= a.begin)
      return;
    Space &sp = it->second;
    size_t k = size_t(std::upper_bound(sp.bounds.begin(), sp.bounds.end(),
                                       a.begin) -
                      sp.bounds.begin());
    k = k == 0 ? 0 : k - 1;
    for (; k + 1 < sp.bounds.size() && sp.bounds[k] < a.end; ++k)
      fn(sp.segments[k]);
  }
};

ScheduleChecker::ScheduleChecker(int numStreams,
                                 std::vector<OpAccesses> accesses,
                                 const std::vector<CollectiveUse> &collectives,
                                 CheckOptions options)
    : hb_(numStreams),
      impl_(new Impl{numStreams, options, std::move(accesses), {}, {}, {}, {}}) {
  std::unordered_map<int64_t, std::vector<int64_t>> bounds;
  for (const OpAccesses &op : impl_->accesses)
    for (const Access &a : op.accesses) {
      if (a.end <= a.begin)
        continue;
      bounds[a.space].push_back(a.begin);
      bounds[a.space].push_back(a.end);
    }
  for (auto &[space, b] : bounds) {
    std::sort(b.begin(), b.end());
    b.erase(std::unique(b.begin(), b.end()), b.end());
    Impl::Space &sp = impl_->spaces[space];
    sp.segments.resize(b.size() - 1);
    for (Impl::Segment &seg : sp.segments)
      seg.lastRead.assign(size_t(numStreams), -1);
    sp.bounds = std::move(b);
  }
  for (const CollectiveUse &c : collectives)
    impl_->collectiveAt[c.begin] = c;
}

ScheduleChecker::~ScheduleChecker() = default;

bool ScheduleChecker::append(const SchedOp &op) {
  if (size_t(hb_.numOps()) >= impl_->accesses.size())
    return false;
  return hb_.append(op);
}

void ScheduleChecker::addAfter(int a) {
  if (a >= 0 && a < hb_.numOps() - 1)
    hb_.joinIntoLast(a);
}

void ScheduleChecker::conflicts(std::vector<Conflict> &out) const {
  int i = hb_.numOps() - 1;
  if (i < 0)
    return;
  size_t first = out.size();
  auto report = [&](Conflict::Kind kind, int a, const Access &acc,
                    int64_t group, bool repairable = true) {
    for (size_t k = first; k < out.size(); ++k)
      if (out[k].first == a && out[k].kind == kind)
        return; // one report per pair of ops
    Conflict c;
    c.kind = kind;
    c.first = a;
    c.second = i;
    c.access = acc;
    c.group = group;
    c.repairable = repairable;
    out.push_back(c);
  };
  const OpAccesses &own = impl_->accesses[size_t(i)];
  if (!own.overlapsItself)
    for (size_t a = 0; a < own.accesses.size(); ++a)
      for (size_t b = 0; b < own.accesses.size(); ++b) {
        const Access &w = own.accesses[a], &o = own.accesses[b];
        if (a == b || !w.write || w.space != o.space || w.end <= o.begin ||
            o.end <= w.begin || (o.write && b < a))
          continue;
        if (!o.write && o.inPlace != 0 && o.inPlace == w.inPlace &&
            o.begin == w.begin && o.end == w.end)
          continue;
        Access both = w;
        both.begin = std::max(w.begin, o.begin);
        both.end = std::min(w.end, o.end);
        report(Conflict::Overlap, i, both, 0, /*repairable=*/false);
      }
  for (const Access &acc : own.accesses)
    impl_->forSegments(acc, [&](Impl::Segment &seg) {
      for (auto [start, writes] : seg.inFlight)
        if (start != i && (writes || acc.write))
          report(Conflict::Race, start, acc, 0, /*repairable=*/false);
      if (seg.lastWrite >= 0 && !hb_.before(seg.lastWrite, i) &&
          seg.lastWrite != i)
        report(Conflict::Race, seg.lastWrite, acc, 0);
      else if (!acc.write && acc.expectWriter != Access::kAnyWriter &&
               seg.lastWrite != acc.expectWriter && seg.lastWrite != i)
        report(Conflict::Clobber, seg.lastWrite, acc, 0, /*repairable=*/false);
      if (acc.write)
        for (int r : seg.lastRead)
          if (r >= 0 && r != i && !hb_.before(r, i))
            report(Conflict::Race, r, acc, 0);
    });
  if (impl_->options.concurrentCommunicators)
    return;
  auto it = impl_->collectiveAt.find(i);
  if (it == impl_->collectiveAt.end())
    return;
  std::pair<int64_t, int> mine{it->second.group, hb_.stream(i)};
  for (const auto &[comm, last] : impl_->lastOfCommunicator) {
    if (comm == mine)
      continue; // one communicator runs its collectives in issue order
    // Still in flight past this point: no event can fix that.
    if (last.end > i)
      report(Conflict::Hang, last.begin, Access{}, it->second.group,
             /*repairable=*/false);
    else if (!hb_.before(last.end, i))
      report(Conflict::Hang, last.end, Access{}, it->second.group);
  }
}

void ScheduleChecker::commit() {
  int i = hb_.numOps() - 1;
  if (i < 0)
    return;
  int stream = hb_.stream(i);
  auto record = [&](int op, const Access &acc) {
    impl_->forSegments(acc, [&](Impl::Segment &seg) {
      if (acc.write) {
        seg.lastWrite = op;
        std::fill(seg.lastRead.begin(), seg.lastRead.end(), -1);
      } else {
        seg.lastRead[size_t(stream)] = op;
      }
    });
  };
  const OpAccesses &mine = impl_->accesses[size_t(i)];
  if (mine.inFlightUntil > i) {
    for (const Access &acc : mine.accesses)
      impl_->forSegments(acc, [&](Impl::Segment &seg) {
        seg.inFlight.push_back({i, acc.write});
      });
    impl_->completesAt[mine.inFlightUntil].push_back(i);
  } else {
    for (const Access &acc : mine.accesses)
      record(i, acc);
  }
  // A wait completes its collective: from now on its accesses count as
  // this op's, so only ops ordered after the wait may touch those bytes.
  if (auto done = impl_->completesAt.find(i); done != impl_->completesAt.end()) {
    for (int start : done->second)
      for (const Access &acc : impl_->accesses[size_t(start)].accesses) {
        impl_->forSegments(acc, [&](Impl::Segment &seg) {
          auto &f = seg.inFlight;
          f.erase(std::remove_if(f.begin(), f.end(),
                                 [&](const std::pair<int, bool> &p) {
                                   return p.first == start;
                                 }),
                  f.end());
        });
        record(i, acc);
      }
    impl_->completesAt.erase(done);
  }
  if (auto it = impl_->collectiveAt.find(i); it != impl_->collectiveAt.end())
    impl_->lastOfCommunicator[{it->second.group, stream}] = it->second;
}

int braid::sched::inPlaceTag(std::string_view mnemonic, bool isResult,
                             unsigned index) {
  if (mnemonic == "attention") {
    if (isResult)
      return index == 1 || index == 2 ? int(index) : 0;
    return index == 3 || index == 4 ? int(index) - 2 : 0;
  }
  for (std::string_view elementwise :
       {"add", "mul", "silu", "gelu", "activation", "swiglu"})
    if (mnemonic == elementwise)
      return 1;
  return 0;
}

std::optional<EntryOverlap>
braid::sched::firstEntryOverlap(const std::vector<Access> &entries) {
  std::vector<size_t> order;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].end > entries[i].begin)
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Access &x = entries[a], &y = entries[b];
    return std::tie(x.space, x.begin, a) < std::tie(y.space, y.begin, b);
  });
  // Sorted by start: a value overlaps an earlier one exactly when it starts
  // before the furthest end seen so far in its space.
  size_t furthest = 0;
  bool any = false;
  for (size_t i : order) {
    const Access &x = entries[i];
    if (any && entries[furthest].space == x.space &&
        x.begin < entries[furthest].end) {
      EntryOverlap o;
      o.first = std::min(furthest, i);
      o.second = std::max(furthest, i);
      o.both = x;
      o.both.end = std::min(x.end, entries[furthest].end);
      return o;
    }
    if (!any || entries[furthest].space != x.space ||
        x.end > entries[furthest].end)
      furthest = i;
    any = true;
  }
  return std::nullopt;
}

std::vector<Conflict>
braid::sched::findConflicts(const std::vector<SchedOp> &ops, int numStreams,
                            std::vector<OpAccesses> accesses,
                            const std::vector<CollectiveUse> &collectives,
                            const CheckOptions &options) {
  std::vector<Conflict> out;
  if (accesses.size() < ops.size())
    accesses.resize(ops.size());
  ScheduleChecker checker(numStreams, std::move(accesses), collectives,
                          options);
  for (const SchedOp &op : ops) {
    if (!checker.append(op))
      break; // malformed: callers validate streams and `after` first
    checker.conflicts(out);
    checker.commit();
    if (options.maxConflicts && out.size() >= options.maxConflicts)
      break;
  }
  return out;
}
