//===- Target.cpp - Hardware target descriptions --------------------------===//
#include "passes/cost/Target.h"
#include "passes/cost/CostFiles.h"

#include "dialect/ShapeChecks.h"
#include "frontend/JsonNesting.h"
#include "runtime/CheckedMath.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#ifndef BRAID_TARGETS_DIR
#error "BRAID_TARGETS_DIR must name the bundled targets/ directory"
#endif

using namespace braid::cost;
using llvm::json::Object;

double Target::matmulEfficiencyAt(double minDim) const {
  if (matmulEfficiency.empty())
    return 1.0;
  if (minDim <= matmulEfficiency.front().minDim)
    return matmulEfficiency.front().efficiency;
  if (minDim >= matmulEfficiency.back().minDim)
    return matmulEfficiency.back().efficiency;
  for (size_t i = 1; i < matmulEfficiency.size(); ++i) {
    const EfficiencyPoint &lo = matmulEfficiency[i - 1],
                          &hi = matmulEfficiency[i];
    if (minDim <= hi.minDim) {
      double t = (std::log2(minDim) - std::log2(lo.minDim)) /
                 (std::log2(hi.minDim) - std::log2(lo.minDim));
      return lo.efficiency + t * (hi.efficiency - lo.efficiency);
    }
  }
  return matmulEfficiency.back().efficiency;
}

double Target::peakMatmulTflops(llvm::StringRef elementType) const {
  auto it = matmulTflops.find(elementType.str());
  if (it != matmulTflops.end())
    return it->second;
  return matmulTflops.at("bf16");
}

namespace {

/// Reads fields of one JSON object, remembering the path for errors.
class FieldReader {
public:
  FieldReader(const Object *object, std::string path, std::string file)
      : object_(object), path_(std::move(path)), file_(std::move(file)) {}

  llvm::Error error(llvm::StringRef field, const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   file_ + ": " + qualified(field) + ": " +
                                       what);
  }
  std::string qualified(llvm::StringRef field) const {
    return path_.empty() ? field.str() : path_ + "." + field.str();
  }

  /// Every rate, size, latency and efficiency of a target lies in
  /// [1e-6, 1e6] of its unit (TFLOP/s, GB/s, GiB, us, or a fraction): far
  /// beyond any machine, yet bounded, so no time derived from them
  /// overflows (1e308 GiB made the schedule's memory bound wrap negative,
  /// and 1e308 us of launch printed an infinite trace duration).
  llvm::Expected<double> positive(llvm::StringRef field) const {
    const llvm::json::Value *v = object_->get(field);
    if (!v)
      return error(field, "missing");
    std::optional<double> d = v->getAsNumber();
    if (!d || !std::isfinite(*d) || *d <= 0)
      return error(field, "expected a positive number");
    if (*d < 1e-6 || *d > 1e6) {
      std::ostringstream got;
      got << *d;
      return error(field, "expected a number in [1e-6, 1e6], got " + got.str());
    }
    return *d;
  }
  llvm::Expected<double> fraction(llvm::StringRef field) const {
    auto d = positive(field);
    if (!d)
      return d.takeError();
    if (*d > 1)
      return error(field, "expected a fraction in (0, 1], got " +
                              std::to_string(*d));
    return *d;
  }
  llvm::Expected<int> count(llvm::StringRef field) const {
    const llvm::json::Value *v = object_->get(field);
    if (!v)
      return error(field, "missing");
    // llvm::json converts a double of 2^63 to int64 (undefined behaviour):
    // only ask for an integer when the number is in range.
    std::optional<double> d = v->getAsNumber();
    std::optional<int64_t> i;
    if (d && std::abs(*d) < 0x1p62)
      i = v->getAsInteger();
    if (!i || *i <= 0 || *i > 1 << 20)
      return error(field, "expected a positive integer");
    return int(*i);
  }
  llvm::Expected<std::string> string(llvm::StringRef field) const {
    const llvm::json::Value *v = object_->get(field);
    if (!v)
      return error(field, "missing");
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s || s->empty())
      return error(field, "expected a non-empty string");
    return s->str();
  }
  llvm::Expected<FieldReader> object(llvm::StringRef field) const {
    const llvm::json::Value *v = object_->get(field);
    if (!v)
      return error(field, "missing");
    const Object *o = v->getAsObject();
    if (!o)
      return error(field, "expected an object");
    return FieldReader(o, qualified(field), file_);
  }
  const Object &raw() const { return *object_; }

private:
  const Object *object_;
  std::string path_;
  std::string file_;
};

#define BRAID_ASSIGN(lhs, expr)                                                \
  do {                                                                         \
    auto braidValue_ = (expr);                                                 \
    if (!braidValue_)                                                          \
      return braidValue_.takeError();                                          \
    lhs = *braidValue_;                                                        \
  } while (0)

llvm::Expected<Link> parseLink(const FieldReader &links, llvm::StringRef name) {
  Link link;
  FieldReader l(nullptr, "", "");
  BRAID_ASSIGN(l, links.object(name));
  BRAID_ASSIGN(link.kind, l.string("kind"));
  BRAID_ASSIGN(link.latencyUs, l.positive("latency_us"));
  BRAID_ASSIGN(link.busBandwidthGBs, l.positive("bus_bandwidth_gbs"));
  return link;
}

} // namespace

llvm::Expected<Target> braid::cost::parseTarget(llvm::StringRef json,
                                                llvm::StringRef fileName) {
  // llvm::json recurses per level: bound the nesting before parsing.
  if (llvm::Error deep = checkJsonNesting(json, fileName))
    return std::move(deep);
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fileName + ": not valid JSON: " +
                                       llvm::toString(parsed.takeError()));
  const Object *root = parsed->getAsObject();
  if (!root)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fileName + ": expected a JSON object");
  FieldReader top(root, "", fileName.str());
  Target t;
  BRAID_ASSIGN(t.name, top.string("name"));
  BRAID_ASSIGN(t.description, top.string("description"));
  BRAID_ASSIGN(t.nodes, top.count("nodes"));
  BRAID_ASSIGN(t.gpusPerNode, top.count("gpus_per_node"));
  // worldSize() is nodes x gpus_per_node in int: bound it like a mesh.
  std::optional<int64_t> world = ::braid::checkedMul(t.nodes, t.gpusPerNode);
  if (!world || *world > mlir::braid::kMaxWorldSize)
    return top.error("gpus_per_node",
                     "nodes " + std::to_string(t.nodes) + " x gpus_per_node " +
                         std::to_string(t.gpusPerNode) + " exceeds " +
                         std::to_string(mlir::braid::kMaxWorldSize) + " GPUs");

  FieldReader gpu(nullptr, "", "");
  BRAID_ASSIGN(gpu, top.object("gpu"));
  FieldReader rates(nullptr, "", "");
  BRAID_ASSIGN(rates, gpu.object("matmul_tflops"));
  for (const char *type : {"bf16", "fp16", "fp32"})
    BRAID_ASSIGN(t.matmulTflops[type], rates.positive(type));
  BRAID_ASSIGN(t.vectorTflops, gpu.positive("vector_tflops"));
  BRAID_ASSIGN(t.memoryBandwidthGBs, gpu.positive("memory_bandwidth_gbs"));
  BRAID_ASSIGN(t.memoryGiB, gpu.positive("memory_gib"));
  BRAID_ASSIGN(t.memoryEfficiency, gpu.fraction("memory_efficiency"));
  BRAID_ASSIGN(t.attentionEfficiency, gpu.fraction("attention_efficiency"));
  FieldReader launch(nullptr, "", "");
  BRAID_ASSIGN(launch, gpu.object("kernel_launch_us"));
  BRAID_ASSIGN(t.eagerLaunchUs, launch.positive("eager"));
  BRAID_ASSIGN(t.graphLaunchUs, launch.positive("graph"));

  // Optional: what a running collective takes from concurrent compute.
  bool contention = gpu.raw().get("collective_contention") != nullptr;
  if (contention) {
    FieldReader c(nullptr, "", "");
    BRAID_ASSIGN(c, gpu.object("collective_contention"));
    for (auto [field, out] :
         {std::pair<const char *, double *>{"sm_fraction",
                                            &t.collectiveSmFraction},
          {"memory_fraction", &t.collectiveMemoryFraction}}) {
      const llvm::json::Value *v = c.raw().get(field);
      std::optional<double> d = v ? v->getAsNumber() : std::nullopt;
      if (!d || !(*d >= 0) || !(*d < 1))
        return c.error(field, "expected a fraction in [0, 1)");
      *out = *d;
    }
  }

  // [[min_dim, efficiency], ...] with min_dim strictly ascending.
  const llvm::json::Value *table = gpu.raw().get("matmul_efficiency");
  const llvm::json::Array *points = table ? table->getAsArray() : nullptr;
  if (!points || points->empty())
    return gpu.error("matmul_efficiency",
                     "expected a non-empty array of [min_dim, efficiency]");
  for (const llvm::json::Value &p : *points) {
    const llvm::json::Array *pair = p.getAsArray();
    std::optional<double> dim, eff;
    if (pair && pair->size() == 2) {
      dim = (*pair)[0].getAsNumber();
      eff = (*pair)[1].getAsNumber();
    }
    if (!dim || !eff || !(*dim >= 1 && *dim <= 1e9) ||
        !(*eff >= 1e-6 && *eff <= 1))
      return gpu.error("matmul_efficiency",
                       "each entry must be [min_dim in [1, 1e9], efficiency "
                       "in [1e-6, 1]]");
    if (!t.matmulEfficiency.empty() &&
        *dim <= t.matmulEfficiency.back().minDim)
      return gpu.error("matmul_efficiency",
                       "min_dim must be strictly ascending");
    t.matmulEfficiency.push_back({*dim, *eff});
  }

  FieldReader links(nullptr, "", "");
  BRAID_ASSIGN(links, top.object("links"));
  BRAID_ASSIGN(t.intraNode, parseLink(links, "intra_node"));
  if (t.nodes > 1)
    BRAID_ASSIGN(t.interNode, parseLink(links, "inter_node"));

  // Every number needs its provenance.
  FieldReader sources(nullptr, "", "");
  BRAID_ASSIGN(sources, top.object("sources"));
  std::vector<std::string> required = {
      "gpu.matmul_tflops",      "gpu.vector_tflops",
      "gpu.memory_bandwidth_gbs", "gpu.memory_gib",
      "gpu.matmul_efficiency",  "gpu.memory_efficiency",
      "gpu.attention_efficiency", "gpu.kernel_launch_us",
      "links.intra_node"};
  if (t.nodes > 1)
    required.push_back("links.inter_node");
  if (contention)
    required.push_back("gpu.collective_contention");
  for (const std::string &field : required)
    BRAID_ASSIGN(t.sources[field], sources.string(field));
  return t;
}

llvm::Expected<Target> braid::cost::loadTarget(llvm::StringRef path) {
  auto buffer = readCostFile(path, "target");
  if (!buffer)
    return buffer.takeError();
  return parseTarget((*buffer)->getBuffer(), path);
}

std::vector<std::string> braid::cost::presetTargets() {
  std::vector<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(BRAID_TARGETS_DIR, ec), end;
       it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".json")
      names.push_back(llvm::sys::path::stem(it->path()).str());
  std::sort(names.begin(), names.end());
  return names;
}

llvm::Expected<Target> braid::cost::resolveTarget(llvm::StringRef nameOrPath) {
  if (nameOrPath.contains('/') || nameOrPath.ends_with(".json"))
    return loadTarget(nameOrPath);
  std::string path =
      (llvm::Twine(BRAID_TARGETS_DIR) + "/" + nameOrPath + ".json").str();
  if (!llvm::sys::fs::exists(path)) {
    std::string known;
    for (const std::string &n : presetTargets())
      known += (known.empty() ? "" : ", ") + n;
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "unknown target '" + nameOrPath +
                                       "' (presets: " + known +
                                       "; or give a .json path)");
  }
  return loadTarget(path);
}
