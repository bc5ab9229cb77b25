//===- Communicator.h - Thread rendezvous for CPU collectives ---*- C++ -*-===//
//
// Ranks are std::threads of one process. Every collective is built on one
// primitive, exchange(): each member of a group instance deposits its bytes
// and receives every member's bytes in rank order, so reductions computed
// from it run in the same order on every rank and agree bit for bit.
// Point-to-point sends are buffered (never block); receives block.
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
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace braid::rt {

using Bytes = std::vector<uint8_t>;

class Communicator {
public:
  explicit Communicator(int worldSize, std::chrono::milliseconds timeout =
                                           std::chrono::seconds(60));
  int worldSize() const { return worldSize_; }

  /// Every one of the `size` members of instance `key` calls this with its
  /// rank in the instance; all get all contributions in rank order.
  Expected<std::vector<Bytes>> exchange(int64_t key, int size, int rank,
                                        Bytes mine);
  /// Buffered send from member `src` to member `dst` of instance `key`.
  Status send(int64_t key, int src, int dst, Bytes data);
  Expected<Bytes> recv(int64_t key, int src, int dst);

  /// Wakes every waiter with an error; later calls fail at once.
  void abort();

private:
  struct Rendezvous {
    int arrived = 0, departed = 0;
    bool ready = false;
    std::vector<Bytes> slots;
  };
  int worldSize_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;
  std::map<int64_t, Rendezvous> rendezvous_;
  std::map<std::tuple<int64_t, int, int>, std::deque<Bytes>> mailboxes_;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_COMMUNICATOR_H
