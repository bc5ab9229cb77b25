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
  // Epilogue (a matmul's matmul_bias / matmul_residual / matmul_gelu,
  // decided by braid-fuse-compute), applied to the fp32 accumulator before
  // the rounding: C = gelu_tanh(A B + bias), bias [N] broadcast over rows,
  // or C = A B + bias + R with R the residual [M, N] (cuBLASLt's C input,
  // beta 1; not with the GELU, which cuBLASLt applies after it). Only for
  // batch 1 (after folding).
  bool bias = false;
  bool gelu = false;
  bool residual = false;
};

/// The GemmShape of a plan matmul with operand shapes `a`, `b` (the CPU
/// kernel's shape rules, cpu/ShapeRules.h, which the plan loader enforces).
Expected<GemmShape> gemmShapeOf(const Shape &a, const Shape &b, bool transA,
                                bool transB, DType dtype);

/// The byte alignment of the operands' addresses that the algorithm may
/// rely on. cuBLASLt assumes 256 for every pointer it is told nothing about
/// (its default preferences, a null bias pointer), and an algorithm chosen
/// that way fails, or is not allowed to run, on an arena tensor at a
/// smaller offset.
struct GemmAlignment {
  uint32_t a = 256, b = 256, c = 256, bias = 256, residual = 256;
};
/// The largest power of two up to 256 that divides `p`'s address.
uint32_t addressAlignment(const void *p);

class GemmPlan {
public:
  /// cuBLASLt's first heuristic choice for operands aligned as `align`:
  /// what the executor runs. An error when cuBLASLt has none (a fused
  /// epilogue it cannot run for this shape or alignment, say).
  static Expected<GemmPlan> create(cublasLtHandle_t handle,
                                   const GemmShape &shape,
                                   size_t workspaceBytes,
                                   const GemmAlignment &align = {});
  /// Up to `count` of the heuristic's algorithms, best-ranked first (for
  /// timing them against each other: bench/CudaBench.cpp).
  static Expected<std::vector<GemmPlan>>
  candidates(cublasLtHandle_t handle, const GemmShape &shape,
             size_t workspaceBytes, int count, const GemmAlignment &align = {});
  /// The operands a GEMM runs on, for timing candidates on them.
  struct Operands {
    const void *a = nullptr, *b = nullptr;
    void *c = nullptr;
    const void *bias = nullptr, *residual = nullptr;
  };
  /// Autotuning: of up to `count` of the heuristic's algorithms, the one
  /// that runs `operands` fastest, each timed with CUDA events over
  /// `iters` runs after one untimed run, on `stream` (synchronized: never
  /// while it is being captured). The heuristic ranks by a model, and
  /// measured it is off by up to 1.18x on prefill shapes
  /// (docs/benchmarks.md). A candidate that fails to run is skipped; with
  /// count 1 or one candidate nothing runs. Writes operands.c (pass a
  /// scratch buffer where the result must not change).
  static Expected<GemmPlan> fastest(cublasLtHandle_t handle,
                                    const GemmShape &shape,
                                    size_t workspaceBytes, int count,
                                    const GemmAlignment &align,
                                    const Operands &operands, void *workspace,
                                    cudaStream_t stream, int iters = 5);
  /// `bias`: the [N] bias when shape().bias, `residual` the [M, N] residual
  /// when shape().residual (else ignored). Every pointer
  /// must be at least as aligned as the plan was made for (checked on the
  /// host, nothing synchronizes: safe while capturing). An empty result
  /// launches nothing; K = 0 zero-fills the result.
  Status run(cublasLtHandle_t handle, const void *a, const void *b, void *c,
             void *workspace, size_t workspaceBytes, cudaStream_t stream,
             const void *bias = nullptr, const void *residual = nullptr) const;
  const GemmShape &shape() const { return shape_; }

private:
  struct Descriptors;
  GemmShape shape_;
  GemmAlignment align_;
  std::shared_ptr<Descriptors> d_; // shared by a shape's candidates; null
                                   // for an empty GEMM (no cuBLASLt call)
  cublasLtMatmulAlgo_t algo_{};
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_GEMM_H
