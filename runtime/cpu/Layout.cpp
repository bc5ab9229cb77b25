//===- Layout.cpp - slice, concat, split on raw bytes ---------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

#include <cstring>

using namespace braid::rt;
using namespace braid::rt::cpu;

namespace {
// Copies a box between two row-major tensors, one contiguous run of the
// innermost `inner` bytes at a time.
struct Box {
  int64_t outer, mid, inner; // sizes: rows before dim, along dim, after dim
};
} // namespace

Expected<ByteTensor> cpu::slice(const ByteTensor &x, const Shape &offsets,
                                const Shape &sizes) {
  BRAID_RETURN_IF_ERROR(checkSliceShapes(x.shape, offsets, sizes));
  size_t r = x.shape.size();
  ByteTensor y{sizes, x.elemSize, {}};
  y.data.assign(size_t(numElements(sizes)) * x.elemSize, 0);
  if (y.data.empty())
    return y;
  std::vector<int64_t> strides(r, 1);
  for (size_t d = r; d-- > 1;)
    strides[d - 1] = strides[d] * x.shape[d];
  std::vector<int64_t> idx(r, 0);
  int64_t n = numElements(sizes);
  for (int64_t e = 0; e < n; ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d)
      src += (offsets[d] + idx[d]) * strides[d];
    std::memcpy(y.data.data() + size_t(e) * x.elemSize,
                x.data.data() + size_t(src) * x.elemSize, x.elemSize);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < sizes[d])
        break;
      idx[d] = 0;
    }
  }
  return y;
}

static Box boxAt(const Shape &shape, int64_t dim, size_t elemSize) {
  Box b{1, shape[size_t(dim)], int64_t(elemSize)};
  for (int64_t d = 0; d < dim; ++d)
    b.outer *= shape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d)
    b.inner *= shape[d];
  return b;
}

Expected<ByteTensor> cpu::concat(const std::vector<const ByteTensor *> &inputs,
                                 int64_t dim) {
  std::vector<ConcatInput> parts;
  for (const ByteTensor *t : inputs)
    parts.push_back({&t->shape, t->elemSize});
  auto checked = checkConcatShapes(parts, dim);
  if (!checked)
    return checked.status();
  const ByteTensor &first = *inputs.front();
  Shape shape = checked.take();
  ByteTensor y{shape, first.elemSize, {}};
  y.data.assign(size_t(numElements(shape)) * first.elemSize, 0);
  if (y.data.empty()) // every input is empty too
    return y;
  Box out = boxAt(shape, dim, first.elemSize);
  int64_t at = 0; // running offset along dim
  for (const ByteTensor *t : inputs) {
    Box in = boxAt(t->shape, dim, t->elemSize);
    if (in.mid == 0) // contributes nothing, in `outer` empty copies
      continue;
    for (int64_t o = 0; o < in.outer; ++o)
      std::memcpy(y.data.data() + size_t((o * out.mid + at) * out.inner),
                  t->data.data() + size_t(o * in.mid * in.inner),
                  size_t(in.mid * in.inner));
    at += in.mid;
  }
  return y;
}

Expected<std::vector<ByteTensor>> cpu::split(const ByteTensor &x, int64_t dim,
                                             int64_t n) {
  int64_t r = int64_t(x.shape.size());
  if (dim < 0 || dim >= r)
    return errorf("split: dim ", dim, " out of range for rank ", r);
  if (n <= 0 || x.shape[size_t(dim)] % n)
    return errorf("split: dim ", dim, " of size ", x.shape[size_t(dim)],
                  " is not divisible by ", n);
  std::vector<ByteTensor> pieces;
  Shape sizes = x.shape, offsets(size_t(r), 0);
  sizes[size_t(dim)] /= n;
  for (int64_t i = 0; i < n; ++i) {
    offsets[size_t(dim)] = i * sizes[size_t(dim)];
    auto piece = slice(x, offsets, sizes);
    if (!piece)
      return piece.status();
    pieces.push_back(piece.take());
  }
  return pieces;
}
