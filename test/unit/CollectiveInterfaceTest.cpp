//===- CollectiveInterfaceTest.cpp - every collective through one view ----===//
#include "dialect/BraidOps.h"
#include "passes/InitAll.h"
#include "passes/MemoryPlan.h"
#include "passes/StepStats.h"
#include "passes/cost/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::braid;
namespace cost = ::braid::cost;

namespace {

// Every collective kind, synchronous in @sync and as an async start in
// @async, in the same order.
constexpr const char *kModule = R"mlir(
braid.device_group @tp size 4
braid.device_group @pp size 2
func.func @sync(%x: tensor<2x16xbf16>) {
  %0 = braid.all_reduce sum %x on @tp : tensor<2x16xbf16> -> tensor<2x16xbf16>
  %1 = braid.all_gather %x on @tp dim 1 : tensor<2x16xbf16> -> tensor<2x64xbf16>
  %2 = braid.reduce_scatter sum %x on @tp dim 1 : tensor<2x16xbf16> -> tensor<2x4xbf16>
  %3 = braid.all_to_all %x on @tp split 1 concat 0 : tensor<2x16xbf16> -> tensor<8x4xbf16>
  %4 = braid.broadcast %x on @tp root 1 : tensor<2x16xbf16> -> tensor<2x16xbf16>
  braid.send %x to 1 on @pp : tensor<2x16xbf16>
  %5 = braid.recv from 1 on @pp : tensor<4x16xbf16>
  return
}
func.func @async(%x: tensor<2x16xbf16>) {
  %h0 = braid.all_reduce_start sum %x on @tp : tensor<2x16xbf16> -> !braid.handle<tensor<2x16xbf16>>
  %h1 = braid.all_gather_start %x on @tp dim 1 : tensor<2x16xbf16> -> !braid.handle<tensor<2x64xbf16>>
  %h2 = braid.reduce_scatter_start sum %x on @tp dim 1 : tensor<2x16xbf16> -> !braid.handle<tensor<2x4xbf16>>
  %h3 = braid.all_to_all_start %x on @tp split 1 concat 0 : tensor<2x16xbf16> -> !braid.handle<tensor<8x4xbf16>>
  %h4 = braid.broadcast_start %x on @tp root 1 : tensor<2x16xbf16> -> !braid.handle<tensor<2x16xbf16>>
  %h5 = braid.send_start %x to 1 on @pp : tensor<2x16xbf16> -> !braid.handle<none>
  %h6 = braid.recv_start from 1 on @pp : !braid.handle<tensor<4x16xbf16>>
  %0 = braid.wait %h0 : !braid.handle<tensor<2x16xbf16>> -> tensor<2x16xbf16>
  %1 = braid.wait %h1 : !braid.handle<tensor<2x64xbf16>> -> tensor<2x64xbf16>
  %2 = braid.wait %h2 : !braid.handle<tensor<2x4xbf16>> -> tensor<2x4xbf16>
  %3 = braid.wait %h3 : !braid.handle<tensor<8x4xbf16>> -> tensor<8x4xbf16>
  %4 = braid.wait %h4 : !braid.handle<tensor<2x16xbf16>> -> tensor<2x16xbf16>
  braid.wait %h5 : !braid.handle<none>
  %5 = braid.wait %h6 : !braid.handle<tensor<4x16xbf16>> -> tensor<4x16xbf16>
  return
}
)mlir";

class CollectiveInterfaceTest : public ::testing::Test {
protected:
  void SetUp() override {
    DialectRegistry registry;
    ::braid::registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    module = parseSourceString<ModuleOp>(kModule, &ctx);
    ASSERT_TRUE(module);
  }

  func::FuncOp function(StringRef name) {
    return module->lookupSymbol<func::FuncOp>(name);
  }
  SmallVector<CollectiveOpInterface> collectives(StringRef name) {
    SmallVector<CollectiveOpInterface> ops;
    function(name).walk([&](CollectiveOpInterface c) { ops.push_back(c); });
    return ops;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(CollectiveInterfaceTest, KindGroupFormAndSizingTensor) {
  using K = CollectiveKind;
  std::vector<K> kinds = {K::all_reduce, K::all_gather, K::reduce_scatter,
                          K::all_to_all, K::broadcast,  K::send,
                          K::recv};
  // nccl-tests' size: the gathered output for all_gather, the received
  // tensor for recv, the sent one otherwise (bf16: 2 bytes an element).
  std::vector<int64_t> bytes = {64, 256, 64, 64, 64, 64, 128};
  SmallVector<CollectiveOpInterface> sync = collectives("sync");
  SmallVector<CollectiveOpInterface> async = collectives("async");
  ASSERT_EQ(sync.size(), kinds.size());
  ASSERT_EQ(async.size(), kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    SCOPED_TRACE(stringifyCollectiveKind(kinds[i]).str());
    StringRef group = kinds[i] == K::send || kinds[i] == K::recv ? "pp" : "tp";
    for (CollectiveOpInterface c : {sync[i], async[i]}) {
      EXPECT_EQ(c.getCollectiveKind(), kinds[i]);
      EXPECT_EQ(c.getGroupAttr().getValue(), group);
      EXPECT_EQ(tensorBytes(c.getSizingType()), bytes[i]);
    }
    EXPECT_FALSE(sync[i].isAsyncStart());
    EXPECT_TRUE(async[i].isAsyncStart());
  }
}

TEST_F(CollectiveInterfaceTest, StatsAndCostTreatBothFormsAlike) {
  llvm::Expected<StepStats> sStats = computeStepStats(function("sync"));
  llvm::Expected<StepStats> aStats = computeStepStats(function("async"));
  ASSERT_TRUE(bool(sStats)) << llvm::toString(sStats.takeError());
  ASSERT_TRUE(bool(aStats)) << llvm::toString(aStats.takeError());
  const StepStats &s = *sStats, &a = *aStats;
  ASSERT_EQ(s.collectives.size(), 7u);
  for (const auto &[name, c] : s.collectives) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(a.collectives.count(name));
    EXPECT_EQ(a.collectives.at(name).count, 1);
    EXPECT_EQ(a.collectives.at(name).bytes, c.bytes);
  }
  EXPECT_EQ(s.collectives.at("all_gather").bytes, 256);

  auto target = cost::resolveTarget("h100-sxm-x8");
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  cost::CostModel model(*target, cost::LaunchMode::Graph, *module);
  EXPECT_EQ(model.worldSize(), 8);
  SmallVector<CollectiveOpInterface> sync = collectives("sync");
  SmallVector<CollectiveOpInterface> async = collectives("async");
  for (size_t i = 0; i < sync.size(); ++i) {
    cost::OpCost cs = model.cost(sync[i]);
    cost::OpCost ca = model.cost(async[i]);
    EXPECT_EQ(cs.cls, cost::OpClass::Communication);
    EXPECT_EQ(cs.bytes, double(tensorBytes(sync[i].getSizingType())));
    EXPECT_EQ(ca.bytes, cs.bytes);
    EXPECT_GT(cs.seconds, 0);
    EXPECT_EQ(ca.seconds, cs.seconds);
  }
}

} // namespace
