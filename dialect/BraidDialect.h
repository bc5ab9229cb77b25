//===- BraidDialect.h - braid dialect -------------------------*- C++ -*-===//
#ifndef BRAID_DIALECT_BRAIDDIALECT_H
#define BRAID_DIALECT_BRAIDDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/BraidDialect.h.inc"

#endif // BRAID_DIALECT_BRAIDDIALECT_H
