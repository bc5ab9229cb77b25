//===- CommandLine.h - braid-run's options and their parser -----*- C++ -*-===//
//
// What braid-run is asked to do, read from its command line with CLI11.
// CLI11 knows the options, their groups and their help text, splits
// `--flag=value` and finds unknown flags and missing values; each value is
// then converted by Braid's own rules, in command-line order, so a bad
// value is reported with the flag it came with ("option --steps: 'two' is
// not a valid number"), and the checks that span flags follow.
//
// Grammar: `--flag value` or `--flag=value`; the value is the next argument
// whatever it looks like (`--steps -1`); a flag given twice keeps its last
// value, except the lists (--tokens, --force-tokens, --devices), which
// append. `--eager` and `--graph`: the last one given wins.
//
// CLI11 stays inside CommandLine.cpp: this header is plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CLI_COMMANDLINE_H
#define BRAID_RUNTIME_CLI_COMMANDLINE_H

#include "runtime/PlanLoader.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/WeightFormula.h"
#include "runtime/cuda/AttentionChoice.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid::rt::cli {

/// braid-run's options. The defaults here are the ones --help prints.
struct Options {
  /// --strict-seed when not given.
  static constexpr uint64_t kDefaultStrictSeed = 1;

  /// --help was given: print commandLineHelp() and exit 0 (nothing else of
  /// the command line was checked).
  bool help = false;

  std::string plan;
  std::string backend = "cpu";
  int ranks = -1; // -1: not given (the plan's world size)
  int steps = 4;
  bool stepsGiven = false;
  int64_t sequences = 0; // --sequences; 0: the plan's batch
  std::vector<int64_t> tokens;
  std::string promptFile;
  std::vector<int64_t> forceTokens;
  uint64_t promptSeed = 0;
  uint64_t seed = 0;
  /// --weight-scale flat or fan-in (runtime/WeightFormula.h).
  weights::Amplitude weightScale = weights::Amplitude::Flat;
  std::string weights;
  bool allowUnusedWeights = false;
  /// --weights, opened once (each shard mapped once) and shared by every
  /// PlanRun of this process (--check, --check-against PLAN). Set by the
  /// run, not by the parser.
  std::shared_ptr<const Checkpoint> checkpoint;
  std::string dumpOutputs;
  std::string checkAgainst;
  std::optional<double> atol, rtol;
  bool printPlan = false;
  bool graph = true;
  int iters = 0, warmup = 3;
  bool check = false;
  bool allowNonFinite = false;
  double timeout = 120;
  std::string profile, trace;
  std::vector<int> devices;
  /// Tests only: every rank on one GPU with the test communicator; with
  /// --test-fault, a rank that skips its collectives or fails its step.
  bool singleGpuTest = false;
  int testStuckRank = -1, testFailingRank = -1;
  /// cuda: which attention kernel (ExecutorOptions::attentionKernel).
  cuda::AttentionKernel attentionKernel = cuda::AttentionKernel::Auto;
  /// cuda: ExecutorOptions::fuseCacheWrite.
  bool fuseCacheWrite = false;
  /// cuda: ExecutorOptions::gemmAutotune (0 or 1: the heuristic's choice).
  int gemmAutotune = 0;
  bool strict = false;
  std::optional<uint64_t> strictSeed;
  bool verifySchedule = true;

  LoadOptions loadOptions() const {
    LoadOptions lo;
    lo.checkSchedule = verifySchedule;
    return lo;
  }
};

/// Parses braid-run's arguments (`argv[0]` is the program): the options,
/// or the first error, worded for the user ("unknown option '--x' (see
/// --help)", "option --steps needs a value", "--timeout must be in (0, 1e6]
/// seconds, got 0", ...). `--help` gives Options with `help` set. Pure: it
/// prints nothing and reads no file.
Expected<Options> parseCommandLine(int argc, const char *const *argv);

/// The --help text: every option with its value, default and meaning,
/// grouped (plan and run, prompt and generation, weights, checking, CUDA,
/// profiling).
std::string commandLineHelp();

/// The files braid-run writes (--dump-outputs, --profile, --trace) must not
/// be a file it reads (the plan, --weights, --check-against,
/// --prompt-file) nor each other: they are written after the run, while
/// --check may still read a checkpoint it maps (a SIGBUS when the file was
/// truncated under it), and a plan overwritten by its own outputs is lost.
/// Compared by path and, for files that exist, by identity (a link or
/// another spelling of the path).
Status checkOutputPaths(const Options &o);

} // namespace braid::rt::cli

#endif // BRAID_RUNTIME_CLI_COMMANDLINE_H
