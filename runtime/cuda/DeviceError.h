//===- DeviceError.h - Errors found by kernels on the device ----*- C++ -*-===//
//
// Some checks can only run on the device: the attention position lives in a
// device buffer (so one captured CUDA Graph serves every decode step), and
// the host never sees its value. A kernel that finds such an error records
// the first one in a DeviceErrorRecord in device memory; later kernels that
// depend on the check skip their work while a record is set; the host reads
// and clears it after the stream (or graph) has run (DeviceErrorFlag in
// Kernels.h), and words it exactly as the CPU kernel does.
//
// Plain data only: included by host code and by Kernels.cu.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_DEVICEERROR_H
#define BRAID_RUNTIME_CUDA_DEVICEERROR_H

#include <cstdint>

namespace braid::rt::cuda {

enum DeviceErrorCode : int32_t {
  kDeviceErrorNone = 0,
  /// attention with a KV cache: args = {batch, first row, end row, max_seq}.
  kDeviceErrorAttentionPosition = 1,
};

struct DeviceErrorRecord {
  int32_t code; // DeviceErrorCode; 0: no error recorded
  int32_t reserved;
  int64_t args[4];
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_DEVICEERROR_H
