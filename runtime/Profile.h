//===- Profile.h - Measured per-op times: CSV and Chrome trace --*- C++ -*-===//
//
// What a backend measured for each op of a step, written two ways:
// - a CSV `op,shape,us` of mean times per (op, operand shapes): exactly
//   the calibration file braid-estimate reads (`calibration=`), so measured
//   times replace the cost model where they match;
// - a Chrome trace (Perfetto, chrome://tracing) in the same layout as
//   braid-estimate's: one process per rank, one track per stream.
// The shape key is the op's operand shapes, `x`-joined dims, `;`-separated,
// the same key the cost model builds from the IR.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_PROFILE_H
#define BRAID_RUNTIME_PROFILE_H

#include "runtime/Status.h"
#include "runtime/plan_generated.h"

#include <string>
#include <vector>

namespace braid::rt {

struct OpTime {
  std::string function;
  int op = 0;         // index in the function
  std::string name;   // opcode name, e.g. "matmul"
  std::string shapes; // shapeKey()
  int stream = 0;
  double start = 0;   // seconds from the step's start
  double seconds = 0; // duration
};

/// The operand-shape key of `op` in `f`.
std::string shapeKey(const plan::Function &f, const plan::Op &op);

/// An OpTime for op `index` of `f` (name, shapes, stream filled in).
OpTime opTimeOf(const plan::Function &f, int index);

/// Mean time per (op name, shapes), as `op,shape,us` lines.
Status writeProfileCsv(const std::string &path,
                       const std::vector<OpTime> &times);

/// Steps one after another on the time axis; `steps` holds each step's
/// op times (rank 0's, shown on `ranks` processes as SPMD ranks run the
/// same plan).
Status writeChromeTrace(const std::string &path,
                        const std::vector<std::vector<OpTime>> &steps,
                        int ranks);

} // namespace braid::rt

#endif // BRAID_RUNTIME_PROFILE_H
