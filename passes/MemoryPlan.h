//===- MemoryPlan.h - Buffer lifetimes and arena placement ------*- C++ -*-===//
//
// Shared by the braid-plan-memory pass and the plan exporter: which values
// live in a function's per-rank arena, how long each one lives, and where it
// is placed.
//
// Storage roles (what the plan calls TensorKind):
// - results of braid.parameter are runtime-owned parameters;
// - arguments tagged `braid.state` are runtime-owned state slots; an
//   attention's updated cache whose cache operand is such a state value is
//   written in place into the same slot, provided nothing reads the old
//   value afterwards;
// - results of braid.parameter_pack are runtime-owned too (the runtime
//   stores the pieces inside the pack);
// - async handles have no storage of their own: the matching wait's result
//   is the payload, written from the start onward;
// - every other tensor value (op results and `braid.input` arguments) lives
//   in the arena: a view (a reshape, a contiguous slice: viewOf) inside its
//   source's buffer, every other one in a buffer of its own.
//
// Lifetimes are sets of program points (op positions in the entry block;
// -1 is function entry). Two buffers may share memory only if every use of
// one happens-before the definition of the other. With one stream,
// happens-before is plan order; braid-plan-memory supplies the stream- and
// event-aware order (passes/analysis/ScheduleAnalysis.h).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_MEMORYPLAN_H
#define BRAID_PASSES_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <optional>

namespace mlir::braid {

/// Default buffer alignment: what cudaMalloc guarantees and cuBLASLt
/// prefers; keeps every tensor usable as a GEMM operand.
constexpr int64_t kDefaultBufferAlignment = 256;

/// The `braid.state` argument whose slot `v` occupies (itself, or an
/// attention cache updated in place from it), or nullopt.
std::optional<unsigned> stateArgumentOf(Value v);

/// The earliest user (in block order) of `cache`, an operand of
/// `attention`, that still reads its old contents after `attention` (an
/// async start counts until its wait): what stops the attention updating
/// that cache in place. Null when none.
Operation *laterReaderOfOldCache(Operation *attention, Value cache);

/// True when `v` needs an arena buffer.
bool needsArenaBuffer(Value v);

/// Bytes of a braid tensor type (elements x element bytes; at most 2^43 by
/// the dialect's limits, dialect/ShapeChecks.h), or 0 for any other type.
int64_t tensorBytes(Type type);

/// A value that is some of another value's bytes, in order: the result of
/// a reshape, or of a slice whose elements are one contiguous run
/// (runtime/Views.h), when both it and its operand live in the arena. The
/// planner places it at `byteOffset` inside `source`'s buffer, so the
/// runtimes copy nothing; the schedule checks count the op as a read.
struct ViewOf {
  Value source;
  int64_t byteOffset = 0;
};
std::optional<ViewOf> viewOf(Value v);

/// `v`'s buffer placement relative to the value that owns the bytes: the
/// end of its chain of views (itself when it is not a view).
ViewOf viewRoot(Value v);

struct BufferLifetime {
  Value value;
  int64_t size = 0; // aligned
  int def = 0;      // program point where the buffer starts being written
  SmallVector<int, 4> uses; // points that read it or a view of it (never
                            // empty)
  /// Views placed inside this buffer, with their byte offsets.
  SmallVector<std::pair<Value, int64_t>> views;
};

/// Happens-before over program points, contained in block order.
struct Ordering {
  /// `before(a, b)`: a strict partial order with before(a, b) => a < b.
  std::function<bool(int a, int b)> before;
  /// `horizon(p)`: the largest point q such that every point <= q happens
  /// before p (p - 1 on one stream). Points between horizon(p) and p are
  /// the only ones whose order against p needs `before`: this keeps
  /// placement near-linear.
  std::function<int(int p)> horizon;
};
/// Single-stream order: plan order.
Ordering programOrder();

struct FunctionMemoryPlan {
  llvm::DenseMap<Value, int64_t> offsets; // arena values only
  llvm::DenseMap<Value, int64_t> sizes;   // aligned buffer sizes
  SmallVector<BufferLifetime> lifetimes;  // in definition order; empty
                                          // when read back from attributes
  int64_t arenaSize = 0;
  /// Largest total of buffers live at one point: no placement can do better.
  int64_t lowerBound = 0;
  /// Sum of all buffers: the arena without reuse.
  int64_t withoutReuse = 0;
};

/// Lifetimes of every arena buffer of `func` (a single-block function).
/// Fails with an error on `func` if a value cannot be placed.
FailureOr<SmallVector<BufferLifetime>>
computeLifetimes(func::FuncOp func, int64_t alignment);

/// Places `func`'s buffers. With `reuse`, greedy-by-size: largest buffer
/// first, each at the lowest offset that does not overlap a buffer whose
/// lifetime conflicts under `order`. Without, one after another.
FailureOr<FunctionMemoryPlan>
planFunctionMemory(func::FuncOp func, bool reuse,
                   int64_t alignment = kDefaultBufferAlignment,
                   const Ordering &order = programOrder());

/// Attribute names written by braid-plan-memory and read by the exporter.
constexpr llvm::StringLiteral kBuffersAttr = "braid.buffers";
constexpr llvm::StringLiteral kBufferArgAttr = "braid.buffer";
constexpr llvm::StringLiteral kArenaSizeAttr = "braid.arena_size";
constexpr llvm::StringLiteral kArenaLowerBoundAttr = "braid.arena_lower_bound";

/// Reads the placement braid-plan-memory attached to `func`, or nullopt if
/// it has none. Fails (with an error on the op) if the attributes are
/// malformed or disagree with the types.
FailureOr<std::optional<FunctionMemoryPlan>>
readAttachedMemoryPlan(func::FuncOp func);

/// Writes `plan` as attributes on `func`, its arguments and its ops.
void attachMemoryPlan(func::FuncOp func, const FunctionMemoryPlan &plan);

} // namespace mlir::braid

#endif // BRAID_PASSES_MEMORYPLAN_H
