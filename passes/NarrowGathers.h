//===- NarrowGathers.h - All_gathers read by slices -------------*- C++ -*-===//
//
// braid-narrow-gathers as a function, for passes that price a rewritten
// copy of a function before choosing it (braid-sequence-parallel).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_NARROWGATHERS_H
#define BRAID_PASSES_NARROWGATHERS_H

#include "mlir/IR/Operation.h"

namespace mlir::braid {

/// Rewrites every synchronous all_gather under `root` whose result is read
/// by slices inside one rank's piece (or covering the gathered dim) to
/// gather only what those slices keep (docs/generated/BraidPasses.md,
/// braid-narrow-gathers). Bit for bit the same values.
void narrowSlicedGathers(Operation *root);

} // namespace mlir::braid

#endif // BRAID_PASSES_NARROWGATHERS_H
