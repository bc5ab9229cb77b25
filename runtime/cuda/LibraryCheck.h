//===- LibraryCheck.h - cuBLAS and NCCL error checks ------------*- C++ -*-===//
//
// Like BRAID_CUDA_CHECK (CudaCheck.h): a failing call becomes a Status that
// names the call, the file and the line, plus the library's own message
// (NCCL's ncclGetLastError carries the detail, nccl-tests' NCCLCHECK style).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_LIBRARYCHECK_H
#define BRAID_RUNTIME_CUDA_LIBRARYCHECK_H

#include "runtime/Status.h"

#include <cublasLt.h>
#include <nccl.h>

#define BRAID_CUBLAS_CHECK(expr)                                               \
  do {                                                                         \
    cublasStatus_t braidCublas_ = (expr);                                      \
    if (braidCublas_ != CUBLAS_STATUS_SUCCESS)                                 \
      return ::braid::rt::errorf(#expr, " failed at ", __FILE__, ":",          \
                                 __LINE__, ": ",                               \
                                 cublasLtGetStatusName(braidCublas_), " (",    \
                                 cublasLtGetStatusString(braidCublas_), ")");  \
  } while (0)

#define BRAID_NCCL_CHECK(expr)                                                 \
  do {                                                                         \
    ncclResult_t braidNccl_ = (expr);                                          \
    if (braidNccl_ != ncclSuccess)                                             \
      return ::braid::rt::errorf(#expr, " failed at ", __FILE__, ":",          \
                                 __LINE__, ": ",                               \
                                 ncclGetErrorString(braidNccl_), " (",         \
                                 ncclGetLastError(nullptr), ")");              \
  } while (0)

#endif // BRAID_RUNTIME_CUDA_LIBRARYCHECK_H
