//===- braid-import.cpp - HF config.json -> tensor-parallel braid IR ------===//
#include "frontend/ImportCommandLine.h"
#include "passes/InitAll.h"
#include "passes/StepStats.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

static cl::OptionCategory importToolCategory("Output options");

static cl::opt<std::string> outputPath("o",
                                       cl::desc("Output file (default: "
                                                "stdout)"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(importToolCategory));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // LLVM itself owns a `-stats` option, so --stats is taken off argv before
  // cl parses the rest.
  bool stats = false;
  std::vector<char *> args;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef a(argv[i]);
    llvm::StringRef name = a.split('=').first;
    if (i == 0 || (name != "--stats" && name != "-stats")) {
      args.push_back(argv[i]);
      continue;
    }
    // `--stats=1` used to fall through to LLVM's own -stats (ignored).
    llvm::StringRef value = a.split('=').second;
    if (a.contains('=') && value != "true" && value != "1") {
      llvm::errs() << "braid-import: --stats takes no value (got '" << value
                   << "')\n";
      return 1;
    }
    stats = true;
  }
  braid::showOnlyBraidOptionsInHelp({&importToolCategory},
                                    /*showMlirOptions=*/false);
  cl::ParseCommandLineOptions(
      (int)args.size(), args.data(),
      "braid-import: Hugging Face config.json -> braid IR\n\n"
      "  --stats  print per-rank parameter, activation and KV-cache bytes,\n"
      "           FLOPs and collective bytes per step instead of the IR\n"
      "           (with -o the IR is still written)\n");

  llvm::Expected<braid::ModelConfig> config =
      braid::modelConfigFromCommandLine();
  if (!config) {
    llvm::errs() << "braid-import: " << llvm::toString(config.takeError())
                 << "\n";
    return 1;
  }
  llvm::Expected<braid::ImportOptions> options =
      braid::importOptionsFromCommandLine();
  if (!options) {
    llvm::errs() << "braid-import: " << llvm::toString(options.takeError())
                 << "\n";
    return 1;
  }

  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = braid::importModel(ctx, *config, *options);
  if (!module) {
    llvm::errs() << "braid-import: " << llvm::toString(module.takeError())
                 << "\n";
    return 1;
  }

  if (stats) {
    if (llvm::Error e =
            mlir::braid::printModuleStepStats(llvm::outs(), **module)) {
      llvm::errs() << "braid-import: --stats: " << llvm::toString(std::move(e))
                   << "\n";
      return 1;
    }
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
