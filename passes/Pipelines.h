//===- Pipelines.h - braid's default pass pipeline -------------*- C++ -*-===//
#ifndef BRAID_PASSES_PIPELINES_H
#define BRAID_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace braid {

/// What braid-compile runs between import and translation (also
/// `braid-opt --braid-default-pipeline`): every pass that exists, in the
/// order their contracts require. Memory planning is always last: any pass
/// after it would invalidate the buffers.
void buildDefaultPipeline(mlir::OpPassManager &pm);

/// Registers `braid-default-pipeline`.
void registerPipelines();

} // namespace braid

#endif // BRAID_PASSES_PIPELINES_H
