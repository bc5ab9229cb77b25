//===- RankFaultsTest.cpp - Rank set-up and teardown order, without a GPU -===//
//
// RankFaults.h with fakes in place of CUDA and NCCL: a communicator that
// records what is done to it (and whether a graph referencing it was alive
// at the time), and a rank set-up whose "ncclCommInitRank" blocks, like the
// real one, until every rank of the communicator calls it (here with a
// deadline, so a wrong order fails the test instead of hanging it).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/RankFaults.h"
#include "test/runtime/FakeProcesses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace braid::rt;
using namespace braid::rt::cuda;
using braid::rt::test::FakeProcesses;

namespace {

//===----------------------------------------------------------------------===//
// Teardown
//===----------------------------------------------------------------------===//

/// One rank's graphs and communicators, as NCCL sees them: every live graph
/// holds a persistent reference, and ncclCommAbort with a reference left
/// would wait forever (recorded as `hungAbort`).
class FakeRank : public CommTeardown {
public:
  void destroyGraphs() override {
    calls.push_back("destroyGraphs");
    graphs = 0;
  }
  void abortComms() override {
    calls.push_back("abortComms");
    if (graphs > 0)
      hungAbort = true;
    comms = Comms::Aborted;
  }
  void destroyComms() override {
    calls.push_back("destroyComms");
    // ncclCommDestroy after a failed step waits for collectives the peers
    // will never join.
    if (peerGone || comms == Comms::Aborted)
      hungDestroy = true;
    comms = Comms::Destroyed;
  }

  int graphs = 0; // captured graphs referencing the communicators
  bool peerGone = false;
  enum class Comms { Live, Aborted, Destroyed } comms = Comms::Live;
  bool hungAbort = false, hungDestroy = false;
  std::vector<std::string> calls;
};

TEST(RankFaults, AbortDestroysGraphsBeforeAbortingComms) {
  FakeRank rank;
  rank.graphs = 2; // graph mode: prefill and decode captured
  CommLifetime life(rank);
  life.abort();
  EXPECT_FALSE(rank.hungAbort);
  EXPECT_EQ(rank.calls,
            (std::vector<std::string>{"destroyGraphs", "abortComms"}));
  EXPECT_TRUE(life.aborted());
}

TEST(RankFaults, AbortIsOnceAndTeardownDoesNotDestroyAbortedComms) {
  FakeRank rank;
  rank.graphs = 1;
  rank.peerGone = true;
  {
    CommLifetime life(rank);
    life.abort();
    life.abort();
    life.end();
  }
  EXPECT_FALSE(rank.hungAbort);
  EXPECT_FALSE(rank.hungDestroy);
  EXPECT_EQ(rank.calls, (std::vector<std::string>{"destroyGraphs",
                                                  "abortComms",
                                                  "destroyGraphs"}));
}

TEST(RankFaults, HealthyTeardownDestroysGraphsThenComms) {
  FakeRank rank;
  rank.graphs = 1;
  CommLifetime life(rank);
  life.end();
  EXPECT_FALSE(rank.hungDestroy);
  EXPECT_EQ(rank.calls,
            (std::vector<std::string>{"destroyGraphs", "destroyComms"}));
  EXPECT_EQ(rank.comms, FakeRank::Comms::Destroyed);
}

TEST(RankFaults, AStepThatFailsByItselfAbortsItsOwnComms) {
  // The rank's own error (an error flag, a failed copy), not another
  // rank's cancel: its peers have aborted, so it must abort too, or its
  // teardown waits in ncclCommDestroy.
  FakeRank rank;
  rank.graphs = 1;
  rank.peerGone = true;
  {
    CommLifetime life(rank);
    Expected<int> got =
        life.step([]() -> Expected<int> { return errorf("device error"); });
    ASSERT_FALSE(got);
    EXPECT_EQ(got.status().message(), "device error");
    EXPECT_EQ(rank.comms, FakeRank::Comms::Aborted);
    life.end();
  }
  EXPECT_FALSE(rank.hungAbort);
  EXPECT_FALSE(rank.hungDestroy);
}

TEST(RankFaults, AStepThatThrowsAbortsItsOwnCommsAndReturnsTheError) {
  // An exception (bad_alloc building an output) used to leave the step
  // without aborting: peers waited out the timeout, and teardown then
  // waited in ncclCommDestroy.
  FakeRank rank;
  rank.graphs = 1;
  rank.peerGone = true;
  {
    CommLifetime life(rank);
    Expected<int> got = life.step([]() -> Expected<int> {
      throw std::runtime_error("out of host memory");
    });
    ASSERT_FALSE(got);
    EXPECT_EQ(got.status().message(), "unexpected failure: out of host memory");
    EXPECT_EQ(rank.comms, FakeRank::Comms::Aborted);
    EXPECT_EQ(rank.calls,
              (std::vector<std::string>{"destroyGraphs", "abortComms"}));
    life.end();
  }
  EXPECT_FALSE(rank.hungAbort);
  EXPECT_FALSE(rank.hungDestroy);
}

TEST(RankFaults, AStepThatSucceedsAbortsNothing) {
  FakeRank rank;
  rank.graphs = 1;
  CommLifetime life(rank);
  Status st = life.step([] { return Status::ok(); });
  EXPECT_TRUE(st);
  EXPECT_TRUE(rank.calls.empty());
  EXPECT_FALSE(life.aborted());
}

TEST(RankFaults, NoStepRunsAfterAnAbort) {
  FakeRank rank;
  CommLifetime life(rank);
  life.abort(); // another rank's step failed (CudaRunner aborts them all)
  bool ran = false;
  Status st = life.step([&] {
    ran = true;
    return Status::ok();
  });
  ASSERT_FALSE(st);
  EXPECT_FALSE(ran);
  EXPECT_NE(st.message().find("create a new runner"), std::string::npos)
      << st.message();
}

//===----------------------------------------------------------------------===//
// Set-up
//===----------------------------------------------------------------------===//

/// ncclCommInitRank: returns once all `parties` called it; with one missing
/// it would block forever, here until the deadline, and then fails.
class FakeInit {
public:
  explicit FakeInit(size_t parties) : parties_(parties) {}
  Status init() {
    calls++;
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_;
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(5),
                      [&] { return arrived_ == parties_; }))
      return errorf("ncclCommInitRank would block forever: ", arrived_,
                    " of ", parties_, " ranks called it");
    return Status::ok();
  }
  std::atomic<int> calls{0};

private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t parties_;
  size_t arrived_ = 0;
};

TEST(RankFaults, EveryRankConnectsWhenNoneFails) {
  FakeInit nccl(4);
  std::atomic<int> setUps{0};
  Status st = setUpRanks(
      4,
      [&](size_t) {
        setUps++;
        return Status::ok();
      },
      [&](size_t, const std::atomic<bool> &) { return nccl.init(); }, nullptr,
      nullptr, nullptr, "rank threads");
  EXPECT_TRUE(st) << st.message();
  EXPECT_EQ(setUps, 4);
  EXPECT_EQ(nccl.calls, 4);
}

TEST(RankFaults, OneRankFailingSetUpStopsEveryRankBeforeInit) {
  FakeInit nccl(4);
  auto begin = std::chrono::steady_clock::now();
  Status st = setUpRanks(
      4,
      [&](size_t i) {
        return i == 2 ? errorf("rank 2 (GPU 2): cudaMalloc: out of memory")
                      : Status::ok();
      },
      [&](size_t, const std::atomic<bool> &) { return nccl.init(); }, nullptr,
      nullptr, nullptr, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "rank 2 (GPU 2): cudaMalloc: out of memory");
  EXPECT_EQ(nccl.calls, 0) << "a rank entered NCCL initialization";
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(4));
}

TEST(RankFaults, TheLowestFailedRankIsTheRootCause) {
  FakeInit nccl(3);
  Status st = setUpRanks(
      3,
      [&](size_t i) {
        return i == 0 ? Status::ok() : errorf("rank ", i, " failed");
      },
      [&](size_t, const std::atomic<bool> &) { return nccl.init(); }, nullptr,
      nullptr, nullptr, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "rank 1 failed");
  EXPECT_EQ(nccl.calls, 0);
}

TEST(RankFaults, AThrowingSetUpStillReachesTheBarrier) {
  FakeInit nccl(2);
  Status st = setUpRanks(
      2,
      [&](size_t i) -> Status {
        if (i == 1)
          throw std::bad_alloc();
        return Status::ok();
      },
      [&](size_t, const std::atomic<bool> &) { return nccl.init(); }, nullptr,
      nullptr, nullptr, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("unexpected failure"), std::string::npos)
      << st.message();
  EXPECT_EQ(nccl.calls, 0);
}

/// A rank's first collective after NCCL initialization: it completes when
/// every rank reaches it; a rank whose peer failed returns once `stop` is
/// set, and only at the deadline without it.
Status firstCollective(const std::atomic<bool> &stop) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (stop.load())
      return errorf("aborted: another rank failed");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return errorf("step did not finish within 5 s");
}

TEST(RankFaults, AFailedConnectionStopsItsPeersAndAbortsEveryRank) {
  std::mutex mu;
  std::vector<size_t> abandoned;
  auto begin = std::chrono::steady_clock::now();
  Status st = setUpRanks(
      3, [](size_t) { return Status::ok(); },
      [&](size_t i, const std::atomic<bool> &stop) -> Status {
        if (i != 1)
          return firstCollective(stop);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return errorf("rank 1 (GPU 1): ncclAllReduce: unhandled system error");
      },
      [&](size_t i) {
        std::lock_guard<std::mutex> lock(mu);
        abandoned.push_back(i);
      },
      nullptr, nullptr, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            "rank 1 (GPU 1): ncclAllReduce: unhandled system error")
      << "the root cause, not a peer's abort";
  std::sort(abandoned.begin(), abandoned.end());
  EXPECT_EQ(abandoned, (std::vector<size_t>{0, 1, 2}))
      << "every rank's communicators are aborted once, the healthy ones' too";
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(4))
      << "the peers waited for the timeout";
}

TEST(RankFaults, AFailedRankAbortsItsOwnCommunicatorsAtOnce) {
  // NCCL connects a communicator's peers on the host inside its first
  // collective: a peer blocked there does not see `stop`, and returns only
  // when the failed rank's communicators go away (here: its abandon).
  std::atomic<bool> failedAbandoned{false};
  std::mutex mu;
  std::vector<size_t> abandoned;
  auto begin = std::chrono::steady_clock::now();
  Status st = setUpRanks(
      3, [](size_t) { return Status::ok(); },
      [&](size_t i, const std::atomic<bool> &) -> Status {
        if (i == 1)
          return errorf("rank 1: ncclAllReduce: unhandled system error");
        auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!failedAbandoned.load()) {
          if (std::chrono::steady_clock::now() > deadline)
            return errorf("rank ", i, ": still connecting after 5 s");
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return errorf("rank ", i, ": ncclAllReduce: remote process exited");
      },
      [&](size_t i) {
        std::lock_guard<std::mutex> lock(mu);
        abandoned.push_back(i);
        if (i == 1)
          failedAbandoned = true;
      },
      nullptr, nullptr, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "rank 1: ncclAllReduce: unhandled system error");
  ASSERT_FALSE(abandoned.empty());
  EXPECT_EQ(abandoned.front(), 1u) << "the failed rank is aborted first";
  std::sort(abandoned.begin(), abandoned.end());
  EXPECT_EQ(abandoned, (std::vector<size_t>{0, 1, 2}));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(4))
      << "the peers waited for their deadline";
}

TEST(RankFaults, PeersReleasedByTheFailedRankAreNotTheRootCause) {
  // The test communicator's waits do not see `stop`: releasePeers ends
  // them, only once `stop` is set, so a released peer's error never
  // passes for the root cause.
  std::atomic<bool> released{false};
  std::atomic<int> releases{0};
  for (int round = 0; round < 20; ++round) {
    released = false;
    Status st = setUpRanks(
        3, [](size_t) { return Status::ok(); },
        [&](size_t i, const std::atomic<bool> &) -> Status {
          if (i == 2)
            return errorf("rank 2: cannot connect");
          while (!released.load())
            std::this_thread::yield();
          return errorf("rank ", i, ": aborted: another rank failed");
        },
        nullptr,
        [&] {
          releases++;
          released = true;
          // Gives the released peers time to finish first: had `stop` not
          // been set before this hook, they would be taken for the cause.
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        },
        nullptr, "rank threads");
    ASSERT_FALSE(st);
    EXPECT_EQ(st.message(), "rank 2: cannot connect");
  }
  EXPECT_EQ(releases, 20) << "once per failed set-up";
}

TEST(RankFaults, AThrowingConnectionStopsItsPeers) {
  std::atomic<int> abandoned{0};
  Status st = setUpRanks(
      2, [](size_t) { return Status::ok(); },
      [&](size_t i, const std::atomic<bool> &stop) -> Status {
        if (i == 0)
          throw std::runtime_error("boom");
        return firstCollective(stop);
      },
      [&](size_t) { abandoned++; }, nullptr, nullptr, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "unexpected failure: boom");
  EXPECT_EQ(abandoned, 2);
}

TEST(RankFaults, ConnectedOrNeverConnectedRanksAreNotAbandoned) {
  std::atomic<int> abandoned{0};
  auto count = [&](size_t) { abandoned++; };
  Status ok = setUpRanks(
      2, [](size_t) { return Status::ok(); },
      [](size_t, const std::atomic<bool> &) { return Status::ok(); }, count,
      nullptr, nullptr, "rank threads");
  EXPECT_TRUE(ok) << ok.message();
  Status failed = setUpRanks(
      2, [](size_t i) { return i ? errorf("out of memory") : Status::ok(); },
      [](size_t, const std::atomic<bool> &) { return Status::ok(); }, count,
      nullptr, nullptr, "rank threads");
  EXPECT_FALSE(failed);
  EXPECT_EQ(abandoned, 0)
      << "no communicator exists after a set-up failure; a healthy one is "
         "destroyed at teardown";
}

std::thread noThreads(std::function<void()>) {
  throw std::system_error(
      std::make_error_code(std::errc::resource_unavailable_try_again));
}

TEST(RankFaults, NoThreadsMeansNoSetUp) {
  bool ran = false;
  Status st = setUpRanks(
      2,
      [&](size_t) {
        ran = true;
        return Status::ok();
      },
      [&](size_t, const std::atomic<bool> &) { return Status::ok(); }, nullptr,
      nullptr, nullptr, "rank threads", noThreads);
  ASSERT_FALSE(st);
  EXPECT_FALSE(ran);
}

TEST(RankFaults, AnotherProcessFailingStopsThisOneBeforeInit) {
  FakeProcesses processes(0, {"", "error\nrank 1 (GPU 0): out of memory"});
  FakeInit nccl(1);
  Status st = setUpRanks(
      1, [](size_t) { return Status::ok(); },
      [&](size_t, const std::atomic<bool> &) { return nccl.init(); }, nullptr,
      nullptr, &processes, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "process 1 failed before NCCL initialization: "
                          "rank 1 (GPU 0): out of memory");
  EXPECT_EQ(nccl.calls, 0);
  EXPECT_EQ(processes.sent, (std::vector<std::string>{"ok"}));
}

TEST(RankFaults, AFailedProcessStillTellsTheOthers) {
  // Without its answer to the exchange the others would wait in it.
  FakeProcesses processes(1, {"ok", ""});
  FakeInit nccl(1);
  Status st = setUpRanks(
      1, [](size_t) { return errorf("rank 1 (GPU 0): out of memory"); },
      [&](size_t, const std::atomic<bool> &) { return nccl.init(); }, nullptr,
      nullptr, &processes, "rank threads");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "rank 1 (GPU 0): out of memory");
  EXPECT_EQ(nccl.calls, 0);
  EXPECT_EQ(processes.sent,
            (std::vector<std::string>{"error\nrank 1 (GPU 0): out of memory"}));
}

TEST(RankFaults, NoThreadsStillTellsTheOtherProcesses) {
  FakeProcesses processes(0, {"", "ok"});
  Status st = setUpRanks(
      1, [](size_t) { return Status::ok(); },
      [](size_t, const std::atomic<bool> &) { return Status::ok(); }, nullptr,
      nullptr, &processes, "rank threads", noThreads);
  ASSERT_FALSE(st);
  ASSERT_EQ(processes.sent.size(), 1u);
  EXPECT_EQ(processes.sent[0].rfind("error\n", 0), 0u) << processes.sent[0];
}

TEST(RankFaults, EveryProcessReadyConnects) {
  FakeProcesses processes(1, {"ok", "", "ok"});
  FakeInit nccl(1);
  Status st = setUpRanks(
      1, [](size_t) { return Status::ok(); },
      [&](size_t, const std::atomic<bool> &) { return nccl.init(); }, nullptr,
      nullptr, &processes, "rank threads");
  EXPECT_TRUE(st) << st.message();
  EXPECT_EQ(nccl.calls, 1);
}

TEST(RankFaults, AMalformedAnswerIsAFailure) {
  FakeProcesses processes(0, {"", "garbage"});
  Status st = agreeOnSetup(processes, Status::ok());
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("process 1"), std::string::npos)
      << st.message();
}

} // namespace
