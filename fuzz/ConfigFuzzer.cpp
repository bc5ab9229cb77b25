//===- ConfigFuzzer.cpp - libFuzzer target for config.json -> braid IR ----===//
//
// Feeds arbitrary bytes to the importer as a Hugging Face config.json, the
// way braid-import does: parseModelConfig, then (for a config that parses)
// importModel, the dialect verifier on the module it returns, and the
// per-rank statistics of `braid-import --stats` (computeStepStats +
// printStepStats, which multiply shapes into bytes and FLOPs).
//
// Import options: an input may start with one line
//   #braid --tp 2 --batch 3 --seq 5 --max-seq 9 --dtype fp32 \
//          --keep-logits-sharded --prefill-all-logits
// (any subset, any int64 values, hostile ones included); the rest is the
// config. That line is exactly the braid-import flags that replay the input:
//   tail -n +2 crash-... > c.json && braid-import c.json --tp 2 ...
// Without it the config is imported twice, with --tp 1 and --tp 2 (batch 1,
// seq 4, max-seq 8, bf16).
//
// Findings, besides crashes and sanitizer reports (UBSan catches the int64
// overflow of a byte or FLOP count):
//   - importModel succeeds but the module does not verify;
//   - importModel fails with "internal error" (the importer accepted a
//     config that it then built invalid IR from: its own checks must refuse
//     that config, naming the field).
// Both abort with the message, so libFuzzer keeps the input.
//
// Speed bound: configs of more than kMaxLayers layers are parsed but not
// imported (the IR grows with the layers; the numbers in each op do not).
//
// Seeds: models/*/config.json, test/frontend/Inputs/*.json and a few option
// lines (fuzz/run-fuzz.sh). Dictionary: fuzz/dict/config.dict.
//
//===----------------------------------------------------------------------===//
#include "dialect/BraidDialect.h"
#include "frontend/Importer.h"
#include "frontend/ModelConfig.h"
#include "fuzz/FuzzContext.h"
#include "passes/StepStats.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr int64_t kMaxLayers = 8;
// A fresh MLIRContext every so many inputs: the context keeps every type
// and attribute it ever uniqued, which would otherwise grow without bound.
constexpr unsigned kContextLifetime = 2000;

struct Parsed {
  std::vector<braid::ImportOptions> options;
  llvm::StringRef json;
};

bool readInt(llvm::StringRef &rest, int64_t &out) {
  rest = rest.ltrim(' ');
  llvm::StringRef word = rest.take_until([](char c) { return c == ' '; });
  rest = rest.drop_front(word.size());
  // getAsInteger fails on overflow: such a flag is ignored (braid-import's
  // own parser rejects it too).
  return !word.getAsInteger(10, out);
}

Parsed parseInput(llvm::StringRef text) {
  Parsed p;
  braid::ImportOptions base;
  base.batch = 1;
  base.seq = 4;
  base.maxSeq = 8;
  base.dtype = braid::ElementType::BF16;
  if (!text.starts_with("#braid")) {
    p.json = text;
    for (int64_t tp : {1, 2}) {
      base.tp = tp;
      p.options.push_back(base);
    }
    return p;
  }
  auto [line, rest] = text.split('\n');
  p.json = rest;
  llvm::StringRef flags = line.drop_front(6);
  while (true) {
    flags = flags.ltrim(' ');
    if (flags.empty())
      break;
    llvm::StringRef flag = flags.take_until([](char c) { return c == ' '; });
    flags = flags.drop_front(flag.size());
    int64_t v = 0;
    if (flag == "--tp" && readInt(flags, v))
      base.tp = v;
    else if (flag == "--batch" && readInt(flags, v))
      base.batch = v;
    else if (flag == "--seq" && readInt(flags, v))
      base.seq = v;
    else if (flag == "--max-seq" && readInt(flags, v))
      base.maxSeq = v;
    else if (flag == "--keep-logits-sharded")
      base.keepLogitsSharded = true;
    else if (flag == "--prefill-all-logits")
      base.prefillAllLogits = true;
    else if (flag == "--prefill-bucket" && readInt(flags, v))
      base.prefillBuckets.push_back(v); // repeated: one bucket each
    else if (flag == "--dtype") {
      flags = flags.ltrim(' ');
      llvm::StringRef d = flags.take_until([](char c) { return c == ' '; });
      flags = flags.drop_front(d.size());
      if (d == "fp32")
        base.dtype = braid::ElementType::F32;
      else if (d == "fp16")
        base.dtype = braid::ElementType::F16;
      else
        base.dtype = braid::ElementType::BF16;
    }
  }
  p.options.push_back(base);
  return p;
}

[[noreturn]] void finding(const std::string &what) {
  std::fprintf(stderr, "config-fuzzer: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

mlir::MLIRContext &context() {
  return braid::fuzz::recycledContext(
      kContextLifetime, [](mlir::DialectRegistry &registry) {
        registry.insert<mlir::braid::BraidDialect, mlir::func::FuncDialect>();
      });
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  Parsed input = parseInput(text);

  // Unknown fields are ignored, not refused, so a mutated key name does not
  // stop the input before the importer (the interesting part).
  braid::ConfigOptions configOptions;
  configOptions.allowUnknownFields = true;
  llvm::Expected<braid::ModelConfig> config =
      braid::parseModelConfig(input.json, "<fuzz>", configOptions);
  if (!config) {
    llvm::consumeError(config.takeError());
    return 0;
  }
  if (config->numLayers > kMaxLayers)
    return 0;

  mlir::MLIRContext &ctx = context();
  for (const braid::ImportOptions &options : input.options) {
    auto module = braid::importModel(ctx, *config, options);
    if (!module) {
      std::string message = llvm::toString(module.takeError());
      if (llvm::StringRef(message).contains("internal error"))
        finding("the importer accepted a config it cannot build: " + message);
      continue;
    }
    if (mlir::failed(mlir::verify(**module)))
      finding("importModel returned a module that does not verify");
    std::string sink;
    llvm::raw_string_ostream os(sink);
    for (auto func : (**module).getOps<mlir::func::FuncOp>()) {
      // Sizes whose bytes or FLOPs do not fit int64 are an error, not a
      // wrapped number.
      auto stats = mlir::braid::computeStepStats(func);
      if (!stats) {
        llvm::consumeError(stats.takeError());
        continue;
      }
      mlir::braid::printStepStats(os, *stats);
    }
  }
  return 0;
}
