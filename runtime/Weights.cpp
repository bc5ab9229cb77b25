//===- Weights.cpp - Deterministic synthetic weights ----------------------===//
#include "runtime/Weights.h"
#include "runtime/CheckedMath.h"
#include "runtime/PlanLoader.h"
#include "runtime/Threads.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

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

const char *braid::rt::amplitudeName(weights::Amplitude amplitude) {
  return amplitude == weights::Amplitude::FanIn ? "fan-in" : "flat";
}

std::optional<weights::Amplitude>
braid::rt::parseAmplitude(std::string_view name) {
  for (weights::Amplitude a :
       {weights::Amplitude::Flat, weights::Amplitude::FanIn})
    if (name == amplitudeName(a))
      return a;
  return std::nullopt;
}

float braid::rt::weightScale(weights::Amplitude amplitude,
                             const Shape &fullShape) {
  if (amplitude == weights::Amplitude::Flat)
    return weights::kScale;
  if (fullShape.size() < 2 || fullShape.back() < 1)
    return weights::kVectorScaleFanIn;
  // sqrt in double, rounded once to fp32: what make_golden.py computes.
  return float(std::sqrt(3.0 / double(fullShape.back())));
}

float braid::rt::weightValue(uint64_t seed, std::string_view name,
                             int64_t fullIndex, float scale) {
  return weights::weightFromHash(seed, weightNameHash(name), fullIndex,
                                 isNormWeight(name), scale);
}

/// Synthetic element `fullIndex` of parameter `name` (full shape
/// `fullShape`): weightValue, with the name's hash, kind and scale
/// computed once, not per element.
static auto syntheticValue(const SyntheticWeights &w, std::string_view name,
                           const Shape &fullShape) {
  uint64_t seed = w.seed;
  uint64_t hash = weightNameHash(name);
  bool norm = isNormWeight(name);
  float scale = weightScale(w.amplitude, fullShape);
  return [=](int64_t fullIndex) {
    return weights::weightFromHash(seed, hash, fullIndex, norm, scale);
  };
}

std::vector<float>
braid::rt::generateFullWeights(const SyntheticWeights &weights,
                               std::string_view name, const Shape &fullShape) {
  std::vector<float> out(static_cast<size_t>(numElements(fullShape)));
  auto value = syntheticValue(weights, name, fullShape);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = value(int64_t(i));
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

namespace {

/// The shard rule a row (the last dim) at a time: fullIndexOf's divisions
/// once per row, not per element. A local element's full index is its
/// row's (the leading dims, mapped alone) times the last dim's full length
/// plus its column's (the last dim, mapped alone), or padding (-1) when
/// either is.
class RowMap {
public:
  static Expected<RowMap> create(const Shape &full, const Shape &padded,
                                 const ShardSpec &spec) {
    auto map = localIndexMap(full, padded, spec);
    if (!map)
      return map.status();
    RowMap r;
    r.m_ = *map;
    if (r.m_.rank == 0) { // a scalar: one row of one element
      r.numRows = r.m_.localCount;
      r.width = 1;
      r.column_ = {0};
      return r;
    }
    int last = r.m_.rank - 1;
    r.rows_ = r.m_;
    r.rows_.rank = last;
    r.rows_.dim = r.m_.dim == last ? -1 : r.m_.dim;
    weights::LocalIndexMap cols = r.m_;
    cols.rank = 1;
    cols.local[0] = r.m_.local[last];
    cols.full[0] = r.m_.full[last];
    cols.dim = r.m_.dim == last ? 0 : -1;
    r.width = r.m_.local[last];
    r.fullWidth = r.m_.full[last];
    r.numRows = r.width ? r.m_.localCount / r.width : 0;
    r.column_.resize(size_t(r.width));
    for (int64_t c = 0; c < r.width; ++c)
      r.column_[size_t(c)] = weights::fullIndexOf(cols, c);
    return r;
  }

  /// Full indices (or -1) of row `r`'s `width` elements.
  void row(int64_t r, int64_t *full) const {
    int64_t base = m_.rank == 0 ? 0 : weights::fullIndexOf(rows_, r);
    for (int64_t c = 0; c < width; ++c) {
      int64_t col = column_[size_t(c)];
      full[c] = base < 0 || col < 0 ? -1 : base * fullWidth + col;
    }
  }

  int64_t numRows = 0, width = 0, fullWidth = 1;

private:
  weights::LocalIndexMap m_, rows_;
  std::vector<int64_t> column_;
};

/// Calls store(row, values) with the `rows.width` values of every row:
/// value(full index), 0 for padding. Rows are split across threads when
/// there are enough elements to pay for them (set-up generates billions).
template <typename Value, typename Store>
void forEachLocalRow(const RowMap &rows, Value value, Store store) {
  constexpr int64_t kElementsPerThread = int64_t(1) << 20;
  int64_t threads = std::min<int64_t>(
      {int64_t(std::max(1u, std::thread::hardware_concurrency())), 16,
       rows.numRows * rows.width / kElementsPerThread});
  splitAcrossThreads(
      rows.numRows, threads,
      [&](int64_t begin, int64_t end) {
        std::vector<int64_t> full(size_t(rows.width));
        std::vector<float> values(size_t(rows.width));
        for (int64_t r = begin; r < end; ++r) {
          rows.row(r, full.data());
          for (int64_t c = 0; c < rows.width; ++c)
            values[size_t(c)] =
                full[size_t(c)] < 0 ? 0.0f : value(full[size_t(c)]);
          store(r, values.data());
        }
      },
      "weight generation threads");
}

/// The local slice of `rows` as f32.
template <typename Value>
std::vector<float> localValues(const RowMap &rows, Value value) {
  std::vector<float> out(size_t(rows.numRows * rows.width));
  forEachLocalRow(rows, value, [&](int64_t r, const float *values) {
    std::copy_n(values, size_t(rows.width), out.data() + r * rows.width);
  });
  return out;
}

} // namespace

Expected<std::vector<float>>
braid::rt::sliceForRank(const std::vector<float> &full, const Shape &fullShape,
                        const Shape &paddedShape, const ShardSpec &spec) {
  if (int64_t(full.size()) != numElements(fullShape))
    return errorf("full tensor has ", full.size(), " elements, shape ",
                  formatShape(fullShape), " needs ", numElements(fullShape));
  auto rows = RowMap::create(fullShape, paddedShape, spec);
  if (!rows)
    return rows.status();
  return localValues(*rows, [&](int64_t f) { return full[size_t(f)]; });
}

Expected<std::vector<float>> braid::rt::generateLocalWeights(
    const SyntheticWeights &weights, std::string_view name,
    const Shape &fullShape, const Shape &paddedShape, const ShardSpec &spec) {
  auto rows = RowMap::create(fullShape, paddedShape, spec);
  if (!rows)
    return rows.status();
  return localValues(*rows, syntheticValue(weights, name, fullShape));
}

Expected<HostTensor>
braid::rt::initialParameterValue(const plan::Plan &plan,
                                 const plan::Parameter &param, int worldRank,
                                 const SyntheticWeights &weights) {
  auto [full, local, padded] = parameterShapes(param);
  auto fail = [&](const Status &st) {
    return errorf("parameter '", param.name()->str(), "': ", st.message());
  };
  auto rows =
      RowMap::create(full, padded, shardSpecFor(plan, param, worldRank));
  if (!rows)
    return fail(rows.status());
  if (rows->numRows * rows->width != numElements(local))
    return fail(errorf("the shard rule gives ", rows->numRows * rows->width,
                       " elements, local shape ", formatShape(local), " holds ",
                       numElements(local)));
  // Straight into the storage dtype a row at a time: no f32 copy of the
  // whole parameter (for bf16 weights, twice their size) on the way.
  HostTensor t(param.dtype(), local);
  size_t rowBytes = size_t(rows->width) * dtypeSize(param.dtype());
  forEachLocalRow(*rows,
                  syntheticValue(weights, param.name()->string_view(), full),
                  [&](int64_t r, const float *values) {
                    storeFromFloat(param.dtype(), values, rows->width,
                                   t.bytes.data() + size_t(r) * rowBytes);
                  });
  return t;
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
