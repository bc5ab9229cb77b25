//===- RunInputs.h - braid-run's prompt file and checkpoint -----*- C++ -*-===//
//
// The files a run reads besides its plan: --prompt-file and --weights.
// Internal to the braid-run library (runtime/cli).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CLI_RUNINPUTS_H
#define BRAID_RUNTIME_CLI_RUNINPUTS_H

#include "runtime/PlanLoader.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/cli/CommandLine.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace braid::rt::cli {

/// At most this many bytes of prompt ids (tens of millions of tokens).
constexpr uint64_t kMaxPromptFileBytes = uint64_t(64) << 20;

/// --prompt-file: ids separated by whitespace and/or commas; `-` is stdin.
Expected<std::vector<int64_t>> readPromptFile(const std::string &path);

/// --weights: opens the checkpoint once (file, index or directory) and
/// checks it against the plan before any rank is allocated: every
/// parameter has its tensor, no tensor is left unused (a warning with
/// --allow-unused-weights, printed when `speaks`: the process that speaks
/// for the run).
Expected<std::shared_ptr<const Checkpoint>>
openCheckpoint(const Options &o, const plan::Plan &plan, bool speaks);

/// One stderr line on what was loaded and the dtype conversion that
/// happened: "braid-run: weights: 21 tensors from checkpoint 'm.safetensors',
/// bf16 checkpoint -> f32 plan".
void describeWeights(const Checkpoint &ckpt, const plan::Plan &plan);

} // namespace braid::rt::cli

#endif // BRAID_RUNTIME_CLI_RUNINPUTS_H
