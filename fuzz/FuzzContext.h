//===- FuzzContext.h - A recycled MLIRContext for the fuzzers ---*- C++ -*-===//
//
// The fuzzers that build IR (config-fuzzer, ir-fuzzer) share how they hold
// their MLIRContext: one thread (libFuzzer runs one input at a time, and
// the passes' parallel pricing would only add thread start-up), every
// diagnostic dropped (an input refused is the expected outcome; results
// are checked through return values), and a fresh context every so many
// inputs, since a context keeps every type and attribute it ever uniqued.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FUZZ_FUZZCONTEXT_H
#define BRAID_FUZZ_FUZZCONTEXT_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace braid::fuzz {

/// The fuzzer's context, replaced after `lifetime` uses; `registerDialects`
/// fills the registry of each new one.
template <typename RegisterDialects>
mlir::MLIRContext &recycledContext(unsigned lifetime,
                                   RegisterDialects registerDialects) {
  static std::unique_ptr<mlir::MLIRContext> ctx;
  static unsigned uses = 0;
  if (!ctx || ++uses >= lifetime) {
    uses = 0;
    mlir::DialectRegistry registry;
    registerDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(
        registry, mlir::MLIRContext::Threading::DISABLED);
    ctx->loadAllAvailableDialects();
    ctx->getDiagEngine().registerHandler([](mlir::Diagnostic &) {});
  }
  return *ctx;
}

} // namespace braid::fuzz

#endif // BRAID_FUZZ_FUZZCONTEXT_H
