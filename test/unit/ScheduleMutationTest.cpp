//===- ScheduleMutationTest.cpp - break a valid schedule every way --------===//
//
// From a valid two-stream tp 2 schedule of the tiny LLaMA (collectives
// alternate between streams 0 and 1, compute on 0; events from
// braid-insert-events, buffers from braid-plan-memory), every mutation of
// three families is tried:
//   - delete one event_wait;
//   - swap the streams of two consecutive collectives of the group that
//     sit on different streams;
//   - move an op that reuses an earlier buffer's bytes one op earlier
//     (shrinks the reuse distance by one).
// Every mutant braid-verify-schedule rejects must name both ops; the strict
// interpreter must show a numeric difference for every rejected race or
// clobber; every mutant it accepts must give bit-identical logits under the
// strict interpreter (the event was redundant). The counts are printed and
// recorded in docs/schedule-safety.md.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "passes/InitAll.h"
#include "passes/Passes.h"
#include "runtime/Interpreter.h"
#include "translate/PlanExport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <functional>

#ifndef BRAID_SOURCE_DIR
#error "BRAID_SOURCE_DIR must point at the repository"
#endif

using namespace mlir;
using namespace mlir::braid;
namespace rt = ::braid::rt;

namespace {

struct Verdict {
  bool accepted = true;
  bool race = false, clobber = false, hang = false;
  bool everyErrorNamesTwoOps = true;
  std::string first;
};

Verdict verify(ModuleOp module) {
  Verdict v;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Error)
      return success();
    std::string msg = d.str();
    if (v.first.empty())
      v.first = msg;
    v.race |= msg.find("at least one writes") != std::string::npos;
    v.clobber |= msg.find("clobbered") != std::string::npos;
    v.hang |= msg.find("deadlock") != std::string::npos;
    // The error is on one op and a note on the other.
    bool named = false;
    for (Diagnostic &note : d.getNotes())
      named |= note.str() == "the other op of the unordered pair" ||
               note.str() == "the op that overwrote it";
    v.everyErrorNamesTwoOps &= named;
    return success();
  });
  PassManager pm(module.getContext());
  pm.addPass(createBraidVerifySchedulePass());
  v.accepted = succeeded(pm.run(module));
  return v;
}

/// Logits of prefill then one decode step on every rank, strict mode with
/// `seed` (0: plan order).
rt::Expected<std::vector<rt::TensorMap>> run(const std::vector<uint8_t> &bytes,
                                            uint64_t seed) {
  rt::LoadOptions lo;
  lo.checkSchedule = false; // mutants are run on purpose
  auto plan = rt::loadPlan(bytes, lo);
  if (!plan)
    return plan.status();
  // A mutant whose collectives deadlock under strict mode (a rank blocked
  // in one stream's collective while its peer waits in the other's) ends
  // at this timeout; the default 60 s made two such mutants take 2 min.
  rt::RunnerOptions options;
  options.weights.seed = 3;
  options.collectiveTimeout = std::chrono::seconds(5);
  auto runner = rt::ThreadedRunner::create(*plan, options);
  if (!runner)
    return runner.status();
  (*runner)->setStrict(seed != 0, seed);
  auto ints = [](std::vector<int64_t> v) {
    return rt::HostTensor::fromInts(::braid::plan::DType::I32,
                                    {1, int64_t(v.size())}, v);
  };
  std::vector<int64_t> ids, pos;
  for (int64_t i = 0; i < 16; ++i) {
    ids.push_back((i * 37 + 11) % 256);
    pos.push_back(i);
  }
  rt::TensorMap prefillIn{{"input_ids", ints(ids)}, {"positions", ints(pos)}};
  auto prefill = (*runner)->run("prefill", {prefillIn});
  if (!prefill)
    return prefill.status();
  rt::TensorMap decodeIn{{"input_ids", ints({42})},
                         {"positions", ints({16})}};
  auto decode = (*runner)->run("decode", {decodeIn});
  if (!decode)
    return decode.status();
  for (size_t r = 0; r < decode->size(); ++r)
    (*decode)[r]["prefill_logits"] = (*prefill)[r].at("logits");
  return decode;
}

bool sameBits(const std::vector<rt::TensorMap> &a,
              const std::vector<rt::TensorMap> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t r = 0; r < a.size(); ++r)
    for (const auto &[name, t] : a[r])
      if (!b[r].count(name) || b[r].at(name).bytes != t.bytes)
        return false;
  return true;
}

class ScheduleMutation : public ::testing::Test {
protected:
  void SetUp() override {
    ::braid::registerAllDialects(registry_);
    ctx_ = std::make_unique<MLIRContext>(registry_);
    auto config = ::braid::loadModelConfig(std::string(BRAID_SOURCE_DIR) +
                                         "/models/tiny-llama/config.json");
    ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
    ::braid::ImportOptions options;
    options.tp = 2;
    options.seq = 16;
    options.maxSeq = 64;
    options.dtype = ::braid::ElementType::F32;
    auto imported = ::braid::importModel(*ctx_, *config, options);
    ASSERT_TRUE(bool(imported)) << llvm::toString(imported.takeError());
    base_ = std::move(*imported);
    // Collectives alternate between the two streams; compute on stream 0.
    int collective = 0;
    for (auto func : base_->getOps<func::FuncOp>())
      for (Operation &op : func.getBody().front())
        if (!isUnscheduledOp(&op))
          setStream(&op, isa<CollectiveOpInterface>(op) ? collective++ % 2 : 0);
    PassManager pm(ctx_.get());
    pm.addPass(createBraidSimplifyPass());
    pm.addPass(createBraidInsertEventsPass());
    pm.addPass(createBraidPlanMemoryPass());
    pm.addPass(createBraidInsertEventsPass()); // buffer-reuse edges, if any
    ASSERT_TRUE(succeeded(pm.run(*base_)));
    Verdict v = verify(*base_);
    ASSERT_TRUE(v.accepted) << v.first;
    auto bytes = ::braid::exportPlan(*base_);
    ASSERT_TRUE(succeeded(bytes));
    auto ref = run(*bytes, 0);
    ASSERT_TRUE(bool(ref)) << ref.status().message();
    reference_ = std::move(*ref);
  }

  /// Every op of every entry function, in order (mutation sites).
  std::vector<Operation *> ops(ModuleOp m) {
    std::vector<Operation *> all;
    for (auto func : m.getOps<func::FuncOp>())
      for (Operation &op : func.getBody().front())
        all.push_back(&op);
    return all;
  }

  struct Counts {
    int tried = 0, rejected = 0, redundant = 0;
    int races = 0, racesShown = 0, clobbers = 0, clobbersShown = 0;
    int hangs = 0;
  };

  /// Applies `mutate` to a copy (it returns false when the site does not
  /// apply) and judges the mutant.
  void judge(size_t site, const std::function<bool(ModuleOp, Operation *)> &mutate,
             Counts &counts, const char *family) {
    OwningOpRef<ModuleOp> copy = base_->clone();
    Operation *at = ops(*copy)[site];
    if (!mutate(*copy, at))
      return;
    ++counts.tried;
    Verdict v = verify(*copy);
    std::string what = std::string(family) + " at op " + std::to_string(site);
    if (!v.accepted) {
      ++counts.rejected;
      EXPECT_TRUE(v.everyErrorNamesTwoOps) << what << ": " << v.first;
      if (v.hang)
        ++counts.hangs;
      if (v.hang && !v.race && !v.clobber)
        return; // nothing to compare: the CPU ranks would pair collectives wrongly
      if (v.race)
        ++counts.races;
      else
        ++counts.clobbers;
      ::braid::ExportOptions unsafe;
      unsafe.checkSchedule = false;
      auto bytes = ::braid::exportPlan(*copy, unsafe);
      ASSERT_TRUE(succeeded(bytes)) << what;
      bool differs = false;
      for (uint64_t seed = 1; seed <= 6 && !differs; ++seed) {
        auto out = run(*bytes, seed);
        differs = !out || !sameBits(*out, reference_);
      }
      // A clobber on one stream is deterministic: it changes the numbers
      // only where the overwritten value is observable (the logits are the
      // last token's), so only races must show a difference.
      if (differs)
        ++(v.race ? counts.racesShown : counts.clobbersShown);
      else if (v.race)
        ADD_FAILURE() << what << ": rejected (" << v.first
                      << ") but no strict seed changed the numbers";
      return;
    }
    // Accepted: the mutation removed nothing that mattered.
    auto bytes = ::braid::exportPlan(*copy);
    ASSERT_TRUE(succeeded(bytes)) << what;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      auto out = run(*bytes, seed);
      ASSERT_TRUE(bool(out)) << what << ": " << out.status().message();
      EXPECT_TRUE(sameBits(*out, reference_))
          << what << ": accepted but strict seed " << seed << " differs";
    }
    ++counts.redundant;
  }

  void report(const char *family, const Counts &c) {
    std::printf("%-24s tried %3d, rejected %3d (races %3d, numbers differ "
                "%3d; clobbers %3d, numbers differ %3d; possible deadlock %3d), accepted "
                "and bit-identical %3d\n",
                family, c.tried, c.rejected, c.races, c.racesShown, c.clobbers,
                c.clobbersShown, c.hangs, c.redundant);
    EXPECT_EQ(c.tried, c.rejected + c.redundant);
    EXPECT_EQ(c.races, c.racesShown);
  }

  DialectRegistry registry_;
  std::unique_ptr<MLIRContext> ctx_;
  OwningOpRef<ModuleOp> base_;
  std::vector<rt::TensorMap> reference_;
};

TEST_F(ScheduleMutation, DeleteEachEventWait) {
  Counts c;
  size_t n = ops(*base_).size();
  for (size_t i = 0; i < n; ++i)
    judge(
        i,
        [](ModuleOp, Operation *op) {
          if (!isa<EventWaitOp>(op))
            return false;
          op->erase();
          return true;
        },
        c, "delete event_wait");
  report("delete event_wait", c);
  EXPECT_GT(c.tried, 0);
  EXPECT_GT(c.rejected, 0);
}

TEST_F(ScheduleMutation, SwapStreamsOfConsecutiveCollectives) {
  Counts c;
  std::vector<Operation *> all = ops(*base_);
  for (size_t i = 0; i < all.size(); ++i)
    judge(
        i,
        [](ModuleOp, Operation *op) {
          if (!isa<CollectiveOpInterface>(op))
            return false;
          Operation *next = op->getNextNode();
          while (next && !isa<CollectiveOpInterface>(next))
            next = next->getNextNode();
          if (!next || getStream(next) == getStream(op))
            return false;
          int64_t s = *getStream(op);
          setStream(op, *getStream(next));
          setStream(next, s);
          return true;
        },
        c, "swap collective streams");
  report("swap collective streams", c);
  EXPECT_GT(c.tried, 0);
  EXPECT_EQ(c.tried, c.rejected);
}

TEST_F(ScheduleMutation, ShrinkEachBufferReuseByOneOp) {
  Counts c;
  std::vector<Operation *> all = ops(*base_);
  auto range = [](Operation *op) -> std::optional<std::pair<int64_t, int64_t>> {
    auto b = op->getAttrOfType<DenseI64ArrayAttr>("braid.buffers");
    if (!b || b.size() < 2 || b[0] < 0)
      return std::nullopt;
    return std::make_pair(b[0], b[0] + b[1]);
  };
  for (size_t i = 0; i < all.size(); ++i) {
    // Sites: an op whose buffer overlaps one defined earlier in its function.
    auto mine = range(all[i]);
    if (!mine)
      continue;
    bool reuses = false;
    for (Operation *prev = all[i]->getPrevNode(); prev && !reuses;
         prev = prev->getPrevNode())
      if (auto r = range(prev))
        reuses = r->first < mine->second && mine->first < r->second;
    if (!reuses)
      continue;
    judge(
        i,
        [](ModuleOp, Operation *op) {
          Operation *prev = op->getPrevNode();
          if (!prev || isa<ParameterOp>(prev))
            return false;
          for (Value v : op->getOperands())
            if (v.getDefiningOp() == prev)
              return false; // not a legal move
          op->moveBefore(prev);
          return true;
        },
        c, "shrink buffer reuse");
  }
  report("shrink buffer reuse", c);
  EXPECT_GT(c.tried, 0);
  EXPECT_GT(c.rejected, 0);
}

} // namespace
