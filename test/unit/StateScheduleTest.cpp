//===- StateScheduleTest.cpp - state slots through compiler and runtime ---===//
//
// Regression tests, IR to numbers: (1) an async all_gather that still reads
// the old KV cache while the attention updates it must see the old cache
// (the in-place rule counts the async reader until its wait; the strict
// interpreter runs the gather at its wait); (2) two state slots returned
// swapped must swap (copy-back is one simultaneous assignment).
//
//===----------------------------------------------------------------------===//
#include "test/unit/CompileIR.h"

#include "runtime/Interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
namespace rt = ::braid::rt;

namespace {

using ::braid::test::compileIR;

rt::HostTensor f32(rt::Shape shape, std::vector<float> v) {
  return rt::HostTensor::fromFloats(::braid::plan::DType::F32,
                                    std::move(shape), v);
}

const char *kAsyncCacheReader = R"mlir(
braid.device_group @tp size 2
func.func @step(%q: tensor<1x1x2x4xf32> {braid.input = "q"}, %pos: tensor<1xi32> {braid.input = "pos"}, %kc: tensor<1x8x1x4xf32> {braid.state = "k_cache"}, %vc: tensor<1x8x1x4xf32> {braid.state = "v_cache"}) -> (tensor<1x1x2x4xf32> {braid.output = "o"}, tensor<2x8x1x4xf32> {braid.output = "g"}, tensor<1x8x1x4xf32> {braid.state = "k_cache"}, tensor<1x8x1x4xf32> {braid.state = "v_cache"}) {
  %k = braid.slice %q offsets [0, 0, 0, 0] sizes [1, 1, 1, 4] : tensor<1x1x2x4xf32> -> tensor<1x1x1x4xf32>
  %h = braid.all_gather_start %kc on @tp dim 0 : tensor<1x8x1x4xf32> -> !braid.handle<tensor<2x8x1x4xf32>>
  %o, %kc2, %vc2 = braid.attention %q, %k, %k cache(%kc, %vc) at %pos {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64} : (tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1xi32>) -> (tensor<1x1x2x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>)
  %g = braid.wait %h : !braid.handle<tensor<2x8x1x4xf32>> -> tensor<2x8x1x4xf32>
  return %o, %g, %kc2, %vc2 : tensor<1x1x2x4xf32>, tensor<2x8x1x4xf32>, tensor<1x8x1x4xf32>, tensor<1x8x1x4xf32>
}
)mlir";

TEST(StateSchedule, AsyncCacheReaderSeesTheOldCache) {
  std::vector<uint8_t> bytes = compileIR(kAsyncCacheReader);
  ASSERT_FALSE(bytes.empty());
  auto plan = rt::loadPlan(bytes);
  ASSERT_TRUE(plan) << plan.status().message();
  for (uint64_t seed : {0, 1, 2, 3, 4}) {
    auto runner = rt::ThreadedRunner::create(*plan);
    ASSERT_TRUE(runner) << runner.status().message();
    (*runner)->setStrict(seed != 0, seed);
    auto inputs = [](int step) {
      std::vector<rt::TensorMap> in;
      for (int r = 0; r < 2; ++r) {
        std::vector<float> q;
        for (int i = 0; i < 8; ++i)
          q.push_back(std::sin(float(i + 10 * r + 100 * step)) + 2.0f);
        in.push_back({{"q", f32({1, 1, 2, 4}, q)},
                      {"pos", rt::HostTensor::fromInts(
                                  ::braid::plan::DType::I32, {1}, {step})}});
      }
      return in;
    };
    ASSERT_TRUE((*runner)->run("step", inputs(0)));
    // The cache each rank holds before the second step.
    std::vector<std::vector<float>> before;
    for (int r = 0; r < 2; ++r)
      before.push_back((*runner)->rank(r).stateSlot(0).toFloats());
    auto out = (*runner)->run("step", inputs(1));
    ASSERT_TRUE(out) << out.status().message();
    for (int r = 0; r < 2; ++r) {
      std::vector<float> g = (*out)[size_t(r)].at("g").toFloats();
      ASSERT_EQ(g.size(), 64u);
      for (size_t i = 0; i < 64; ++i)
        ASSERT_EQ(g[i], before[i / 32][i % 32])
            << "seed " << seed << " rank " << r << " element " << i
            << ": the gather saw the cache the attention wrote";
      // And the slot did get the new row (position 1).
      EXPECT_NE((*runner)->rank(r).stateSlot(0).toFloats()[4], 0.0f);
    }
  }
}

const char *kSwappedState = R"mlir(
func.func @init(%x: tensor<4xf32> {braid.input = "x"}, %y: tensor<4xf32> {braid.input = "y"}, %a: tensor<4xf32> {braid.state = "a"}, %b: tensor<4xf32> {braid.state = "b"}) -> (tensor<4xf32> {braid.state = "a"}, tensor<4xf32> {braid.state = "b"}) {
  return %x, %y : tensor<4xf32>, tensor<4xf32>
}
func.func @swap(%a: tensor<4xf32> {braid.state = "a"}, %b: tensor<4xf32> {braid.state = "b"}) -> (tensor<4xf32> {braid.state = "a"}, tensor<4xf32> {braid.state = "b"}) {
  return %b, %a : tensor<4xf32>, tensor<4xf32>
}
)mlir";

TEST(StateSchedule, SwappedStateSlotsSwap) {
  std::vector<uint8_t> bytes = compileIR(kSwappedState);
  ASSERT_FALSE(bytes.empty());
  auto plan = rt::loadPlan(bytes);
  ASSERT_TRUE(plan) << plan.status().message();
  for (uint64_t seed : {0, 1}) {
    auto runner = rt::ThreadedRunner::create(*plan);
    ASSERT_TRUE(runner) << runner.status().message();
    (*runner)->setStrict(seed != 0, seed);
    ASSERT_TRUE((*runner)->run(
        "init", {{{"x", f32({4}, {1, 2, 3, 4})}, {"y", f32({4}, {5, 6, 7, 8})}}}));
    ASSERT_TRUE((*runner)->run("swap", {rt::TensorMap{}}));
    EXPECT_EQ((*runner)->rank(0).stateSlot(0).toFloats(),
              (std::vector<float>{5, 6, 7, 8}));
    EXPECT_EQ((*runner)->rank(0).stateSlot(1).toFloats(),
              (std::vector<float>{1, 2, 3, 4}));
  }
}

} // namespace
