//===- HostTensor.h - Host tensors and dtype conversion ---------*- C++ -*-===//
#ifndef BRAID_RUNTIME_HOSTTENSOR_H
#define BRAID_RUNTIME_HOSTTENSOR_H

#include "runtime/plan_generated.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace braid::rt {

using plan::DType;
using Shape = std::vector<int64_t>;

int64_t numElements(const Shape &shape);
size_t dtypeSize(DType dtype);
bool isFloatType(DType dtype);
const char *dtypeName(DType dtype);
std::string formatShape(const Shape &shape);

// IEEE half and bfloat16 conversions (round to nearest even on store).
inline float bf16ToFloat(uint16_t bits) { // inline: kernels call it per element
  uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t floatToBf16(float value);
float f16ToFloat(uint16_t bits);
uint16_t floatToF16(float value);

// The storage side (`src` of the loads, `dst` of the store) may be at any
// byte address: plan buffers need not be aligned to their dtype.

/// Reads `n` elements of `dtype` at `src` as fp32 (integers are converted).
void loadAsFloat(DType dtype, const void *src, int64_t n, float *dst);
/// Writes fp32 values as `dtype` (integers are rounded toward zero; NaN
/// stores 0 and values outside the integer's range saturate, never UB).
void storeFromFloat(DType dtype, const float *src, int64_t n, void *dst);
/// The index of the first of `n` values that integer type `dtype` cannot
/// hold (NaN, an infinity, out of range), or -1 (always -1 for float
/// types). Loaders check values with it before they store them as ints.
int64_t firstNonIntegral(DType dtype, const float *values, int64_t n);
/// Reads `n` integer elements (i32/i64) as int64; float types are truncated.
void loadAsInt(DType dtype, const void *src, int64_t n, int64_t *dst);

/// A dense host tensor in its storage dtype: the runtime's I/O currency.
struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);
  static HostTensor fromFloats(DType dtype, Shape shape,
                               const std::vector<float> &values);
  static HostTensor fromInts(DType dtype, Shape shape,
                             const std::vector<int64_t> &values);
  int64_t size() const { return numElements(shape); }
  std::vector<float> toFloats() const;
  std::vector<int64_t> toInts() const;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_HOSTTENSOR_H
