//===- HostRendezvousTest.cpp - Where the one-GPU test ranks meet ---------===//
//
// The single-GPU test communicator's ranks wait for each other only here,
// on the host (HostRendezvous.h): rounds hand every party every posted
// value, a party that never comes ends the wait with its number, and an
// abort ends every wait at once.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/HostRendezvous.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

using namespace braid::rt;
using namespace braid::rt::cuda;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

TEST(HostRendezvous, EveryRoundHandsEveryPartyEveryValue) {
  constexpr int kParties = 4, kRounds = 300;
  HostRendezvous<int> meet(kParties, 30, "test");
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kParties; ++p)
    threads.emplace_back([&, p] {
      for (int round = 0; round < kRounds; ++round) {
        // Uneven speeds: a fast party runs a round ahead of a slow one.
        if ((round + p) % 7 == 0)
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        auto got = meet.arrive(p, round * 10 + p);
        if (!got) {
          ++wrong;
          return;
        }
        for (int q = 0; q < kParties; ++q)
          if ((*got)[size_t(q)] != round * 10 + q)
            ++wrong;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(HostRendezvous, AMissingPartyEndsTheWaitWithItsNumber) {
  HostRendezvous<int> meet(3, 0.2, "group instance 7");
  auto start = std::chrono::steady_clock::now();
  std::thread one([&] { (void)meet.arrive(1, 1); });
  auto got = meet.arrive(0, 0); // party 2 never comes
  one.join();
  ASSERT_FALSE(got);
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_NE(got.status().message().find("group instance 7: rank 0 waited "
                                        "for rank 2 (round 1) longer than"),
            std::string::npos)
      << got.status().message();
}

TEST(HostRendezvous, AbortEndsEveryWaitNowAndLater) {
  HostRendezvous<int> meet(2, 60, "test");
  auto start = std::chrono::steady_clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    meet.abort();
  });
  auto got = meet.arrive(0, 0);
  aborter.join();
  ASSERT_FALSE(got);
  EXPECT_LT(secondsSince(start), 10.0); // not the 60 s timeout
  EXPECT_NE(got.status().message().find("aborted: another rank failed"),
            std::string::npos);
  EXPECT_FALSE(meet.arrive(1, 1)); // even with every party there
  EXPECT_FALSE(meet.arrive(5, 1)); // and a party out of range
}

TEST(HostMailbox, MessagesArriveInOrderAndTheSenderGetsTheAnswer) {
  HostMailbox<int> mail(2, 30, "test");
  std::vector<int> received;
  std::thread receiver([&] {
    for (int i = 0; i < 50; ++i) {
      auto got = mail.receive(1, 0, [&](int m) -> Expected<int> {
        received.push_back(m);
        return -m;
      });
      ASSERT_TRUE(got) << got.status().message();
    }
  });
  for (int i = 0; i < 50; ++i) {
    auto answer = mail.send(0, 1, i);
    ASSERT_TRUE(answer) << answer.status().message();
    EXPECT_EQ(*answer, -i);
  }
  receiver.join();
  ASSERT_EQ(received.size(), 50u);
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(received[size_t(i)], i);
}

TEST(HostMailbox, AReceiveWithNoSendEndsAtTheTimeout) {
  HostMailbox<int> mail(2, 0.1, "pp");
  auto got = mail.receive(1, 0, [](int m) -> Expected<int> { return m; });
  ASSERT_FALSE(got);
  EXPECT_NE(got.status().message().find("rank 1 waited for a message from "
                                        "rank 0"),
            std::string::npos)
      << got.status().message();
  // A send whose receiver never answers ends too.
  auto sent = mail.send(0, 1, 3);
  ASSERT_FALSE(sent);
  EXPECT_NE(sent.status().message().find("the answer of rank 1"),
            std::string::npos)
      << sent.status().message();
  EXPECT_FALSE(mail.send(0, 0, 1)); // to itself
  EXPECT_FALSE(mail.send(0, 2, 1)); // out of range
}

// A group's receives (the one-GPU test communicator's groupEnd) take
// messages as their senders post them. Rank 0's group receives from 2 and
// from 1; rank 2 sends only after it has received from 1, and rank 1's
// send to 0 (a lone send: it waits for its answer) comes first. Taken in
// plan order (2, then 1), rank 0 would wait for 2 forever; receiveAny
// takes 1's first.
TEST(HostMailbox, AGroupsReceivesTakeWhicheverMessageComesFirst) {
  HostMailbox<int> mail(3, 30, "pp");
  std::vector<int> order;
  std::thread rank1([&] {
    auto a = mail.send(1, 0, 10);
    ASSERT_TRUE(a) << a.status().message();
    auto b = mail.send(1, 2, 11);
    ASSERT_TRUE(b) << b.status().message();
  });
  std::thread rank2([&] {
    auto got = mail.receive(2, 1, [](int m) -> Expected<int> { return -m; });
    ASSERT_TRUE(got) << got.status().message();
    auto sent = mail.send(2, 0, 20);
    ASSERT_TRUE(sent) << sent.status().message();
  });
  std::vector<int> left{2, 1};
  while (!left.empty()) {
    auto sender =
        mail.receiveAny(0, left, [&](int from, int m) -> Expected<int> {
          order.push_back(m);
          return from;
        });
    ASSERT_TRUE(sender) << sender.status().message();
    left.erase(std::find(left.begin(), left.end(), *sender));
  }
  rank1.join();
  rank2.join();
  EXPECT_EQ(order, (std::vector<int>{10, 20}));
  // Ties go to the earlier sender of the list; none at all ends at the
  // timeout, naming every rank it waited for.
  HostMailbox<int> both(3, 0.1, "pp");
  ASSERT_TRUE(both.post(2, 0, 2));
  ASSERT_TRUE(both.post(1, 0, 1));
  auto first =
      both.receiveAny(0, {1, 2}, [](int, int m) -> Expected<int> { return m; });
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, 1);
  auto none =
      both.receiveAny(1, {0, 2}, [](int, int m) -> Expected<int> { return m; });
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find(
                "rank 1 waited for a message from any of ranks 0, 2"),
            std::string::npos)
      << none.status().message();
  EXPECT_FALSE(both.receiveAny(
      0, {0}, [](int, int m) -> Expected<int> { return m; })); // itself
}

TEST(HostMailbox, AbortEndsAWaitingReceive) {
  HostMailbox<int> mail(2, 60, "test");
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    mail.abort();
  });
  auto got = mail.receive(0, 1, [](int m) -> Expected<int> { return m; });
  aborter.join();
  ASSERT_FALSE(got);
  EXPECT_NE(got.status().message().find("aborted"), std::string::npos);
}

} // namespace
