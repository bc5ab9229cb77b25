//===- CostModel.cpp - Per-op and per-collective time on a target ---------===//
#include "passes/cost/CostModel.h"
#include "passes/cost/CostFiles.h"

#include "dialect/BraidOps.h"
#include "passes/MemoryPlan.h"
#include "passes/StepStats.h"
#include "runtime/GroupLayout.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::braid;

namespace braid::cost {

double busBandwidthFactor(CollectiveKind kind, int n) {
  if (n <= 1)
    return 0;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2.0 * (n - 1) / n;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return double(n - 1) / n;
  case CollectiveKind::Broadcast:
  case CollectiveKind::SendRecv:
    return 1.0;
  }
  return 1.0;
}

/// The cost kind of a collective: send and recv are one point-to-point
/// transfer.
static CollectiveKind costKind(mlir::braid::CollectiveKind kind) {
  switch (kind) {
  case mlir::braid::CollectiveKind::all_reduce:
    return CollectiveKind::AllReduce;
  case mlir::braid::CollectiveKind::all_gather:
    return CollectiveKind::AllGather;
  case mlir::braid::CollectiveKind::reduce_scatter:
    return CollectiveKind::ReduceScatter;
  case mlir::braid::CollectiveKind::all_to_all:
    return CollectiveKind::AllToAll;
  case mlir::braid::CollectiveKind::broadcast:
    return CollectiveKind::Broadcast;
  case mlir::braid::CollectiveKind::send:
  case mlir::braid::CollectiveKind::recv:
    return CollectiveKind::SendRecv;
  }
  llvm_unreachable("unknown collective kind");
}

GroupPlacement placeGroup(const Target &target, int size,
                                       int stride) {
  GroupPlacement p;
  p.size = size;
  // Members are base + j*stride: as many fit in one node as the stride
  // allows (a stride of a whole node puts every member on its own node).
  int perNode = std::max(1, target.gpusPerNode / std::max(1, stride));
  p.local = std::min(size, perNode);
  p.nodes = (size + p.local - 1) / p.local;
  return p;
}

static double transfer(const Link &link, double factor, double bytes) {
  return factor * bytes / (link.busBandwidthGBs * 1e9);
}

double collectiveSeconds(const Target &target,
                                      CollectiveKind kind, double bytes,
                                      const GroupPlacement &g) {
  if (g.size <= 1)
    return 0; // a group of one moves nothing
  const Link &intra = target.intraNode, &inter = target.interNode;
  double us = 1e-6;
  if (g.nodes == 1)
    return intra.latencyUs * us +
           transfer(intra, busBandwidthFactor(kind, g.size), bytes);
  if (g.local == 1)
    return inter.latencyUs * us +
           transfer(inter, busBandwidthFactor(kind, g.size), bytes);
  // Hierarchical (NCCL's tree/ring over rails): the node's `local` GPUs
  // each carry 1/local of the inter-node traffic on their own NIC, and
  // NVLink moves the rest inside the node.
  int l = g.local, n = g.nodes;
  switch (kind) {
  case CollectiveKind::AllReduce:
    // reduce_scatter in the node, all_reduce across nodes on 1/l of the
    // data, all_gather in the node.
    return (2 * intra.latencyUs + inter.latencyUs) * us +
           2 * transfer(intra, busBandwidthFactor(CollectiveKind::AllGather, l),
                        bytes) +
           transfer(inter, busBandwidthFactor(CollectiveKind::AllReduce, n),
                    bytes / l);
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return (intra.latencyUs + inter.latencyUs) * us +
           transfer(intra, busBandwidthFactor(kind, l), bytes) +
           transfer(inter, busBandwidthFactor(kind, n), bytes / l);
  case CollectiveKind::Broadcast:
  case CollectiveKind::SendRecv:
    return (intra.latencyUs + inter.latencyUs) * us +
           transfer(inter, 1.0, bytes) +
           (kind == CollectiveKind::Broadcast ? transfer(intra, 1.0, bytes)
                                              : 0.0);
  }
  return 0;
}

double memorySeconds(const Target &target, double bytes) {
  return bytes / (target.memoryBandwidthGBs * 1e9 * target.memoryEfficiency);
}

double matmulSeconds(const Target &target, double flops,
                                  double minDim, double bytes,
                                  llvm::StringRef elementType) {
  double rate = target.peakMatmulTflops(elementType) * 1e12 *
                target.matmulEfficiencyAt(minDim);
  return std::max(flops / rate, memorySeconds(target, bytes));
}

double attentionSeconds(const Target &target, double flops,
                                     double bytes,
                                     llvm::StringRef elementType) {
  double rate = target.peakMatmulTflops(elementType) * 1e12 *
                target.attentionEfficiency;
  return std::max(flops / rate, memorySeconds(target, bytes));
}

//===----------------------------------------------------------------------===//
// Calibration
//===----------------------------------------------------------------------===//

std::string Calibration::shapeKey(Operation *op) {
  std::string key;
  for (Value v : op->getOperands()) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      continue;
    if (!key.empty())
      key += ";";
    for (auto [i, d] : llvm::enumerate(t.getShape()))
      key += (i ? "x" : "") + std::to_string(d);
  }
  return key;
}

/// Largest per-op time a calibration file may give (microseconds).
static constexpr double kMaxCalibratedUs = 1e9;

llvm::Expected<Calibration> Calibration::parse(llvm::StringRef csv,
                                               llvm::StringRef fileName) {
  Calibration c;
  llvm::SmallVector<llvm::StringRef> lines;
  csv.split(lines, '\n');
  bool header = true;
  for (auto [i, rawLine] : llvm::enumerate(lines)) {
    llvm::StringRef line = rawLine.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    // A structured binding cannot be captured before C++20 (clang).
    size_t lineNo = i + 1;
    auto fail = [&](const llvm::Twine &what) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     fileName + ":" + llvm::Twine(lineNo) +
                                         ": " + what);
    };
    llvm::SmallVector<llvm::StringRef> fields;
    line.split(fields, ',');
    if (header) {
      header = false;
      if (fields.size() != 3 || fields[0].trim() != "op" ||
          fields[1].trim() != "shape" || fields[2].trim() != "us")
        return fail("expected the header 'op,shape,us'");
      continue;
    }
    if (fields.size() != 3)
      return fail("expected 3 fields 'op,shape,us', got " +
                  llvm::Twine(fields.size()));
    double us;
    if (fields[2].trim().getAsDouble(us) || !(us >= 0) || !std::isfinite(us))
      return fail("'" + fields[2].trim() + "' is not a time in microseconds");
    // One op measured at more than 1000 s is a unit mistake, and sums of
    // such times reach infinity, which every price comparison mistakes.
    if (us > kMaxCalibratedUs)
      return fail("'" + fields[2].trim() +
                  "' microseconds is more than 1e9 (1000 s) for one op");
    std::string op = fields[0].trim().str();
    if (!llvm::StringRef(op).starts_with("braid."))
      op = "braid." + op;
    // Two times for one key: which one was meant is not for the parser
    // to guess.
    auto [it, inserted] =
        c.entries_.try_emplace(op + "|" + fields[1].trim().str(), us * 1e-6);
    if (!inserted)
      return fail("a second time for " + op + " with operand shapes '" +
                  fields[1].trim() + "'");
  }
  if (header)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fileName + ": empty calibration file");
  return c;
}

llvm::Expected<Calibration> Calibration::load(llvm::StringRef path) {
  auto buffer = readCostFile(path, "calibration");
  if (!buffer)
    return buffer.takeError();
  return parse((*buffer)->getBuffer(), path);
}

std::optional<double> Calibration::lookupSeconds(Operation *op) const {
  auto it = entries_.find(op->getName().getStringRef().str() + "|" +
                          shapeKey(op));
  if (it == entries_.end())
    return std::nullopt;
  return it->second;
}

//===----------------------------------------------------------------------===//
// CostModel
//===----------------------------------------------------------------------===//

CostModel::CostModel(const Target &target, LaunchMode launch, ModuleOp module,
                     const Calibration *calibration)
    : target_(target), launch_(launch), calibration_(calibration) {
  // The plan's mesh layout, so the cost model places groups as they run.
  std::vector<int> sizes;
  for (auto group : module.getOps<DeviceGroupOp>())
    sizes.push_back(int(group.getSize()));
  rt::MeshLayout mesh = rt::meshLayout(sizes);
  for (auto [i, group] : llvm::enumerate(module.getOps<DeviceGroupOp>()))
    groups_[group.getSymName()] = placeGroup(target, sizes[i], mesh.strides[i]);
  world_ = mesh.worldSize;
}

std::string CostModel::fitProblem() const {
  if (world_ <= target_.worldSize())
    return "";
  return "the module spans " + std::to_string(world_) + " ranks, target '" +
         target_.name + "' has " + std::to_string(target_.worldSize()) +
         " GPUs";
}

double CostModel::launchSeconds() const {
  return (launch_ == LaunchMode::Eager ? target_.eagerLaunchUs
                                       : target_.graphLaunchUs) *
         1e-6;
}

static std::string elementTypeName(Type type) {
  Type e = cast<ShapedType>(type).getElementType();
  if (e.isBF16())
    return "bf16";
  if (e.isF16())
    return "fp16";
  return "fp32";
}

static double operandBytes(Operation *op) {
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += double(tensorBytes(v.getType()));
  return bytes;
}

static double resultBytes(Operation *op) {
  double bytes = 0;
  for (Value v : op->getResults())
    bytes += double(tensorBytes(v.getType()));
  return bytes;
}

OpCost CostModel::cost(Operation *op) const {
  OpCost c;
  // No kernel: parameters (and packs of them) are resident, and a reshape
  // or contiguous slice of an arena value is placed inside its operand's
  // buffer (MemoryPlan.h, viewOf). Any other reshape or slice is a copy.
  if (isa<ParameterOp, ParameterPackOp, func::ReturnOp>(op) ||
      (op->getNumResults() == 1 && viewOf(op->getResult(0)))) {
    c.bound = "view";
    return c;
  }
  if (isa<WaitOp>(op)) {
    c.cls = OpClass::Sync; // a stream wait on the collective's event
    return c;
  }
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](CollectiveOpInterface coll) {
        c.cls = OpClass::Communication;
        c.kernel = true;
        c.bytes = double(tensorBytes(coll.getSizingType()));
        auto it = groups_.find(coll.getGroupAttr().getValue());
        GroupPlacement g = it == groups_.end() ? GroupPlacement() : it->second;
        c.seconds = collectiveSeconds(
            target_, costKind(coll.getCollectiveKind()), c.bytes, g);
        double alpha = (g.nodes == 1 ? target_.intraNode.latencyUs
                                     : target_.interNode.latencyUs) *
                       1e-6;
        c.bound = c.seconds < 2 * alpha ? "latency" : "bandwidth";
      })
      .Case<MatmulOp>([&](MatmulOp m) {
        auto a = cast<RankedTensorType>(m.getA().getType());
        auto out = cast<RankedTensorType>(m.getType());
        int64_t k = m.getTransposeA() ? a.getDimSize(a.getRank() - 2)
                                      : a.getDimSize(a.getRank() - 1);
        int64_t n = out.getDimSize(out.getRank() - 1);
        int64_t rows = out.getNumElements() / std::max<int64_t>(n, 1);
        c.cls = OpClass::Compute;
        c.flops = matmulFlops(m);
        c.bytes = operandBytes(op) + resultBytes(op);
        double minDim = double(std::min({rows, n, k}));
        c.seconds = matmulSeconds(target_, c.flops, minDim, c.bytes,
                                  elementTypeName(m.getType()));
        c.bound = c.seconds > memorySeconds(target_, c.bytes) ? "compute"
                                                              : "memory";
      })
      .Case<AttentionOp>([&](AttentionOp m) {
        c.cls = OpClass::Compute;
        c.flops = attentionFlops(m);
        c.bytes = double(tensorBytes(m.getQ().getType()) +
                         tensorBytes(m.getK().getType()) +
                         tensorBytes(m.getV().getType()) +
                         tensorBytes(m.getOutput().getType()));
        if (m.hasCache()) {
          // Keys and values read back from the cache: the filled part, by
          // the same convention as the FLOPs (full cache for decode, the
          // rows up to a prefill chunk's last token).
          auto kc = cast<RankedTensorType>(m.getKCache().getType());
          auto q = cast<RankedTensorType>(m.getQ().getType());
          double fill = std::min(
              1.0, double(attentionFirstPosition(m) + q.getDimSize(1)) /
                       double(kc.getDimSize(1)));
          // A sliding window reads at most its last W rows.
          if (std::optional<uint64_t> w = m.getSlidingWindow())
            fill = std::min(fill, double(*w) / double(kc.getDimSize(1)));
          // A decode batch bucket reads only its sequences of the cache.
          fill *= double(q.getDimSize(0)) / double(kc.getDimSize(0));
          c.bytes += 2 * fill * double(tensorBytes(kc));
        }
        c.seconds = attentionSeconds(target_, c.flops, c.bytes,
                                     elementTypeName(m.getQ().getType()));
        c.bound = c.seconds > memorySeconds(target_, c.bytes) ? "compute"
                                                              : "memory";
      })
      .Case<EmbeddingOp>([&](EmbeddingOp m) {
        // Gathers one row per id: reads as many bytes as it writes.
        c.cls = OpClass::Compute;
        c.bytes = double(tensorBytes(m.getIds().getType())) +
                  2 * double(tensorBytes(m.getType()));
        c.seconds = memorySeconds(target_, c.bytes);
        c.bound = "memory";
      })
      .Default([&](Operation *other) {
        // Norms, rope, elementwise, softmax, slice, concat: memory-bound
        // streams; a few FLOPs per element on the vector units.
        c.cls = OpClass::Compute;
        c.bytes = operandBytes(other) + resultBytes(other);
        double elements = 0;
        for (Value r : other->getResults())
          if (auto t = dyn_cast<RankedTensorType>(r.getType()))
            elements += double(t.getNumElements());
        c.flops = isa<SliceOp, ConcatOp>(other) ? 0 : 8 * elements;
        c.seconds = std::max(memorySeconds(target_, c.bytes),
                             c.flops / (target_.vectorTflops * 1e12));
        c.bound = "memory";
      });
  if (c.cls == OpClass::Compute)
    c.kernel = true;
  if (calibration_)
    if (std::optional<double> measured = calibration_->lookupSeconds(op)) {
      c.seconds = *measured;
      c.bound = "calibrated";
    }
  return c;
}

} // namespace braid::cost
