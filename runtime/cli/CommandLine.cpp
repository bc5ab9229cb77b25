//===- CommandLine.cpp - braid-run's options, parsed with CLI11 -----------===//
//
// CLI11 holds the table of options (names, value names, defaults, groups,
// help text) and tokenizes the command line. Every option is registered
// without a typed variable: CLI11 keeps each occurrence's raw text, and
// applyInCommandLineOrder() converts the occurrences in the order they were
// given with the rules and messages below (CLI11's own conversions would
// word errors differently, and apply values per option rather than in
// command-line order).
//
//===----------------------------------------------------------------------===//
#include "runtime/cli/CommandLine.h"
#include "runtime/Weights.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>

#include <charconv>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <type_traits>

namespace braid::rt::cli {
namespace {

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

//===----------------------------------------------------------------------===//
// Converting one occurrence of an option
//===----------------------------------------------------------------------===//

/// What one occurrence of an option does to the Options, given its value
/// (a flag's value is ignored).
using Apply = std::function<Status(const std::string &value)>;

Apply setText(std::string &out) {
  return [&out](const std::string &v) {
    out = v;
    return Status::ok();
  };
}

/// A file to read: an empty path is refused, not taken for "not given"
/// (`--check-against ''` skipped the check).
Apply setInputPath(const std::string &flag, std::string &out) {
  return [flag, &out](const std::string &v) -> Status {
    if (v.empty())
      return errorf("option ", flag, ": the path is empty");
    out = v;
    return Status::ok();
  };
}

/// A file to write: not empty, and not `-` (these options write files;
/// `-` would be a file named `-`).
Apply setOutputPath(const std::string &flag, std::string &out) {
  return [flag, &out](const std::string &v) -> Status {
    if (v.empty() || v == "-")
      return errorf("option ", flag, ": '", v,
                    "' is not a file path (it writes a file, not standard "
                    "output)");
    out = v;
    return Status::ok();
  };
}

template <typename T> Apply setNumber(const std::string &flag, T &out) {
  return [flag, &out](const std::string &v) -> Status {
    if (!parseNumber(std::string_view(v), out))
      return errorf("option ", flag, ": '", v, "' is not a valid number");
    return Status::ok();
  };
}

/// One of an enum's spellings: `parse` gives its value, or nullopt for an
/// unknown one, which is refused listing `choices`.
template <typename E>
Apply setChoice(const std::string &flag, E &out,
                std::optional<E> (*parse)(std::string_view),
                const std::string &choices) {
  return [flag, &out, parse, choices](const std::string &v) -> Status {
    std::optional<E> x = parse(v);
    if (!x)
      return errorf(flag, " '", v, "' is unknown; use ", choices);
    out = *x;
    return Status::ok();
  };
}

template <typename T>
Apply setOptionalNumber(const std::string &flag, std::optional<T> &out) {
  return [flag, &out](const std::string &v) -> Status {
    T x{};
    if (!parseNumber(std::string_view(v), x))
      return errorf("option ", flag, ": '", v, "' is not a valid number");
    out = x;
    return Status::ok();
  };
}

/// a,b,c: appends every item, each a number >= `min` (named `what` in
/// errors); `emptyError`, when given, is the error for a list that is
/// still empty afterwards.
template <typename T>
Apply appendNumbers(const std::string &flag, std::vector<T> &out,
                    const std::string &what, T min,
                    std::string emptyError = {}) {
  return [=, &out](const std::string &list) -> Status {
    std::istringstream is(list);
    for (std::string item; std::getline(is, item, ',');) {
      T x{};
      if (!parseNumber(std::string_view(item), x) || x < min)
        return errorf(flag, ": '", item, "' is not ", what);
      out.push_back(x);
    }
    if (!emptyError.empty() && out.empty())
      return Status::error(emptyError);
    return Status::ok();
  };
}

template <typename T> std::string defaultOf(const T &value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

//===----------------------------------------------------------------------===//
// --help
//===----------------------------------------------------------------------===//

constexpr size_t kHelpWidth = 80;
constexpr size_t kNameColumn = 27; // descriptions start here

/// `text` in lines of at most `width` characters, broken at spaces; a
/// newline in `text` starts a new line. A word longer than `width` gets a
/// line of its own.
std::vector<std::string> wrap(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string_view paragraph =
        text.substr(start, end == text.npos ? text.npos : end - start);
    std::istringstream words{std::string(paragraph)};
    line.clear();
    for (std::string word; words >> word;) {
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        lines.push_back(line);
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    lines.push_back(line);
    if (end == text.npos)
      break;
    start = end + 1;
  }
  return lines;
}

/// Braid's help layout: a usage line, the description, the options by
/// group (name and value on the left, then the meaning and the default,
/// wrapped to 80 columns), then the footer.
class HelpFormatter : public CLI::Formatter {
public:
  std::string make_help(const CLI::App *app, std::string,
                        CLI::AppFormatMode) const override {
    std::ostringstream out;
    out << "usage: braid-run PLAN.bplan [options]\n"
        << "       braid-run --probe-gpu\n\n";
    for (const std::string &line : wrap(app->get_description(), kHelpWidth))
      out << line << "\n";
    for (const std::string &group : app->get_groups()) {
      out << "\n" << group << ":\n";
      for (const CLI::Option *opt : app->get_options(
               [&](const CLI::Option *o) { return o->get_group() == group; }))
        out << option(opt);
    }
    out << "\n";
    for (const std::string &line : wrap(app->get_footer(), kHelpWidth))
      out << line << "\n";
    return out.str();
  }

private:
  /// "--steps K", "-h, --help", or a positional's value name.
  static std::string names(const CLI::Option *opt) {
    if (opt->get_positional())
      return opt->get_type_name();
    std::string text;
    for (const std::string &s : opt->get_snames())
      text += (text.empty() ? "-" : ", -") + s;
    for (const std::string &l : opt->get_lnames())
      text += (text.empty() ? "--" : ", --") + l;
    if (opt->get_type_size() != 0)
      text += " " + opt->get_type_name();
    return text;
  }

  /// The meaning, wrapped, then "(default: X)": after the last line when
  /// it fits there, else on lines of its own (never broken when it fits
  /// on one).
  static std::vector<std::string> meaning(const CLI::Option *opt) {
    constexpr size_t width = kHelpWidth - kNameColumn;
    std::vector<std::string> lines = wrap(opt->get_description(), width);
    if (opt->get_default_str().empty())
      return lines;
    std::string defaults = "(default: " + opt->get_default_str() + ")";
    if (lines.back().size() + 1 + defaults.size() <= width) {
      lines.back() += (lines.back().empty() ? "" : " ") + defaults;
      return lines;
    }
    for (std::string &line : wrap(defaults, width))
      lines.push_back(std::move(line));
    return lines;
  }

  static std::string option(const CLI::Option *opt) {
    std::string left = "  " + names(opt);
    std::vector<std::string> lines = meaning(opt);
    std::string out;
    size_t first = 0;
    if (left.size() + 1 < kNameColumn) { // the meaning starts on its line
      out =
          left + std::string(kNameColumn - left.size(), ' ') + lines[0] + "\n";
      first = 1;
    } else {
      out = left + "\n";
    }
    for (size_t i = first; i < lines.size(); ++i)
      out += std::string(kNameColumn, ' ') + lines[i] + "\n";
    return out;
  }
};

constexpr const char *kDescription =
    "Runs the plan's prefill on a prompt, then greedy decode steps, and "
    "prints the tokens and a latency summary. The plan fixes the model, its "
    "parallelism (world size) and its dtype (braid-compile --tp, --dtype); "
    "braid-run chooses the backend (default: cpu), the prompt, the weights "
    "and the checks.";

constexpr const char *kFooter =
    "A value follows its flag (--steps 8) or is joined to it with `=` "
    "(--steps=8). A flag given twice keeps its last value; the lists "
    "(--tokens, --force-tokens, --devices) append.\n"
    "\n"
    "braid-run --probe-gpu (alone) prints the CUDA driver and runtime "
    "versions and the GPUs, exit 0; or why no GPU can be used, exit 1 (the "
    "test suites' one GPU check).";

//===----------------------------------------------------------------------===//
// The options
//===----------------------------------------------------------------------===//

/// braid-run's options registered with CLI11, each with what it does to
/// `o`.
class CommandLine {
public:
  explicit CommandLine(Options &o) : o_(o), app_(kDescription, "braid-run") {
    app_.formatter(std::make_shared<HelpFormatter>());
    app_.footer(kFooter);
    // Unknown arguments are collected and reported in Braid's words.
    app_.allow_extras(true);
    // Every occurrence is kept and applied in order (see the file comment).
    app_.option_defaults()->multi_option_policy(
        CLI::MultiOptionPolicy::TakeAll);
    app_.set_help_flag(); // added back, last of its group
    addPlanAndRun();
    addPromptAndGeneration();
    addWeights();
    addChecking();
    addCuda();
    addProfiling();
  }

  /// Fills the Options from the command line, or says what is wrong.
  Status parse(int argc, const char *const *argv);

  std::string help() const { return app_.help(); }

private:
  /// An option that takes a value: `valueName` and `defaultText` are shown
  /// by --help.
  void value(const std::string &name, const std::string &valueName,
             const std::string &defaultText, const std::string &description,
             Apply apply) {
    CLI::Option *opt = app_.add_option(name, CLI::callback_t(), description);
    opt->type_name(valueName)->default_str(defaultText)->group(group_);
    apply_[opt] = std::move(apply);
  }

  /// A flag without a value. CLI11 takes `--flag=VALUE` too; a value that
  /// would turn the flag off is refused rather than ignored (which ran
  /// `--strict=false` strict, and would have turned the schedule verifier
  /// off for `--no-verify-schedule=false`).
  void flag(const std::string &name, const std::string &description,
            std::function<void()> set) {
    CLI::Option *opt = app_.add_flag(name, description);
    opt->group(group_);
    apply_[opt] = [name, set = std::move(set)](const std::string &value) {
      if (value != "true" && value != "1")
        return errorf(name, " takes no value (got '", value,
                      "'): give the flag to turn it on, leave it out to "
                      "leave it off");
      set();
      return Status::ok();
    };
  }

  void addPlanAndRun();
  void addPromptAndGeneration();
  void addWeights();
  void addChecking();
  void addCuda();
  void addProfiling();

  Status applyInCommandLineOrder();

  Options &o_;
  CLI::App app_;
  std::string group_;
  std::map<const CLI::Option *, Apply> apply_;
};

void CommandLine::addPlanAndRun() {
  group_ = "Plan and run";
  CLI::Option *plan = app_.add_option(
      "plan", CLI::callback_t(), "the plan to run (braid-compile's output)");
  plan->type_name("PLAN.bplan")->group(group_);
  apply_[plan] = [this](const std::string &path) -> Status {
    if (path.rfind("-", 0) == 0) // `-`, `-5`: CLI11 takes them for values
      return errorf("unknown option '", path, "' (see --help)");
    if (path.empty())
      return errorf("the plan path is empty");
    o_.plan = path;
    return Status::ok();
  };
  value("--backend", "cpu|cuda", o_.backend,
        "cpu: the reference interpreter, ranks as threads. cuda: the CUDA "
        "executor (cuBLASLt, NCCL): one thread per GPU, or under mpirun/srun "
        "one process per GPU (MPI bootstraps rank, size and the NCCL ids; "
        "every rank must load the same plan)",
        setText(o_.backend));
  value("--ranks", "N", "the plan's world size",
        "ranks to run: must equal the plan's world size (checked before "
        "anything is allocated). The cpu backend runs at most 1024 ranks and "
        "refuses a plan whose ranks need more host memory than the machine "
        "or ulimit allows",
        [this](const std::string &v) -> Status {
          if (!parseNumber(std::string_view(v), o_.ranks) || o_.ranks < 1)
            return errorf("option --ranks: '", v,
                          "' is not a rank count (an integer >= 1)");
          return Status::ok();
        });
  value("--timeout", "S", defaultOf(o_.timeout) + " seconds",
        "a step (cuda) or one collective (cpu) that takes longer than S "
        "seconds aborts the run: a stuck collective. At most 1e6",
        setNumber("--timeout", o_.timeout));
  flag("--print-plan", "print the plan as text and exit",
       [this] { o_.printPlan = true; });
  app_.set_help_flag("-h,--help", "print this help and exit")->group(group_);
}

void CommandLine::addPromptAndGeneration() {
  group_ = "Prompt and generation";
  value("--steps", "K",
        defaultOf(o_.steps) + "; with --force-tokens, the number of forced "
                              "tokens",
        "decode steps after prefill; with --force-tokens at most the number "
        "of forced tokens",
        [this, steps = setNumber("--steps", o_.steps)](const std::string &v) {
          o_.stepsGiven = true;
          return steps(v);
        });
  value("--sequences", "N", "the plan's batch",
        "sequences to generate, at most the plan's batch: the others are "
        "padding, and decode runs in the smallest decode batch bucket "
        "(braid-compile --decode-batches) that holds N",
        [this, sequences = setNumber("--sequences", o_.sequences)](
            const std::string &v) -> Status {
          BRAID_RETURN_IF_ERROR(sequences(v));
          // 0 stands for "not given": the plan's batch.
          if (o_.sequences < 1)
            return errorf("--sequences ", v, ": at least 1 sequence");
          return Status::ok();
        });
  value("--tokens", "a,b,...", "synthetic, from --prompt-seed",
        "prompt ids, sequences x prompt length of them, sequence after "
        "sequence",
        appendNumbers("--tokens", o_.tokens, "a token id",
                      std::numeric_limits<int64_t>::min()));
  value("--prompt-file", "FILE", "none",
        "the prompt ids from FILE instead of --tokens (separated by "
        "whitespace and/or commas; `-` reads stdin)",
        setInputPath("--prompt-file", o_.promptFile));
  value("--prompt-seed", "S", defaultOf(o_.promptSeed),
        "seed of the synthetic prompt",
        setNumber("--prompt-seed", o_.promptSeed));
  value("--force-tokens", "a,b,...", "greedy decoding",
        "teacher forcing: decode step k feeds token k instead of the greedy "
        "one. Laid out like --tokens: batch x N ids, sequence 0's N tokens, "
        "then sequence 1's, ...; --steps must be <= N",
        appendNumbers("--force-tokens", o_.forceTokens, "a token id",
                      std::numeric_limits<int64_t>::min(),
                      "--force-tokens needs at least one token id"));
  value("--dump-outputs", "FILE", "not written",
        "write input_ids ([B, S] i64) and every step's logits ([B, T, V] "
        "f32; T = logit positions of the step) as safetensors (step0.logits "
        "= prefill, stepK.logits = decode K)",
        setOutputPath("--dump-outputs", o_.dumpOutputs));
}

void CommandLine::addWeights() {
  group_ = "Weights";
  value("--seed", "S", defaultOf(o_.seed),
        "seed of the generated weights: each value is a function of (seed, "
        "parameter name, index in the full tensor), so every tp computes the "
        "same function",
        setNumber("--seed", o_.seed));
  value("--weight-scale", "flat|fan-in", "flat",
        "how large the generated weights are. flat: every value 0.02 x u, u "
        "uniform in [-1, 1) (norm weights 1 + 0.02 x u). fan-in: a matrix's "
        "values have std 1/sqrt(its last dim), vectors 0.25 x u, so "
        "attention is as peaked as in a trained model and a RoPE, mask or "
        "scale error moves the logits far more (the golden tests use both)",
        setChoice("--weight-scale", o_.weightScale, parseAmplitude,
                  "flat or fan-in"));
  value("--weights", "PATH", "generated weights, see --seed",
        "Hugging Face safetensors checkpoint instead: a .safetensors file, a "
        "sharded checkpoint's index (model.safetensors.index.json, shards "
        "next to it), or a directory holding one of model.safetensors and "
        "model.safetensors.index.json (not both). BF16/F16/F32 tensors load "
        "into any plan dtype; each rank reads only its slices",
        setInputPath("--weights", o_.weights));
  flag("--allow-unused-weights",
       "checkpoint tensors the plan does not use are a warning, not an error "
       "(checkpoints with extra heads; rotary inv_freq and GPT-2 attn.bias "
       "buffers are always skipped)",
       [this] { o_.allowUnusedWeights = true; });
}

void CommandLine::addChecking() {
  group_ = "Checking";
  flag("--check",
       "cuda: replay the same tokens on the CPU interpreter and compare "
       "logits (as --check-against); cpu: check that every op's output is "
       "finite, and with --strict also compare with a plain CPU replay. "
       "Either way, non-finite logits name the first op whose output is not "
       "finite",
       [this] { o_.check = true; });
  value("--check-against", "PLAN|FILE", "none",
        "PLAN: run that plan on the same tokens (same model, other "
        "parallelism) and compare logits (a prefill's at every prompt "
        "position when both plans return them all, else at the last).\n"
        "FILE.safetensors: compare with reference logits: stepK.logits [B, "
        "T, V'] (F32, BF16 or F16) as --dump-outputs writes them, optional "
        "columns [V'] (I32/I64, strictly increasing vocab ids: only those "
        "columns are compared) and optional input_ids [B, S] (must equal the "
        "prompt). Every step run must be in the file (lower --steps "
        "otherwise).\n"
        "Plan or file is told by content",
        setInputPath("--check-against", o_.checkAgainst));
  value("--atol", "X",
        "1e-5 x max|reference logit| for fp32 logits, 2e-2 x max|reference "
        "logit| for bf16/fp16; the plan's logits dtype decides",
        "absolute tolerance of --check and --check-against: |a-b| <= atol + "
        "rtol*|b|",
        setOptionalNumber("--atol", o_.atol));
  value("--rtol", "X", "1e-4 for fp32 logits, 2e-2 for bf16/fp16",
        "relative tolerance of --check and --check-against (see --atol)",
        setOptionalNumber("--rtol", o_.rtol));
  flag("--allow-non-finite",
       "accept logits that hold NaN or infinity (by default a step whose "
       "logits are not finite is an error: their greedy token means nothing)",
       [this] { o_.allowNonFinite = true; });
  flag("--strict",
       "cpu: strict interpreter for PLAN.bplan (not for the --check-against "
       "reference): streams run in a random order that respects only the "
       "plan's events, async collectives run at their wait, and undefined "
       "buffers (async payloads before the collective, dead buffers) are "
       "poisoned with NaN, so a missing event or an early buffer reuse "
       "changes the numbers; a correct plan gives the same bits as without "
       "--strict",
       [this] { o_.strict = true; });
  value("--strict-seed", "N", defaultOf(Options::kDefaultStrictSeed),
        "seed of --strict's stream order",
        setOptionalNumber("--strict-seed", o_.strictSeed));
  flag("--no-verify-schedule",
       "UNSAFE: load plans without checking that their streams, events and "
       "waits order every cross-stream access, buffer reuse and collective "
       "(to debug a bad plan, e.g. with --strict); such a plan may compute "
       "garbage or hang on a GPU",
       [this] { o_.verifySchedule = false; });
}

void CommandLine::addCuda() {
#ifdef BRAID_HAVE_CUDA
  group_ = "CUDA (--backend cuda)";
#else
  group_ = "CUDA (--backend cuda; this braid-run was built without it)";
#endif
  value("--devices", "a,b,...",
        "0, 1, ...; under mpirun the local rank modulo the GPUs each process "
        "sees, so GPU 0 with CUDA_VISIBLE_DEVICES set per rank",
        "GPU of each rank (under mpirun: of each local rank)",
        appendNumbers("--devices", o_.devices, "a GPU index", 0,
                      "--devices needs at least one GPU index"));
  flag("--graph", "replay CUDA Graphs (the default)",
       [this] { o_.graph = true; });
  flag("--eager",
       "launch op by op instead (--profile and --trace need it); the last of "
       "--graph and --eager given wins",
       [this] { o_.graph = false; });
  value("--attention-kernel", "auto|split|tensor-core", "auto",
        "with --backend cuda: which kernel runs attention where the "
        "tensor-core one applies (bf16/f16, head_dim 16, 32, 64, 80, 96 or "
        "128). auto: tensor cores for decode steps over a KV cache of at "
        "least 256 rows, where an H100 measured them faster",
        setChoice("--attention-kernel", o_.attentionKernel,
                  cuda::parseAttentionKernel, "auto, split or tensor-core"));
  flag("--tensor-core-attention", "the same as --attention-kernel tensor-core",
       [this] { o_.attentionKernel = cuda::AttentionKernel::TensorCore; });
  flag("--fuse-cache-write",
       "with --backend cuda: where tensor cores run attention with a KV "
       "cache, the kernel also writes the new rows into the cache (one "
       "launch fewer; not yet the default)",
       [this] { o_.fuseCacheWrite = true; });
  value("--gemm-autotune", "N", "0",
        "with --backend cuda: at set-up, time up to N of cuBLASLt's "
        "algorithms for each distinct GEMM and keep the fastest (0 or 1: "
        "cuBLASLt's first heuristic choice); at most 64",
        setNumber("--gemm-autotune", o_.gemmAutotune));
  flag("--single-gpu-test",
       "TESTS ONLY: run every rank of the plan on one GPU (the first of "
       "--devices, else GPU 0) with the single-GPU test communicator instead "
       "of NCCL, which refuses two ranks on one GPU; the ranks meet on the "
       "host and collectives are device copies and reductions, correct but "
       "slow",
       [this] { o_.singleGpuTest = true; });
  value("--test-fault", "KIND:RANK", "none",
        "TESTS ONLY: stuck-collective:R (rank R skips its collectives, so "
        "its peers' wait until --timeout; CPU, or CUDA with "
        "--single-gpu-test) or failing-rank:R (rank R's step fails before "
        "it launches anything; CUDA with --single-gpu-test)",
        [this](const std::string &v) -> Status {
          size_t colon = v.find(':');
          std::string kind = v.substr(0, colon);
          int rank = -1;
          if (colon != std::string::npos) {
            const char *first = v.data() + colon + 1, *last = v.data() + v.size();
            int r = -1;
            auto [end, ec] = std::from_chars(first, last, r);
            if (ec == std::errc() && end == last && first != last)
              rank = r;
          }
          if (rank < 0 || (kind != "stuck-collective" && kind != "failing-rank"))
            return errorf("--test-fault '", v, "': expected "
                          "stuck-collective:RANK or failing-rank:RANK");
          (kind == "stuck-collective" ? o_.testStuckRank
                                      : o_.testFailingRank) = rank;
          return Status::ok();
        });
  value("--iters", "N", defaultOf(o_.iters),
        "after generation, time N decode steps after the --warmup untimed "
        "ones",
        setNumber("--iters", o_.iters));
  value("--warmup", "W", defaultOf(o_.warmup),
        "untimed decode steps before the --iters timed ones",
        setNumber("--warmup", o_.warmup));
}

void CommandLine::addProfiling() {
  group_ = "Profiling";
  value("--profile", "FILE.csv", "not written",
        "measured mean time per (op, operand shapes) as `op,shape,us`: "
        "braid-estimate's calibration file (cuda: needs --eager; times from "
        "CUDA events)",
        setOutputPath("--profile", o_.profile));
  value("--trace", "FILE.json", "not written",
        "measured per-op Chrome trace of every step (cuda: needs --eager; "
        "times from CUDA events)",
        setOutputPath("--trace", o_.trace));
}

/// Applies every occurrence of every option in command-line order, so the
/// first bad value given is the one reported.
Status CommandLine::applyInCommandLineOrder() {
  std::map<const CLI::Option *, size_t> seen;
  for (const CLI::Option *opt : app_.parse_order()) {
    auto apply = apply_.find(opt);
    size_t occurrence = seen[opt]++;
    if (apply == apply_.end() || occurrence >= opt->results().size())
      continue; // --help (handled by CLI11)
    BRAID_RETURN_IF_ERROR(apply->second(opt->results()[occurrence]));
  }
  return Status::ok();
}

/// The checks that span options, once every value is read.
Status checkCombinations(const Options &o) {
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
  if (o.singleGpuTest && o.backend != "cuda")
    return errorf("--single-gpu-test needs --backend cuda");
  if (o.attentionKernel != cuda::AttentionKernel::Auto && o.backend != "cuda")
    return errorf("--attention-kernel ",
                  cuda::attentionKernelName(o.attentionKernel),
                  " needs --backend cuda (--tensor-core-attention is "
                  "--attention-kernel tensor-core)");
  if (o.weightScale != weights::Amplitude::Flat && !o.weights.empty())
    return errorf("--weight-scale shapes the generated weights; --weights "
                  "loads a checkpoint instead: use one");
  if (o.fuseCacheWrite && o.backend != "cuda")
    return errorf("--fuse-cache-write needs --backend cuda");
  if (o.gemmAutotune < 0 || o.gemmAutotune > 64)
    return errorf("--gemm-autotune must be in [0, 64], got ", o.gemmAutotune);
  if (o.gemmAutotune > 1 && o.backend != "cuda")
    return errorf("--gemm-autotune needs --backend cuda");
  if (o.backend == "cuda" && (o.testStuckRank >= 0 || o.testFailingRank >= 0) &&
      !o.singleGpuTest)
    return errorf("--test-fault needs --single-gpu-test");
  if (o.backend == "cpu" && o.testFailingRank >= 0)
    return errorf("--test-fault failing-rank needs --backend cuda "
                  "--single-gpu-test");
  if (o.strict && o.backend != "cpu")
    return errorf("--strict runs the CPU interpreter: use --backend cpu");
  if (o.strictSeed && !o.strict)
    return errorf("--strict-seed needs --strict");
  if (o.backend == "cuda" && o.graph &&
      (!o.profile.empty() || !o.trace.empty()))
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
  return Status::ok();
}

Status CommandLine::parse(int argc, const char *const *argv) {
  // CLI11 reads `--steps= 3` as `--steps 3`'s flag with the next argument
  // as its value, and then blames that argument: name the flag instead.
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.empty() || arg[0] != '-' || arg == "--")
      continue;
    size_t eq = arg.find('=');
    const CLI::Option *opt = app_.get_option_no_throw(arg.substr(0, eq));
    if (!opt)
      continue;
    if (eq == std::string::npos) {
      // `--tokens x`: x is the value, whatever it looks like.
      i += opt->get_items_expected_min() > 0 ? 1 : 0;
      continue;
    }
    if (eq == arg.size() - 1)
      return errorf("option ", arg.substr(0, eq),
                    " needs a value (nothing after '=')");
  }
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    o_.help = true;
    return Status::ok();
  } catch (const CLI::ArgumentMismatch &e) {
    // The arguments ended before a flag's value: the flag is the last one
    // (`--steps` or `--steps=`).
    std::string last = argc > 1 ? argv[argc - 1] : "";
    std::string flag = last.substr(0, last.find('='));
    if (app_.get_option_no_throw(flag))
      return errorf("option ", flag, " needs a value");
    return errorf(e.what(), " (see --help)");
  } catch (const CLI::ParseError &e) {
    return errorf(e.what(), " (see --help)");
  }
  std::vector<std::string> unknown = app_.remaining();
  if (!unknown.empty()) {
    const std::string &a = unknown.front();
    if (a.rfind("-", 0) == 0)
      return errorf("unknown option '", a, "' (see --help)");
    return errorf("unexpected argument '", a, "' (one plan file only)");
  }
  BRAID_RETURN_IF_ERROR(applyInCommandLineOrder());
  return checkCombinations(o_);
}

} // namespace

Expected<Options> parseCommandLine(int argc, const char *const *argv) {
  Options o;
  CommandLine cl(o);
  Status st = cl.parse(argc, argv);
  if (!st)
    return st;
  return o;
}

namespace {
/// Device and inode of an existing file, or nullopt.
std::optional<std::pair<uint64_t, uint64_t>>
fileIdentity(const std::string &p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0)
    return std::nullopt;
  return std::make_pair(uint64_t(st.st_dev), uint64_t(st.st_ino));
}
} // namespace

Status checkOutputPaths(const Options &o) {
  // What is read: each named file, and for a --weights directory (or the
  // index of a sharded checkpoint) the checkpoint files in it.
  std::vector<std::pair<std::string, std::string>> inputs = {
      {"the plan", o.plan},
      {"the file given to --weights", o.weights},
      {"the file given to --check-against", o.checkAgainst},
      {"the file given to --prompt-file", o.promptFile}};
  std::error_code ec;
  std::filesystem::path weights = o.weights;
  std::filesystem::path dir;
  if (!o.weights.empty() && std::filesystem::is_directory(weights, ec))
    dir = weights;
  else if (weights.extension() == ".json")
    dir = weights.parent_path().empty() ? "." : weights.parent_path();
  if (!dir.empty())
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::string ext = it->path().extension().string();
      if (ext == ".safetensors" || ext == ".bin" || ext == ".json")
        inputs.push_back(
            {"a file of the --weights checkpoint", it->path().string()});
    }
  std::vector<std::pair<std::string, std::string>> outputs = {
      {"--dump-outputs", o.dumpOutputs},
      {"--profile", o.profile},
      {"--trace", o.trace}};
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[flag, path] = outputs[i];
    if (path.empty())
      continue;
    auto id = fileIdentity(path);
    auto canonical = [](const std::string &p) {
      std::error_code ec;
      std::filesystem::path a = std::filesystem::absolute(p, ec);
      std::filesystem::path c = std::filesystem::weakly_canonical(a, ec);
      return ec ? a.lexically_normal() : c;
    };
    std::filesystem::path where = canonical(path);
    auto same = [&](const std::string &other) {
      if (other.empty())
        return false;
      if (canonical(other) == where)
        return true;
      auto otherId = fileIdentity(other);
      return id && otherId && *id == *otherId;
    };
    for (const auto &[what, in] : inputs)
      if (same(in))
        return errorf(flag, " '", path, "' is ", what,
                      ": writing it would destroy what the run reads");
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (same(outputs[j].second))
        return errorf(flag, " and ", outputs[j].first, " name the same file '",
                      path, "'");
  }
  return Status::ok();
}

std::string commandLineHelp() {
  Options o;
  return CommandLine(o).help();
}

} // namespace braid::rt::cli
