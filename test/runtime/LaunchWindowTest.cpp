//===- LaunchWindowTest.cpp - Eager launches stay near the GPU ------------===//
//
// The launch window (runtime/cuda/LaunchWindow.h) driven as the executor's
// enqueue loop drives it, against a model GPU that completes ops in order
// up to some point: the host never runs more than the window ahead (so
// behind a stuck collective it waits where the timeout is checked, not in a
// launch), never waits while the GPU keeps up, and a mark is never
// overwritten while a wait still needs it.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/LaunchWindow.h"

#include <gtest/gtest.h>

#include <vector>

using braid::rt::cuda::LaunchWindow;

namespace {

/// What the enqueue loop did with a window over `ops` ops, when the GPU has
/// completed every op up to `gpuDone` (exclusive) by the time the host
/// waits, and waits are skipped for ops in [groupBegin, groupEnd) (an open
/// send/receive group).
struct Trace {
  int enqueued = 0;     // ops enqueued before the host had to wait
  int waits = 0;        // marks waited for (all complete ones)
  int firstWaitOp = -1; // the op before which the first wait happened
  int maxOutstanding = 0;
  bool reusedLiveSlot = false; // a slot re-recorded while a wait needed it
};

Trace drive(LaunchWindow w, int ops, int gpuDone, int groupBegin = 0,
            int groupEnd = 0) {
  Trace run;
  // The op after which each slot's mark was recorded; -1: none.
  std::vector<int> coversThrough(size_t(w.slots()), -1);
  // Whether each slot's mark has been waited for (or replaced).
  std::vector<bool> live(size_t(w.slots()), false);
  for (int i = 0; i < ops; ++i) {
    bool inGroup = i >= groupBegin && i < groupEnd;
    if (!inGroup)
      for (int slot; (slot = w.slotToAwait()) >= 0;) {
        EXPECT_TRUE(live[size_t(slot)]) << "waited for an empty slot";
        live[size_t(slot)] = false;
        if (coversThrough[size_t(slot)] >= gpuDone)
          return run; // blocked: the timeout's place, not a launch
        ++run.waits;
        if (run.firstWaitOp < 0)
          run.firstWaitOp = i;
      }
    ++run.enqueued;
    if (int slot = w.slotToRecord(i); slot >= 0) {
      // Replacing a mark no wait took is allowed only when the window was
      // full (its replacement covers it).
      if (live[size_t(slot)] && w.outstanding() < w.slots())
        run.reusedLiveSlot = true;
      coversThrough[size_t(slot)] = i;
      live[size_t(slot)] = true;
    }
    run.maxOutstanding = std::max(run.maxOutstanding, w.outstanding());
  }
  return run;
}

TEST(LaunchWindow, StopsAtMostTheWindowAheadOfAStuckGpu) {
  for (int opsPerMark : {1, 4, 16})
    for (int marks : {1, 2, 8})
      for (int stuckAt : {0, 1, 5, 37, 200}) {
        Trace run = drive(LaunchWindow(opsPerMark, marks), 10000, stuckAt);
        SCOPED_TRACE(::testing::Message()
                     << opsPerMark << " ops per mark, " << marks
                     << " marks, stuck at op " << stuckAt);
        EXPECT_LT(run.enqueued, 10000) << "never waited for the stuck GPU";
        EXPECT_LE(run.enqueued - stuckAt, opsPerMark * marks);
        // It runs ahead as far as the window lets it: the stuck op is
        // covered by the mark it finally waits for.
        EXPECT_GE(run.enqueued, stuckAt + opsPerMark * (marks - 1));
        EXPECT_FALSE(run.reusedLiveSlot);
      }
}

TEST(LaunchWindow, AGpuThatKeepsUpIsNeverWaitedFor) {
  LaunchWindow w; // the executor's
  Trace run = drive(w, 5000, /*gpuDone=*/5000);
  EXPECT_EQ(run.enqueued, 5000);
  // Waits start once the window is full, then one every opsPerMark ops.
  const int window =
      LaunchWindow::defaultOpsPerMark * LaunchWindow::defaultMarks;
  EXPECT_EQ(run.firstWaitOp, window);
  EXPECT_EQ(run.waits,
            (5000 - window - 1) / LaunchWindow::defaultOpsPerMark + 1);
  EXPECT_LE(run.maxOutstanding, LaunchWindow::defaultMarks);
  EXPECT_FALSE(run.reusedLiveSlot);
}

TEST(LaunchWindow, ShortStepsNeverWait) {
  Trace run = drive(LaunchWindow(16, 8), 128, /*gpuDone=*/0);
  EXPECT_EQ(run.enqueued, 128);
  EXPECT_EQ(run.waits, 0);
}

TEST(LaunchWindow, AGroupSkipsWaitsAndALaterMarkCoversThem) {
  // Waits skipped for 100 ops inside a group: the marks recorded meanwhile
  // replace the oldest ones, outstanding marks stay within the window, and
  // after the group the host is again held near a stuck GPU.
  Trace run = drive(LaunchWindow(4, 3), 1000, /*gpuDone=*/200,
                    /*groupBegin=*/20, /*groupEnd=*/120);
  EXPECT_LE(run.maxOutstanding, 3);
  EXPECT_FALSE(run.reusedLiveSlot);
  EXPECT_LT(run.enqueued, 1000);
  EXPECT_LE(run.enqueued - 200, 4 * 3);
}

TEST(LaunchWindow, EveryMarkSlotIsReused) {
  LaunchWindow w(2, 3);
  std::vector<int> slots;
  for (int i = 0; i < 12; ++i) {
    while (w.slotToAwait() >= 0) {
    }
    if (int s = w.slotToRecord(i); s >= 0)
      slots.push_back(s);
  }
  EXPECT_EQ(slots, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

} // namespace
