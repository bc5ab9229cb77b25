//===- Rope.cpp - braid.rope (Hugging Face rotate_half) -------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <cmath>

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::rope(const FTensor &x, const ITensor &positions,
                            double theta) {
  auto dims = checkRopeShapes(x.shape, positions.shape);
  if (!dims)
    return dims.status();
  int64_t b = dims->b, s = dims->s, h = dims->h, d = dims->d;
  int64_t half = d / 2;
  FTensor y{x.shape, std::vector<float>(x.data.size())};
  if (y.data.empty()) // no per-position work for an empty tensor
    return y;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < s; ++si) {
      double pos = double(positions.data[size_t(bi * s + si)]);
      for (int64_t i = 0; i < half; ++i) {
        // Element i pairs with i + D/2 at frequency theta^(-2i/D).
        double angle = pos * std::pow(theta, -2.0 * double(i) / double(d));
        float c = float(std::cos(angle)), sn = float(std::sin(angle));
        for (int64_t hi = 0; hi < h; ++hi) {
          size_t base = size_t(((bi * s + si) * h + hi) * d);
          float x1 = x.data[base + size_t(i)];
          float x2 = x.data[base + size_t(i + half)];
          y.data[base + size_t(i)] = x1 * c - x2 * sn;
          y.data[base + size_t(i + half)] = x2 * c + x1 * sn;
        }
      }
    }
  return y;
}
