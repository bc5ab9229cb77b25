//===- BootstrapTest.cpp - Run agreement across processes, without MPI ----===//
//
// checkSameRun against a scripted Bootstrap: what the other ranks "send" is
// given by the test, so malformed and mismatched identities are reachable.
// The real MPI exchange is tested end to end in test/run/mpi.test.
//
//===----------------------------------------------------------------------===//
#include "runtime/Bootstrap.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace braid::rt;

namespace {

/// Rank 0 of a world whose other ranks sent `others` (raw blobs, or the
/// echo of rank 0's own blob when empty).
class ScriptedBootstrap : public Bootstrap {
public:
  explicit ScriptedBootstrap(std::vector<std::string> others)
      : others_(std::move(others)) {}
  int rank() const override { return 0; }
  int size() const override { return int(others_.size()) + 1; }
  int localRank() const override { return 0; }
  Expected<std::vector<std::string>>
  allGather(const std::string &mine) override {
    sent = mine;
    std::vector<std::string> all{mine};
    for (const std::string &o : others_)
      all.push_back(o.empty() ? mine : o);
    return all;
  }
  Status broadcast(std::string &, int) override { return Status::ok(); }
  [[noreturn]] void abortAll(int code) override { std::abort(); }
  std::string sent;

private:
  std::vector<std::string> others_;
};

RunIdentity identity(uint64_t fingerprint, std::string weights = "seed 0") {
  RunIdentity id;
  id.planPath = "a.bplan";
  id.planFingerprint = fingerprint;
  id.weights = std::move(weights);
  return id;
}

/// What rank 0 would send for `id`: the blob a peer sends is the same format.
std::string blobOf(const RunIdentity &id) {
  ScriptedBootstrap b({});
  (void)checkSameRun(b, id);
  return b.sent;
}

} // namespace

TEST(Bootstrap, FingerprintIsFnv1aOfTheBytes) {
  // FNV-1a 64 of "" and "a" (published test vectors).
  EXPECT_EQ(planFingerprint({}), 0xcbf29ce484222325ull);
  EXPECT_EQ(planFingerprint({'a'}), 0xaf63dc4c8601ec8cull);
}

TEST(Bootstrap, SameRunEverywhereAgrees) {
  ScriptedBootstrap b({"", ""});
  EXPECT_TRUE(checkSameRun(b, identity(42)));
}

TEST(Bootstrap, DifferentPlanNamesBothRanks) {
  RunIdentity other = identity(7);
  other.planPath = "b.bplan";
  ScriptedBootstrap b({"", blobOf(other)});
  Status st = checkSameRun(b, identity(42));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            "ranks hold different plans: rank 2 loaded 'b.bplan' (fingerprint "
            "0x0000000000000007), rank 0 loaded 'a.bplan' (fingerprint "
            "0x000000000000002a); every rank must run the same plan");
}

TEST(Bootstrap, DifferentWeightsAndFailedRanks) {
  ScriptedBootstrap b({blobOf(identity(42, "seed 3"))});
  Status st = checkSameRun(b, identity(42));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "ranks use different weights: rank 1 has seed 3, "
                          "rank 0 has seed 0; every rank must use the same");

  RunIdentity failed;
  failed.loadError = "cannot open plan 'x'";
  ScriptedBootstrap c({"", blobOf(failed)});
  st = checkSameRun(c, identity(42));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "rank 2 of 3 could not start: cannot open plan 'x'");
}

TEST(Bootstrap, NoDeviceIsReportedAfterMismatches) {
  RunIdentity noGpu = identity(42);
  noGpu.setupError = "no usable CUDA device";
  ScriptedBootstrap b({blobOf(noGpu)});
  Status st = checkSameRun(b, identity(42));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "rank 1 of 2 could not start: no usable CUDA device");

  // A different plan says more than a missing GPU.
  RunIdentity other = noGpu;
  other.planFingerprint = 7;
  ScriptedBootstrap c({blobOf(other)});
  st = checkSameRun(c, identity(42));
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("ranks hold different plans"), std::string::npos)
      << st.message();
}

TEST(Bootstrap, NewlinesInFieldsKeepTheFraming) {
  RunIdentity odd = identity(42, "checkpoint 'a\nb'");
  odd.planPath = "dir\nwith newline/a.bplan";
  ScriptedBootstrap b({blobOf(odd)});
  Status st = checkSameRun(b, odd);
  EXPECT_TRUE(st) << st.message();
}

TEST(Bootstrap, MalformedIdentityIsAnErrorNotACrash) {
  for (std::string bad : {"garbage", "ok\nnot-a-number\nseed 0\n\na.bplan",
                          "ok\n42", "ok\n99999999999999999999999\nw\n\np"}) {
    ScriptedBootstrap b({bad});
    Status st = checkSameRun(b, identity(42));
    ASSERT_FALSE(st) << bad;
    EXPECT_NE(st.message().find("rank 1 sent a malformed"), std::string::npos)
        << st.message();
  }
}
