//===- BraidDialect.cpp - braid dialect registration ----------------------===//
#include "dialect/BraidDialect.h"
#include "dialect/BraidOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::braid;

#include "dialect/BraidDialect.cpp.inc"
#include "dialect/BraidEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/BraidTypes.cpp.inc"

void BraidDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/BraidOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialect/BraidTypes.cpp.inc"
      >();
}
