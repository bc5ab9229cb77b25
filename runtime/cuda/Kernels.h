//===- Kernels.h - CUDA kernels for braid compute ops -----------*- C++ -*-===//
//
// One host-callable launcher per braid compute op (matmul excepted: that is
// cuBLASLt's, Gemm.h), with exactly the semantics and shape conventions of
// the CPU reference kernels (runtime/cpu/Kernels.h), which the tests compare
// against. Each launcher
//   - checks shapes on the host and rejects what the CPU kernel rejects,
//     with the same message, plus what only the device needs: the result
//     tensor's shape, dtype-aligned pointers for the compute ops;
//   - enqueues its kernels on `stream` and returns the launch error
//     (cudaGetLastError) as a Status; it never synchronizes, allocates or
//     queries the device, so every launcher can be captured into a CUDA
//     Graph;
//   - reads every storage dtype (F32, F16, BF16, and I32/I64) as fp32,
//     computes in fp32 and rounds once on store; ids and positions are
//     I32/I64 (float storage truncates, as HostTensor's loadAsInt).
// Outputs may alias the (same-shaped) input of silu, gelu, add/mul's lhs,
// rms_norm, layer_norm, rope and softmax; nothing else may alias.
//
// Tensor data lives in device memory, dense row-major. No CUDA type beyond
// cudaStream_t appears here.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_KERNELS_H
#define BRAID_RUNTIME_CUDA_KERNELS_H

#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/Weights.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/DeviceError.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

namespace braid::rt::cuda {

using cpu::AttentionParams;
using cpu::BinaryKind;
using cpu::GeluKind;

/// A non-owning view of a dense row-major tensor in device memory. Inputs
/// are passed as `const TensorRef &` and only read.
struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::F32;
  Shape shape;
};

// Elementwise. binary: rhs aligned to lhs's trailing dims, size-1 dims
// broadcast; the result has lhs's shape.
Status binary(BinaryKind kind, const TensorRef &lhs, const TensorRef &rhs,
              const TensorRef &out, cudaStream_t stream);
Status silu(const TensorRef &x, const TensorRef &y, cudaStream_t stream);
/// y = silu(gate) * up, same shapes (no broadcast); y may alias either.
Status swiglu(const TensorRef &gate, const TensorRef &up, const TensorRef &y,
              cudaStream_t stream);
Status gelu(const TensorRef &x, const TensorRef &y, GeluKind kind,
            cudaStream_t stream);
/// braid.activation of `kind`; an unknown kind is an error.
Status activation(const TensorRef &x, const TensorRef &y,
                  plan::ActivationKind kind, cudaStream_t stream);

// Norms over the last dim; weight and bias are [H].
Status rmsNorm(const TensorRef &x, const TensorRef &weight, const TensorRef &y,
               double epsilon, cudaStream_t stream);
/// sum = x + residual, y = rmsNorm(sum as stored): add then rms_norm in
/// one launch (two when rows are not whole 16-byte vectors). sum may alias
/// x or residual.
Status addRmsNorm(const TensorRef &x, const TensorRef &residual,
                  const TensorRef &weight, const TensorRef &sum,
                  const TensorRef &y, double epsilon, cudaStream_t stream);
Status layerNorm(const TensorRef &x, const TensorRef &weight,
                 const TensorRef &bias, const TensorRef &y, double epsilon,
                 cudaStream_t stream);

/// x, y [B, S, H, D] (D even), positions [B, S]: element i pairs with
/// i + D/2 at angle position * theta^(-2i/D) (Hugging Face rotate_half), or
/// position * invFreq[i] with a device table of D/2 frequencies (scaled
/// RoPE); cos and sin are multiplied by attentionFactor.
/// With rotaryDim R > 0 only the first R elements of each head rotate
/// (pairs i, i + R/2; R/2 table entries); the rest are copied.
Status rope(const TensorRef &x, const TensorRef &positions, const TensorRef &y,
            double theta, cudaStream_t stream, const double *invFreq = nullptr,
            double attentionFactor = 1.0, int64_t rotaryDim = 0);

/// Softmax along `dim` of any rank (max-shifted).
Status softmax(const TensorRef &x, const TensorRef &y, int64_t dim,
               cudaStream_t stream);

/// table [V, H]; out = ids.shape + [H]. `vocabStart` is the first id the
/// table holds; ids outside [vocabStart, vocabStart + V) give zero rows.
Status embedding(const TensorRef &ids, const TensorRef &table,
                 const TensorRef &out, int64_t vocabStart,
                 cudaStream_t stream);

/// Scratch for split-KV attention (flash-decoding): the keys of each
/// (batch, KV head) are split across blocks whose partial softmax results a
/// second kernel combines, so a decode step over a long cache spreads over
/// the whole GPU. Allocate attentionWorkspaceBytes once, when the plan is
/// prepared (launchers never allocate); with no workspace (or a smaller
/// one) every block walks all its keys.
struct AttentionWorkspace {
  void *data = nullptr;
  size_t bytes = 0;
  int multiprocessors = 0; // of the GPU it runs on
  /// Keys per tile (at most 32) and blocks per multiprocessor the split
  /// count aims at; 0: the defaults. For benchmarks that sweep them.
  int keyTile = 0, blocksPerMultiprocessor = 0;
  /// The tensor-core kernel where it applies (16-bit q, k, v of one dtype,
  /// head_dim 16, 32, 64, 80, 96 or 128, sm_80 or newer); off by default
  /// until measured on a GPU against the split kernel.
  bool tensorCore = false;
  /// With tensorCore and a KV cache: the tensor-core kernel also does the
  /// cache write and its position check (one launch fewer). Off by
  /// default: not yet run on a GPU since its fixes (docs/gpu.md).
  bool fuseCacheWrite = false;
};
/// Bytes of workspace attention over `keyRows` keys (S, or the cache's
/// maxS) uses on a GPU with `multiprocessors`; 0 when it would not split.
/// q [B, S, Hq, D].
size_t attentionWorkspaceBytes(const Shape &q, int64_t kvHeads, int64_t keyRows,
                               int multiprocessors, int keyTile = 0,
                               int blocksPerMultiprocessor = 0,
                               bool tensorCore = false);

/// Whether attention (with or without a cache) with a workspace asking for
/// tensor cores runs them for these q and k/v (or k/v caches), on the
/// current device: bf16 or f16 alike, 16-byte aligned, head_dim 16, 32,
/// 64, 80, 96 or 128, and the kernel built for sm_80 or newer. Otherwise
/// the split kernel runs. Tests check it so a fallback cannot pass for the
/// tensor-core kernel.
bool attentionUsesTensorCores(const TensorRef &q, const TensorRef &k,
                              const TensorRef &v);

/// q, o [B, S, Hq, D]; k, v [B, S, Hkv, D]; query head h reads KV head
/// h / (Hq / Hkv); causal: query i sees keys [0, i].
Status attention(const TensorRef &q, const TensorRef &k, const TensorRef &v,
                 const TensorRef &o, const AttentionParams &params,
                 cudaStream_t stream, const AttentionWorkspace &ws = {});

/// With a KV cache [B, maxS, Hkv, D] (k and v caches, updated in place; a
/// plan whose updated cache is another buffer copies the cache there first):
/// writes k, v at rows [position[b], position[b] + S), then query i attends
/// to rows [0, position[b] + i] (causal) or [0, position[b] + S).
/// `position` [B] is read on the device only, so one captured graph serves
/// every decode step. A position out of range is recorded in `errors`
/// (DeviceErrorFlag::get()) and the op writes nothing; read it with
/// DeviceErrorFlag::check after the stream has run. While `errors` holds a
/// record, every attentionWithCache on it does nothing.
Status attentionWithCache(const TensorRef &q, const TensorRef &k,
                          const TensorRef &v, const TensorRef &kCache,
                          const TensorRef &vCache, const TensorRef &position,
                          const TensorRef &o, const AttentionParams &params,
                          DeviceErrorRecord *errors, cudaStream_t stream,
                          const AttentionWorkspace &ws = {});

// Layout ops move bytes, so they serve every dtype; input and output dtypes
// must match. Pointers need no alignment (copies fall back to narrower
// units).

/// y = x[offsets[d] : offsets[d] + sizes[d]] in every dim; y.shape == sizes.
Status slice(const TensorRef &x, const Shape &offsets, const Shape &sizes,
             const TensorRef &y, cudaStream_t stream);
/// y = the inputs concatenated along `dim`.
Status concat(const std::vector<TensorRef> &inputs, int64_t dim,
              const TensorRef &y, cudaStream_t stream);
/// The generic N-d copy behind slice and concat, and what permutes data for
/// all_gather / reduce_scatter along a non-zero dim: for every index `idx`
/// of `sizes`, the element at dst + sum idx[d] * dstStrides[d] becomes the
/// one at src + sum idx[d] * srcStrides[d] (strides in elements, >= 0, any
/// order; destination elements must not overlap).
Status stridedCopy(void *dst, const Shape &dstStrides, const void *src,
                   const Shape &srcStrides, const Shape &sizes,
                   size_t elemSize, cudaStream_t stream);
/// reshape: the same bytes under another shape (element counts and dtypes
/// must agree); a device-to-device cudaMemcpyAsync, nothing when x and y
/// share storage.
Status reshape(const TensorRef &x, const TensorRef &y, cudaStream_t stream);

/// `param`'s initial value on world rank `worldRank`, generated on the
/// device into `out` (its local shape and dtype): bit-identical to
/// initialParameterValue (runtime/Weights.h) without a host copy.
Status generateParameter(const plan::Plan &plan, const plan::Parameter &param,
                         int worldRank, const SyntheticWeights &weights,
                         const TensorRef &out, cudaStream_t stream);

/// Owns the device-side DeviceErrorRecord that attentionWithCache reports
/// through. Create once per executor (outside graph capture).
class DeviceErrorFlag {
public:
  /// Allocates and zeroes the record (synchronously).
  static Expected<DeviceErrorFlag> create();
  DeviceErrorRecord *get() const { return record_.get(); }
  /// Waits for `stream`, reads the record and clears it; returns the first
  /// recorded error worded as the CPU kernel words it, or ok. Synchronizes:
  /// never call it while `stream` is being captured.
  Status check(cudaStream_t stream);

private:
  struct Free {
    void operator()(DeviceErrorRecord *p) const; // cudaFree, errors ignored
  };
  std::unique_ptr<DeviceErrorRecord, Free> record_;
};

/// Tests only: one thread that spins on the device for `seconds` (by the
/// global timer), then ends; what a collective stuck on a missing peer
/// looks like to the stream behind it.
Status stallForTest(double seconds, cudaStream_t stream);

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_KERNELS_H
