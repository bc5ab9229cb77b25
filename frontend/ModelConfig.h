//===- ModelConfig.h - Hugging Face config.json, validated ----*- C++ -*-===//
#ifndef BRAID_FRONTEND_MODELCONFIG_H
#define BRAID_FRONTEND_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace braid {

enum class ModelFamily { Llama, Gpt2 };

/// Upper bounds on every config size that multiplies into memory, each far
/// above any released model (docs/frontend.md lists them with examples).
/// They keep an import fast (one loop per layer) and every size and count
/// derived from the config far from int64 overflow; a config past one is
/// refused with an error naming the field and the bound.
namespace limits {
constexpr int64_t kMaxLayers = 1024;              // Llama-3.1-405B: 126
constexpr int64_t kMaxHiddenSize = 1 << 17;       // 131072; 405B: 16384
constexpr int64_t kMaxIntermediateSize = 1 << 19; // 524288; 405B: 53248
constexpr int64_t kMaxHeads = 1 << 12;            // 4096 (query or KV)
constexpr int64_t kMaxHeadDim = 1 << 14;          // 16384; usual: 64-256
constexpr int64_t kMaxVocabSize = 1 << 22;        // 4194304; Gemma: 262144
constexpr int64_t kMaxPositions = 1 << 24;        // 16777216 tokens
constexpr int64_t kMaxBatch = 1 << 20;            // --batch: sequences per step
// --tp is at most a device group (2^20); --seq and --max-seq at most the
// model's max positions.
} // namespace limits

/// The architecture facts Braid needs, read from a Hugging Face
/// `config.json` and checked for consistency. Field comments give the HF key.
struct ModelConfig {
  ModelFamily family = ModelFamily::Llama;
  std::string modelType;       // model_type
  int64_t hiddenSize = 0;      // hidden_size | n_embd
  int64_t numLayers = 0;       // num_hidden_layers | n_layer
  int64_t numHeads = 0;        // num_attention_heads | n_head
  int64_t numKvHeads = 0;      // num_key_value_heads (default num_heads)
  int64_t headDim = 0;         // head_dim (default hidden / heads)
  int64_t intermediateSize = 0; // intermediate_size | n_inner (4 * n_embd)
  int64_t vocabSize = 0;       // vocab_size
  int64_t maxPositions = 0;    // max_position_embeddings | n_positions
  double normEps = 0;          // rms_norm_eps | layer_norm_epsilon
  double ropeTheta = 10000.0;  // rope_theta (LLaMA family)
  bool tieWordEmbeddings = false; // tie_word_embeddings (GPT-2: always)
  bool qkvBias = false;        // qwen2, or attention_bias
  bool geluTanh = true;        // activation_function gelu_new (GPT-2)
};

/// Parses and validates `config.json` text. Errors name the offending field
/// (and `source`, e.g. the file name).
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef json,
                                             llvm::StringRef source);
/// Reads and parses a config file ("-": stdin) of at most kMaxConfigBytes
/// (frontend/input/InputFile.h); a directory or a device is an error.
llvm::Expected<ModelConfig> loadModelConfig(llvm::StringRef path);

} // namespace braid

#endif // BRAID_FRONTEND_MODELCONFIG_H
