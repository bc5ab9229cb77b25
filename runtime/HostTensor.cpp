//===- HostTensor.cpp - Host tensors and dtype conversion -----------------===//
#include "runtime/HostTensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

using namespace braid::rt;

int64_t braid::rt::numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

size_t braid::rt::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  }
  return 0;
}

bool braid::rt::isFloatType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

const char *braid::rt::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

std::string braid::rt::formatShape(const Shape &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

uint16_t braid::rt::floatToBf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if (std::isnan(value))
    return uint16_t((u >> 16) | 0x40); // keep NaN a (quiet) NaN
  uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return uint16_t((u + rounding) >> 16);
}

float braid::rt::f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  float f;
  if (exp == 0) {
    // Subnormal or zero: mant * 2^-24.
    f = std::ldexp(float(mant), -24);
    return sign ? -f : f;
  }
  uint32_t u;
  if (exp == 31)
    u = sign | 0x7f800000 | (mant << 13);
  else
    u = sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13);
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t braid::rt::floatToF16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  if (std::isnan(value))
    return sign | 0x7e00;
  float a = std::fabs(value);
  if (a >= 65520.0f) // rounds to infinity
    return sign | 0x7c00;
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal: quantum 2^-24; nearbyint rounds half to even.
    return sign | uint16_t(std::nearbyint(std::ldexp(a, 24)));
  }
  int e;
  float m = std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
  // Mantissa with 10 fraction bits: (m*2) in [1,2) -> 11 significant bits.
  uint32_t sig = uint32_t(std::nearbyint(std::ldexp(m, 11)));
  int exp = e - 1 + 15;
  if (sig == 2048) { // rounding carried into the next binade
    sig = 1024;
    ++exp;
  }
  if (exp >= 31)
    return sign | 0x7c00;
  return sign | uint16_t(exp << 10) | uint16_t(sig & 0x3ff);
}

/// dst[i] = fn(src[i]) for n elements of the given storage types.
/// Element by element through memcpy: src and dst are often arena storage,
/// and a plan may place a buffer at any byte offset (the loader checks
/// bounds, not alignment), so dereferencing a From* / To* there would be a
/// misaligned access (undefined behavior). The copies compile to plain
/// loads and stores.
template <typename From, typename To, typename Fn>
static void mapElements(const void *src, int64_t n, void *dst, Fn fn) {
  const uint8_t *s = static_cast<const uint8_t *>(src);
  uint8_t *d = static_cast<uint8_t *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    From x;
    std::memcpy(&x, s + size_t(i) * sizeof(From), sizeof(From));
    To y = fn(x);
    std::memcpy(d + size_t(i) * sizeof(To), &y, sizeof(To));
  }
}

void braid::rt::loadAsFloat(DType dtype, const void *src, int64_t n,
                            float *dst) {
  if (n <= 0) // empty vectors may hand us null pointers
    return;
  switch (dtype) {
  case DType::F32:
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  case DType::F16:
    return mapElements<uint16_t, float>(src, n, dst, f16ToFloat);
  case DType::BF16:
    return mapElements<uint16_t, float>(src, n, dst, bf16ToFloat);
  case DType::I32:
    return mapElements<int32_t, float>(src, n, dst,
                                       [](int32_t v) { return float(v); });
  case DType::I64:
    return mapElements<int64_t, float>(src, n, dst,
                                       [](int64_t v) { return float(v); });
  }
}

/// float -> integer without undefined behaviour: the C++ conversion is UB
/// for NaN and for values outside the target's range. Truncates toward
/// zero, saturates out-of-range values and maps NaN to 0; loaders refuse
/// such values before they get here (firstNonIntegral).
template <typename Int> static Int floatToInt(float v) {
  // -2^(bits-1) and 2^(bits-1) are exact floats.
  constexpr float kLow = float(std::numeric_limits<Int>::min());
  constexpr float kHigh = -kLow;
  if (std::isnan(v))
    return 0;
  if (v <= kLow)
    return std::numeric_limits<Int>::min();
  if (v >= kHigh)
    return std::numeric_limits<Int>::max();
  return Int(v);
}

int64_t braid::rt::firstNonIntegral(DType dtype, const float *values,
                                    int64_t n) {
  if (isFloatType(dtype))
    return -1;
  float high = std::ldexp(1.0f, int(dtypeSize(dtype) * 8 - 1));
  for (int64_t i = 0; i < n; ++i)
    if (!(values[i] >= -high && values[i] < high))
      return i; // NaN fails both comparisons
  return -1;
}

void braid::rt::storeFromFloat(DType dtype, const float *src, int64_t n,
                               void *dst) {
  if (n <= 0)
    return;
  switch (dtype) {
  case DType::F32:
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  case DType::F16:
    return mapElements<float, uint16_t>(src, n, dst, floatToF16);
  case DType::BF16:
    return mapElements<float, uint16_t>(src, n, dst, floatToBf16);
  case DType::I32:
    return mapElements<float, int32_t>(src, n, dst, floatToInt<int32_t>);
  case DType::I64:
    return mapElements<float, int64_t>(src, n, dst, floatToInt<int64_t>);
  }
}

void braid::rt::loadAsInt(DType dtype, const void *src, int64_t n,
                          int64_t *dst) {
  if (n <= 0)
    return;
  if (dtype == DType::I64) {
    std::memcpy(dst, src, size_t(n) * 8);
    return;
  }
  if (dtype == DType::I32) // may be unaligned: see mapElements
    return mapElements<int32_t, int64_t>(src, n, dst,
                                         [](int32_t v) { return int64_t(v); });
  std::vector<float> tmp(static_cast<size_t>(n));
  loadAsFloat(dtype, src, n, tmp.data());
  for (int64_t i = 0; i < n; ++i)
    dst[i] = floatToInt<int64_t>(tmp[i]);
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype(dtype), shape(std::move(shape)) {
  bytes.assign(size_t(numElements(this->shape)) * dtypeSize(dtype), 0);
}

HostTensor HostTensor::fromFloats(DType dtype, Shape shape,
                                  const std::vector<float> &values) {
  HostTensor t(dtype, std::move(shape));
  storeFromFloat(dtype, values.data(),
                 std::min<int64_t>(t.size(), int64_t(values.size())),
                 t.bytes.data());
  return t;
}

HostTensor HostTensor::fromInts(DType dtype, Shape shape,
                                const std::vector<int64_t> &values) {
  HostTensor t(dtype, std::move(shape));
  int64_t n = std::min<int64_t>(t.size(), int64_t(values.size()));
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::I64) {
      std::memcpy(t.bytes.data() + i * 8, &values[i], 8);
    } else if (dtype == DType::I32) {
      int32_t v = int32_t(values[i]);
      std::memcpy(t.bytes.data() + i * 4, &v, 4);
    } else {
      float f = float(values[i]);
      storeFromFloat(dtype, &f, 1, t.bytes.data() + i * dtypeSize(dtype));
    }
  }
  return t;
}

std::vector<float> HostTensor::toFloats() const {
  std::vector<float> out(static_cast<size_t>(size()));
  loadAsFloat(dtype, bytes.data(), size(), out.data());
  return out;
}

std::vector<int64_t> HostTensor::toInts() const {
  std::vector<int64_t> out(static_cast<size_t>(size()));
  loadAsInt(dtype, bytes.data(), size(), out.data());
  return out;
}
