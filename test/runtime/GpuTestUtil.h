//===- GpuTestUtil.h - One "is there a GPU" rule for the GPU gtests -*- C++ -*-===//
//
// Without a usable GPU a GPU test skips, with the reason; with
// BRAID_REQUIRE_GPU=1 in the environment it fails instead, so a GPU machine
// whose driver or runtime is broken cannot pass by skipping everything.
// lit's `gpu` feature follows the same rule (test/lit.cfg.py, through
// `braid-run --probe-gpu`).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_TEST_RUNTIME_GPUTESTUTIL_H
#define BRAID_TEST_RUNTIME_GPUTESTUTIL_H

#include "runtime/cuda/CudaCheck.h"

#include <cstdlib>
#include <cstring>

namespace braid::rt::test {
inline bool gpuRequired() {
  const char *v = std::getenv("BRAID_REQUIRE_GPU");
  return v && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}
} // namespace braid::rt::test

/// In a test body or SetUp: skip (or, with BRAID_REQUIRE_GPU=1, fail) when
/// no GPU can be used.
#define BRAID_SKIP_WITHOUT_GPU()                                               \
  do {                                                                         \
    ::braid::rt::Status braidGpu_ = ::braid::rt::cuda::cudaDeviceAvailable();  \
    if (!braidGpu_) {                                                          \
      if (::braid::rt::test::gpuRequired())                                    \
        GTEST_FAIL() << "BRAID_REQUIRE_GPU is set but " << braidGpu_.message(); \
      GTEST_SKIP() << braidGpu_.message();                                     \
    }                                                                          \
  } while (0)

/// A CUDA runtime call returned cudaSuccess.
#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

#endif // BRAID_TEST_RUNTIME_GPUTESTUTIL_H
