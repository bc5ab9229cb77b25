//===- Generation.cpp - Prefill + greedy decode over a plan ---------------===//
#include "runtime/Generation.h"
#include "runtime/CheckedMath.h"

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

Shape shapeOf(const plan::Tensor &t) {
  return t.shape() ? Shape(t.shape()->begin(), t.shape()->end()) : Shape{};
}

} // namespace

Expected<GenerationShape> braid::rt::generationShape(const plan::Plan &p) {
  GenerationShape shape;
  for (const char *name : {"prefill", "decode"}) {
    const plan::Function *f = nullptr;
    if (p.functions())
      for (const plan::Function *g : *p.functions())
        if (g->name()->string_view() == name)
          f = g;
    if (!f)
      return errorf("plan has no '", name,
                    "' function; generation needs prefill and decode");
    const plan::Tensor *ids = bindingTensor(*f, f->inputs(), "input_ids");
    const plan::Tensor *pos = bindingTensor(*f, f->inputs(), "positions");
    const plan::Tensor *logits = bindingTensor(*f, f->outputs(), "logits");
    if (!ids || !pos || !logits)
      return errorf("function '", name,
                    "' needs inputs 'input_ids' and 'positions' and an "
                    "output 'logits'");
    Shape idShape = shapeOf(*ids), posShape = shapeOf(*pos),
          logitShape = shapeOf(*logits);
    if (idShape.size() != 2 || posShape != idShape)
      return errorf("function '", name, "': input_ids ",
                    formatShape(idShape), " and positions ",
                    formatShape(posShape), " must both be [batch, tokens]");
    if (isFloatType(ids->dtype()) || isFloatType(pos->dtype()))
      return errorf("function '", name,
                    "': input_ids and positions must be integers");
    if (logitShape.size() < 2 || logitShape.front() != idShape[0] ||
        !isFloatType(logits->dtype()))
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
    if (std::string_view(name) == "prefill") {
      shape.batch = idShape[0];
      shape.promptLength = idShape[1];
      shape.vocab = logitShape.back();
      shape.idsType = ids->dtype();
      shape.positionsType = pos->dtype();
      // Every id in [0, vocab) must survive the trip through input_ids.
      if (ids->dtype() == plan::DType::I32 &&
          shape.vocab - 1 > std::numeric_limits<int32_t>::max())
        return errorf("function 'prefill': vocab ", shape.vocab,
                      " has ids that do not fit its i32 input_ids");
    } else if (idShape != Shape{shape.batch, 1} ||
               logitShape.back() != shape.vocab) {
      return errorf("decode takes ", formatShape(idShape), " ids and returns ",
                    logitShape.back(), " logits; expected [", shape.batch,
                    ", 1] and ", shape.vocab, " as prefill");
    }
  }
  return shape;
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
  int64_t b = shape.batch;
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

Expected<std::vector<StepRecord>>
braid::rt::generate(const GenerationShape &shape,
                    const GenerationOptions &options, const StepFn &step) {
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

  std::vector<StepRecord> records;
  std::vector<int64_t> ids = options.prompt;
  for (int i = 0; i <= options.decodeSteps; ++i) {
    StepRecord r;
    r.function = i == 0 ? "prefill" : "decode";
    int64_t tokens = i == 0 ? s : 1;
    if (i > 0)
      ids = options.forcedTokens.empty() ? records.back().nextToken
                                         : options.forcedTokens[size_t(i - 1)];
    StepInputs inputs = stepInputs(shape, ids, tokens, i == 0 ? 0 : s + i - 1);
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
    int64_t rowElems = b * shape.vocab; // <= the plan's logits elements
    if (all.empty() || int64_t(all.size()) % rowElems)
      return errorf(r.function, " step ", i, " returned ", all.size(),
                    " logits, not a whole number of [", b, ", ", shape.vocab,
                    "] rows");
    int64_t positionsOut = int64_t(all.size()) / rowElems;
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
