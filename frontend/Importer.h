//===- Importer.h - HF transformer config -> tensor-parallel braid IR -*- C++ -*-===//
#ifndef BRAID_FRONTEND_IMPORTER_H
#define BRAID_FRONTEND_IMPORTER_H

#include "frontend/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <vector>

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
  /// Prefill shape buckets: one `prefill_<S>` function per token count S
  /// (instead of one `prefill` of `seq` tokens), sharing the parameters and
  /// the KV cache. A prompt runs in the smallest bucket that holds it,
  /// padded at the end; without prefillAllLogits each bucket takes a
  /// `logit_rows` input [B, 1] (i32): the row b * S + (length_b - 1) of the
  /// flattened tokens whose logits sequence b returns.
  std::vector<int64_t> prefillBuckets;
  /// Decode batch buckets: besides `decode` (all --batch sequences), one
  /// `decode_<b>` per listed b < batch, running the first b sequences of the
  /// same KV cache (vLLM's capture sizes): fewer sequences than the plan's
  /// batch decode with smaller GEMMs and attention.
  std::vector<int64_t> decodeBatches;
};

/// Builds a module with a `prefill` (or one `prefill_<S>` per bucket) and a
/// `decode` function describing what
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
