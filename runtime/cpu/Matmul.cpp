//===- Matmul.cpp - braid.matmul ------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::matmul(const FTensor &a, const FTensor &b,
                              bool transposeA, bool transposeB) {
  auto dims = checkMatmulShapes(a.shape, b.shape, transposeA, transposeB);
  if (!dims)
    return dims.status();
  int64_t batch = dims->batch, m = dims->m, n = dims->n, k = dims->k;
  bool batchedB = dims->batchedB;
  FTensor c;
  c.shape = dims->result;
  c.data.assign(size_t(batch * m * n), 0.0f);
  // No result elements, no work: the batch (or m) may still be ~2^40 when n
  // or another dim is 0, and looping over it would take minutes.
  if (c.data.empty())
    return c;
  for (int64_t bi = 0; bi < batch; ++bi) {
    const float *pa = a.data.data() + bi * m * k;
    const float *pb = b.data.data() + (batchedB ? bi * k * n : 0);
    float *pc = c.data.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < k; ++kk) {
          float av = transposeA ? pa[kk * m + i] : pa[i * k + kk];
          float bv = transposeB ? pb[j * k + kk] : pb[kk * n + j];
          acc += av * bv;
        }
        pc[i * n + j] = acc;
      }
  }
  return c;
}
