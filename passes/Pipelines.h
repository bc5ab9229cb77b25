//===- Pipelines.h - braid's default pass pipeline -------------*- C++ -*-===//
#ifndef BRAID_PASSES_PIPELINES_H
#define BRAID_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <string>

namespace braid {

/// What braid-compile runs between import and translation (also
/// `braid-opt --braid-default-pipeline`): every pass that exists, in the
/// order their contracts require. Memory planning is always last: any pass
/// after it would invalidate the buffers.
/// Passes of the default pipeline that are off until more differential
/// tests say they do not change the answer beyond rounding.
struct PipelineOptions {
  bool fuseCollectives = false; // braid-fuse-collectives (reassociates sums)
  bool fuseCompute = true;      // braid-fuse-compute (test/run/fuse-compute.test)
  /// braid-schedule + braid-assign-streams + braid-insert-events
  /// (test/run/schedule.test).
  bool schedule = true;
  /// braid-decompose's chunk counts (with schedule; "" or "off": not run).
  std::string decompose = "1,2,4";
  /// braid-decompose's order: "auto", "side-by-side" or "skewed".
  std::string decomposeOrder = "auto";
  /// Pack independent all_reduces up to this many bytes (0: never).
  int64_t combineCollectiveBytes = 0;
  /// braid-sequence-parallel: "megatron" (where the cost model says it
  /// pays on `target`, or wherever legal with spForce) or "off".
  std::string sequenceParallel = "megatron";
  bool sequenceParallelForce = false;
  std::string target = "h100-sxm-x8";
  bool report = false; // passes that can say what they did and why
};

void buildDefaultPipeline(mlir::OpPassManager &pm,
                          const PipelineOptions &options = {});

/// What is wrong with the values of `options` no pass checks itself (the
/// chunk counts, their order, the byte bound), naming each as
/// `<prefix><name>` ("--decompose" for braid-compile's flags,
/// "decompose" for the pipeline's options); "" when nothing is.
std::string pipelineOptionsError(const PipelineOptions &options,
                                 llvm::StringRef prefix);

/// braid-schedule (priced on `target`), braid-assign-streams and, with
/// `events`, braid-insert-events: what turns an unscheduled module into a
/// scheduled one. The default pipeline runs them; braid-decompose prices
/// its chunk counts by running them on a copy, without events: before
/// memory is planned they only restate the dependences the timeline
/// already follows, so the estimate is the same.
void addSchedulingPasses(mlir::OpPassManager &pm, const std::string &target,
                         bool report = false, bool events = true);

/// Registers `braid-default-pipeline`, whose options are braid-compile's
/// pipeline flags under the same names (`braid-opt
/// --braid-default-pipeline='schedule=false target=h200-x8'`).
void registerPipelines();

} // namespace braid

#endif // BRAID_PASSES_PIPELINES_H
