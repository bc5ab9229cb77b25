//===- Gemm.h - braid.matmul through cuBLASLt -------------------*- C++ -*-===//
//
// Row-major C[b] = op(A[b]) op(B[b]) (B shared when not batched), bf16/fp16/
// fp32 storage with fp32 accumulation (CUBLAS_COMPUTE_32F), as the CPU
// reference computes. cuBLASLt is column-major, so the plan computes
// C^T = op(B)^T op(A)^T. The algorithm is chosen by cuBLASLt's heuristic
// once, when the plan is built, with a fixed workspace: nothing is queried
// or allocated while a stream is being captured into a CUDA Graph.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_GEMM_H
#define BRAID_RUNTIME_CUDA_GEMM_H

#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

namespace braid::rt::cuda {

struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false;
  bool batchedB = false; // B carries A's batch dims
  DType dtype = DType::BF16;
  // Epilogue (GemmFusion.h), applied to the fp32 accumulator before the
  // rounding: C = gelu_tanh(A B + bias), bias [N] broadcast over rows.
  // Only for batch 1 (after folding).
  bool bias = false;
  bool gelu = false;
};

/// The GemmShape of a plan matmul with operand shapes `a`, `b`.
Expected<GemmShape> gemmShapeOf(const Shape &a, const Shape &b, bool transA,
                                bool transB, DType dtype);

class GemmPlan {
public:
  /// cuBLASLt's first heuristic choice: what the executor runs.
  static Expected<GemmPlan> create(cublasLtHandle_t handle,
                                   const GemmShape &shape,
                                   size_t workspaceBytes);
  /// Up to `count` of the heuristic's algorithms, best-ranked first (for
  /// timing them against each other: bench/CudaBench.cpp).
  static Expected<std::vector<GemmPlan>>
  candidates(cublasLtHandle_t handle, const GemmShape &shape,
             size_t workspaceBytes, int count);
  /// `bias`: the [N] bias when shape().bias (else ignored).
  Status run(cublasLtHandle_t handle, const void *a, const void *b, void *c,
             void *workspace, size_t workspaceBytes, cudaStream_t stream,
             const void *bias = nullptr) const;
  const GemmShape &shape() const { return shape_; }

private:
  struct Descriptors;
  GemmShape shape_;
  std::shared_ptr<Descriptors> d_; // shared by a shape's candidates
  cublasLtMatmulAlgo_t algo_{};
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_GEMM_H
