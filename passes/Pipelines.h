//===- Pipelines.h - braid's default pass pipeline -------------*- C++ -*-===//
#ifndef BRAID_PASSES_PIPELINES_H
#define BRAID_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace braid {

/// What braid-compile runs between import and translation (also
/// `braid-opt --braid-default-pipeline`): every pass that exists, in the
/// order their contracts require. Memory planning is always last: any pass
/// after it would invalidate the buffers.
/// Passes of the default pipeline that are off until more differential
/// tests say they do not change the answer beyond rounding.
struct PipelineOptions {
  bool fuseCollectives = false; // braid-fuse-collectives (reassociates sums)
};

void buildDefaultPipeline(mlir::OpPassManager &pm,
                          const PipelineOptions &options = {});

/// Registers `braid-default-pipeline`.
void registerPipelines();

} // namespace braid

#endif // BRAID_PASSES_PIPELINES_H
