//===- DeviceSelectTest.cpp - Which GPU a rank runs on --------------------===//
//
// The arithmetic of runtime/cuda/DeviceSelect.h, which needs no GPU and no
// CUDA: one process per rank under mpirun/srun, with CUDA_VISIBLE_DEVICES
// per rank or every GPU of the node visible, and an explicit --devices.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/DeviceSelect.h"
#include "test/runtime/Expect.h"

#include <gtest/gtest.h>

using namespace braid::rt;
using braid::rt::cuda::selectDevice;

namespace {

std::string errorOf(int localRank, int visible, std::vector<int> devices) {
  auto gpu = selectDevice(localRank, visible, devices);
  EXPECT_FALSE(gpu) << "selected GPU " << *gpu;
  return gpu ? std::string() : gpu.status().message();
}
} // namespace

// srun --gpus-per-task=1 (or a wrapper setting CUDA_VISIBLE_DEVICES from
// the local rank): every process sees one GPU, numbered 0.
TEST(DeviceSelect, OneVisibleGpuPerProcessIsGpuZero) {
  for (int local = 0; local < 8; ++local) {
    auto gpu = selectDevice(local, 1, {});
    ASSERT_TRUE(gpu) << gpu.status().message();
    EXPECT_EQ(*gpu, 0) << "local rank " << local;
  }
}

// mpirun with every GPU of the node visible: local rank i on GPU i.
TEST(DeviceSelect, AllGpusVisibleIsTheLocalRank) {
  for (int local = 0; local < 8; ++local) {
    auto gpu = selectDevice(local, 8, {});
    ASSERT_TRUE(gpu);
    EXPECT_EQ(*gpu, local);
  }
}

// Any other split (two GPUs per process, say): the local rank modulo what
// the process sees.
TEST(DeviceSelect, LocalRankModuloVisibleCount) {
  EXPECT_EQ(*selectDevice(0, 2, {}), 0);
  EXPECT_EQ(*selectDevice(1, 2, {}), 1);
  EXPECT_EQ(*selectDevice(2, 2, {}), 0);
  EXPECT_EQ(*selectDevice(7, 2, {}), 1);
  EXPECT_EQ(*selectDevice(5, 4, {}), 1);
}

TEST(DeviceSelect, DeviceListIsIndexedByLocalRank) {
  auto gpu = selectDevice(1, 4, {3, 2, 1, 0});
  ASSERT_TRUE(gpu);
  EXPECT_EQ(*gpu, 2);
  EXPECT_EQ(*selectDevice(0, 1, {0}), 0);
  // No modulo over the list: a local rank past it is an error.
  EXPECT_HAS(errorOf(2, 4, {0, 1}),
             "local rank 2 has no GPU in the device list (2 named)");
}

TEST(DeviceSelect, DeviceListNamingAnInvisibleGpuIsAnError) {
  // --devices 3 where CUDA_VISIBLE_DEVICES leaves one GPU.
  EXPECT_HAS(errorOf(0, 1, {3}), "local rank 0 is given GPU 3, but this "
                                 "process sees 1 (GPUs 0..0; check --devices "
                                 "and CUDA_VISIBLE_DEVICES)");
  EXPECT_HAS(errorOf(1, 8, {0, 8}), "local rank 1 is given GPU 8, but this "
                                    "process sees 8 (GPUs 0..7");
  EXPECT_HAS(errorOf(0, 2, {-1}), "is given GPU -1");
}

TEST(DeviceSelect, NoVisibleGpuOrNegativeRankIsAnError) {
  EXPECT_HAS(errorOf(0, 0, {}),
             "no GPU is visible to local rank 0 (check CUDA_VISIBLE_DEVICES)");
  EXPECT_HAS(errorOf(0, 0, {0}), "no GPU is visible");
  EXPECT_HAS(errorOf(-1, 4, {}), "local rank -1 is negative");
}
