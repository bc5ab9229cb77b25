//===- Registration.cpp - braid-translate's translations ------------------===//
#include "passes/InitAll.h"
#include "runtime/PlanLoader.h"
#include "runtime/PlanText.h"
#include "translate/PlanExport.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <sstream>

using namespace mlir;

void braid::registerPlanTranslations() {
  static TranslateFromMLIRRegistration toPlan(
      "braid-to-plan", "braid IR -> FlatBuffers plan (.bplan)",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a builtin.module"), failure();
        FailureOr<std::vector<uint8_t>> bytes = exportPlan(module);
        if (failed(bytes))
          return failure();
        os.write(reinterpret_cast<const char *>(bytes->data()),
                 bytes->size());
        return success();
      },
      [](DialectRegistry &registry) { registerAllDialects(registry); });

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
