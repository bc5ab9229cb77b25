//===- RunCommand.cpp - braid-run: prefill + greedy decode over a plan ----===//
//
// The order of a run: parse, bootstrap (mpirun/srun), read the prompt file,
// load the plan, agree across processes, check what can be checked before
// anything is allocated (ranks, prompt, forced tokens, reference logits,
// checkpoint), create the run, generate, then report and check (rank 0).
//
//===----------------------------------------------------------------------===//
#include "runtime/cli/RunCommand.h"

#include "runtime/Bootstrap.h"
#include "runtime/Generation.h"
#include "runtime/PlanLoader.h"
#include "runtime/PlanText.h"
#include "runtime/Profile.h"
#include "runtime/ReferenceLogits.h"
#include "runtime/Weights.h"
#include "runtime/cli/Checks.h"
#include "runtime/cli/CommandLine.h"
#include "runtime/cli/PlanRun.h"
#include "runtime/cli/Report.h"
#include "runtime/cli/RunInputs.h"
#ifdef BRAID_HAVE_CUDA
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceSelect.h"
#include "runtime/cuda/Executor.h"

#include <cuda_runtime_api.h>
#endif
#ifdef BRAID_HAVE_MPI
#include "runtime/mpi/MpiBootstrap.h"
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>

namespace braid::rt {
namespace cli {
namespace {

/// How a failed run ends. Before the run starts, every process reaches the
/// same verdict (checkSameRun) and exits normally; once ranks meet in
/// collectives, a failing process must take the others down with it
/// (Bootstrap::abortAll) or they wait for it until the step timeout.
enum class Phase { Agreement, Collective, Reporting };

struct Failure {
  Status status;
  Phase phase = Phase::Agreement;
};

std::optional<Failure> fail(Status st, Phase phase) {
  return Failure{std::move(st), phase};
}

/// Multi-process runs: the checks every process must pass alike, as one
/// exchange so none is left waiting. `loaded` is this process's plan.
Status agreeOnRun(Bootstrap &processes, const Expected<Options> &opts,
                  const Expected<LoadedPlan> &loaded) {
  RunIdentity id;
  // A logits file is compared by rank 0 alone; a plan would be run by
  // every process.
  std::optional<Expected<CheckFileKind>> checkKind;
  if (opts && !opts->checkAgainst.empty())
    checkKind = checkFileKind(opts->checkAgainst);
  if (!opts)
    id.loadError = opts.status().message();
  else if (opts->backend != "cuda")
    id.loadError = "--backend " + opts->backend +
                   " runs every rank in one process: start it without "
                   "mpirun/srun (or use --backend cuda)";
  else if (checkKind && !*checkKind)
    id.loadError = checkKind->status().message();
  else if (checkKind && **checkKind == CheckFileKind::Plan)
    id.loadError = "--check-against runs in one process only; use --check "
                   "(or compare with a logits file: --check-against "
                   "FILE.safetensors)";
  else if (!loaded)
    id.loadError = loaded.status().message();
  if (opts) {
    id.planPath = opts->plan;
    id.weights = opts->weights.empty()
                     ? "generated weights, --seed " +
                           std::to_string(opts->seed) + " --weight-scale " +
                           amplitudeName(opts->weightScale)
                     : "checkpoint '" + opts->weights + "'";
  }
  if (loaded) {
    id.planFingerprint = planFingerprint(loaded->bytes());
    int world = loaded->root().world_size();
    if (world != processes.size())
      id.setupError = "the plan was compiled for " + std::to_string(world) +
                      " ranks; mpirun/srun started " +
                      std::to_string(processes.size()) + " processes";
  }
#ifdef BRAID_HAVE_CUDA
  // A process without a usable GPU, or with --devices naming one it does
  // not see, is known before any rank waits for it.
  if (id.loadError.empty() && id.setupError.empty()) {
    if (auto gpus = cuda::usableDeviceCount(); !gpus)
      id.setupError = gpus.status().message();
    else if (auto gpu = cuda::selectDevice(processes.localRank(), *gpus,
                                           opts->devices);
             !gpu)
      id.setupError = gpu.status().message();
  }
#endif
  return checkSameRun(processes, id);
}

/// The options, with --prompt-file read into `tokens`. Before the
/// agreement: under mpirun a prompt file one process cannot read is then
/// reported by all.
Expected<Options> optionsWithPrompt(int argc, char **argv) {
  auto opts = parseCommandLine(argc, argv);
  if (opts)
    if (Status st = checkOutputPaths(*opts); !st)
      return st;
  if (opts && !opts->promptFile.empty()) {
    auto ids = readPromptFile(opts->promptFile);
    if (!ids)
      return ids.status();
    opts->tokens = ids.take();
  }
  return opts;
}

/// The prompt and the teacher-forced steps, known before anything is
/// allocated. `shape` holds the plan's generation shape for this prompt,
/// or the error PlanRun::create reports.
Status planGeneration(const Options &o, const Expected<GenerationShape> &shape,
                      GenerationOptions &g) {
  g.decodeSteps = o.steps;
  g.allowNonFinite = o.allowNonFinite;
  if (!shape)
    return Status::ok();
  g.prompt =
      o.tokens.empty() ? syntheticPrompt(*shape, o.promptSeed) : o.tokens;
  if (o.forceTokens.empty())
    return Status::ok();
  auto forced = forcedTokensByStep(o.forceTokens, shape->batch);
  if (!forced)
    return forced.status();
  int covered = int(std::min<size_t>(forced->size(), INT_MAX));
  if (o.stepsGiven && o.steps > covered)
    return errorf("--steps ", o.steps, " needs ", o.steps,
                  " forced tokens per sequence; --force-tokens gives ", covered,
                  " (for each of the ", shape->batch, " sequences)");
  g.decodeSteps = o.stepsGiven ? o.steps : covered;
  g.forcedTokens = forced.take();
  return Status::ok();
}

/// --check-against a logits file: read and fitted to this run (prompt,
/// steps, columns) before anything runs, so a wrong file fails at once.
/// Nothing for a plan (or no --check-against).
Expected<std::optional<ReferenceLogits>>
readReference(const Options &o, const GenerationShape &shape,
              const GenerationOptions &g) {
  if (o.checkAgainst.empty())
    return std::optional<ReferenceLogits>();
  auto kind = checkFileKind(o.checkAgainst);
  if (!kind)
    return kind.status();
  if (*kind != CheckFileKind::Logits)
    return std::optional<ReferenceLogits>();
  auto ref = readReferenceLogits(o.checkAgainst);
  if (!ref)
    return ref.status();
  BRAID_RETURN_IF_ERROR(
      checkReferenceCovers(*ref, shape, g.prompt, g.decodeSteps));
  return std::optional<ReferenceLogits>(ref.take());
}

#ifdef BRAID_HAVE_CUDA
/// --iters: the last decode step replayed W untimed and N timed times
/// (collective: every process of a run replays it).
Status timeDecode(PlanRun &run, const Options &o,
                  const std::vector<StepRecord> &steps) {
  if (o.iters == 0)
    return Status::ok();
  if (steps.size() < 2)
    return errorf("--iters times the decode step: give --steps >= 1");
  StepInputs inputs =
      decodeInputs(run.shape, steps.back().inputIds,
                   run.shape.promptLength + int64_t(steps.size()) - 2);
  run.timedDecode.clear();
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    auto out = run.runAll(run.shape.decodeFunction, inputs);
    if (!out)
      return errorf("timed decode step ", i, ": ", out.status().message());
    if (i >= o.warmup)
      run.timedDecode.push_back(run.timings.back());
  }
  return Status::ok();
}
#endif

/// Rank 0's part after the run: the summary, the files asked for, the GPU
/// timing and the checks.
Status reportAndCheck(const Options &o, const PlanRun &run,
                      const std::vector<StepRecord> &steps, bool forced,
                      const std::optional<ReferenceLogits> &reference) {
  printSummary(std::cout, o.plan, run, steps, forced);
  if (!o.dumpOutputs.empty())
    BRAID_RETURN_IF_ERROR(writeLogitsFile(o.dumpOutputs, run.shape, steps));
  if (!o.profile.empty()) {
    std::vector<OpTime> all;
    for (const auto &p : run.profiles)
      all.insert(all.end(), p.begin(), p.end());
    BRAID_RETURN_IF_ERROR(writeProfileCsv(o.profile, all));
  }
  if (!o.trace.empty())
    BRAID_RETURN_IF_ERROR(
        writeChromeTrace(o.trace, run.profiles, run.plan.root().world_size()));
#ifdef BRAID_HAVE_CUDA
  if (run.gpu)
    printGpuTiming(std::cout, run, o);
#endif
  // On the CPU backend --check is the per-op finiteness check during the
  // run, plus, under --strict, a plain replay to compare with (a race the
  // strict interleaving exposes can leave finite but wrong logits); a plain
  // CPU run replayed plainly would compare the interpreter with itself.
  if (o.check && (o.backend != "cpu" || o.strict))
    BRAID_RETURN_IF_ERROR(checkAgainstPlan(o.plan, "cpu", o, run, steps));
  if (reference)
    BRAID_RETURN_IF_ERROR(checkAgainstFile(*reference, o, run, steps));
  else if (!o.checkAgainst.empty())
    BRAID_RETURN_IF_ERROR(
        checkAgainstPlan(o.checkAgainst, o.backend, o, run, steps));
  return Status::ok();
}

/// The whole run of this process; nothing on success.
std::optional<Failure> runMain(int argc, char **argv, Bootstrap *processes) {
  Expected<Options> opts = optionsWithPrompt(argc, argv);
  Expected<LoadedPlan> loaded =
      opts ? loadPlanFile(opts->plan, opts->loadOptions())
           : Expected<LoadedPlan>(opts.status());
  if (processes) {
    Status agreed = agreeOnRun(*processes, opts, loaded);
    if (!agreed)
      return fail(agreed, Phase::Agreement);
  }
  if (!opts)
    return fail(opts.status(), Phase::Agreement);
  if (!loaded)
    return fail(loaded.status(), Phase::Agreement);
  Options o = *opts;
  if (o.printPlan) {
    printPlan(std::cout, loaded->root());
    return std::nullopt;
  }

  // Before anything is allocated: a world size that disagrees with --ranks
  // (a corrupted plan, or the wrong one) is reported as such, not as the
  // memory or time its ranks would take.
  int world = loaded->root().world_size();
  if (o.ranks >= 0 && o.ranks != world)
    return fail(errorf("--ranks ", o.ranks, ": the plan was compiled for ",
                       world, " ranks"),
                Phase::Agreement);
  for (int rank : {o.testStuckRank, o.testFailingRank})
    if (rank >= world)
      return fail(errorf("--test-fault: rank ", rank,
                         " is not a rank of the plan (ranks 0 to ", world - 1,
                         ")"),
                  Phase::Agreement);

  // (A plan without a generation shape is reported by PlanRun::create.)
  auto shape = generationShape(loaded->root());
  if (shape)
    shape = shapeForRun(*shape, o.sequences, o.tokens.size());
  GenerationOptions g;
  Status planned = planGeneration(o, shape, g);
  if (planned && shape)
    planned = checkGeneration(*shape, g);
  if (!planned)
    return fail(planned, Phase::Agreement);

  bool speaks = !processes || processes->rank() == 0;
  // Rank 0 alone compares with a logits file, so it alone reads it.
  std::optional<ReferenceLogits> reference;
  if (shape && speaks) {
    auto read = readReference(o, *shape, g);
    if (!read)
      return fail(read.status(), Phase::Collective);
    reference = read.take();
  }

  if (!o.weights.empty()) {
    auto opened = openCheckpoint(o, loaded->root(), speaks);
    if (!opened)
      return fail(opened.status(), Phase::Collective);
    o.checkpoint = opened.take();
  }

  // From here on ranks of a multi-process run meet in NCCL collectives.
  auto created =
      PlanRun::create(*loaded, o.plan, o, o.backend, processes, o.strict);
  if (!created)
    return fail(created.status(), Phase::Collective);
  PlanRun *run = created->get();
  if (o.checkpoint && speaks)
    describeWeights(*o.checkpoint, loaded->root());

  // The CPU backend with --check names the op itself (checkFinite); the
  // cuda backend asks a CPU replay (a single process only: the processes
  // of an MPI run fail together at once).
  if (o.check && o.backend != "cpu" && !processes)
    g.explainNonFinite = [&o](const std::vector<StepRecord> &steps) {
      return explainNonFiniteOnCpu(o, steps);
    };
  auto steps = generate(run->shape, g, run->stepFn());
  if (!steps)
    return fail(steps.status(), Phase::Collective);
#ifdef BRAID_HAVE_CUDA
  if (run->gpu) {
    Status timed = timeDecode(*run, o, *steps);
    if (!timed)
      return fail(timed, Phase::Collective);
  }
#endif

  // Reports and checks: rank 0 alone (others have nothing left to wait for).
  if (!speaks)
    return std::nullopt;
  Status st =
      reportAndCheck(o, *run, *steps, !g.forcedTokens.empty(), reference);
  if (!st)
    return fail(st, Phase::Reporting);
  return std::nullopt;
}

#if defined(BRAID_HAVE_CUDA) && defined(BRAID_HAVE_MPI)
/// Under mpirun/srun, makes this process's GPU current before MPI_Init: a
/// CUDA-aware MPI (UCX, MVAPICH2) binds to the current device when it
/// initializes, and with none chosen every process of a node would bind to
/// (and hold a context on) GPU 0. MPI's local rank is not known yet, so
/// the launcher's is used, with the executor's rule (DeviceSelect.h).
/// Anything wrong here (no GPU, a bad --devices, bad flags) is left for
/// after the bootstrap, where every process reports it alike (agreeOnRun).
void selectDeviceBeforeMpi(const Expected<Options> &o) {
  if (!mpi::launchedByMpiLauncher())
    return;
  std::optional<int> localRank = mpi::launcherLocalRank();
  if (!localRank)
    return;
  if (!o || o->backend != "cuda")
    return;
  auto gpus = cuda::usableDeviceCount();
  if (!gpus)
    return;
  if (auto gpu = cuda::selectDevice(*localRank, *gpus, o->devices); gpu)
    if (cudaSetDevice(*gpu) != cudaSuccess)
      (void)cudaGetLastError(); // reported when the executor sets it again
}
#endif

/// The MPI bootstrap when a launcher started this process as one of
/// several; null for a single process.
Expected<std::unique_ptr<Bootstrap>> bootstrapProcesses(int *argc,
                                                        char ***argv) {
#ifdef BRAID_HAVE_MPI
  if (!mpi::launchedByMpiLauncher())
    return std::unique_ptr<Bootstrap>();
  auto b = mpi::initialize(argc, argv);
  if (!b)
    return errorf("MPI bootstrap: ", b.status().message());
  if ((*b)->size() == 1) // one process: the same as no launcher
    return std::unique_ptr<Bootstrap>();
  return b;
#else
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char *n = std::getenv(var); n && std::atoi(n) > 1)
      return errorf("started as one of ", n, " processes (", var,
                    "), but this braid-run was built without MPI: run one "
                    "process (one thread per GPU) instead");
  return std::unique_ptr<Bootstrap>();
#endif
}

/// `braid-run --probe-gpu`: before MPI or anything else is set up.
int probeGpu() {
#ifdef BRAID_HAVE_CUDA
  auto gpus = cuda::describeGpus();
  if (!gpus) {
    std::cerr << "braid-run: " << gpus.status().message() << "\n";
    return 1;
  }
  std::cout << *gpus;
  return 0;
#else
  std::cerr << "braid-run: no usable CUDA device: this braid-run was built "
               "without CUDA\n";
  return 1;
#endif
}

/// runMain, with rank 0 speaking for a multi-process run (the others print
/// only errors) and an exception escaping the runtime turned into a
/// failure: the runtime reports errors as Status, but out of memory in a
/// container or a library's throw must still be an error message and exit
/// 1, never std::terminate.
std::optional<Failure> runQuietRanks(int argc, char **argv, Bootstrap *p) {
  std::ofstream quiet;
  std::streambuf *saved = std::cout.rdbuf();
  if (p && p->rank() != 0)
    std::cout.rdbuf(quiet.rdbuf());
  std::optional<Failure> failure;
  try {
    failure = runMain(argc, argv, p);
  } catch (const std::exception &e) {
    failure =
        Failure{errorf("unexpected failure: ", e.what()), Phase::Collective};
  }
  std::cout.flush();
  std::cout.rdbuf(saved);
  return failure;
}

/// Prints `failure` (rank 0 alone for an agreement, which every process
/// reached alike) and, once ranks met in collectives, ends every process
/// of the run. The exit code.
int reportFailure(const Failure &failure, Bootstrap *p) {
  bool report = !p || failure.phase != Phase::Agreement || p->rank() == 0;
  if (report) {
    // One write: lines of processes sharing the terminal do not interleave.
    std::string line = "braid-run: error: " +
                       (p && failure.phase != Phase::Agreement
                            ? "rank " + std::to_string(p->rank()) + ": "
                            : std::string()) +
                       failure.status.message() + "\n";
    std::cerr.write(line.data(), std::streamsize(line.size()));
  }
  if (p && failure.phase == Phase::Collective) {
    std::cerr.flush();
    // mpirun forwards output asynchronously and drops what is in flight
    // when it kills the job: give the message above time to arrive.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    p->abortAll(1);
  }
  return 1;
}

} // namespace
} // namespace cli

int runCommand(int argc, char **argv) {
  using namespace cli;
  if (argc == 2 && std::string_view(argv[1]) == "--probe-gpu")
    return probeGpu();
  // --help, and (CUDA-aware MPI) the device, before MPI is set up.
  Expected<Options> early = parseCommandLine(argc, argv);
  if (early && early->help) {
    std::cout << commandLineHelp();
    return 0;
  }
#if defined(BRAID_HAVE_CUDA) && defined(BRAID_HAVE_MPI)
  selectDeviceBeforeMpi(early); // CUDA-aware MPI binds at MPI_Init
#endif
  auto processes = bootstrapProcesses(&argc, &argv);
  if (!processes) {
    std::cerr << "braid-run: error: " + processes.status().message() + "\n";
    return 1;
  }
  Bootstrap *p = processes->get();
  std::optional<Failure> failure = runQuietRanks(argc, argv, p);
  if (!failure)
    return 0;
  return reportFailure(*failure, p);
}

} // namespace braid::rt
