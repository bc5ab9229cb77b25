//===- P2PPairing.cpp - Every send has its receive ------------------------===//
#include "runtime/P2PPairing.h"

#include "runtime/P2PGroups.h"
#include "runtime/PlanLoader.h"

#include <map>
#include <string>

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
  int64_t n = 1;
  if (tensor.shape())
    for (int64_t d : *tensor.shape())
      n *= d;
  return n * int64_t(dtypeSize(tensor.dtype()));
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
  for (size_t r = 0; r < functionOfRank.size(); ++r) {
    int fi = functionOfRank[r];
    if (fi < 0)
      continue;
    const plan::Function &f = *p.functions()->Get(unsigned(fi));
    if (!f.ops())
      continue;
    for (unsigned oi = 0; oi < f.ops()->size(); ++oi) {
      const plan::Op &op = *f.ops()->Get(oi);
      if (!isPointToPoint(op.opcode()))
        continue;
      bool sends = syncOpcode(op.opcode()) == plan::OpCode::Send;
      GroupPosition g = groupPosition(p, op.group(), int(r));
      Communicator::Channel key = p2pChannel(p, op, int(r));
      ChannelEnds &ends = channels[key];
      ends.group = op.group();
      ends.sender = key.src;
      ends.receiver = key.dst;
      ends.senderWorld = g.memberWorldRank(key.src);
      ends.receiverWorld = g.memberWorldRank(key.dst);
      int t = sends ? op.operands()->Get(0) : op.results()->Get(0);
      (sends ? ends.sends : ends.receives)
          .push_back({int(r), fi, oi, tensorBytes(f, t)});
    }
  }
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
  return Status::ok();
}
