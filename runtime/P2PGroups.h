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

#include <set>
#include <vector>

namespace braid::rt {

inline bool isPointToPoint(plan::OpCode c) {
  return c == plan::OpCode::Send || c == plan::OpCode::Recv ||
         c == plan::OpCode::SendStart || c == plan::OpCode::RecvStart;
}

/// For each op of `f`: the index one past the last member of the group it
/// heads, when it heads a group of two or more; -1 otherwise (not a member,
/// a later member, or alone).
inline std::vector<int> p2pGroupEnds(const plan::Function &f) {
  size_t n = f.ops() ? f.ops()->size() : 0;
  std::vector<int> ends(n, -1);
  for (size_t i = 0; i < n;) {
    const plan::Op &head = *f.ops()->Get(unsigned(i));
    if (!isPointToPoint(head.opcode())) {
      ++i;
      continue;
    }
    std::set<int> received;
    auto receive = [&](const plan::Op &o) {
      if (o.results())
        for (int t : *o.results())
          received.insert(t);
    };
    receive(head);
    size_t j = i + 1;
    for (; j < n; ++j) {
      const plan::Op &prev = *f.ops()->Get(unsigned(j - 1));
      const plan::Op &o = *f.ops()->Get(unsigned(j));
      bool reads = false;
      if (o.operands())
        for (int t : *o.operands())
          reads = reads || received.count(t);
      if (!isPointToPoint(o.opcode()) || o.stream() != head.stream() ||
          o.group() != head.group() ||
          (o.wait_events() && o.wait_events()->size()) ||
          (prev.record_events() && prev.record_events()->size()) || reads)
        break;
      receive(o);
    }
    if (j - i >= 2)
      ends[i] = int(j);
    i = j;
  }
  return ends;
}

} // namespace braid::rt

#endif // BRAID_RUNTIME_P2PGROUPS_H
