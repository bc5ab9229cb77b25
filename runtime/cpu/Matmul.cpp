//===- Matmul.cpp - braid.matmul ------------------------------------------===//
//
// Every element of C is one sum in k order, acc = 0 then acc += a * b,
// exactly as matmulReference computes it: the blocking below changes which
// elements are computed together, never the arithmetic of one, so results
// are bit for bit the reference's (and a plan cut into chunks, whose rows
// are computed apart, gives the uncut plan's bits).
//
// Columns of op(B) are packed kPanel at a time into a k x kPanel f32
// panel (contiguous, in cache; B is converted from its storage dtype here,
// one panel at a time), and kRows rows of op(A) run against it at once:
// op(B) is read from memory once, not once per row, and the inner update
// is kRows x kPanel independent accumulators the compiler vectorizes
// without reordering any sum. Fewer rows than kRows against B^T (a decode
// step) read kPanel rows of B in place side by side instead, and a large
// product's columns are split across threads; neither changes a sum.
//
//===----------------------------------------------------------------------===//
#include "runtime/Threads.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

using namespace braid::rt;
using namespace braid::rt::cpu;

namespace {

constexpr int64_t kPanel = 16; // columns of C per panel
constexpr int64_t kRows = 4;   // rows of C per pass over a panel

struct Operands {
  const float *a;  // op(A)'s storage, f32
  FView b;         // this batch's B
  int64_t bOffset; // its first element
  int64_t m, n, k;
  bool transposeA, transposeB;
  float aAt(int64_t i, int64_t kk) const {
    return transposeA ? a[kk * m + i] : a[i * k + kk];
  }
};

// Inlined into panelsWide's clones, so that each is compiled for its
// instruction set.
#define BRAID_INLINE inline __attribute__((always_inline))

/// Columns [j0, j0 + width) of op(B) as panel[kk * kPanel + jj], zero
/// past `width`; `row` holds k floats.
BRAID_INLINE void packPanel(const Operands &o, int64_t j0, int64_t width,
                            float *panel, float *row) {
  std::fill_n(panel, size_t(o.k * kPanel), 0.0f);
  if (o.transposeB) {
    // Row j of B is column j of op(B): read each row once, in order.
    for (int64_t jj = 0; jj < width; ++jj) {
      o.b.read(o.bOffset + (j0 + jj) * o.k, o.k, row);
      for (int64_t kk = 0; kk < o.k; ++kk)
        panel[kk * kPanel + jj] = row[kk];
    }
  } else {
    for (int64_t kk = 0; kk < o.k; ++kk)
      o.b.read(o.bOffset + kk * o.n + j0, width, panel + kk * kPanel);
  }
}

/// C[i0 .. i0 + Rows) x [j0, j0 + width) from one panel.
template <int64_t Rows>
BRAID_INLINE void rowsTimesPanel(const Operands &o, const float *panel,
                                 int64_t i0, int64_t j0, int64_t width,
                                 float *c) {
  float acc[Rows][kPanel] = {};
  for (int64_t kk = 0; kk < o.k; ++kk) {
    const float *p = panel + kk * kPanel;
    for (int64_t r = 0; r < Rows; ++r) {
      float av = o.aAt(i0 + r, kk);
      for (int64_t jj = 0; jj < kPanel; ++jj)
        acc[r][jj] += av * p[jj];
    }
  }
  for (int64_t r = 0; r < Rows; ++r)
    std::copy_n(acc[r], size_t(width), c + (i0 + r) * o.n + j0);
}

/// Columns [jBegin, jEnd) of C.
BRAID_INLINE void panels(const Operands &o, float *c, int64_t jBegin,
                         int64_t jEnd) {
  std::vector<float> panel(size_t(o.k * kPanel)), row(size_t(o.k));
  for (int64_t j0 = jBegin; j0 < jEnd; j0 += kPanel) {
    int64_t width = std::min(kPanel, jEnd - j0);
    packPanel(o, j0, width, panel.data(), row.data());
    int64_t i = 0;
    for (; i + kRows <= o.m; i += kRows)
      rowsTimesPanel<kRows>(o, panel.data(), i, j0, width, c);
    for (; i < o.m; ++i)
      rowsTimesPanel<1>(o, panel.data(), i, j0, width, c);
  }
}

// Row blocks in 256-bit registers where the CPU has them (AVX2 without
// FMA: a multiply and an add, each rounded, exactly as in the default
// clone). Measured slower than SSE for a single row (bench/CpuBench.cpp),
// where packing the panel dominates.
__attribute__((target_clones("avx2", "default"))) void
panelsWide(const Operands &o, float *c, int64_t jBegin, int64_t jEnd) {
  panels(o, c, jBegin, jEnd);
}

/// A few rows against B^T stored as f32 or bf16 (a decode step's
/// projections): kPanel rows of B read in place side by side, one
/// accumulator each, instead of packing a panel that only one row uses.
template <typename Load>
BRAID_INLINE void rowsAgainstRowsOfB(const Operands &o, float *c,
                                     int64_t jBegin, int64_t jEnd, Load load) {
  for (int64_t i = 0; i < o.m; ++i)
    for (int64_t j0 = jBegin; j0 < jEnd; j0 += kPanel) {
      int64_t width = std::min(kPanel, jEnd - j0);
      int64_t base = o.bOffset + j0 * o.k;
      float acc[kPanel] = {};
      if (width == kPanel) { // a constant trip count, kept in registers
        for (int64_t kk = 0; kk < o.k; ++kk) {
          float av = o.aAt(i, kk);
          for (int64_t jj = 0; jj < kPanel; ++jj)
            acc[jj] += av * load(base + jj * o.k + kk);
        }
      } else {
        for (int64_t kk = 0; kk < o.k; ++kk) {
          float av = o.aAt(i, kk);
          for (int64_t jj = 0; jj < width; ++jj)
            acc[jj] += av * load(base + jj * o.k + kk);
        }
      }
      std::copy_n(acc, size_t(width), c + i * o.n + j0);
    }
}

/// Columns [jBegin, jEnd) of C (jBegin a multiple of kPanel).
void blockedColumns(const Operands &o, float *c, int64_t jBegin, int64_t jEnd) {
  if (o.m >= kRows)
    return panelsWide(o, c, jBegin, jEnd);
  if (o.transposeB && o.b.dtype == DType::F32) {
    const float *b = static_cast<const float *>(o.b.data);
    return rowsAgainstRowsOfB(o, c, jBegin, jEnd,
                              [b](int64_t e) { return b[e]; });
  }
  if (o.transposeB && o.b.dtype == DType::BF16) {
    const uint8_t *b = static_cast<const uint8_t *>(o.b.data);
    return rowsAgainstRowsOfB(o, c, jBegin, jEnd, [b](int64_t e) {
      uint16_t h;
      std::memcpy(&h, b + 2 * e, 2);
      return bf16ToFloat(h);
    });
  }
  panels(o, c, jBegin, jEnd);
}

/// All of C, its columns split across up to `threads` threads (whole
/// panels each) when the product is large enough to pay for starting
/// them: each element is computed exactly as on one thread.
void blockedMatmul(const Operands &o, float *c, int threads) {
  constexpr int64_t kMacsPerThread = int64_t(1) << 22;
  int64_t panelsOfC = (o.n + kPanel - 1) / kPanel;
  splitAcrossThreads(
      panelsOfC,
      std::min<int64_t>(threads,
                        std::max<int64_t>(1, o.m * o.n * o.k / kMacsPerThread)),
      [&](int64_t begin, int64_t end) {
        blockedColumns(o, c, begin * kPanel, std::min(o.n, end * kPanel));
      },
      "matmul threads");
}

template <typename Kernel>
Expected<FTensor> batchedMatmul(const FView &a, const FView &b, bool transposeA,
                                bool transposeB, Kernel kernel) {
  auto dims = checkMatmulShapes(a.shape, b.shape, transposeA, transposeB);
  if (!dims)
    return dims.status();
  int64_t batch = dims->batch, m = dims->m, n = dims->n, k = dims->k;
  FTensor c;
  c.shape = dims->result;
  c.data.assign(size_t(batch * m * n), 0.0f);
  // No result elements, no work: the batch (or m) may still be ~2^40 when n
  // or another dim is 0, and looping over it would take minutes.
  if (c.data.empty())
    return c;
  // A is an activation (small next to B): f32 whole.
  std::vector<float> aF32;
  const float *pa = static_cast<const float *>(a.data);
  if (a.dtype != DType::F32 ||
      reinterpret_cast<uintptr_t>(a.data) % alignof(float) != 0) {
    aF32.resize(size_t(batch * m * k));
    a.read(0, int64_t(aF32.size()), aF32.data());
    pa = aF32.data();
  }
  for (int64_t bi = 0; bi < batch; ++bi) {
    Operands o{
        pa + bi * m * k, b,         dims->batchedB ? bi * k * n : 0, m, n, k,
        transposeA,      transposeB};
    kernel(o, c.data.data() + bi * m * n);
  }
  return c;
}

} // namespace

Expected<FTensor> cpu::matmul(const FView &a, const FView &b, bool transposeA,
                              bool transposeB, int threads) {
  return batchedMatmul(
      a, b, transposeA, transposeB,
      [threads](const Operands &o, float *c) { blockedMatmul(o, c, threads); });
}

Expected<FTensor> cpu::matmul(const FTensor &a, const FTensor &b,
                              bool transposeA, bool transposeB, int threads) {
  return matmul(a.view(), b.view(), transposeA, transposeB, threads);
}

Expected<FTensor> cpu::matmulReference(const FView &a, const FView &b,
                                       bool transposeA, bool transposeB) {
  return batchedMatmul(
      a, b, transposeA, transposeB, [](const Operands &o, float *c) {
        float bv = 0.0f;
        for (int64_t i = 0; i < o.m; ++i)
          for (int64_t j = 0; j < o.n; ++j) {
            float acc = 0.0f;
            for (int64_t kk = 0; kk < o.k; ++kk) {
              o.b.read(o.bOffset + (o.transposeB ? j * o.k + kk : kk * o.n + j),
                       1, &bv);
              acc += o.aAt(i, kk) * bv;
            }
            c[i * o.n + j] = acc;
          }
      });
}
