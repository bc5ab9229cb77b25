//===- Diagnostics.h - Errors at an op without reprinting it ----*- C++ -*-===//
//
// Operation::emitOpError (and emitError, emitWarning, emitRemark) attach a
// note printing the op in generic form. For a function or a module that
// note is the whole model, and for any op it numbers the SSA values afresh,
// so its names disagree with the file's. Braid's pass diagnostics name what
// is wrong and carry the location, which already shows the line: passes
// and the exporter emit at the location instead (the dialect's verifiers
// keep MLIR's convention).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_DIALECT_DIAGNOSTICS_H
#define BRAID_DIALECT_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"

namespace mlir::braid {

/// emitOpError's message ("'func.func' op <message>") at `op`'s location.
inline InFlightDiagnostic emitOpErrorAt(Operation *op,
                                        const Twine &message = {}) {
  InFlightDiagnostic d = emitError(op->getLoc());
  d << "'" << op->getName() << "' op " << message;
  return d;
}

} // namespace mlir::braid

#endif // BRAID_DIALECT_DIAGNOSTICS_H
