//===- RopeConfig.cpp - RoPE parameters of a config.json ------------------===//
//
// The formulas follow transformers' modeling_rope_utils.py (5.x) step by
// step, in fp32 where it computes on fp32 tensors and in double where it
// computes on Python floats, so the table matches its `inv_freq` buffer.
//
//===----------------------------------------------------------------------===//
#include "frontend/RopeConfig.h"

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

using namespace braid;
using namespace braid::config;

namespace {

constexpr double kPi = 3.14159265358979323846;

/// transformers' default frequencies, `1.0 / (base ** (arange(0, dim, 2) /
/// dim))` on fp32 tensors: ceil(dim / 2) of them (an odd dim too).
std::vector<float> defaultInvFreq(double base, int64_t dim) {
  std::vector<float> inv(size_t((dim + 1) / 2));
  for (int64_t i = 0; i < (dim + 1) / 2; ++i) {
    float e = float(2 * i) / float(dim);
    inv[size_t(i)] = 1.0f / std::pow(float(base), e);
  }
  return inv;
}

std::vector<double> widen(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

/// _compute_llama3_parameters.
std::vector<double> llama3InvFreq(double base, int64_t dim, double factor,
                                  double lowFreqFactor, double highFreqFactor,
                                  double oldContext) {
  std::vector<float> inv = defaultInvFreq(base, dim);
  float lowWavelen = float(oldContext / lowFreqFactor);
  float highWavelen = float(oldContext / highFreqFactor);
  for (float &f : inv) {
    float wavelen = float(2 * kPi) / f;
    float scaled = wavelen > lowWavelen ? f / float(factor) : f;
    float smooth = (float(oldContext) / wavelen - float(lowFreqFactor)) /
                   float(highFreqFactor - lowFreqFactor);
    float smoothed =
        (1.0f - smooth) * scaled / float(factor) + smooth * scaled;
    bool medium = !(wavelen < highWavelen) && !(wavelen > lowWavelen);
    f = medium ? smoothed : scaled;
  }
  return widen(inv);
}

/// _compute_yarn_parameters (frequencies only).
std::vector<double> yarnInvFreq(double base, int64_t dim, double factor,
                                double betaFast, double betaSlow,
                                double originalMax, bool truncate) {
  auto correctionDim = [&](double rotations) {
    return (double(dim) * std::log(originalMax / (rotations * 2 * kPi))) /
           (2 * std::log(base));
  };
  double low = correctionDim(betaFast), high = correctionDim(betaSlow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high)
    high += 0.001; // transformers' guard against a zero-width ramp
  std::vector<double> inv(size_t((dim + 1) / 2));
  for (int64_t i = 0; i < (dim + 1) / 2; ++i) {
    float posFreq = std::pow(float(base), float(2 * i) / float(dim));
    float extrapolation = 1.0f / posFreq;
    float interpolation = 1.0f / (float(factor) * posFreq);
    float ramp = (float(i) - float(low)) / float(high - low);
    ramp = std::min(std::max(ramp, 0.0f), 1.0f);
    float extrapolationFactor = 1.0f - ramp;
    inv[size_t(i)] = interpolation * (1.0f - extrapolationFactor) +
                     extrapolation * extrapolationFactor;
  }
  return inv;
}

double yarnMscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

/// transformers 4 ignores `rope_parameters` and reads RoPE from top-level
/// fields (`rope_theta`, `rope_scaling`, ...), which transformers 5 reads
/// only to fill what the object leaves out. A config holding both
/// (transformers 4 writes its own beside the object when it saves a config
/// it read from transformers 5) therefore means one RoPE to each; refuse it
/// when the two differ, since which library the weights were trained and
/// checked with is not in the config. `v4Theta` and `v4Partial` are the
/// top-level (or class default) values; `rope_scaling` is null here (a
/// non-null one beside the object is refused before).
llvm::Error checkGenerationsAgree(const Fields &top, const RopeConfig &v5,
                                  double v5Partial, int64_t v5Dim,
                                  int64_t headDim, double v4Theta,
                                  double v4Partial, const RopeDefaults &d) {
  if (!top.present(d.thetaKey) && !top.present(d.partialKey) &&
      !top.present("rope_scaling"))
    return llvm::Error::success();
  std::vector<double> v5Table =
      v5.invFreq.empty() ? widen(defaultInvFreq(v5.theta, v5Dim)) : v5.invFreq;
  if (v4Partial > 0.0 && v4Partial <= 1.0) {
    int64_t v4Dim =
        v4Partial == 1.0 ? headDim : int64_t(double(headDim) * v4Partial);
    int64_t v4Rotary = v4Partial == 1.0 ? 0 : v4Dim + v4Dim % 2;
    if (v4Dim >= 1 && v4Rotary == v5.rotaryDim && v5.attentionFactor == 1.0 &&
        widen(defaultInvFreq(v4Theta, v4Dim)) == v5Table)
      return llvm::Error::success();
  }
  auto partialText = [](StringRef key, double partial) {
    return partial == 1.0 ? std::string()
                          : ", " + key.str() + " " + formatNumber(partial);
  };
  return top.error(
      "RoPE is given twice, differently: 'rope_parameters' (transformers 5: "
      "rope_type '" +
      v5.type + "', rope_theta " + formatNumber(v5.theta) +
      partialText("partial_rotary_factor", v5Partial) +
      ") and top-level fields (transformers 4, which ignores "
      "'rope_parameters': " +
      d.thetaKey + " " + formatNumber(v4Theta) +
      partialText(d.partialKey, v4Partial) +
      ", no scaling). transformers 4 writes both when it saves a config "
      "read from transformers 5; keep the fields of the version the model "
      "was made with");
}

} // namespace

Expected<RopeConfig> config::readRope(const Fields &top, int64_t headDim,
                                      int64_t maxPositions,
                                      const RopeDefaults &defaults) {
  RopeConfig r;
  const llvm::json::Object *params, *scaling;
  BRAID_ASSIGN(params, top.objectOr("rope_parameters"));
  BRAID_ASSIGN(scaling, top.objectOr("rope_scaling"));
  if (params && scaling)
    return top.error("fields 'rope_parameters' (transformers 5) and "
                     "'rope_scaling' (transformers 4) are both set; keep one");
  double topTheta = defaults.theta, topOriginalMax = double(maxPositions);
  double topPartial = defaults.partialRotaryFactor;
  if (defaults.topLevelParams) {
    BRAID_ASSIGN(topTheta, top.numberOr("rope_theta", defaults.theta));
    BRAID_ASSIGN(topPartial, top.numberOr("partial_rotary_factor",
                                          defaults.partialRotaryFactor));
  } else {
    top.markRead("rope_theta");
    top.markRead("partial_rotary_factor");
  }
  // Phi-3 style: the pretraining length next to the RoPE object wins.
  bool topHasOriginal = top.has("original_max_position_embeddings");
  if (topHasOriginal)
    BRAID_ASSIGN(topOriginalMax,
                 top.integer("original_max_position_embeddings",
                             limits::kMaxPositions));

  r.theta = topTheta;
  double partial = topPartial;
  int64_t frequencyDim = 0; // with a partial factor: the dim of the formulas
  // transformers: dim = int(head_dim * partial_rotary_factor).
  auto applyPartial = [&]() -> llvm::Error {
    if (partial == 1.0) {
      // RoPE rotates pairs: transformers' cos/sin would span head_dim + 1
      // elements and fail against the head.
      if (headDim % 2 != 0)
        return top.error("head_dim " + llvm::Twine(headDim) +
                         " is odd and the whole head rotates (a rotary "
                         "fraction of 1): RoPE needs an even number of "
                         "rotated elements (transformers fails on this "
                         "config)");
      return llvm::Error::success();
    }
    if (!defaults.allowPartial)
      return top.error("field 'partial_rotary_factor' is " +
                       formatNumber(partial) +
                       "; Braid rotates whole heads (1.0) only for this "
                       "model type");
    // The range first: a huge factor would overflow the conversion.
    if (!(partial > 0.0 && partial <= 1.0))
      return top.error("partial_rotary_factor " + formatNumber(partial) +
                       " must be in (0, 1]");
    int64_t dim = int64_t(double(headDim) * partial);
    if (dim < 1)
      return top.error("partial_rotary_factor " + formatNumber(partial) +
                       " of head_dim " + llvm::Twine(headDim) +
                       " rotates no element; Braid needs at least one");
    // transformers' frequencies come from this dim (`int(head_dim *
    // factor)`), and cos/sin then span 2 x ceil(dim / 2) elements, which
    // is what rotates: one more than dim when it is odd.
    frequencyDim = dim;
    r.rotaryDim = dim + dim % 2;
    return llvm::Error::success();
  };
  // A type that leaves the table empty means the op's own
  // theta^(-2i/rotary_dim), which uses the wrong dim when the frequency dim
  // is odd: then the table is explicit.
  auto explicitOddTable = [&] {
    if (r.invFreq.empty() && frequencyDim % 2 != 0)
      r.invFreq = widen(defaultInvFreq(r.theta, frequencyDim));
  };
  if (!params && !scaling) {
    if (llvm::Error e = applyPartial())
      return std::move(e);
    explicitOddTable();
    return r;
  }
  StringRef objName = params ? "rope_parameters" : "rope_scaling";
  Fields rf(params ? *params : *scaling, top.sourceName(),
            (objName + ".").str());
  auto err = [&](const llvm::Twine &msg) { return top.error(msg); };
  for (StringRef layerType : {"full_attention", "sliding_attention"})
    if (rf.has(layerType))
      return err("field '" + objName + "' holds RoPE parameters per layer "
                 "type ('" + layerType + "'); Braid supports one RoPE for "
                 "every layer");

  std::string type, legacyType;
  BRAID_ASSIGN(type, rf.stringOr("rope_type", ""));
  BRAID_ASSIGN(legacyType, rf.stringOr("type", ""));
  if (!type.empty() && !legacyType.empty() && type != legacyType)
    return err("fields '" + objName + ".rope_type' ('" + type + "') and '" +
               objName + ".type' ('" + legacyType + "') disagree");
  if (type.empty())
    type = legacyType.empty() ? "default" : legacyType;
  r.type = type;
  BRAID_ASSIGN(r.theta, rf.numberOr("rope_theta", topTheta));
  BRAID_ASSIGN(partial, rf.numberOr("partial_rotary_factor", topPartial));
  if (llvm::Error e = applyPartial())
    return std::move(e);
  // The scaled formulas run over the rotated dims, as transformers' do.
  const int64_t dim = frequencyDim ? frequencyDim : headDim;

  // The pretraining length the scaled types read. transformers 5 lets a
  // top-level one (Phi-3 style) win over the object's own; transformers 4
  // never reads it: it takes the object's (yarn: else
  // max_position_embeddings; llama3 fails without one). `v4` is set when
  // transformers 4 would read a different value: the type then checks
  // that its frequencies come out the same.
  struct OriginalMax {
    double v5;
    std::optional<double> v4;
    std::string v4Field;
  };
  auto originalMax = [&]() -> Expected<OriginalMax> {
    if (!topHasOriginal) {
      auto v = rf.integerOr("original_max_position_embeddings", maxPositions,
                            limits::kMaxPositions);
      if (!v)
        return v.takeError();
      return OriginalMax{double(*v), std::nullopt, ""};
    }
    OriginalMax o{topOriginalMax, std::nullopt, "max_position_embeddings"};
    if (rf.has("original_max_position_embeddings")) {
      o.v4Field = (objName + ".original_max_position_embeddings").str();
      int64_t inner;
      BRAID_ASSIGN(inner, rf.integer("original_max_position_embeddings",
                                     limits::kMaxPositions));
      o.v4 = double(inner);
    } else if (type == "yarn") {
      o.v4 = double(maxPositions);
    }
    if (o.v4 && *o.v4 == o.v5)
      o.v4.reset();
    return o;
  };
  auto generationsDisagree = [&](const OriginalMax &o) {
    return err(
        "field 'original_max_position_embeddings' (" + formatNumber(o.v5) +
        ") is what transformers 5 reads for rope_type '" + type +
        "', and transformers 4 ignores it for '" + o.v4Field + "' (" +
        formatNumber(*o.v4) +
        "), which gives other frequencies; keep one, inside '" + objName + "'");
  };

  if (type == "default") {
    // Nothing else: the plain theta^(-2i/D) frequencies.
  } else if (type == "linear") {
    double factor;
    BRAID_ASSIGN(factor, rf.number("factor"));
    std::vector<float> inv = defaultInvFreq(r.theta, dim);
    for (float &x : inv)
      x /= float(factor);
    r.invFreq = widen(inv);
  } else if (type == "dynamic") {
    // Dynamic NTK changes the base only once a position reaches
    // max_position_embeddings; Braid's KV cache (--max-seq) never holds more
    // positions than that, so every position Braid runs uses the default
    // frequencies, exactly as transformers does below that length.
    double factor;
    BRAID_ASSIGN(factor, rf.number("factor"));
    (void)factor;
  } else if (type == "llama3") {
    double factor, low, high;
    BRAID_ASSIGN(factor, rf.number("factor"));
    BRAID_ASSIGN(low, rf.number("low_freq_factor"));
    BRAID_ASSIGN(high, rf.number("high_freq_factor"));
    OriginalMax old;
    BRAID_ASSIGN(old, originalMax());
    if (!(high > low))
      return err("field '" + objName + ".high_freq_factor' (" +
                 formatNumber(high) + ") must exceed 'low_freq_factor' (" +
                 formatNumber(low) + ")");
    r.invFreq = llama3InvFreq(r.theta, dim, factor, low, high, old.v5);
    if (old.v4 &&
        llama3InvFreq(r.theta, dim, factor, low, high, *old.v4) != r.invFreq)
      return generationsDisagree(old);
  } else if (type == "yarn") {
    // transformers' yarn ramp has dim / 2 entries against ceil(dim / 2)
    // frequencies: it fails on an odd dim, so there is nothing to match.
    if (dim % 2 != 0)
      return err("rope_type 'yarn' over an odd number of frequency dims (" +
                 llvm::Twine(dim) +
                 " = int(head_dim x partial_rotary_factor)) "
                 "has no defined meaning (transformers fails on it)");
    OriginalMax old;
    BRAID_ASSIGN(old, originalMax());
    bool hasFactor = rf.has("factor");
    double givenFactor = 0;
    if (hasFactor)
      BRAID_ASSIGN(givenFactor, rf.number("factor"));
    double betaFast, betaSlow, mscale, mscaleAllDim;
    // transformers reads `get("beta_fast") or 32`: 0 also means the
    // default; mscale and mscale_all_dim count only when both are non-zero.
    BRAID_ASSIGN(betaFast, rf.numberOrIfZero("beta_fast", 32));
    BRAID_ASSIGN(betaSlow, rf.numberOrIfZero("beta_slow", 1));
    BRAID_ASSIGN(mscale, rf.numberOrIfZero("mscale", 0));
    BRAID_ASSIGN(mscaleAllDim, rf.numberOrIfZero("mscale_all_dim", 0));
    bool truncate;
    BRAID_ASSIGN(truncate, rf.booleanOr("truncate", true));
    std::optional<double> givenAttention;
    if (rf.has("attention_factor"))
      BRAID_ASSIGN(givenAttention, rf.number("attention_factor"));
    // The table and cos/sin factor for one pretraining length (the
    // factor's default depends on it too).
    auto yarnFor = [&](double original) {
      double factor = hasFactor ? givenFactor : double(maxPositions) / original;
      double attention =
          givenAttention ? *givenAttention
          : mscale != 0 && mscaleAllDim != 0
              ? yarnMscale(factor, mscale) / yarnMscale(factor, mscaleAllDim)
              : yarnMscale(factor, 1);
      return std::make_pair(yarnInvFreq(r.theta, dim, factor, betaFast,
                                        betaSlow, original, truncate),
                            attention);
    };
    std::tie(r.invFreq, r.attentionFactor) = yarnFor(old.v5);
    if (old.v4 &&
        yarnFor(*old.v4) != std::make_pair(r.invFreq, r.attentionFactor))
      return generationsDisagree(old);
  } else {
    return err("field '" + objName + ".rope_type' is '" + type +
               "'; Braid supports default, linear, dynamic, llama3 and yarn");
  }
  explicitOddTable();
  // Extreme parameters (a factor of 1e308, a negative mscale) can give
  // frequencies or a cos/sin factor no rotation has: refuse them here,
  // naming the type, rather than build a module that cannot verify.
  for (double f : r.invFreq)
    if (!(f > 0.0) || !std::isfinite(f))
      return err("field '" + objName + "' (rope_type '" + type +
                 "') gives a frequency of " + formatNumber(f) +
                 "; every frequency must be positive and finite");
  if (!(r.attentionFactor > 0.0) || !std::isfinite(r.attentionFactor))
    return err("field '" + objName + "' (rope_type '" + type +
               "') gives an attention factor of " +
               formatNumber(r.attentionFactor) +
               "; it must be positive and finite");
  std::vector<std::string> unknown = rf.unread();
  if (!unknown.empty())
    return err("field '" + objName + "." + unknown.front() +
               "' is not a parameter of rope_type '" + type +
               "' that Braid knows; refusing rather than ignoring it");
  if (params)
    if (llvm::Error e = checkGenerationsAgree(top, r, partial, dim, headDim,
                                              topTheta, topPartial, defaults))
      return std::move(e);
  return r;
}
