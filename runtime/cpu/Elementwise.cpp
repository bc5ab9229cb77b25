//===- Elementwise.cpp - add, mul, silu, swiglu, gelu, activation ---------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <algorithm>
#include <cmath>

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::binary(BinaryKind kind, const FTensor &lhs,
                              const FTensor &rhs) {
  const char *name = kind == BinaryKind::Add ? "add" : "mul";
  auto bc = checkBroadcast(name, lhs.shape, rhs.shape);
  if (!bc)
    return bc.status();
  const std::vector<int64_t> &rhsStride = bc->rhsStride;
  size_t rl = lhs.shape.size();
  FTensor out{lhs.shape, std::vector<float>(lhs.data.size())};
  std::vector<int64_t> idx(rl, 0);
  for (size_t e = 0; e < lhs.data.size(); ++e) {
    int64_t r = 0;
    for (size_t d = 0; d < rl; ++d)
      r += idx[d] * rhsStride[d];
    float a = lhs.data[e], b = rhs.data[size_t(r)];
    out.data[e] = kind == BinaryKind::Add ? a + b : a * b;
    for (size_t d = rl; d-- > 0;) {
      if (++idx[d] < lhs.shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

/// silu of one value: the one expression silu and swiglu share, so the
/// fused op stays bit for bit the pair in f32.
static float siluOf(float v) { return v / (1.0f + std::exp(-v)); }

FTensor cpu::silu(const FTensor &x) {
  FTensor y = x;
  for (float &v : y.data)
    v = siluOf(v);
  return y;
}

Expected<FTensor> cpu::swiglu(const FTensor &gate, const FTensor &up) {
  if (gate.shape != up.shape)
    return errorf("swiglu: gate ", formatShape(gate.shape), " and up ",
                  formatShape(up.shape), " differ (it does not broadcast)");
  FTensor y = gate;
  for (size_t i = 0; i < y.data.size(); ++i)
    y.data[i] = siluOf(y.data[i]) * up.data[i];
  return y;
}

FTensor cpu::gelu(const FTensor &x, GeluKind kind) {
  FTensor y = x;
  const float kSqrt2OverPi = 0.7978845608028654f;
  for (float &v : y.data) {
    if (kind == GeluKind::Erf)
      v = 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
    else
      v = 0.5f * v *
          (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
  return y;
}

/// One value of each braid.activation kind, in f32 as PyTorch's fp32
/// kernels compute them (NaN propagates through the ReLUs).
static float activationOf(float v, braid::plan::ActivationKind kind) {
  using K = braid::plan::ActivationKind;
  switch (kind) {
  case K::Relu:
    return std::isnan(v) || v > 0.0f ? v : 0.0f;
  case K::Relu2: {
    float r = std::isnan(v) || v > 0.0f ? v : 0.0f;
    return r * r;
  }
  case K::Relu6:
    return std::isnan(v) ? v : std::min(std::max(v, 0.0f), 6.0f);
  case K::LeakyRelu:
    return v > 0.0f ? v : v * 0.01f;
  case K::QuickGelu:
    return v * (1.0f / (1.0f + std::exp(-(1.702f * v))));
  case K::Sigmoid:
    return 1.0f / (1.0f + std::exp(-v));
  case K::Tanh:
    return std::tanh(v);
  case K::Mish:
    return v * std::tanh(std::log1p(std::exp(v)));
  case K::Hardswish:
    return v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6.0f;
  case K::Gelu10: {
    float g = 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
    return std::isnan(g) ? g : std::min(std::max(g, -10.0f), 10.0f);
  }
  case K::Laplace: // mu 0.707107, sigma 0.282095: (x - mu) / (sigma sqrt 2)
    return 0.5f * (1.0f + std::erf((v - 0.707107f) / 0.39894257487763823f));
  case K::SqrtSoftplus: // softplus is x past PyTorch's threshold, 20
    return std::sqrt(v > 20.0f ? v : std::log1p(std::exp(v)));
  }
  return v; // unreachable: the loader refuses other kinds
}

FTensor cpu::activation(const FTensor &x, braid::plan::ActivationKind kind) {
  FTensor y = x;
  for (float &v : y.data)
    v = activationOf(v, kind);
  return y;
}
