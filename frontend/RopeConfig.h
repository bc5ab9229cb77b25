//===- RopeConfig.h - RoPE parameters of a config.json ----------*- C++ -*-===//
//
// Private to frontend/. Reads RoPE as both transformers generations write
// it: `rope_parameters` {rope_type, rope_theta, ...} (transformers 5) or a
// top-level `rope_theta` with an optional `rope_scaling` (4.x), and resolves
// the scaled variants into inverse frequencies exactly as
// transformers/modeling_rope_utils.py computes them (in fp32).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FRONTEND_ROPECONFIG_H
#define BRAID_FRONTEND_ROPECONFIG_H

#include "frontend/ConfigFields.h"
#include "frontend/ModelConfig.h"

namespace braid::config {

/// The RoPE of the config whose top-level fields are `top`, for heads of
/// `headDim` and a model of `maxPositions` positions. Unknown keys inside
/// the RoPE object, an unsupported rope_type and a partial rotary factor
/// are errors naming the key.
/// Family defaults: GPT-NeoX rotates a quarter of each head unless told
/// otherwise and names its theta rotary_emb_base.
struct RopeDefaults {
  double theta = 10000.0;
  double partialRotaryFactor = 1.0;
  bool allowPartial = false; // else a factor other than 1 is refused
  /// Whether top-level rope_theta and partial_rotary_factor count (GPT-NeoX:
  /// transformers ignores them, reading rotary_emb_base / rotary_pct or the
  /// RoPE object, so they are read as known and left out).
  bool topLevelParams = true;
  /// The top-level fields transformers 4 reads RoPE's base and fraction
  /// from (GPT-NeoX: rotary_emb_base and rotary_pct).
  StringRef thetaKey = "rope_theta";
  StringRef partialKey = "partial_rotary_factor";
};
llvm::Expected<RopeConfig> readRope(const Fields &top, int64_t headDim,
                                    int64_t maxPositions,
                                    const RopeDefaults &defaults = {});

} // namespace braid::config

#endif // BRAID_FRONTEND_ROPECONFIG_H
