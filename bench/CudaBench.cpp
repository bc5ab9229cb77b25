//===- CudaBench.cpp - GPU benchmarks of one plan, side by side
//------------===//
//
// braid-cuda-bench PLAN.bplan [--iters N] [--warmup W] [--position P]
//                  [--gemm-algos K] [--torch FILE.json] [--smoke]
//                  [--against OTHER.bplan]
//
// Everything issue 6 asks to measure, in one run on one GPU, as ratios:
//   1. decode-step latency: CUDA Graph replay vs eager launch of the same
//      plan (the executor's automatic attention kernel), the graph with
//      each attention kernel forced (tensor cores, split-KV), (PyTorch eager /
//      CUDA graphs from bench/torch_decode.py, when --torch gives its
//      result file);
//   2. launch gaps: step time vs the sum of its ops' times (eager, per-op
//      CUDA events), eager and graph;
//   3. every distinct GEMM of the plan: the executor's cuBLASLt algorithm
//      (heuristic choice) vs the fastest of cuBLASLt's top K candidates;
//   4. memory-bound ops (rms_norm, add_rms_norm, swiglu, layer_norm,
//      attention): bytes moved
//      (minimum, as Kernels.cu counts them) over measured time, against
//      the HBM peak (device attributes) and a measured device-to-device
//      copy;
//   5. the decode attention kernel alone, split-KV (flash-decoding), on
//      tensor cores (AttentionTensorCore.cuh) and one split, launched back
//      to back from a CUDA Graph over enough copies of the KV cache that L2
//      (50 MB on an H100) cannot hold them: the per-op events of 4.
//      include launch latency, this does not. Every variant's output is
//      compared with the default's.
//   6. with --against (the same model compiled with --fuse-compute=false,
//      say): both plans' decode steps (graph and eager) and, per op kind,
//      how many ops and how much time each step spends, side by side, and
//      the largest difference between their decode logits.
// Prints markdown tables (docs/benchmarks.md records them). Exit 77 with
// the reason when no GPU is usable. --smoke: 3 iterations and 2 GEMM
// candidates, for ctest on GPU machines (checks that it runs, times
// nothing worth reading).
//
//===----------------------------------------------------------------------===//
#include "runtime/Generation.h"
#include "runtime/PlanLoader.h"
#include "runtime/Profile.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceKernels.h" // the attention tiling, reported
#include "runtime/cuda/Executor.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/LibraryCheck.h"
#include "runtime/cuda/Resources.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

using namespace braid::rt;
namespace cu = braid::rt::cuda;
namespace plan = braid::plan;

namespace {

struct Options {
  std::string plan;
  int iters = 100, warmup = 10;
  int64_t position = -1; // decode position; -1: the last cache row
  int gemmAlgos = 16;
  std::string torch;
  std::string against; // a second plan to compare with, side by side
  bool smoke = false;
};

Expected<Options> parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> Expected<std::string> {
      if (i + 1 >= argc)
        return errorf("option ", a, " needs a value");
      return std::string(argv[++i]);
    };
    auto integer = [&](auto &out) -> Status {
      auto v = value();
      if (!v)
        return v.status();
      auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
      if (ec != std::errc() || end != v->data() + v->size() || out < 0)
        return errorf("option ", a, ": '", *v, "' is not a count");
      return Status::ok();
    };
    Status st;
    if (a == "--iters")
      st = integer(o.iters);
    else if (a == "--warmup")
      st = integer(o.warmup);
    else if (a == "--position")
      st = integer(o.position);
    else if (a == "--gemm-algos")
      st = integer(o.gemmAlgos);
    else if (a == "--torch") {
      auto v = value();
      if (!v)
        return v.status();
      o.torch = *v;
    } else if (a == "--against") {
      auto v = value();
      if (!v)
        return v.status();
      o.against = *v;
    } else if (a == "--smoke")
      o.smoke = true;
    else if (!a.empty() && a[0] == '-')
      return errorf("unknown option '", a, "'");
    else if (o.plan.empty())
      o.plan = a;
    else
      return errorf("unexpected argument '", a, "'");
    if (!st)
      return st;
  }
  if (o.plan.empty())
    return errorf("usage: braid-cuda-bench PLAN.bplan [--iters N] [--warmup "
                  "W] [--position P] [--gemm-algos K] [--torch FILE.json] "
                  "[--smoke] [--against OTHER.bplan]");
  if (o.smoke) {
    o.iters = 3;
    o.warmup = 1;
    o.gemmAlgos = 2;
  }
  if (o.iters < 1 || o.gemmAlgos < 1)
    return errorf("--iters and --gemm-algos must be >= 1");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// The KV cache length: dim 1 of the first rank-4 state slot.
int64_t cacheLength(const plan::Plan &p) {
  if (p.state())
    for (const plan::StateSlot *s : *p.state())
      if (s->shape()->size() == 4)
        return s->shape()->Get(1);
  return 0;
}

struct Inputs {
  StepInputs prefill, decode;
  int64_t position = 0;
};

Inputs makeInputs(const GenerationShape &g, const plan::Plan &p,
                  const Options &o) {
  Inputs in;
  in.prefill = stepInputs(g, syntheticPrompt(g, 0), g.promptLength, 0);
  int64_t maxSeq = cacheLength(p);
  in.position = o.position >= 0 ? o.position
                : maxSeq > 0    ? maxSeq - 1
                                : g.promptLength;
  in.decode = stepInputs(g, std::vector<int64_t>(size_t(g.batch), 1), 1,
                         in.position);
  return in;
}

struct StepTimes {
  std::vector<double> device, host;
  std::vector<OpTime> ops; // with profiling: the last timed decode step
  std::vector<OpTime> prefillOps;
  cu::TensorMap lastDecode; // the last decode step's outputs
  double prefillMs = 0;     // the prefill step's device time
};

/// Prefill once, then `warmup` + `iters` decode steps at the fixed
/// position (the KV cache contents do not change the work).
Expected<StepTimes>
timeSteps(const LoadedPlan &loaded, bool graph, bool profile, const Inputs &in,
          const Options &o,
          cu::AttentionKernel attention = cu::AttentionKernel::Auto,
          int gemmAutotune = 0, bool fuseCacheWrite = false) {
  cu::ExecutorOptions eo;
  eo.graph = graph;
  eo.profile = profile;
  eo.attentionKernel = attention;
  eo.gemmAutotune = gemmAutotune;
  eo.fuseCacheWrite = fuseCacheWrite;
  auto runner = cu::CudaRunner::create(loaded, eo);
  if (!runner)
    return runner.status();
  StepTimes t;
  auto pre = (*runner)->run("prefill", {in.prefill});
  if (!pre)
    return errorf("prefill: ", pre.status().message());
  t.prefillOps = (*runner)->lastProfile();
  t.prefillMs = (*runner)->lastTiming().deviceMs;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    auto out = (*runner)->run("decode", {in.decode});
    if (!out)
      return errorf("decode: ", out.status().message());
    if (i < o.warmup)
      continue;
    t.device.push_back((*runner)->lastTiming().deviceMs);
    t.host.push_back((*runner)->lastTiming().hostLaunchMs);
    t.ops = (*runner)->lastProfile();
    t.lastDecode = std::move(out->front());
  }
  return t;
}

/// One plan's decode step three ways: replayed as a CUDA Graph, launched
/// eagerly, and eagerly with per-op events (the profile).
struct PlanTimes {
  StepTimes graph, eager, profiled;
};
Expected<PlanTimes> timePlan(const LoadedPlan &loaded, const Inputs &in,
                             const Options &o, const std::string &label) {
  PlanTimes t;
  for (auto [out, graph, profile, what] :
       {std::tuple<StepTimes *, bool, bool, const char *>{&t.graph, true, false,
                                                          "graph"},
        {&t.eager, false, false, "eager"},
        {&t.profiled, false, true, "eager, profiled"}}) {
    auto steps = timeSteps(loaded, graph, profile, in, o);
    if (!steps)
      return errorf(label, what, ": ", steps.status().message());
    *out = std::move(*steps);
  }
  return t;
}

/// max |x[i] - y[i]|, infinite when any difference is NaN.
double largestDifference(const std::vector<float> &x,
                         const std::vector<float> &y) {
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const double d = std::fabs(double(x[i]) - double(y[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

double sumMs(const std::vector<OpTime> &ops) {
  double s = 0;
  for (const OpTime &op : ops)
    s += op.seconds * 1e3;
  return s;
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

struct GemmKey {
  cu::GemmShape s;
  bool operator<(const GemmKey &o) const {
    auto tie = [](const cu::GemmShape &g) {
      return std::make_tuple(g.batch, g.m, g.n, g.k, g.transposeA, g.transposeB,
                             g.batchedB, int(g.dtype), g.bias, g.gelu,
                             g.residual);
    };
    return tie(s) < tie(o.s);
  }
};

/// One GEMM's operands; a benchmark rotates through several sets so that
/// together they exceed L2 and every launch reads its operands from HBM,
/// as a decode step does (each weight is read once per step).
struct GemmOperands {
  cu::DeviceMemory a, b, c, bias, residual;
};

/// Mean milliseconds of `plan` over `iters` back-to-back launches, launch i
/// on operand set i mod sets.size().
Expected<double> timeGemm(cublasLtHandle_t lt, const cu::GemmPlan &plan,
                          const std::vector<GemmOperands> &sets, void *ws,
                          size_t wsBytes, cudaStream_t stream,
                          const Options &o) {
  auto launch = [&](int i) {
    const GemmOperands &x = sets[size_t(i) % sets.size()];
    return plan.run(lt, x.a.get(), x.b.get(), x.c.get(), ws, wsBytes, stream,
                    x.bias.get(), x.residual.get());
  };
  for (int i = 0; i < std::max(o.warmup, 1); ++i)
    BRAID_RETURN_IF_ERROR(launch(i));
  cu::Event start, stop;
  BRAID_CUDA_CHECK(cudaEventCreate(start.out()));
  BRAID_CUDA_CHECK(cudaEventCreate(stop.out()));
  BRAID_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < o.iters; ++i)
    BRAID_RETURN_IF_ERROR(launch(i));
  BRAID_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  BRAID_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  BRAID_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return double(ms) / o.iters;
}

Status uploadRandom(void *dst, DType dt, int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float &v : values)
    v = dist(rng);
  HostTensor h = HostTensor::fromFloats(dt, {count}, values);
  BRAID_CUDA_CHECK(
      cudaMemcpy(dst, h.bytes.data(), h.bytes.size(), cudaMemcpyHostToDevice));
  return Status::ok();
}

Status benchGemms(const LoadedPlan &loaded, const Options &o) {
  std::map<GemmKey, std::vector<std::string>> shapes; // -> functions
  const plan::Plan &p = loaded.root();
  for (const plan::Function *f : *p.functions()) {
    for (unsigned i = 0; i < f->ops()->size(); ++i) {
      const plan::Op *op = f->ops()->Get(i);
      if (syncOpcode(op->opcode()) != plan::OpCode::Matmul)
        continue;
      const plan::Tensor &a = *f->tensors()->Get(op->operands()->Get(0));
      const plan::Tensor &b = *f->tensors()->Get(op->operands()->Get(1));
      auto g = cu::gemmShapeOf(Shape(a.shape()->begin(), a.shape()->end()),
                               Shape(b.shape()->begin(), b.shape()->end()),
                               op->transpose_a(), op->transpose_b(),
                               a.dtype());
      if (!g)
        return g.status();
      // The epilogue the compiler put on this matmul (batch 1 and a tanh
      // GELU: what the executor asks cuBLASLt for).
      bool tanhOrNone = !op->matmul_gelu() || op->gelu_approximation() ==
                                                  plan::GeluApproximation::Tanh;
      if (g->batch == 1 && tanhOrNone) {
        g->bias = op->matmul_bias();
        g->gelu = op->matmul_gelu();
        g->residual = op->matmul_residual();
      }
      auto &fns = shapes[GemmKey{*g}];
      if (std::find(fns.begin(), fns.end(), f->name()->str()) == fns.end())
        fns.push_back(f->name()->str());
    }
  }
  cublasLtHandle_t lt = nullptr;
  BRAID_CUBLAS_CHECK(cublasLtCreate(&lt));
  std::unique_ptr<cublasLtContext, cublasStatus_t (*)(cublasLtHandle_t)> owner(
      lt, cublasLtDestroy);
  const size_t wsBytes = size_t(32) << 20; // the executor's workspace
  cu::DeviceMemory ws;
  BRAID_CUDA_CHECK(cudaMalloc(ws.out(), wsBytes));
  cu::Stream stream;
  BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(stream.out(), cudaStreamNonBlocking));

  int l2 = 0;
  BRAID_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  std::cout << "\n## GEMMs: the executor's cuBLASLt algorithm vs the fastest "
               "of cuBLASLt's top "
            << o.gemmAlgos
            << "\n\nOperands rotate through enough sets to exceed twice the "
            << (l2 >> 20)
            << " MiB L2 (cold: read from HBM, as in a step); epilogue as the "
               "executor fuses it.\n\n"
            << "| function | batch x M x N x K | dtype | epilogue | sets | "
               "executor us | executor TFLOP/s | best us | best TFLOP/s | "
               "executor / best time |\n|---|---|---|---|---|---|---|---|---|"
               "---|\n";
  for (const auto &[key, fns] : shapes) {
    const cu::GemmShape &s = key.s;
    size_t es = dtypeSize(s.dtype);
    int64_t aCount = s.batch * s.m * s.k;
    int64_t bCount = (s.batchedB ? s.batch : 1) * s.k * s.n;
    int64_t cCount = s.batch * s.m * s.n;
    int64_t epilogueCount = (s.bias ? s.n : 0) + (s.residual ? s.m * s.n : 0);
    size_t setBytes = size_t(aCount + bCount + cCount + epilogueCount) * es;
    size_t sets = std::clamp<size_t>(
        2 * size_t(l2) / std::max<size_t>(setBytes, 1) + 1, 1, 64);
    std::vector<GemmOperands> operands(sets);
    for (size_t k = 0; k < sets; ++k) {
      GemmOperands &x = operands[k];
      BRAID_CUDA_CHECK(cudaMalloc(x.a.out(), size_t(aCount) * es));
      BRAID_CUDA_CHECK(cudaMalloc(x.b.out(), size_t(bCount) * es));
      BRAID_CUDA_CHECK(cudaMalloc(x.c.out(), size_t(cCount) * es));
      BRAID_RETURN_IF_ERROR(
          uploadRandom(x.a.get(), s.dtype, aCount, uint32_t(3 * k + 1)));
      BRAID_RETURN_IF_ERROR(
          uploadRandom(x.b.get(), s.dtype, bCount, uint32_t(3 * k + 2)));
      if (s.bias) {
        BRAID_CUDA_CHECK(cudaMalloc(x.bias.out(), size_t(s.n) * es));
        BRAID_RETURN_IF_ERROR(
            uploadRandom(x.bias.get(), s.dtype, s.n, uint32_t(3 * k + 3)));
      }
      if (s.residual) {
        BRAID_CUDA_CHECK(cudaMalloc(x.residual.out(), size_t(s.m * s.n) * es));
        BRAID_RETURN_IF_ERROR(uploadRandom(x.residual.get(), s.dtype, s.m * s.n,
                                           uint32_t(3 * k + 4)));
      }
    }
    std::string where;
    for (const std::string &f : fns)
      where += (where.empty() ? "" : ", ") + f;
    auto candidates = cu::GemmPlan::candidates(lt, s, wsBytes, o.gemmAlgos);
    if (!candidates) {
      // Typically a fused epilogue cuBLASLt has no algorithm for (the
      // executor then runs it unfused): the row says why instead of ending
      // the benchmark.
      std::cout << "| " << where << " | " << s.batch << " x " << s.m << " x "
                << s.n << " x " << s.k << " | " << dtypeName(s.dtype)
                << " | no cuBLASLt candidates: "
                << candidates.status().message() << " | | | | | | |\n";
      continue;
    }
    std::vector<double> ms;
    for (const cu::GemmPlan &plan : *candidates) {
      auto t = timeGemm(lt, plan, operands, ws.get(), wsBytes, stream.get(), o);
      if (!t)
        return t.status();
      ms.push_back(*t);
    }
    // candidates[0] is GemmPlan::create's choice: what the executor runs.
    double ours = ms.front(), best = *std::min_element(ms.begin(), ms.end());
    double flops =
        2.0 * double(s.batch) * double(s.m) * double(s.n) * double(s.k);
    std::cout << std::fixed << "| " << where << " | " << s.batch << " x " << s.m
              << " x " << s.n << " x " << s.k << " | " << dtypeName(s.dtype)
              << " | "
              << (s.gelu       ? (s.bias ? "bias + gelu" : "gelu")
                  : s.residual ? (s.bias ? "bias + residual" : "residual")
                  : s.bias     ? "bias"
                               : "none")
              << " | " << sets << " | " << std::setprecision(2) << ours * 1e3
              << " | " << std::setprecision(1) << flops / (ours * 1e-3) / 1e12
              << " | " << std::setprecision(2) << best * 1e3 << " | "
              << std::setprecision(1) << flops / (best * 1e-3) / 1e12 << " | "
              << std::setprecision(3) << ours / best << " |\n";
  }
  std::cout.unsetf(std::ios::floatfield);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Memory-bound ops
//===----------------------------------------------------------------------===//

int64_t bytesOf(const plan::Function &f, int t) {
  const plan::Tensor &x = *f.tensors()->Get(unsigned(t));
  return numElements(Shape(x.shape()->begin(), x.shape()->end())) *
         int64_t(dtypeSize(x.dtype()));
}

/// The fewest bytes an op must move (Kernels.cu's header): its operands and
/// results once; for attention with a KV cache at `position`, the new rows
/// written and rows [0, position + S) of each cache read once per KV head.
/// 0: not a memory-bound op this table covers.
int64_t minimumBytes(const plan::Function &f, const plan::Op &op,
                     int64_t position) {
  plan::OpCode code = syncOpcode(op.opcode());
  auto operand = [&](unsigned i) { return bytesOf(f, op.operands()->Get(i)); };
  auto result = [&](unsigned i) { return bytesOf(f, op.results()->Get(i)); };
  switch (code) {
  case plan::OpCode::RmsNorm:
    return operand(0) + operand(1) + result(0);
  case plan::OpCode::AddRmsNorm:
    return operand(0) + operand(1) + operand(2) + result(0) + result(1);
  case plan::OpCode::Swiglu:
    return operand(0) + operand(1) + result(0);
  case plan::OpCode::LayerNorm:
    return operand(0) + operand(1) + operand(2) + result(0);
  case plan::OpCode::Attention: {
    int64_t qkvo = operand(0) + operand(1) + operand(2) + result(0);
    if (op.operands()->size() == 3)
      return qkvo;
    const plan::Tensor &cache = *f.tensors()->Get(op.operands()->Get(3));
    int64_t maxSeq = cache.shape()->Get(1);
    int64_t seq = f.tensors()->Get(op.operands()->Get(1))->shape()->Get(1);
    int64_t rows = std::min(position + seq, maxSeq);
    int64_t cacheBytes = operand(3) + operand(4);
    // new rows written (== k + v) + rows [0, position + S) read
    return qkvo + operand(1) + operand(2) + cacheBytes * rows / maxSeq;
  }
  default:
    return 0;
  }
}

struct Bandwidth {
  double peakGBs = 0;   // from the device attributes
  double copyGBs = 0;   // measured device-to-device copy (read + write)
  std::string device;
};

Expected<Bandwidth> deviceBandwidth() {
  Bandwidth bw;
  int dev = 0, clockKHz = 0, busBits = 0;
  BRAID_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  BRAID_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  bw.device = prop.name;
  BRAID_CUDA_CHECK(
      cudaDeviceGetAttribute(&clockKHz, cudaDevAttrMemoryClockRate, dev));
  BRAID_CUDA_CHECK(
      cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, dev));
  bw.peakGBs = 2.0 * double(clockKHz) * 1e3 * double(busBits) / 8 / 1e9;
  const size_t bytes = size_t(1) << 30;
  cu::DeviceMemory src, dst;
  BRAID_CUDA_CHECK(cudaMalloc(src.out(), bytes));
  BRAID_CUDA_CHECK(cudaMalloc(dst.out(), bytes));
  BRAID_CUDA_CHECK(cudaMemset(src.get(), 0, bytes));
  cu::Event start, stop;
  BRAID_CUDA_CHECK(cudaEventCreate(start.out()));
  BRAID_CUDA_CHECK(cudaEventCreate(stop.out()));
  BRAID_CUDA_CHECK(cudaMemcpy(dst.get(), src.get(), bytes,
                              cudaMemcpyDeviceToDevice));
  const int reps = 10;
  BRAID_CUDA_CHECK(cudaEventRecord(start.get()));
  for (int i = 0; i < reps; ++i)
    BRAID_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes,
                                     cudaMemcpyDeviceToDevice));
  BRAID_CUDA_CHECK(cudaEventRecord(stop.get()));
  BRAID_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  BRAID_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  bw.copyGBs = 2.0 * double(bytes) * reps / (double(ms) * 1e-3) / 1e9;
  return bw;
}

void printMemoryBound(const LoadedPlan &loaded, const StepTimes &profiled,
                      const Inputs &in, const Bandwidth &bw) {
  std::cout << "\n## Memory-bound ops: minimum bytes / measured time (eager, "
               "CUDA events; HBM peak "
            << std::fixed << std::setprecision(0) << bw.peakGBs
            << " GB/s, device-to-device copy " << bw.copyGBs << " GB/s)\n\n"
            << "| function | op | operand shapes | bytes | us | GB/s | % of "
               "peak | % of copy |\n|---|---|---|---|---|---|---|---|\n";
  // Mean over the ops with the same (function, name, shapes).
  struct Row {
    int64_t bytes = 0;
    double seconds = 0;
    int count = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Row> rows;
  auto add = [&](const std::vector<OpTime> &ops, int64_t position) {
    for (const OpTime &t : ops) {
      const plan::Function *f = loaded.function(t.function);
      int64_t bytes =
          minimumBytes(*f, *f->ops()->Get(unsigned(t.op)), position);
      if (bytes == 0)
        continue;
      Row &r = rows[{t.function, t.name, t.shapes}];
      r.bytes = bytes;
      r.seconds += t.seconds;
      ++r.count;
    }
  };
  add(profiled.prefillOps, 0);
  add(profiled.ops, in.position);
  for (const auto &[key, r] : rows) {
    double us = r.seconds / r.count * 1e6;
    double gbs = double(r.bytes) / (us * 1e-6) / 1e9;
    std::cout << "| " << std::get<0>(key) << " | " << std::get<1>(key)
              << " | " << std::get<2>(key) << " | " << r.bytes << " | "
              << std::setprecision(2) << us << " | " << std::setprecision(0)
              << gbs << " | " << std::setprecision(1)
              << 100 * gbs / bw.peakGBs << " | " << 100 * gbs / bw.copyGBs
              << " |\n";
  }
  std::cout.unsetf(std::ios::floatfield);
}

Expected<nlohmann::json> readTorch(const std::string &path) {
  std::ifstream is(path);
  if (!is)
    return errorf("--torch: cannot open '", path, "'");
  nlohmann::json j = nlohmann::json::parse(is, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("eager_ms") ||
      !j.contains("graph_ms") || !j["eager_ms"].is_number() ||
      !j["graph_ms"].is_number())
    return errorf("--torch: '", path,
                  "' is not bench/torch_decode.py output (needs numeric "
                  "eager_ms and graph_ms)");
  return j;
}

//===----------------------------------------------------------------------===//
// The decode attention kernel alone
//===----------------------------------------------------------------------===//

/// Microseconds per attention (with its cache write) over `copies` caches
/// in turn, from a graph of one launch per copy replayed `reps` times.
Expected<double> timeAttention(const cu::TensorRef &q, const cu::TensorRef &k,
                               const cu::TensorRef &v,
                               const std::vector<cu::TensorRef> &kc,
                               const std::vector<cu::TensorRef> &vc,
                               const cu::TensorRef &pos, const cu::TensorRef &o,
                               const cpu::AttentionParams &p,
                               const cu::AttentionWorkspace &ws, int reps) {
  cu::Stream stream;
  BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(stream.out(), cudaStreamNonBlocking));
  auto flag = cu::DeviceErrorFlag::create();
  if (!flag)
    return flag.status();
  cu::Graph graph;
  cu::GraphExec exec;
  BRAID_CUDA_CHECK(
      cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  Status captured = Status::ok();
  for (size_t c = 0; c < kc.size() && captured; ++c)
    captured = cu::attentionWithCache(q, k, v, kc[c], vc[c], pos, o, p,
                                      flag->get(), stream.get(), ws);
  BRAID_CUDA_CHECK(cudaStreamEndCapture(stream.get(), graph.out()));
  BRAID_RETURN_IF_ERROR(captured);
  BRAID_CUDA_CHECK(cudaGraphInstantiate(exec.out(), graph.get(), 0));
  for (int i = 0; i < 3; ++i)
    BRAID_CUDA_CHECK(cudaGraphLaunch(exec.get(), stream.get()));
  BRAID_RETURN_IF_ERROR(flag->check(stream.get()));
  cu::Event start, stop;
  BRAID_CUDA_CHECK(cudaEventCreate(start.out()));
  BRAID_CUDA_CHECK(cudaEventCreate(stop.out()));
  std::vector<double> perLaunch;
  for (int r = 0; r < reps; ++r) {
    BRAID_CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
    BRAID_CUDA_CHECK(cudaGraphLaunch(exec.get(), stream.get()));
    BRAID_CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
    BRAID_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    BRAID_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    perLaunch.push_back(double(ms) * 1e3 / double(kc.size()));
  }
  BRAID_RETURN_IF_ERROR(flag->check(stream.get()));
  return median(perLaunch);
}

Status benchDecodeAttention(const LoadedPlan &loaded, const Inputs &in,
                            const Bandwidth &bw, const Options &o) {
  const plan::Function *f = loaded.function("decode");
  if (!f)
    return Status::ok();
  const plan::Op *att = nullptr;
  for (const plan::Op *op : *f->ops())
    if (op->opcode() == plan::OpCode::Attention && op->operands()->size() == 6)
      att = op;
  if (!att)
    return Status::ok();
  auto shapeOf = [&](unsigned i) {
    const plan::Tensor &t = *f->tensors()->Get(att->operands()->Get(i));
    return Shape(t.shape()->begin(), t.shape()->end());
  };
  DType dt = f->tensors()->Get(att->operands()->Get(0))->dtype();
  Shape qs = shapeOf(0), ks = shapeOf(1), cs = shapeOf(3);
  const int64_t maxS = cs[1], position = std::min(in.position, maxS - 1);
  const size_t cacheBytes = size_t(numElements(cs)) * dtypeSize(dt);
  // Enough copies that k and v caches together span 4x an H100's L2.
  const int copies = int(std::clamp<size_t>(
      (size_t(200) << 20) / (2 * cacheBytes) + 1, 2, 64));
  std::vector<cu::DeviceMemory> mem;
  auto alloc = [&](const Shape &s, DType t) -> Expected<cu::TensorRef> {
    cu::DeviceMemory m;
    size_t bytes = size_t(numElements(s)) * dtypeSize(t);
    BRAID_CUDA_CHECK(cudaMalloc(m.out(), bytes));
    cu::TensorRef r{m.get(), t, s};
    mem.push_back(std::move(m));
    return r;
  };
  // Random contents (never zeros): one cache's bytes, copied to the others.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> values(size_t(numElements(cs)));
  for (float &x : values)
    x = u(rng);
  HostTensor noise = HostTensor::fromFloats(dt, cs, values);
  std::vector<cu::TensorRef> kc, vc;
  for (int c = 0; c < 2 * copies; ++c) {
    auto r = alloc(cs, dt);
    if (!r)
      return r.status();
    BRAID_CUDA_CHECK(cudaMemcpy(r->data, noise.bytes.data(), cacheBytes,
                                cudaMemcpyHostToDevice));
    (c % 2 ? vc : kc).push_back(*r);
  }
  auto q = alloc(qs, dt), k = alloc(ks, dt), v = alloc(ks, dt),
       out = alloc(qs, dt), pos = alloc({qs[0]}, DType::I64);
  for (auto *t : {&q, &k, &v, &out, &pos})
    if (!*t)
      return t->status();
  for (auto *t : {&q, &k, &v})
    BRAID_CUDA_CHECK(cudaMemcpy((*t)->data, noise.bytes.data(),
                                size_t(numElements((*t)->shape)) * dtypeSize(dt),
                                cudaMemcpyHostToDevice));
  std::vector<int64_t> positions(size_t(qs[0]), position);
  BRAID_CUDA_CHECK(cudaMemcpy(pos->data, positions.data(),
                              positions.size() * sizeof(int64_t),
                              cudaMemcpyHostToDevice));
  cpu::AttentionParams p = cpu::attentionParamsOf(*att);
  int device = 0, sms = 0;
  BRAID_CUDA_CHECK(cudaGetDevice(&device));
  BRAID_CUDA_CHECK(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // The default tiling first, then a sweep of the two knobs (keys per
  // tile, blocks per multiprocessor the split count aims at).
  // Then the tensor-core kernel (AttentionTensorCore.cuh) at 1, 2 (its
  // default) and 4 blocks per multiprocessor.
  // And the tensor-core kernel with the cache write fused in.
  struct Variant {
    int keyTile, perSm;
    bool tensorCore;
    bool fuseCacheWrite = false;
  };
  const std::vector<Variant> variants =
      o.smoke ? std::vector<Variant>{{0, 0, false}, {0, 0, true}}
              : std::vector<Variant>{
                    {0, 0, false},      {32, 4, false},    {32, 16, false},
                    {16, 8, false},     {16, 16, false},   {8, 16, false},
                    {0, 0, true},       {0, 1, true},      {0, 4, true},
                    {0, 0, true, true}, {0, 1, true, true}};
  size_t most = 0;
  for (const Variant &v : variants)
    most = std::max(most,
                    cu::attentionWorkspaceBytes(qs, ks[2], maxS, sms, v.keyTile,
                                                v.perSm, v.tensorCore));
  void *scratch = nullptr;
  if (most) {
    auto w = alloc({int64_t(most)}, DType::I32);
    if (!w)
      return w.status();
    scratch = w->data;
  }
  const int reps = o.smoke ? 3 : 20;
  struct Result {
    std::string name;
    double us;
    double maxDiff; // max |o - the default's o|
  };
  std::vector<Result> results;
  // The output of the last launch, as floats: every variant must agree
  // with the default one (the table's last column says how closely).
  std::vector<float> reference;
  auto differs = [&]() -> Expected<double> {
    HostTensor h(dt, qs);
    BRAID_CUDA_CHECK(cudaMemcpy(h.bytes.data(), out->data, h.bytes.size(),
                                cudaMemcpyDeviceToHost));
    std::vector<float> got = h.toFloats();
    if (reference.empty())
      reference = got;
    return largestDifference(got, reference);
  };
  for (const Variant &var : variants) {
    cu::AttentionWorkspace ws;
    ws.multiprocessors = sms;
    ws.keyTile = var.keyTile;
    ws.blocksPerMultiprocessor = var.perSm;
    ws.tensorCore = var.tensorCore;
    ws.fuseCacheWrite = var.fuseCacheWrite;
    ws.bytes = cu::attentionWorkspaceBytes(qs, ks[2], maxS, sms, var.keyTile,
                                           var.perSm, var.tensorCore);
    ws.data = ws.bytes ? scratch : nullptr;
    auto t = cu::detail::planAttention(qs[0], qs[1], qs[2], ks[2], qs[3], maxS,
                                       int64_t(dtypeSize(dt)), sms, var.keyTile,
                                       var.perSm, var.tensorCore);
    if (var.tensorCore && !t.tensorCore)
      continue; // not this plan's dtype or head_dim
    auto us = timeAttention(*q, *k, *v, kc, vc, *pos, *out, p, ws, reps);
    if (!us)
      return us.status();
    auto diff = differs();
    if (!diff)
      return diff.status();
    std::ostringstream name;
    if (t.tensorCore)
      name << (var.perSm == 0 ? "tensor cores (2 blocks/SM)" : "tensor cores")
           << (var.fuseCacheWrite ? ", cache write fused: " : ": ");
    else
      name << (var.keyTile == 0 ? "split-KV (its default tiling): "
                                : "split-KV: ");
    name << t.keyTile << "-key tiles, " << t.rowTile << "-row tiles, "
         << t.splits << " splits of " << t.keysPerSplit << " keys, "
         << t.sharedBytes / 1024.0 << " KiB shared";
    results.push_back({name.str(), *us, *diff});
  }
  auto whole = timeAttention(*q, *k, *v, kc, vc, *pos, *out, p, {}, reps);
  if (!whole)
    return whole.status();
  auto diff = differs();
  if (!diff)
    return diff.status();
  results.push_back(
      {"one split: each block walks all its keys", *whole, *diff});
  // Minimum bytes: cache rows [0, position + 1) of k and v read once, the
  // new k, v rows read and written, q read and o written.
  const double rowBytes = double(cacheBytes) / double(maxS);
  const double bytes = 2 * rowBytes * double(position + 1) +
                       4 * double(numElements(ks) * int64_t(dtypeSize(dt))) +
                       2 * double(numElements(qs) * int64_t(dtypeSize(dt)));
  std::cout << "\n## Decode attention kernel (q " << qs[0] << "x" << qs[1]
            << "x" << qs[2] << "x" << qs[3] << ", cache " << cs[0] << "x"
            << cs[1] << "x" << cs[2] << "x" << cs[3] << ", position "
            << position << "; a graph of " << copies
            << " launches over distinct caches, median of " << reps
            << ")\n\n| kernel | us | GB/s | % of peak | % of copy | max "
               "abs diff vs the first row |\n|---|---|---|---|---|---|\n";
  for (const Result &r : results) {
    double gbs = bytes / (r.us * 1e-6) / 1e9;
    std::cout << "| " << r.name << " | " << std::fixed << std::setprecision(2)
              << r.us << " | " << std::setprecision(0) << gbs << " | "
              << std::setprecision(1) << 100 * gbs / bw.peakGBs << " | "
              << 100 * gbs / bw.copyGBs << " | " << std::scientific
              << std::setprecision(2) << r.maxDiff << " |\n";
  }
  std::cout.unsetf(std::ios::floatfield);
  return Status::ok();
}

/// The decode outputs of two runs' last timed steps, element by element:
/// the largest difference per output.
void printDifferences(const cu::TensorMap &mine, const cu::TensorMap &theirs,
                      const std::string &label) {
  for (const auto &[name, a] : mine) {
    auto b = theirs.find(name);
    if (b == theirs.end() || b->second.shape != a.shape)
      continue;
    std::vector<float> x = a.toFloats(), y = b->second.toFloats();
    const double worst = largestDifference(x, y);
    double scale = 0;
    for (float v : y)
      scale = std::max(scale, double(std::fabs(v)));
    std::cout << "\n"
              << label << "decode output '" << name << "': largest difference "
              << std::scientific << std::setprecision(3) << worst
              << " (largest magnitude " << scale << ")\n";
  }
  std::cout.unsetf(std::ios::floatfield);
}

/// Item 6: `loaded` (with its measured steps) against the plan o.against,
/// run the same way on the same inputs.
Status compareWith(const LoadedPlan &loaded, const StepTimes &graph,
                   const StepTimes &eager, const StepTimes &profiled,
                   const Inputs &in, const Options &o) {
  auto other = loadPlanFile(o.against);
  if (!other)
    return other.status();
  if (other->root().world_size() != 1)
    return errorf("--against: ", o.against, " has ",
                  other->root().world_size(), " ranks, the benchmark runs tp 1");
  auto times = timePlan(*other, in, o, "--against, ");
  if (!times)
    return times.status();
  const StepTimes *og = &times->graph, *oe = &times->eager,
                  *op = &times->profiled;
  double g = median(graph.device), e = median(eager.device);
  double g2 = median(og->device), e2 = median(oe->device);
  std::cout << "\n## Against " << o.against
            << " (decode step, same inputs)\n\n| runner | this plan ms | "
               "other plan ms | other / this |\n|---|---|---|---|\n"
            << std::fixed << std::setprecision(4) << "| CUDA Graph | " << g
            << " | " << g2 << " | " << std::setprecision(3) << g2 / g
            << " |\n"
            << std::setprecision(4) << "| eager | " << e << " | " << e2
            << " | " << std::setprecision(3) << e2 / e << " |\n";
  // Per op kind: launches and summed time in one eager, profiled step.
  struct Kind {
    int count[2] = {0, 0};
    double ms[2] = {0, 0};
  };
  std::map<std::string, Kind> kinds;
  for (int side = 0; side < 2; ++side)
    for (const OpTime &t : side == 0 ? profiled.ops : op->ops) {
      Kind &k = kinds[t.name];
      ++k.count[side];
      k.ms[side] += t.seconds * 1e3;
    }
  std::cout << "\n| op | this plan: ops | ms | other plan: ops | ms |\n"
               "|---|---|---|---|---|\n";
  Kind total;
  for (const auto &[name, k] : kinds) {
    std::cout << "| " << name << " | " << k.count[0] << " | "
              << std::setprecision(4) << k.ms[0] << " | " << k.count[1]
              << " | " << k.ms[1] << " |\n";
    for (int side = 0; side < 2; ++side) {
      total.count[side] += k.count[side];
      total.ms[side] += k.ms[side];
    }
  }
  std::cout << "| all | " << total.count[0] << " | " << total.ms[0] << " | "
            << total.count[1] << " | " << total.ms[1] << " |\n";
  printDifferences(graph.lastDecode, og->lastDecode, "");
  return Status::ok();
}

Status run(const Options &o) {
  auto loaded = loadPlanFile(o.plan);
  if (!loaded)
    return loaded.status();
  if (loaded->root().world_size() != 1)
    return errorf("the benchmark runs a tp 1 plan on one GPU; this plan has ",
                  loaded->root().world_size(), " ranks");
  auto shape = generationShape(loaded->root());
  if (!shape)
    return shape.status();
  std::optional<nlohmann::json> torch;
  if (!o.torch.empty()) {
    auto j = readTorch(o.torch);
    if (!j)
      return j.status();
    torch = *j;
  }
  auto bw = deviceBandwidth();
  if (!bw)
    return bw.status();
  Inputs in = makeInputs(*shape, loaded->root(), o);

  auto times = timePlan(*loaded, in, o, "");
  if (!times)
    return times.status();
  const StepTimes *graph = &times->graph, *eager = &times->eager,
                  *profiled = &times->profiled;
  // The same graph with each attention kernel forced (the rows above use
  // the executor's automatic choice, ExecutorOptions::attentionKernel).
  auto tensorCore =
      timeSteps(*loaded, true, false, in, o, cu::AttentionKernel::TensorCore);
  if (!tensorCore)
    return errorf("graph, tensor-core attention: ",
                  tensorCore.status().message());
  auto split =
      timeSteps(*loaded, true, false, in, o, cu::AttentionKernel::Split);
  if (!split)
    return errorf("graph, split-KV attention: ", split.status().message());
  // And with every GEMM autotuned (ExecutorOptions::gemmAutotune).
  constexpr int kTuneCandidates = 8;
  auto tuned = timeSteps(*loaded, true, false, in, o, cu::AttentionKernel::Auto,
                         kTuneCandidates);
  if (!tuned)
    return errorf("graph, GEMMs autotuned: ", tuned.status().message());
  // And with tensor cores doing the cache write (ExecutorOptions::
  // fuseCacheWrite).
  auto fused = timeSteps(*loaded, true, false, in, o,
                         cu::AttentionKernel::TensorCore, 0, true);
  if (!fused)
    return errorf("graph, tensor cores with the cache write fused: ",
                  fused.status().message());

  double g = median(graph->device), e = median(eager->device);
  std::cout << "# braid-cuda-bench: " << o.plan << " on " << bw->device
            << "\n\nbatch " << shape->batch << ", prompt "
            << shape->promptLength << ", decode at position " << in.position
            << "; " << o.iters << " timed steps after " << o.warmup
            << " warmup, medians of CUDA-event step times\n\n"
            << "## Decode step\n\n| runner | step ms | host launch ms | "
               "vs braid graph |\n|---|---|---|---|\n"
            << std::fixed << std::setprecision(4) << "| braid, CUDA Graph | "
            << g << " | " << median(graph->host) << " | 1.000 |\n"
            << "| braid, eager | " << e << " | " << median(eager->host) << " | "
            << std::setprecision(3) << e / g << " |\n"
            << std::setprecision(4)
            << "| braid, CUDA Graph, tensor-core attention | "
            << median(tensorCore->device) << " | " << median(tensorCore->host)
            << " | " << std::setprecision(3) << median(tensorCore->device) / g
            << " |\n"
            << std::setprecision(4)
            << "| braid, CUDA Graph, split-KV attention | "
            << median(split->device) << " | " << median(split->host) << " | "
            << std::setprecision(3) << median(split->device) / g << " |\n"
            << std::setprecision(4)
            << "| braid, CUDA Graph, tensor cores, cache write fused | "
            << median(fused->device) << " | " << median(fused->host) << " | "
            << std::setprecision(3) << median(fused->device) / g << " |\n"
            << std::setprecision(4) << "| braid, CUDA Graph, GEMMs autotuned ("
            << kTuneCandidates << " candidates) | " << median(tuned->device)
            << " | " << median(tuned->host) << " | " << std::setprecision(3)
            << median(tuned->device) / g << " |\n";
  if (torch) {
    double te = (*torch)["eager_ms"].get<double>();
    double tg = (*torch)["graph_ms"].get<double>();
    std::cout << std::setprecision(4) << "| PyTorch eager | " << te
              << " | | " << std::setprecision(3) << te / g << " |\n"
              << std::setprecision(4) << "| PyTorch, CUDA graph | " << tg
              << " | | " << std::setprecision(3) << tg / g << " |\n";
  }
  printDifferences(tensorCore->lastDecode, split->lastDecode,
                   "tensor-core attention vs the split kernel, ");
  // Prefill is where the heuristic's GEMM choice was furthest off the best
  // (the GEMM table below); one prefill each, so a single sample.
  std::cout << "\nPrefill (one step, CUDA Graph, device time): "
            << std::setprecision(4) << graph->prefillMs
            << " ms with the heuristic's GEMMs, " << tuned->prefillMs
            << " ms autotuned (" << std::setprecision(3)
            << tuned->prefillMs / graph->prefillMs << "x)\n";
  printDifferences(tuned->lastDecode, graph->lastDecode,
                   "GEMMs autotuned vs the heuristic's, ");
  printDifferences(fused->lastDecode, tensorCore->lastDecode,
                   "cache write fused vs not (tensor cores), ");
  double opSum = sumMs(profiled->ops);
  std::cout << "\n## Launch gaps (decode step vs the sum of its " 
            << profiled->ops.size() << " ops' times, eager with per-op "
            << "events)\n\n| runner | step ms | sum of ops ms | gap ms | gap "
               "% of step |\n|---|---|---|---|---|\n"
            << std::setprecision(4) << "| CUDA Graph | " << g << " | "
            << opSum << " | " << g - opSum << " | " << std::setprecision(1)
            << 100 * (g - opSum) / g << " |\n"
            << std::setprecision(4) << "| eager | " << e << " | " << opSum
            << " | " << e - opSum << " | " << std::setprecision(1)
            << 100 * (e - opSum) / e << " |\n";
  std::cout.unsetf(std::ios::floatfield);
  BRAID_RETURN_IF_ERROR(benchGemms(*loaded, o));
  printMemoryBound(*loaded, *profiled, in, *bw);
  BRAID_RETURN_IF_ERROR(benchDecodeAttention(*loaded, in, *bw, o));
  if (o.against.empty())
    return Status::ok();
  return compareWith(*loaded, *graph, *eager, *profiled, in, o);
}

} // namespace

int main(int argc, char **argv) {
  auto o = parseArgs(argc, argv);
  if (!o) {
    std::cerr << "braid-cuda-bench: error: " << o.status().message() << "\n";
    return 1;
  }
  Status available = cu::cudaDeviceAvailable();
  if (!available) {
    std::cerr << "braid-cuda-bench: skipped: " << available.message() << "\n";
    return 77;
  }
  Status st = run(*o);
  if (!st) {
    std::cerr << "braid-cuda-bench: error: " << st.message() << "\n";
    return 1;
  }
  return 0;
}
