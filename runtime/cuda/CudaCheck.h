//===- CudaCheck.h - CUDA runtime errors as Status --------------*- C++ -*-===//
//
// BRAID_CUDA_CHECK(expr) evaluates a CUDA runtime call and, when it fails,
// returns from the enclosing function a Status naming the call, the file,
// the line and cudaGetErrorName/cudaGetErrorString (IREE's status_util.h,
// TensorRT-LLM's TLLM_CUDA_CHECK). The enclosing function must return Status
// (or an Expected<T>, which is built from a Status). BRAID_CUBLAS_CHECK and
// BRAID_NCCL_CHECK (LibraryCheck.h) follow the same shape.
//
// No check here synchronizes, so the macros are safe while a stream is
// being captured into a CUDA Graph.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_CUDACHECK_H
#define BRAID_RUNTIME_CUDA_CUDACHECK_H

#include "runtime/Status.h"

#include <cuda_runtime_api.h>

namespace braid::rt::cuda {

/// The Status for `error` raised by `expr` at `file`:`line` (ok for
/// cudaSuccess).
Status cudaStatus(cudaError_t error, const char *expr, const char *file,
                  int line);

/// Ok when at least one CUDA device can be used; otherwise an error that
/// says why not, in words a test can print as its skip reason: no NVIDIA
/// driver, a driver too old for this CUDA runtime, or no device. Makes no
/// context current beyond what cudaGetDeviceCount does, and clears the
/// runtime's last-error state it leaves behind.
Status cudaDeviceAvailable();

/// One line per fact, for `braid-run --probe-gpu` and the test suites' one
/// GPU check: the driver's and the runtime's CUDA versions, then each
/// device (name, compute capability, multiprocessors, memory). An error
/// (cudaDeviceAvailable's) when no device can be used.
Expected<std::string> describeGpus();

} // namespace braid::rt::cuda

/// The Status of a CUDA call, for code that must go on after a failure.
#define BRAID_CUDA_STATUS(expr)                                                \
  ::braid::rt::cuda::cudaStatus((expr), #expr, __FILE__, __LINE__)

#define BRAID_CUDA_CHECK(expr)                                                 \
  do {                                                                         \
    cudaError_t braidCudaError_ = (expr);                                      \
    if (braidCudaError_ != cudaSuccess)                                        \
      return ::braid::rt::cuda::cudaStatus(braidCudaError_, #expr, __FILE__,   \
                                           __LINE__);                          \
  } while (0)

/// After a kernel launch: launch-configuration errors (and sticky errors of
/// earlier asynchronous work) surface through cudaGetLastError.
#define BRAID_CUDA_CHECK_LAUNCH() BRAID_CUDA_CHECK(cudaGetLastError())

#endif // BRAID_RUNTIME_CUDA_CUDACHECK_H
