//===- Target.h - Hardware target descriptions ------------------*- C++ -*-===//
//
// A target describes a machine the cost model prices ops on: per-GPU matrix
// and memory rates with their achievable efficiencies, kernel launch cost
// (eager vs CUDA Graph replay), and an alpha-beta model per link class
// (intra-node NVLink/NVSwitch or PCIe, inter-node InfiniBand). Targets are
// JSON files (targets/*.json); every numeric field must name its published
// source in the file's "sources" object, so a number never travels without
// its provenance. docs/cost-model.md documents the fields.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_COST_TARGET_H
#define BRAID_PASSES_COST_TARGET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace braid::cost {

/// Achievable fraction of peak matrix rate for GEMMs whose smallest
/// dimension is `minDim` (interpolated in log2(minDim) between points).
struct EfficiencyPoint {
  double minDim = 1;
  double efficiency = 1;
};

/// alpha-beta: t = latency + bytes * factor / busBandwidth, where factor is
/// NCCL's bus-bandwidth factor of the collective (nccl-tests'
/// PERFORMANCE.md): all_reduce 2(n-1)/n, all_gather / reduce_scatter /
/// all_to_all (n-1)/n, broadcast and send/recv 1.
struct Link {
  std::string kind;           // "NVLink4/NVSwitch", "PCIe Gen5", ...
  double latencyUs = 0;       // per collective call
  double busBandwidthGBs = 0; // NCCL bus bandwidth at large messages, GB/s
};

struct Target {
  std::string name;
  std::string description;
  int nodes = 1;
  int gpusPerNode = 8;
  // Peak dense matrix rate in TFLOP/s per element type ("bf16", "fp16",
  // "fp32" (TF32 tensor cores)).
  std::map<std::string, double> matmulTflops;
  double vectorTflops = 0;      // non-tensor fp32 rate (elementwise math)
  double memoryBandwidthGBs = 0; // HBM, GB/s
  double memoryGiB = 0;
  std::vector<EfficiencyPoint> matmulEfficiency; // ascending minDim
  double memoryEfficiency = 1;    // achievable fraction of HBM bandwidth
  double attentionEfficiency = 1; // fused attention vs peak matrix rate
  double eagerLaunchUs = 0;       // per kernel, stream launch
  double graphLaunchUs = 0;       // per kernel node, CUDA Graph replay
  // Contention: while a collective runs, NCCL's kernels hold this fraction
  // of the SMs and of the HBM bandwidth, so a compute-bound op overlapping
  // it runs at (1 - collectiveSmFraction) of its rate and a memory-bound
  // one at (1 - collectiveMemoryFraction). 0 (absent): no contention.
  double collectiveSmFraction = 0;
  double collectiveMemoryFraction = 0;
  Link intraNode;
  Link interNode; // only meaningful when nodes > 1
  std::map<std::string, std::string> sources; // field path -> citation

  int worldSize() const { return nodes * gpusPerNode; }
  /// Matmul efficiency for a GEMM with smallest dimension `minDim`.
  double matmulEfficiencyAt(double minDim) const;
  /// Peak matrix TFLOP/s for `elementType` ("bf16", ...); falls back to
  /// bf16 for unknown types.
  double peakMatmulTflops(llvm::StringRef elementType) const;
};

/// Parses a target; errors name the file and the field ("gpu.memory_
/// bandwidth_gbs: expected a positive number").
llvm::Expected<Target> parseTarget(llvm::StringRef json,
                                   llvm::StringRef fileName);
llvm::Expected<Target> loadTarget(llvm::StringRef path);

/// `nameOrPath` is a file (contains '/' or ends in .json) or the name of a
/// bundled preset in targets/ (e.g. "h100-sxm-x8").
llvm::Expected<Target> resolveTarget(llvm::StringRef nameOrPath);

/// Names of the bundled presets.
std::vector<std::string> presetTargets();

} // namespace braid::cost

#endif // BRAID_PASSES_COST_TARGET_H
