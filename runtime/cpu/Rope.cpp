//===- Rope.cpp - braid.rope (Hugging Face rotate_half) -------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <cmath>

using namespace braid::rt;
using namespace braid::rt::cpu;

RopeParams cpu::ropeParamsOf(const braid::plan::Op &op) {
  RopeParams p(op.theta());
  if (const auto *inv = op.rope_inv_freq())
    p.invFreq.assign(inv->begin(), inv->end());
  p.attentionFactor = op.rope_attention_factor();
  p.rotaryDim = op.rope_rotary_dim();
  return p;
}

std::vector<double> cpu::ropeInvFreq(const RopeParams &p, int64_t headDim) {
  if (!p.invFreq.empty())
    return p.invFreq;
  int64_t rotary = p.rotaryDim ? p.rotaryDim : headDim;
  std::vector<double> inv(size_t(rotary / 2));
  for (int64_t i = 0; i < rotary / 2; ++i)
    inv[size_t(i)] = std::pow(p.theta, -2.0 * double(i) / double(rotary));
  return inv;
}

Expected<FTensor> cpu::rope(const FTensor &x, const ITensor &positions,
                            const RopeParams &p) {
  auto dims = checkRopeShapes(x.shape, positions.shape, p.rotaryDim);
  if (!dims)
    return dims.status();
  int64_t b = dims->b, s = dims->s, h = dims->h, d = dims->d;
  int64_t rotary = p.rotaryDim ? p.rotaryDim : d;
  int64_t half = rotary / 2;
  // Elements past the rotary dim pass through.
  FTensor y{x.shape, x.data};
  if (y.data.empty()) // no per-position work for an empty tensor
    return y;
  if (!p.invFreq.empty() && int64_t(p.invFreq.size()) != half)
    return errorf("rope: ", p.invFreq.size(), " frequencies for ", half,
                  " rotated pairs");
  std::vector<double> invFreq = ropeInvFreq(p, d);
  float factor = float(p.attentionFactor);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < s; ++si) {
      double pos = double(positions.data[size_t(bi * s + si)]);
      for (int64_t i = 0; i < half; ++i) {
        // Element i pairs with i + D/2 at frequency invFreq[i]
        // (theta^(-2i/D) unscaled); transformers scales cos and sin in fp32.
        double angle = pos * invFreq[size_t(i)];
        float c = float(std::cos(angle)) * factor;
        float sn = float(std::sin(angle)) * factor;
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
