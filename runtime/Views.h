//===- Views.h - Ops whose result can share its operand's bytes -*- C++ -*-===//
//
// A reshape keeps every element in place, and a slice whose elements form
// one contiguous run of its input's (row-major) is that run: both can be
// views, their result at (operand offset + start) in the arena, with no
// copy. braid-plan-memory places them so; the runtimes skip the copy when
// the plan says the bytes are already there, and the schedule checks (the
// compiler's and the loader's) then count the op as reading its operand
// and writing nothing. The one rule here serves all of them.
//
// Header-only and dependency-free: the passes and the runtime share it.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_VIEWS_H
#define BRAID_RUNTIME_VIEWS_H

#include <cstddef>
#include <cstdint>
#include <optional>

namespace braid {

/// The element offset at which a slice of `input` (rank `rank`) taking
/// `sizes` elements from `offsets` starts, when its elements are one
/// contiguous run of the input's: every dim before some dim k takes one
/// element and every dim after k is taken whole. nullopt otherwise, or for
/// an empty slice or shapes out of range (the op's own checks report those).
inline std::optional<int64_t> contiguousSliceStart(const int64_t *input,
                                                   const int64_t *offsets,
                                                   const int64_t *sizes,
                                                   size_t rank) {
  if (rank == 0)
    return std::nullopt;
  for (size_t d = 0; d < rank; ++d)
    if (sizes[d] <= 0 || offsets[d] < 0 || input[d] <= 0 ||
        offsets[d] > input[d] - sizes[d])
      return std::nullopt;
  // k: the first dim taking more than one element (the last if none does).
  size_t k = 0;
  while (k + 1 < rank && sizes[k] == 1)
    ++k;
  for (size_t d = k + 1; d < rank; ++d)
    if (sizes[d] != input[d])
      return std::nullopt;
  // Elements are at most 2^40 (the dialect's and the loader's limit), so
  // the row-major offset of an in-range element cannot overflow.
  int64_t start = 0, stride = 1;
  for (size_t d = rank; d-- > 0;) {
    start += offsets[d] * stride;
    stride *= input[d];
  }
  return start;
}

} // namespace braid

#endif // BRAID_RUNTIME_VIEWS_H
