//===- Checks.h - braid-run's --check and --check-against -------*- C++ -*-===//
//
// Comparing a run's logits with another run of the same model (another
// plan, or the same plan on the CPU interpreter) or with a reference logits
// file, within --atol/--rtol or the defaults the plan's logits dtype gives.
// Internal to the braid-run library (runtime/cli).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CLI_CHECKS_H
#define BRAID_RUNTIME_CLI_CHECKS_H

#include "runtime/Generation.h"
#include "runtime/ReferenceLogits.h"
#include "runtime/Status.h"
#include "runtime/cli/CommandLine.h"
#include "runtime/cli/PlanRun.h"

#include <string>
#include <vector>

namespace braid::rt::cli {

/// Replays `reference`'s tokens (the run `first` produced) through the plan
/// at `path` on `backend` and compares logits: --check (the same plan on
/// the CPU interpreter) and --check-against PLAN.
Status checkAgainstPlan(const std::string &path, const std::string &backend,
                        const Options &o, const PlanRun &first,
                        const std::vector<StepRecord> &reference);

/// --check-against FILE.safetensors: compares the run's logits with the
/// reference logits file `ref` (runtime/ReferenceLogits.h).
Status checkAgainstFile(const ReferenceLogits &ref, const Options &o,
                        const PlanRun &run,
                        const std::vector<StepRecord> &steps);

/// --check on the cuda backend, when a step's logits are not finite:
/// replays `steps` (the failing one last) on the CPU interpreter with every
/// op's output checked, and says which op first produced a non-finite value.
std::string explainNonFiniteOnCpu(const Options &o,
                                  const std::vector<StepRecord> &steps);

} // namespace braid::rt::cli

#endif // BRAID_RUNTIME_CLI_CHECKS_H
