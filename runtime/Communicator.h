//===- Communicator.h - Thread rendezvous for CPU collectives ---*- C++ -*-===//
//
// Ranks are std::threads of one process. Every collective is built on one
// primitive, exchange(): each member of a group instance deposits its bytes
// and receives every member's bytes in rank order, so reductions computed
// from it run in the same order on every rank and agree bit for bit.
// Point-to-point follows NCCL: a send completes only when its receive has
// taken the data (a lone send blocks until then, as a lone ncclSend blocks
// its stream), and sends and receives match in order on a channel: (group
// instance, stream, source, destination), since each (group, stream) has
// its own NCCL communicator. A send can be posted without waiting (a group
// of adjacent sends and receives, or a send_start) and completed later.
// Every wait has a timeout and abort() releases all waiters, so a rank that
// fails or a mismatched schedule gives an error instead of a hang.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_COMMUNICATOR_H
#define BRAID_RUNTIME_COMMUNICATOR_H

#include "runtime/Status.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace braid::rt {

using Bytes = std::vector<uint8_t>;

class Communicator {
public:
  explicit Communicator(int worldSize, std::chrono::milliseconds timeout =
                                           std::chrono::seconds(60));
  int worldSize() const { return worldSize_; }

  /// One member's part in a round of exchange().
  struct Contribution {
    int worldRank = 0;
    /// What the members must agree on (collectiveSignature()): a round
    /// whose members disagree is an error on every one of them, not a
    /// result computed from mismatched collectives.
    std::string signature;
    Bytes data;
  };
  /// Every one of the `size` members of instance `key` calls this on
  /// stream `stream` with its rank in the instance; all get all
  /// contributions' data in rank order. Each (instance, stream) is a
  /// communicator of its own, as NCCL's are: rounds on two streams of one
  /// group never meet.
  Expected<std::vector<Bytes>> exchange(int64_t key, int stream, int size,
                                        int rank, Contribution mine);
  /// Point-to-point channels: member `src` to member `dst` of instance
  /// `key`, on stream `stream`.
  struct Channel {
    int64_t key;
    int stream, src, dst;
    bool operator<(const Channel &o) const {
      return std::tie(key, stream, src, dst) <
             std::tie(o.key, o.stream, o.src, o.dst);
    }
  };
  /// Posts a message without waiting; the ticket names it to awaitTaken.
  Expected<uint64_t> postSend(const Channel &c, Bytes data);
  /// Waits until the receiver has taken message `ticket`.
  Status awaitTaken(const Channel &c, uint64_t ticket);
  /// A lone send: posted, then waited for.
  Status send(const Channel &c, Bytes data);
  /// Posts a receive without waiting: it takes the channel's next message
  /// not yet claimed, whenever that is sent (the sender's wait then ends).
  Expected<uint64_t> postRecv(const Channel &c);
  /// Waits for the message of receive `ticket` and returns it.
  Expected<Bytes> awaitReceived(const Channel &c, uint64_t ticket);
  /// A lone receive: posted, then waited for.
  Expected<Bytes> recv(const Channel &c);

  /// Waits like a rank that never joins its collective, until abort() (or
  /// twice the timeout): a test fault, whose peers' waits end at the
  /// timeout.
  Status stall();

  /// Wakes every waiter with an error; later calls fail at once.
  void abort();

private:
  struct Rendezvous {
    int arrived = 0, departed = 0;
    bool ready = false;
    std::vector<Contribution> slots;
  };
  int worldSize_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;
  std::map<std::pair<int64_t, int>, Rendezvous> rendezvous_;
  /// Message k is the k-th send; the k-th receive takes it.
  struct Mailbox {
    std::map<uint64_t, Bytes> messages; // sent, not yet received
    uint64_t sends = 0, recvs = 0;      // posted so far
  };
  std::map<Channel, Mailbox> mailboxes_;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_COMMUNICATOR_H
