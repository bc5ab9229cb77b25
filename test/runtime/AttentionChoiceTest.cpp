//===- AttentionChoiceTest.cpp - Which kernel runs attention
//----------------===//
//
// runtime/cuda/AttentionChoice.h: auto asks for tensor cores only for a
// decode step over a cache at least as long as the H100 measured them
// faster on; a forced choice is what is asked for, whatever the shape.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/AttentionChoice.h"

#include <gtest/gtest.h>

using braid::rt::cuda::AttentionKernel;
using braid::rt::cuda::attentionKernelName;
using braid::rt::cuda::kTensorCoreAutoCacheRows;
using braid::rt::cuda::parseAttentionKernel;
using braid::rt::cuda::tensorCoreAttention;

namespace {

TEST(AttentionChoice, AutoTakesTensorCoresForDecodeOverALongCache) {
  const std::vector<int64_t> decode{1, 1, 32, 128}, batch4{4, 1, 8, 64};
  EXPECT_TRUE(tensorCoreAttention(AttentionKernel::Auto, decode, 4096));
  EXPECT_TRUE(tensorCoreAttention(AttentionKernel::Auto, batch4,
                                  kTensorCoreAutoCacheRows));
  EXPECT_FALSE(tensorCoreAttention(AttentionKernel::Auto, batch4,
                                   kTensorCoreAutoCacheRows - 1));
  EXPECT_FALSE(tensorCoreAttention(AttentionKernel::Auto, decode, 64));
}

TEST(AttentionChoice, AutoKeepsTheSplitKernelForPrefillAndNoCache) {
  // Prefill into a cache, and attention without one, were not measured.
  EXPECT_FALSE(
      tensorCoreAttention(AttentionKernel::Auto, {1, 128, 32, 128}, 4096));
  EXPECT_FALSE(tensorCoreAttention(AttentionKernel::Auto, {1, 1, 32, 128}, 0));
  EXPECT_FALSE(tensorCoreAttention(AttentionKernel::Auto, {32, 128}, 4096));
}

TEST(AttentionChoice, AForcedKernelIsAskedForWhateverTheShape) {
  for (int64_t rows : {0, 16, 4096}) {
    EXPECT_TRUE(
        tensorCoreAttention(AttentionKernel::TensorCore, {2, 40, 8, 64}, rows));
    EXPECT_FALSE(
        tensorCoreAttention(AttentionKernel::Split, {1, 1, 32, 128}, rows));
  }
}

TEST(AttentionChoice, EveryKernelNameParsesBackToItsChoice) {
  for (AttentionKernel k : {AttentionKernel::Auto, AttentionKernel::Split,
                            AttentionKernel::TensorCore})
    EXPECT_EQ(parseAttentionKernel(attentionKernelName(k)), k);
  EXPECT_STREQ(attentionKernelName(AttentionKernel::TensorCore), "tensor-core");
  for (const char *bad : {"", "Auto", "tensor_core", "tensor-core ", "splitx"})
    EXPECT_FALSE(parseAttentionKernel(bad).has_value()) << bad;
}

} // namespace
