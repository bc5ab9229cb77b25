//===- P2PPairing.cpp - Every send has its receive ------------------------===//
#include "runtime/P2PPairing.h"

#include "runtime/P2PGroups.h"
#include "runtime/PlanLoader.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

using namespace braid::rt;
namespace plan = braid::plan;

namespace {

/// One send or receive as its channel sees it.
struct Message {
  int worldRank = 0;
  int function = 0;
  unsigned op = 0;
  int64_t bytes = 0;
};

struct ChannelEnds {
  int group = 0;
  int sender = 0, receiver = 0; // ranks in the group
  int senderWorld = 0, receiverWorld = 0;
  std::vector<Message> sends, receives;
};

int64_t tensorBytes(const plan::Function &f, int t) {
  const plan::Tensor &tensor = *f.tensors()->Get(unsigned(t));
  return numElements(tensorShape(tensor)) * int64_t(dtypeSize(tensor.dtype()));
}

std::string describe(const plan::Plan &p, const Message &m) {
  const plan::Function &f = *p.functions()->Get(unsigned(m.function));
  const plan::Op &op = *f.ops()->Get(m.op);
  std::string s = "world rank " + std::to_string(m.worldRank) + " (function '" +
                  f.name()->str() + "', op " + std::to_string(m.op) + ", " +
                  opcodeName(op.opcode());
  if (op.loc())
    s += ", at " + op.loc()->str();
  return s + ")";
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

/// Whether every paired message can be delivered when each communicator
/// (group instance and stream) runs its point-to-point ops in issue order
/// as NCCL does: an issue unit (a group of adjacent ops, P2PGroups.h, or a
/// lone op) is posted once the units before it on its communicator have
/// completed, and completes once the other end of each of its messages is
/// posted. Units are advanced to a fixed point; one left over is a
/// deadlock. Other orderings (stream order across communicators, events)
/// only delay units, so a unit stuck here is stuck on the device too.
Status
checkIssueOrder(const plan::Plan &p, const std::vector<int> &functionOfRank,
                const std::map<Communicator::Channel, ChannelEnds> &channels) {
  struct Unit {
    Message first; // its first op
    std::vector<int> messages;
  };
  std::vector<Unit> units;
  // (world rank, op) -> its unit; per (world rank, communicator) the units
  // in issue order.
  std::map<std::pair<int, unsigned>, int> unitOf;
  std::map<std::tuple<int, int64_t, int>, std::vector<int>> queues;
  forEachRunningRank(
      p, functionOfRank, [&](int r, int fi, const plan::Function &f) {
        std::vector<int> ends = p2pGroupEnds(f);
        for (unsigned oi = 0; oi < f.ops()->size();) {
          const plan::Op &op = *f.ops()->Get(oi);
          if (!isPointToPoint(op.opcode())) {
            ++oi;
            continue;
          }
          unsigned end = ends[oi] > 0 ? unsigned(ends[oi]) : oi + 1;
          Communicator::Channel c = p2pChannel(p, op, r);
          int u = int(units.size());
          units.push_back({{r, fi, oi, 0}, {}});
          queues[{r, c.key, c.stream}].push_back(u);
          for (unsigned m = oi; m < end; ++m)
            unitOf[{r, m}] = u;
          oi = end;
        }
      });
  // Messages: the two units each must see posted, and their two ops.
  struct Pair {
    int first, second; // units: the send's, the receive's
    Message send, receive;
  };
  std::vector<Pair> messages;
  for (const auto &[key, ends] : channels)
    for (size_t k = 0; k < ends.sends.size(); ++k) {
      int a = unitOf.at({ends.sends[k].worldRank, ends.sends[k].op});
      int b = unitOf.at({ends.receives[k].worldRank, ends.receives[k].op});
      int id = int(messages.size());
      messages.push_back({a, b, ends.sends[k], ends.receives[k]});
      units[size_t(a)].messages.push_back(id);
      if (b != a)
        units[size_t(b)].messages.push_back(id);
    }
  // posted[u]: u is its queue's current unit or has completed.
  std::vector<char> posted(units.size(), 0);
  std::vector<size_t> head;
  std::vector<const std::vector<int> *> order;
  for (const auto &[key, queue] : queues) {
    order.push_back(&queue);
    head.push_back(0);
    posted[size_t(queue.front())] = 1;
  }
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t q = 0; q < order.size(); ++q)
      while (head[q] < order[q]->size()) {
        const Unit &u = units[size_t((*order[q])[head[q]])];
        bool ready =
            std::all_of(u.messages.begin(), u.messages.end(), [&](int m) {
              return posted[size_t(messages[size_t(m)].first)] &&
                     posted[size_t(messages[size_t(m)].second)];
            });
        if (!ready)
          break;
        if (++head[q] < order[q]->size())
          posted[size_t((*order[q])[head[q]])] = 1;
        moved = true;
      }
  }
  for (size_t q = 0; q < order.size(); ++q) {
    if (head[q] == order[q]->size())
      continue;
    int stuck = (*order[q])[head[q]];
    for (int m : units[size_t(stuck)].messages) {
      const Pair &pair = messages[size_t(m)];
      bool sends = pair.first == stuck;
      int other = sends ? pair.second : pair.first;
      if (posted[size_t(other)])
        continue;
      // What the partner's queue is stuck on before it.
      int blocking = -1;
      for (size_t q2 = 0; q2 < order.size(); ++q2)
        if (std::find(order[q2]->begin(), order[q2]->end(), other) !=
            order[q2]->end())
          blocking = (*order[q2])[head[q2]];
      const plan::Op &op =
          *p.functions()
               ->Get(unsigned(units[size_t(stuck)].first.function))
               ->ops()
               ->Get(units[size_t(stuck)].first.op);
      std::string group = p.groups()->Get(unsigned(op.group()))->name()->str();
      return errorf(
          describe(p, sends ? pair.send : pair.receive),
          " never completes: its partner, ",
          describe(p, sends ? pair.receive : pair.send),
          ", is issued only after ",
          blocking >= 0 ? describe(p, units[size_t(blocking)].first)
                        : std::string("an op that never completes"),
          " on the same communicator (group '", group, "', stream ",
          op.stream(),
          "), which waits in turn. NCCL runs a communicator's sends and "
          "receives in issue order, and only ops adjacent in the plan go out "
          "together as one group: this exchange deadlocks");
    }
  }
  return Status::ok();
}

} // namespace

Communicator::Channel braid::rt::p2pChannel(const plan::Plan &p,
                                            const plan::Op &op, int worldRank) {
  GroupPosition g = groupPosition(p, op.group(), worldRank);
  bool sends = syncOpcode(op.opcode()) == plan::OpCode::Send;
  int peer = int(op.peer());
  return {g.instanceKey, int(op.stream()), sends ? g.rankInGroup : peer,
          sends ? peer : g.rankInGroup};
}

Status
braid::rt::checkPointToPointPairing(const plan::Plan &p,
                                    const std::vector<int> &functionOfRank) {
  if (!p.functions())
    return Status::ok();
  std::map<Communicator::Channel, ChannelEnds> channels;
  forEachRunningRank(
      p, functionOfRank, [&](int r, int fi, const plan::Function &f) {
        for (unsigned oi = 0; oi < f.ops()->size(); ++oi) {
          const plan::Op &op = *f.ops()->Get(oi);
          if (!isPointToPoint(op.opcode()))
            continue;
          bool sends = syncOpcode(op.opcode()) == plan::OpCode::Send;
          GroupPosition g = groupPosition(p, op.group(), r);
          Communicator::Channel key = p2pChannel(p, op, r);
          ChannelEnds &ends = channels[key];
          ends.group = op.group();
          ends.sender = key.src;
          ends.receiver = key.dst;
          ends.senderWorld = g.memberWorldRank(key.src);
          ends.receiverWorld = g.memberWorldRank(key.dst);
          int t = sends ? op.operands()->Get(0) : op.results()->Get(0);
          (sends ? ends.sends : ends.receives)
              .push_back({r, fi, oi, tensorBytes(f, t)});
        }
      });
  auto runs = [&](int worldRank) {
    return worldRank < int(functionOfRank.size()) &&
           functionOfRank[size_t(worldRank)] >= 0;
  };
  for (const auto &[key, ends] : channels) {
    std::string group = p.groups()->Get(unsigned(ends.group))->name()->str();
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
                    runs(ends.receiverWorld)
                        ? "never receives it: it receives " +
                              std::to_string(n) + " message(s) from " + from +
                              " there and this is send " + std::to_string(n + 1)
                        : std::string("runs no function"),
                    " (the send would block its stream forever)");
    if (ends.receives.size() > n)
      return errorf(describe(p, ends.receives[n]), " receives from ", from,
                    stream, ", which ",
                    runs(ends.senderWorld)
                        ? "never sends it: it sends " + std::to_string(n) +
                              " message(s) to " + to +
                              " there and this is receive " +
                              std::to_string(n + 1)
                        : std::string("runs no function"),
                    " (the receive would block its stream forever)");
  }
  return checkIssueOrder(p, functionOfRank, channels);
}

Status P2PPairingCache::check(const LoadedPlan &plan,
                              const std::vector<std::string> &functionOfRank) {
  if (passed_.count(functionOfRank))
    return Status::ok();
  std::vector<int> indices;
  for (const std::string &name : functionOfRank) {
    indices.push_back(plan.functionIndex(name));
    if (indices.back() < 0)
      return Status::ok();
  }
  BRAID_RETURN_IF_ERROR(checkPointToPointPairing(plan.root(), indices));
  passed_.insert(functionOfRank);
  return Status::ok();
}
