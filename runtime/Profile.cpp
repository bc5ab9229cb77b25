//===- Profile.cpp - Measured per-op times: CSV and Chrome trace ----------===//
#include "runtime/Profile.h"
#include "runtime/PlanLoader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

using namespace braid::rt;
namespace plan = braid::plan;

std::string braid::rt::shapeKey(const plan::Function &f, const plan::Op &op) {
  std::string key;
  if (!op.operands())
    return key;
  for (int t : *op.operands()) {
    const plan::Tensor *x = f.tensors()->Get(unsigned(t));
    if (!key.empty())
      key += ";";
    if (x->shape())
      for (unsigned i = 0; i < x->shape()->size(); ++i)
        key += (i ? "x" : "") + std::to_string(x->shape()->Get(i));
  }
  return key;
}

OpTime braid::rt::opTimeOf(const plan::Function &f, int index) {
  const plan::Op &op = *f.ops()->Get(unsigned(index));
  OpTime t;
  t.function = f.name()->str();
  t.op = index;
  const char *name = opcodeName(op.opcode());
  t.name = name ? name : "?";
  t.shapes = shapeKey(f, op);
  t.stream = op.stream();
  return t;
}

static Status writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  if (!out)
    return errorf("cannot write '", path, "'");
  out << text;
  out.close();
  if (!out)
    return errorf("error writing '", path, "'");
  return Status::ok();
}

Status braid::rt::writeProfileCsv(const std::string &path,
                                  const std::vector<OpTime> &times) {
  // Mean over every occurrence (layers repeat the same shapes).
  std::map<std::pair<std::string, std::string>, std::pair<double, int>> sums;
  for (const OpTime &t : times) {
    if (t.name == "wait")
      continue; // not a kernel
    auto &s = sums[{t.name, t.shapes}];
    s.first += t.seconds;
    ++s.second;
  }
  std::string text = "op,shape,us\n";
  for (const auto &[key, s] : sums) {
    char us[64];
    std::snprintf(us, sizeof(us), "%.3f", s.first / s.second * 1e6);
    text += key.first + "," + key.second + "," + us + "\n";
  }
  return writeFile(path, text);
}

Status braid::rt::writeChromeTrace(
    const std::string &path, const std::vector<std::vector<OpTime>> &steps,
    int ranks) {
  nlohmann::json events = nlohmann::json::array();
  int streams = 1;
  for (const auto &step : steps)
    for (const OpTime &t : step)
      streams = std::max(streams, t.stream + 1);
  for (int r = 0; r < ranks; ++r) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    for (int s = 0; s < streams; ++s)
      events.push_back(
          {{"name", "thread_name"},
           {"ph", "M"},
           {"pid", r},
           {"tid", s},
           {"args", {{"name", "stream " + std::to_string(s)}}}});
  }
  double offset = 0;
  for (const auto &step : steps) {
    double end = 0;
    for (int r = 0; r < ranks; ++r)
      for (const OpTime &t : step) {
        events.push_back({{"name", t.name},
                          {"ph", "X"},
                          {"pid", r},
                          {"tid", t.stream},
                          {"ts", (offset + t.start) * 1e6},
                          {"dur", t.seconds * 1e6},
                          {"args",
                           {{"function", t.function},
                            {"op", t.op},
                            {"shapes", t.shapes}}}});
        end = std::max(end, t.start + t.seconds);
      }
    offset += end * 1.05;
  }
  nlohmann::json trace = {{"traceEvents", events},
                          {"displayTimeUnit", "ms"}};
  return writeFile(path, trace.dump() + "\n");
}
