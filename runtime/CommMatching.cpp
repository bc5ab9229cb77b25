//===- CommMatching.cpp - Collectives and messages meet their partners ---===//
#include "runtime/CommMatching.h"

#include "runtime/HostTensor.h"
#include "runtime/P2PGroups.h"
#include "runtime/PlanLoader.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>

using namespace braid::rt;
namespace plan = braid::plan;

namespace {

/// One send, receive or collective as the rank that issues it sees it.
struct Call {
  int worldRank = 0;
  int function = 0;
  unsigned op = 0;
  int64_t bytes = 0; // a message's payload (point-to-point only)
};

struct ChannelEnds {
  int group = 0;
  int sender = 0, receiver = 0; // ranks in the group
  int senderWorld = 0, receiverWorld = 0;
  std::vector<Call> sends, receives;
};

/// One NCCL communicator: a group instance and a stream.
using CommId = std::pair<int64_t, int>;

/// The collectives of one communicator, per member in issue order.
struct CommCollectives {
  int group = 0;
  GroupPosition position; // of any member: names the instance's members
  std::map<int, std::vector<Call>> ofMember; // rank in group -> calls
};

const plan::Op &opOf(const plan::Plan &p, const Call &c) {
  return *p.functions()->Get(unsigned(c.function))->ops()->Get(c.op);
}

int64_t tensorBytes(const plan::Tensor &tensor) {
  return numElements(tensorShape(tensor)) * int64_t(dtypeSize(tensor.dtype()));
}

std::string describe(const plan::Plan &p, const Call &c) {
  const plan::Function &f = *p.functions()->Get(unsigned(c.function));
  const plan::Op &op = opOf(p, c);
  std::string s = "world rank " + std::to_string(c.worldRank) + " (function '" +
                  f.name()->str() + "', op " + std::to_string(c.op) + ", " +
                  opcodeName(op.opcode());
  if (op.loc())
    s += ", at " + op.loc()->str();
  return s + ")";
}

std::string groupName(const plan::Plan &p, int group) {
  return p.groups()->Get(unsigned(group))->name()->str();
}

std::string signature(const plan::Plan &p, const Call &c) {
  return collectiveSignature(*p.functions()->Get(unsigned(c.function)),
                             opOf(p, c));
}

/// Calls `each(worldRank, functionIndex, function)` for every world rank
/// that runs a function with ops.
template <typename Each>
void forEachRunningRank(const plan::Plan &p,
                        const std::vector<int> &functionOfRank, Each each) {
  for (size_t r = 0; r < functionOfRank.size(); ++r) {
    int fi = functionOfRank[r];
    if (fi < 0)
      continue;
    const plan::Function &f = *p.functions()->Get(unsigned(fi));
    if (f.ops())
      each(int(r), fi, f);
  }
}

bool runs(const std::vector<int> &functionOfRank, int worldRank) {
  return worldRank < int(functionOfRank.size()) &&
         functionOfRank[size_t(worldRank)] >= 0;
}

/// The k-th send pairs with the k-th receive of its channel, moving the
/// same bytes.
Status checkMessagesPair(
    const plan::Plan &p, const std::vector<int> &functionOfRank,
    const std::map<Communicator::Channel, ChannelEnds> &channels) {
  for (const auto &[key, ends] : channels) {
    std::string group = groupName(p, ends.group);
    std::string from = "world rank " + std::to_string(ends.senderWorld) +
                       " (rank " + std::to_string(ends.sender) + " of '" +
                       group + "')";
    std::string to = "world rank " + std::to_string(ends.receiverWorld) +
                     " (rank " + std::to_string(ends.receiver) + " of '" +
                     group + "')";
    std::string stream = " on stream " + std::to_string(key.stream);
    size_t n = std::min(ends.sends.size(), ends.receives.size());
    for (size_t k = 0; k < n; ++k)
      if (ends.sends[k].bytes != ends.receives[k].bytes)
        return errorf("point-to-point message ", k + 1, " from ", from, " to ",
                      to, stream, ": ", describe(p, ends.sends[k]), " sends ",
                      ends.sends[k].bytes, " bytes, ",
                      describe(p, ends.receives[k]), " receives ",
                      ends.receives[k].bytes, " bytes");
    if (ends.sends.size() > n)
      return errorf(describe(p, ends.sends[n]), " sends to ", to, stream,
                    ", which ",
                    runs(functionOfRank, ends.receiverWorld)
                        ? "never receives it: it receives " +
                              std::to_string(n) + " message(s) from " + from +
                              " there and this is send " + std::to_string(n + 1)
                        : std::string("runs no function"),
                    " (the send would block its stream forever)");
    if (ends.receives.size() > n)
      return errorf(describe(p, ends.receives[n]), " receives from ", from,
                    stream, ", which ",
                    runs(functionOfRank, ends.senderWorld)
                        ? "never sends it: it sends " + std::to_string(n) +
                              " message(s) to " + to +
                              " there and this is receive " +
                              std::to_string(n + 1)
                        : std::string("runs no function"),
                    " (the receive would block its stream forever)");
  }
  return Status::ok();
}

/// Every member of a communicator issues as many collectives on it, and
/// the k-th of each agree (signature()).
Status checkCollectivesMatch(const plan::Plan &p,
                             const std::vector<int> &functionOfRank,
                             const std::map<CommId, CommCollectives> &comms) {
  for (const auto &[id, comm] : comms) {
    const GroupPosition &g = comm.position;
    std::string group = groupName(p, comm.group);
    std::string members;
    for (int j = 0; j < g.size; ++j)
      members += (j ? ", " : "") + std::to_string(g.memberWorldRank(j));
    std::string where = "the communicator of group '" + group +
                        "' (world ranks " + members + ") on stream " +
                        std::to_string(id.second);
    size_t most = 0;
    for (const auto &[j, calls] : comm.ofMember)
      most = std::max(most, calls.size());
    static const std::vector<Call> none;
    for (size_t k = 0; k < most; ++k) {
      const Call *first = nullptr;
      for (int j = 0; j < g.size; ++j) {
        auto it = comm.ofMember.find(j);
        const std::vector<Call> &calls =
            it == comm.ofMember.end() ? none : it->second;
        if (k < calls.size()) {
          if (!first)
            first = &calls[k];
          continue;
        }
        // Member j lacks its k-th; name a member that has it.
        const Call *has = first;
        for (int j2 = j + 1; !has && j2 < g.size; ++j2)
          if (auto it2 = comm.ofMember.find(j2);
              it2 != comm.ofMember.end() && k < it2->second.size())
            has = &it2->second[k];
        int world = g.memberWorldRank(j);
        return errorf(describe(p, *has), " is collective ", k + 1, " on ",
                      where, ", which world rank ", world, " (rank ", j,
                      " of '", group, "') never joins: ",
                      runs(functionOfRank, world)
                          ? "it issues only " + std::to_string(calls.size()) +
                                " collective(s) there"
                          : std::string("it runs no function"),
                      " (the collective would block its stream forever)");
      }
      std::string expected = signature(p, *first);
      for (int j = 0; j < g.size; ++j) {
        const Call &c = comm.ofMember.at(j)[k];
        if (std::string b = signature(p, c); b != expected)
          return errorf("collective ", k + 1, " on ", where, ": ",
                        describe(p, *first), " is ", expected, ", but ",
                        describe(p, c), " is ", b,
                        " (NCCL needs every member's to agree)");
      }
    }
  }
  return Status::ok();
}

/// Whether every matched collective and message can complete when each
/// rank runs its communication in plan order: an issue unit (a collective,
/// a group of adjacent point-to-point ops, P2PGroups.h, or a lone one) is
/// posted once the units before it on its rank have completed, and
/// completes once the units it meets are posted (the other end of each of
/// its messages, the other members' matching collective). Units are
/// advanced to a fixed point; one left over is a deadlock.
///
/// One queue per rank, not per communicator: on one communicator NCCL runs
/// the units in issue order, and the loader's hang rule
/// (ScheduleCheck.h) orders units of different communicators one after
/// the other, so a rank's units complete in plan order whatever their
/// communicators. Two stages that meet on two communicators in opposite
/// orders deadlock, which per-communicator queues did not see.
Status
checkIssueOrder(const plan::Plan &p, const std::vector<int> &functionOfRank,
                const std::map<Communicator::Channel, ChannelEnds> &channels,
                const std::map<CommId, CommCollectives> &comms) {
  // A message's other end: unit `other`, where its own `mine` meets
  // `theirs`.
  struct Meeting {
    int other;
    Call mine, theirs;
  };
  struct Unit {
    Call first;                 // its first op
    std::vector<Meeting> meets; // point-to-point
    int round = -1;             // a collective: its round
  };
  // A collective round: every member's k-th collective of a communicator.
  // It completes once all of them are posted; counted, not paired, so the
  // check stays linear in the ranks.
  struct Round {
    std::vector<int> units;
    size_t posted = 0;
  };
  std::vector<Unit> units;
  std::vector<Round> rounds;
  // (world rank, op) -> its unit; per world rank the units in plan order.
  std::map<std::pair<int, unsigned>, int> unitOf;
  std::map<int, std::vector<int>> queues;
  forEachRunningRank(
      p, functionOfRank, [&](int r, int fi, const plan::Function &f) {
        std::vector<int> ends = p2pGroupEnds(f);
        for (unsigned oi = 0; oi < f.ops()->size();) {
          const plan::Op &op = *f.ops()->Get(oi);
          if (!isCollectiveOpcode(op.opcode())) {
            ++oi;
            continue;
          }
          unsigned end = ends[oi] > 0 ? unsigned(ends[oi]) : oi + 1;
          int u = int(units.size());
          units.push_back({{r, fi, oi, 0}, {}, -1});
          queues[r].push_back(u);
          for (unsigned m = oi; m < end; ++m)
            unitOf[{r, m}] = u;
          oi = end;
        }
      });
  for (const auto &[key, ends] : channels)
    for (size_t k = 0; k < ends.sends.size(); ++k) {
      const Call &send = ends.sends[k], &receive = ends.receives[k];
      int a = unitOf.at({send.worldRank, send.op});
      int b = unitOf.at({receive.worldRank, receive.op});
      units[size_t(a)].meets.push_back({b, send, receive});
      units[size_t(b)].meets.push_back({a, receive, send});
    }
  // checkCollectivesMatch has made every member's count the same.
  for (const auto &[id, comm] : comms) {
    size_t count = comm.ofMember.begin()->second.size();
    for (size_t k = 0; k < count; ++k) {
      int round = int(rounds.size());
      rounds.emplace_back();
      for (const auto &[j, calls] : comm.ofMember) {
        int u = unitOf.at({calls[k].worldRank, calls[k].op});
        units[size_t(u)].round = round;
        rounds.back().units.push_back(u);
      }
    }
  }
  // posted[u]: u is its queue's current unit or has completed.
  std::vector<char> posted(units.size(), 0);
  auto post = [&](int u) {
    if (posted[size_t(u)])
      return;
    posted[size_t(u)] = 1;
    if (int round = units[size_t(u)].round; round >= 0)
      ++rounds[size_t(round)].posted;
  };
  auto completes = [&](const Unit &u) {
    if (u.round >= 0)
      return rounds[size_t(u.round)].posted ==
             rounds[size_t(u.round)].units.size();
    return std::all_of(u.meets.begin(), u.meets.end(), [&](const Meeting &m) {
      return posted[size_t(m.other)];
    });
  };
  std::vector<size_t> head;
  std::vector<const std::vector<int> *> order;
  for (const auto &[key, queue] : queues) {
    order.push_back(&queue);
    head.push_back(0);
    post(queue.front());
  }
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t q = 0; q < order.size(); ++q)
      while (head[q] < order[q]->size() &&
             completes(units[size_t((*order[q])[head[q]])])) {
        if (++head[q] < order[q]->size())
          post((*order[q])[head[q]]);
        moved = true;
      }
  }
  for (size_t q = 0; q < order.size(); ++q) {
    if (head[q] == order[q]->size())
      continue;
    const Unit &stuck = units[size_t((*order[q])[head[q]])];
    // The other end not yet posted: a message's partner, or a member of
    // the round.
    std::optional<Meeting> waiting;
    for (const Meeting &m : stuck.meets)
      if (!posted[size_t(m.other)] && !waiting)
        waiting = m;
    if (stuck.round >= 0)
      for (int v : rounds[size_t(stuck.round)].units)
        if (!posted[size_t(v)] && !waiting)
          waiting = Meeting{v, stuck.first, units[size_t(v)].first};
    if (!waiting)
      continue;
    // What the other end's rank is stuck on before it.
    int blocking = -1;
    for (size_t q2 = 0; q2 < order.size(); ++q2)
      if (std::find(order[q2]->begin(), order[q2]->end(), waiting->other) !=
          order[q2]->end())
        blocking = (*order[q2])[head[q2]];
    const Call &theirs = units[size_t(waiting->other)].first;
    std::string before = "an op that never completes";
    if (blocking >= 0) {
      const Call &b = units[size_t(blocking)].first;
      const plan::Op &bop = opOf(p, b);
      GroupPosition gb = groupPosition(p, bop.group(), b.worldRank);
      GroupPosition gt =
          groupPosition(p, opOf(p, theirs).group(), theirs.worldRank);
      bool same = gb.instanceKey == gt.instanceKey &&
                  bop.stream() == opOf(p, theirs).stream();
      before = describe(p, b) +
               (same ? " on the same communicator"
                     : " on another of its communicators") +
               " (group '" + groupName(p, bop.group()) + "', stream " +
               std::to_string(bop.stream()) + ")";
    }
    return errorf(
        describe(p, waiting->mine), " never completes: ",
        stuck.round < 0 ? "its partner, " : "the matching collective, ",
        describe(p, waiting->theirs), ", is issued only after ", before,
        ", which waits in turn. NCCL runs a communicator's collectives, "
        "sends and receives in issue order, a rank's communicators one "
        "after another (the hang rule), and only point-to-point ops "
        "adjacent in the plan go out together as one group (an op between "
        "them, an event recorded on one or waited for before the next, "
        "another stream or device group, or a member sending what an "
        "earlier one received ends it): this exchange deadlocks");
  }
  return Status::ok();
}

} // namespace

std::string braid::rt::collectiveSignature(const plan::Function &f,
                                           const plan::Op &op) {
  plan::OpCode code = syncOpcode(op.opcode());
  std::string s = opcodeName(code);
  if (code == plan::OpCode::AllReduce || code == plan::OpCode::ReduceScatter)
    s += std::string(" ") + reduceName(op.reduce_kind());
  if (code == plan::OpCode::Broadcast)
    s += " from rank " + std::to_string(op.root());
  const plan::Tensor &in = *f.tensors()->Get(unsigned(op.operands()->Get(0)));
  const plan::Tensor &out = *f.tensors()->Get(unsigned(op.results()->Get(0)));
  return s + " of " + dtypeName(in.dtype()) + ", " +
         std::to_string(numElements(tensorShape(in))) + " elements in, " +
         std::to_string(numElements(tensorShape(out))) + " out";
}

Communicator::Channel braid::rt::p2pChannel(const plan::Plan &p,
                                            const plan::Op &op, int worldRank) {
  GroupPosition g = groupPosition(p, op.group(), worldRank);
  bool sends = syncOpcode(op.opcode()) == plan::OpCode::Send;
  int peer = int(op.peer());
  return {g.instanceKey, int(op.stream()), sends ? g.rankInGroup : peer,
          sends ? peer : g.rankInGroup};
}

Status
braid::rt::checkCommunicationMatching(const plan::Plan &p,
                                      const std::vector<int> &functionOfRank) {
  if (!p.functions())
    return Status::ok();
  std::map<Communicator::Channel, ChannelEnds> channels;
  std::map<CommId, CommCollectives> comms;
  forEachRunningRank(
      p, functionOfRank, [&](int r, int fi, const plan::Function &f) {
        for (unsigned oi = 0; oi < f.ops()->size(); ++oi) {
          const plan::Op &op = *f.ops()->Get(oi);
          if (!isCollectiveOpcode(op.opcode()))
            continue;
          GroupPosition g = groupPosition(p, op.group(), r);
          if (!isPointToPoint(op.opcode())) {
            CommCollectives &c = comms[{g.instanceKey, int(op.stream())}];
            c.group = op.group();
            c.position = g;
            c.ofMember[g.rankInGroup].push_back({r, fi, oi, 0});
            continue;
          }
          bool sends = syncOpcode(op.opcode()) == plan::OpCode::Send;
          Communicator::Channel key = p2pChannel(p, op, r);
          ChannelEnds &ends = channels[key];
          ends.group = op.group();
          ends.sender = key.src;
          ends.receiver = key.dst;
          ends.senderWorld = g.memberWorldRank(key.src);
          ends.receiverWorld = g.memberWorldRank(key.dst);
          int t = sends ? op.operands()->Get(0) : op.results()->Get(0);
          (sends ? ends.sends : ends.receives)
              .push_back(
                  {r, fi, oi, tensorBytes(*f.tensors()->Get(unsigned(t)))});
        }
      });
  BRAID_RETURN_IF_ERROR(checkMessagesPair(p, functionOfRank, channels));
  BRAID_RETURN_IF_ERROR(checkCollectivesMatch(p, functionOfRank, comms));
  return checkIssueOrder(p, functionOfRank, channels, comms);
}

Status
CommMatchingCache::check(const LoadedPlan &plan,
                         const std::vector<std::string> &functionOfRank) {
  if (passed_.count(functionOfRank))
    return Status::ok();
  std::vector<int> indices;
  for (const std::string &name : functionOfRank) {
    indices.push_back(plan.functionIndex(name));
    if (indices.back() < 0)
      return Status::ok();
  }
  BRAID_RETURN_IF_ERROR(checkCommunicationMatching(plan.root(), indices));
  passed_.insert(functionOfRank);
  return Status::ok();
}
