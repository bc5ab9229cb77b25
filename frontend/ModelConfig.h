//===- ModelConfig.h - Hugging Face config.json, validated ----*- C++ -*-===//
#ifndef BRAID_FRONTEND_MODELCONFIG_H
#define BRAID_FRONTEND_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace braid {

enum class ModelFamily { Llama, Gpt2 };

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
/// Reads and parses a config file.
llvm::Expected<ModelConfig> loadModelConfig(llvm::StringRef path);

} // namespace braid

#endif // BRAID_FRONTEND_MODELCONFIG_H
