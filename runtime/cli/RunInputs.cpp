//===- RunInputs.cpp - braid-run's prompt file and checkpoint -------------===//
#include "runtime/cli/RunInputs.h"

#include "runtime/Generation.h"
#include "runtime/HostTensor.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <set>
#include <sstream>

namespace braid::rt::cli {

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

} // namespace braid::rt::cli
