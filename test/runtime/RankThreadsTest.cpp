//===- RankThreadsTest.cpp - Persistent step threads ----------------------===//
#include "runtime/Threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>

using namespace braid::rt;

namespace {

TEST(RankThreads, EveryRankRunsOnItsOwnThreadAndKeepsIt) {
  auto threads = RankThreads::start(4, "test threads");
  ASSERT_TRUE(threads) << threads.status().message();
  std::vector<std::thread::id> first(4), now(4);
  (*threads)->run([&](size_t i) { first[i] = std::this_thread::get_id(); });
  EXPECT_EQ(first[0], std::this_thread::get_id()); // rank 0: the caller
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 4u);
  std::atomic<int> calls{0};
  for (int step = 0; step < 500; ++step) {
    (*threads)->run([&](size_t i) {
      now[i] = std::this_thread::get_id();
      ++calls;
    });
    ASSERT_EQ(now, first) << "step " << step;
  }
  EXPECT_EQ(calls.load(), 2000);
}

TEST(RankThreads, RunReturnsOnlyWhenEveryRankIsDone) {
  auto threads = RankThreads::start(3, "test threads");
  ASSERT_TRUE(threads);
  std::atomic<int> done{0};
  for (int step = 0; step < 50; ++step) {
    (*threads)->run([&](size_t i) {
      if (i == 2)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++done;
    });
    ASSERT_EQ(done.load(), 3 * (step + 1));
  }
}

TEST(RankThreads, AThrowingBodyLetsTheOthersFinishThenRethrows) {
  auto threads = RankThreads::start(3, "test threads");
  ASSERT_TRUE(threads);
  for (size_t thrower : {size_t(0), size_t(2)}) {
    std::atomic<int> finished{0};
    EXPECT_THROW((*threads)->run([&](size_t i) {
      if (i == thrower)
        throw std::runtime_error("rank failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ++finished;
    }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2);
  }
  // Still usable.
  std::atomic<int> calls{0};
  (*threads)->run([&](size_t) { ++calls; });
  EXPECT_EQ(calls.load(), 3);
}

TEST(RankThreads, OneRankRunsOnTheCaller) {
  auto threads = RankThreads::start(1, "test threads");
  ASSERT_TRUE(threads);
  std::thread::id ran;
  (*threads)->run([&](size_t) { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, std::this_thread::get_id());
}

TEST(RankThreads, AThreadThatCannotStartIsAnErrorAndNothingRuns) {
  int started = 0;
  ThreadStarter failSecond = [&](std::function<void()> body) {
    if (++started == 2)
      throw std::runtime_error("Resource temporarily unavailable");
    return std::thread(std::move(body));
  };
  auto threads = RankThreads::start(4, "the GPU rank threads", failSecond);
  ASSERT_FALSE(threads);
  EXPECT_EQ(threads.status().message(),
            "cannot start the GPU rank threads: started 1 of 4 (Resource "
            "temporarily unavailable)");
}

} // namespace
