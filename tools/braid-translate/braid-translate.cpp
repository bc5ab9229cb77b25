//===- braid-translate.cpp - braid IR <-> plan translations ---------------===//
//
// mlir-translate's driver for the translations of translate/Registration.cpp
// (the same flags, one translation per run), except that the input is read
// by readInputFile (bounded size, no devices) instead of being read whole
// whatever it is: mlirTranslateMain offers no way to hand it a buffer.
//
//===----------------------------------------------------------------------===//
#include "frontend/input/InputFile.h"
#include "translate/PlanExport.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;
using Level = mlir::SourceMgrDiagnosticVerifierHandler::Level;

static cl::OptionCategory translateCategory("braid-translate options");

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<input file>"),
                                      cl::init("-"), cl::cat(translateCategory));
static cl::opt<std::string> outputPath("o",
                                       cl::desc("Output filename (default: "
                                                "stdout)"),
                                       cl::value_desc("filename"),
                                       cl::init("-"),
                                       cl::cat(translateCategory));
static cl::opt<bool> allowUnregistered(
    "allow-unregistered-dialect",
    cl::desc("Allow operations of unregistered dialects (testing only)"),
    cl::cat(translateCategory));
static cl::opt<std::string> splitInputFile(
    "split-input-file", cl::ValueOptional,
    cl::desc("Split the input at the given marker (default '// -----') and "
             "translate each chunk on its own"),
    cl::init(""), cl::cat(translateCategory));
static cl::opt<std::string>
    outputSplitMarker("output-split-marker",
                      cl::desc("Marker written between the outputs of "
                               "split chunks"),
                      cl::init(""), cl::cat(translateCategory));
static cl::opt<Level> verifyDiagnostics(
    "verify-diagnostics", cl::ValueOptional,
    cl::desc("Check the diagnostics against the expected-* comments"),
    cl::values(clEnumValN(Level::All, "all", "every diagnostic"),
               clEnumValN(Level::All, "", "every diagnostic"),
               clEnumValN(Level::OnlyExpected, "only-expected",
                          "only the expected diagnostics")),
    cl::cat(translateCategory));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --help lists this tool's options and MLIR's (registered below), not the
  // hundreds of backend flags libLLVM registers statically (still parsed).
  cl::HideUnrelatedOptions(translateCategory);
  braid::registerPlanTranslations();
  cl::opt<const mlir::Translation *, false, mlir::TranslationParser>
      translation("", cl::desc("Translation to perform"), cl::Required);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerTranslationCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::ParseCommandLineOptions(argc, argv, "braid plan translator\n");
  // cl keeps the last of several translations; run none rather than guess.
  if (translation.getNumOccurrences() > 1) {
    llvm::errs() << "braid-translate: give one translation (--braid-to-plan "
                    "or --plan-to-text), not "
                 << translation.getNumOccurrences() << "\n";
    return 1;
  }
  const mlir::Translation &translate = *translation;
  // `--split-input-file` alone means the default marker.
  if (splitInputFile.getNumOccurrences() && splitInputFile.empty())
    splitInputFile = mlir::kDefaultSplitMarker;

  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope rootTiming = timing.getRootScope();

  auto input = braid::readInputFile(inputPath, braid::kMaxIrInputBytes, "input",
                                    translate.getInputAlignment());
  if (!input) {
    llvm::errs() << "braid-translate: " << llvm::toString(input.takeError())
                 << "\n";
    return 1;
  }
  // Split into chunks, an empty input is no chunk at all, and nothing
  // would be translated or reported.
  if ((*input)->getBuffer().trim(llvm::StringRef("\0 \t\r\n", 5)).empty()) {
    llvm::errs() << "braid-translate: input '" << inputPath << "' is empty\n";
    return 1;
  }
  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "braid-translate: " << error << "\n";
    return 1;
  }

  auto translateChunk = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                            llvm::raw_ostream &os) -> mlir::LogicalResult {
    // Translations parse null-terminated buffers; split chunks are not.
    if (!chunk->getBuffer().ends_with('\0'))
      chunk = llvm::MemoryBuffer::getMemBufferCopy(
          chunk->getBuffer(), chunk->getBufferIdentifier());
    mlir::TimingScope chunkTiming = rootTiming.nest(translate.getDescription());
    mlir::MLIRContext context;
    context.allowUnregisteredDialects(allowUnregistered);
    bool verifying = verifyDiagnostics.getNumOccurrences() > 0;
    context.printOpOnDiagnostic(!verifying);
    auto sources = std::make_shared<llvm::SourceMgr>();
    sources->AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
    if (!verifying) {
      mlir::SourceMgrDiagnosticHandler handler(*sources, &context);
      return translate(sources, os, &context);
    }
    // Whether the translation fails does not matter here, only whether the
    // diagnostics are the expected ones.
    mlir::SourceMgrDiagnosticVerifierHandler handler(*sources, &context,
                                                     verifyDiagnostics);
    (void)translate(sources, os, &context);
    return handler.verify();
  };
  if (mlir::failed(mlir::splitAndProcessBuffer(
          std::move(*input), translateChunk, output->os(), splitInputFile,
          outputSplitMarker)))
    return 1;
  output->keep();
  return 0;
}
