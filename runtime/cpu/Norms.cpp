//===- Norms.cpp - rms_norm, layer_norm -----------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <cmath>

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::rmsNorm(const FTensor &x, const FTensor &weight,
                               double epsilon) {
  BRAID_RETURN_IF_ERROR(
      checkNormParam("rms_norm", "weight", x.shape, weight.shape));
  int64_t h = x.shape.back(), rows = numElements(x.shape) / h;
  FTensor y{x.shape, std::vector<float>(x.data.size())};
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x.data.data() + r * h;
    float ss = 0.0f;
    for (int64_t i = 0; i < h; ++i)
      ss += px[i] * px[i];
    float inv = 1.0f / std::sqrt(ss / float(h) + float(epsilon));
    for (int64_t i = 0; i < h; ++i)
      y.data[size_t(r * h + i)] = px[i] * inv * weight.data[size_t(i)];
  }
  return y;
}

Expected<FTensor> cpu::layerNorm(const FTensor &x, const FTensor &weight,
                                 const FTensor &bias, double epsilon) {
  BRAID_RETURN_IF_ERROR(
      checkNormParam("layer_norm", "weight", x.shape, weight.shape));
  BRAID_RETURN_IF_ERROR(
      checkNormParam("layer_norm", "bias", x.shape, bias.shape));
  int64_t h = x.shape.back(), rows = numElements(x.shape) / h;
  FTensor y{x.shape, std::vector<float>(x.data.size())};
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x.data.data() + r * h;
    float mean = 0.0f;
    for (int64_t i = 0; i < h; ++i)
      mean += px[i];
    mean /= float(h);
    float var = 0.0f; // biased variance, as torch.nn.LayerNorm
    for (int64_t i = 0; i < h; ++i)
      var += (px[i] - mean) * (px[i] - mean);
    var /= float(h);
    float inv = 1.0f / std::sqrt(var + float(epsilon));
    for (int64_t i = 0; i < h; ++i)
      y.data[size_t(r * h + i)] =
          (px[i] - mean) * inv * weight.data[size_t(i)] + bias.data[size_t(i)];
  }
  return y;
}
