//===- braid-run.cpp - run a plan: prefill + greedy decode ----------------===//
//
// Links only the runtime (no MLIR, no LLVM): this is the binary that ships
// to the machines that run plans.
//
//===----------------------------------------------------------------------===//
#include "runtime/Bootstrap.h"
#include "runtime/Generation.h"
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"
#include "runtime/PlanText.h"
#include "runtime/ReferenceLogits.h"
#include "runtime/Safetensors.h"
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
#include <cctype>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

using namespace braid::rt;
namespace plan = braid::plan;

namespace {

constexpr const char *kUsage = R"(usage: braid-run PLAN.bplan [options]

Runs the plan's prefill on a prompt, then greedy decode steps, and prints
the tokens and a latency summary.

  --backend cpu            reference interpreter, ranks as threads (default)
  --backend cuda           CUDA executor (cuBLASLt, NCCL): one thread per
                           GPU, or under mpirun/srun one process per GPU
                           (MPI bootstraps rank, size and the NCCL ids;
                           every rank must load the same plan)
  --devices a,b,...        cuda: GPU of each rank (under mpirun: of each
                           local rank); default 0, 1, ... (under mpirun:
                           the local rank modulo the GPUs each process
                           sees, so GPU 0 with CUDA_VISIBLE_DEVICES set per
                           rank)
  --eager | --graph        cuda: launch op by op, or replay CUDA Graphs
                           (default --graph)
  --iters N, --warmup W    cuda: after generation, time N decode steps after
                           W untimed ones (default 0 and 3)
  --check                  cuda: replay the same tokens on the CPU
                           interpreter and compare logits (as
                           --check-against); cpu: check that every op's
                           output is finite. Either way, non-finite logits
                           name the first op whose output is not finite
  --allow-non-finite       accept logits that hold NaN or infinity (by
                           default a step whose logits are not finite is
                           an error: their greedy token means nothing)
  --timeout S              a step (cuda) or one collective (cpu) that
                           takes longer aborts the run: a stuck collective
                           (default 120, at most 1e6)
  --profile FILE.csv       measured mean time per (op, operand shapes) as
                           `op,shape,us`: braid-estimate's calibration file
  --trace FILE.json        measured per-op Chrome trace of every step
                           (cuda: both need --eager; times from CUDA events)
  --ranks N                ranks to run (must equal the plan's world size;
                           checked before anything is allocated). The cpu
                           backend runs at most 1024 ranks and refuses a
                           plan whose ranks need more host memory than the
                           machine or ulimit allows
  --steps K                decode steps after prefill (default 4; with
                           --force-tokens, the number of forced tokens)
  --tokens a,b,...         prompt ids, batch x prompt length of them,
                           sequence after sequence (default: synthetic,
                           from --prompt-seed)
  --prompt-file FILE       the prompt ids from FILE instead (separated by
                           whitespace and/or commas; `-` reads stdin)
  --prompt-seed S          seed of the synthetic prompt (default 0)
  --force-tokens a,b,...   teacher forcing: decode step k feeds token k
                           instead of the greedy one. Laid out like
                           --tokens: batch x N ids, sequence 0's N tokens,
                           then sequence 1's, ...; --steps must be <= N
  --seed S                 seed of the generated weights (default 0)
  --weights PATH           Hugging Face safetensors checkpoint instead: a
                           .safetensors file, a sharded checkpoint's
                           index (model.safetensors.index.json, shards
                           next to it), or a directory holding one of
                           model.safetensors and
                           model.safetensors.index.json (not both).
                           BF16/F16/F32 tensors load into any plan dtype;
                           each rank reads only its slices
  --allow-unused-weights   checkpoint tensors the plan does not use are a
                           warning, not an error (checkpoints with extra
                           heads; rotary inv_freq and GPT-2 attn.bias
                           buffers are always skipped)
  --dump-outputs FILE      write input_ids ([B, S] i64) and every step's
                           logits ([B, T, V] f32; T = logit positions of
                           the step) as safetensors (step0.logits =
                           prefill, stepK.logits = decode K)
  --check-against PLAN     run PLAN on the same tokens (same model, other
                           parallelism) and compare logits
  --check-against FILE.safetensors
                           compare with reference logits: stepK.logits
                           [B, T, V'] (F32, BF16 or F16) as --dump-outputs
                           writes them, optional columns [V'] (I32/I64,
                           strictly increasing vocab ids: only those
                           columns are compared) and optional input_ids
                           [B, S] (must equal the prompt). Every step run
                           must be in the file (lower --steps otherwise).
                           Plan or file is told by content
  --strict                 cpu: strict interpreter for PLAN.bplan (not for
                           the --check-against reference): streams run in a
                           random order that respects only the plan's
                           events, async collectives run at their wait, and
                           undefined buffers (async payloads before the
                           collective, dead buffers) are poisoned with NaN,
                           so a missing event or an early buffer reuse
                           changes the numbers; a correct plan gives the
                           same bits as without --strict
  --strict-seed N          seed of --strict's stream order (default 1)
  --no-verify-schedule     UNSAFE: load plans without checking that their
                           streams, events and waits order every
                           cross-stream access, buffer reuse and
                           collective (to debug a bad plan, e.g. with
                           --strict); such a plan may compute garbage or
                           hang on a GPU
  --atol X, --rtol X       tolerance for --check-against: |a-b| <= atol +
                           rtol*|b| (default for fp32 logits: atol = 1e-5 x
                           max|reference logit|, rtol = 1e-4; for bf16/fp16:
                           2e-2 x max|reference logit| and 2e-2; the plan's
                           logits dtype decides)
  --print-plan             print the plan as text and exit

  braid-run --probe-gpu    print the CUDA driver and runtime versions and
                           the GPUs, exit 0; or why no GPU can be used,
                           exit 1 (the test suites' one GPU check)
)";

struct Options {
  std::string plan;
  std::string backend = "cpu";
  int ranks = -1;
  int steps = 4;
  bool stepsGiven = false;
  std::vector<int64_t> tokens;
  std::string promptFile;
  std::vector<int64_t> forceTokens;
  uint64_t promptSeed = 0;
  uint64_t seed = 0;
  std::string weights;
  bool allowUnusedWeights = false;
  /// --weights, opened once (each shard mapped once) and shared by every
  /// PlanRun of this process (--check, --check-against PLAN).
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
  bool strict = false;
  std::optional<uint64_t> strictSeed;
  bool verifySchedule = true;

  LoadOptions loadOptions() const {
    LoadOptions lo;
    lo.checkSchedule = verifySchedule;
    return lo;
  }
};

template <typename T> bool parseNumber(std::string_view s, T &out) {
  if (s.empty())
    return false;
  if constexpr (std::is_floating_point_v<T>) {
    std::istringstream is{std::string(s)};
    is >> out;
    return !is.fail() && is.eof();
  } else {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  }
}

Expected<Options> parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    std::string_view value;
    std::string_view flag = a;
    if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != a.npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
    }
    auto needValue = [&]() -> Expected<std::string_view> {
      if (!value.empty())
        return value;
      if (i + 1 >= argc)
        return errorf("option ", flag, " needs a value");
      return std::string_view(argv[++i]);
    };
    auto number = [&](auto &out) -> Status {
      auto v = needValue();
      if (!v)
        return v.status();
      if (!parseNumber(*v, out))
        return errorf("option ", flag, ": '", *v, "' is not a valid number");
      return Status::ok();
    };
    auto text = [&](std::string &out) -> Status {
      auto v = needValue();
      if (!v)
        return v.status();
      out = std::string(*v);
      return Status::ok();
    };
    // a,b,c: every item a number >= `min`, named `what` in errors.
    auto numberList = [&](auto &out, const char *what, auto min) -> Status {
      std::string list;
      BRAID_RETURN_IF_ERROR(text(list));
      std::istringstream is(list);
      for (std::string item; std::getline(is, item, ',');) {
        typename std::decay_t<decltype(out)>::value_type x{};
        if (!parseNumber(std::string_view(item), x) || x < min)
          return errorf(flag, ": '", item, "' is not ", what);
        out.push_back(x);
      }
      return Status::ok();
    };
    Status st;
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (flag == "--backend") {
      st = text(o.backend);
    } else if (flag == "--ranks") {
      st = number(o.ranks);
    } else if (flag == "--steps") {
      st = number(o.steps);
      o.stepsGiven = true;
    } else if (flag == "--prompt-seed") {
      st = number(o.promptSeed);
    } else if (flag == "--seed") {
      st = number(o.seed);
    } else if (flag == "--weights") {
      st = text(o.weights);
    } else if (flag == "--allow-unused-weights") {
      o.allowUnusedWeights = true;
    } else if (flag == "--prompt-file") {
      st = text(o.promptFile);
    } else if (flag == "--dump-outputs") {
      st = text(o.dumpOutputs);
    } else if (flag == "--check-against") {
      st = text(o.checkAgainst);
    } else if (flag == "--atol" || flag == "--rtol") {
      double x = 0;
      st = number(x);
      (flag == "--atol" ? o.atol : o.rtol) = x;
    } else if (flag == "--print-plan") {
      o.printPlan = true;
    } else if (flag == "--eager" || flag == "--graph") {
      o.graph = flag == "--graph";
    } else if (flag == "--check") {
      o.check = true;
    } else if (flag == "--allow-non-finite") {
      o.allowNonFinite = true;
    } else if (flag == "--strict") {
      o.strict = true;
    } else if (flag == "--strict-seed") {
      uint64_t seed = 0;
      st = number(seed);
      o.strictSeed = seed;
    } else if (flag == "--no-verify-schedule") {
      o.verifySchedule = false;
    } else if (flag == "--iters") {
      st = number(o.iters);
    } else if (flag == "--warmup") {
      st = number(o.warmup);
    } else if (flag == "--timeout") {
      st = number(o.timeout);
    } else if (flag == "--profile") {
      st = text(o.profile);
    } else if (flag == "--trace") {
      st = text(o.trace);
    } else if (flag == "--devices") {
      st = numberList(o.devices, "a GPU index", 0);
      if (st && o.devices.empty())
        st = errorf("--devices needs at least one GPU index");
    } else if (flag == "--tokens") {
      st = numberList(o.tokens, "a token id",
                      std::numeric_limits<int64_t>::min());
    } else if (flag == "--force-tokens") {
      st = numberList(o.forceTokens, "a token id",
                      std::numeric_limits<int64_t>::min());
      if (st && o.forceTokens.empty())
        st = errorf("--force-tokens needs at least one token id");
    } else if (a.rfind("-", 0) == 0) {
      return errorf("unknown option '", a, "' (see --help)");
    } else if (o.plan.empty()) {
      o.plan = std::string(a);
    } else {
      return errorf("unexpected argument '", a, "' (one plan file only)");
    }
    if (!st)
      return st;
  }
  if (o.plan.empty())
    return errorf("no plan file given (see --help)");
#ifndef BRAID_HAVE_CUDA
  if (o.backend == "cuda")
    return errorf("--backend cuda: this braid-run was built without the CUDA "
                  "executor");
#endif
  if (o.backend != "cpu" && o.backend != "cuda")
    return errorf("--backend '", o.backend, "' is unknown; use cpu or cuda");
  if (o.backend != "cuda" && (o.iters || !o.graph || !o.devices.empty()))
    return errorf("--iters, --eager and --devices need --backend cuda");
  if (o.strict && o.backend != "cpu")
    return errorf("--strict runs the CPU interpreter: use --backend cpu");
  if (o.strictSeed && !o.strict)
    return errorf("--strict-seed needs --strict");
  if (o.backend == "cuda" && o.graph && (!o.profile.empty() || !o.trace.empty()))
    return errorf("--profile and --trace time each op: add --eager (a CUDA "
                  "Graph replays as one launch)");
  if (o.iters < 0 || o.warmup < 0)
    return errorf("--iters and --warmup must be >= 0");
  if (!(o.timeout > 0 && o.timeout <= 1e6))
    return errorf("--timeout must be in (0, 1e6] seconds, got ", o.timeout);
  if (o.steps < 0)
    return errorf("--steps must be >= 0, got ", o.steps);
  if (!o.tokens.empty() && !o.promptFile.empty())
    return errorf("--tokens and --prompt-file both give the prompt: use one");
  if ((o.atol && !(*o.atol >= 0)) || (o.rtol && !(*o.rtol >= 0)))
    return errorf("--atol and --rtol must be >= 0");
  return o;
}

/// A long checkpoint load's progress: one stderr line, rewritten in place,
/// once the load has taken more than a second, and only when stderr is a
/// terminal (logs and tests stay clean). Erased when the load ends.
class LoadProgress {
public:
  LoadProgress(const plan::Plan &plan, size_t ranks)
      : enabled_(::isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {
    if (plan.parameters())
      for (const plan::Parameter *param : *plan.parameters()) {
        totalTensors_ += int64_t(ranks);
        Shape local(param->local_shape()->begin(), param->local_shape()->end());
        totalBytes_ += double(ranks) * double(numElements(local)) *
                       double(dtypeSize(param->dtype()));
      }
  }
  LoadProgress(const LoadProgress &) = delete;
  LoadProgress &operator=(const LoadProgress &) = delete;
  ~LoadProgress() {
    if (shown_) // blank the line; what follows starts at its beginning
      std::cerr << "\r" << std::string(width_, ' ') << "\r" << std::flush;
  }

  /// One slice of `bytes` (in the plan's dtype) is loaded.
  void add(size_t bytes) {
    ++tensors_;
    bytes_ += double(bytes);
    if (!enabled_)
      return;
    auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) ||
        (shown_ && now - last_ < std::chrono::milliseconds(100) &&
         tensors_ != totalTensors_))
      return;
    last_ = now;
    std::ostringstream line;
    line << std::fixed << std::setprecision(2)
         << "braid-run: loading weights: " << tensors_ << "/" << totalTensors_
         << " tensors, " << bytes_ / 1e9 << "/" << totalBytes_ / 1e9 << " GB";
    std::string text = line.str();
    width_ = std::max(width_, text.size());
    std::cerr << "\r" << text << std::flush;
    shown_ = true;
  }

private:
  bool enabled_;
  bool shown_ = false;
  size_t width_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
  int64_t tensors_ = 0, totalTensors_ = 0;
  double bytes_ = 0, totalBytes_ = 0;
};

/// A ready-to-step run of one plan on one backend.
struct PlanRun {
  LoadedPlan plan;
  GenerationShape shape;
  std::string backend;
  bool strict = false;
  uint64_t strictSeed = 1;
  std::unique_ptr<ThreadedRunner> cpu;
  bool profiling = false;
  std::vector<std::vector<OpTime>> profiles; // one per step, rank 0
#ifdef BRAID_HAVE_CUDA
  std::unique_ptr<cuda::CudaRunner> gpu;
  std::vector<cuda::StepTiming> timings; // one per step run
  std::vector<cuda::StepTiming> timedDecode; // --iters
#endif

  /// A reference run (--check, --check-against): never strict.
  static Expected<std::unique_ptr<PlanRun>>
  create(const std::string &path, const Options &o,
         const std::string &backend) {
    auto plan = loadPlanFile(path, o.loadOptions());
    if (!plan)
      return plan.status();
    return create(*plan, path, o, backend, nullptr, /*strict=*/false);
  }

  /// `plan`, loaded from `path`; `processes`: this process runs one rank of
  /// a multi-process run; `strict`: the CPU interpreter's strict mode.
  static Expected<std::unique_ptr<PlanRun>>
  create(const LoadedPlan &plan, const std::string &path, const Options &o,
         const std::string &backend, Bootstrap *processes, bool strict) {
    auto shape = generationShape(plan.root());
    if (!shape)
      return errorf(path, ": ", shape.status().message());
    // With prefill buckets, the prompt's length picks the bucket.
    if (!o.tokens.empty()) {
      shape = shapeForPrompt(*shape, o.tokens.size());
      if (!shape)
        return errorf(path, ": ", shape.status().message());
    }
    auto run = std::make_unique<PlanRun>();
    run->plan = plan;
    run->shape = *shape;
    run->backend = backend;
    run->profiling = !o.profile.empty() || !o.trace.empty();
    if (backend == "cpu") {
      RunnerOptions ro;
      ro.seed = o.seed;
      ro.collectiveTimeout = std::chrono::milliseconds(
          std::max<int64_t>(1, int64_t(o.timeout * 1000)));
      auto runner = ThreadedRunner::create(plan, ro);
      if (!runner)
        return errorf(path, ": ", runner.status().message());
      run->cpu = runner.take();
      run->cpu->rank(0).setProfiling(run->profiling);
      run->strict = strict;
      run->strictSeed = o.strictSeed.value_or(1);
      RunOptions options;
      options.strict = strict;
      options.strictSeed = run->strictSeed;
      // --check on the CPU backend: every op's output must be finite.
      options.checkFinite = o.check;
      run->cpu->setRunOptions(options);
    }
#ifdef BRAID_HAVE_CUDA
    if (backend == "cuda") {
      cuda::ExecutorOptions eo;
      eo.graph = o.graph;
      eo.seed = o.seed;
      eo.stepTimeoutSeconds = o.timeout;
      eo.profile = run->profiling;
      eo.devices = o.devices;
      auto runner = cuda::CudaRunner::create(plan, eo, processes);
      if (!runner)
        return errorf(path, ": ", runner.status().message());
      run->gpu = runner.take();
    }
#endif
    if (o.checkpoint) {
      std::vector<int> held;
#ifdef BRAID_HAVE_CUDA
      if (run->gpu)
        held = run->gpu->heldRanks();
#endif
      if (held.empty()) // the CPU interpreter: every rank
        for (int r = 0; r < plan.root().world_size(); ++r)
          held.push_back(r);
      CheckpointLoadOptions lo;
      lo.allowUnusedWeights = o.allowUnusedWeights;
      LoadProgress progress(plan.root(), held.size());
      for (int r : held)
        BRAID_RETURN_IF_ERROR(loadCheckpointParameters(
            [&](const std::string &name, HostTensor local) -> Status {
              progress.add(local.bytes.size());
#ifdef BRAID_HAVE_CUDA
              if (run->gpu)
                return run->gpu->setParameter(r, name, local);
#endif
              return run->cpu->rank(r).setParameter(name, std::move(local));
            },
            plan, r, *o.checkpoint, lo));
    }
    return run;
  }

  Expected<std::vector<std::map<std::string, HostTensor>>>
  runAll(const std::string &function, const StepInputs &inputs) {
#ifdef BRAID_HAVE_CUDA
    if (gpu) {
      auto outs = gpu->run(function, {inputs});
      if (outs)
        timings.push_back(gpu->lastTiming());
      if (outs && profiling)
        profiles.push_back(gpu->lastProfile());
      return outs;
    }
#endif
    auto outs = cpu->run(function, {inputs});
    if (outs && profiling)
      profiles.push_back(cpu->rank(0).lastProfile());
    return outs;
  }

  StepFn stepFn() {
    return [this](const std::string &function, const StepInputs &inputs)
               -> Expected<std::map<std::string, HostTensor>> {
      auto outs = runAll(function, inputs);
      if (!outs)
        return outs.status();
      // Every rank must hold the same (gathered) logits.
      for (size_t r = 1; r < outs->size(); ++r)
        if ((*outs)[r].at("logits").bytes != (*outs)[0].at("logits").bytes)
          return errorf("rank ", r,
                        " returned different logits than rank 0 (are the "
                        "logits left vocabulary-sharded?)");
      return (*outs)[0];
    };
  }
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = size_t(std::ceil(p / 100.0 * double(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

void printTokens(std::ostream &os, const std::vector<int64_t> &ids,
                 int64_t batch) {
  int64_t per = int64_t(ids.size()) / batch;
  for (int64_t b = 0; b < batch; ++b) {
    os << (b ? " | " : "");
    for (int64_t t = 0; t < per; ++t)
      os << (t ? " " : "") << ids[size_t(b * per + t)];
  }
}

void printSummary(std::ostream &os, const std::string &path, const PlanRun &run,
                  const std::vector<StepRecord> &steps, bool forced) {
  const GenerationShape &s = run.shape;
  os << "=== braid-run: " << path << " | backend " << run.backend
     << (run.strict ? " (strict, seed " + std::to_string(run.strictSeed) + ")"
                    : "")
     << " | ranks " << run.plan.root().world_size() << " | batch " << s.batch
     << " | prompt " << s.promptLength
     << (s.buckets.empty() ? std::string()
                           : " (bucket " + s.prefillFunction + ")")
     << " | vocab " << s.vocab << " ===\n";
  os << "prompt:";
  os << " ";
  printTokens(os, steps.front().inputIds, s.batch);
  os << "\n";
  if (forced && steps.size() > 1) {
    // The fed tokens, laid out like --force-tokens (sequence-major).
    std::vector<int64_t> fed;
    for (int64_t b = 0; b < s.batch; ++b)
      for (size_t i = 1; i < steps.size(); ++i)
        fed.push_back(steps[i].inputIds[size_t(b)]);
    os << "forced: ";
    printTokens(os, fed, s.batch);
    os << "\n";
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    os << (i == 0 ? "prefill  " : "decode ") << std::setw(i == 0 ? 0 : 2)
       << (i == 0 ? std::string() : std::to_string(i)) << " -> ";
    printTokens(os, steps[i].nextToken, s.batch);
    os << std::fixed << std::setprecision(3) << "  (" << steps[i].milliseconds
       << " ms)\n";
  }
  double prefillMs = steps.front().milliseconds;
  os << std::fixed << std::setprecision(3);
  os << "Prefill: " << prefillMs << " ms, "
     << double(s.batch * s.promptLength) / (prefillMs / 1000.0)
     << " tokens/s\n";
  if (steps.size() > 1) {
    std::vector<double> decode;
    double total = 0;
    for (size_t i = 1; i < steps.size(); ++i) {
      decode.push_back(steps[i].milliseconds);
      total += steps[i].milliseconds;
    }
    os << "Decode latency: min = " << *std::min_element(decode.begin(),
                                                        decode.end())
       << " ms, max = " << *std::max_element(decode.begin(), decode.end())
       << " ms, mean = " << total / double(decode.size())
       << " ms, median = " << percentile(decode, 50)
       << " ms, p99 = " << percentile(decode, 99) << " ms (" << decode.size()
       << " steps)\n";
    os << "Decode throughput: "
       << double(s.batch) * double(decode.size()) / (total / 1000.0)
       << " tokens/s\n";
  }
  if (run.backend == "cpu")
    os << "(CPU reference interpreter: fp32 math, ranks as threads; times "
          "are host wall clock, not GPU times)\n";
  os.unsetf(std::ios::floatfield);
}

struct Tolerance {
  double atol = 0, rtol = 0;
};

/// --atol/--rtol, or the defaults from the plan's logits storage type:
/// bf16/fp16 round every intermediate tensor, fp32 differs only by
/// summation order. `scale` (max |reference logit|) scales atol, since
/// synthetic weights give small logits.
Tolerance checkTolerance(const LoadedPlan &plan, const Options &o,
                         double scale) {
  bool lowPrecision = false;
  for (const plan::Function *f : *plan.root().functions())
    for (const plan::Binding *bind : *f->outputs())
      if (bind->name()->string_view() == "logits")
        lowPrecision |= f->tensors()->Get(unsigned(bind->tensor()))->dtype() !=
                        plan::DType::F32;
  return {o.atol.value_or((lowPrecision ? 2e-2 : 1e-5) * scale),
          o.rtol.value_or(lowPrecision ? 2e-2 : 1e-4)};
}

/// Replays `reference`'s tokens through the plan at `path` on `backend` and
/// compares logits.
Status checkAgainst(const std::string &path, const std::string &backend,
                    const Options &o, const PlanRun &first,
                    const std::vector<StepRecord> &reference) {
  auto created = PlanRun::create(path, o, backend);
  if (!created)
    return created.status();
  PlanRun *other = created->get();
  const GenerationShape &a = first.shape, &b = other->shape;
  if (a.batch != b.batch || a.promptLength != b.promptLength ||
      a.vocab != b.vocab)
    return errorf("--check-against ", path, ": plan shapes differ (batch ",
                  b.batch, " prompt ", b.promptLength, " vocab ", b.vocab,
                  " vs ", a.batch, " ", a.promptLength, " ", a.vocab, ")");
  GenerationOptions g;
  g.prompt = reference.front().inputIds;
  g.decodeSteps = int(reference.size()) - 1;
  for (size_t i = 1; i < reference.size(); ++i)
    g.forcedTokens.push_back(reference[i].inputIds);
  g.allowNonFinite = o.allowNonFinite;
  auto steps = generate(b, g, other->stepFn());
  if (!steps)
    return errorf("--check-against ", path, ": ", steps.status().message());

  double scale = 0;
  for (const StepRecord &r : reference)
    for (float v : r.logits)
      scale = std::max(scale, double(std::fabs(v)));
  auto [atol, rtol] = checkTolerance(first.plan, o, scale);

  std::cout << "=== check against " << path << " (" << backend << ", ranks "
            << other->plan.root().world_size() << "), |a-b| <= "
            << std::scientific << std::setprecision(3) << atol << " + "
            << rtol << "*|b| ===\n"
            << std::defaultfloat;
  int64_t failures = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    Comparison c =
        compareValues(reference[i].logits, (*steps)[i].logits, atol, rtol);
    bool sameTokens = reference[i].nextToken == (*steps)[i].nextToken;
    double stepScale = 0;
    for (float v : (*steps)[i].logits)
      stepScale = std::max(stepScale, double(std::fabs(v)));
    std::cout << (i == 0 ? "prefill " : "decode ")
              << (i == 0 ? std::string() : std::to_string(i) + " ")
              << "max |logit| " << std::scientific << std::setprecision(3)
              << stepScale << ", max abs err " << std::setprecision(3)
              << c.maxAbsError << ", max rel err " << c.maxRelError
              << std::defaultfloat << ", mismatches " << c.mismatches
              << ", greedy tokens " << (sameTokens ? "equal" : "DIFFER")
              << "\n";
    failures += c.mismatches;
  }
  if (failures)
    return errorf("check failed: ", failures,
                  " logits outside tolerance against ", path);
  std::cout << "check passed: " << reference.size()
            << " steps within tolerance\n";
  return Status::ok();
}

/// --check-against FILE.safetensors: compares the run's logits with the
/// reference logits file `ref` (runtime/ReferenceLogits.h).
Status checkAgainstFile(const ReferenceLogits &ref, const Options &o,
                        const PlanRun &run,
                        const std::vector<StepRecord> &steps) {
  const std::string &path = ref.path;
  auto [atol, rtol] =
      checkTolerance(run.plan, o, referenceScale(ref, steps.size()));
  auto check = compareWithReference(ref, run.shape, steps, atol, rtol);
  if (!check)
    return check.status();
  std::cout << "=== check against " << path << " (reference logits, "
            << check->columns << " of " << run.shape.vocab
            << " vocabulary columns), |a-b| <= " << std::scientific
            << std::setprecision(3) << atol << " + " << rtol << "*|b| ===\n"
            << std::defaultfloat;
  for (const StepCheck &sc : check->steps) {
    const Comparison &c = sc.comparison;
    std::cout << (sc.step == 0 ? "prefill " : "decode ")
              << (sc.step == 0 ? std::string() : std::to_string(sc.step) + " ")
              << "max |logit| " << std::scientific << std::setprecision(3)
              << sc.maxAbsLogit << ", max abs err " << c.maxAbsError
              << ", max rel err " << c.maxRelError << std::defaultfloat
              << ", mismatches " << c.mismatches;
    if (sc.sameGreedyTokens)
      std::cout << ", greedy tokens "
                << (*sc.sameGreedyTokens ? "equal" : "DIFFER");
    std::cout << "\n";
  }
  for (const LogitMismatch &m : check->firstMismatches)
    std::cout << "  mismatch: "
              << (m.step == 0 ? std::string("prefill")
                              : "decode " + std::to_string(m.step))
              << ", batch " << m.batch << ", position " << m.position
              << ", vocab id " << m.column << ": braid " << std::setprecision(9)
              << m.got << ", reference " << m.want << ", |a-b| "
              << std::scientific << std::setprecision(3)
              << std::fabs(double(m.got) - double(m.want)) << std::defaultfloat
              << std::setprecision(6) << "\n";
  if (check->mismatches > int64_t(check->firstMismatches.size()))
    std::cout << "  ("
              << check->mismatches - int64_t(check->firstMismatches.size())
              << " more mismatches not listed)\n";
  if (!check->notRun.empty()) {
    std::cout << "(not compared: the file's steps";
    for (int k : check->notRun)
      std::cout << " " << k;
    std::cout << ", beyond the " << steps.size() - 1 << " decode steps run)\n";
  }
  if (check->mismatches)
    return errorf("check failed: ", check->mismatches,
                  " logits outside tolerance against ", path);
  std::cout << "check passed: " << check->steps.size()
            << " steps within tolerance\n";
  return Status::ok();
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
      stepInputs(run.shape, steps.back().inputIds, 1,
                 run.shape.promptLength + int64_t(steps.size()) - 2);
  run.timedDecode.clear();
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    auto out = run.runAll("decode", inputs);
    if (!out)
      return errorf("timed decode step ", i, ": ", out.status().message());
    if (i >= o.warmup)
      run.timedDecode.push_back(run.timings.back());
  }
  return Status::ok();
}

/// trtexec-style report: the generation's prefill device time, then the
/// timed decode steps (--iters). Device time (CUDA events around the launch)
/// leaves out what the host adds to every step: the input and output
/// copies, the rank threads, the wait for completion; the wall clock
/// includes them, and the throughput is computed from it.
void printGpuTiming(const PlanRun &run, const Options &o) {
  std::cout << std::fixed << std::setprecision(3);
  std::cout << "GPU (CUDA events, " << (o.graph ? "graph replay" : "eager")
            << "): prefill " << run.timings.front().deviceMs << " ms"
            << (run.timings.front().captured ? " (first launch after capture)"
                                             : "")
            << ", wall clock " << run.timings.front().wallMs << " ms\n";
  if (!run.timedDecode.empty()) {
    std::vector<double> device, host, wall;
    double sum = 0, wallSum = 0;
    for (const cuda::StepTiming &t : run.timedDecode) {
      device.push_back(t.deviceMs);
      host.push_back(t.hostLaunchMs);
      wall.push_back(t.wallMs);
      sum += t.deviceMs;
      wallSum += t.wallMs;
    }
    double median = percentile(device, 50), wallMedian = percentile(wall, 50);
    std::cout << "Decode step, " << o.iters << " iterations after "
              << o.warmup << " warmup: latency min = "
              << *std::min_element(device.begin(), device.end())
              << " ms, median = " << median
              << " ms, p99 = " << percentile(device, 99)
              << " ms, mean = " << sum / double(device.size()) << " ms\n"
              << "Wall clock per step (host: inputs in, step, outputs out): "
                 "min = "
              << *std::min_element(wall.begin(), wall.end())
              << " ms, median = " << wallMedian
              << " ms, p99 = " << percentile(wall, 99)
              << " ms, mean = " << wallSum / double(wall.size()) << " ms\n"
              << "Host launch per step: median = " << percentile(host, 50)
              << " ms\n"
              << "Decode throughput: "
              << double(run.shape.batch) / (wallMedian / 1e3)
              << " tokens/s (batch " << run.shape.batch
              << ", wall clock; device time alone: "
              << double(run.shape.batch) / (median / 1e3) << ")\n";
  }
  std::cout.unsetf(std::ios::floatfield);
}
#endif

/// --check on the cuda backend, when a step's logits are not finite:
/// replays `steps` (the failing one last) on the CPU interpreter with every
/// op's output checked, and says which op first produced a non-finite value.
std::string explainNonFiniteOnCpu(const Options &o,
                                  const std::vector<StepRecord> &steps) {
  Options cpu = o;
  cpu.check = true; // RunOptions::checkFinite
  auto created = PlanRun::create(o.plan, cpu, "cpu");
  if (!created)
    return "the CPU interpreter could not replay the run: " +
           created.status().message();
  GenerationOptions g;
  g.prompt = steps.front().inputIds;
  g.decodeSteps = int(steps.size()) - 1;
  for (size_t i = 1; i < steps.size(); ++i)
    g.forcedTokens.push_back(steps[i].inputIds);
  g.allowNonFinite = true; // the op check is the one that speaks
  auto replay = generate((*created)->shape, g, (*created)->stepFn());
  if (!replay)
    return "replayed on the CPU interpreter: " + replay.status().message();
  return "the " + o.backend +
         " backend produced them: the CPU interpreter computes finite values "
         "for the same tokens";
}

/// At most this many bytes of prompt ids (tens of millions of tokens).
constexpr uint64_t kMaxPromptFileBytes = uint64_t(64) << 20;

/// --prompt-file: ids separated by whitespace and/or commas; `-` is stdin.
Expected<std::vector<int64_t>> readPromptFile(const std::string &path) {
  std::string text;
  if (path == "-") {
    text.resize(size_t(kMaxPromptFileBytes) + 1);
    std::cin.read(text.data(), std::streamsize(text.size()));
    text.resize(size_t(std::cin.gcount()));
    if (text.size() > kMaxPromptFileBytes)
      return errorf("prompt file '-' (stdin) holds more than the limit of ",
                    kMaxPromptFileBytes, " bytes");
  } else {
    auto bytes = readRegularFile(path, "prompt file", kMaxPromptFileBytes);
    if (!bytes)
      return bytes.status();
    text.assign(bytes->begin(), bytes->end());
  }
  return parseTokenList(text, path == "-"
                                  ? std::string("prompt file '-' (stdin)")
                                  : "prompt file '" + path + "'");
}

/// --weights: opens the checkpoint once (file, index or directory) and
/// checks it against the plan before any rank is allocated: every
/// parameter has its tensor, no tensor is left unused (a warning with
/// --allow-unused-weights, printed by the process that speaks).
Expected<std::shared_ptr<const Checkpoint>>
openCheckpoint(const Options &o, const plan::Plan &plan, bool speaks) {
  auto ckpt = Checkpoint::open(o.weights);
  if (!ckpt)
    return ckpt.status();
  CheckpointLoadOptions lo;
  lo.allowUnusedWeights = o.allowUnusedWeights;
  auto match = checkCheckpoint(plan, *ckpt, lo);
  if (!match)
    return match.status();
  if (speaks && !match->unused.empty()) {
    std::string line =
        "braid-run: warning: " + describeUnused(*ckpt, plan, match->unused) +
        "; ignored (--allow-unused-weights)\n";
    std::cerr.write(line.data(), std::streamsize(line.size()));
  }
  return std::make_shared<const Checkpoint>(ckpt.take());
}

/// One stderr line on what was loaded and the dtype conversion that
/// happened: "braid-run: weights: 21 tensors from checkpoint 'm.safetensors',
/// bf16 checkpoint -> f32 plan".
void describeWeights(const Checkpoint &ckpt, const plan::Plan &plan) {
  auto match = matchCheckpoint(plan, ckpt);
  if (!match)
    return; // the load succeeded, so it matched
  std::set<std::string> from, to;
  for (unsigned i = 0; i < match->sources.size(); ++i) {
    const std::string &source = match->sources[i];
    std::string dtype = ckpt.shardOf(source)->find(source)->dtypeName;
    std::transform(dtype.begin(), dtype.end(), dtype.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    from.insert(dtype);
    to.insert(dtypeName(plan.parameters()->Get(i)->dtype()));
  }
  auto join = [](const std::set<std::string> &names) {
    std::string out;
    for (const std::string &n : names)
      out += (out.empty() ? "" : "+") + n;
    return out;
  };
  std::ostringstream line;
  line << "braid-run: weights: " << match->sources.size()
       << (match->sources.size() == 1 ? " tensor" : " tensors")
       << " from checkpoint '" << ckpt.path() << "'";
  if (ckpt.numShards() > 1)
    line << " (" << ckpt.numShards() << " shards)";
  if (!match->sources.empty()) {
    line << ", " << join(from) << " checkpoint -> " << join(to) << " plan";
    if (from == to)
      line << " (no conversion)";
  }
  line << "\n";
  std::string text = line.str();
  std::cerr.write(text.data(), std::streamsize(text.size()));
}

/// How a failed run ends. Before the run starts, every process reaches the
/// same verdict (checkSameRun) and exits normally; once ranks meet in
/// collectives, a failing process must take the others down with it
/// (Bootstrap::abortAll) or they wait for it until the step timeout.
enum class Phase { Agreement, Collective, Reporting };

struct Failure {
  Status status;
  Phase phase = Phase::Agreement;
};

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
                     ? "generated weights, --seed " + std::to_string(opts->seed)
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

std::optional<Failure> runMain(int argc, char **argv, Bootstrap *processes) {
  auto fail = [](Status st, Phase phase) {
    return std::optional<Failure>(Failure{std::move(st), phase});
  };
  auto opts = parseArgs(argc, argv);
  // Before the agreement: under mpirun a prompt file one process cannot
  // read is then reported by all.
  if (opts && !opts->promptFile.empty()) {
    auto ids = readPromptFile(opts->promptFile);
    if (ids)
      opts->tokens = ids.take();
    else
      opts = Expected<Options>(ids.status());
  }
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

  // The prompt and the teacher-forced steps, known before anything is
  // allocated (a plan without a generation shape is reported by create).
  GenerationOptions g;
  g.decodeSteps = o.steps;
  g.allowNonFinite = o.allowNonFinite;
  auto shape = generationShape(loaded->root());
  if (shape && !o.tokens.empty())
    shape = shapeForPrompt(*shape, o.tokens.size());
  if (shape)
    g.prompt =
        o.tokens.empty() ? syntheticPrompt(*shape, o.promptSeed) : o.tokens;
  if (shape && !o.forceTokens.empty()) {
    auto forced = forcedTokensByStep(o.forceTokens, shape->batch);
    if (!forced)
      return fail(forced.status(), Phase::Agreement);
    int covered = int(std::min<size_t>(forced->size(), INT_MAX));
    if (o.stepsGiven && o.steps > covered)
      return fail(errorf("--steps ", o.steps, " needs ", o.steps,
                         " forced tokens per sequence; --force-tokens gives ",
                         covered, " (for each of the ", shape->batch,
                         " sequences)"),
                  Phase::Agreement);
    g.decodeSteps = o.stepsGiven ? o.steps : covered;
    g.forcedTokens = forced.take();
  }

  bool speaks = !processes || processes->rank() == 0;
  // --check-against a logits file: read and fitted to this run (prompt,
  // steps, columns) before anything runs, so a wrong file fails at once.
  // Rank 0 alone compares, so it alone reads it.
  std::optional<ReferenceLogits> reference;
  if (!o.checkAgainst.empty() && shape && speaks) {
    auto kind = checkFileKind(o.checkAgainst);
    if (!kind)
      return fail(kind.status(), Phase::Collective);
    if (*kind == CheckFileKind::Logits) {
      auto ref = readReferenceLogits(o.checkAgainst);
      if (!ref)
        return fail(ref.status(), Phase::Collective);
      Status fits = checkReferenceCovers(*ref, *shape, g.prompt, g.decodeSteps);
      if (!fits)
        return fail(fits, Phase::Collective);
      reference = ref.take();
    }
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
  if (processes && processes->rank() != 0)
    return std::nullopt;
  Status st = [&]() -> Status {
    printSummary(std::cout, o.plan, *run, *steps, !g.forcedTokens.empty());
    if (!o.dumpOutputs.empty())
      BRAID_RETURN_IF_ERROR(writeLogitsFile(o.dumpOutputs, run->shape, *steps));
    if (!o.profile.empty()) {
      std::vector<OpTime> all;
      for (const auto &p : run->profiles)
        all.insert(all.end(), p.begin(), p.end());
      BRAID_RETURN_IF_ERROR(writeProfileCsv(o.profile, all));
    }
    if (!o.trace.empty())
      BRAID_RETURN_IF_ERROR(writeChromeTrace(o.trace, run->profiles,
                                             run->plan.root().world_size()));
#ifdef BRAID_HAVE_CUDA
    if (run->gpu)
      printGpuTiming(*run, o);
#endif
    if (o.check)
      BRAID_RETURN_IF_ERROR(checkAgainst(o.plan, "cpu", o, *run, *steps));
    if (reference)
      BRAID_RETURN_IF_ERROR(checkAgainstFile(*reference, o, *run, *steps));
    else if (!o.checkAgainst.empty())
      BRAID_RETURN_IF_ERROR(
          checkAgainst(o.checkAgainst, o.backend, o, *run, *steps));
    return Status::ok();
  }();
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
void selectDeviceBeforeMpi(int argc, char **argv) {
  if (!mpi::launchedByMpiLauncher())
    return;
  std::optional<int> localRank = mpi::launcherLocalRank();
  if (!localRank)
    return;
  auto o = parseArgs(argc, argv);
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

} // namespace

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

int main(int argc, char **argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--probe-gpu")
    return probeGpu();
#if defined(BRAID_HAVE_CUDA) && defined(BRAID_HAVE_MPI)
  selectDeviceBeforeMpi(argc, argv); // CUDA-aware MPI binds at MPI_Init
#endif
  auto processes = bootstrapProcesses(&argc, &argv);
  if (!processes) {
    std::cerr << "braid-run: error: " + processes.status().message() + "\n";
    return 1;
  }
  Bootstrap *p = processes->get();
  // Rank 0 speaks for a multi-process run; the others print only errors.
  std::ofstream quiet;
  std::streambuf *saved = std::cout.rdbuf();
  if (p && p->rank() != 0)
    std::cout.rdbuf(quiet.rdbuf());
  std::optional<Failure> failure;
  // The runtime reports errors as Status; an exception escaping it anyway
  // (out of memory in a container, a library's throw) is still an error
  // message and exit 1, never std::terminate.
  try {
    failure = runMain(argc, argv, p);
  } catch (const std::exception &e) {
    failure =
        Failure{errorf("unexpected failure: ", e.what()), Phase::Collective};
  }
  std::cout.flush();
  std::cout.rdbuf(saved);
  if (!failure)
    return 0;
  // Every process reaches the same agreement verdict: rank 0 reports it.
  bool report = !p || failure->phase != Phase::Agreement || p->rank() == 0;
  if (report) {
    // One write: lines of processes sharing the terminal do not interleave.
    std::string line =
        "braid-run: error: " +
        (p && failure->phase != Phase::Agreement
             ? "rank " + std::to_string(p->rank()) + ": "
             : std::string()) +
        failure->status.message() + "\n";
    std::cerr.write(line.data(), std::streamsize(line.size()));
  }
  if (p && failure->phase == Phase::Collective) {
    std::cerr.flush();
    // mpirun forwards output asynchronously and drops what is in flight
    // when it kills the job: give the message above time to arrive.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    p->abortAll(1);
  }
  return 1;
}
