//===- DeviceConvert.cuh - Storage types <-> fp32 on the device -*- CUDA -*-===//
//
// How device code reads and writes every storage type (Dt): as fp32,
// integers converted; stores round to nearest even for f16/bf16 and toward
// zero for integers, exactly as HostTensor's loadAsFloat/storeFromFloat, so
// GPU results can match the CPU interpreter bit for bit. Shared by
// Kernels.cu and LocalComm.cu.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_DEVICECONVERT_CUH
#define BRAID_RUNTIME_CUDA_DEVICECONVERT_CUH

#include "runtime/cuda/DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace braid::rt::cuda::detail {

__device__ __forceinline__ float load(In t, int64_t i) {
  switch (t.dt) {
  case Dt::F32:
    return static_cast<const float *>(t.data)[i];
  case Dt::F16:
    return __half2float(static_cast<const __half *>(t.data)[i]);
  case Dt::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(t.data)[i]);
  case Dt::I32:
    return float(static_cast<const int32_t *>(t.data)[i]);
  case Dt::I64:
    return float(static_cast<const int64_t *>(t.data)[i]);
  }
  return 0.0f;
}

/// Integer reads (ids, positions); float storage truncates, as loadAsInt.
__device__ __forceinline__ int64_t loadInt(In t, int64_t i) {
  switch (t.dt) {
  case Dt::I32:
    return static_cast<const int32_t *>(t.data)[i];
  case Dt::I64:
    return static_cast<const int64_t *>(t.data)[i];
  default:
    return int64_t(load(t, i));
  }
}

__device__ __forceinline__ void store(Out t, int64_t i, float v) {
  switch (t.dt) {
  case Dt::F32:
    static_cast<float *>(t.data)[i] = v;
    return;
  case Dt::F16:
    static_cast<__half *>(t.data)[i] = __float2half_rn(v);
    return;
  case Dt::BF16:
    static_cast<__nv_bfloat16 *>(t.data)[i] = __float2bfloat16_rn(v);
    return;
  case Dt::I32:
    static_cast<int32_t *>(t.data)[i] = int32_t(v); // toward zero
    return;
  case Dt::I64:
    static_cast<int64_t *>(t.data)[i] = int64_t(v);
    return;
  }
}

} // namespace braid::rt::cuda::detail

#endif // BRAID_RUNTIME_CUDA_DEVICECONVERT_CUH
