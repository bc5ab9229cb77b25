//===- Weights.cpp - Deterministic synthetic weights ----------------------===//
#include "runtime/Weights.h"
#include "runtime/CheckedMath.h"
#include "runtime/PlanLoader.h"

#include <optional>

using namespace braid::rt;

// "model.norm.weight", "input_layernorm.weight", "h.0.ln_1.weight".
bool braid::rt::isNormWeight(std::string_view name) {
  constexpr std::string_view kSuffix = ".weight";
  if (name.size() < kSuffix.size() ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return false;
  std::string_view module = name.substr(0, name.size() - kSuffix.size());
  size_t dot = module.rfind('.');
  std::string_view last =
      dot == std::string_view::npos ? module : module.substr(dot + 1);
  return last.find("norm") != std::string_view::npos ||
         last.substr(0, 2) == "ln";
}

uint64_t braid::rt::weightNameHash(std::string_view name) {
  return weights::fnv1a(name.data(), name.size());
}

float braid::rt::weightValue(uint64_t seed, std::string_view name,
                             int64_t fullIndex) {
  return weights::weightFromHash(seed, weightNameHash(name), fullIndex,
                                 isNormWeight(name));
}

std::vector<float> braid::rt::generateFullWeights(uint64_t seed,
                                                  std::string_view name,
                                                  const Shape &fullShape) {
  std::vector<float> out(static_cast<size_t>(numElements(fullShape)));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = weightValue(seed, name, int64_t(i));
  return out;
}

ShardSpec braid::rt::shardSpecFor(const plan::Plan &plan,
                                  const plan::Parameter &param, int worldRank) {
  ShardSpec spec;
  if (const plan::ShardRule *s = param.shard()) {
    GroupPosition g = groupPosition(plan, s->group(), worldRank);
    spec.dim = s->dim();
    spec.shards = s->shards() ? s->shards() : g.size;
    spec.blocks = s->blocks();
    spec.rank = g.rankInGroup;
    spec.groupSize = g.size;
  }
  return spec;
}

Expected<Shape> braid::rt::localShape(const Shape &padded,
                                      const ShardSpec &spec) {
  Shape local = padded;
  if (spec.dim < 0)
    return local;
  if (spec.dim >= int64_t(padded.size()))
    return errorf("shard dim ", spec.dim, " out of range for ",
                  formatShape(padded));
  // shards x blocks checked: a product that wraps to 0 would divide by 0.
  std::optional<int64_t> pieces = checkedMul(spec.shards, spec.blocks);
  if (spec.shards < 1 || spec.blocks < 1 || spec.groupSize < 1 ||
      spec.groupSize % spec.shards || spec.rank < 0 ||
      spec.rank >= spec.groupSize || !pieces ||
      padded[size_t(spec.dim)] % *pieces)
    return errorf("cannot cut dim ", spec.dim, " of ", formatShape(padded),
                  " into ", spec.blocks, " blocks x ", spec.shards,
                  " shards for rank ", spec.rank, " of ", spec.groupSize);
  local[size_t(spec.dim)] /= spec.shards;
  return local;
}

Expected<weights::LocalIndexMap>
braid::rt::localIndexMap(const Shape &full, const Shape &paddedIn,
                         const ShardSpec &spec) {
  Shape padded = paddedIn.empty() ? full : paddedIn;
  if (padded.size() != full.size())
    return errorf("padded shape ", formatShape(padded), " and full shape ",
                  formatShape(full), " differ in rank");
  if (full.size() > size_t(weights::kMaxRank))
    return errorf("rank ", full.size(), " parameters are not supported (at "
                  "most ", weights::kMaxRank, ")");
  for (size_t d = 0; d < full.size(); ++d)
    if (padded[d] < full[d])
      return errorf("padded shape ", formatShape(padded),
                    " is smaller than full shape ", formatShape(full));
  auto local = localShape(padded, spec);
  if (!local)
    return local.status();
  weights::LocalIndexMap m;
  m.rank = int(full.size());
  m.dim = int(spec.dim);
  for (size_t d = 0; d < full.size(); ++d) {
    m.local[d] = (*local)[d];
    m.full[d] = full[d];
  }
  m.localCount = numElements(*local);
  if (spec.dim >= 0) {
    m.piece = spec.rank * spec.shards / spec.groupSize;
    m.blockLen = padded[size_t(spec.dim)] / spec.blocks;
    m.pieceLen = m.blockLen / spec.shards;
  }
  return m;
}

// Calls fn(localLinear, fullLinear or -1 for padding) for every local
// element; the mapping is the whole shard rule.
template <typename Fn>
static Status forEachLocal(const Shape &full, const Shape &padded,
                           const ShardSpec &spec, Fn fn) {
  auto map = localIndexMap(full, padded, spec);
  if (!map)
    return map.status();
  for (int64_t e = 0; e < map->localCount; ++e)
    fn(e, weights::fullIndexOf(*map, e));
  return Status::ok();
}

Expected<std::vector<float>>
braid::rt::sliceForRank(const std::vector<float> &full, const Shape &fullShape,
                        const Shape &paddedShape, const ShardSpec &spec) {
  if (int64_t(full.size()) != numElements(fullShape))
    return errorf("full tensor has ", full.size(), " elements, shape ",
                  formatShape(fullShape), " needs ", numElements(fullShape));
  std::vector<float> out;
  Status st =
      forEachLocal(fullShape, paddedShape, spec, [&](int64_t l, int64_t f) {
        out.push_back(f < 0 ? 0.0f : full[size_t(f)]);
      });
  if (!st)
    return st;
  return out;
}

Expected<std::vector<float>> braid::rt::generateLocalWeights(
    uint64_t seed, std::string_view name, const Shape &fullShape,
    const Shape &paddedShape, const ShardSpec &spec) {
  std::vector<float> out;
  Status st =
      forEachLocal(fullShape, paddedShape, spec, [&](int64_t l, int64_t f) {
        out.push_back(f < 0 ? 0.0f : weightValue(seed, name, f));
      });
  if (!st)
    return st;
  return out;
}

Expected<HostTensor>
braid::rt::initialParameterValue(const plan::Plan &plan,
                                 const plan::Parameter &param, int worldRank,
                                 uint64_t seed) {
  auto [full, local, padded] = parameterShapes(param);
  auto values =
      generateLocalWeights(seed, param.name()->string_view(), full, padded,
                           shardSpecFor(plan, param, worldRank));
  if (!values)
    return errorf("parameter '", param.name()->str(),
                  "': ", values.status().message());
  return HostTensor::fromFloats(param.dtype(), local, *values);
}

Expected<unsigned> braid::rt::parameterSlotFor(const plan::Plan &plan,
                                               std::string_view name,
                                               const HostTensor &local) {
  if (plan.parameters())
    for (unsigned i = 0; i < plan.parameters()->size(); ++i) {
      const plan::Parameter *param = plan.parameters()->Get(i);
      if (param->name()->string_view() != name)
        continue;
      Shape shape(param->local_shape()->begin(), param->local_shape()->end());
      if (local.shape != shape || local.dtype != param->dtype())
        return errorf("parameter '", name, "' is ", formatShape(shape), " x ",
                      dtypeName(param->dtype()), ", got ",
                      formatShape(local.shape), " x ", dtypeName(local.dtype));
      return i;
    }
  return errorf("no parameter named '", name, "'");
}

ParameterShapes braid::rt::parameterShapes(const plan::Parameter &param) {
  ParameterShapes s;
  s.full.assign(param.full_shape()->begin(), param.full_shape()->end());
  s.local.assign(param.local_shape()->begin(), param.local_shape()->end());
  if (param.padded_shape())
    s.padded.assign(param.padded_shape()->begin(), param.padded_shape()->end());
  return s;
}
