//===- HostRendezvous.h - Threads meeting at numbered rounds ----*- C++ -*-===//
//
// The one-GPU test communicator (LocalComm.h) runs every rank as a thread of
// one process. Its ranks must never wait for each other on the device: a
// kernel spinning until a peer arrives blocks the hardware queue it shares
// with that peer's streams (the GPU has at most 32, CUDA maps streams onto
// them), and the peer's work queued behind it never runs. So ranks meet on
// the host instead, when they enqueue: each posts a value (an event it
// recorded, a pointer) and gets every peer's, and the device only ever
// waits for events already recorded, which cannot deadlock.
//
// No CUDA include: unit-tested without a GPU (test/runtime/
// HostRendezvousTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_HOSTRENDEZVOUS_H
#define BRAID_RUNTIME_CUDA_HOSTRENDEZVOUS_H

#include "runtime/Status.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace braid::rt::cuda {

/// What HostRendezvous and HostMailbox share: one lock, one condition, the
/// timeout and the abort flag.
class HostWaits {
public:
  /// Ends every wait, now and later.
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

protected:
  HostWaits(int parties, double timeoutSeconds, std::string name)
      : parties_(parties), timeoutSeconds_(timeoutSeconds),
        name_(std::move(name)) {}
  std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::duration<double>(timeoutSeconds_));
  }

  int parties_;
  double timeoutSeconds_;
  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool aborted_ = false;
};

/// `parties` threads, each calling arrive() once per round: a round ends
/// when every party has arrived, and each gets every party's posted value.
/// Waits end with an error at the timeout (naming the party that did not
/// come) or when any thread calls abort() (then every later call fails
/// too). Thread-safe.
template <typename T> class HostRendezvous : public HostWaits {
public:
  HostRendezvous(int parties, double timeoutSeconds, std::string name)
      : HostWaits(parties, timeoutSeconds, std::move(name)),
        entered_(size_t(parties), 0), posted_{std::vector<T>(size_t(parties)),
                                              std::vector<T>(size_t(parties))} {
  }

  /// Party `party`'s next round: posts `value`, waits for the others.
  Expected<std::vector<T>> arrive(int party, const T &value) {
    if (party < 0 || party >= parties_)
      return errorf(name_, ": rank ", party, " of ", parties_);
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t round = ++entered_[size_t(party)];
    // A party is at most one round ahead of the slowest (it cannot leave
    // round k before everyone entered it), so two slots suffice.
    std::vector<T> &slot = posted_[round % 2];
    slot[size_t(party)] = value;
    cv_.notify_all();
    auto all = [&] {
      for (uint64_t e : entered_)
        if (e < round)
          return false;
      return true;
    };
    if (!cv_.wait_until(lock, deadline(), [&] { return aborted_ || all(); })) {
      int late = 0;
      while (late < parties_ && entered_[size_t(late)] >= round)
        ++late;
      return errorf(name_, ": rank ", party, " waited for rank ", late,
                    " (round ", round, ") longer than ", timeoutSeconds_,
                    " s: a collective is stuck (do all ranks run the same "
                    "plan?)");
    }
    if (aborted_)
      return errorf("aborted: another rank failed (", name_, ", rank ", party,
                    ", round ", round, ")");
    return slot;
  }

private:
  std::vector<uint64_t> entered_; // rounds each party entered
  std::vector<T> posted_[2];      // by round parity, by party
};

/// Point-to-point messages between the parties: a sender posts to a
/// receiver, in order, and waits until the receiver has answered (NCCL's
/// rendezvous: a send completes when its receive does). Same timeout and
/// abort rules as HostRendezvous.
template <typename T> class HostMailbox : public HostWaits {
public:
  HostMailbox(int parties, double timeoutSeconds, std::string name)
      : HostWaits(parties, timeoutSeconds, std::move(name)),
        toReceiver_(size_t(parties) * size_t(parties)),
        toSender_(size_t(parties) * size_t(parties)) {}

  /// Posts `message` from `from` to `to` without waiting.
  Status post(int from, int to, const T &message) {
    BRAID_RETURN_IF_ERROR(check(from, to));
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_)
      return errorf("aborted: another rank failed (", name_, ", rank ", from,
                    ")");
    toReceiver_[index(from, to)].push_back(message);
    cv_.notify_all();
    return Status::ok();
  }
  /// Waits for `to`'s answer to the oldest unanswered message from `from`.
  Expected<T> awaitAnswer(int from, int to) {
    BRAID_RETURN_IF_ERROR(check(from, to));
    std::unique_lock<std::mutex> lock(mu_);
    std::deque<T> &queue = toSender_[index(from, to)];
    if (!cv_.wait_until(lock, deadline(),
                        [&] { return aborted_ || !queue.empty(); }))
      return errorf(name_, ": rank ", from, " waited for the answer of rank ",
                    to, " longer than ", timeoutSeconds_,
                    " s: a send or receive is stuck (does every send have "
                    "its receive?)");
    if (aborted_)
      return errorf("aborted: another rank failed (", name_, ", rank ", from,
                    ")");
    T value = queue.front();
    queue.pop_front();
    return value;
  }
  /// post, then awaitAnswer.
  Expected<T> send(int from, int to, const T &message) {
    BRAID_RETURN_IF_ERROR(post(from, to, message));
    return awaitAnswer(from, to);
  }
  /// Waits for the next message from `from` to `to`; answers it with
  /// `answer()`'s value, computed under no lock. (receiveAny from one.)
  template <typename Answer>
  Expected<T> receive(int to, int from, Answer &&answer) {
    std::optional<T> message;
    auto sender = receiveAny(to, {from}, [&](int, const T &m) {
      message = m;
      return answer(m);
    });
    if (!sender)
      return sender.status();
    return *message;
  }

  /// The next message to `to` from whichever of `from` has one first
  /// (ties to the earlier in `from`), answered with `answer(sender,
  /// message)`'s value computed under no lock; returns the sender. A
  /// group's receives (ncclGroupStart/End) wait this way: all are posted
  /// together, so one whose sender waits for another receive of the group
  /// must not hold the others back.
  template <typename Answer>
  Expected<int> receiveAny(int to, const std::vector<int> &from,
                           Answer &&answer) {
    for (int f : from)
      BRAID_RETURN_IF_ERROR(check(f, to));
    if (from.empty())
      return errorf(name_, ": rank ", to, " receives from no rank");
    std::unique_lock<std::mutex> lock(mu_);
    int sender = -1;
    auto ready = [&] {
      sender = -1;
      for (int f : from)
        if (!toReceiver_[index(f, to)].empty()) {
          sender = f;
          break;
        }
      return aborted_ || sender >= 0;
    };
    if (!cv_.wait_until(lock, deadline(), ready)) {
      std::string ranks;
      for (int f : from)
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(f);
      return errorf(name_, ": rank ", to, " waited for a message from ",
                    from.size() == 1 ? "rank " : "any of ranks ", ranks,
                    " longer than ", timeoutSeconds_,
                    " s: a send or receive is stuck (does every send have "
                    "its receive?)");
    }
    if (aborted_)
      return errorf("aborted: another rank failed (", name_, ", rank ", to,
                    ")");
    std::deque<T> &queue = toReceiver_[index(sender, to)];
    T message = queue.front();
    queue.pop_front();
    lock.unlock();
    auto reply = answer(sender, message);
    if (!reply)
      return reply.status();
    lock.lock();
    toSender_[index(sender, to)].push_back(*reply);
    cv_.notify_all();
    return sender;
  }

private:
  Status check(int from, int to) const {
    if (from < 0 || from >= parties_ || to < 0 || to >= parties_ || from == to)
      return errorf(name_, ": no channel from rank ", from, " to rank ", to,
                    " of ", parties_);
    return Status::ok();
  }
  size_t index(int from, int to) const {
    return size_t(from) * size_t(parties_) + size_t(to);
  }

  std::vector<std::deque<T>> toReceiver_, toSender_; // by (from, to)
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_HOSTRENDEZVOUS_H
