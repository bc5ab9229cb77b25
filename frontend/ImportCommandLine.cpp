//===- ImportCommandLine.cpp - Shared importer flags ----------------------===//
#include "frontend/ImportCommandLine.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace cl = llvm::cl;

static cl::OptionCategory importCategory("Model import options");

static cl::opt<std::string> configPath(
    cl::Positional, cl::desc("<config.json> (default: the embedded tiny LLaMA)"),
    cl::init(""), cl::cat(importCategory));
static cl::opt<int64_t, false, braid::DecimalParser>
    tp("tp", cl::desc("Tensor-parallel degree (default 1)"), cl::init(1),
       cl::cat(importCategory));
static cl::opt<int64_t, false, braid::DecimalParser>
    batch("batch", cl::desc("Sequences per step (default 1)"), cl::init(1),
          cl::cat(importCategory));
static cl::opt<int64_t, false, braid::DecimalParser>
    seq("seq", cl::desc("Prefill tokens per sequence (default 16)"),
        cl::init(16), cl::cat(importCategory));
static cl::opt<int64_t, false, braid::DecimalParser>
    maxSeq("max-seq",
           cl::desc("KV-cache capacity; 0 (the default): the model's max "
                    "positions"),
           cl::init(0), cl::cat(importCategory));
static cl::opt<braid::ElementType> dtype(
    "dtype", cl::desc("Element type of activations and parameters (default bf16)"),
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

static cl::list<std::string> prefillBuckets(
    "prefill-buckets",
    cl::desc("Prefill shape buckets: token counts, one prefill function "
             "each (prefill_<S>) sharing parameters and the KV cache; "
             "braid-run runs a prompt in the smallest bucket that holds it, "
             "padded. 'auto': powers of two from 16 up to --seq, and --seq. "
             "With a list, --seq must be at most its largest bucket. "
             "Default: none, one prefill of exactly --seq tokens"),
    cl::CommaSeparated, cl::cat(importCategory));

static cl::list<int64_t, bool, braid::DecimalParser> decodeBatches(
    "decode-batches",
    cl::desc("Decode batch buckets: besides decode (all --batch sequences), "
             "one decode_<b> per listed b < --batch, running the first b "
             "sequences of the shared KV cache; braid-run --sequences N "
             "decodes in the smallest that holds N. Default: none"),
    cl::CommaSeparated, cl::cat(importCategory));

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
  if (config && configPath.empty())
    llvm::errs() << "note: no config.json given: using the bundled tiny "
                    "LLaMA (models/tiny-llama/config.json)\n";
  if (config)
    for (const std::string &field : config->ignoredUnknownFields)
      llvm::errs() << "warning: " << configPath << ": ignoring config field '"
                   << field << "' (--allow-unknown-config-fields)\n";
  return config;
}

/// --prefill-buckets: ids, or `auto`. Not sorted here: the importer
/// refuses a list that is not strictly increasing, naming the pair.
static llvm::Expected<std::vector<int64_t>> bucketsFromCommandLine() {
  std::vector<int64_t> out;
  if (prefillBuckets.size() == 1 && prefillBuckets[0] == "auto") {
    // Doubling stops at seq, before it could overflow (the importer
    // refuses a seq past its limits, naming it).
    for (int64_t s = 16; s < seq;) {
      out.push_back(s);
      s = s > seq / 2 ? int64_t(seq) : 2 * s;
    }
    out.push_back(seq);
    return out;
  }
  for (const std::string &item : prefillBuckets) {
    int64_t v;
    if (llvm::StringRef(item).getAsInteger(10, v))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--prefill-buckets: '" + item +
              "' is not a token count (a list of integers, or 'auto')");
    out.push_back(v);
  }
  return out;
}

/// --seq: the prefill length, or with explicit buckets and no --seq, the
/// largest bucket (the longest prompt the plan serves), so that the default
/// of 16 neither outgrows a small --max-seq nor undersells the buckets.
static int64_t seqFromCommandLine(const std::vector<int64_t> &buckets) {
  if (buckets.empty() || seq.getNumOccurrences())
    return seq;
  // At least 1, so a bad bucket is refused as a bucket, not as --seq.
  return std::max<int64_t>(1,
                           *std::max_element(buckets.begin(), buckets.end()));
}

llvm::Expected<braid::ImportOptions> braid::importOptionsFromCommandLine() {
  ImportOptions options;
  auto buckets = bucketsFromCommandLine();
  if (!buckets)
    return buckets.takeError();
  options.prefillBuckets = std::move(*buckets);
  options.decodeBatches.assign(decodeBatches.begin(), decodeBatches.end());
  options.tp = tp;
  options.batch = batch;
  options.seq = seqFromCommandLine(options.prefillBuckets);
  options.maxSeq = maxSeq;
  options.dtype = dtype;
  options.keepLogitsSharded = keepLogitsSharded;
  options.prefillAllLogits = prefillAllLogits;
  return options;
}

void braid::showOnlyBraidOptionsInHelp(
    llvm::ArrayRef<const cl::OptionCategory *> toolCategories,
    bool showMlirOptions) {
  llvm::SmallVector<const cl::OptionCategory *> keep(toolCategories.begin(),
                                                     toolCategories.end());
  keep.push_back(&importCategory);
  cl::HideUnrelatedOptions(keep);
  if (!showMlirOptions)
    return;
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.starts_with("mlir-"))
      option->setHiddenFlag(cl::NotHidden);
}
