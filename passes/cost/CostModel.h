//===- CostModel.h - Per-op and per-collective time on a target -*- C++ -*-===//
//
// Prices one braid op on a Target:
// - matmul: roofline of the achievable matrix rate (peak x a shape-dependent
//   efficiency: small GEMMs are slower) against memory traffic (A + B + C);
// - attention: FLOPs (QK^T and PV, causal-aware, prefill or decode against
//   the KV cache) against bytes (q, k, v, o and the cache read);
// - memory-bound ops (norms, rope, elementwise, softmax, embedding, slice,
//   concat) by the bytes they move; reshape is a view (free);
// - collectives: alpha-beta with NCCL's bus-bandwidth factors, intra-node
//   vs inter-node links, hierarchical when a group spans nodes;
// - every kernel also costs a launch: eager stream launch or CUDA Graph
//   replay (the timeline applies it on the host side).
// Measured timings (a calibration CSV) replace the model per op and shape.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_COST_COSTMODEL_H
#define BRAID_PASSES_COST_COSTMODEL_H

#include "passes/cost/Target.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace braid::cost {

enum class OpClass { Free, Compute, Communication, Sync };
enum class LaunchMode { Eager, Graph };

enum class CollectiveKind {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  SendRecv
};

/// NCCL's bus-bandwidth factor for `n` ranks (nccl-tests PERFORMANCE.md).
double busBandwidthFactor(CollectiveKind kind, int n);

/// Where one instance of a device group sits: `local` ranks per node over
/// `nodes` nodes (nodes == 1: intra-node only).
struct GroupPlacement {
  int size = 1;
  int local = 1;
  int nodes = 1;
};
/// Group of `size` ranks with mesh stride `stride` on `target`.
GroupPlacement placeGroup(const Target &target, int size, int stride);

/// Seconds for one collective moving `bytes` (nccl-tests' "size": the
/// all_reduce buffer, the all_gather output, the reduce_scatter input).
double collectiveSeconds(const Target &target, CollectiveKind kind,
                         double bytes, const GroupPlacement &group);

/// Seconds for a GEMM of `flops` with smallest dimension `minDim` moving
/// `bytes`, at the peak rate of `elementType`.
double matmulSeconds(const Target &target, double flops, double minDim,
                     double bytes, llvm::StringRef elementType);
/// Seconds for an op that streams `bytes` through HBM.
double memorySeconds(const Target &target, double bytes);
/// Fused attention: FLOPs at the attention efficiency vs bytes.
double attentionSeconds(const Target &target, double flops, double bytes,
                        llvm::StringRef elementType);

struct OpCost {
  OpClass cls = OpClass::Free;
  double seconds = 0; // device time, launch excluded
  double flops = 0;
  double bytes = 0; // memory traffic (compute) or payload (collectives)
  bool kernel = false;
  std::string bound; // compute, memory, latency, bandwidth, calibrated, view
};

/// Measured per-op times keyed by op name and operand shapes, e.g.
/// `braid.matmul` + "1x4096x8192;1280x8192". CSV: `op,shape,us` with a
/// header line; `op` may omit the `braid.` prefix.
class Calibration {
public:
  static llvm::Expected<Calibration> load(llvm::StringRef path);
  static llvm::Expected<Calibration> parse(llvm::StringRef csv,
                                           llvm::StringRef fileName);
  std::optional<double> lookupSeconds(mlir::Operation *op) const;
  size_t size() const { return entries_.size(); }
  /// The shape key of `op`: its operand shapes, `;`-separated.
  static std::string shapeKey(mlir::Operation *op);

private:
  llvm::StringMap<double> entries_; // "op|shape" -> seconds
};

class CostModel {
public:
  /// `module` provides the device groups (their mesh layout follows
  /// declaration order, as in the plan).
  CostModel(const Target &target, LaunchMode launch, mlir::ModuleOp module,
            const Calibration *calibration = nullptr);

  OpCost cost(mlir::Operation *op) const;
  double launchSeconds() const;
  LaunchMode launchMode() const { return launch_; }
  const Target &target() const { return target_; }
  int worldSize() const { return world_; }
  /// Why this model cannot price the module: "the module spans N ranks,
  /// target 'T' has M GPUs" when its groups need more GPUs than the target
  /// has (a group placed past the last node has no link: every collective
  /// would cost infinity); "" when it can.
  std::string fitProblem() const;

private:
  const Target &target_;
  LaunchMode launch_;
  const Calibration *calibration_;
  llvm::StringMap<GroupPlacement> groups_;
  int world_ = 1;
};

} // namespace braid::cost

#endif // BRAID_PASSES_COST_COSTMODEL_H
