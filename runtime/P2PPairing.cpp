//===- P2PPairing.cpp - Every send has its receive ------------------------===//
#include "runtime/P2PPairing.h"

#include "runtime/P2PGroups.h"
#include "runtime/PlanLoader.h"

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

/// Group instance, stream, sender and receiver (ranks in the group).
using Channel = std::tuple<int64_t, int, int, int>;

struct ChannelEnds {
  int group = 0;
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
    s += " at " + op.loc()->str();
  return s + ")";
}

} // namespace

Status
braid::rt::checkPointToPointPairing(const plan::Plan &p,
                                    const std::vector<int> &functionOfRank) {
  if (!p.functions())
    return Status::ok();
  std::map<Channel, ChannelEnds> channels;
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
      int peer = int(op.peer());
      Channel key{g.instanceKey, int(op.stream()), sends ? g.rankInGroup : peer,
                  sends ? peer : g.rankInGroup};
      ChannelEnds &ends = channels[key];
      ends.group = op.group();
      ends.senderWorld = g.memberWorldRank(std::get<2>(key));
      ends.receiverWorld = g.memberWorldRank(std::get<3>(key));
      int t = sends ? op.operands()->Get(0) : op.results()->Get(0);
      (sends ? ends.sends : ends.receives)
          .push_back({int(r), fi, oi, tensorBytes(f, t)});
    }
  }
  for (const auto &[key, ends] : channels) {
    std::string channel = "of group '" +
                          p.groups()->Get(unsigned(ends.group))->name()->str() +
                          "' on stream " + std::to_string(std::get<1>(key));
    size_t n = std::min(ends.sends.size(), ends.receives.size());
    for (size_t k = 0; k < n; ++k)
      if (ends.sends[k].bytes != ends.receives[k].bytes)
        return errorf("point-to-point message ", k + 1, " from world rank ",
                      ends.senderWorld, " to world rank ", ends.receiverWorld,
                      " ", channel, ": ", describe(p, ends.sends[k]), " sends ",
                      ends.sends[k].bytes, " bytes, ",
                      describe(p, ends.receives[k]), " receives ",
                      ends.receives[k].bytes);
    if (ends.sends.size() > n)
      return errorf(describe(p, ends.sends[n]), " sends to world rank ",
                    ends.receiverWorld, " ", channel,
                    ", which never receives it: that rank receives ", n,
                    " message(s) from world rank ", ends.senderWorld,
                    " there and this is send ", n + 1,
                    " (the send would block its stream forever)");
    if (ends.receives.size() > n) {
      bool runs = ends.senderWorld < int(functionOfRank.size()) &&
                  functionOfRank[size_t(ends.senderWorld)] >= 0;
      return errorf(
          describe(p, ends.receives[n]), " receives from world rank ",
          ends.senderWorld, " ", channel, ", which ",
          runs ? "never sends it: that rank sends " + std::to_string(n) +
                     " message(s) to world rank " +
                     std::to_string(ends.receiverWorld) +
                     " there and this is receive " + std::to_string(n + 1)
               : std::string("runs no function"),
          " (the receive would block its stream forever)");
    }
  }
  return Status::ok();
}
