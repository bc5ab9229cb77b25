//===- Softmax.cpp - braid.softmax ----------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <algorithm>
#include <cmath>

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::softmax(const FTensor &x, int64_t dim) {
  auto dims = checkSoftmaxShape(x.shape, dim);
  if (!dims)
    return dims.status();
  int64_t n = dims->n, inner = dims->inner, outer = dims->outer;
  FTensor y{x.shape, std::vector<float>(x.data.size())};
  if (y.data.empty()) // outer x inner may be huge when the dim is 0
    return y;
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
