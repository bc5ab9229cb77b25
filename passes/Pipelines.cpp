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
    bool cut = !options.decompose.empty() && options.decompose != "off";
    if (cut || spVariants) {
      mlir::braid::BraidDecomposePassOptions chunks;
      // Without decomposition it still picks the sequence-parallel form.
      chunks.chunks = cut ? options.decompose : "1";
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

std::string braid::pipelineOptionsError(const PipelineOptions &options,
                                        llvm::StringRef prefix) {
  std::string p = prefix.str();
  if (!options.decompose.empty() && options.decompose != "off" &&
      !mlir::braid::parseChunkCounts(options.decompose))
    return p + "decompose '" + options.decompose +
           "': chunk counts are integers of 1 or more, comma-separated, or "
           "'off'";
  // Whether or not a pass will read it (schedule=false runs none).
  const std::string &order = options.decomposeOrder;
  if (order != "auto" && order != "side-by-side" && order != "skewed")
    return p + "decompose-order '" + order +
           "': use auto, side-by-side or skewed";
  if (options.combineCollectiveBytes < 0)
    return p + "combine-collectives " +
           std::to_string(options.combineCollectiveBytes) +
           ": a byte count, 0 or more (0: never)";
  return "";
}

namespace {
/// braid-default-pipeline's options: braid-compile's pipeline flags, same
/// names and defaults, so that braid-opt reproduces any braid-compile run.
struct DefaultPipelineOptions
    : mlir::PassPipelineOptions<DefaultPipelineOptions> {
  Option<bool> fuseCollectives{
      *this, "fuse-collectives",
      llvm::cl::desc("braid-fuse-collectives' fold (reassociates sums)"),
      llvm::cl::init(false)};
  Option<bool> fuseCompute{*this, "fuse-compute",
                           llvm::cl::desc("Run braid-fuse-compute"),
                           llvm::cl::init(true)};
  Option<bool> schedule{
      *this, "schedule",
      llvm::cl::desc("Run braid-schedule, braid-assign-streams and "
                     "braid-insert-events"),
      llvm::cl::init(true)};
  Option<std::string> decompose{
      *this, "decompose",
      llvm::cl::desc("braid-decompose's chunk counts (comma-separated), or "
                     "'off'"),
      llvm::cl::init("1,2,4")};
  Option<std::string> decomposeOrder{
      *this, "decompose-order", llvm::cl::desc("auto, side-by-side or skewed"),
      llvm::cl::init("auto")};
  Option<int64_t> combineCollectives{
      *this, "combine-collectives",
      llvm::cl::desc("Pack independent all_reduces up to this many bytes "
                     "(0: never)"),
      llvm::cl::init(0)};
  Option<std::string> sp{*this, "sp",
                         llvm::cl::desc("megatron, ulysses or off"),
                         llvm::cl::init("megatron")};
  Option<bool> spForce{*this, "sp-force",
                       llvm::cl::desc("Sequence parallelism wherever legal"),
                       llvm::cl::init(false)};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Cost-model target: preset name or JSON file"),
      llvm::cl::init("h100-sxm-x8")};
  Option<bool> report{
      *this, "report",
      llvm::cl::desc("Remarks: what the passes decided and why"),
      llvm::cl::init(false)};

  braid::PipelineOptions toPipelineOptions() const {
    braid::PipelineOptions o;
    o.fuseCollectives = fuseCollectives;
    o.fuseCompute = fuseCompute;
    o.schedule = schedule;
    o.decompose = decompose;
    o.decomposeOrder = decomposeOrder;
    o.combineCollectiveBytes = combineCollectives;
    o.sequenceParallel = sp;
    o.sequenceParallelForce = spForce;
    o.target = target;
    o.report = report;
    return o;
  }
};
} // namespace

void braid::registerPipelines() {
  // Registered through the underlying call rather than
  // PassPipelineRegistration: that one fails with no message on options
  // the pipeline does not take, and cannot refuse a bad value.
  mlir::registerPassPipeline(
      "braid-default-pipeline",
      "braid-compile's pipeline: sequence parallelism where it pays, "
      "compute fusion, simplify, latency-hiding schedule and streams, "
      "plan memory, verify the schedule",
      [](mlir::OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>
             errorHandler) {
        DefaultPipelineOptions cl;
        if (mlir::failed(cl.parseFromString(text)))
          return errorHandler("braid-default-pipeline: cannot parse the "
                              "options '" +
                              text + "'");
        PipelineOptions options = cl.toPipelineOptions();
        std::string error = pipelineOptionsError(options, "");
        if (!error.empty())
          return errorHandler("braid-default-pipeline: " + error);
        buildDefaultPipeline(pm, options);
        return mlir::success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)>
             optHandler) { optHandler(DefaultPipelineOptions()); });
}
