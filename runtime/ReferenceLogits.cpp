//===- ReferenceLogits.cpp - Logits files to check a run against ----------===//
#include "runtime/ReferenceLogits.h"
#include "runtime/PlanLoader.h"
#include "runtime/Safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include <unistd.h>

using namespace braid::rt;

namespace {

// "stepK.logits" -> K (decimal, no leading zero, at most 9 digits).
std::optional<int> stepOf(const std::string &name) {
  constexpr std::string_view kPrefix = "step", kSuffix = ".logits";
  if (name.size() <= kPrefix.size() + kSuffix.size() ||
      name.compare(0, kPrefix.size(), kPrefix) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return std::nullopt;
  std::string digits = name.substr(
      kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  int k = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    k = k * 10 + (c - '0');
  }
  return k;
}

std::string stepName(int k) {
  return k == 0 ? "prefill" : "decode step " + std::to_string(k);
}

std::string listSteps(const ReferenceLogits &ref) {
  std::ostringstream os;
  size_t i = 0;
  for (const auto &kv : ref.steps) {
    if (i == 8) {
      os << ", ...";
      break;
    }
    os << (i++ ? ", " : "") << kv.first;
  }
  return os.str();
}

} // namespace

Expected<ReferenceLogits>
braid::rt::readReferenceLogits(const std::string &path) {
  std::string where = "reference logits '" + path + "'";
  auto file = SafetensorsFile::open(path);
  if (!file)
    return errorf("reading reference logits: ", file.status().message());
  ReferenceLogits ref;
  ref.path = path;
  for (const std::string &name : file->names()) {
    const Shape &shape = file->find(name)->shape;
    if (name == "columns") {
      if (shape.size() != 1)
        return errorf(where, ": 'columns' is ", formatShape(shape),
                      ", expected one dimension [V']");
      auto ids = file->readInts(name, shape);
      if (!ids)
        return errorf(where, ": ", ids.status().message());
      for (size_t i = 0; i < ids->size(); ++i)
        if ((*ids)[i] < 0 || (i > 0 && (*ids)[i] <= (*ids)[i - 1]))
          return errorf(where,
                        ": 'columns' must be strictly increasing "
                        "vocabulary ids >= 0; element ",
                        i, " is ", (*ids)[i],
                        i > 0 ? " after " + std::to_string((*ids)[i - 1])
                              : std::string());
      if (ids->empty())
        return errorf(where, ": 'columns' is empty");
      ref.columns = ids.take();
    } else if (name == "input_ids") {
      if (shape.size() != 2)
        return errorf(where, ": 'input_ids' is ", formatShape(shape),
                      ", expected [batch, prompt length]");
      auto ids = file->readInts(name, shape);
      if (!ids)
        return errorf(where, ": ", ids.status().message());
      ref.inputIds = ids.take();
      ref.inputIdsShape = shape;
    } else if (std::optional<int> k = stepOf(name)) {
      if (shape.size() != 3)
        return errorf(where, ": '", name, "' is ", formatShape(shape),
                      ", expected [batch, logit positions, vocabulary "
                      "columns]");
      auto values = file->readFloats(name, shape);
      if (!values)
        return errorf(where, ": ", values.status().message());
      ref.steps[*k] = ReferenceLogits::Step{shape, values.take()};
    } else {
      return errorf(where, " holds tensor '", name,
                    "', which is none of stepK.logits, columns and "
                    "input_ids");
    }
  }
  if (ref.steps.empty())
    return errorf(where, " holds no stepK.logits tensor");
  int64_t width = ref.steps.begin()->second.shape.back();
  for (const auto &[k, step] : ref.steps)
    if (step.shape.back() != width)
      return errorf(where, ": step", k, ".logits has ", step.shape.back(),
                    " columns, step", ref.steps.begin()->first, ".logits ",
                    width);
  if (ref.columns && int64_t(ref.columns->size()) != width)
    return errorf(where, ": 'columns' names ", ref.columns->size(),
                  " vocabulary ids, the logits have ", width, " columns");
  return ref;
}

Status braid::rt::writeLogitsFile(const std::string &path,
                                  const GenerationShape &shape,
                                  const std::vector<StepRecord> &steps) {
  std::vector<std::pair<std::string, HostTensor>> tensors;
  if (!steps.empty())
    tensors.emplace_back("input_ids",
                         HostTensor::fromInts(DType::I64,
                                              {shape.batch, shape.promptLength},
                                              steps.front().inputIds));
  for (size_t i = 0; i < steps.size(); ++i)
    tensors.emplace_back(
        "step" + std::to_string(i) + ".logits",
        HostTensor::fromFloats(DType::F32,
                               {shape.batch, steps[i].positions, shape.vocab},
                               steps[i].allLogits));
  return writeSafetensors(path, tensors);
}

double braid::rt::referenceScale(const ReferenceLogits &ref, size_t stepsRun) {
  double scale = 0;
  for (const auto &[k, step] : ref.steps)
    if (size_t(k) < stepsRun)
      for (float v : step.values)
        scale = std::max(scale, double(std::fabs(v)));
  return scale;
}

Status braid::rt::checkReferenceCovers(const ReferenceLogits &ref,
                                       const GenerationShape &shape,
                                       const std::vector<int64_t> &prompt,
                                       int decodeSteps) {
  std::string where = "reference logits '" + ref.path + "'";
  const int64_t b = shape.batch, s = shape.promptLength, v = shape.vocab;
  if (ref.inputIds) {
    if (ref.inputIdsShape != Shape{b, s})
      return errorf(where, ": input_ids is ", formatShape(ref.inputIdsShape),
                    ", the run's prompt is [", b, ", ", s, "]");
    // A prompt of the wrong length is generate()'s to report.
    for (size_t i = 0; prompt.size() == size_t(b * s) && i < prompt.size(); ++i)
      if (prompt[i] != (*ref.inputIds)[i])
        return errorf(where,
                      ": input_ids differ from the run's prompt at "
                      "sequence ",
                      int64_t(i) / s, ", position ", int64_t(i) % s, " (file ",
                      (*ref.inputIds)[i], ", run ", prompt[i],
                      "): the logits belong to another prompt; give it with "
                      "--tokens or --prompt-file");
  }
  if (ref.columns && ref.columns->back() >= v)
    return errorf(where, ": 'columns' names vocabulary id ",
                  ref.columns->back(), "; the plan's vocabulary is ", v);
  int64_t width = ref.columns ? int64_t(ref.columns->size()) : v;
  for (int k = 0; k <= decodeSteps; ++k) {
    auto it = ref.steps.find(k);
    if (it == ref.steps.end()) {
      // The steps from 0 the file holds without a gap: what --steps can be.
      int64_t held = 0;
      while (ref.steps.count(int(held)))
        ++held;
      return errorf(where, " has no step", k, ".logits for the ", stepName(k),
                    " the run makes (it holds steps ", listSteps(ref), ")",
                    held > 0
                        ? "; run at most --steps " + std::to_string(held - 1)
                        : std::string());
    }
    const Shape &got = it->second.shape;
    if (got[0] != b || got[2] != width)
      return errorf(where, ": step", k, ".logits is ", formatShape(got),
                    "; the run has batch ", b, " and ", width,
                    ref.columns ? " columns (the file's 'columns')"
                                : " vocabulary columns");
  }
  return Status::ok();
}

Expected<ReferenceCheck>
braid::rt::compareWithReference(const ReferenceLogits &ref,
                                const GenerationShape &shape,
                                const std::vector<StepRecord> &steps,
                                double atol, double rtol, size_t maxListed) {
  std::string where = "reference logits '" + ref.path + "'";
  const int64_t b = shape.batch, v = shape.vocab;
  if (steps.empty())
    return errorf(where, ": the run has no steps to compare");
  BRAID_RETURN_IF_ERROR(checkReferenceCovers(ref, shape, steps.front().inputIds,
                                             int(steps.size()) - 1));
  std::vector<int64_t> columns;
  if (ref.columns) {
    columns = *ref.columns;
  } else {
    for (int64_t c = 0; c < v; ++c)
      columns.push_back(c);
  }
  const int64_t width = int64_t(columns.size());

  ReferenceCheck check;
  check.columns = width;
  for (size_t k = 0; k < steps.size(); ++k) {
    auto it = ref.steps.find(int(k)); // present: checkReferenceCovers
    const StepRecord &r = steps[k];
    Shape want{b, r.positions, width};
    if (it->second.shape != want)
      return errorf(where, ": step", k, ".logits is ",
                    formatShape(it->second.shape), "; the ", stepName(int(k)),
                    " has ", formatShape(want),
                    " (batch, logit positions, columns)");
    // The run's logits on the file's columns, in the file's layout.
    std::vector<float> got;
    got.reserve(size_t(b * r.positions * width));
    for (int64_t row = 0; row < b * r.positions; ++row)
      for (int64_t c : columns)
        got.push_back(r.allLogits[size_t(row * v + c)]);
    const std::vector<float> &refValues = it->second.values;

    StepCheck sc;
    sc.step = int(k);
    sc.comparison = compareValues(got, refValues, atol, rtol);
    for (float x : got)
      sc.maxAbsLogit = std::max(sc.maxAbsLogit, double(std::fabs(x)));
    if (!ref.columns) {
      bool same = true;
      for (int64_t bi = 0; bi < b; ++bi) {
        const float *row =
            refValues.data() + (bi * r.positions + r.positions - 1) * v;
        same &= int64_t(std::max_element(row, row + v) - row) ==
                r.nextToken[size_t(bi)];
      }
      sc.sameGreedyTokens = same;
    }
    for (size_t i = 0;
         i < got.size() && check.firstMismatches.size() < maxListed; ++i) {
      double diff = std::fabs(double(got[i]) - double(refValues[i]));
      if (diff <= atol + rtol * std::fabs(double(refValues[i])))
        continue;
      LogitMismatch m;
      m.step = int(k);
      m.batch = int64_t(i) / (r.positions * width);
      m.position = int64_t(i) / width % r.positions;
      m.column = columns[i % size_t(width)];
      m.got = got[i];
      m.want = refValues[i];
      check.firstMismatches.push_back(m);
    }
    check.mismatches += sc.comparison.mismatches;
    check.steps.push_back(sc);
  }
  for (const auto &kv : ref.steps)
    if (size_t(kv.first) >= steps.size())
      check.notRun.push_back(kv.first);
  return check;
}

Expected<CheckFileKind> braid::rt::checkFileKind(const std::string &path) {
  auto opened = openRegularFile(path, "--check-against file");
  if (!opened)
    return opened.status();
  uint8_t head[9] = {};
  ssize_t got = ::pread(opened->fd, head, sizeof(head), 0);
  ::close(opened->fd);
  if (got >= 8 && std::memcmp(head + 4, "BRPL", 4) == 0)
    return CheckFileKind::Plan;
  if (got == ssize_t(sizeof(head)) && head[8] == '{') {
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i)
      len = (len << 8) | head[i];
    if (len <= opened->size - 8)
      return CheckFileKind::Logits;
  }
  return errorf("--check-against file '", path,
                "' is neither a plan (FlatBuffers identifier BRPL) nor a "
                "safetensors logits file");
}
