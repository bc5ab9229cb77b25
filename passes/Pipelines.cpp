//===- Pipelines.cpp - braid's default pass pipeline ----------------------===//
#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

void braid::buildDefaultPipeline(mlir::OpPassManager &pm,
                                 const PipelineOptions &options) {
  mlir::braid::BraidSequenceParallelPassOptions sp;
  sp.mode = options.sequenceParallel;
  sp.force = options.sequenceParallelForce;
  sp.target = options.target;
  sp.report = options.report;
  // Scheduled, sequence parallelism is priced after chunking and
  // scheduling: braid-decompose chooses between the two forms.
  bool spVariants = options.schedule &&
                    options.sequenceParallel == "megatron" &&
                    !options.sequenceParallelForce;
  sp.variants = spVariants;
  // Fold parallel blocks' reductions first: SP then scatters the one left.
  if (options.fuseCollectives || options.combineCollectiveBytes > 0) {
    mlir::braid::BraidFuseCollectivesPassOptions fuse;
    fuse.fold = options.fuseCollectives;
    fuse.combineBytes = options.combineCollectiveBytes;
    pm.addPass(mlir::braid::createBraidFuseCollectivesPass(fuse));
  }
  pm.addPass(mlir::braid::createBraidSequenceParallelPass(sp));
  // Fewer, larger compute ops for whatever follows (scheduling sees them).
  if (options.fuseCompute)
    pm.addPass(mlir::braid::createBraidFuseComputePass());
  pm.addPass(mlir::braid::createBraidSimplifyPass());
  // Hide collectives behind independent compute: start/wait pairs, a
  // communication stream, the events between the streams. (The scheduling
  // passes narrow the gathers first, after any cut into chunks: a cut
  // reads a gathered chunk, not the gathered whole.)
  if (!options.schedule)
    pm.addPass(mlir::braid::createBraidNarrowGathersPass());
  if (options.schedule) {
    if (!options.decompose.empty() || spVariants) {
      mlir::braid::BraidDecomposePassOptions chunks;
      // Without decomposition it still picks the sequence-parallel form.
      chunks.chunks = options.decompose.empty() ? "1" : options.decompose;
      chunks.order = options.decomposeOrder;
      chunks.target = options.target;
      chunks.report = options.report;
      pm.addPass(mlir::braid::createBraidDecomposePass(chunks));
    }
    addSchedulingPasses(pm, options.target, options.report);
  }
  pm.addPass(mlir::braid::createBraidPlanMemoryPass());
  // Views wait for their producers: the events again, from the plan.
  if (options.schedule) {
    mlir::braid::BraidInsertEventsPassOptions events;
    events.replace = true;
    pm.addPass(mlir::braid::createBraidInsertEventsPass(events));
  }
  // Nothing leaves the compiler unless its schedule is proven safe.
  pm.addPass(mlir::braid::createBraidVerifySchedulePass());
}

void braid::addSchedulingPasses(mlir::OpPassManager &pm,
                                const std::string &target, bool report,
                                bool events) {
  pm.addPass(mlir::braid::createBraidNarrowGathersPass());
  mlir::braid::BraidSchedulePassOptions sched;
  sched.target = target;
  sched.report = report;
  pm.addPass(mlir::braid::createBraidSchedulePass(sched));
  pm.addPass(mlir::braid::createBraidAssignStreamsPass());
  if (events)
    pm.addPass(mlir::braid::createBraidInsertEventsPass());
}

void braid::registerPipelines() {
  mlir::PassPipelineRegistration<>(
      "braid-default-pipeline",
      "braid-compile's pipeline: sequence parallelism where it pays, "
      "compute fusion, simplify, latency-hiding schedule and streams, "
      "plan memory, verify the schedule",
      [](mlir::OpPassManager &pm) { buildDefaultPipeline(pm); });
}
