//===- Resources.h - RAII owners of CUDA objects ----------------*- C++ -*-===//
//
// One owner per CUDA object kind (TensorRT-LLM's cudaStream.h style):
// move-only, destructors never throw and ignore errors (they may run while
// an error is being reported). The NCCL communicator owner exists only
// where nccl.h is on the include path (the executor; not the kernels).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_RESOURCES_H
#define BRAID_RUNTIME_CUDA_RESOURCES_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#if __has_include(<nccl.h>)
#include <nccl.h>
#define BRAID_RESOURCES_HAVE_NCCL 1
#endif

#include <cstddef>
#include <utility>

namespace braid::rt::cuda {

template <typename T, typename Deleter> class Owner {
public:
  Owner() = default;
  explicit Owner(T value) : value_(value) {}
  Owner(Owner &&other) noexcept : value_(std::exchange(other.value_, T())) {}
  Owner &operator=(Owner &&other) noexcept {
    if (this != &other) {
      reset();
      value_ = std::exchange(other.value_, T());
    }
    return *this;
  }
  Owner(const Owner &) = delete;
  Owner &operator=(const Owner &) = delete;
  ~Owner() { reset(); }
  T get() const { return value_; }
  T *out() {
    reset();
    return &value_;
  }
  explicit operator bool() const { return value_ != T(); }
  /// Gives up ownership (e.g. to destroy the object another way).
  T release() { return std::exchange(value_, T()); }
  void reset() {
    if (value_ != T())
      Deleter()(value_);
    value_ = T();
  }

private:
  T value_ = T();
};

struct FreeDevice {
  void operator()(void *p) const { (void)cudaFree(p); }
};
struct FreeHost {
  void operator()(void *p) const { (void)cudaFreeHost(p); }
};
struct DestroyStream {
  void operator()(cudaStream_t s) const { (void)cudaStreamDestroy(s); }
};
struct DestroyEvent {
  void operator()(cudaEvent_t e) const { (void)cudaEventDestroy(e); }
};
struct DestroyGraph {
  void operator()(cudaGraph_t g) const { (void)cudaGraphDestroy(g); }
};
struct DestroyGraphExec {
  void operator()(cudaGraphExec_t g) const { (void)cudaGraphExecDestroy(g); }
};

struct DestroyCublasLt {
  void operator()(cublasLtHandle_t h) const { (void)cublasLtDestroy(h); }
};
#ifdef BRAID_RESOURCES_HAVE_NCCL
/// ncclCommDestroy; a communicator with a stuck or failed operation is
/// instead released and given to ncclCommAbort, after the graphs that
/// captured its collectives are destroyed (RankFaults.h).
struct DestroyComm {
  void operator()(ncclComm_t c) const { (void)ncclCommDestroy(c); }
};
#endif

using DeviceMemory = Owner<void *, FreeDevice>;
/// Page-locked host memory (cudaHostAlloc): copies from and to it can be
/// captured in a CUDA Graph and run asynchronously.
using PinnedMemory = Owner<void *, FreeHost>;
using Stream = Owner<cudaStream_t, DestroyStream>;
using Event = Owner<cudaEvent_t, DestroyEvent>;
using Graph = Owner<cudaGraph_t, DestroyGraph>;
using GraphExec = Owner<cudaGraphExec_t, DestroyGraphExec>;
using CublasLtHandle = Owner<cublasLtHandle_t, DestroyCublasLt>;
#ifdef BRAID_RESOURCES_HAVE_NCCL
using NcclComm = Owner<ncclComm_t, DestroyComm>;
#endif

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_RESOURCES_H
