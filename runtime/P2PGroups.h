//===- P2PGroups.h - Adjacent sends and receives issued as a group -*- C++ -*-===//
//
// A lone ncclSend blocks its stream until the peer's ncclRecv runs, and
// the operations of one communicator run in issue order: two ranks that
// each send, then receive, deadlock. Inside ncclGroupStart/End they
// progress together. Both runtimes therefore issue a run of adjacent
// point-to-point ops (send, recv, send_start, recv_start) as one group when
//   - they are consecutive in plan order, on one stream and one group
//     (so one communicator),
//   - no event is waited for after the first or recorded before the last
//     (the group is issued at once, so nothing may come between them),
//   - no member reads what an earlier member receives (in a group they run
//     concurrently).
// The CUDA executor brackets such a run with groupStart/groupEnd; the CPU
// interpreter posts its sends before it takes its receives.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_P2PGROUPS_H
#define BRAID_RUNTIME_P2PGROUPS_H

#include "runtime/plan_generated.h"

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace braid::rt {

inline bool isPointToPoint(plan::OpCode c) {
  return c == plan::OpCode::Send || c == plan::OpCode::Recv ||
         c == plan::OpCode::SendStart || c == plan::OpCode::RecvStart;
}

/// The fields of an op the grouping rule reads: from a loaded plan's
/// plan::Op, or from the plan::OpT the exporter is building.
struct P2PGroupView {
  plan::OpCode opcode;
  int stream, group;
  bool waitsForEvents, recordsEvents;
  const int32_t *operands;
  size_t numOperands;
  const int32_t *results;
  size_t numResults;
};

inline P2PGroupView p2pGroupView(const plan::Op &o) {
  auto count = [](const auto *v) { return v ? size_t(v->size()) : 0; };
  auto data = [](const auto *v) { return v ? v->data() : nullptr; };
  return {o.opcode(),
          o.stream(),
          o.group(),
          count(o.wait_events()) > 0,
          count(o.record_events()) > 0,
          data(o.operands()),
          count(o.operands()),
          data(o.results()),
          count(o.results())};
}

inline P2PGroupView p2pGroupView(const plan::OpT &o) {
  return {o.opcode,
          o.stream,
          o.group,
          !o.wait_events.empty(),
          !o.record_events.empty(),
          o.operands.data(),
          o.operands.size(),
          o.results.data(),
          o.results.size()};
}

/// For each of `n` ops (`at(i)`: op i's P2PGroupView): the index one past
/// the last member of the group it heads, when it heads a group of two or
/// more; -1 otherwise (not a member, a later member, or alone).
template <typename At> std::vector<int> p2pGroupEnds(size_t n, At at) {
  std::vector<int> ends(n, -1);
  for (size_t i = 0; i < n;) {
    const P2PGroupView head = at(i);
    if (!isPointToPoint(head.opcode)) {
      ++i;
      continue;
    }
    std::set<int> received(head.results, head.results + head.numResults);
    size_t j = i + 1;
    for (; j < n; ++j) {
      const P2PGroupView prev = at(j - 1), o = at(j);
      bool reads = false;
      for (size_t k = 0; k < o.numOperands; ++k)
        reads = reads || received.count(o.operands[k]);
      if (!isPointToPoint(o.opcode) || o.stream != head.stream ||
          o.group != head.group || o.waitsForEvents || prev.recordsEvents ||
          reads)
        break;
      received.insert(o.results, o.results + o.numResults);
    }
    if (j - i >= 2)
      ends[i] = int(j);
    i = j;
  }
  return ends;
}

/// For each op: the last member of the group it is in, -1 when it is in
/// none (from p2pGroupEnds' result).
inline std::vector<int> p2pGroupLasts(const std::vector<int> &ends) {
  std::vector<int> last(ends.size(), -1);
  for (size_t i = 0; i < ends.size(); ++i)
    for (int j = int(i); j < ends[i]; ++j)
      last[size_t(j)] = ends[i] - 1;
  return last;
}

/// The groups of a loaded plan's function.
inline std::vector<int> p2pGroupEnds(const plan::Function &f) {
  return p2pGroupEnds(f.ops() ? f.ops()->size() : 0, [&](size_t i) {
    return p2pGroupView(*f.ops()->Get(unsigned(i)));
  });
}

} // namespace braid::rt

#endif // BRAID_RUNTIME_P2PGROUPS_H
