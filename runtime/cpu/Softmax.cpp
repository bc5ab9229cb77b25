//===- Softmax.cpp - braid.softmax ----------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::softmax(const FTensor &x, int64_t dim) {
  int64_t rank = int64_t(x.shape.size());
  if (dim < 0 || dim >= rank)
    return errorf("softmax: dim ", dim, " out of range for ",
                  formatShape(x.shape));
  int64_t n = x.shape[size_t(dim)], inner = 1, outer = 1;
  for (int64_t d = dim + 1; d < rank; ++d)
    inner *= x.shape[size_t(d)];
  for (int64_t d = 0; d < dim; ++d)
    outer *= x.shape[size_t(d)];
  FTensor y{x.shape, std::vector<float>(x.data.size())};
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t i) { return size_t((o * n + i) * inner + in); };
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i)
        mx = std::max(mx, x.data[at(i)]);
      float sum = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        float e = std::exp(x.data[at(i)] - mx); // max-shifted for stability
        y.data[at(i)] = e;
        sum += e;
      }
      for (int64_t i = 0; i < n; ++i)
        y.data[at(i)] /= sum;
    }
  return y;
}
