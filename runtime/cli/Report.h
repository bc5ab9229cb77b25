//===- Report.h - braid-run's trtexec-style summary --------------*- C++
//-*-===//
//
// What a run prints on stdout: the tokens of every step and the latency
// summary (host wall clock), and on the cuda backend the device times.
// Internal to the braid-run library (runtime/cli).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CLI_REPORT_H
#define BRAID_RUNTIME_CLI_REPORT_H

#include "runtime/Generation.h"
#include "runtime/cli/CommandLine.h"
#include "runtime/cli/PlanRun.h"

#include <ostream>
#include <string>
#include <vector>

namespace braid::rt::cli {

/// The `p`th percentile (nearest rank) of `v`; `v` must not be empty.
double percentile(std::vector<double> v, double p);

/// The header, prompt, (forced tokens,) every step's tokens and time, and
/// the prefill and decode latency and throughput.
void printSummary(std::ostream &os, const std::string &path, const PlanRun &run,
                  const std::vector<StepRecord> &steps, bool forced);

#ifdef BRAID_HAVE_CUDA
/// trtexec-style report: the generation's prefill device time, then the
/// timed decode steps (--iters).
void printGpuTiming(std::ostream &os, const PlanRun &run, const Options &o);
#endif

} // namespace braid::rt::cli

#endif // BRAID_RUNTIME_CLI_REPORT_H
