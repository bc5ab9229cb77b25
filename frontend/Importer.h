//===- Importer.h - HF transformer config -> tensor-parallel braid IR -*- C++ -*-===//
#ifndef BRAID_FRONTEND_IMPORTER_H
#define BRAID_FRONTEND_IMPORTER_H

#include "frontend/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace braid {

enum class ElementType { BF16, F16, F32 };

struct ImportOptions {
  int64_t tp = 1;           // tensor-parallel degree (ranks in @tp)
  int64_t batch = 1;        // sequences per step
  int64_t seq = 128;        // prefill tokens per sequence
  int64_t maxSeq = 0;       // KV-cache capacity; 0 = max positions of the model
  ElementType dtype = ElementType::BF16;
  bool keepLogitsSharded = false; // skip the all_gather of vocabulary shards
  bool prefillAllLogits = false;  // logits for every prefill token, not the last
};

/// Builds a module with a `prefill` and a `decode` function describing what
/// one rank of the TP group runs (Megatron layout), sharing the KV cache as
/// explicit state. Errors name the numbers that do not divide.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext &ctx, const ModelConfig &config,
            const ImportOptions &options);

/// The tiny LLaMA-style config bundled in models/tiny-llama (the default
/// model of braid-import and scripts/demo), embedded in the binary.
llvm::StringRef tinyLlamaConfigJson();

} // namespace braid

#endif // BRAID_FRONTEND_IMPORTER_H
