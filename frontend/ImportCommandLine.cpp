//===- ImportCommandLine.cpp - Shared importer flags ----------------------===//
#include "frontend/ImportCommandLine.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

static cl::OptionCategory importCategory("Model import options");

static cl::opt<std::string> configPath(
    cl::Positional, cl::desc("<config.json> (default: the embedded tiny LLaMA)"),
    cl::init(""), cl::cat(importCategory));
static cl::opt<int64_t> tp("tp", cl::desc("Tensor-parallel degree"),
                           cl::init(1), cl::cat(importCategory));
static cl::opt<int64_t> batch("batch", cl::desc("Sequences per step"),
                              cl::init(1), cl::cat(importCategory));
static cl::opt<int64_t> seq("seq", cl::desc("Prefill tokens per sequence"),
                            cl::init(16), cl::cat(importCategory));
static cl::opt<int64_t>
    maxSeq("max-seq",
           cl::desc("KV-cache capacity (default: the model's max positions)"),
           cl::init(0), cl::cat(importCategory));
static cl::opt<braid::ElementType> dtype(
    "dtype", cl::desc("Element type of activations and parameters"),
    cl::values(clEnumValN(braid::ElementType::BF16, "bf16", "bfloat16"),
               clEnumValN(braid::ElementType::F16, "fp16", "float16"),
               clEnumValN(braid::ElementType::F32, "fp32", "float32")),
    cl::init(braid::ElementType::BF16), cl::cat(importCategory));
static cl::opt<bool> keepLogitsSharded(
    "keep-logits-sharded",
    cl::desc("Return each rank's vocabulary shard of the logits (no "
             "all_gather)"),
    cl::cat(importCategory));
static cl::opt<bool> prefillAllLogits(
    "prefill-all-logits",
    cl::desc("Prefill returns logits for every token (default: the last)"),
    cl::cat(importCategory));

static cl::opt<bool> allowUnknownConfigFields(
    "allow-unknown-config-fields",
    cl::desc("Ignore config.json fields Braid neither reads nor knows to be "
             "harmless (each is named in a warning); by default they are an "
             "error, since one may change the logits"),
    cl::cat(importCategory));

llvm::Expected<braid::ModelConfig> braid::modelConfigFromCommandLine() {
  ConfigOptions options;
  options.allowUnknownFields = allowUnknownConfigFields;
  auto config = configPath.empty()
                    ? parseModelConfig(tinyLlamaConfigJson(),
                                       "<embedded tiny-llama>", options)
                    : loadModelConfig(configPath, options);
  if (config)
    for (const std::string &field : config->ignoredUnknownFields)
      llvm::errs() << "warning: " << configPath << ": ignoring config field '"
                   << field << "' (--allow-unknown-config-fields)\n";
  return config;
}

braid::ImportOptions braid::importOptionsFromCommandLine() {
  ImportOptions options;
  options.tp = tp;
  options.batch = batch;
  options.seq = seq;
  options.maxSeq = maxSeq;
  options.dtype = dtype;
  options.keepLogitsSharded = keepLogitsSharded;
  options.prefillAllLogits = prefillAllLogits;
  return options;
}
