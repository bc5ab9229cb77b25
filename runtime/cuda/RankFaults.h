//===- RankFaults.h - Rank set-up and teardown that never hang -*- C++ -*-===//
//
// The order in which a GPU rank meets its peers and lets go of its NCCL
// communicators, with no CUDA or NCCL include, so it is unit-tested on
// machines without the toolkit (test/runtime/RankFaultsTest.cpp); the
// executor (Executor.cpp) supplies the CUDA and NCCL calls.
//
// Set-up: ncclCommInitRank blocks until every rank of the communicator
// calls it, so a rank that failed before it (out of memory on a shared GPU)
// would leave the others waiting forever. setUpRanks runs every fallible
// step first, then the ranks meet at a barrier that carries "someone
// failed" (across processes through Bootstrap::allGather), and only when
// nobody failed do they connect. Connecting ends with one collective per
// communicator (NCCL sets up its transports at the first one), so a rank
// whose connection fails makes its peers stop waiting, and every rank's
// communicators are then aborted rather than destroyed.
//
// Teardown: a captured collective holds a persistent reference to its
// communicator until its graph and graph exec are destroyed, and
// ncclCommAbort waits for those references to reach zero: graphs go first.
// After a failed step a rank's communicators are aborted, never destroyed:
// ncclCommDestroy would wait for collectives its peers will never join.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_RANKFAULTS_H
#define BRAID_RUNTIME_CUDA_RANKFAULTS_H

#include "runtime/Bootstrap.h"
#include "runtime/Status.h"
#include "runtime/Threads.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace braid::rt::cuda {

//===----------------------------------------------------------------------===//
// Teardown
//===----------------------------------------------------------------------===//

/// What ending a rank's use of NCCL acts on. CudaRank implements it with
/// CUDA and NCCL calls; tests record the calls.
class CommTeardown {
public:
  virtual ~CommTeardown() = default;
  /// Destroys every graph exec and graph (they hold the communicators'
  /// persistent references).
  virtual void destroyGraphs() = 0;
  /// ncclCommAbort on every communicator: ends stuck or failed work.
  virtual void abortComms() = 0;
  /// ncclCommDestroy on every communicator: waits for their work.
  virtual void destroyComms() = 0;
};

/// A rank's communicators from its first step to its teardown.
class CommLifetime {
public:
  explicit CommLifetime(CommTeardown &ops) : ops_(ops) {}

  /// Graphs first, then ncclCommAbort; once.
  void abort() {
    if (aborted_)
      return;
    aborted_ = true;
    ops_.destroyGraphs();
    ops_.abortComms();
  }
  /// The rank's teardown: graphs first; then communicators not aborted are
  /// destroyed (aborted ones are already gone).
  void end() {
    ops_.destroyGraphs();
    if (!aborted_)
      ops_.destroyComms();
  }
  bool aborted() const { return aborted_; }

  /// Runs one step, `body` (returning Status or Expected<T>). Whatever made
  /// it fail (its own error, an exception such as bad_alloc, another rank's
  /// cancel, a timeout, an NCCL asynchronous error), the communicators are
  /// aborted before the error is returned: peers may be left in
  /// collectives with this rank. After that the rank refuses every step.
  template <typename Body> auto step(Body &&body) -> decltype(body()) {
    using Result = decltype(body());
    if (aborted_)
      return errorf("unusable after an aborted step (its NCCL communicators "
                    "are gone); create a new runner");
    Result result = [&]() -> Result {
      try {
        return body();
      } catch (const std::exception &e) {
        return errorf("unexpected failure: ", e.what());
      }
    }();
    if (!result)
      abort();
    return result;
  }

private:
  CommTeardown &ops_;
  bool aborted_ = false;
};

//===----------------------------------------------------------------------===//
// Set-up
//===----------------------------------------------------------------------===//

/// Where the rank threads of one process meet after their fallible set-up:
/// each arrives with its outcome and leaves with the combined one (ok only
/// when none failed). The last to arrive first passes the combined outcome
/// through `across` (when given): the agreement with the other processes.
class SetupBarrier {
public:
  explicit SetupBarrier(
      size_t parties,
      std::function<Status(const Status &)> across = nullptr)
      : outcomes_(parties), across_(std::move(across)) {}

  /// Blocks until every party arrived; the lowest failed party's status,
  /// or `across`'s verdict.
  Status arrive(size_t party, Status mine) {
    std::unique_lock<std::mutex> lock(mu_);
    outcomes_[party] = std::move(mine);
    if (++arrived_ == outcomes_.size()) {
      for (const Status &s : outcomes_)
        if (!s) {
          combined_ = s;
          break;
        }
      // Under the lock: nobody else reads combined_ until done_.
      if (across_)
        combined_ = across_(combined_);
      done_ = true;
      cv_.notify_all();
    }
    cv_.wait(lock, [&] { return done_; });
    return combined_;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Status> outcomes_;
  std::function<Status(const Status &)> across_;
  size_t arrived_ = 0;
  bool done_ = false;
  Status combined_;
};

/// Every process's set-up outcome, exchanged with allGather (collective:
/// every process calls it, failed or not, so none is left waiting). Ok when
/// all succeeded; else this process's own error, or the lowest failed
/// process's message.
inline Status agreeOnSetup(Bootstrap &processes, const Status &mine) {
  auto all = processes.allGather(mine ? std::string("ok")
                                      : "error\n" + mine.message());
  if (!mine)
    return mine;
  if (!all)
    return all.status();
  for (size_t p = 0; p < all->size(); ++p) {
    const std::string &s = (*all)[p];
    if (s == "ok")
      continue;
    const std::string tag = "error\n";
    return errorf("process ", p, " failed before NCCL initialization: ",
                  s.compare(0, tag.size(), tag) == 0
                      ? s.substr(tag.size())
                      : "(a malformed set-up outcome)");
  }
  return Status::ok();
}

/// Sets up the `n` ranks this process holds, each on its own thread:
/// `setUp(i)` (everything that can fail alone: memory, weights, streams,
/// cuBLASLt), then the barrier (with `processes`, the other processes
/// too), then `connect(i, stop)` (NCCL initialization and a first
/// collective) only when no rank of any process failed. When a connect
/// fails, `stop` is set (a rank waiting for its first collective returns
/// instead of waiting for the timeout), then `releasePeers` runs (waits
/// `stop` does not reach: the test communicator's), then `abandon(i)` runs
/// on that rank's own thread, for every rank whose connect failed (the
/// ones that stopped for `stop` too): NCCL peers blocked on the host
/// connecting to it then fail as well. Once every thread is done,
/// `abandon(i)` runs for every other rank: a peer of the failed rank may be
/// left in work with it, and ncclCommDestroy at teardown would wait for
/// it, so the communicators must be aborted instead. Each rank is
/// abandoned once. Returns ok, or the root cause: the lowest held rank's
/// set-up error, else another process's, else the lowest connect error
/// that is not a `stop`.
using ConnectRank =
    std::function<Status(size_t rank, const std::atomic<bool> &stop)>;

inline Status setUpRanks(size_t n, const std::function<Status(size_t)> &setUp,
                         const ConnectRank &connect,
                         const std::function<void(size_t)> &abandon,
                         const std::function<void()> &releasePeers,
                         Bootstrap *processes, const char *what,
                         const ThreadStarter &start = startThread) {
  std::vector<Status> own(n), joined(n);
  std::function<Status(const Status &)> across;
  if (processes)
    across = [processes](const Status &local) {
      return agreeOnSetup(*processes, local);
    };
  SetupBarrier barrier(n, across);
  std::atomic<bool> stop{false};
  // Ended after another rank's failure set `stop` (char: each thread writes
  // its own element).
  std::vector<char> stopped(n, 0);
  // Communicators already aborted by the rank's own thread.
  std::vector<char> abandoned(n, 0);
  auto guarded = [](const std::function<Status(size_t)> &f, size_t i) {
    // An exception would end the thread before the barrier (or terminate).
    try {
      return f(i);
    } catch (const std::exception &e) {
      return errorf("unexpected failure: ", e.what());
    }
  };
  Status threads = runOnThreads(
      n,
      [&](size_t i) {
        own[i] = guarded(setUp, i);
        Status all = barrier.arrive(i, own[i]);
        if (!all) {
          joined[i] = all;
          return;
        }
        try {
          joined[i] = connect(i, stop);
        } catch (const std::exception &e) {
          joined[i] = errorf("unexpected failure: ", e.what());
        }
        if (!joined[i]) {
          stopped[i] = stop.exchange(true);
          // After `stop`: a peer released here is marked as stopped.
          if (!stopped[i] && releasePeers)
            releasePeers();
          // Its communicators go at once: the test communicator's peers
          // waiting for it on the host are released. (An NCCL peer blocked
          // inside its host-side connection to this rank is not: it
          // watches only its own communicator's abort flag;
          // runtime/cuda/README.md.)
          if (abandon) {
            abandon(i);
            abandoned[i] = 1;
          }
        }
      },
      what, start);
  if (!threads) {
    // No rank ran: still answer the other processes' agreement.
    if (processes)
      (void)agreeOnSetup(*processes, threads);
    return threads;
  }
  for (const Status &s : own)
    if (!s)
      return s;
  if (stop.load()) {
    if (abandon)
      for (size_t i = 0; i < n; ++i)
        if (!abandoned[i])
          abandon(i);
    for (size_t i = 0; i < n; ++i)
      if (!joined[i] && !stopped[i])
        return joined[i];
  }
  // Otherwise a failure here is another process's, met at the barrier.
  for (const Status &s : joined)
    if (!s)
      return s;
  return Status::ok();
}

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_RANKFAULTS_H
