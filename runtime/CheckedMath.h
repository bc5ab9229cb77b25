//===- CheckedMath.h - Overflow-checked size arithmetic ---------*- C++ -*-===//
//
// Every size a tool computes from untrusted input (shapes, element counts,
// byte counts, group products, FLOPs) goes through these, so an overflow is
// a clear error instead of a negative size, a division by zero or an
// out-of-bounds read. Header-only and dependency-free: the dialect, the
// importer, the passes, the exporter and the runtime loader all use it.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CHECKEDMATH_H
#define BRAID_RUNTIME_CHECKEDMATH_H

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace braid {

/// Most elements (and largest dim) of one tensor the plan can carry: 2^40.
/// The dialect verifier and the plan loader both enforce it, so every
/// verified module can become a plan and a tensor's bytes (at most 2^43)
/// stay far from int64 overflow in all later size arithmetic.
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

/// a * b, or nullopt when it does not fit int64.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// a + b, or nullopt when it does not fit int64.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// The product of `values` (1 when empty), or nullopt on overflow.
template <typename Range>
std::optional<int64_t> checkedProduct(const Range &values) {
  int64_t r = 1;
  for (int64_t v : values) {
    auto next = checkedMul(r, int64_t(v));
    if (!next)
      return std::nullopt;
    r = *next;
  }
  return r;
}
inline std::optional<int64_t>
checkedProduct(std::initializer_list<int64_t> values) {
  return checkedProduct<std::initializer_list<int64_t>>(values);
}

/// The product of the dims of `shape`, each counted as at least 1: how many
/// iterations a kernel's loops over the shape may take even when a zero dim
/// leaves no element. Bounded by kMaxTensorElements like the element count,
/// so an empty [10^12, 0, 8] tensor cannot make a kernel spin. nullopt on
/// overflow.
template <typename Range>
std::optional<int64_t> checkedShapeExtent(const Range &shape) {
  int64_t r = 1;
  for (int64_t d : shape) {
    auto next = checkedMul(r, d > 1 ? int64_t(d) : int64_t(1));
    if (!next)
      return std::nullopt;
    r = *next;
  }
  return r;
}

/// The sum of `values` (0 when empty), or nullopt on overflow.
template <typename Range>
std::optional<int64_t> checkedSum(const Range &values) {
  int64_t r = 0;
  for (int64_t v : values) {
    auto next = checkedAdd(r, int64_t(v));
    if (!next)
      return std::nullopt;
    r = *next;
  }
  return r;
}

} // namespace braid

#endif // BRAID_RUNTIME_CHECKEDMATH_H
