//===- Generation.cpp - Prefill + greedy decode over a plan ---------------===//
#include "runtime/Generation.h"
#include "runtime/CheckedMath.h"
#include "runtime/ShardedOutput.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

using namespace braid::rt;
namespace plan = braid::plan;

namespace {

const plan::Tensor *bindingTensor(const plan::Function &f,
                                  const flatbuffers::Vector<
                                      flatbuffers::Offset<plan::Binding>> *list,
                                  std::string_view name) {
  if (!list)
    return nullptr;
  for (const plan::Binding *b : *list)
    if (b->name()->string_view() == name)
      return f.tensors()->Get(unsigned(b->tensor()));
  return nullptr;
}

} // namespace

/// `<prefix><N>` with N a positive integer: N; 0 for any other name.
static int64_t numberAfter(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix)
    return 0;
  std::string_view digits = name.substr(prefix.size());
  int64_t v = 0;
  auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v < 1)
    return 0;
  return v;
}

/// `prefill_<S>`: S, or 0 for any other name.
static int64_t bucketTokens(std::string_view name) {
  return numberAfter(name, "prefill_");
}

Expected<GenerationShape> braid::rt::generationShape(const plan::Plan &p) {
  GenerationShape shape;
  // The prefill functions (one `prefill`, or the buckets), then decode.
  std::vector<const plan::Function *> prefills, decodeBuckets;
  const plan::Function *decode = nullptr, *exact = nullptr;
  if (p.functions())
    for (const plan::Function *g : *p.functions()) {
      std::string_view name = g->name()->string_view();
      if (name == "decode")
        decode = g;
      else if (name.substr(0, 7) == "decode_")
        decodeBuckets.push_back(g);
      else if (name == "prefill")
        exact = g;
      else if (bucketTokens(name) > 0)
        prefills.push_back(g);
    }
  if (exact && !prefills.empty())
    return errorf("plan has both 'prefill' and prefill buckets ('",
                  prefills.front()->name()->string_view(),
                  "'); generation needs one or the other");
  if (exact)
    prefills.push_back(exact);
  if (prefills.empty())
    return errorf("plan has no 'prefill' function (nor prefill_<S> buckets); "
                  "generation needs prefill and decode");
  if (!decode)
    return errorf("plan has no 'decode' function; generation needs prefill "
                  "and decode");
  std::sort(prefills.begin(), prefills.end(),
            [](const plan::Function *a, const plan::Function *b) {
              return bucketTokens(a->name()->string_view()) <
                     bucketTokens(b->name()->string_view());
            });
  prefills.push_back(decode);
  prefills.insert(prefills.end(), decodeBuckets.begin(), decodeBuckets.end());
  bool first = true;
  for (const plan::Function *f : prefills) {
    std::string name = f->name()->str();
    bool isDecodeBucket = std::find(decodeBuckets.begin(), decodeBuckets.end(),
                                    f) != decodeBuckets.end();
    bool isDecode = f == decode || isDecodeBucket;
    const plan::Tensor *ids = bindingTensor(*f, f->inputs(), "input_ids");
    const plan::Tensor *pos = bindingTensor(*f, f->inputs(), "positions");
    const plan::Binding *logits = outputBinding(*f, "logits");
    if (!ids || !pos || !logits)
      return errorf("function '", name,
                    "' needs inputs 'input_ids' and 'positions' and an "
                    "output 'logits'");
    Shape idShape = tensorShape(*ids), posShape = tensorShape(*pos),
          logitShape = wholeShape(*f, *logits); // gathered if sharded
    if (idShape.size() != 2 || posShape != idShape)
      return errorf("function '", name, "': input_ids ",
                    formatShape(idShape), " and positions ",
                    formatShape(posShape), " must both be [batch, tokens]");
    if (isFloatType(ids->dtype()) || isFloatType(pos->dtype()))
      return errorf("function '", name,
                    "': input_ids and positions must be integers");
    if (logitShape.size() < 2 || logitShape.front() != idShape[0] ||
        !isFloatType(f->tensors()->Get(unsigned(logits->tensor()))->dtype()))
      return errorf("function '", name, "': logits ", formatShape(logitShape),
                    " must be floating point [batch, ..., vocab] with batch ",
                    idShape[0]);
    // Generation divides by batch and vocab and reads the last logits row
    // of every sequence: none of them may be empty.
    Shape positions(logitShape.begin() + 1, logitShape.end() - 1);
    std::optional<int64_t> logitTokens = braid::checkedProduct(positions);
    if (idShape[0] < 1 || idShape[1] < 1 || logitShape.back() < 1 ||
        !logitTokens || *logitTokens < 1)
      return errorf("function '", name, "': input_ids ", formatShape(idShape),
                    " and logits ", formatShape(logitShape),
                    " leave nothing to generate from: batch, tokens, vocab "
                    "and the logit positions must all be >= 1");
    if (first) {
      first = false;
      shape.batch = idShape[0];
      shape.vocab = logitShape.back();
      shape.idsType = ids->dtype();
      shape.positionsType = pos->dtype();
      // Every id in [0, vocab) must survive the trip through input_ids.
      if (ids->dtype() == plan::DType::I32 &&
          shape.vocab - 1 > std::numeric_limits<int32_t>::max())
        return errorf("function '", name, "': vocab ", shape.vocab,
                      " has ids that do not fit its i32 input_ids");
    } else if ((!isDecodeBucket && idShape[0] != shape.batch) ||
               logitShape.back() != shape.vocab ||
               ids->dtype() != shape.idsType ||
               pos->dtype() != shape.positionsType ||
               (isDecode && idShape[1] != 1)) {
      return errorf(name, " takes ", formatShape(idShape), " ",
                    dtypeName(ids->dtype()), " ids and returns ",
                    logitShape.back(), " logits; expected [", shape.batch,
                    isDecode ? ", 1]" : ", tokens]", " ",
                    dtypeName(shape.idsType), " and ", shape.vocab,
                    " as the first prefill");
    }
    if (isDecodeBucket) {
      // decode_<b>: b sequences of the same cache, fewer than the plan's.
      int64_t b = numberAfter(name, "decode_");
      if (b != idShape[0] || b >= shape.batch)
        return errorf("function '", name, "' takes ", idShape[0],
                      " sequences; a decode batch bucket decode_<b> takes b "
                      "< the plan's batch ", shape.batch);
      shape.decodeBuckets.emplace_back(b, name);
      continue;
    }
    if (isDecode) {
      // Attention (q, k, v, k_cache, v_cache, position): a cache row per
      // position, so the run's last position must be below dim 1.
      if (f->ops())
        for (const plan::Op *op : *f->ops()) {
          if (op->opcode() != plan::OpCode::Attention || !op->operands() ||
              op->operands()->size() < 4)
            continue;
          unsigned t = unsigned(op->operands()->Get(3));
          if (!f->tensors() || t >= f->tensors()->size())
            continue; // the loader refuses it; nothing to learn here
          Shape cache = tensorShape(*f->tensors()->Get(t));
          if (cache.size() >= 2 && cache[1] > 0 &&
              (shape.cacheRows == 0 || cache[1] < shape.cacheRows))
            shape.cacheRows = cache[1];
        }
      continue;
    }
    if (f == exact) {
      shape.prefillFunction = name;
      shape.prefillTokens = shape.promptLength = idShape[1];
      continue;
    }
    PrefillBucket bucket;
    bucket.tokens = bucketTokens(name);
    bucket.function = name;
    if (idShape[1] != bucket.tokens)
      return errorf("function '", name, "' takes ", idShape[1],
                    " tokens per sequence; its name says ", bucket.tokens);
    if (const plan::Tensor *rows =
            bindingTensor(*f, f->inputs(), "logit_rows")) {
      if (tensorShape(*rows) != Shape{shape.batch, 1} ||
          isFloatType(rows->dtype()))
        return errorf("function '", name, "': logit_rows ",
                      formatShape(tensorShape(*rows)), " ",
                      dtypeName(rows->dtype()), " must be integer [",
                      shape.batch, ", 1]");
      bucket.logitRows = true;
      bucket.logitRowsType = rows->dtype();
    } else if (*logitTokens != bucket.tokens) {
      // Without logit_rows a padded prompt's last token cannot be found:
      // the bucket must return every position.
      return errorf("function '", name, "' returns ", *logitTokens,
                    " logit positions and has no 'logit_rows' input; a "
                    "bucket returns every position or takes logit_rows");
    }
    shape.buckets.push_back(bucket);
  }
  std::sort(shape.decodeBuckets.begin(), shape.decodeBuckets.end());
  shape.planBatch = shape.decodeBatch = shape.batch;
  if (!shape.buckets.empty()) {
    const PrefillBucket &largest = shape.buckets.back();
    shape.prefillFunction = largest.function;
    shape.prefillTokens = shape.promptLength = largest.tokens;
    shape.logitRows = largest.logitRows;
    shape.logitRowsType = largest.logitRowsType;
  }
  return shape;
}

Expected<GenerationShape> braid::rt::shapeForPrompt(const GenerationShape &shape,
                                                    size_t promptIds) {
  if (shape.buckets.empty() || shape.batch < 1)
    return shape;
  std::string sizes;
  for (const PrefillBucket &b : shape.buckets)
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(b.tokens);
  if (promptIds == 0 || promptIds % size_t(shape.batch) != 0)
    return errorf("the prompt has ", promptIds, " tokens, not a whole, "
                  "non-zero number per sequence for batch ", shape.batch);
  int64_t length = int64_t(promptIds / size_t(shape.batch));
  for (const PrefillBucket &b : shape.buckets)
    if (b.tokens >= length) {
      GenerationShape out = shape;
      out.promptLength = length;
      out.prefillFunction = b.function;
      out.prefillTokens = b.tokens;
      out.logitRows = b.logitRows;
      out.logitRowsType = b.logitRowsType;
      return out;
    }
  return errorf("a prompt of ", length, " tokens per sequence is longer than "
                "the plan's largest prefill bucket (buckets: ", sizes,
                "); compile with a larger --prefill-buckets entry");
}

Expected<GenerationShape>
braid::rt::shapeForSequences(const GenerationShape &shape, int64_t sequences) {
  if (sequences < 1 || sequences > shape.planBatch)
    return errorf("--sequences ", sequences, ": the plan runs 1 to ",
                  shape.planBatch, " sequences (its --batch)");
  GenerationShape out = shape;
  out.batch = sequences;
  out.decodeFunction = "decode";
  out.decodeBatch = shape.planBatch;
  for (const auto &[b, function] : shape.decodeBuckets)
    if (b >= sequences) {
      out.decodeFunction = function;
      out.decodeBatch = b;
      break;
    }
  return out;
}

Expected<GenerationShape> braid::rt::shapeForRun(const GenerationShape &shape,
                                                 int64_t sequences,
                                                 size_t promptIds) {
  Expected<GenerationShape> out = shape;
  if (sequences != 0)
    out = shapeForSequences(shape, sequences);
  if (out && promptIds != 0)
    out = shapeForPrompt(*out, promptIds);
  return out;
}

std::vector<int64_t> braid::rt::syntheticPrompt(const GenerationShape &shape,
                                                uint64_t seed) {
  // SplitMix64: well-mixed, and identical on every platform.
  uint64_t state = seed ^ 0x5851f42d4c957f2dull;
  if (shape.batch < 1 || shape.promptLength < 1 || shape.vocab < 1)
    return {}; // generate() names what is wrong with such a shape
  std::vector<int64_t> ids(size_t(shape.batch * shape.promptLength));
  for (int64_t &id : ids) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    id = int64_t(z % uint64_t(shape.vocab));
  }
  return ids;
}

StepInputs braid::rt::stepInputs(const GenerationShape &shape,
                                 const std::vector<int64_t> &ids,
                                 int64_t tokens, int64_t start) {
  int64_t b = tokens > 0 ? int64_t(ids.size()) / tokens : 0;
  std::vector<int64_t> positions(static_cast<size_t>(b * tokens));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t t = 0; t < tokens; ++t)
      positions[size_t(bi * tokens + t)] = start + t;
  StepInputs inputs;
  inputs["input_ids"] = HostTensor::fromInts(shape.idsType, {b, tokens}, ids);
  inputs["positions"] =
      HostTensor::fromInts(shape.positionsType, {b, tokens}, positions);
  return inputs;
}

StepInputs braid::rt::decodeInputs(const GenerationShape &shape,
                                   const std::vector<int64_t> &tokens,
                                   int64_t position) {
  std::vector<int64_t> fed = tokens;
  if (int64_t(fed.size()) < shape.decodeBatch)
    fed.resize(size_t(shape.decodeBatch), 0);
  return stepInputs(shape, fed, 1, position);
}

/// How many of `logits` ([B, positions, V], row-major) are not finite and
/// where the first is; "" when all are finite.
static std::string describeNonFinite(const std::vector<float> &logits,
                                     int64_t positions, int64_t vocab) {
  int64_t count = 0, first = -1;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i])) {
      if (first < 0)
        first = int64_t(i);
      ++count;
    }
  if (first < 0)
    return "";
  int64_t perSequence = positions * vocab;
  std::ostringstream os;
  os << count << " of " << logits.size()
     << " logits are not finite, the first (" << logits[size_t(first)]
     << ") at batch " << first / perSequence << ", position "
     << first % perSequence / vocab << ", vocab id " << first % vocab;
  return os.str();
}

Status braid::rt::checkGeneration(const GenerationShape &shape,
                                  const GenerationOptions &options) {
  const int64_t b = shape.batch, s = shape.promptLength;
  // generationShape refuses these; a hand-made shape must not divide by 0.
  if (b < 1 || s < 1 || shape.vocab < 1)
    return errorf("generation needs batch, prompt length and vocab >= 1, got ",
                  b, ", ", s, " and ", shape.vocab);
  if (options.decodeSteps < 0)
    return errorf("decode steps must be >= 0, got ", options.decodeSteps);
  // The last position fed (s + decodeSteps - 1) must fit the positions.
  if (shape.positionsType == plan::DType::I32 &&
      s - 1 + int64_t(options.decodeSteps) >
          std::numeric_limits<int32_t>::max())
    return errorf(options.decodeSteps, " decode steps after a prompt of ", s,
                  " reach positions that do not fit the plan's i32 positions");
  // Decode step k feeds position s + k - 1: found here, not at the step
  // whose cache write would fail.
  if (shape.cacheRows > 0 && s + int64_t(options.decodeSteps) > shape.cacheRows)
    return errorf("a prompt of ", s, " tokens and ", options.decodeSteps,
                  " decode steps need ", s + int64_t(options.decodeSteps),
                  " positions; the plan's KV cache holds ", shape.cacheRows,
                  " (braid-compile --max-seq)");
  if (int64_t(options.prompt.size()) != b * s)
    return errorf("the prompt has ", options.prompt.size(),
                  " tokens; the plan's prefill takes ", b, " x ", s, " = ",
                  b * s);
  for (int64_t id : options.prompt)
    if (id < 0 || id >= shape.vocab)
      return errorf("prompt token ", id, " is outside the vocabulary [0, ",
                    shape.vocab, ")");
  for (const std::vector<int64_t> &forced : options.forcedTokens) {
    if (int64_t(forced.size()) != b)
      return errorf("forced tokens hold ", forced.size(),
                    " ids for a decode step, the batch is ", b);
    for (int64_t id : forced)
      if (id < 0 || id >= shape.vocab)
        return errorf("forced token ", id, " is outside the vocabulary [0, ",
                      shape.vocab, ")");
  }
  if (!options.forcedTokens.empty() &&
      int(options.forcedTokens.size()) < options.decodeSteps)
    return errorf("forced tokens cover ", options.forcedTokens.size(),
                  " decode steps, need ", options.decodeSteps);
  return Status::ok();
}

Expected<std::vector<StepRecord>>
braid::rt::generate(const GenerationShape &shape,
                    const GenerationOptions &options, const StepFn &step) {
  BRAID_RETURN_IF_ERROR(checkGeneration(shape, options));
  const int64_t b = shape.batch, s = shape.promptLength;

  // A bucket takes `padded` tokens per sequence: the prompt, then pad
  // tokens (id 0) at the following positions. Causal attention keeps them
  // out of the prompt's results, their cache rows are rewritten by the
  // decode steps before any query reaches them, and their logits are
  // dropped (logit_rows, or trimmed below).
  const int64_t padded = std::max(shape.prefillTokens, s);
  // The plan's steps may run more sequences than this run generates (its
  // batch, or a decode batch bucket): the extra ones are padding (id 0,
  // the same positions) whose logits are dropped.
  const int64_t prefillBatch = std::max(shape.planBatch, b);
  std::vector<StepRecord> records;
  std::vector<int64_t> ids = options.prompt;
  for (int i = 0; i <= options.decodeSteps; ++i) {
    StepRecord r;
    r.function = i == 0 ? shape.prefillFunction : shape.decodeFunction;
    if (i > 0)
      ids = options.forcedTokens.empty() ? records.back().nextToken
                                         : options.forcedTokens[size_t(i - 1)];
    StepInputs inputs;
    int64_t fedBatch;
    if (i == 0) {
      std::vector<int64_t> fed(size_t(prefillBatch * padded), 0);
      for (int64_t bi = 0; bi < b; ++bi)
        std::copy_n(ids.begin() + bi * s, s, fed.begin() + bi * padded);
      inputs = stepInputs(shape, fed, padded, 0);
      if (shape.logitRows) {
        std::vector<int64_t> rows(static_cast<size_t>(prefillBatch));
        for (int64_t bi = 0; bi < prefillBatch; ++bi)
          rows[size_t(bi)] = bi * padded + s - 1;
        inputs["logit_rows"] =
            HostTensor::fromInts(shape.logitRowsType, {prefillBatch, 1}, rows);
      }
      fedBatch = prefillBatch;
    } else {
      inputs = decodeInputs(shape, ids, s + i - 1);
      fedBatch = std::max(shape.decodeBatch, b);
    }
    r.inputIds = ids;

    auto start = std::chrono::steady_clock::now();
    auto outputs = step(r.function, inputs);
    r.milliseconds = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (!outputs)
      return errorf(r.function, " step ", i, ": ", outputs.status().message());
    auto logits = outputs->find("logits");
    if (logits == outputs->end())
      return errorf(r.function, " step ", i, " returned no logits");
    std::vector<float> all = logits->second.toFloats();
    int64_t rowElems = fedBatch * shape.vocab; // <= the plan's logits elements
    if (all.empty() || int64_t(all.size()) % rowElems)
      return errorf(r.function, " step ", i, " returned ", all.size(),
                    " logits, not a whole number of [", fedBatch, ", ",
                    shape.vocab, "] rows");
    int64_t positionsOut = int64_t(all.size()) / rowElems;
    // The generated sequences come first ([B, T, V], sequence-major).
    all.resize(size_t(b * positionsOut * shape.vocab));
    if (i == 0 && positionsOut == padded && padded > s) {
      // A bucket returning every position: keep the prompt's.
      std::vector<float> kept(size_t(b * s * shape.vocab));
      for (int64_t bi = 0; bi < b; ++bi)
        std::copy_n(all.begin() + bi * padded * shape.vocab, s * shape.vocab,
                    kept.begin() + bi * s * shape.vocab);
      all = std::move(kept);
      positionsOut = s;
    }
    if (!options.allowNonFinite) {
      std::string bad = describeNonFinite(all, positionsOut, shape.vocab);
      if (!bad.empty()) {
        std::string why;
        if (options.explainNonFinite) {
          std::vector<StepRecord> done = records;
          done.push_back(r);
          why = options.explainNonFinite(done);
        }
        return errorf(r.function, " step ", i, ": ", bad,
                      why.empty()
                          ? std::string(" (--allow-non-finite accepts them)")
                          : "; " + why);
      }
    }
    r.positions = positionsOut;
    r.allLogits = all;
    r.logits.resize(size_t(b * shape.vocab));
    for (int64_t bi = 0; bi < b; ++bi) {
      const float *row =
          all.data() + (bi * positionsOut + positionsOut - 1) * shape.vocab;
      std::copy(row, row + shape.vocab, r.logits.begin() + bi * shape.vocab);
      r.nextToken.push_back(
          int64_t(std::max_element(row, row + shape.vocab) - row));
    }
    records.push_back(std::move(r));
  }
  return records;
}

Expected<std::vector<int64_t>>
braid::rt::parseTokenList(std::string_view text, const std::string &source) {
  std::vector<int64_t> ids;
  auto isSeparator = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
           c == '\f' || c == '\v';
  };
  size_t i = 0;
  while (i < text.size()) {
    if (isSeparator(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !isSeparator(text[end]))
      ++end;
    std::string_view item = text.substr(i, end - i);
    int64_t id = 0;
    auto [last, ec] =
        std::from_chars(item.data(), item.data() + item.size(), id);
    if (ec != std::errc() || last != item.data() + item.size()) {
      // A hostile file may hold one huge "item": name only its start.
      std::string shown(item.substr(0, 40));
      return errorf(source, ": item ", ids.size() + 1, " '", shown,
                    item.size() > 40 ? "..." : "",
                    "' is not a token id (ids are integers separated by "
                    "whitespace or commas)");
    }
    ids.push_back(id);
    i = end;
  }
  if (ids.empty())
    return errorf(source, " holds no token ids");
  return ids;
}

Expected<std::vector<std::vector<int64_t>>>
braid::rt::forcedTokensByStep(const std::vector<int64_t> &list, int64_t batch) {
  if (batch < 1)
    return errorf("forced tokens need a batch >= 1, got ", batch);
  if (list.empty() || int64_t(list.size()) % batch)
    return errorf("--force-tokens gives ", list.size(),
                  " ids, not a whole number of tokens for each of the ", batch,
                  " sequences (the list is sequence-major, like "
                  "--tokens: every sequence's tokens, one sequence after "
                  "the other)");
  int64_t steps = int64_t(list.size()) / batch;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(steps));
  for (int64_t k = 0; k < steps; ++k)
    for (int64_t bi = 0; bi < batch; ++bi)
      out[size_t(k)].push_back(list[size_t(bi * steps + k)]);
  return out;
}

Comparison braid::rt::compareValues(const std::vector<float> &a,
                                    const std::vector<float> &b, double atol,
                                    double rtol) {
  Comparison c;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    double diff = std::fabs(double(a[i]) - double(b[i]));
    double rel = diff / std::max(std::fabs(double(b[i])), atol);
    // NaN must count as a mismatch, so compare with a negated <=.
    if (!(diff <= atol + rtol * std::fabs(double(b[i]))))
      ++c.mismatches;
    if (!(diff <= c.maxAbsError)) {
      c.maxAbsError = diff;
      c.worstIndex = int64_t(i);
    }
    c.maxRelError = std::max(c.maxRelError, rel);
  }
  if (a.size() != b.size())
    c.mismatches += int64_t(std::max(a.size(), b.size()) -
                            std::min(a.size(), b.size()));
  return c;
}
