//===- CpuBench.cpp - the CPU reference interpreter's hot spots -----------===//
//
// Side by side in one run, before and after, on the shapes of a
// Llama-3-8B-shaped step (hidden 4096):
// - matmul: the way the interpreter multiplied before (the weight converted
//   to a whole f32 copy, then one dot product per element) against the
//   blocked kernel reading the weight in place, for f32 and bf16 weights,
//   at decode (1 row) and prefill (32 rows), on one thread and on two;
// - weights: generating a 4096 x 4096 bf16 parameter element by element
//   (the name hashed and the shard rule divided per element, then an f32
//   copy converted) against initialParameterValue (row-wise map, straight
//   into bf16, threads);
// - decode attention over bf16 KV caches of max_seq 4096: the whole caches
//   converted to f32 and stored back each step against
//   attentionWithStoredCache, which touches only what it attends to.
//
//===----------------------------------------------------------------------===//
#include "runtime/HostTensor.h"
#include "runtime/Weights.h"
#include "runtime/cpu/Kernels.h"

#include "flatbuffers/flatbuffers.h"
#include "runtime/plan_generated.h"

#include <benchmark/benchmark.h>

using namespace braid::rt;
namespace plan = braid::plan;

namespace {

constexpr int64_t kHidden = 4096;

HostTensor stored(DType dtype, Shape shape, float scale) {
  std::vector<float> v(size_t(numElements(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * float(int64_t(i * 2654435761u % 2001) - 1000) * 1e-3f;
  return HostTensor::fromFloats(dtype, std::move(shape), v);
}

/// x [rows, 4096] times w [n, 4096]^T (a Linear layer, HF layout).
void matmulBench(benchmark::State &state, bool blocked, DType weightDtype,
                 int64_t rows, int64_t n, int threads = 1) {
  HostTensor x = stored(DType::F32, {1, rows, kHidden}, 1.0f);
  HostTensor w = stored(weightDtype, {n, kHidden}, 0.02f);
  cpu::FView xv{x.shape, x.bytes.data(), x.dtype};
  for (auto _ : state) {
    if (blocked) {
      auto y = cpu::matmul(xv, cpu::FView{w.shape, w.bytes.data(), w.dtype},
                           false, true, threads);
      benchmark::DoNotOptimize(y);
    } else {
      cpu::FTensor wf{w.shape, w.toFloats()}; // the interpreter's loadF
      auto y = cpu::matmulReference(xv, wf.view(), false, true);
      benchmark::DoNotOptimize(y);
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(2 * rows * n * kHidden),
                         benchmark::Counter::kIsIterationInvariantRate);
}

/// A one-parameter plan: `name`, bf16 [4096, 4096] sharded on dim 0 over a
/// group of 2 (rank 0's half generated).
std::vector<uint8_t> oneParameterPlan(const std::string &name) {
  plan::PlanT p;
  p.world_size = 2;
  auto g = std::make_unique<plan::DeviceGroupT>();
  g->name = "tp";
  g->size = 2;
  p.groups.push_back(std::move(g));
  auto param = std::make_unique<plan::ParameterT>();
  param->name = name;
  param->dtype = DType::BF16;
  param->full_shape = {kHidden, kHidden};
  param->local_shape = {kHidden / 2, kHidden};
  auto shard = std::make_unique<plan::ShardRuleT>();
  shard->dim = 0;
  shard->group = 0;
  shard->blocks = 1;
  param->shard = std::move(shard);
  p.parameters.push_back(std::move(param));
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(plan::Plan::Pack(fbb, &p));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

void weightsBench(benchmark::State &state, bool rowWise) {
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  std::vector<uint8_t> bytes = oneParameterPlan(name);
  const plan::Plan &p = *plan::GetPlan(bytes.data());
  const plan::Parameter &param = *p.parameters()->Get(0);
  auto [full, local, padded] = parameterShapes(param);
  ShardSpec spec = shardSpecFor(p, param, 0);
  for (auto _ : state) {
    if (rowWise) {
      auto t = initialParameterValue(p, param, 0, SyntheticWeights(1));
      benchmark::DoNotOptimize(t);
    } else {
      auto map = localIndexMap(full, padded, spec);
      std::vector<float> values;
      for (int64_t e = 0; e < map->localCount; ++e) {
        int64_t f = weights::fullIndexOf(*map, e);
        values.push_back(f < 0 ? 0.0f : weightValue(1, name, f));
      }
      HostTensor t = HostTensor::fromFloats(param.dtype(), local, values);
      benchmark::DoNotOptimize(t);
    }
  }
  state.counters["elements/s"] =
      benchmark::Counter(double(numElements(local)),
                         benchmark::Counter::kIsIterationInvariantRate);
}

/// One decode step's attention of a Llama-3-8B-shaped layer (32 query and 8
/// KV heads of 128, bf16 caches of max_seq 4096) at position `pos`: the
/// interpreter's way before (both caches converted to f32, attended, and
/// stored back whole) against attentionWithStoredCache (the caches stay in
/// bf16; only the entries attended to are read, only the new one written).
void decodeAttentionBench(benchmark::State &state, bool inStorage,
                          int64_t pos) {
  const int64_t maxS = 4096, hq = 32, hkv = 8, dh = 128;
  HostTensor kc = stored(DType::BF16, {1, maxS, hkv, dh}, 1.0f);
  HostTensor vc = stored(DType::BF16, {1, maxS, hkv, dh}, 0.5f);
  cpu::FTensor q{{1, 1, hq, dh},
                 stored(DType::F32, {hq * dh}, 1.0f).toFloats()};
  cpu::FTensor k{{1, 1, hkv, dh},
                 stored(DType::F32, {hkv * dh}, 0.7f).toFloats()};
  cpu::FTensor v = k;
  cpu::AttentionParams p;
  p.causal = true;
  p.numHeads = hq;
  p.numKvHeads = hkv;
  p.headDim = dh;
  cpu::ITensor position{{1}, {pos}};
  for (auto _ : state) {
    if (inStorage) {
      auto o = cpu::attentionWithStoredCache(
          q, k, v, {kc.shape, kc.dtype, kc.bytes.data(), kc.bytes.data()},
          {vc.shape, vc.dtype, vc.bytes.data(), vc.bytes.data()}, position, p);
      benchmark::DoNotOptimize(o);
    } else {
      cpu::FTensor kf{kc.shape, kc.toFloats()}, vf{vc.shape, vc.toFloats()};
      auto o = cpu::attentionWithCache(q, k, v, kf, vf, position, p);
      storeFromFloat(kc.dtype, kf.data.data(), int64_t(kf.data.size()),
                     kc.bytes.data());
      storeFromFloat(vc.dtype, vf.data.data(), int64_t(vf.data.size()),
                     vc.bytes.data());
      benchmark::DoNotOptimize(o);
    }
  }
}

} // namespace

BENCHMARK_CAPTURE(decodeAttentionBench, before_pos128, false, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decodeAttentionBench, after_pos128, true, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decodeAttentionBench, before_pos4000, false, 4000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(decodeAttentionBench, after_pos4000, true, 4000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmulBench, before_f32_decode, false, DType::F32, 1, 4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmulBench, after_f32_decode, true, DType::F32, 1, 4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmulBench, before_bf16_decode, false, DType::BF16, 1, 4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmulBench, after_bf16_decode, true, DType::BF16, 1, 4096)
    ->Unit(benchmark::kMillisecond);
// Two threads (the cores a tp-1 CPU run leaves free on this machine).
BENCHMARK_CAPTURE(matmulBench, after_bf16_decode_2threads, true, DType::BF16, 1,
                  4096, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(matmulBench, before_bf16_prefill32, false, DType::BF16, 32,
                  1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmulBench, after_bf16_prefill32, true, DType::BF16, 32,
                  1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmulBench, after_bf16_prefill32_2threads, true, DType::BF16,
                  32, 1024, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(weightsBench, before_per_element, false)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(weightsBench, after_row_wise, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
