//===- ModelConfig.cpp - Hugging Face config.json reader ------------------===//
//
// Reads config.json as transformers 4.x and 5.x write it. The rule: every
// field that changes the computation is read (and implemented) or refused by
// name; fields known not to change the logits are listed in
// harmlessFields(); any other field is refused, so a new transformers field
// cannot silently change the answer.
//
//===----------------------------------------------------------------------===//
#include "frontend/ModelConfig.h"
#include "frontend/ConfigFields.h"
#include "frontend/JsonNesting.h"
#include "frontend/RopeConfig.h"
#include "frontend/input/InputFile.h"

#include "dialect/BraidOps.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <optional>

using namespace braid;
using namespace braid::config;
using llvm::Expected;
using llvm::StringRef;

/// Top-level fields that do not change what the model computes at
/// inference: bookkeeping, token ids, training-only settings (dropout,
/// initializer range) and heads Braid does not build (GPT-2's summary head).
/// Fields that are harmless only with some values (is_encoder_decoder,
/// add_cross_attention, pruned_heads) or must at least have their type
/// (tf_legacy_loss, use_bfloat16) are read and checked instead, for every
/// family: checkGenericFields().
static const llvm::StringSet<> &harmlessFields() {
  // clang-format off
  static const llvm::StringSet<> fields = {
      // Bookkeeping.
      "architectures", "transformers_version", "model_type", "dtype",
      "torch_dtype", "tokenizer_class", "return_dict", "use_return_dict",
      "output_hidden_states", "output_attentions", "output_scores",
      "torchscript", "use_cache", "chunk_size_feed_forward", "id2label",
      "label2id", "problem_type", "finetuning_task", "prefix",
      "task_specific_params", "tie_encoder_decoder",
      "cross_attention_hidden_size",
      // Special token ids: the tokenizer's business.
      "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
      "decoder_start_token_id",
      // Generation defaults (4.x configs carry them): the sampler's business.
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
      "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p",
      "typical_p", "repetition_penalty", "length_penalty",
      "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
      "num_return_sequences", "output_scores", "return_dict_in_generate",
      "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
      "exponential_decay_length_penalty", "suppress_tokens",
      "begin_suppress_tokens",
      // Training only.
      "initializer_range", "attention_dropout", "resid_pdrop", "embd_pdrop",
      "attn_pdrop", "hidden_dropout", "classifier_dropout",
      "gradient_checkpointing", "is_decoder",
      // transformers 5 LLaMA no longer reads it (it only sliced matmuls).
      "pretraining_tp",
      // GPT-2's sequence-summary head (GPT2DoubleHeadsModel), not the LM.
      "summary_type", "summary_use_proj", "summary_activation",
      "summary_proj_to_labels", "summary_first_dropout",
      // GPT-2: upcasts eager attention to fp32; Braid's attention computes
      // its scores in fp32 always.
      "reorder_and_upcast_attn",
      // Fields of other tools that transformers' models of these types never
      // read: OpenAI GPT's special-token count in GPT-2 configs (gpt2-medium);
      // BERT-style dropout names in GPT-NeoX ones (gpt-neox-20b); the
      // pre-release LLaMA conversion's max_sequence_length; transformers.js's
      // ONNX hints (SmolLM2); Unsloth's mirror markers; the pipeline a
      // model's card uses (Dolly v2).
      "n_special", "predict_special_tokens", "attention_probs_dropout_prob",
      "hidden_dropout_prob", "max_sequence_length", "transformers.js_config",
      "unsloth_fixed", "unsloth_version", "custom_pipelines",
  };
  // clang-format on
  return fields;
}

/// A boolean field that must be false (or absent) for Braid to be right.
static llvm::Error requireFalse(const Fields &f, StringRef key,
                                StringRef why) {
  bool v;
  BRAID_ASSIGN(v, f.booleanOr(key, false));
  if (v)
    return f.error("field '" + key + "' is true; " + why);
  return llvm::Error::success();
}

// transformers' class defaults for fields a config may leave out, where
// they differ from what the other fields imply.
constexpr int64_t kTransformersSlidingWindow = 4096; // mistral, qwen2/3
constexpr int64_t kTransformersMaxWindowLayers = 28; // qwen2, qwen3
constexpr int64_t kTransformersQwen3HeadDim = 128;

/// transformers' class defaults of the sizes, per model_type: what
/// `AutoConfig.for_model(model_type)` holds (4.57 and 5.24 agree), and so
/// what a config that leaves a field out means. (GPT-2 names them n_embd,
/// n_layer, n_head, n_positions; its n_inner follows n_embd.)
struct ClassSizes {
  int64_t hidden, layers, heads, intermediate, vocab, positions;
  double normEps;
};
static ClassSizes classSizes(StringRef modelType) {
  if (modelType == "mistral" || modelType == "ministral")
    return {4096, 32, 32, 14336, 32000, 4096 * 32, 1e-6};
  if (modelType == "qwen2" || modelType == "qwen3")
    return {4096, 32, 32, 22016, 151936, 32768, 1e-6};
  if (modelType == "gpt_neox")
    return {6144, 44, 64, 24576, 50432, 2048, 1e-5};
  if (modelType == "gpt2")
    return {768, 12, 12, 4 * 768, 50257, 1024, 1e-5};
  return {4096, 32, 32, 11008, 32000, 2048, 1e-6}; // llama
}

/// Field `key` (a positive integer of at most `max`), or the class default
/// `absent` when the config leaves it out; null is an error (transformers
/// would pass None on).
static Expected<int64_t> sizeOr(const Fields &f, StringRef key, int64_t absent,
                                int64_t max) {
  if (f.present(key))
    return f.integer(key, max);
  return f.checkBound(key, absent, max);
}
static Expected<double> epsOr(const Fields &f, StringRef key, double absent) {
  if (f.present(key))
    return f.number(key);
  return absent;
}

/// Layer i's window from layer_types[i] (one per layer): `window` for
/// sliding_attention, which needs one in effect; none for full_attention.
static llvm::Error applyLayerTypes(const Fields &f, ModelConfig &c,
                                   const std::vector<std::string> &types,
                                   int64_t window) {
  if (int64_t(types.size()) != c.numLayers)
    return f.error("field 'layer_types' has " + llvm::Twine(types.size()) +
                   " entries; num_hidden_layers is " +
                   llvm::Twine(c.numLayers));
  for (int64_t i = 0; i < c.numLayers; ++i) {
    const std::string &t = types[size_t(i)];
    if (t == "full_attention")
      continue;
    if (t != "sliding_attention")
      return f.error("field 'layer_types' entry " + llvm::Twine(i) + " is '" +
                     t + "'; expected full_attention or sliding_attention");
    if (!window)
      return f.error("field 'layer_types' makes layer " + llvm::Twine(i) +
                     " sliding_attention, but no sliding window is in effect "
                     "(use_sliding_window false or sliding_window null)");
    c.layerWindow[size_t(i)] = window;
  }
  return llvm::Error::success();
}

/// The sliding window of each layer (0: full attention) of a mistral,
/// ministral, qwen2 or qwen3 config, as their transformers models decide it.
static llvm::Error readSlidingWindows(const Fields &f, ModelConfig &c) {
  c.layerWindow.assign(size_t(c.numLayers), 0);
  if (c.modelType == "llama")
    return llvm::Error::success(); // LlamaConfig has no sliding window
  // Absent, transformers' class default (4096 for mistral, ministral, qwen2,
  // qwen3); null: no window.
  int64_t window = 0;
  if (f.has("sliding_window"))
    BRAID_ASSIGN(window, f.integer("sliding_window", limits::kMaxPositions));
  else if (!f.present("sliding_window"))
    window = kTransformersSlidingWindow;
  if (c.modelType == "mistral") {
    // Mistral: one window for every layer when set (null: none).
    std::fill(c.layerWindow.begin(), c.layerWindow.end(), window);
    return llvm::Error::success();
  }
  std::vector<std::string> types;
  BRAID_ASSIGN(types, f.stringsOr("layer_types"));
  if (c.modelType == "ministral") {
    // Ministral: per layer from layer_types; without it, every layer slides
    // when a window is set.
    if (types.empty()) {
      std::fill(c.layerWindow.begin(), c.layerWindow.end(), window);
      return llvm::Error::success();
    }
    return applyLayerTypes(f, c, types, window);
  }
  // Qwen2/Qwen3: the window counts only with use_sliding_window; the layers
  // from max_window_layers on use it, unless layer_types says per layer.
  bool use;
  BRAID_ASSIGN(use, f.booleanOr("use_sliding_window", false));
  if (!use)
    window = 0;
  // Absent: transformers' default, 28; 0: every layer slides.
  int64_t maxWindowLayers;
  BRAID_ASSIGN(maxWindowLayers,
               f.countOr("max_window_layers", kTransformersMaxWindowLayers,
                         limits::kMaxLayers));
  if (types.empty()) {
    for (int64_t i = 0; i < c.numLayers; ++i)
      if (window && i >= maxWindowLayers)
        c.layerWindow[size_t(i)] = window;
    return llvm::Error::success();
  }
  return applyLayerTypes(f, c, types, window);
}

/// The sizes LLaMA-style and GPT-NeoX configs name alike; GPT-NeoX has no
/// num_key_value_heads (`groupedKv` false: one KV head per head).
static llvm::Error readSizes(const Fields &f, ModelConfig &c, bool groupedKv) {
  const ClassSizes d = classSizes(c.modelType);
  BRAID_ASSIGN(c.hiddenSize,
               sizeOr(f, "hidden_size", d.hidden, limits::kMaxHiddenSize));
  BRAID_ASSIGN(c.numLayers,
               sizeOr(f, "num_hidden_layers", d.layers, limits::kMaxLayers));
  BRAID_ASSIGN(c.numHeads,
               sizeOr(f, "num_attention_heads", d.heads, limits::kMaxHeads));
  c.numKvHeads = c.numHeads;
  if (groupedKv) {
    // Absent, transformers' class default: 32 for qwen2 and qwen3, 8 for
    // mistral and ministral, the head count for llama; null: the head count.
    int64_t absent = c.numHeads;
    if (c.modelType == "qwen2" || c.modelType == "qwen3")
      absent = 32;
    else if (c.modelType == "mistral" || c.modelType == "ministral")
      absent = 8;
    BRAID_ASSIGN(
        c.numKvHeads,
        f.integerOr("num_key_value_heads",
                    f.present("num_key_value_heads") ? c.numHeads : absent,
                    limits::kMaxHeads));
  }
  BRAID_ASSIGN(c.intermediateSize,
               sizeOr(f, "intermediate_size", d.intermediate,
                      limits::kMaxIntermediateSize));
  BRAID_ASSIGN(c.vocabSize,
               sizeOr(f, "vocab_size", d.vocab, limits::kMaxVocabSize));
  // Early LLaMA conversions, such as decapoda's llama-7b-hf, leave it out.
  BRAID_ASSIGN(c.maxPositions, sizeOr(f, "max_position_embeddings", d.positions,
                                      limits::kMaxPositions));
  return llvm::Error::success();
}

/// head_dim = hidden_size // num_attention_heads, as the LLaMA family's
/// configs take it when head_dim is absent or null (MistralConfig, Qwen2Config
/// and transformers 4's LlamaConfig floor it; the projections are then
/// heads x head_dim wide, not hidden_size; transformers 5's LlamaConfig
/// refuses a hidden_size the heads do not divide).
static llvm::Error headDimFromHidden(const Fields &f, ModelConfig &c) {
  if (c.hiddenSize < c.numHeads)
    return f.error("hidden_size " + llvm::Twine(c.hiddenSize) +
                   " is smaller than num_attention_heads " +
                   llvm::Twine(c.numHeads) +
                   ", so head_dim = hidden_size // num_attention_heads is 0 "
                   "(and no 'head_dim' given)");
  BRAID_ASSIGN(c.headDim,
               f.checkBound("head_dim = hidden_size // num_attention_heads",
                            c.hiddenSize / c.numHeads, limits::kMaxHeadDim,
                            /*derived=*/true));
  return llvm::Error::success();
}

/// transformers' activations (ACT2FN) that Braid has, by name: SiLU and
/// the GELUs, the identity, and every braid.activation kind (named as
/// ACT2FN names them); not prelu or xielu, which carry learned parameters.
/// gelu_new, gelu_pytorch_tanh, gelu_python_tanh, gelu_fast and
/// gelu_accurate are all 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
/// written with different roundings; gelu and gelu_python the erf GELU.
static std::optional<Activation> activationNamed(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Activation>>(name)
      .Cases({"silu", "swish"}, Activation::Silu)
      .Cases({"gelu", "gelu_python"}, Activation::Gelu)
      .Cases({"gelu_new", "gelu_pytorch_tanh", "gelu_python_tanh", "gelu_fast",
              "gelu_accurate"},
             Activation::GeluTanh)
      .Case("linear", Activation::Identity)
      .Default(mlir::braid::symbolizeActivationKind(name)
                   ? std::optional(Activation::Other)
                   : std::nullopt);
}

/// Reads the activation field `key` (absent: `fallback`) into c.activation
/// (and c.activationKind).
static llvm::Error readActivation(const Fields &f, llvm::StringRef key,
                                  llvm::StringRef fallback, ModelConfig &c) {
  std::string name;
  BRAID_ASSIGN(name, f.stringOr(key, fallback.str()));
  if (std::optional<Activation> act = activationNamed(name)) {
    c.activation = *act;
    if (*act == Activation::Other)
      c.activationKind = name;
    return llvm::Error::success();
  }
  std::string kinds;
  for (unsigned k = 0; k <= mlir::braid::getMaxEnumValForActivationKind(); ++k)
    kinds += ", " + mlir::braid::stringifyActivationKind(
                        mlir::braid::ActivationKind(k))
                        .str();
  return f.error("field '" + key + "' is '" + name +
                 "'; Braid has transformers' silu, swish, gelu, gelu_python, "
                 "gelu_new, gelu_pytorch_tanh, gelu_python_tanh, gelu_fast, "
                 "gelu_accurate" +
                 kinds + " and linear");
}

static llvm::Error parseLlama(const Fields &f, ModelConfig &c) {
  c.family = ModelFamily::Llama;
  if (llvm::Error e = readSizes(f, c, /*groupedKv=*/true))
    return e;
  BRAID_ASSIGN(c.normEps,
               epsOr(f, "rms_norm_eps", classSizes(c.modelType).normEps));
  BRAID_ASSIGN(c.tieWordEmbeddings, f.booleanOr("tie_word_embeddings", false));
  // Biases: Qwen2 always has q/k/v biases (never o_proj's); LLaMA and Qwen3
  // have all four with attention_bias; Mistral has none (no such field).
  if (c.modelType == "qwen2") {
    c.qkvBias = true;
  } else if (c.modelType == "llama" || c.modelType == "qwen3") {
    bool attentionBias;
    BRAID_ASSIGN(attentionBias, f.booleanOr("attention_bias", false));
    c.qkvBias = c.outputBias = attentionBias;
  }
  c.qkNorm = c.modelType == "qwen3";
  // LlamaMLP's three Linear layers take mlp_bias (Mistral's and Qwen's
  // have no bias and no such field).
  if (c.modelType == "llama")
    BRAID_ASSIGN(c.mlpBias, f.booleanOr("mlp_bias", false));
  if (llvm::Error e = readActivation(f, "hidden_act", "silu", c))
    return e;
  // Fields other projects' configs carry that transformers' models of these
  // types never read. use_mrope is Qwen2-VL's multimodal RoPE switch, kept
  // (false) in text-only Qwen2 configs such as DeepSeek-R1-Distill-Qwen's.
  // is_llama_config and rope_interleaved are nanotron's (SmolLM2):
  // transformers rotates the two halves of each head whatever
  // rope_interleaved says, so a true one means weights laid out for another
  // RoPE.
  // The booleans are type-checked, then ignored.
  if (c.modelType == "qwen2" || c.modelType == "qwen3") {
    if (llvm::Error e = f.booleanOr("use_mrope", false).takeError())
      return e;
    // Qwen2.5-1M's dual chunk attention is vLLM's and SGLang's, for inputs
    // far past 32K tokens; transformers (and Braid) attend in full.
    f.markRead("dual_chunk_attention_config");
  }
  if (c.modelType == "llama") {
    if (llvm::Error e = f.booleanOr("is_llama_config", true).takeError())
      return e;
    if (llvm::Error e = requireFalse(
            f, "rope_interleaved",
            "transformers' LLaMA rotates the two halves of each head "
            "(rotate_half), so interleaved-RoPE weights need their q_proj "
            "and k_proj rows permuted first"))
      return e;
  }

  if (c.numHeads % c.numKvHeads != 0)
    return f.error("num_attention_heads " + llvm::Twine(c.numHeads) +
                   " is not divisible by num_key_value_heads " +
                   llvm::Twine(c.numKvHeads) +
                   (f.present("num_key_value_heads")
                        ? ""
                        : " (transformers' default for model_type '" +
                              c.modelType + "' when the field is absent)"));
  if (f.has("head_dim")) {
    BRAID_ASSIGN(c.headDim, f.integer("head_dim", limits::kMaxHeadDim));
  } else if (c.modelType == "qwen3") {
    // Qwen3Config's head_dim defaults to 128, not hidden / heads; a null
    // one transformers cannot build the model with.
    if (f.present("head_dim"))
      return f.error("field 'head_dim' is null; Qwen3 needs a head_dim "
                     "(transformers' default, 128, applies only when the "
                     "field is absent)");
    c.headDim = kTransformersQwen3HeadDim;
  } else if (llvm::Error e = headDimFromHidden(f, c)) {
    return e;
  }
  if (c.headDim % 2 != 0)
    return f.error("head_dim " + llvm::Twine(c.headDim) +
                   " must be even for RoPE");
  BRAID_ASSIGN(c.rope, readRope(f, c.headDim, c.maxPositions));
  return readSlidingWindows(f, c);
}

static llvm::Error parseGpt2(const Fields &f, ModelConfig &c) {
  c.family = ModelFamily::Gpt2;
  const ClassSizes d = classSizes(c.modelType);
  BRAID_ASSIGN(c.hiddenSize,
               sizeOr(f, "n_embd", d.hidden, limits::kMaxHiddenSize));
  BRAID_ASSIGN(c.numLayers, sizeOr(f, "n_layer", d.layers, limits::kMaxLayers));
  BRAID_ASSIGN(c.numHeads, sizeOr(f, "n_head", d.heads, limits::kMaxHeads));
  c.numKvHeads = c.numHeads;
  BRAID_ASSIGN(c.intermediateSize, f.integerOr("n_inner", 4 * c.hiddenSize,
                                               limits::kMaxIntermediateSize));
  BRAID_ASSIGN(c.vocabSize,
               sizeOr(f, "vocab_size", d.vocab, limits::kMaxVocabSize));
  BRAID_ASSIGN(c.maxPositions,
               sizeOr(f, "n_positions", d.positions, limits::kMaxPositions));
  BRAID_ASSIGN(c.normEps, f.numberOr("layer_norm_epsilon", d.normEps));
  if (llvm::Error e = readActivation(f, "activation_function", "gelu_new", c))
    return e;
  // GPT2LMHeadModel ties its LM head to wte by default; untied, it reads
  // lm_head.weight.
  BRAID_ASSIGN(c.tieWordEmbeddings, f.booleanOr("tie_word_embeddings", true));
  if (c.hiddenSize % c.numHeads != 0)
    return f.error("n_embd " + llvm::Twine(c.hiddenSize) +
                   " is not divisible by n_head " + llvm::Twine(c.numHeads));
  BRAID_ASSIGN(c.headDim, f.checkBound("head_dim = n_embd / n_head",
                                       c.hiddenSize / c.numHeads,
                                       limits::kMaxHeadDim, /*derived=*/true));
  // GPT2Attention: scores scaled by 1/sqrt(head_dim) only with
  // scale_attn_weights, and divided by layer + 1 with
  // scale_attn_by_inverse_layer_idx.
  bool scaleWeights, byInverseLayer;
  BRAID_ASSIGN(scaleWeights, f.booleanOr("scale_attn_weights", true));
  BRAID_ASSIGN(byInverseLayer,
               f.booleanOr("scale_attn_by_inverse_layer_idx", false));
  c.layerWindow.assign(size_t(c.numLayers), 0);
  if (!scaleWeights || byInverseLayer)
    for (int64_t i = 0; i < c.numLayers; ++i) {
      double scale = scaleWeights ? 1.0 / std::sqrt(double(c.headDim)) : 1.0;
      c.layerAttentionScale.push_back(byInverseLayer ? scale / double(i + 1)
                                                     : scale);
    }
  // transformers reads n_positions alone; n_ctx, an older name of it, must
  // agree only when both are given (alone it is ignored, as there).
  if (f.has("n_ctx") && f.has("n_positions")) {
    int64_t nCtx;
    BRAID_ASSIGN(nCtx, f.integer("n_ctx", limits::kMaxPositions));
    if (nCtx != c.maxPositions)
      return f.error("fields 'n_ctx' (" + llvm::Twine(nCtx) +
                     ") and 'n_positions' (" + llvm::Twine(c.maxPositions) +
                     ") disagree");
  }
  return llvm::Error::success();
}

static llvm::Error parseNeox(const Fields &f, ModelConfig &c) {
  c.family = ModelFamily::NeoX;
  if (llvm::Error e = readSizes(f, c, /*groupedKv=*/false))
    return e;
  BRAID_ASSIGN(c.normEps,
               f.numberOr("layer_norm_eps", classSizes(c.modelType).normEps));
  BRAID_ASSIGN(c.tieWordEmbeddings, f.booleanOr("tie_word_embeddings", false));
  BRAID_ASSIGN(c.parallelResidual, f.booleanOr("use_parallel_residual", true));
  bool bias;
  BRAID_ASSIGN(bias, f.booleanOr("attention_bias", true));
  // query_key_value and dense share the flag.
  c.qkvBias = c.outputBias = bias;
  if (llvm::Error e = readActivation(f, "hidden_act", "gelu", c))
    return e;
  // GPTNeoXConfig refuses heads that do not divide hidden_size.
  if (c.hiddenSize % c.numHeads != 0)
    return f.error("hidden_size " + llvm::Twine(c.hiddenSize) +
                   " is not divisible by num_attention_heads " +
                   llvm::Twine(c.numHeads));
  if (llvm::Error e = headDimFromHidden(f, c))
    return e;
  // transformers 4 named RoPE's base and fraction rotary_emb_base and
  // rotary_pct; transformers 5 keeps them as defaults (0.25 of each head).
  RopeDefaults defaults;
  defaults.allowPartial = true;
  defaults.topLevelParams = false;
  defaults.thetaKey = "rotary_emb_base";
  defaults.partialKey = "rotary_pct";
  BRAID_ASSIGN(defaults.theta, f.numberOr("rotary_emb_base", 10000.0));
  BRAID_ASSIGN(defaults.partialRotaryFactor, f.numberOr("rotary_pct", 0.25));
  BRAID_ASSIGN(c.rope, readRope(f, c.headDim, c.maxPositions, defaults));
  c.layerWindow.assign(size_t(c.numLayers), 0);
  return llvm::Error::success();
}

/// PretrainedConfig's generic fields that every family's config may carry
/// (transformers 5 writes them when a user passes them, whatever their
/// value), checked alike for every model_type.
static llvm::Error checkGenericFields(const Fields &f) {
  if (llvm::Error e = requireFalse(f, "is_encoder_decoder",
                                   "encoder-decoder models are not supported"))
    return e;
  // GPT-2 builds cross-attention layers (and its checkpoint holds their
  // weights) with it; no family Braid builds has them.
  if (llvm::Error e = requireFalse(f, "add_cross_attention",
                                   "cross-attention layers are not supported"))
    return e;
  // Heads removed from some layers ({"layer": [heads]}): those layers have
  // fewer heads (and smaller weights) than num_attention_heads says. Empty
  // (transformers' default) or null: nothing pruned.
  const llvm::json::Object *pruned;
  BRAID_ASSIGN(pruned, f.objectOr("pruned_heads"));
  if (pruned && !pruned->empty())
    return f.error("field 'pruned_heads' is not empty; models with pruned "
                   "attention heads are not supported (every layer must "
                   "have num_attention_heads heads)");
  // TensorFlow-only settings (the TF loss, TF's bf16 flag): PyTorch and
  // Braid never read them. Any boolean.
  for (StringRef key : {"tf_legacy_loss", "use_bfloat16"}) {
    bool ignored;
    BRAID_ASSIGN(ignored, f.booleanOr(key, false));
    (void)ignored;
  }
  return llvm::Error::success();
}

Expected<ModelConfig> braid::parseModelConfig(StringRef json, StringRef source,
                                              const ConfigOptions &options) {
  // llvm::json recurses per level: bound the nesting before parsing.
  if (llvm::Error deep = checkJsonNesting(json, source))
    return std::move(deep);
  Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   source + ": invalid JSON: " +
                                       llvm::toString(value.takeError()));
  const llvm::json::Object *obj = value->getAsObject();
  if (!obj)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   source + ": top level must be an object");
  Fields f(*obj, source);
  ModelConfig c;
  if (!f.has("model_type"))
    return f.missing("model_type");
  BRAID_ASSIGN(c.modelType, f.stringOr("model_type", ""));
  llvm::Error err = llvm::Error::success();
  if (c.modelType == "llama" || c.modelType == "mistral" ||
      c.modelType == "ministral" || c.modelType == "qwen2" ||
      c.modelType == "qwen3")
    err = parseLlama(f, c);
  else if (c.modelType == "gpt2")
    err = parseGpt2(f, c);
  else if (c.modelType == "gpt_neox")
    err = parseNeox(f, c);
  else
    return f.error("unsupported model_type '" + c.modelType +
                   "' (supported: llama, mistral, ministral, qwen2, qwen3, "
                   "gpt2, gpt_neox)");
  if (err)
    return std::move(err);
  if (llvm::Error e = checkGenericFields(f))
    return std::move(e);
  if (f.has("quantization_config"))
    return f.error("field 'quantization_config' is set: quantized "
                   "checkpoints are not supported (Braid loads bf16, fp16 or "
                   "fp32 weights)");

  std::vector<std::string> unknown;
  for (const std::string &key : f.unread())
    // A leading underscore marks transformers' private bookkeeping
    // (_name_or_path, _attn_implementation) and hand-written notes
    // ("_comment"): never part of the model's math.
    if (!harmlessFields().contains(key) && !StringRef(key).starts_with("_"))
      unknown.push_back(key);
  if (!unknown.empty() && !options.allowUnknownFields) {
    std::string list;
    for (const std::string &key : unknown)
      list += (list.empty() ? "'" : ", '") + key + "'";
    return f.error("field" + llvm::Twine(unknown.size() > 1 ? "s " : " ") +
                   list + " of model_type '" + c.modelType +
                   "' " + (unknown.size() > 1 ? "are" : "is") +
                   " neither read by Braid nor known to leave the logits "
                   "unchanged; refusing rather than ignoring (pass "
                   "--allow-unknown-config-fields to ignore, at your risk)");
  }
  c.ignoredUnknownFields = std::move(unknown);
  return c;
}

Expected<ModelConfig> braid::loadModelConfig(StringRef path,
                                             const ConfigOptions &options) {
  // A Hugging Face model directory: its config.json.
  std::string file = path.str();
  if (path != "-" && llvm::sys::fs::is_directory(path)) {
    llvm::SmallString<256> p(path);
    llvm::sys::path::append(p, "config.json");
    file = std::string(p);
  }
  // Bounded: /dev/zero or an endless pipe is an error, not an OOM abort.
  auto buf = readInputFile(file, kMaxConfigBytes, "config");
  if (!buf)
    return buf.takeError();
  return parseModelConfig((*buf)->getBuffer(),
                          path == "-" ? StringRef("<stdin>") : StringRef(file),
                          options);
}
