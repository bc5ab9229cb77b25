//===- ModelConfig.cpp - Hugging Face config.json reader ------------------===//
#include "frontend/ModelConfig.h"
#include "frontend/JsonNesting.h"
#include "frontend/input/InputFile.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace braid;
using llvm::Expected;
using llvm::StringRef;

namespace {
/// Typed, error-reporting access to the fields of one config object.
class Fields {
public:
  Fields(const llvm::json::Object &obj, StringRef source)
      : obj(obj), source(source) {}

  llvm::Error error(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   source + ": " + msg);
  }

  bool has(StringRef key) const {
    const llvm::json::Value *v = obj.get(key);
    return v && v->kind() != llvm::json::Value::Null;
  }

  /// A positive integer field of at most `max`.
  Expected<int64_t> integer(StringRef key, int64_t max) const {
    if (!has(key))
      return error("missing field '" + key + "'");
    return positiveInt(key, max);
  }
  Expected<int64_t> integerOr(StringRef key, int64_t def, int64_t max) const {
    if (!has(key))
      return checkBound(key, def, max);
    return positiveInt(key, max);
  }
  /// `value` of field `key` (or, with `derived`, a value computed from
  /// other fields, named by `key`) is at most `max`.
  Expected<int64_t> checkBound(StringRef key, int64_t value, int64_t max,
                               bool derived = false) const {
    if (value > max)
      return error((derived ? key + " is " : "field '" + key + "' is ") +
                   llvm::Twine(value) + "; Braid imports at most " +
                   llvm::Twine(max) + " (see docs/frontend.md)");
    return value;
  }
  Expected<double> number(StringRef key) const {
    if (!has(key))
      return error("missing field '" + key + "'");
    return positiveNumber(key);
  }
  Expected<double> numberOr(StringRef key, double def) const {
    if (!has(key))
      return def;
    return positiveNumber(key);
  }
  Expected<bool> booleanOr(StringRef key, bool def) const {
    if (!has(key))
      return def;
    if (auto b = obj.get(key)->getAsBoolean())
      return *b;
    return error("field '" + key + "' must be a boolean");
  }
  Expected<std::string> stringOr(StringRef key, StringRef def) const {
    if (!has(key))
      return def.str();
    if (auto s = obj.get(key)->getAsString())
      return s->str();
    return error("field '" + key + "' must be a string");
  }

private:
  Expected<int64_t> positiveInt(StringRef key, int64_t max) const {
    const llvm::json::Value *v = obj.get(key);
    // llvm::json converts a double of 2^63 to int64 (undefined behaviour):
    // refuse numbers that far out before asking for an integer.
    if (std::optional<double> d = v->getAsNumber();
        d && !(std::abs(*d) < 0x1p62))
      return error("field '" + key + "' is " +
                   llvm::formatv("{0}", *v).str() + "; Braid imports at most " +
                   llvm::Twine(max));
    std::optional<int64_t> i = v->getAsInteger();
    if (!i) {
      // Accept 4096.0 but not 4096.5.
      std::optional<double> d = v->getAsNumber();
      if (d && std::floor(*d) == *d && std::abs(*d) < 9e15)
        i = (int64_t)*d;
    }
    if (!i)
      return error("field '" + key + "' must be an integer");
    if (*i <= 0)
      return error("field '" + key + "' must be positive, got " +
                   llvm::Twine(*i));
    return checkBound(key, *i, max);
  }
  Expected<double> positiveNumber(StringRef key) const {
    std::optional<double> d = obj.get(key)->getAsNumber();
    if (!d)
      return error("field '" + key + "' must be a number");
    if (!(*d > 0.0) || !std::isfinite(*d))
      return error("field '" + key + "' must be positive and finite");
    return *d;
  }

  const llvm::json::Object &obj;
  StringRef source;
};
} // namespace

/// Assigns an Expected to `dst` or returns its error from the enclosing
/// function.
#define BRAID_ASSIGN(dst, expr)                                                \
  do {                                                                         \
    auto _v = (expr);                                                          \
    if (!_v)                                                                   \
      return _v.takeError();                                                   \
    dst = *_v;                                                                 \
  } while (0)

static llvm::Error parseLlama(const Fields &f, ModelConfig &c) {
  c.family = ModelFamily::Llama;
  BRAID_ASSIGN(c.hiddenSize, f.integer("hidden_size", limits::kMaxHiddenSize));
  BRAID_ASSIGN(c.numLayers, f.integer("num_hidden_layers", limits::kMaxLayers));
  BRAID_ASSIGN(c.numHeads, f.integer("num_attention_heads", limits::kMaxHeads));
  BRAID_ASSIGN(c.numKvHeads, f.integerOr("num_key_value_heads", c.numHeads,
                                         limits::kMaxHeads));
  BRAID_ASSIGN(c.intermediateSize,
               f.integer("intermediate_size", limits::kMaxIntermediateSize));
  BRAID_ASSIGN(c.vocabSize, f.integer("vocab_size", limits::kMaxVocabSize));
  BRAID_ASSIGN(c.maxPositions,
               f.integer("max_position_embeddings", limits::kMaxPositions));
  BRAID_ASSIGN(c.normEps, f.number("rms_norm_eps"));
  BRAID_ASSIGN(c.ropeTheta, f.numberOr("rope_theta", 10000.0));
  BRAID_ASSIGN(c.tieWordEmbeddings, f.booleanOr("tie_word_embeddings", false));
  bool attentionBias;
  BRAID_ASSIGN(attentionBias, f.booleanOr("attention_bias", false));
  // Qwen2 always carries q/k/v biases; LLaMA and Mistral only with
  // attention_bias.
  c.qkvBias = c.modelType == "qwen2" || attentionBias;
  bool mlpBias;
  BRAID_ASSIGN(mlpBias, f.booleanOr("mlp_bias", false));
  if (mlpBias)
    return f.error("field 'mlp_bias' = true is not supported");
  std::string act;
  BRAID_ASSIGN(act, f.stringOr("hidden_act", "silu"));
  if (act != "silu")
    return f.error("field 'hidden_act' is '" + act +
                   "'; the LLaMA family needs 'silu'");
  if (f.has("rope_scaling"))
    return f.error("field 'rope_scaling' is set; scaled RoPE is not "
                   "supported yet (remove it only if the model was trained "
                   "without it)");

  if (c.numHeads % c.numKvHeads != 0)
    return f.error("num_attention_heads " + llvm::Twine(c.numHeads) +
                   " is not divisible by num_key_value_heads " +
                   llvm::Twine(c.numKvHeads));
  if (f.has("head_dim")) {
    BRAID_ASSIGN(c.headDim, f.integer("head_dim", limits::kMaxHeadDim));
  } else {
    if (c.hiddenSize % c.numHeads != 0)
      return f.error("hidden_size " + llvm::Twine(c.hiddenSize) +
                     " is not divisible by num_attention_heads " +
                     llvm::Twine(c.numHeads) + " (and no 'head_dim' given)");
    BRAID_ASSIGN(c.headDim,
                 f.checkBound("head_dim = hidden_size / num_attention_heads",
                              c.hiddenSize / c.numHeads, limits::kMaxHeadDim,
                              /*derived=*/true));
  }
  if (c.headDim % 2 != 0)
    return f.error("head_dim " + llvm::Twine(c.headDim) +
                   " must be even for RoPE");
  return llvm::Error::success();
}

static llvm::Error parseGpt2(const Fields &f, ModelConfig &c) {
  c.family = ModelFamily::Gpt2;
  BRAID_ASSIGN(c.hiddenSize, f.integer("n_embd", limits::kMaxHiddenSize));
  BRAID_ASSIGN(c.numLayers, f.integer("n_layer", limits::kMaxLayers));
  BRAID_ASSIGN(c.numHeads, f.integer("n_head", limits::kMaxHeads));
  c.numKvHeads = c.numHeads;
  BRAID_ASSIGN(c.intermediateSize, f.integerOr("n_inner", 4 * c.hiddenSize,
                                               limits::kMaxIntermediateSize));
  BRAID_ASSIGN(c.vocabSize, f.integer("vocab_size", limits::kMaxVocabSize));
  BRAID_ASSIGN(c.maxPositions, f.integer("n_positions", limits::kMaxPositions));
  BRAID_ASSIGN(c.normEps, f.numberOr("layer_norm_epsilon", 1e-5));
  std::string act;
  BRAID_ASSIGN(act, f.stringOr("activation_function", "gelu_new"));
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    c.geluTanh = true;
  else if (act == "gelu")
    c.geluTanh = false;
  else
    return f.error("field 'activation_function' is '" + act +
                   "'; expected gelu_new, gelu_pytorch_tanh or gelu");
  // GPT-2's LM head is always the token embedding.
  c.tieWordEmbeddings = true;
  if (c.hiddenSize % c.numHeads != 0)
    return f.error("n_embd " + llvm::Twine(c.hiddenSize) +
                   " is not divisible by n_head " + llvm::Twine(c.numHeads));
  BRAID_ASSIGN(c.headDim, f.checkBound("head_dim = n_embd / n_head",
                                       c.hiddenSize / c.numHeads,
                                       limits::kMaxHeadDim, /*derived=*/true));
  if (f.has("n_ctx")) {
    int64_t nCtx;
    BRAID_ASSIGN(nCtx, f.integer("n_ctx", limits::kMaxPositions));
    if (nCtx != c.maxPositions)
      return f.error("fields 'n_ctx' (" + llvm::Twine(nCtx) +
                     ") and 'n_positions' (" + llvm::Twine(c.maxPositions) +
                     ") disagree");
  }
  return llvm::Error::success();
}

Expected<ModelConfig> braid::parseModelConfig(StringRef json,
                                              StringRef source) {
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
    return f.error("missing field 'model_type'");
  BRAID_ASSIGN(c.modelType, f.stringOr("model_type", ""));
  llvm::Error err = llvm::Error::success();
  if (c.modelType == "llama" || c.modelType == "mistral" ||
      c.modelType == "qwen2")
    err = parseLlama(f, c);
  else if (c.modelType == "gpt2")
    err = parseGpt2(f, c);
  else
    return f.error("unsupported model_type '" + c.modelType +
                   "' (supported: llama, mistral, qwen2, gpt2)");
  if (err)
    return std::move(err);
  return c;
}

Expected<ModelConfig> braid::loadModelConfig(StringRef path) {
  // Bounded: /dev/zero or an endless pipe is an error, not an OOM abort.
  auto buf = readInputFile(path, kMaxConfigBytes, "config");
  if (!buf)
    return buf.takeError();
  return parseModelConfig((*buf)->getBuffer(),
                          path == "-" ? StringRef("<stdin>") : path);
}
