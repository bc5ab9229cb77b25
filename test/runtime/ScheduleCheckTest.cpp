//===- ScheduleCheckTest.cpp - happens-before, races, hangs ---------------===//
#include "runtime/ScheduleCheck.h"

#include <gtest/gtest.h>

using namespace braid::sched;

namespace {

Access rd(int64_t b, int64_t e, int64_t space = 0) { return {space, b, e, false}; }
Access wr(int64_t b, int64_t e, int64_t space = 0) { return {space, b, e, true}; }

TEST(HappensBefore, StreamOrderAndJoins) {
  // 0: s0   1: s1   2: s0 after 1   3: s1
  HappensBefore hb(2);
  ASSERT_TRUE(hb.build({{0, {}}, {1, {}}, {0, {1}}, {1, {}}}));
  EXPECT_TRUE(hb.before(0, 2));
  EXPECT_TRUE(hb.before(1, 2));
  EXPECT_TRUE(hb.before(1, 3));
  EXPECT_FALSE(hb.before(0, 1));
  EXPECT_FALSE(hb.before(0, 3)); // stream 1 never waited for stream 0
  EXPECT_FALSE(hb.before(2, 3));
  EXPECT_FALSE(hb.before(2, 2));
  EXPECT_EQ(hb.position(3), 2);
}

TEST(HappensBefore, RefusesMalformedOps) {
  HappensBefore hb(2);
  EXPECT_FALSE(hb.append({2, {}}));  // no stream 2
  EXPECT_FALSE(hb.append({0, {0}})); // waits for itself
  EXPECT_TRUE(hb.append({0, {}}));
  EXPECT_FALSE(hb.append({1, {5}})); // waits for a later op
  EXPECT_EQ(hb.numOps(), 1);
}

TEST(ScheduleCheck, CrossStreamReadNeedsAnEdge) {
  std::vector<OpAccesses> acc = {{{wr(0, 64)}}, {{rd(0, 64), wr(64, 128)}}};
  auto races = findConflicts({{0, {}}, {1, {}}}, 2, acc, {});
  ASSERT_EQ(races.size(), 1u);
  EXPECT_EQ(races[0].kind, Conflict::Race);
  EXPECT_EQ(races[0].first, 0);
  EXPECT_EQ(races[0].second, 1);
  EXPECT_TRUE(findConflicts({{0, {}}, {1, {0}}}, 2, acc, {}).empty());
}

TEST(ScheduleCheck, PartialOverlapAndWriteAfterRead) {
  // op 1 (stream 1) reads [32, 96); op 2 (stream 0) later reuses [0, 64)
  // for a new value: a write-after-read that only an edge 1 -> 2 orders.
  std::vector<OpAccesses> acc = {
      {{wr(0, 128)}}, {{rd(32, 96), wr(0, 8, 1)}}, {{wr(0, 64)}}};
  auto races = findConflicts({{0, {}}, {1, {0}}, {0, {}}}, 2, acc, {});
  ASSERT_EQ(races.size(), 1u);
  EXPECT_EQ(races[0].first, 1);
  EXPECT_EQ(races[0].second, 2);
  EXPECT_TRUE(
      findConflicts({{0, {}}, {1, {0}}, {0, {1}}}, 2, acc, {}).empty());
  // Disjoint bytes never conflict.
  acc[2] = {{wr(96, 128)}};
  EXPECT_TRUE(findConflicts({{0, {}}, {1, {0}}, {0, {}}}, 2, acc, {}).empty());
}

TEST(ScheduleCheck, AsyncCollectiveIsInFlightUntilItsWait) {
  // 0: x = ... (s0)  1: start reads x, writes y (s0, in flight until 3)
  // 2: writes x (s0)  3: wait (s0)  4: reads y (s0)
  std::vector<OpAccesses> acc(5);
  acc[0].accesses = {wr(0, 64)};
  acc[1].accesses = {rd(0, 64), wr(64, 128)};
  acc[1].inFlightUntil = 3;
  acc[2].accesses = {wr(0, 64)};
  acc[4].accesses = {rd(64, 128)};
  std::vector<SchedOp> ops = {{0, {}}, {0, {}}, {0, {}}, {0, {1}}, {0, {}}};
  auto races = findConflicts(ops, 1, acc, {});
  ASSERT_EQ(races.size(), 1u); // even on one stream: the gather still reads
  EXPECT_EQ(races[0].first, 1);
  EXPECT_EQ(races[0].second, 2);
  // Overwriting x after the wait is fine.
  std::swap(acc[2], acc[3]);
  acc[3].inFlightUntil = -1;
  acc[1].inFlightUntil = 2;
  ops = {{0, {}}, {0, {}}, {0, {1}}, {0, {}}, {0, {}}};
  EXPECT_TRUE(findConflicts(ops, 1, acc, {}).empty());
}

TEST(ScheduleCheck, ReadingTheResultOnAnotherStreamNeedsTheWait) {
  // Start on stream 1, wait on stream 1, consumer on stream 0.
  std::vector<OpAccesses> acc(3);
  acc[0].accesses = {wr(0, 64)};
  acc[0].inFlightUntil = 1;
  acc[2].accesses = {rd(0, 64)};
  auto races = findConflicts({{1, {}}, {1, {0}}, {0, {}}}, 2, acc, {});
  ASSERT_EQ(races.size(), 1u);
  EXPECT_EQ(races[0].first, 1); // the wait: what the consumer must follow
  EXPECT_TRUE(findConflicts({{1, {}}, {1, {0}}, {0, {1}}}, 2, acc, {}).empty());
}

TEST(ScheduleCheck, CollectivesOfTwoCommunicatorsMustBeOrdered) {
  // Two sync collectives of group 7, on streams 0 and 1.
  std::vector<CollectiveUse> coll = {{0, 0, 7}, {1, 1, 7}};
  std::vector<OpAccesses> acc(2);
  auto hangs = findConflicts({{0, {}}, {1, {}}}, 2, acc, coll);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].kind, Conflict::Hang);
  EXPECT_EQ(hangs[0].first, 0);
  EXPECT_EQ(hangs[0].second, 1);
  EXPECT_TRUE(findConflicts({{0, {}}, {1, {0}}}, 2, acc, coll).empty());
  CheckOptions concurrent;
  concurrent.concurrentCommunicators = true;
  EXPECT_TRUE(findConflicts({{0, {}}, {1, {}}}, 2, acc, coll, concurrent)
                  .empty());
  // One communicator (same group, same stream): issue order suffices, even
  // with both in flight at once.
  std::vector<CollectiveUse> fifo = {{0, 2, 7}, {1, 3, 7}};
  std::vector<OpAccesses> acc4(4);
  EXPECT_TRUE(findConflicts({{1, {}}, {1, {}}, {0, {0}}, {0, {1}}}, 2, acc4,
                            fifo)
                  .empty());
}

TEST(ScheduleCheck, AnAsyncCollectiveStillInFlightCannotBeFixedByAnEvent) {
  // Start on stream 1 (group 1) in flight until op 2; a collective of
  // another communicator begins at op 1 before that wait.
  std::vector<CollectiveUse> coll = {{0, 2, 1}, {1, 1, 1}};
  std::vector<OpAccesses> acc(3);
  auto hangs = findConflicts({{1, {}}, {0, {}}, {0, {0}}}, 2, acc, coll);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].first, 0);
  EXPECT_EQ(hangs[0].second, 1);
}

TEST(ScheduleCheck, IncrementalRepairOrdersWhatItMust) {
  // The insert-events loop: append, ask, add edges, commit.
  std::vector<OpAccesses> acc = {{{wr(0, 64)}}, {{wr(64, 128)}},
                                 {{rd(0, 128)}}};
  ScheduleChecker checker(3, acc, {});
  std::vector<SchedOp> ops = {{0, {}}, {1, {}}, {2, {}}};
  std::vector<std::vector<int>> added(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(checker.append(ops[size_t(i)]));
    std::vector<Conflict> c;
    checker.conflicts(c);
    for (const Conflict &x : c) {
      checker.addAfter(x.first);
      added[size_t(i)].push_back(x.first);
    }
    checker.commit();
  }
  EXPECT_EQ(added[2], (std::vector<int>{0, 1}));
  EXPECT_TRUE(checker.happensBefore().before(0, 2));
  EXPECT_TRUE(checker.happensBefore().before(1, 2));
}

} // namespace

namespace {
// One op's own accesses: a write over another write or over a read is an
// Overlap (no event can fix it), unless the read is marked in place and
// covers exactly the written bytes; the function's end may overlap itself.
TEST(ScheduleCheck, AnOpMustNotOverlapItself) {
  auto one = [](std::vector<Access> a, bool overlapsItself = false) {
    OpAccesses op{std::move(a)};
    op.overlapsItself = overlapsItself;
    return findConflicts({{0, {}}}, 1, {op}, {});
  };
  auto twoResults = one({rd(0, 64), wr(64, 128), wr(96, 160)});
  ASSERT_EQ(twoResults.size(), 1u);
  EXPECT_EQ(twoResults[0].kind, Conflict::Overlap);
  EXPECT_EQ(twoResults[0].first, 0);
  EXPECT_EQ(twoResults[0].second, 0);
  EXPECT_FALSE(twoResults[0].repairable);
  EXPECT_EQ(twoResults[0].access.begin, 96);
  EXPECT_EQ(twoResults[0].access.end, 128);
  EXPECT_EQ(one({rd(0, 64), wr(0, 64)}).size(), 1u); // not marked in place
  Access inPlace = rd(0, 64), result = wr(0, 64), otherResult = wr(0, 64);
  inPlace.inPlace = result.inPlace = 1;
  otherResult.inPlace = 2;
  EXPECT_TRUE(one({inPlace, result}).empty());
  EXPECT_EQ(one({inPlace, wr(0, 64)}).size(), 1u); // the write is not its own
  // Attention's updated k cache over its v cache operand: tags differ.
  EXPECT_EQ(one({inPlace, otherResult}).size(), 1u);
  Access shifted = wr(32, 96);
  shifted.inPlace = 1;
  EXPECT_EQ(one({inPlace, shifted}).size(), 1u);       // in place, not exactly
  EXPECT_TRUE(one({rd(0, 64), wr(0, 64, 1)}).empty()); // another space
  EXPECT_TRUE(one({rd(0, 64), rd(0, 64)}).empty());    // reads only
  EXPECT_TRUE(one({rd(0, 64), wr(0, 64)}, true).empty());
}

// The inputs are copied in before the first op: two that share bytes are
// reported (the first pair in byte order), whatever their order in the list.
TEST(ScheduleCheck, InPlaceTagsPairEachCacheWithItsUpdate) {
  // attention (q, k, v, k_cache, v_cache, position) -> (o, k', v').
  EXPECT_EQ(inPlaceTag("attention", false, 3),
            inPlaceTag("attention", true, 1));
  EXPECT_EQ(inPlaceTag("attention", false, 4),
            inPlaceTag("attention", true, 2));
  EXPECT_NE(inPlaceTag("attention", false, 3), inPlaceTag("attention", true, 2))
      << "the k cache may not become the updated v cache";
  for (unsigned k : {0u, 1u, 2u, 5u})
    EXPECT_EQ(inPlaceTag("attention", false, k), 0) << "operand " << k;
  EXPECT_EQ(inPlaceTag("attention", true, 0), 0);
  for (const char *op :
       {"add", "mul", "silu", "gelu", "activation", "swiglu"}) {
    EXPECT_NE(inPlaceTag(op, false, 0), 0) << op;
    EXPECT_EQ(inPlaceTag(op, false, 0), inPlaceTag(op, true, 0)) << op;
  }
  for (const char *op : {"matmul", "rms_norm", "add_rms_norm", "rope",
                         "softmax", "all_reduce", "reshape", ""})
    EXPECT_EQ(inPlaceTag(op, true, 0), 0) << op;
}

TEST(ScheduleCheck, EntryValuesMustNotShareBytes) {
  EXPECT_FALSE(firstEntryOverlap({}));
  EXPECT_FALSE(firstEntryOverlap({wr(0, 64), wr(64, 128), wr(0, 64, 1)}));
  EXPECT_FALSE(firstEntryOverlap({wr(0, 64), wr(32, 32)})); // empty
  auto expectOverlap = [](std::vector<Access> entries, size_t first,
                          size_t second, int64_t begin, int64_t end) {
    auto o = firstEntryOverlap(entries);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->first, first);
    EXPECT_EQ(o->second, second);
    EXPECT_EQ(o->both.begin, begin);
    EXPECT_EQ(o->both.end, end);
  };
  expectOverlap({wr(256, 512), wr(0, 64), wr(480, 600)}, 0, 2, 480, 512);
  // Contained in a long earlier one, past a short one in between.
  expectOverlap({wr(0, 1000), wr(100, 110), wr(500, 600)}, 0, 1, 100, 110);
}

TEST(ScheduleCheck, AReadMustSeeItsProducersWrite) {
  // 0 writes A at [0, 64); 1 writes B over the same bytes; 2 reads A.
  // All on one stream (ordered), but 2 would read B: a clobber.
  Access readA = rd(0, 64);
  readA.expectWriter = 0;
  std::vector<OpAccesses> acc = {{{wr(0, 64)}}, {{wr(0, 64)}}, {{readA}}};
  auto c = findConflicts({{0, {}}, {0, {}}, {0, {}}}, 1, acc, {});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind, Conflict::Clobber);
  EXPECT_EQ(c[0].first, 1);
  EXPECT_EQ(c[0].second, 2);
  EXPECT_FALSE(c[0].repairable);
  // Reading B (expecting op 1) is fine; so is an entry value nobody wrote.
  acc[2].accesses[0].expectWriter = 1;
  EXPECT_TRUE(findConflicts({{0, {}}, {0, {}}, {0, {}}}, 1, acc, {}).empty());
  Access entry = rd(100, 164);
  entry.expectWriter = -1;
  acc[2].accesses.push_back(entry);
  EXPECT_TRUE(findConflicts({{0, {}}, {0, {}}, {0, {}}}, 1, acc, {}).empty());
}
} // namespace
