//===- GemmFusion.h - Matmul -> bias add -> tanh GELU as one GEMM -*- C++ -*-===//
//
// cuBLASLt applies a bias add and a tanh GELU in the GEMM's epilogue, on the
// fp32 accumulator, before the one rounding to the storage type: the add
// and gelu kernels (and a round trip of the matmul's result through memory)
// disappear. GPT-2's c_attn and c_fc and Qwen2's q/k/v projections have this
// shape; LLaMA's projections have no bias.
//
// The plan is not changed: the executor finds the chains at load time and
// skips the absorbed ops. A chain is fused only when nothing can observe the
// difference: the matmul's result (and the add's, when a GELU follows) has
// no other reader and is not an output or state; the ops are adjacent on
// one stream of a single-stream function, with no events between them; the
// bias is [N] of the result's dtype; and the final result's buffer overlaps
// no operand of the chain (the GEMM writes it while still reading them).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_GEMMFUSION_H
#define BRAID_RUNTIME_CUDA_GEMMFUSION_H

#include "runtime/plan_generated.h"

#include <map>
#include <vector>

namespace braid::rt::cuda {

struct GemmEpilogue {
  int bias = -1;      // tensor index of the [N] bias; -1: none
  bool gelu = false;  // tanh GELU after the bias
  int output = -1;    // tensor the fused GEMM writes
  std::vector<int> absorbed; // op indices not launched
};

/// Fusable chains of `f`, by the index of their matmul op.
std::map<int, GemmEpilogue> findGemmEpilogues(const braid::plan::Function &f);

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_GEMMFUSION_H
