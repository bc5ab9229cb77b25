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
/// Checks the rule every `*_start` op obeys: its handle is consumed by
/// exactly one `braid.wait`.
LogicalResult verifyAsyncStartHandle(Operation *op);
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
} // namespace mlir::OpTrait

#define GET_OP_CLASSES
#include "dialect/BraidOps.h.inc"

#endif // BRAID_DIALECT_BRAIDOPS_H
