//===- PlanExport.h - braid IR -> FlatBuffers plan --------------*- C++ -*-===//
//
// Serializes a braid module (unscheduled, or carrying braid-plan-memory's
// placement) as the runtime's plan (runtime/plan.fbs), following the
// filling rules in runtime/README.md. The bytes are loaded back through the
// runtime's own loader before they are returned, so an exporter bug shows up
// here and not on a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_TRANSLATE_PLANEXPORT_H
#define BRAID_TRANSLATE_PLANEXPORT_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <vector>

namespace braid {

struct ExportOptions {
  /// Load the bytes back with the runtime's schedule check (streams, events
  /// and arena reuse proven safe). Off only for tests that must produce a
  /// deliberately unsafe plan to run it.
  bool checkSchedule = true;
};

/// The plan for every entry function of `module`. Errors are emitted as
/// diagnostics on the offending op.
mlir::FailureOr<std::vector<uint8_t>>
exportPlan(mlir::ModuleOp module, const ExportOptions &options = {});

/// Registers `--braid-to-plan` and `--plan-to-text` with mlir-translate's
/// registry.
void registerPlanTranslations();

} // namespace braid

#endif // BRAID_TRANSLATE_PLANEXPORT_H
