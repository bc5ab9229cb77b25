//===- CommandLineFuzzer.cpp - libFuzzer target for braid-run's arguments -===//
//
// Feeds arbitrary bytes to braid-run's own parsers, both pure (no file is
// read or written):
//   - an input starting with the line `#tokens` is a prompt file's text:
//     parseTokenList (what --prompt-file reads; --tokens and --force-tokens
//     use the same numbers);
//   - anything else is a command line, one argument per line (at most 64;
//     argv[0] is braid-run): parseCommandLine, then, for a command line it
//     accepts, checkOutputPaths (which only compares paths and stats files).
// Parse errors are expected; a crash, a sanitizer report, a leak or a hang
// is a bug, and so is an accepted command line that breaks what the run
// relies on without checking again (PlanRun picks the backend and the
// attention kernel by name, ...): those abort.
//
// Seeds: the argument lists of test/run's braid-run lines (fuzz/run-fuzz.sh
// extracts them) and a few prompt files. Dictionary:
// fuzz/dict/command-line.dict.
//
//===----------------------------------------------------------------------===//
#include "runtime/Generation.h"
#include "runtime/cli/CommandLine.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

using namespace braid::rt;

namespace {

constexpr size_t kMaxArgs = 64;

[[noreturn]] void broken(const std::string &what) {
  std::fprintf(stderr, "command-line-fuzzer: %s\n", what.c_str());
  std::abort();
}

/// What braid-run's run code takes for granted once the parser accepted
/// the command line (runtime/cli/PlanRun.cpp, RunCommand.cpp).
void checkAccepted(const cli::Options &o) {
  auto fail = [](const std::string &what) { broken("accepted, but " + what); };
  if (o.backend != "cpu" && o.backend != "cuda")
    fail("the backend is '" + o.backend + "'");
  if (o.attentionKernel != cuda::AttentionKernel::Auto && o.backend != "cuda")
    fail("an attention kernel is chosen for the cpu backend");
  if (o.steps < 0 || o.iters < 0 || o.warmup < 0 || o.sequences < 0)
    fail("a count is negative");
  if (o.ranks != -1 && o.ranks < 1)
    fail("--ranks is " + std::to_string(o.ranks));
  if (!(o.timeout > 0 && o.timeout <= 1e6))
    fail("the timeout is out of range");
  if ((o.atol && !(*o.atol >= 0)) || (o.rtol && !(*o.rtol >= 0)))
    fail("a tolerance is negative or NaN");
  if (o.gemmAutotune < 0 || o.gemmAutotune > 64)
    fail("--gemm-autotune is out of range");
  if (!o.tokens.empty() && !o.promptFile.empty())
    fail("both --tokens and --prompt-file give the prompt");
  if (o.strictSeed && !o.strict)
    fail("--strict-seed is set without --strict");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  constexpr std::string_view kTokens = "#tokens\n";
  if (text.substr(0, kTokens.size()) == kTokens) {
    (void)parseTokenList(text.substr(kTokens.size()), "fuzzed prompt file");
    return 0;
  }
  std::vector<std::string> args{"braid-run"};
  size_t begin = 0;
  // A final newline ends the last argument; "a\n\nb" has an empty one.
  while (begin < text.size() && args.size() <= kMaxArgs) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos)
      end = text.size();
    args.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  argv.push_back(nullptr);
  auto options = cli::parseCommandLine(int(args.size()), argv.data());
  if (!options) {
    if (options.status().message().empty())
      broken("the parser refused a command line with an empty message");
    return 0;
  }
  if (options->help)
    return 0;
  checkAccepted(*options);
  (void)cli::checkOutputPaths(*options);
  return 0;
}
