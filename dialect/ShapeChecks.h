//===- ShapeChecks.h - shape rules shared by verifiers and passes -*- C++ -*-===//
//
// Every shape and attribute rule of the braid dialect, written once. Op
// verifiers call these with the op's location; passes and importers call
// them with std::nullopt to test a rewrite before doing it. Messages name
// the op, the operand and the numbers that disagree.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_DIALECT_SHAPECHECKS_H
#define BRAID_DIALECT_SHAPECHECKS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace mlir::braid {

using OptLoc = std::optional<Location>;

/// "[2, 16, 512]"
std::string formatShape(ArrayRef<int64_t> shape);

/// Result shape of matmul(a, b) or failure with a diagnostic.
FailureOr<SmallVector<int64_t>> inferMatmulShape(OptLoc loc, ArrayRef<int64_t> a,
                                                 ArrayRef<int64_t> b,
                                                 bool transposeA,
                                                 bool transposeB);
LogicalResult checkMatmul(OptLoc loc, RankedTensorType a, RankedTensorType b,
                          RankedTensorType result, bool transposeA,
                          bool transposeB);
LogicalResult checkBroadcastBinary(OptLoc loc, StringRef op,
                                   RankedTensorType lhs, RankedTensorType rhs,
                                   RankedTensorType result);
/// rms_norm / layer_norm: every `params` tensor is [H] for input [..., H].
LogicalResult checkNorm(OptLoc loc, StringRef op, RankedTensorType input,
                        ArrayRef<RankedTensorType> params,
                        RankedTensorType result, double epsilon);
LogicalResult checkRope(OptLoc loc, RankedTensorType input,
                        RankedTensorType positions, RankedTensorType result,
                        double theta);

struct AttentionShapes {
  RankedTensorType q, k, v, output;
  // All null when there is no KV cache.
  RankedTensorType kCache, vCache, position, kCacheOut, vCacheOut;
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0;
  std::optional<double> scale;
};
LogicalResult checkAttention(OptLoc loc, const AttentionShapes &s);

LogicalResult checkEmbedding(OptLoc loc, RankedTensorType ids,
                             RankedTensorType table, RankedTensorType result);
LogicalResult checkDim(OptLoc loc, StringRef op, StringRef what, int64_t dim,
                       int64_t rank);
LogicalResult checkSlice(OptLoc loc, RankedTensorType input,
                         ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes,
                         RankedTensorType result);
LogicalResult checkConcat(OptLoc loc, ArrayRef<RankedTensorType> inputs,
                          int64_t dim, RankedTensorType result);
LogicalResult checkReshape(OptLoc loc, RankedTensorType input,
                           RankedTensorType result);

/// Parameter slicing: `local` is what one rank holds of `full`, after
/// zero-padding `full` to `padded` (empty: no padding).
LogicalResult checkParameter(OptLoc loc, StringRef name,
                             ArrayRef<int64_t> full, ArrayRef<int64_t> padded,
                             RankedTensorType local,
                             std::optional<int64_t> shardDim,
                             int64_t groupSize, int64_t shards,
                             int64_t blocks);

// Collectives. `n` is the group size.
LogicalResult checkGroupSize(OptLoc loc, StringRef group, int64_t size);
LogicalResult checkAllReduce(OptLoc loc, StringRef op, RankedTensorType input,
                             Type result);
LogicalResult checkAllGather(OptLoc loc, StringRef op, RankedTensorType input,
                             Type result, int64_t dim, int64_t n);
LogicalResult checkReduceScatter(OptLoc loc, StringRef op,
                                 RankedTensorType input, Type result,
                                 int64_t dim, int64_t n);
LogicalResult checkAllToAll(OptLoc loc, StringRef op, RankedTensorType input,
                            Type result, int64_t splitDim, int64_t concatDim,
                            int64_t n);
LogicalResult checkBroadcast(OptLoc loc, StringRef op, RankedTensorType input,
                             Type result, int64_t root, int64_t n);
LogicalResult checkPeer(OptLoc loc, StringRef op, int64_t peer, int64_t n);

} // namespace mlir::braid

#endif // BRAID_DIALECT_SHAPECHECKS_H
