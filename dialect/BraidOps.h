//===- BraidOps.h - braid ops, types and attributes -----------*- C++ -*-===//
#ifndef BRAID_DIALECT_BRAIDOPS_H
#define BRAID_DIALECT_BRAIDOPS_H

#include "dialect/BraidDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/BraidEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/BraidTypes.h.inc"

namespace mlir::braid {
/// Side-effect resource of collectives: the order in which a rank issues
/// them is part of the program (every rank must issue the same sequence).
struct CommunicationResource
    : public SideEffects::Resource::Base<CommunicationResource> {
  StringRef getName() final { return "braid.communication"; }
};
/// Side-effect resource of event record/wait: the order of a stream.
struct StreamOrderResource
    : public SideEffects::Resource::Base<StreamOrderResource> {
  StringRef getName() final { return "braid.stream_order"; }
};

namespace detail {
/// CollectiveOpInterface defaults: the tensor operand a collective sends
/// (null for recv), the tensor type it yields (null for send) and the one
/// of the two that sizes it.
Value sentValue(Operation *op);
Type receivedType(Operation *op);
Type sizingType(Operation *op);
} // namespace detail

/// The `braid.stream` of `op`, or nullopt when the op carries none.
std::optional<int64_t> getStream(Operation *op);
/// Sets `op`'s `braid.stream`.
void setStream(Operation *op, int64_t stream);
/// True for ops that launch no work and so carry no stream: parameters
/// (runtime-owned) and terminators.
bool isUnscheduledOp(Operation *op);
/// True when some op under `root` is on a stream or starts an async
/// collective: scheduling decisions were made already.
bool isScheduled(Operation *root);
/// True when `op` is a synchronous tensor collective (one operand, one
/// result) whose `*_start` form exists.
bool hasAsyncForm(Operation *op);
/// The `*_start` form of `op` (hasAsyncForm), with its operands and
/// attributes, at `b`'s insertion point; `op` is left as it is.
Operation *createAsyncStart(OpBuilder &b, Operation *op);

/// Checks the rule every `*_start` op obeys: its handle is consumed by
/// exactly one `braid.wait`.
LogicalResult verifyAsyncStartHandle(Operation *op);

/// Checks every tensor an op reads or writes (and every handle payload)
/// against checkTensorType: a runtime element type and at most
/// kMaxTensorElements elements, so that no size computed from it overflows.
LogicalResult verifyTensorLimits(Operation *op);
} // namespace mlir::braid

namespace mlir::OpTrait {
/// Marks the start half of an asynchronous collective.
template <typename ConcreteType>
class BraidAsyncStart : public TraitBase<ConcreteType, BraidAsyncStart> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return ::mlir::braid::verifyAsyncStartHandle(op);
  }
};

/// On every braid op: its tensors obey the dialect's element types and size
/// limits (ShapeChecks.h).
template <typename ConcreteType>
class BraidTensorLimits : public TraitBase<ConcreteType, BraidTensorLimits> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return ::mlir::braid::verifyTensorLimits(op);
  }
};
} // namespace mlir::OpTrait

#include "dialect/BraidInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/BraidOps.h.inc"

#endif // BRAID_DIALECT_BRAIDOPS_H
