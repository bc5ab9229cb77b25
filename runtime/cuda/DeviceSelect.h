//===- DeviceSelect.h - Which GPU a rank runs on ----------------*- C++ -*-===//
//
// The arithmetic alone, with no CUDA include, so it is unit-tested on
// machines without the toolkit. Under mpirun/srun each process runs one
// rank: with CUDA_VISIBLE_DEVICES set per rank (srun --gpus-per-task, most
// cluster launchers) it sees a single GPU, numbered 0, whatever its local
// rank; with every GPU of the node visible, local rank i runs on GPU i.
// Both are the local rank modulo the number of visible GPUs. An explicit
// device list (braid-run --devices) is indexed by the local rank instead.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_DEVICESELECT_H
#define BRAID_RUNTIME_CUDA_DEVICESELECT_H

#include "runtime/Status.h"

#include <vector>

namespace braid::rt::cuda {

/// The GPU (an index among the `visibleCount` this process sees) for the
/// process or rank at `localRank` on its node: devices[localRank] when
/// `devices` is given, else localRank % visibleCount. An error when no GPU
/// is visible, when the list is too short for the local rank, or when it
/// names a GPU this process does not see.
inline Expected<int> selectDevice(int localRank, int visibleCount,
                                  const std::vector<int> &devices) {
  if (localRank < 0)
    return errorf("local rank ", localRank, " is negative");
  if (visibleCount < 1)
    return errorf("no GPU is visible to local rank ", localRank,
                  " (check CUDA_VISIBLE_DEVICES)");
  if (devices.empty())
    return localRank % visibleCount;
  if (size_t(localRank) >= devices.size())
    return errorf("local rank ", localRank, " has no GPU in the device list (",
                  devices.size(), " named)");
  int gpu = devices[size_t(localRank)];
  if (gpu < 0 || gpu >= visibleCount)
    return errorf("local rank ", localRank, " is given GPU ", gpu,
                  ", but this process sees ", visibleCount, " (GPUs 0..",
                  visibleCount - 1,
                  "; check --devices and "
                  "CUDA_VISIBLE_DEVICES)");
  return gpu;
}

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_DEVICESELECT_H
