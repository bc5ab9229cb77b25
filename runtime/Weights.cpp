//===- Weights.cpp - Deterministic synthetic weights ----------------------===//
#include "runtime/Weights.h"
#include "runtime/PlanLoader.h"

using namespace braid::rt;

static uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= uint8_t(c);
    h *= 1099511628211ull;
  }
  return h;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// "model.norm.weight", "input_layernorm.weight", "h.0.ln_1.weight".
static bool isNormWeight(std::string_view name) {
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

float braid::rt::weightValue(uint64_t seed, std::string_view name,
                             int64_t fullIndex) {
  uint64_t h = splitmix64(seed ^ splitmix64(fnv1a(name) + uint64_t(fullIndex)));
  // 24 random bits -> uniform in [-1, 1).
  float u = float(h >> 40) / float(1 << 23) - 1.0f;
  float v = kWeightScale * u;
  return isNormWeight(name) ? 1.0f + v : v;
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
  if (spec.shards < 1 || spec.blocks < 1 || spec.groupSize < 1 ||
      spec.groupSize % spec.shards || spec.rank < 0 ||
      spec.rank >= spec.groupSize ||
      padded[size_t(spec.dim)] % (spec.shards * spec.blocks))
    return errorf("cannot cut dim ", spec.dim, " of ", formatShape(padded),
                  " into ", spec.blocks, " blocks x ", spec.shards,
                  " shards for rank ", spec.rank, " of ", spec.groupSize);
  local[size_t(spec.dim)] /= spec.shards;
  return local;
}

// Calls fn(localLinear, fullLinear or -1 for padding) for every local
// element; the mapping is the whole shard rule.
template <typename Fn>
static Status forEachLocal(const Shape &full, const Shape &paddedIn,
                           const ShardSpec &spec, Fn fn) {
  Shape padded = paddedIn.empty() ? full : paddedIn;
  if (padded.size() != full.size())
    return errorf("padded shape ", formatShape(padded), " and full shape ",
                  formatShape(full), " differ in rank");
  for (size_t d = 0; d < full.size(); ++d)
    if (padded[d] < full[d])
      return errorf("padded shape ", formatShape(padded),
                    " is smaller than full shape ", formatShape(full));
  auto local = localShape(padded, spec);
  if (!local)
    return local.status();
  int64_t piece = 0, pieceLen = 0, blockLen = 0;
  if (spec.dim >= 0) {
    piece = spec.rank * spec.shards / spec.groupSize;
    blockLen = padded[size_t(spec.dim)] / spec.blocks;
    pieceLen = blockLen / spec.shards;
  }
  size_t r = full.size();
  std::vector<int64_t> idx(r, 0);
  int64_t n = numElements(*local);
  for (int64_t e = 0; e < n; ++e) {
    int64_t lin = 0;
    bool pad = false;
    for (size_t d = 0; d < r; ++d) {
      int64_t c = idx[d];
      if (int64_t(d) == spec.dim) {
        // Local coordinate c is in block c / pieceLen, our piece of it.
        int64_t block = c / pieceLen, within = c % pieceLen;
        c = block * blockLen + piece * pieceLen + within;
      }
      if (c >= full[d])
        pad = true;
      lin = lin * full[d] + c;
    }
    fn(e, pad ? -1 : lin);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < (*local)[d])
        break;
      idx[d] = 0;
    }
  }
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
