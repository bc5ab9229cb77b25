//===- Report.cpp - braid-run's trtexec-style summary ---------------------===//
#include "runtime/cli/Report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>

namespace braid::rt::cli {

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = size_t(std::ceil(p / 100.0 * double(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

namespace {

/// `ids` as `batch` sequences: "1 2 3 | 4 5 6".
void printTokens(std::ostream &os, const std::vector<int64_t> &ids,
                 int64_t batch) {
  int64_t per = int64_t(ids.size()) / batch;
  for (int64_t b = 0; b < batch; ++b) {
    os << (b ? " | " : "");
    for (int64_t t = 0; t < per; ++t)
      os << (t ? " " : "") << ids[size_t(b * per + t)];
  }
}

void printHeader(std::ostream &os, const std::string &path,
                 const PlanRun &run) {
  const GenerationShape &s = run.shape;
  os << "=== braid-run: " << path << " | backend " << run.backend
     << (run.strict ? " (strict, seed " + std::to_string(run.strictSeed) + ")"
                    : "")
     << " | ranks " << run.plan.root().world_size() << " | batch " << s.batch
     << (s.batch == s.planBatch && s.decodeBuckets.empty()
             ? std::string()
             : " (of " + std::to_string(s.planBatch) + ", decode " +
                   s.decodeFunction + ")")
     << " | prompt " << s.promptLength
     << (s.buckets.empty() ? std::string()
                           : " (bucket " + s.prefillFunction + ")")
     << " | vocab " << s.vocab << " ===\n";
}

/// The prompt, the forced tokens and each step's next tokens and time.
void printSteps(std::ostream &os, const GenerationShape &s,
                const std::vector<StepRecord> &steps, bool forced) {
  os << "prompt:";
  os << " ";
  printTokens(os, steps.front().inputIds, s.batch);
  os << "\n";
  if (forced && steps.size() > 1) {
    // The fed tokens, laid out like --force-tokens (sequence-major).
    std::vector<int64_t> fed;
    for (int64_t b = 0; b < s.batch; ++b)
      for (size_t i = 1; i < steps.size(); ++i)
        fed.push_back(steps[i].inputIds[size_t(b)]);
    os << "forced: ";
    printTokens(os, fed, s.batch);
    os << "\n";
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    os << (i == 0 ? "prefill  " : "decode ") << std::setw(i == 0 ? 0 : 2)
       << (i == 0 ? std::string() : std::to_string(i)) << " -> ";
    printTokens(os, steps[i].nextToken, s.batch);
    os << std::fixed << std::setprecision(3) << "  (" << steps[i].milliseconds
       << " ms)\n";
  }
}

/// Prefill and decode latency and throughput (host wall clock).
void printLatency(std::ostream &os, const GenerationShape &s,
                  const std::vector<StepRecord> &steps) {
  double prefillMs = steps.front().milliseconds;
  os << std::fixed << std::setprecision(3);
  os << "Prefill: " << prefillMs << " ms, "
     << double(s.batch * s.promptLength) / (prefillMs / 1000.0)
     << " tokens/s\n";
  if (steps.size() > 1) {
    std::vector<double> decode;
    double total = 0;
    for (size_t i = 1; i < steps.size(); ++i) {
      decode.push_back(steps[i].milliseconds);
      total += steps[i].milliseconds;
    }
    os << "Decode latency: min = "
       << *std::min_element(decode.begin(), decode.end())
       << " ms, max = " << *std::max_element(decode.begin(), decode.end())
       << " ms, mean = " << total / double(decode.size())
       << " ms, median = " << percentile(decode, 50)
       << " ms, p99 = " << percentile(decode, 99) << " ms (" << decode.size()
       << " steps)\n";
    os << "Decode throughput: "
       << double(s.batch) * double(decode.size()) / (total / 1000.0)
       << " tokens/s\n";
  }
}

} // namespace

void printSummary(std::ostream &os, const std::string &path, const PlanRun &run,
                  const std::vector<StepRecord> &steps, bool forced) {
  printHeader(os, path, run);
  printSteps(os, run.shape, steps, forced);
  printLatency(os, run.shape, steps);
  if (run.backend == "cpu")
    os << "(CPU reference interpreter: fp32 math, ranks as threads; times "
          "are host wall clock, not GPU times)\n";
  os.unsetf(std::ios::floatfield);
}

#ifdef BRAID_HAVE_CUDA
/// Device time (CUDA events around the launch) leaves out what the host
/// adds to every step: the input and output copies, the rank threads, the
/// wait for completion; the wall clock includes them, and the throughput is
/// computed from it.
void printGpuTiming(std::ostream &os, const PlanRun &run, const Options &o) {
  os << std::fixed << std::setprecision(3);
  os << "GPU (CUDA events, " << (o.graph ? "graph replay" : "eager")
     << "): prefill " << run.timings.front().deviceMs << " ms"
     << (run.timings.front().captured ? " (first launch after capture)" : "")
     << ", wall clock " << run.timings.front().wallMs << " ms\n";
  if (!run.timedDecode.empty()) {
    std::vector<double> device, host, wall;
    double sum = 0, wallSum = 0;
    for (const cuda::StepTiming &t : run.timedDecode) {
      device.push_back(t.deviceMs);
      host.push_back(t.hostLaunchMs);
      wall.push_back(t.wallMs);
      sum += t.deviceMs;
      wallSum += t.wallMs;
    }
    double median = percentile(device, 50), wallMedian = percentile(wall, 50);
    os << "Decode step, " << o.iters << " iterations after " << o.warmup
       << " warmup: latency min = "
       << *std::min_element(device.begin(), device.end())
       << " ms, median = " << median << " ms, p99 = " << percentile(device, 99)
       << " ms, mean = " << sum / double(device.size()) << " ms\n"
       << "Wall clock per step (host: inputs in, step, outputs out): "
          "min = "
       << *std::min_element(wall.begin(), wall.end())
       << " ms, median = " << wallMedian
       << " ms, p99 = " << percentile(wall, 99)
       << " ms, mean = " << wallSum / double(wall.size()) << " ms\n"
       << "Host launch per step: median = " << percentile(host, 50) << " ms\n"
       << "Decode throughput: " << double(run.shape.batch) / (wallMedian / 1e3)
       << " tokens/s (batch " << run.shape.batch
       << ", wall clock; device time alone: "
       << double(run.shape.batch) / (median / 1e3) << ")\n";
  }
  os.unsetf(std::ios::floatfield);
}
#endif

} // namespace braid::rt::cli
