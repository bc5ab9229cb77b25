//===- Weights.h - Deterministic synthetic weights --------------*- C++ -*-===//
//
// value = f(seed, parameter name, linear index in the FULL tensor), so a
// rank's slice depends only on the shard rule: TP=1 and TP=N runs compute
// the same function. Norm weights ("norm" in the name, or a GPT-2 "ln_*"
// module) are 1 + small noise so activations keep their scale. How small
// is the Amplitude's choice (runtime/WeightFormula.h).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_WEIGHTS_H
#define BRAID_RUNTIME_WEIGHTS_H

#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/WeightFormula.h"

#include <optional>
#include <string_view>
#include <vector>

namespace braid::rt {

/// Which synthetic weights a run generates: a seed and an amplitude
/// (default Flat).
struct SyntheticWeights {
  uint64_t seed = 0;
  weights::Amplitude amplitude = weights::Amplitude::Flat;

  SyntheticWeights() = default;
  explicit SyntheticWeights(
      uint64_t seed, weights::Amplitude amplitude = weights::Amplitude::Flat)
      : seed(seed), amplitude(amplitude) {}
};

/// "flat" / "fan-in", and back (nullopt for any other name).
const char *amplitudeName(weights::Amplitude amplitude);
std::optional<weights::Amplitude> parseAmplitude(std::string_view name);

/// The scale of a tensor of full shape `fullShape` under `amplitude`
/// (WeightFormula.h: Flat kScale; FanIn sqrt(3 / last dim) for rank >= 2,
/// kVectorScaleFanIn below that).
float weightScale(weights::Amplitude amplitude, const Shape &fullShape);

/// How one rank's slice is cut (braid.parameter semantics).
struct ShardSpec {
  int64_t dim = -1; // -1: replicated
  int64_t shards = 1;
  int64_t blocks = 1;
  int64_t rank = 0;      // rank in the group
  int64_t groupSize = 1; // piece = rank * shards / groupSize
};

/// A plan parameter's full, local and padded (empty: none) shapes.
struct ParameterShapes {
  Shape full, local, padded;
};
ParameterShapes parameterShapes(const plan::Parameter &param);

/// `param`'s shard spec on world rank `worldRank`: replicated without a
/// shard rule, else cut over the rule's group (shards 0 = the group size).
ShardSpec shardSpecFor(const plan::Plan &plan, const plan::Parameter &param,
                       int worldRank);

/// `param`'s initial value on world rank `worldRank`: its local slice of
/// the deterministic weights (generateLocalWeights) in its dtype. Errors
/// name the parameter.
Expected<HostTensor> initialParameterValue(const plan::Plan &plan,
                                           const plan::Parameter &param,
                                           int worldRank,
                                           const SyntheticWeights &weights);

/// The index in plan.parameters() of the parameter `name` that `local`
/// replaces, once `local` has its local shape and dtype: what every
/// runtime's setParameter checks before it copies the values in.
Expected<unsigned> parameterSlotFor(const plan::Plan &plan,
                                    std::string_view name,
                                    const HostTensor &local);

constexpr float kWeightScale = weights::kScale;

/// Norm weights ("norm" in the module name, GPT-2's "ln_*") are 1 + noise.
bool isNormWeight(std::string_view name);
/// The name's part of the formula (runtime/WeightFormula.h).
uint64_t weightNameHash(std::string_view name);

/// Element `fullIndex` (row-major in the unpadded full tensor) of a tensor
/// whose scale is `scale` (weightScale).
float weightValue(uint64_t seed, std::string_view name, int64_t fullIndex,
                  float scale = weights::kScale);

/// The whole full tensor.
std::vector<float> generateFullWeights(const SyntheticWeights &weights,
                                       std::string_view name,
                                       const Shape &fullShape);

/// The local shape for `spec` (padded shape cut along spec.dim).
Expected<Shape> localShape(const Shape &paddedShape, const ShardSpec &spec);

/// Local element -> full element for `spec` (checked: ranks, padding, cut).
Expected<weights::LocalIndexMap> localIndexMap(const Shape &fullShape,
                                               const Shape &paddedShape,
                                               const ShardSpec &spec);

/// This rank's slice of `full` (shape `fullShape`), after zero-padding it to
/// `paddedShape` (empty: no padding).
Expected<std::vector<float>> sliceForRank(const std::vector<float> &full,
                                          const Shape &fullShape,
                                          const Shape &paddedShape,
                                          const ShardSpec &spec);

/// Same result as sliceForRank(generateFullWeights(...)) without building
/// the full tensor.
Expected<std::vector<float>>
generateLocalWeights(const SyntheticWeights &weights, std::string_view name,
                     const Shape &fullShape, const Shape &paddedShape,
                     const ShardSpec &spec);

} // namespace braid::rt

#endif // BRAID_RUNTIME_WEIGHTS_H
