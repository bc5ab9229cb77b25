//===- Registration.cpp - braid-translate's translations ------------------===//
#include "frontend/input/MlirNesting.h"
#include "passes/InitAll.h"
#include "runtime/PlanLoader.h"
#include "runtime/PlanText.h"
#include "translate/PlanExport.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <sstream>

using namespace mlir;

/// MLIR text nested past kMaxMlirNesting is an error at the place it goes
/// too deep; bytecode is left to its reader.
static LogicalResult checkNesting(const llvm::MemoryBuffer &buffer,
                                  MLIRContext *ctx) {
  StringRef text = buffer.getBuffer();
  if (braid::isMlirBytecode(text))
    return success();
  braid::MlirNestingScan scan = braid::scanMlirNesting(text);
  if (scan.maxDepth <= braid::kMaxMlirNesting)
    return success();
  size_t line = 0, column = 0;
  braid::lineAndColumn(text, scan.offset, line, column);
  return emitError(FileLineColLoc::get(ctx, buffer.getBufferIdentifier(),
                                       unsigned(line), unsigned(column)))
         << braid::mlirNestingMessage(braid::kMaxMlirNesting);
}

void braid::registerPlanTranslations() {
  // Not a TranslateFromMLIRRegistration: the text's nesting is bounded
  // before MLIR's recursive parser sees it (frontend/input/MlirNesting.h).
  static TranslateRegistration toPlan(
      "braid-to-plan", "braid IR -> FlatBuffers plan (.bplan)",
      [](const std::shared_ptr<llvm::SourceMgr> &sources, raw_ostream &os,
         MLIRContext *ctx) -> LogicalResult {
        DialectRegistry registry;
        registerAllDialects(registry);
        ctx->appendDialectRegistry(registry);
        if (failed(checkNesting(
                *sources->getMemoryBuffer(sources->getMainFileID()), ctx)))
          return failure();
        OwningOpRef<ModuleOp> module =
            parseSourceFile<ModuleOp>(sources, ParserConfig(ctx));
        if (!module || failed(verify(*module)))
          return failure();
        FailureOr<std::vector<uint8_t>> bytes = exportPlan(*module);
        if (failed(bytes))
          return failure();
        os.write(reinterpret_cast<const char *>(bytes->data()),
                 bytes->size());
        return success();
      });

  static TranslateRegistration toText(
      "plan-to-text", "FlatBuffers plan -> readable text",
      [](const std::shared_ptr<llvm::SourceMgr> &sources, raw_ostream &os,
         MLIRContext *ctx) -> LogicalResult {
        const llvm::MemoryBuffer *buffer =
            sources->getMemoryBuffer(sources->getMainFileID());
        std::vector<uint8_t> bytes(buffer->getBufferStart(),
                                   buffer->getBufferEnd());
        auto plan = rt::loadPlan(std::move(bytes));
        if (!plan)
          return emitError(UnknownLoc::get(ctx))
                     << buffer->getBufferIdentifier()
                     << ": " << plan.status().message(),
                 failure();
        std::ostringstream text;
        rt::printPlan(text, plan->root());
        os << text.str();
        return success();
      });
}
