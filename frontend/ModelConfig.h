//===- ModelConfig.h - Hugging Face config.json, validated ----*- C++ -*-===//
#ifndef BRAID_FRONTEND_MODELCONFIG_H
#define BRAID_FRONTEND_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace braid {

/// Llama covers llama, mistral, qwen2 and qwen3 (pre-norm RMSNorm, RoPE,
/// SwiGLU); Gpt2 is GPT-2 (LayerNorm, learned positions, GELU); NeoX is
/// gpt_neox (Pythia, GPT-NeoX-20B: LayerNorm, partial RoPE, fused per-head
/// q/k/v, GELU, optionally parallel attention and MLP residuals).
enum class ModelFamily { Llama, Gpt2, NeoX };

/// The MLP's activation, as transformers' ACT2FN names resolve: SiLU and
/// the two GELUs (braid.silu, braid.gelu), the identity ("linear"), or
/// Other: braid.activation of the kind ModelConfig::activationKind names
/// (the dialect's ActivationKind spells each kind as ACT2FN does). The
/// LLaMA family gates with it (act(gate) * up); GPT-2 and NeoX apply it to
/// the up projection.
enum class Activation { Silu, Gelu, GeluTanh, Identity, Other };

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
/// RoPE as transformers computes it (modeling_rope_utils.py): the inverse
/// frequencies of the D/2 rotated pairs and the factor cos and sin are
/// multiplied by. Scaled variants (linear, llama3, yarn) are resolved here,
/// once, so the IR and the runtimes only see the resulting table.
struct RopeConfig {
  std::string type = "default"; // rope_type: default|linear|dynamic|llama3|yarn
  double theta = 10000.0;       // rope_theta
  /// Empty for the plain theta^(-2i/D) frequencies; else one per pair.
  std::vector<double> invFreq;
  double attentionFactor = 1.0; // yarn's mscale; 1 for the others
  /// Partial rotary: the first rotaryDim elements of a head rotate
  /// (head_dim x partial_rotary_factor); 0: the whole head.
  int64_t rotaryDim = 0;
};

/// The architecture facts Braid needs, read from a Hugging Face
/// `config.json` and checked for consistency. Field comments give the HF key.
/// Every field that changes the computation is either read here or refused
/// by name; unknown fields are refused unless ConfigOptions allows them.
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
  RopeConfig rope;             // rope_parameters | rope_scaling + rope_theta
  bool tieWordEmbeddings = false; // tie_word_embeddings (GPT-2: always)
  bool qkvBias = false;        // qwen2, or attention_bias (llama, qwen3)
  bool outputBias = false;     // o_proj.bias: attention_bias (llama, qwen3)
  bool mlpBias = false;        // gate/up/down_proj biases: mlp_bias (llama)
  bool qkNorm = false;         // qwen3: per-head RMSNorm of q and k
  /// hidden_act (llama family, gpt_neox) | activation_function (gpt2).
  Activation activation = Activation::Silu;
  std::string activationKind; // Other: the braid.activation kind's name
  /// gpt_neox use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)).
  bool parallelResidual = false;
  /// Keys each layer's queries see, counting their own position; 0: all
  /// (sliding_window with mistral's, qwen2/3's use_sliding_window,
  /// max_window_layers or layer_types). One entry per layer.
  std::vector<int64_t> layerWindow;
  /// GPT-2 attention scale per layer: 1/sqrt(head_dim) unless
  /// scale_attn_weights is false, divided by layer + 1 with
  /// scale_attn_by_inverse_layer_idx. Empty: 1/sqrt(head_dim) everywhere.
  std::vector<double> layerAttentionScale;
  /// Top-level fields that were neither read nor known to be harmless,
  /// ignored because ConfigOptions::allowUnknownFields was set (the tools
  /// print them as a warning).
  std::vector<std::string> ignoredUnknownFields;
};

struct ConfigOptions {
  /// Ignore top-level fields Braid does not know instead of refusing the
  /// config (they are listed in ModelConfig::ignoredUnknownFields).
  bool allowUnknownFields = false;
};

/// Parses and validates `config.json` text. Errors name the offending field
/// (and `source`, e.g. the file name).
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef json,
                                             llvm::StringRef source,
                                             const ConfigOptions &options = {});
/// Reads and parses a config file ("-": stdin) of at most kMaxConfigBytes
/// (frontend/input/InputFile.h). A directory is read as a Hugging Face model
/// directory: its `config.json`. A device is an error.
llvm::Expected<ModelConfig> loadModelConfig(llvm::StringRef path,
                                            const ConfigOptions &options = {});

} // namespace braid

#endif // BRAID_FRONTEND_MODELCONFIG_H
