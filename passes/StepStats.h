//===- StepStats.h - per-rank cost summary of one step --------*- C++ -*-===//
//
// Walks an entry function and totals what one rank spends per step:
// parameter bytes, activation bytes, KV-cache state, FLOPs and the bytes
// each collective moves. Used by `braid-import --stats`.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_STEPSTATS_H
#define BRAID_PASSES_STEPSTATS_H

#include "dialect/BraidOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace mlir::braid {

struct CollectiveStats {
  int64_t count = 0;
  int64_t bytes = 0; // per rank: the bytes of the collective's sizing type
};

struct StepStats {
  std::string function;
  int64_t parameterBytes = 0;  // this rank's parameter slices
  int64_t stateBytes = 0;      // persistent state arguments (KV cache)
  int64_t activationBytes = 0; // sum of every op result (no reuse)
  int64_t matmulFlops = 0;
  int64_t attentionFlops = 0;
  int64_t otherFlops = 0; // elementwise, norms, rope, softmax (approximate)
  std::map<std::string, CollectiveStats> collectives;

  // These sums fit int64: computeStepStats checked them.
  int64_t totalFlops() const {
    return matmulFlops + attentionFlops + otherFlops;
  }
  int64_t collectiveBytes() const;
};

/// 2 x M x N x K (batch dims included), or nullopt past int64.
std::optional<int64_t> matmulFlopCount(MatmulOp op);
/// QK^T and PV FLOPs, with the cache convention below, or nullopt past
/// int64.
std::optional<int64_t> attentionFlopCount(AttentionOp op);
/// The same counts as doubles (the cost model's estimates; no overflow).
double matmulFlops(MatmulOp op);
double attentionFlops(AttentionOp op);

/// The position of an attention's first query as the cost conventions fix
/// it: a single-token step (decode) at the full cache, max_seq - 1; a step
/// of several tokens (prefill from an empty cache) at 0, or, for a chunk of
/// one (braid-decompose), where the chunk's slice of the `positions` input
/// starts, since positions count the tokens from the sequence's start.
int64_t attentionFirstPosition(AttentionOp op);

/// Attention is costed for a cache holding `pos + i + 1` keys for query i,
/// pos = attentionFirstPosition().
/// Every count is checked: a total that does not fit int64 is an error
/// naming it, never a wrapped (negative) number.
llvm::Expected<StepStats> computeStepStats(func::FuncOp func);

void printStepStats(llvm::raw_ostream &os, const StepStats &stats);

/// Every function's counts first, then the tables: a count past int64 is
/// an error, and no partial table is printed (braid-import --stats,
/// braid-compile --step-stats).
llvm::Error printModuleStepStats(llvm::raw_ostream &os, ModuleOp module);

} // namespace mlir::braid

#endif // BRAID_PASSES_STEPSTATS_H
