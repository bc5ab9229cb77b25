//===- Matmul.cpp - braid.matmul ------------------------------------------===//
#include "runtime/cpu/Kernels.h"

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::matmul(const FTensor &a, const FTensor &b,
                              bool transposeA, bool transposeB) {
  size_t ra = a.shape.size(), rb = b.shape.size();
  if (ra < 2 || rb < 2)
    return errorf("matmul: operands need rank >= 2, got ", formatShape(a.shape),
                  " and ", formatShape(b.shape));
  // b is either a plain [K, N] matrix or carries a's batch dims.
  bool batchedB = rb > 2;
  if (batchedB && rb != ra)
    return errorf("matmul: batched b ", formatShape(b.shape),
                  " must have a's rank ", ra);
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < ra; ++i) {
    if (batchedB && a.shape[i] != b.shape[i])
      return errorf("matmul: batch dim ", i, " differs: ", formatShape(a.shape),
                    " vs ", formatShape(b.shape));
    batch *= a.shape[i];
  }
  int64_t m = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t ka = transposeA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  if (ka != kb)
    return errorf("matmul: contraction sizes differ: a ", formatShape(a.shape),
                  " gives K=", ka, ", b ", formatShape(b.shape),
                  " gives K=", kb);
  FTensor c;
  c.shape.assign(a.shape.begin(), a.shape.end() - 2);
  c.shape.push_back(m);
  c.shape.push_back(n);
  c.data.assign(size_t(batch * m * n), 0.0f);
  int64_t k = ka;
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
