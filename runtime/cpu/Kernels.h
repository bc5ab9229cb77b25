//===- Kernels.h - fp32 CPU reference kernels -------------------*- C++ -*-===//
//
// One function per braid compute op, with exactly the semantics of
// docs/generated/BraidDialect.md. Kernels compute in fp32 on dense
// row-major data, validate the shapes they are given and return a Status
// instead of crashing; storage dtypes are handled by the interpreter.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CPU_KERNELS_H
#define BRAID_RUNTIME_CPU_KERNELS_H

#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <optional>
#include <vector>

namespace braid::rt::cpu {

/// Read-only elements of a shape in their storage dtype, converted to f32
/// as they are read (loadAsFloat, the interpreter's own conversion): the
/// kernels that read weights (matmul, embedding) read them in place, a
/// panel or a row at a time, instead of converting a whole copy per op (a
/// bf16 decode step used to convert every weight it multiplied by).
struct FView {
  Shape shape;
  const void *data = nullptr;
  DType dtype = DType::F32;
  /// Elements [begin, begin + n) as f32.
  void read(int64_t begin, int64_t n, float *out) const {
    loadAsFloat(dtype,
                static_cast<const uint8_t *>(data) +
                    size_t(begin) * dtypeSize(dtype),
                n, out);
  }
};
struct FTensor {
  Shape shape;
  std::vector<float> data;
  FView view() const { return {shape, data.data(), DType::F32}; }
};
struct ITensor {
  Shape shape;
  std::vector<int64_t> data;
};

enum class BinaryKind { Add, Mul };
enum class GeluKind { Erf, Tanh };

/// Blocked (Matmul.cpp), bit for bit matmulReference; a large product's
/// columns are split across up to `threads` threads.
Expected<FTensor> matmul(const FView &a, const FView &b, bool transposeA,
                         bool transposeB, int threads = 1);
Expected<FTensor> matmul(const FTensor &a, const FTensor &b, bool transposeA,
                         bool transposeB, int threads = 1);
/// The definition: one sum per element in k order. Tests and benchmarks
/// compare matmul with it.
Expected<FTensor> matmulReference(const FView &a, const FView &b,
                                  bool transposeA, bool transposeB);
Expected<FTensor> binary(BinaryKind kind, const FTensor &lhs,
                         const FTensor &rhs);
Expected<FTensor> rmsNorm(const FTensor &x, const FTensor &weight,
                          double epsilon);
Expected<FTensor> layerNorm(const FTensor &x, const FTensor &weight,
                            const FTensor &bias, double epsilon);
/// braid.rope's attributes. A plain theta (implicitly) is the default RoPE.
struct RopeParams {
  RopeParams(double theta = 10000.0) : theta(theta) {}
  double theta;
  std::vector<double> invFreq; // empty: theta^(-2i/D); else D/2 of them
  double attentionFactor = 1.0; // multiplies cos and sin (yarn)
  int64_t rotaryDim = 0; // partial rotary: the first R elements; 0: all
};
/// The attributes of a plan's rope op.
RopeParams ropeParamsOf(const plan::Op &op);
/// The R/2 frequencies `p` rotates pairs by (R: its rotary dim, else the
/// head dim D): its table, or theta^(-2i/R) in double. Both runtimes
/// compute angles from these.
std::vector<double> ropeInvFreq(const RopeParams &p, int64_t headDim);
Expected<FTensor> rope(const FTensor &x, const ITensor &positions,
                       const RopeParams &p);
FTensor silu(const FTensor &x);
/// silu(gate) * up, elementwise (same shapes), in f32: the unfused pair's
/// arithmetic with one rounding to the storage type instead of two.
Expected<FTensor> swiglu(const FTensor &gate, const FTensor &up);
FTensor gelu(const FTensor &x, GeluKind kind);
/// braid.activation of `kind` (a valid one: the loader checks), in f32.
FTensor activation(const FTensor &x, plan::ActivationKind kind);
Expected<FTensor> softmax(const FTensor &x, int64_t dim);

/// `vocabStart` is the first id this table holds (rank * V when the table is
/// a vocabulary shard, 0 otherwise); ids outside give zero rows.
Expected<FTensor> embedding(const ITensor &ids, const FView &table,
                            int64_t vocabStart);
inline Expected<FTensor> embedding(const ITensor &ids, const FTensor &table,
                                   int64_t vocabStart) {
  return embedding(ids, table.view(), vocabStart);
}

struct AttentionParams {
  bool causal = false;
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0;
  double scale = 0.0; // 0: 1/sqrt(headDim)
  /// Causal only: a query at position i sees keys (i - W, i]; 0: all.
  int64_t slidingWindow = 0;
};
/// The attributes of a plan's attention op.
AttentionParams attentionParamsOf(const plan::Op &op);
/// Without a cache. Returns o [B, S, Hq, D].
Expected<FTensor> attention(const FTensor &q, const FTensor &k,
                            const FTensor &v, const AttentionParams &p);
/// With a KV cache: writes k, v into kCache/vCache at [pos, pos+S) (in
/// place; the caches are the updated caches afterwards) and attends query i
/// to cache entries [0, pos+i] (causal; [pos+i-W+1, pos+i] with a sliding
/// window W) or [0, pos+S) (not causal).
Expected<FTensor> attentionWithCache(const FTensor &q, const FTensor &k,
                                     const FTensor &v, FTensor &kCache,
                                     FTensor &vCache, const ITensor &position,
                                     const AttentionParams &p);
/// A KV cache [B, maxS, Hkv, D] kept in its storage dtype: `entry` holds it
/// before the op, `updated` receives the updated cache (the same bytes, or
/// as many bytes not overlapping them).
struct StoredCache {
  Shape shape;
  DType dtype = DType::F32;
  const void *entry = nullptr;
  void *updated = nullptr;
};
/// attentionWithCache without converting whole caches: the entry cache is
/// copied to `updated` when they differ, k and v are stored at
/// [pos, pos+S) rounded once to the cache dtype, and attention reads only
/// the entries it attends to (converted to f32; the new ones as k and v
/// hold them, as attentionWithCache does). A decode step then costs what it
/// attends to, not the cache's max_seq. Bit for bit attentionWithCache on
/// f32 copies of the caches, stored back.
Expected<FTensor>
attentionWithStoredCache(const FTensor &q, const FTensor &k, const FTensor &v,
                         const StoredCache &kCache, const StoredCache &vCache,
                         const ITensor &position, const AttentionParams &p);

// Layout ops work on raw bytes so they serve every dtype.
struct ByteTensor {
  Shape shape;
  size_t elemSize = 4;
  std::vector<uint8_t> data;
};
Expected<ByteTensor> slice(const ByteTensor &x, const Shape &offsets,
                           const Shape &sizes);
Expected<ByteTensor> concat(const std::vector<const ByteTensor *> &inputs,
                            int64_t dim);
/// Splits `x` into `n` equal pieces along `dim`.
Expected<std::vector<ByteTensor>> split(const ByteTensor &x, int64_t dim,
                                        int64_t n);

} // namespace braid::rt::cpu

#endif // BRAID_RUNTIME_CPU_KERNELS_H
