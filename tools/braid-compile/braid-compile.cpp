//===- braid-compile.cpp - config.json -> plan in one command -------------===//
//
// braid-import + the default pipeline (or --pass-pipeline) +
// braid-translate --braid-to-plan, in one process.
//
//===----------------------------------------------------------------------===//
#include "frontend/ImportCommandLine.h"
#include "passes/CompileReport.h"
#include "passes/InitAll.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "passes/StepStats.h"
#include "passes/cost/CostModel.h"
#include "passes/cost/Target.h"
#include "translate/PlanExport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

static cl::OptionCategory compileCategory("Compile options");

static cl::opt<std::string> outputPath("o",
                                       cl::desc("Output plan file (default "
                                                "model.bplan)"),
                                       cl::value_desc("file"),
                                       cl::init("model.bplan"),
                                       cl::cat(compileCategory));
static cl::opt<std::string> passPipeline(
    "pass-pipeline",
    cl::desc("Textual pass pipeline to run instead of the default, e.g. "
             "'builtin.module(braid-simplify,braid-plan-memory{reuse=false})'"
             ", or 'none' (translate the imported IR as is); default: "
             "braid-default-pipeline"),
    cl::init(""), cl::cat(compileCategory));
static cl::opt<bool> fuseCollectives(
    "fuse-collectives",
    cl::desc("Run braid-fuse-collectives in the default pipeline: fold "
             "all_reduce(a) + all_reduce(b) into all_reduce(a + b) (parallel "
             "attention/MLP blocks); reassociates sums, so off by default"),
    cl::cat(compileCategory));
static cl::opt<bool> fuseCompute(
    "fuse-compute",
    cl::desc("Run braid-fuse-compute in the default pipeline (silu(gate) * "
             "up as one swiglu op); on by default, --fuse-compute=false "
             "keeps the ops apart"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> schedule(
    "schedule",
    cl::desc("Run braid-schedule, braid-assign-streams and braid-insert-events "
             "in the default pipeline: collectives as start/wait pairs on a "
             "communication stream where compute can hide them; on by "
             "default, --schedule=false keeps every collective synchronous "
             "on one stream"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<std::string> decompose(
    "decompose",
    cl::desc("braid-decompose's chunk counts in the default pipeline (with "
             "--schedule): the prefill's tokens cut into the count the cost "
             "model prices fastest; one count forces it where it applies "
             "(a warning names each function it cannot cut), 'off' never "
             "cuts"),
    cl::value_desc("counts"), cl::init("1,2,4"), cl::cat(compileCategory));
static cl::opt<std::string> decomposeOrder(
    "decompose-order",
    cl::desc("How braid-decompose orders the chunks' ops: side-by-side, "
             "skewed (a software pipeline: chunk c one collective behind "
             "chunk c-1) or auto, the default (the cost model prices both)"),
    cl::value_desc("auto|side-by-side|skewed"), cl::init("auto"),
    cl::cat(compileCategory));
static cl::opt<int64_t, false, braid::DecimalParser> combineCollectiveBytes(
    "combine-collectives",
    cl::desc("Pack independent all_reduces of one group, kind and dtype, up "
             "to this many bytes together, into one (braid-fuse-collectives "
             "combine-bytes; exact); 0, the default: never"),
    cl::value_desc("bytes"), cl::init(0), cl::cat(compileCategory));
static cl::opt<std::string> sequenceParallel(
    "sp",
    cl::desc("Sequence parallelism in the default pipeline: megatron (the "
             "default: reduce_scatter / all_gather around the token-wise ops "
             "where the cost model of --target says the step gets faster), "
             "ulysses (megatron, plus attention on all tokens of a head shard "
             "through all_to_all, q/k/v/o weights whole on every rank; in "
             "functions whose tokens divide by tp, plain TP in the others; an "
             "error for a model whose KV heads do not divide by tp or whose "
             "q/k/v projection is fused) or off"),
    cl::value_desc("megatron|ulysses|off"), cl::init("megatron"),
    cl::cat(compileCategory));
static cl::opt<bool> sequenceParallelForce(
    "sp-force",
    cl::desc("Apply --sp wherever it is legal, whatever the cost model says "
             "(tests; small models)"),
    cl::cat(compileCategory));
static cl::opt<std::string> target(
    "target",
    cl::desc("Hardware target (preset name or JSON file) whose cost model "
             "decides where the passes pay (default h100-sxm-x8)"),
    cl::init("h100-sxm-x8"), cl::cat(compileCategory));
static cl::opt<bool> emitMlir("emit-mlir",
                              cl::desc("Write the compiled IR instead of the "
                                       "plan"),
                              cl::cat(compileCategory));
static cl::opt<bool>
    report("report",
           cl::desc("Print, per function, the estimated step serial (the same "
                    "pipeline with --schedule=false) and as compiled, exposed "
                    "communication, overlap efficiency, token chunks and arena "
                    "bytes; and, on stderr, what sequence parallelism, "
                    "decomposition and scheduling decided and why"),
           cl::cat(compileCategory));

static cl::opt<bool> stepStats(
    "step-stats",
    cl::desc("Print per-rank parameter, activation and KV-cache bytes, FLOPs "
             "and collective bytes of each compiled function (braid-import "
             "--stats, after the pass pipeline)"),
    cl::cat(compileCategory));

static cl::opt<bool> verifyEach(
    "verify-each",
    cl::desc("Verify the IR after every pass (as braid-opt does); by default "
             "it is verified once, after the pipeline"),
    cl::cat(compileCategory));

/// The default pipeline's flags given on the command line ("--sp,
/// --decompose"), or "". (--target and --report also serve --report.)
static std::string defaultPipelineFlagsGiven() {
  std::string given;
  for (const cl::Option *o : std::initializer_list<const cl::Option *>{
           &fuseCollectives, &fuseCompute, &schedule, &decompose,
           &decomposeOrder, &combineCollectiveBytes, &sequenceParallel,
           &sequenceParallelForce})
    if (o->getNumOccurrences())
      given += (given.empty() ? "--" : ", --") + o->ArgStr.str();
  return given;
}

/// Set while --report's serial reference pipeline runs: its warnings repeat
/// the compiled pipeline's.
static bool quietWarnings = false;

static int fail(const llvm::Twine &message) {
  llvm::errs() << "braid-compile: " << message << "\n";
  return 1;
}

/// `text` into `pm`, which runs on the module: a pipeline anchored on it
/// (`builtin.module(a,b)`, as braid-opt takes it) is its passes, not a
/// pipeline nested on modules inside it (there are none: it would run
/// nothing); a bare list (`a,b`) is taken as it is.
static mlir::LogicalResult parseModulePipeline(llvm::StringRef text,
                                               mlir::PassManager &pm) {
  llvm::StringRef inner = text.trim();
  if (inner.consume_front("builtin.module")) {
    inner = inner.ltrim();
    if (!inner.consume_front("(") || !inner.consume_back(")"))
      return mlir::failure();
  } else {
    inner = text;
  }
  return mlir::parsePassPipeline(inner, pm, llvm::errs());
}

/// A target with fewer GPUs than the plan's ranks prices nothing (every
/// collective would cost infinity): said once here, where the passes that
/// choose by price only remark it under --report. (A target that does not
/// load is the passes' error.)
static void warnIfTargetTooSmall(mlir::ModuleOp module,
                                 const std::string &target) {
  llvm::Expected<braid::cost::Target> tgt = braid::cost::resolveTarget(target);
  if (!tgt) {
    llvm::consumeError(tgt.takeError());
    return;
  }
  braid::cost::CostModel model(*tgt, braid::cost::LaunchMode::Graph, module);
  if (std::string problem = model.fitProblem(); !problem.empty())
    llvm::errs() << "braid-compile: warning: " << problem
                 << ": the cost model prices nothing, so nothing is "
                    "chosen by price: no sequence parallelism, one chunk "
                    "and every collective synchronous, unless forced "
                    "(--sp-force, a single --decompose count)\n";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  braid::registerAllPasses();
  mlir::registerPassManagerCLOptions();
  braid::showOnlyBraidOptionsInHelp({&compileCategory},
                                    /*showMlirOptions=*/true);
  cl::ParseCommandLineOptions(argc, argv,
                              "braid-compile: config.json -> execution plan\n");

  auto config = braid::modelConfigFromCommandLine();
  if (!config)
    return fail(llvm::toString(config.takeError()));
  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto options = braid::importOptionsFromCommandLine();
  if (!options)
    return fail(llvm::toString(options.takeError()));
  auto module = braid::importModel(ctx, *config, *options);
  if (!module)
    return fail(llvm::toString(module.takeError()));

  // Passes' remarks (what they decided and why) are --report's; warnings
  // (an option that could not apply) are always shown; errors go on to the
  // default handler.
  mlir::ScopedDiagnosticHandler remarks(&ctx, [](mlir::Diagnostic &d) {
    bool warning = d.getSeverity() == mlir::DiagnosticSeverity::Warning;
    if (d.getSeverity() != mlir::DiagnosticSeverity::Remark && !warning)
      return mlir::failure();
    if ((!report && !warning) || (warning && quietWarnings))
      return mlir::success();
    llvm::errs() << (warning ? "braid-compile: warning: " : "braid-compile: ");
    if (auto name = llvm::dyn_cast<mlir::NameLoc>(d.getLocation()))
      llvm::errs() << name.getName().getValue() << ": ";
    llvm::errs() << d.str() << "\n";
    return mlir::success();
  });
  mlir::PassManager pm(&ctx);
  if (mlir::failed(mlir::applyPassManagerCLOptions(pm)))
    return fail("bad pass manager options");
  pm.enableVerifier(verifyEach);
  braid::PipelineOptions pipeline;
  if (passPipeline.empty()) {
    pipeline.fuseCollectives = fuseCollectives;
    pipeline.fuseCompute = fuseCompute;
    pipeline.schedule = schedule;
    pipeline.decompose = decompose;
    pipeline.decomposeOrder = decomposeOrder;
    pipeline.combineCollectiveBytes = combineCollectiveBytes;
    pipeline.sequenceParallel = sequenceParallel;
    pipeline.sequenceParallelForce = sequenceParallelForce;
    pipeline.target = target;
    pipeline.report = report;
    // Checked here to name the flags (braid-decompose would name its own
    // option, and only when it runs).
    std::string error = braid::pipelineOptionsError(pipeline, "--");
    if (!error.empty())
      return fail(error);
    warnIfTargetTooSmall(**module, target);
    braid::buildDefaultPipeline(pm, pipeline);
  } else if (std::string given = defaultPipelineFlagsGiven(); !given.empty()) {
    // They would do nothing: refused, not ignored.
    bool one = given.find(',') == std::string::npos;
    return fail(given + (one ? " configures" : " configure") +
                " the default pipeline, which " +
                "--pass-pipeline replaces: give them as options of its " +
                "passes, or of braid-default-pipeline{...} (e.g. " +
                "braid-default-pipeline{decompose=2 sp=off})");
  } else if (passPipeline == "none") {
    // Nothing: the reference point for differential tests.
  } else if (mlir::failed(parseModulePipeline(passPipeline, pm))) {
    return fail("cannot parse --pass-pipeline '" + passPipeline + "'");
  }
  // The serial reference of --report: the same pipeline, unscheduled, on
  // the imported module; run after the real one, so that the real one's
  // errors are reported as such, and quietly (its warnings are the real
  // one's).
  mlir::OwningOpRef<mlir::ModuleOp> serial;
  if (report && passPipeline.empty() && schedule)
    serial = (**module).clone();
  if (mlir::failed(pm.run(**module)))
    return fail("the pass pipeline failed");
  if (mlir::failed(mlir::verify(**module)))
    return fail("the compiled IR does not verify (--verify-each finds the "
                "pass that broke it)");
  if (serial) {
    mlir::PassManager serialPm(&ctx);
    braid::PipelineOptions unscheduled = pipeline;
    unscheduled.schedule = false;
    unscheduled.report = false;
    braid::buildDefaultPipeline(serialPm, unscheduled);
    quietWarnings = true;
    bool failed = mlir::failed(serialPm.run(*serial));
    quietWarnings = false;
    if (failed)
      return fail("the unscheduled pipeline (--report's reference) failed");
  }

  if (report)
    if (llvm::Error e = braid::printCompileReport(
            llvm::outs(), **module, serial ? *serial : mlir::ModuleOp(),
            target))
      return fail("--report: " + llvm::toString(std::move(e)));

  if (stepStats)
    if (llvm::Error e = mlir::braid::printModuleStepStats(llvm::outs(), **module))
      return fail("--step-stats: " + llvm::toString(std::move(e)));

  std::string err;
  auto out = mlir::openOutputFile(outputPath, &err);
  if (!out)
    return fail(err);
  if (emitMlir) {
    (**module).print(out->os());
  } else {
    auto bytes = braid::exportPlan(**module);
    if (mlir::failed(bytes))
      return fail("cannot translate the compiled IR to a plan");
    out->os().write(reinterpret_cast<const char *>(bytes->data()),
                    bytes->size());
  }
  out->keep();
  return 0;
}
