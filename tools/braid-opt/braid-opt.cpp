//===- braid-opt.cpp - the braid pass driver ------------------------------===//
//
// mlir-opt's driver, except that the input is read by readMlirInputFile
// (bounded size, no devices, bounded nesting) before MLIR parses it, and
// that MLIR's own flags fail cleanly (MlirFlags.h).
//
//===----------------------------------------------------------------------===//
#include "frontend/input/InputFile.h"
#include "passes/InitAll.h"
#include "tools/braid-opt/MlirFlags.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  braid::exitCleanlyOnFatalErrors("braid-opt");
  // --help lists MLIR's and braid's options (registered below), not the
  // hundreds of backend flags libLLVM registers statically (still parsed).
  llvm::cl::HideUnrelatedOptions(
      llvm::ArrayRef<const llvm::cl::OptionCategory *>{});
  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  braid::registerAllPasses();
  auto [inputPath, outputPath] = mlir::registerAndParseCLIOptions(
      argc, argv, "braid pass driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (auto err = braid::checkMlirOptFlags(config)) {
    llvm::errs() << "braid-opt: " << llvm::toString(std::move(err)) << "\n";
    return 1;
  }

  auto input = braid::readMlirInputFile(inputPath);
  if (!input) {
    llvm::errs() << "braid-opt: " << llvm::toString(input.takeError()) << "\n";
    return 1;
  }
  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "braid-opt: " << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(*input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
