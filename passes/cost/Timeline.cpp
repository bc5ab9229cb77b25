//===- Timeline.cpp - Simulated per-stream timeline of one step -----------===//
#include "passes/cost/Timeline.h"

#include "dialect/BraidOps.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::braid;

namespace braid::cost {

double Timeline::overlapEfficiency() const {
  double possible = std::min(computeBusy, commBusy);
  if (possible <= 0)
    return std::nan("");
  return std::clamp(hiddenComm / possible, 0.0, 1.0);
}

static std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto printTypes = [&](auto values) {
    bool first = true;
    for (Value v : values) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t)
        continue;
      os << (first ? "" : ", ");
      first = false;
      for (int64_t d : t.getShape())
        os << d << "x";
      os << t.getElementType();
    }
  };
  printTypes(op->getOperands());
  os << " -> ";
  printTypes(op->getResults());
  return s;
}

/// Total length of the union of [start, end) intervals.
static double unionLength(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, curStart = 0, curEnd = -1;
  for (auto [s, e] : v) {
    if (s > curEnd) {
      if (curEnd > curStart)
        total += curEnd - curStart;
      curStart = s;
      curEnd = e;
    } else {
      curEnd = std::max(curEnd, e);
    }
  }
  if (curEnd > curStart)
    total += curEnd - curStart;
  return total;
}

/// When work of `seconds` at full rate, starting at `start`, ends if it
/// runs at `slowRate` of its rate during the `busy` intervals (sorted,
/// disjoint) and at full rate otherwise.
static double
endUnderContention(double start, double seconds,
                   const std::vector<std::pair<double, double>> &busy,
                   double slowRate) {
  double t = start, left = seconds;
  for (auto [s, e] : busy) {
    if (e <= t)
      continue;
    if (s > t) { // full rate until the next collective
      if (t + left <= s)
        return t + left;
      left -= s - t;
      t = s;
    }
    double slowWork = (e - t) * slowRate;
    if (left <= slowWork)
      return t + left / slowRate;
    left -= slowWork;
    t = e;
  }
  return t + left;
}

/// Sorted, disjoint union of `v`.
static std::vector<std::pair<double, double>>
mergeIntervals(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (auto [s, e] : v) {
    if (e <= s)
      continue;
    if (!out.empty() && s <= out.back().second)
      out.back().second = std::max(out.back().second, e);
    else
      out.push_back({s, e});
  }
  return out;
}

static Timeline simulateOnce(func::FuncOp func, const CostModel &model,
                             bool serial);

Timeline simulate(func::FuncOp func, const CostModel &model, bool serial) {
  Timeline t = simulateOnce(func, model, serial);
  t.serialTime = serial ? t.stepTime : simulateOnce(func, model, true).stepTime;
  return t;
}

double stepTime(func::FuncOp func, const CostModel &model) {
  return simulateOnce(func, model, false).stepTime;
}

static Timeline simulateOnce(func::FuncOp func, const CostModel &model,
                             bool serial) {
  Timeline t;
  llvm::StringMap<KindTotal> byKind;
  t.function = func.getSymName().str();
  struct Ready {
    double time = 0;
    int entry = -1;
  };
  llvm::DenseMap<Value, Ready> ready;
  // One slot per stream the function uses, so the earliest next start
  // over them (the contention horizon below) is over real streams.
  size_t numStreams = 1;
  if (!serial)
    for (Operation &op : func.getBody().front())
      numStreams = std::max(numStreams, size_t(getStream(&op).value_or(0)) + 1);
  std::vector<double> streamFree(numStreams, 0.0);
  std::vector<int> streamLast(numStreams, -1);
  double host = 0; // when the host has issued the last kernel
  int lastKernel = -1;

  // When a recorded event completes, and the entry it completes after.
  llvm::DenseMap<Value, std::pair<double, int>> eventTime;
  // Collectives placed so far: (stream, device interval).
  std::vector<std::pair<int, std::pair<double, double>>> commOnOtherStreams;
  for (Operation &op : func.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      continue;
    // Events launch nothing: a record marks its stream's progress, a wait
    // holds its stream back until then. Serially they are no-ops.
    if (isa<EventRecordOp, EventWaitOp>(op)) {
      if (serial)
        continue;
      size_t stream = size_t(getStream(&op).value_or(0));
      if (stream >= streamFree.size()) {
        streamFree.resize(stream + 1, 0.0);
        streamLast.resize(stream + 1, -1);
      }
      if (auto record = dyn_cast<EventRecordOp>(op)) {
        eventTime[record.getEvent()] = {streamFree[stream], streamLast[stream]};
      } else {
        // The recorder's entry then fixes this stream's next start (the
        // critical path crosses streams through the event).
        auto [time, entry] = eventTime.lookup(cast<EventWaitOp>(op).getEvent());
        if (time > streamFree[stream]) {
          streamFree[stream] = time;
          streamLast[stream] = entry;
        }
      }
      continue;
    }
    OpCost c = model.cost(&op);
    Ready operands;
    for (Value v : op.getOperands()) {
      auto it = ready.find(v);
      if (it != ready.end() && it->second.time >= operands.time &&
          it->second.entry >= 0)
        operands = it->second;
    }
    if (c.cls == OpClass::Free) {
      // Views and resident parameters: ready when their inputs are.
      for (Value r : op.getResults())
        ready[r] = operands;
      continue;
    }
    // Unscheduled IR (no braid.stream) runs on one stream: an async start
    // there overlaps nothing, as on the GPU.
    int stream = serial ? 0 : int(getStream(&op).value_or(0));
    if (size_t(stream) >= streamFree.size()) {
      streamFree.resize(size_t(stream) + 1, 0.0);
      streamLast.resize(size_t(stream) + 1, -1);
    }
    TimelineEntry e;
    e.op = &op;
    e.name = op.getName().stripDialect();
    e.stream = stream;
    e.cost = c;
    e.start = streamFree[size_t(stream)];
    e.criticalPredecessor = streamLast[size_t(stream)];
    if (operands.time > e.start) {
      e.start = operands.time;
      e.criticalPredecessor = operands.entry;
    }
    // Every kernel costs the graph node overhead on the device (the
    // dependent-kernel gap graphs keep); eager launch in addition makes
    // the host issue kernels one by one at the eager cost, so a kernel
    // cannot start before its launch call returns: hidden while the GPU
    // is busy, the bottleneck when kernels are short.
    double launchOnDevice = c.kernel ? model.target().graphLaunchUs * 1e-6 : 0;
    if (c.kernel && model.launchMode() == LaunchMode::Eager) {
      host += model.launchSeconds();
      if (host > e.start) {
        e.start = host;
        e.criticalPredecessor = lastKernel;
      }
    }
    e.launch = launchOnDevice;
    e.end = e.start + launchOnDevice + c.seconds;
    // A collective that ended before every stream's next start can touch
    // no later op: drop it (keeps this linear in the ops).
    if (!commOnOtherStreams.empty()) {
      double horizon = *std::min_element(streamFree.begin(), streamFree.end());
      llvm::erase_if(commOnOtherStreams, [&](const auto &interval) {
        return interval.second.second <= horizon;
      });
    }
    // Collectives in flight on other streams take their share of the GPU.
    const Target &tgt = model.target();
    double slow = 1.0 - (c.bound == "compute" ? tgt.collectiveSmFraction
                                              : tgt.collectiveMemoryFraction);
    if (c.cls == OpClass::Compute && slow < 1.0 &&
        !commOnOtherStreams.empty()) {
      std::vector<std::pair<double, double>> busy;
      for (auto [s, interval] : commOnOtherStreams)
        if (s != stream)
          busy.push_back(interval);
      double start = e.start + launchOnDevice;
      double end =
          endUnderContention(start, c.seconds, mergeIntervals(busy), slow);
      t.contention += end - (start + c.seconds);
      e.end = end;
    }
    int index = int(t.entries.size());
    if (c.kernel)
      lastKernel = index;
    streamFree[size_t(stream)] = e.end;
    streamLast[size_t(stream)] = index;
    for (Value r : op.getResults())
      ready[r] = {e.end, index};
    if (c.cls == OpClass::Compute)
      t.computeTime += c.seconds;
    if (c.cls == OpClass::Communication) {
      t.commTime += c.seconds;
      commOnOtherStreams.push_back({stream, {e.start + e.launch, e.end}});
    }
    KindTotal &k = byKind[e.name];
    ++k.count;
    k.seconds += c.seconds;
    t.stepTime = std::max(t.stepTime, e.end);
    t.entries.push_back(std::move(e));
  }
  t.numStreams = 1;
  for (const TimelineEntry &e : t.entries)
    t.numStreams = std::max(t.numStreams, e.stream + 1);

  std::vector<std::pair<double, double>> compute, comm, both;
  for (const TimelineEntry &e : t.entries) {
    // Device execution only: launch overhead is neither.
    if (e.cost.cls == OpClass::Compute)
      compute.push_back({e.start + e.launch, e.end});
    if (e.cost.cls == OpClass::Communication)
      comm.push_back({e.start + e.launch, e.end});
  }
  both = compute;
  both.insert(both.end(), comm.begin(), comm.end());
  // |comm \ compute| = |comm u compute| - |compute|; hidden is the rest.
  t.computeBusy = unionLength(compute);
  t.commBusy = unionLength(comm);
  t.exposedComm = unionLength(both) - t.computeBusy;
  t.hiddenComm = std::max(0.0, t.commBusy - t.exposedComm);

  int last = -1;
  for (int i = 0; i < int(t.entries.size()); ++i)
    if (last < 0 || t.entries[size_t(i)].end > t.entries[size_t(last)].end)
      last = i;
  // Busy: device time as run, so compute a collective slowed counts whole.
  double busy = 0;
  for (int i = last; i >= 0; i = t.entries[size_t(i)].criticalPredecessor) {
    const TimelineEntry &e = t.entries[size_t(i)];
    t.criticalPath.push_back(i);
    double ran = e.end - e.start - e.launch;
    busy += ran;
    if (e.cost.cls == OpClass::Compute)
      t.criticalCompute += ran;
    if (e.cost.cls == OpClass::Communication)
      t.criticalComm += ran;
  }
  std::reverse(t.criticalPath.begin(), t.criticalPath.end());
  t.launchGaps = std::max(0.0, t.stepTime - busy);
  for (const auto &kind : byKind)
    t.byKind[kind.getKey().str()] = kind.getValue();
  return t;
}

std::string formatMs(double seconds) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.3f ms", seconds * 1e3);
  return s;
}

std::string formatPercent(double fraction) {
  if (std::isnan(fraction))
    return "n/a";
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.1f%%", fraction * 100);
  return s;
}

void printTimelineText(llvm::raw_ostream &os, const Timeline &t,
                                    const CostModel &model) {
  const Target &target = model.target();
  os << "braid-estimate @" << t.function << " on " << target.name << " ("
     << (model.launchMode() == LaunchMode::Eager ? "eager" : "graph")
     << " launch), " << model.worldSize() << " ranks, " << t.numStreams
     << " streams\n";
  auto row = [&](llvm::StringRef label, const std::string &value,
                 llvm::StringRef note = "") {
    os << "  " << llvm::left_justify(label, 26) << llvm::right_justify(value, 14);
    if (!note.empty())
      os << "  " << note;
    os << "\n";
  };
  row("step time (T)", formatMs(t.stepTime));
  row("compute time (C)", formatMs(t.computeTime));
  row("communication time (M)", formatMs(t.commTime),
      (formatPercent(t.commTime / std::max(t.computeTime + t.commTime, 1e-30)) +
       " of C+M")
          .c_str());
  row("exposed communication", formatMs(t.exposedComm),
      (formatPercent(t.exposedComm / std::max(t.stepTime, 1e-30)) + " of T")
          .c_str());
  row("serial time (T_serial)", formatMs(t.serialTime));
  row("overlap efficiency", formatPercent(t.overlapEfficiency()),
      "hidden communication / min(compute, communication) busy time");
  if (t.contention > 0)
    row("contention", formatMs(t.contention),
        "compute slowed by collectives running beside it");
  row("ideal bound max(C, M)", formatMs(t.idealBound()));
  row("launch gaps", formatMs(t.launchGaps),
      "T minus busy time on the critical path");
  std::string path;
  llvm::raw_string_ostream(path)
      << t.criticalPath.size() << " ops";
  row("critical path", path,
      ("compute " + formatMs(t.criticalCompute) + ", communication " +
       formatMs(t.criticalComm))
          .c_str());
  os << "  by op:\n";
  std::vector<std::pair<std::string, KindTotal>> kinds(t.byKind.begin(),
                                                       t.byKind.end());
  std::stable_sort(kinds.begin(), kinds.end(), [](auto &a, auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  for (auto &[name, k] : kinds)
    os << "    " << llvm::left_justify(name, 22)
       << llvm::right_justify(std::to_string(k.count), 6) << " ops "
       << llvm::right_justify(formatMs(k.seconds), 14) << "\n";
}

static llvm::json::Value nanoseconds(double seconds) {
  return int64_t(std::llround(seconds * 1e9));
}

static llvm::json::Value microseconds(double seconds) {
  return std::round(seconds * 1e9) / 1e3; // trace timestamps, 1 ns steps
}

llvm::json::Value timelineJson(const Timeline &t,
                                            const CostModel &model) {
  llvm::json::Object byKind;
  for (auto &[name, k] : t.byKind)
    byKind[name] = llvm::json::Object{{"count", k.count},
                                      {"time_ns", nanoseconds(k.seconds)}};
  double eff = t.overlapEfficiency();
  return llvm::json::Object{
      {"function", t.function},
      {"target", model.target().name},
      {"launch", model.launchMode() == LaunchMode::Eager ? "eager" : "graph"},
      {"ranks", model.worldSize()},
      {"streams", t.numStreams},
      {"step_time_ns", nanoseconds(t.stepTime)},
      {"compute_time_ns", nanoseconds(t.computeTime)},
      {"communication_time_ns", nanoseconds(t.commTime)},
      {"exposed_communication_ns", nanoseconds(t.exposedComm)},
      {"serial_time_ns", nanoseconds(t.serialTime)},
      {"overlap_efficiency",
       std::isnan(eff) ? llvm::json::Value(nullptr) : llvm::json::Value(eff)},
      {"hidden_communication_ns", nanoseconds(t.hiddenComm)},
      {"contention_ns", nanoseconds(t.contention)},
      {"ideal_bound_ns", nanoseconds(t.idealBound())},
      {"launch_gaps_ns", nanoseconds(t.launchGaps)},
      {"critical_path",
       llvm::json::Object{{"ops", int64_t(t.criticalPath.size())},
                          {"compute_ns", nanoseconds(t.criticalCompute)},
                          {"communication_ns", nanoseconds(t.criticalComm)}}},
      {"by_op", std::move(byKind)}};
}

llvm::json::Value chromeTrace(llvm::ArrayRef<Timeline> timelines,
                                           const CostModel &model) {
  llvm::json::Array events;
  int streams = 1;
  for (const Timeline &t : timelines)
    streams = std::max(streams, t.numStreams);
  for (int rank = 0; rank < model.worldSize(); ++rank) {
    events.push_back(llvm::json::Object{
        {"name", "process_name"},
        {"ph", "M"},
        {"pid", rank},
        {"args", llvm::json::Object{{"name", "rank " + std::to_string(rank)}}}});
    for (int s = 0; s < streams; ++s)
      events.push_back(llvm::json::Object{
          {"name", "thread_name"},
          {"ph", "M"},
          {"pid", rank},
          {"tid", s},
          {"args", llvm::json::Object{
                       {"name", "stream " + std::to_string(s) +
                                    (s == 0 ? " (compute)" : " (comm)")}}}});
  }
  double offset = 0;
  for (const Timeline &t : timelines) {
    for (int rank = 0; rank < model.worldSize(); ++rank)
      for (const TimelineEntry &e : t.entries) {
        if (e.cost.cls == OpClass::Sync)
          continue;
        events.push_back(llvm::json::Object{
            {"name", e.name},
            {"cat", e.cost.cls == OpClass::Communication ? "communication"
                                                         : "compute"},
            {"ph", "X"},
            {"pid", rank},
            {"tid", e.stream},
            {"ts", microseconds(offset + e.start)},
            {"dur", microseconds(e.end - e.start)},
            {"args", llvm::json::Object{{"function", t.function},
                                        {"shapes", describe(e.op)},
                                        {"bytes", e.cost.bytes},
                                        {"flops", e.cost.flops},
                                        {"bound", e.cost.bound}}}});
      }
    offset += t.stepTime * 1.05; // a visible gap between functions
  }
  return llvm::json::Object{{"traceEvents", std::move(events)},
                            {"displayTimeUnit", "ms"}};
}

} // namespace braid::cost
