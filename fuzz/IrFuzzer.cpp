//===- IrFuzzer.cpp - libFuzzer target for hand-written braid IR ----------===//
//
// Feeds arbitrary bytes to the compiler as braid-opt and braid-translate
// read them: MLIR text in the braid dialect, split at `// -----` lines as
// --split-input-file does (at most kMaxChunks chunks). Each chunk that
// parses and verifies (the dialect's own parsers and verifiers: ops,
// shapes, groups, buffers, streams, handles) then goes through
//   1. braid-verify-schedule, the proof a hand-written schedule must pass;
//   2. braid-translate --braid-to-plan (exportPlan), which loads the plan
//      back with the runtime's loader and its schedule check;
//   3. on an unscheduled chunk, the default pipeline (what braid-opt
//      --braid-default-pipeline runs), then the same export.
//
// Findings, besides crashes, assertions (NDEBUG is off) and sanitizer
// reports:
//   - a pipeline that succeeds on IR that verifies but leaves IR that does
//     not verify (a pass broke it);
//   - a pipeline that succeeds on a module braid-to-plan takes, but whose
//     output braid-to-plan (with the loader's schedule check) refuses: the
//     compiler must not turn a plan into no plan (the pipeline's own last
//     pass, braid-verify-schedule, has proven its schedule).
// Both abort with the message, so libFuzzer keeps the input.
//
// Speed bound: chunks of more than kMaxOps ops are parsed and verified
// only. Seeds: the .mlir files of test/ and compiled modules
// (fuzz/run-fuzz.sh ir). Dictionary: fuzz/dict/ir.dict.
//
//===----------------------------------------------------------------------===//
#include "frontend/input/MlirNesting.h"
#include "fuzz/FuzzContext.h"
#include "passes/InitAll.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "translate/PlanExport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

constexpr size_t kMaxChunks = 4;
constexpr int64_t kMaxOps = 400;
// Inputs per MLIRContext (FuzzContext.h).
constexpr unsigned kContextLifetime = 500;

[[noreturn]] void finding(const std::string &what, llvm::StringRef chunk) {
  std::fprintf(stderr, "ir-fuzzer: %s\n--- the chunk ---\n%.*s\n", what.c_str(),
               int(chunk.size()), chunk.data());
  std::fflush(stderr);
  std::abort();
}

mlir::MLIRContext &context() {
  return braid::fuzz::recycledContext(kContextLifetime,
                                      braid::registerAllDialects);
}

int64_t countOps(mlir::ModuleOp module) {
  int64_t n = 0;
  module->walk([&](mlir::Operation *) { ++n; });
  return n;
}

bool scheduled(mlir::ModuleOp module) {
  bool any = false;
  module->walk([&](mlir::Operation *op) {
    if (op->hasAttr("braid.stream") || op->hasAttr("braid.buffers"))
      any = true;
  });
  return any;
}

void fuzzChunk(llvm::StringRef chunk) {
  mlir::MLIRContext &ctx = context(); // errors, the usual outcome, dropped
  // What the tools refuse before parsing (MLIR's parser recurses per
  // level of nesting: 40,000 '[' overflow the stack).
  if (braid::scanMlirNesting(chunk).maxDepth > braid::kMaxMlirNesting)
    return;
  // NUL-terminated, as the tools' MemoryBuffers are: MLIR's lexer reads
  // the terminator to find the end (a bare slice is read past).
  std::string text = chunk.str();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  if (!module || mlir::failed(mlir::verify(*module)) ||
      countOps(*module) > kMaxOps)
    return;

  // 1. The proof a hand-written schedule must pass, then 2. the export.
  {
    mlir::OwningOpRef<mlir::ModuleOp> copy(module->clone());
    mlir::PassManager pm(&ctx);
    pm.addPass(mlir::braid::createBraidVerifySchedulePass());
    (void)pm.run(*copy);
  }
  bool exported = mlir::succeeded(braid::exportPlan(*module));

  // 3. The compiler on what a user could hand it unscheduled.
  if (scheduled(*module))
    return;
  mlir::PassManager pm(&ctx);
  pm.enableVerifier(false); // checked below, once, with a finding
  braid::buildDefaultPipeline(pm);
  if (mlir::failed(pm.run(*module)))
    return;
  if (mlir::failed(mlir::verify(*module)))
    finding("the default pipeline succeeded on IR that verifies, and left "
            "IR that does not verify",
            chunk);
  // (The pipeline ends in braid-verify-schedule: its schedule is proven.)
  if (exported && mlir::failed(braid::exportPlan(*module)))
    finding("braid-to-plan takes the module as imported but refuses the "
            "default pipeline's output",
            chunk);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::SmallVector<llvm::StringRef> chunks;
  // --split-input-file's marker, on a line of its own.
  while (!text.empty() && chunks.size() < kMaxChunks) {
    size_t at = text.find("\n// -----");
    chunks.push_back(text.substr(0, at));
    if (at == llvm::StringRef::npos)
      break;
    text = text.drop_front(at + 1);
    text = text.drop_until([](char c) { return c == '\n'; });
  }
  for (llvm::StringRef chunk : chunks)
    fuzzChunk(chunk);
  return 0;
}
