//===- ShapeChecks.cpp - shape rules of the braid dialect -----------------===//
#include "dialect/ShapeChecks.h"

#include "runtime/CheckedMath.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::braid;

std::string mlir::braid::formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::interleave(
      shape, [&](int64_t d) { s += std::to_string(d); }, [&] { s += ", "; });
  return s + "]";
}

std::optional<int64_t>
mlir::braid::checkedNumElements(ArrayRef<int64_t> shape) {
  return ::braid::checkedProduct(shape);
}

std::optional<int64_t> mlir::braid::elementByteSize(Type t) {
  if (t.isF32() || t.isSignlessInteger(32))
    return 4;
  if (t.isF16() || t.isBF16())
    return 2;
  if (t.isSignlessInteger(64))
    return 8;
  return std::nullopt;
}

/// "2^40 = 1099511627776"
static std::string limitText(int64_t limit) {
  int log2 = 0;
  while ((int64_t(1) << log2) < limit)
    ++log2;
  return "2^" + std::to_string(log2) + " = " + std::to_string(limit);
}

LogicalResult mlir::braid::checkTensorType(OptLoc loc, StringRef op,
                                           StringRef what, Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return emitOptionalError(loc, op, ": ", what, " type ", type,
                             " is not a statically shaped ranked tensor");
  if (!elementByteSize(t.getElementType()))
    return emitOptionalError(loc, op, ": ", what, " element type ",
                             t.getElementType(),
                             " is not one the runtime runs (bf16, f16, f32, "
                             "i32 or i64)");
  for (auto [d, size] : llvm::enumerate(t.getShape()))
    if (size > kMaxTensorElements)
      return emitOptionalError(
          loc, op, ": ", what, " ", type, " has dim ", d, " of size ", size,
          "; a braid tensor dim is at most ", limitText(kMaxTensorElements));
  std::optional<int64_t> n = checkedNumElements(t.getShape());
  if (!n)
    return emitOptionalError(loc, op, ": ", what, " ", type,
                             " has more elements than int64 can count; a "
                             "braid tensor holds at most ",
                             limitText(kMaxTensorElements), " elements");
  if (*n > kMaxTensorElements)
    return emitOptionalError(loc, op, ": ", what, " ", type, " has ", *n,
                             " elements; a braid tensor holds at most ",
                             limitText(kMaxTensorElements));
  // An empty tensor may not hide huge dims: kernels loop over them.
  std::optional<int64_t> extent = ::braid::checkedShapeExtent(t.getShape());
  if (!extent || *extent > kMaxTensorElements)
    return emitOptionalError(loc, op, ": ", what, " ", type,
                             " has dims whose nonzero sizes multiply past ",
                             limitText(kMaxTensorElements),
                             " (a zero dim does not make the others free)");
  return success();
}

std::optional<int64_t> mlir::braid::tensorByteSize(Type type) {
  if (failed(checkTensorType(std::nullopt, "", "", type)))
    return std::nullopt;
  auto t = cast<RankedTensorType>(type);
  // At most 2^40 elements of at most 8 bytes: no overflow.
  return t.getNumElements() * *elementByteSize(t.getElementType());
}

static LogicalResult checkSameElementType(OptLoc loc, StringRef op,
                                          StringRef what, Type expected,
                                          Type actual) {
  if (expected == actual)
    return success();
  return emitOptionalError(loc, op, ": ", what, " element type ", actual,
                           " does not match ", expected);
}

static LogicalResult checkResultShape(OptLoc loc, StringRef op,
                                      ArrayRef<int64_t> expected,
                                      ArrayRef<int64_t> actual) {
  if (expected == actual)
    return success();
  return emitOptionalError(loc, op, ": result shape ", formatShape(actual),
                           " does not match the expected ",
                           formatShape(expected));
}

FailureOr<SmallVector<int64_t>>
mlir::braid::inferMatmulShape(OptLoc loc, ArrayRef<int64_t> a,
                              ArrayRef<int64_t> b, bool transposeA,
                              bool transposeB) {
  if (a.size() < 2 || b.size() < 2)
    return emitOptionalError(loc, "matmul: operands need rank >= 2, got a ",
                             formatShape(a), " and b ", formatShape(b));
  size_t ra = a.size(), rb = b.size();
  if (rb != 2 && rb != ra)
    return emitOptionalError(loc, "matmul: b ", formatShape(b),
                             " must be rank 2 or have a's rank ", ra);
  if (rb == ra) {
    for (size_t i = 0; i + 2 < ra; ++i)
      if (a[i] != b[i])
        return emitOptionalError(loc, "matmul: batch dim ", i, " of a is ",
                                 a[i], " but of b is ", b[i]);
  }
  int64_t m = transposeA ? a[ra - 1] : a[ra - 2];
  int64_t ka = transposeA ? a[ra - 2] : a[ra - 1];
  int64_t kb = transposeB ? b[rb - 1] : b[rb - 2];
  int64_t n = transposeB ? b[rb - 2] : b[rb - 1];
  if (ka != kb)
    return emitOptionalError(loc, "matmul: contraction size of a (", ka,
                             ") does not match that of b (", kb, "); a is ",
                             formatShape(a), ", b is ", formatShape(b));
  SmallVector<int64_t> out(a.begin(), a.end() - 2);
  out.push_back(m);
  out.push_back(n);
  return out;
}

LogicalResult mlir::braid::checkMatmul(OptLoc loc, RankedTensorType a,
                                       RankedTensorType b,
                                       RankedTensorType result,
                                       bool transposeA, bool transposeB) {
  if (failed(checkSameElementType(loc, "matmul", "b", a.getElementType(),
                                  b.getElementType())) ||
      failed(checkSameElementType(loc, "matmul", "result",
                                  a.getElementType(),
                                  result.getElementType())))
    return failure();
  auto shape = inferMatmulShape(loc, a.getShape(), b.getShape(), transposeA,
                                transposeB);
  if (failed(shape))
    return failure();
  return checkResultShape(loc, "matmul", *shape, result.getShape());
}

LogicalResult mlir::braid::checkBroadcastBinary(OptLoc loc, StringRef op,
                                                RankedTensorType lhs,
                                                RankedTensorType rhs,
                                                RankedTensorType result) {
  if (failed(checkSameElementType(loc, op, "rhs", lhs.getElementType(),
                                  rhs.getElementType())))
    return failure();
  if (rhs.getRank() > lhs.getRank())
    return emitOptionalError(loc, op, ": rhs rank ", rhs.getRank(),
                             " exceeds lhs rank ", lhs.getRank());
  int64_t off = lhs.getRank() - rhs.getRank();
  for (int64_t i = 0; i < rhs.getRank(); ++i) {
    int64_t l = lhs.getDimSize(off + i), r = rhs.getDimSize(i);
    if (r != l && r != 1)
      return emitOptionalError(loc, op, ": rhs ", formatShape(rhs.getShape()),
                               " does not broadcast to lhs ",
                               formatShape(lhs.getShape()), " (rhs dim ", i,
                               " is ", r, ", lhs has ", l, ")");
  }
  if (result != lhs)
    return emitOptionalError(loc, op, ": result type ", result,
                             " must equal the lhs type ", lhs);
  return success();
}

LogicalResult mlir::braid::checkNorm(OptLoc loc, StringRef op,
                                     RankedTensorType input,
                                     ArrayRef<RankedTensorType> params,
                                     RankedTensorType result, double epsilon) {
  if (input.getRank() < 1)
    return emitOptionalError(loc, op, ": input must have rank >= 1");
  int64_t h = input.getShape().back();
  for (RankedTensorType p : params) {
    if (p.getRank() != 1 || p.getDimSize(0) != h)
      return emitOptionalError(loc, op, ": weight/bias shape ",
                               formatShape(p.getShape()),
                               " must be [", h, "], the input's last dim");
    if (failed(checkSameElementType(loc, op, "weight/bias",
                                    input.getElementType(),
                                    p.getElementType())))
      return failure();
  }
  if (!(epsilon > 0.0))
    return emitOptionalError(loc, op, ": epsilon must be > 0, got ", epsilon);
  if (result != input)
    return emitOptionalError(loc, op, ": result type ", result,
                             " must equal the input type ", input);
  return success();
}

LogicalResult mlir::braid::checkRope(OptLoc loc, RankedTensorType input,
                                     RankedTensorType positions,
                                     RankedTensorType result, double theta,
                                     int64_t rotaryDim) {
  if (input.getRank() != 4)
    return emitOptionalError(loc, "rope: input must be [B, S, H, D], got ",
                             formatShape(input.getShape()));
  if (rotaryDim == 0 && input.getDimSize(3) % 2 != 0)
    return emitOptionalError(loc, "rope: head dim ", input.getDimSize(3),
                             " must be even");
  if (positions.getRank() != 2 ||
      positions.getDimSize(0) != input.getDimSize(0) ||
      positions.getDimSize(1) != input.getDimSize(1))
    return emitOptionalError(loc, "rope: positions shape ",
                             formatShape(positions.getShape()),
                             " must be [B, S] = [", input.getDimSize(0), ", ",
                             input.getDimSize(1), "]");
  if (!(theta > 0.0))
    return emitOptionalError(loc, "rope: theta must be > 0, got ", theta);
  if (result != input)
    return emitOptionalError(loc, "rope: result type ", result,
                             " must equal the input type ", input);
  return success();
}

static LogicalResult checkBSHD(OptLoc loc, StringRef what, RankedTensorType t,
                               int64_t b, int64_t s, int64_t h, int64_t d) {
  SmallVector<int64_t> expected{b, s, h, d};
  if (t.getShape() == ArrayRef<int64_t>(expected))
    return success();
  return emitOptionalError(loc, "attention: ", what, " shape ",
                           formatShape(t.getShape()), " must be ",
                           formatShape(expected));
}

LogicalResult mlir::braid::checkAttention(OptLoc loc,
                                          const AttentionShapes &s) {
  if (s.numHeads <= 0 || s.numKvHeads <= 0 || s.headDim <= 0)
    return emitOptionalError(loc, "attention: num_heads (", s.numHeads,
                             "), num_kv_heads (", s.numKvHeads,
                             ") and head_dim (", s.headDim,
                             ") must be positive");
  if (s.numHeads % s.numKvHeads != 0)
    return emitOptionalError(loc, "attention: num_heads ", s.numHeads,
                             " is not divisible by num_kv_heads ",
                             s.numKvHeads);
  if (s.scale && !(*s.scale > 0.0))
    return emitOptionalError(loc, "attention: scale must be > 0, got ",
                             *s.scale);
  if (s.q.getRank() != 4)
    return emitOptionalError(loc, "attention: q must be [B, S, H, D], got ",
                             formatShape(s.q.getShape()));
  int64_t b = s.q.getDimSize(0), sq = s.q.getDimSize(1);
  if (failed(checkBSHD(loc, "q", s.q, b, sq, s.numHeads, s.headDim)) ||
      failed(checkBSHD(loc, "k", s.k, b, sq, s.numKvHeads, s.headDim)) ||
      failed(checkBSHD(loc, "v", s.v, b, sq, s.numKvHeads, s.headDim)) ||
      failed(checkBSHD(loc, "output", s.output, b, sq, s.numHeads, s.headDim)))
    return failure();
  for (auto [name, t] :
       {std::pair<StringRef, RankedTensorType>{"k", s.k}, {"v", s.v},
        {"output", s.output}})
    if (failed(checkSameElementType(loc, "attention", name,
                                    s.q.getElementType(), t.getElementType())))
      return failure();
  bool anyCache = s.kCache || s.vCache || s.position;
  if (!anyCache) {
    if (s.kCacheOut || s.vCacheOut)
      return emitOptionalError(
          loc, "attention: updated caches are returned only with a KV cache");
    return success();
  }
  if (!s.kCache || !s.vCache || !s.position)
    return emitOptionalError(
        loc, "attention: a KV cache needs k_cache, v_cache and position");
  if (!s.kCacheOut || !s.vCacheOut)
    return emitOptionalError(
        loc, "attention: with a KV cache the op returns 3 results "
             "(output, k_cache, v_cache)");
  if (s.kCache.getRank() != 4)
    return emitOptionalError(loc, "attention: k_cache must be "
                                  "[B, max_seq, kv_heads, D], got ",
                             formatShape(s.kCache.getShape()));
  int64_t maxSeq = s.kCache.getDimSize(1);
  // The cache may hold more sequences than this step runs (a decode batch
  // bucket): sequence i uses the cache's sequence i.
  int64_t cacheBatch = s.kCache.getDimSize(0);
  if (cacheBatch < b)
    return emitOptionalError(loc, "attention: k_cache holds ", cacheBatch,
                             " sequences; the step runs ", b);
  if (failed(checkBSHD(loc, "k_cache", s.kCache, cacheBatch, maxSeq,
                       s.numKvHeads, s.headDim)) ||
      failed(checkBSHD(loc, "v_cache", s.vCache, cacheBatch, maxSeq,
                       s.numKvHeads, s.headDim)))
    return failure();
  if (sq > maxSeq)
    return emitOptionalError(loc, "attention: ", sq,
                             " new tokens do not fit a cache of max_seq ",
                             maxSeq);
  // The runtime reads both caches with one element type.
  if (failed(checkSameElementType(loc, "attention", "v_cache",
                                  s.kCache.getElementType(),
                                  s.vCache.getElementType())))
    return failure();
  if (s.kCacheOut != s.kCache || s.vCacheOut != s.vCache)
    return emitOptionalError(
        loc, "attention: updated cache types must equal the cache types");
  if (s.position.getRank() != 1 || s.position.getDimSize(0) != b)
    return emitOptionalError(loc, "attention: position shape ",
                             formatShape(s.position.getShape()),
                             " must be [B] = [", b, "]");
  return success();
}

LogicalResult mlir::braid::checkEmbedding(OptLoc loc, RankedTensorType ids,
                                          RankedTensorType table,
                                          RankedTensorType result) {
  if (table.getRank() != 2)
    return emitOptionalError(loc, "embedding: table must be [V, H], got ",
                             formatShape(table.getShape()));
  SmallVector<int64_t> expected(ids.getShape());
  expected.push_back(table.getDimSize(1));
  if (failed(checkSameElementType(loc, "embedding", "result",
                                  table.getElementType(),
                                  result.getElementType())))
    return failure();
  return checkResultShape(loc, "embedding", expected, result.getShape());
}

LogicalResult mlir::braid::checkDim(OptLoc loc, StringRef op, StringRef what,
                                    int64_t dim, int64_t rank) {
  if (dim >= 0 && dim < rank)
    return success();
  return emitOptionalError(loc, op, ": ", what, " ", dim,
                           " is out of range for rank ", rank);
}

LogicalResult mlir::braid::checkSlice(OptLoc loc, RankedTensorType input,
                                      ArrayRef<int64_t> offsets,
                                      ArrayRef<int64_t> sizes,
                                      RankedTensorType result) {
  int64_t rank = input.getRank();
  if ((int64_t)offsets.size() != rank || (int64_t)sizes.size() != rank)
    return emitOptionalError(loc, "slice: offsets (", offsets.size(),
                             ") and sizes (", sizes.size(),
                             ") must both have the input rank ", rank);
  for (int64_t i = 0; i < rank; ++i) {
    // offsets + sizes in int64 could wrap below the dim: checked.
    std::optional<int64_t> end = ::braid::checkedAdd(offsets[i], sizes[i]);
    if (offsets[i] < 0 || sizes[i] < 0 || !end || *end > input.getDimSize(i))
      return emitOptionalError(
          loc, "slice: dim ", i, " takes [", offsets[i], ", ",
          end ? std::to_string(*end)
              : std::to_string(offsets[i]) + " + " + std::to_string(sizes[i]),
          ") which is outside [0, ", input.getDimSize(i), ")");
  }
  if (failed(checkSameElementType(loc, "slice", "result",
                                  input.getElementType(),
                                  result.getElementType())))
    return failure();
  return checkResultShape(loc, "slice", sizes, result.getShape());
}

LogicalResult mlir::braid::checkConcat(OptLoc loc,
                                       ArrayRef<RankedTensorType> inputs,
                                       int64_t dim, RankedTensorType result,
                                       StringRef opName) {
  if (inputs.empty())
    return emitOptionalError(loc, opName, ": needs at least one input");
  RankedTensorType first = inputs.front();
  if (failed(checkDim(loc, opName, "dim", dim, first.getRank())))
    return failure();
  SmallVector<int64_t> expected(first.getShape());
  expected[dim] = 0;
  for (auto [i, t] : llvm::enumerate(inputs)) {
    if (failed(checkSameElementType(
            loc, opName, "input", first.getElementType(), t.getElementType())))
      return failure();
    if (t.getRank() != first.getRank())
      return emitOptionalError(loc, opName, ": input ", i, " has rank ",
                               t.getRank(), " but input 0 has rank ",
                               first.getRank());
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != dim && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, opName, ": input ", i, " has size ",
                                 t.getDimSize(d), " in dim ", d,
                                 " but input 0 has ", first.getDimSize(d));
    std::optional<int64_t> sum =
        ::braid::checkedAdd(expected[dim], t.getDimSize(dim));
    if (!sum)
      return emitOptionalError(loc, opName, ": the sizes of the inputs in dim ",
                               dim, " sum past int64 at input ", i);
    expected[dim] = *sum;
  }
  if (failed(checkSameElementType(loc, opName, "result", first.getElementType(),
                                  result.getElementType())))
    return failure();
  return checkResultShape(loc, opName, expected, result.getShape());
}

LogicalResult mlir::braid::checkReshape(OptLoc loc, RankedTensorType input,
                                        RankedTensorType result) {
  if (failed(checkSameElementType(loc, "reshape", "result",
                                  input.getElementType(),
                                  result.getElementType())))
    return failure();
  std::optional<int64_t> a = checkedNumElements(input.getShape()),
                         b = checkedNumElements(result.getShape());
  auto count = [](std::optional<int64_t> n) {
    return n ? std::to_string(*n) + " elements"
             : std::string("more elements than int64 can count");
  };
  if (!a || !b || *a != *b)
    return emitOptionalError(loc, "reshape: ", formatShape(input.getShape()),
                             " has ", count(a), " but ",
                             formatShape(result.getShape()), " has ", count(b));
  return success();
}

LogicalResult mlir::braid::checkParameter(OptLoc loc, StringRef name,
                                          ArrayRef<int64_t> full,
                                          ArrayRef<int64_t> padded,
                                          RankedTensorType local,
                                          std::optional<int64_t> shardDim,
                                          int64_t groupSize, int64_t shards,
                                          int64_t blocks) {
  for (int64_t d : full)
    if (d <= 0)
      return emitOptionalError(loc, "parameter '", name, "': full shape ",
                               formatShape(full), " has a non-positive dim");
  // The runtime generates and slices the whole checkpoint tensor: it must be
  // a tensor a plan can hold too.
  auto checkWhole = [&](StringRef which,
                        ArrayRef<int64_t> shape) -> LogicalResult {
    std::optional<int64_t> n = checkedNumElements(shape);
    if (n && *n <= kMaxTensorElements)
      return success();
    return emitOptionalError(
        loc, "parameter '", name, "': ", which, " shape ", formatShape(shape),
        n ? " has " + std::to_string(*n) + " elements"
          : std::string(" has more elements than int64 can count"),
        "; a braid tensor holds at most ", limitText(kMaxTensorElements));
  };
  if (failed(checkWhole("full", full)))
    return failure();
  if (!padded.empty()) {
    if (padded.size() != full.size())
      return emitOptionalError(loc, "parameter '", name, "': padded shape ",
                               formatShape(padded), " and full shape ",
                               formatShape(full), " differ in rank");
    for (size_t i = 0; i < full.size(); ++i)
      if (padded[i] < full[i])
        return emitOptionalError(loc, "parameter '", name, "': padded shape ",
                                 formatShape(padded),
                                 " is smaller than the full shape ",
                                 formatShape(full), " in dim ", i);
    if (failed(checkWhole("padded", padded)))
      return failure();
    full = padded;
  }
  if ((int64_t)full.size() != local.getRank())
    return emitOptionalError(loc, "parameter '", name, "': full shape ",
                             formatShape(full), " and local shape ",
                             formatShape(local.getShape()),
                             " differ in rank");
  SmallVector<int64_t> expected(full);
  if (shardDim) {
    if (failed(checkDim(loc, "parameter", "shard_dim", *shardDim,
                        (int64_t)full.size())))
      return failure();
    if (shards <= 0 || groupSize % shards != 0)
      return emitOptionalError(loc, "parameter '", name, "': shards ", shards,
                               " must divide the group size ", groupSize);
    if (blocks <= 0 || blocks > kMaxBlocks)
      return emitOptionalError(loc, "parameter '", name, "': blocks ", blocks,
                               " must be in [1, ", kMaxBlocks, "]");
    int64_t dimSize = full[*shardDim];
    // shards x blocks can overflow int64 (to 0: a division by zero).
    std::optional<int64_t> pieces = ::braid::checkedMul(shards, blocks);
    if (!pieces || dimSize % *pieces != 0)
      return emitOptionalError(loc, "parameter '", name, "': dim ", *shardDim,
                               " of size ", dimSize,
                               " is not divisible by shards x blocks = ",
                               shards, " x ", blocks);
    expected[*shardDim] = dimSize / shards;
  } else if (shards != 1 || blocks != 1) {
    return emitOptionalError(loc, "parameter '", name,
                             "': shards/blocks need a shard_dim");
  }
  if (expected != local.getShape())
    return emitOptionalError(loc, "parameter '", name, "': local shape ",
                             formatShape(local.getShape()),
                             " does not match the slice ",
                             formatShape(expected), " of full shape ",
                             formatShape(full));
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult mlir::braid::checkGroupSize(OptLoc loc, StringRef group,
                                          int64_t size) {
  if (size >= 1 && size <= kMaxWorldSize)
    return success();
  return emitOptionalError(loc, "device_group @", group,
                           ": size must be in [1, ", kMaxWorldSize, "], got ",
                           size);
}

LogicalResult mlir::braid::checkMesh(OptLoc loc, ArrayRef<StringRef> names,
                                     ArrayRef<int64_t> sizes) {
  if (names.empty())
    return success();
  if ((int64_t)names.size() > kMaxDeviceGroups)
    return emitOptionalError(loc, "device_group @", names.back(),
                             ": a module declares at most ", kMaxDeviceGroups,
                             " device groups (mesh axes)");
  std::optional<int64_t> world = ::braid::checkedProduct(sizes);
  if (world && *world <= kMaxWorldSize)
    return success();
  std::string product;
  for (auto [i, name] : llvm::enumerate(names))
    product += (i ? " x @" : "@") + name.str();
  product += " = ";
  for (auto [i, size] : llvm::enumerate(sizes))
    product += (i ? " x " : "") + std::to_string(size);
  return emitOptionalError(
      loc, "device_group @", names.back(), ": the mesh of device groups ",
      product, " = ",
      world ? std::to_string(*world) : std::string("more than int64 can count"),
      " ranks exceeds the maximum world size ", kMaxWorldSize);
}

static FailureOr<RankedTensorType> resultTensor(OptLoc loc, StringRef op,
                                                Type result) {
  auto t = dyn_cast<RankedTensorType>(result);
  if (!t)
    return emitOptionalError(loc, op, ": result must be a ranked tensor, got ",
                             result);
  return t;
}

LogicalResult mlir::braid::checkAllReduce(OptLoc loc, StringRef op,
                                          RankedTensorType input,
                                          Type result) {
  if (result != input)
    return emitOptionalError(loc, op, ": result type ", result,
                             " must equal the input type ", input);
  return success();
}

LogicalResult mlir::braid::checkAllGather(OptLoc loc, StringRef op,
                                          RankedTensorType input, Type result,
                                          int64_t dim, int64_t n) {
  auto out = resultTensor(loc, op, result);
  if (failed(out) || failed(checkDim(loc, op, "dim", dim, input.getRank())))
    return failure();
  SmallVector<int64_t> expected(input.getShape());
  std::optional<int64_t> gathered = ::braid::checkedMul(expected[dim], n);
  if (!gathered)
    return emitOptionalError(loc, op, ": dim ", dim, " of size ",
                             input.getDimSize(dim), " x group size ", n,
                             " overflows int64");
  expected[dim] = *gathered;
  if (out->getElementType() != input.getElementType() ||
      out->getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(loc, op, ": result ", *out, " must be ",
                             formatShape(expected), " (dim ", dim,
                             " = group size ", n, " x operand size ",
                             input.getDimSize(dim), ") of ",
                             input.getElementType());
  return success();
}

LogicalResult mlir::braid::checkReduceScatter(OptLoc loc, StringRef op,
                                              RankedTensorType input,
                                              Type result, int64_t dim,
                                              int64_t n) {
  auto out = resultTensor(loc, op, result);
  if (failed(out) || failed(checkDim(loc, op, "dim", dim, input.getRank())))
    return failure();
  if (input.getDimSize(dim) % n != 0)
    return emitOptionalError(loc, op, ": dim ", dim, " of size ",
                             input.getDimSize(dim),
                             " is not divisible by group size ", n);
  SmallVector<int64_t> expected(input.getShape());
  expected[dim] /= n;
  if (out->getElementType() != input.getElementType() ||
      out->getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(loc, op, ": result ", *out, " must be ",
                             formatShape(expected), " (dim ", dim, " = ",
                             input.getDimSize(dim), " / group size ", n,
                             ") of ", input.getElementType());
  return success();
}

LogicalResult mlir::braid::checkAllToAll(OptLoc loc, StringRef op,
                                         RankedTensorType input, Type result,
                                         int64_t splitDim, int64_t concatDim,
                                         int64_t n) {
  auto out = resultTensor(loc, op, result);
  if (failed(out) ||
      failed(checkDim(loc, op, "split_dim", splitDim, input.getRank())) ||
      failed(checkDim(loc, op, "concat_dim", concatDim, input.getRank())))
    return failure();
  if (input.getDimSize(splitDim) % n != 0)
    return emitOptionalError(loc, op, ": split_dim ", splitDim, " of size ",
                             input.getDimSize(splitDim),
                             " is not divisible by group size ", n);
  SmallVector<int64_t> expected(input.getShape());
  expected[splitDim] /= n;
  std::optional<int64_t> concatenated =
      ::braid::checkedMul(expected[concatDim], n);
  if (!concatenated)
    return emitOptionalError(loc, op, ": concat_dim ", concatDim, " of size ",
                             expected[concatDim], " x group size ", n,
                             " overflows int64");
  expected[concatDim] = *concatenated;
  if (out->getElementType() != input.getElementType() ||
      out->getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(loc, op, ": result ", *out, " must be ",
                             formatShape(expected), " of ",
                             input.getElementType());
  return success();
}

LogicalResult mlir::braid::checkBroadcast(OptLoc loc, StringRef op,
                                          RankedTensorType input, Type result,
                                          int64_t root, int64_t n) {
  if (root < 0 || root >= n)
    return emitOptionalError(loc, op, ": root ", root,
                             " is not a rank of a group of size ", n);
  return checkAllReduce(loc, op, input, result);
}

LogicalResult mlir::braid::checkPeer(OptLoc loc, StringRef op, int64_t peer,
                                     int64_t n) {
  if (peer >= 0 && peer < n)
    return success();
  return emitOptionalError(loc, op, ": peer ", peer,
                           " is not a rank of a group of size ", n);
}
