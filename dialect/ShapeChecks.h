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

#include "runtime/CheckedMath.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::braid {

using OptLoc = std::optional<Location>;

//===----------------------------------------------------------------------===//
// Limits. Every size computed from a shape or a group stays far from int64
// overflow (a tensor's bytes are at most 2^43) and every verified module can
// become a plan (the runtime's plan loader refuses larger tensors and reads
// group sizes and the world size as int32).
//===----------------------------------------------------------------------===//

/// Most elements (and largest dim) of one braid tensor: 2^40, the plan's
/// own limit (shared with the runtime loader).
using ::braid::kMaxTensorElements;
/// Most ranks in one device group and in the mesh of all groups: 2^20.
constexpr int64_t kMaxWorldSize = int64_t(1) << 20;
/// Most device groups (mesh axes) in one module.
constexpr int64_t kMaxDeviceGroups = 64;
/// Most blocks a parameter's shard dim is viewed as (the plan's int32).
constexpr int64_t kMaxBlocks = int64_t(INT32_MAX);

/// Bytes of one element of a type the runtime runs (bf16, f16, f32, i32,
/// i64), or nullopt for any other type.
std::optional<int64_t> elementByteSize(Type elementType);

/// The element count of `shape`, or nullopt when it overflows int64.
std::optional<int64_t> checkedNumElements(ArrayRef<int64_t> shape);

/// A type a braid tensor value may have: a statically shaped ranked tensor
/// of bf16, f16, f32, i32 or i64 with at most kMaxTensorElements elements.
/// `op` and `what` name the value in the message ("reshape", "result #0").
LogicalResult checkTensorType(OptLoc loc, StringRef op, StringRef what,
                              Type type);

/// Bytes of `type` if checkTensorType accepts it, else nullopt.
std::optional<int64_t> tensorByteSize(Type type);

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
/// `rotaryDim` 0: the whole head, which must then be even (a partial
/// rotary dim must be even itself; the head need not be).
LogicalResult checkRope(OptLoc loc, RankedTensorType input,
                        RankedTensorType positions, RankedTensorType result,
                        double theta, int64_t rotaryDim = 0);

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
/// `opName` names the op in messages (braid.parameter_pack is a concat
/// along dim 0 too).
LogicalResult checkConcat(OptLoc loc, ArrayRef<RankedTensorType> inputs,
                          int64_t dim, RankedTensorType result,
                          StringRef opName = "concat");
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
/// 1 <= size <= kMaxWorldSize.
LogicalResult checkGroupSize(OptLoc loc, StringRef group, int64_t size);
/// The mesh of device groups (declaration order): at most kMaxDeviceGroups
/// groups whose sizes multiply to at most kMaxWorldSize ranks. The message
/// names the last group of `names`.
LogicalResult checkMesh(OptLoc loc, ArrayRef<StringRef> names,
                        ArrayRef<int64_t> sizes);
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
