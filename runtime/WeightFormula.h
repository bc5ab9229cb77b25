//===- WeightFormula.h - Deterministic weights, host and device -*- C++ -*-===//
//
// The one definition of the synthetic weights, compiled by the host compiler
// (runtime/Weights.cpp) and by nvcc (the CUDA executor generates parameters
// on the GPU with it), so both give bit-identical values:
//
//   value(seed, name, i) = scale * u          (1 + scale * u for norm weights)
//   u = 24 random bits of splitmix64(seed ^ splitmix64(fnv1a(name) + i))
//       mapped exactly onto [-1, 1)
//
// where scale is one fp32 number per tensor, chosen by an Amplitude on the
// host (runtime/Weights.h, weightScale): 0.02 for every tensor by default.
//
// where i is the element's row-major index in the FULL (unpadded) tensor, and
// LocalIndexMap turns a rank's local element index into that i (or -1 for
// padding) under a braid.parameter shard rule. Plain C++ only: no Status, no
// std:: containers, nothing a device function cannot call.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_WEIGHTFORMULA_H
#define BRAID_RUNTIME_WEIGHTFORMULA_H

#include <cstdint>

#if defined(__CUDACC__)
#define BRAID_HOST_DEVICE __host__ __device__
#else
#define BRAID_HOST_DEVICE
#endif

namespace braid::rt::weights {

/// The default (Amplitude::Flat) scale of every tensor.
constexpr float kScale = 0.02f;
constexpr int kMaxRank = 8;

/// How large the synthetic weights are (runtime/Weights.h, weightScale).
enum class Amplitude : uint8_t {
  /// Every tensor scale kScale: the default. Small enough that no config
  /// overflows, but attention over such weights is nearly uniform, so a
  /// RoPE, mask or softmax-scale error barely moves the logits.
  Flat,
  /// A tensor of rank >= 2 has std 1/sqrt(its last dim): scale
  /// sqrt(3 / last dim), rounded once to fp32. The last dim is the fan-in
  /// of an [out, in] Linear; of GPT-2's Conv1D ([in, out], as its
  /// checkpoints store it) it is the fan-out, which keeps activations O(1)
  /// all the same.
  /// Vectors (biases, norm offsets) scale kVectorScaleFanIn. Activations
  /// and attention scores are O(1), as in a trained model.
  FanIn,
};
constexpr float kVectorScaleFanIn = 0.25f;

BRAID_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// 64-bit FNV-1a over `n` bytes (parameter names; plan fingerprints).
BRAID_HOST_DEVICE inline uint64_t fnv1a(const void *data, uint64_t n,
                                        uint64_t h = 14695981039346656037ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (uint64_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/// Element `fullIndex` of the parameter whose name hashes to `nameHash`,
/// whose tensor's scale is `scale`.
BRAID_HOST_DEVICE inline float weightFromHash(uint64_t seed, uint64_t nameHash,
                                              int64_t fullIndex, bool norm,
                                              float scale) {
  uint64_t h = splitmix64(seed ^ splitmix64(nameHash + uint64_t(fullIndex)));
  // 24 bits * 2^-23 - 1 is exact in fp32; only the scale and the norm
  // offset round. nvcc would fuse them into one FMA (one rounding, a
  // different value): the _rn intrinsics keep them two IEEE operations.
  // GCC would too where the host has FMA; the host's caller (Weights.cpp)
  // is built with -ffp-contract=off (BraidRuntime, and braid-runtime-san in
  // fuzz/).
  float u = float(h >> 40) * (1.0f / float(1 << 23)) - 1.0f;
#if defined(__CUDA_ARCH__)
  float v = __fmul_rn(scale, u);
  return norm ? __fadd_rn(1.0f, v) : v;
#else
  float v = scale * u;
  return norm ? 1.0f + v : v;
#endif
}

/// A rank's local element -> the full tensor's element, for one shard rule:
/// dim `dim` of the padded tensor is `blocks` blocks, each cut into
/// `shards` pieces; this rank holds piece `piece` of every block.
struct LocalIndexMap {
  int rank = 0;
  int dim = -1; // -1: replicated
  int64_t local[kMaxRank] = {};
  int64_t full[kMaxRank] = {};
  int64_t piece = 0, pieceLen = 1, blockLen = 1;
  int64_t localCount = 1;
};

/// Row-major index in the full tensor of local element `e`, or -1 when the
/// element is padding (zero).
BRAID_HOST_DEVICE inline int64_t fullIndexOf(const LocalIndexMap &m,
                                             int64_t e) {
  int64_t coord[kMaxRank];
  for (int d = m.rank - 1; d >= 0; --d) {
    coord[d] = e % m.local[d];
    e /= m.local[d];
  }
  int64_t lin = 0;
  for (int d = 0; d < m.rank; ++d) {
    int64_t c = coord[d];
    if (d == m.dim) {
      // Local coordinate c is in block c / pieceLen, our piece of it.
      c = (c / m.pieceLen) * m.blockLen + m.piece * m.pieceLen +
          c % m.pieceLen;
    }
    if (c >= m.full[d])
      return -1;
    lin = lin * m.full[d] + c;
  }
  return lin;
}

} // namespace braid::rt::weights

#endif // BRAID_RUNTIME_WEIGHTFORMULA_H
