//===- braid-import.cpp - HF config.json -> tensor-parallel braid IR ------===//
#include "frontend/Importer.h"
#include "passes/InitAll.h"
#include "passes/StepStats.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

static cl::opt<std::string> configPath(
    cl::Positional, cl::desc("<config.json> (default: the embedded tiny LLaMA)"),
    cl::init(""));
static cl::opt<int64_t> tp("tp", cl::desc("Tensor-parallel degree"),
                           cl::init(1));
static cl::opt<int64_t> batch("batch", cl::desc("Sequences per step"),
                              cl::init(1));
static cl::opt<int64_t> seq("seq", cl::desc("Prefill tokens per sequence"),
                            cl::init(16));
static cl::opt<int64_t>
    maxSeq("max-seq",
           cl::desc("KV-cache capacity (default: the model's max positions)"),
           cl::init(0));
static cl::opt<braid::ElementType> dtype(
    "dtype", cl::desc("Element type of activations and parameters"),
    cl::values(clEnumValN(braid::ElementType::BF16, "bf16", "bfloat16"),
               clEnumValN(braid::ElementType::F16, "fp16", "float16"),
               clEnumValN(braid::ElementType::F32, "fp32", "float32")),
    cl::init(braid::ElementType::BF16));
static cl::opt<bool> keepLogitsSharded(
    "keep-logits-sharded",
    cl::desc("Return each rank's vocabulary shard of the logits (no "
             "all_gather)"));
static cl::opt<bool> prefillAllLogits(
    "prefill-all-logits",
    cl::desc("Prefill returns logits for every token (default: the last)"));
static cl::opt<std::string> outputPath("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // LLVM itself owns a `-stats` option, so --stats is taken off argv before
  // cl parses the rest.
  bool stats = false;
  std::vector<char *> args;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef a(argv[i]);
    if (i > 0 && (a == "--stats" || a == "-stats"))
      stats = true;
    else
      args.push_back(argv[i]);
  }
  cl::ParseCommandLineOptions(
      (int)args.size(), args.data(),
      "braid-import: Hugging Face config.json -> braid IR\n\n"
      "  --stats  print per-rank parameter, activation and KV-cache bytes,\n"
      "           FLOPs and collective bytes per step instead of the IR\n"
      "           (with -o the IR is still written)\n");

  llvm::Expected<braid::ModelConfig> config =
      configPath.empty()
          ? braid::parseModelConfig(braid::tinyLlamaConfigJson(),
                                    "<embedded tiny-llama>")
          : braid::loadModelConfig(configPath);
  if (!config) {
    llvm::errs() << "braid-import: " << llvm::toString(config.takeError())
                 << "\n";
    return 1;
  }
  braid::ImportOptions options;
  options.tp = tp;
  options.batch = batch;
  options.seq = seq;
  options.maxSeq = maxSeq;
  options.dtype = dtype;
  options.keepLogitsSharded = keepLogitsSharded;
  options.prefillAllLogits = prefillAllLogits;

  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = braid::importModel(ctx, *config, options);
  if (!module) {
    llvm::errs() << "braid-import: " << llvm::toString(module.takeError())
                 << "\n";
    return 1;
  }

  if (stats) {
    for (auto func : (**module).getOps<mlir::func::FuncOp>())
      mlir::braid::printStepStats(llvm::outs(),
                                  mlir::braid::computeStepStats(func));
    if (outputPath == "-")
      return 0;
  }
  std::string err;
  auto out = mlir::openOutputFile(outputPath, &err);
  if (!out) {
    llvm::errs() << "braid-import: " << err << "\n";
    return 1;
  }
  (**module).print(out->os());
  out->keep();
  return 0;
}
