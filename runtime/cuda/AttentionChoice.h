//===- AttentionChoice.h - Which kernel runs attention ------*- C++ -*-===//
//
// The CUDA executor has two attention kernels: the split-KV kernel on CUDA
// cores (any dtype and head_dim) and the tensor-core kernel
// (AttentionTensorCore.cuh: bf16/f16, head_dim 16 to 128 in the steps it is
// built for). Where the tensor-core kernel does not apply the split kernel
// runs whatever is asked; this header decides what to ask for.
//
// No CUDA include: the choice is unit-tested without a GPU
// (test/runtime/AttentionChoiceTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_CUDA_ATTENTIONCHOICE_H
#define BRAID_RUNTIME_CUDA_ATTENTIONCHOICE_H

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace braid::rt::cuda {

/// ExecutorOptions::attentionKernel.
enum class AttentionKernel { Auto, Split, TensorCore };

/// braid-run's spelling of each choice (--attention-kernel).
inline const char *attentionKernelName(AttentionKernel choice) {
  switch (choice) {
  case AttentionKernel::Auto:
    return "auto";
  case AttentionKernel::Split:
    return "split";
  case AttentionKernel::TensorCore:
    return "tensor-core";
  }
  return "auto";
}

/// The choice braid-run's --attention-kernel spells `name`; nullopt for an
/// unknown name.
inline std::optional<AttentionKernel>
parseAttentionKernel(std::string_view name) {
  for (AttentionKernel k : {AttentionKernel::Auto, AttentionKernel::Split,
                            AttentionKernel::TensorCore})
    if (name == attentionKernelName(k))
      return k;
  return std::nullopt;
}

/// Auto's smallest KV cache for tensor cores. On an H100 the decode op over
/// caches of 256, 1024, 2048 and 4096 rows took 13 to 26% less time on
/// tensor cores (docs/benchmarks.md). Below 256 rows the op was not timed
/// alone (whole steps of plans with 16 to 64 rows differ by less than their
/// run-to-run spread), so the split kernel, the older one, stays there.
constexpr int64_t kTensorCoreAutoCacheRows = 256;

/// Whether to ask for tensor cores for an attention op whose queries have
/// shape `q` ([batch, seq, heads, head_dim]) and whose KV cache has
/// `cacheRows` rows (0: no cache). Auto: a decode step (one query per
/// sequence) over a cache of at least kTensorCoreAutoCacheRows rows.
inline bool tensorCoreAttention(AttentionKernel choice,
                                const std::vector<int64_t> &q,
                                int64_t cacheRows) {
  switch (choice) {
  case AttentionKernel::Split:
    return false;
  case AttentionKernel::TensorCore:
    return true;
  case AttentionKernel::Auto:
    return q.size() == 4 && q[1] == 1 && cacheRows >= kTensorCoreAutoCacheRows;
  }
  return false;
}

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_ATTENTIONCHOICE_H
