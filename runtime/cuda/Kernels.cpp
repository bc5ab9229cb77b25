//===- Kernels.cpp - Shape checks and launches of the CUDA kernels --------===//
//
// The host half of runtime/cuda/Kernels.h: every check the CPU kernel makes
// (the shared rules of runtime/cpu/ShapeRules.h), the checks only the device
// needs, then the raw launchers of Kernels.cu (DeviceKernels.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Kernels.h"
#include "runtime/Views.h"
#include "runtime/Weights.h"
#include "runtime/cpu/ShapeRules.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceKernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

using namespace braid::rt;
using namespace braid::rt::cuda;
using cpu::AttentionDims;
using detail::Dt;

namespace {

Dt deviceType(DType t) {
  switch (t) {
  case DType::F32:
    return Dt::F32;
  case DType::F16:
    return Dt::F16;
  case DType::BF16:
    return Dt::BF16;
  case DType::I32:
    return Dt::I32;
  case DType::I64:
    return Dt::I64;
  }
  return Dt::F32;
}
detail::In in(const TensorRef &t) { return {t.data, deviceType(t.dtype)}; }
detail::Out out(const TensorRef &t) { return {t.data, deviceType(t.dtype)}; }

constexpr size_t kMaxPlanRank = detail::kMaxRank - 1;

/// Compute kernels index their operands as typed arrays: non-empty tensors
/// need device data aligned to their dtype (plan buffers from the arena
/// planner are; a misaligned one is an error, not a fault).
Status checkData(const char *op, const char *what, const TensorRef &t) {
  if (numElements(t.shape) == 0)
    return Status::ok();
  if (!t.data)
    return errorf(op, ": ", what, " ", formatShape(t.shape),
                  " has no device data");
  size_t align = dtypeSize(t.dtype);
  if (align == 0)
    return errorf(op, ": ", what, " has an unknown dtype ", int(t.dtype));
  if (reinterpret_cast<uintptr_t>(t.data) % align)
    return errorf(op, ": ", what, " at ", t.data, " is not aligned to its ",
                  align, "-byte ", dtypeName(t.dtype),
                  " elements (the CUDA kernels need dtype-aligned buffers)");
  return Status::ok();
}

Status checkResult(const char *op, const TensorRef &y, const Shape &want) {
  if (y.shape != want)
    return errorf(op, ": result ", formatShape(y.shape), " must be ",
                  formatShape(want));
  return Status::ok();
}

// The CPU kernel's checks, plus the kernel's head_dim limit.
Expected<AttentionDims> checkQkv(const TensorRef &q, const TensorRef &k,
                                 const TensorRef &v, const AttentionParams &p) {
  auto dims = cpu::checkAttentionShapes(q.shape, k.shape, v.shape, p);
  if (!dims)
    return dims.status();
  const AttentionDims &d = *dims;
  if (d.d > detail::kMaxAttentionHeadDim)
    return errorf("attention: head_dim ", d.d,
                  " exceeds the CUDA kernel's limit of ",
                  detail::kMaxAttentionHeadDim);
  return d;
}

Status checkKeyRows(int64_t rows) {
  if (rows > detail::kMaxAttentionKeys)
    return errorf("attention: ", rows,
                  " key rows exceed the CUDA kernel's limit of ",
                  detail::kMaxAttentionKeys);
  return Status::ok();
}

/// The launch arguments shared by attention with and without a cache; the
/// caller sets what reads the cache (k, v, keyStride, position, error).
detail::AttentionArgs attentionArgs(const TensorRef &q, const TensorRef &o,
                                    const AttentionDims &d,
                                    const AttentionParams &p) {
  detail::AttentionArgs a{};
  a.q = in(q);
  a.o = out(o);
  a.batch = d.b;
  a.seq = d.sq;
  a.heads = d.hq;
  a.kvHeads = d.hkv;
  a.headDim = d.d;
  a.scale = p.scale != 0.0 ? float(p.scale) : 1.0f / std::sqrt(float(d.d));
  a.causal = p.causal;
  a.slidingWindow = p.causal ? p.slidingWindow : 0;
  return a;
}

detail::Dims dimsOf(const std::vector<int64_t> &v) {
  detail::Dims d{};
  for (size_t i = 0; i < v.size() && i < size_t(detail::kMaxRank); ++i)
    d.v[i] = v[i];
  return d;
}

std::vector<int64_t> contiguousStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Status cuda::binary(BinaryKind kind, const TensorRef &lhs, const TensorRef &rhs,
                    const TensorRef &result, cudaStream_t stream) {
  const char *name = kind == BinaryKind::Add ? "add" : "mul";
  auto bc = cpu::checkBroadcast(name, lhs.shape, rhs.shape);
  if (!bc)
    return bc.status();
  size_t rl = lhs.shape.size();
  BRAID_RETURN_IF_ERROR(checkResult(name, result, lhs.shape));
  if (rl > kMaxPlanRank)
    return errorf(name, ": rank ", rl, " exceeds the CUDA kernel's limit of ",
                  kMaxPlanRank);
  BRAID_RETURN_IF_ERROR(checkData(name, "lhs", lhs));
  BRAID_RETURN_IF_ERROR(checkData(name, "rhs", rhs));
  BRAID_RETURN_IF_ERROR(checkData(name, "result", result));
  int64_t count = numElements(lhs.shape), rhsCount = numElements(rhs.shape);
  detail::Broadcast mode = rhsCount == count ? detail::Broadcast::Same
                           : bc->exact       ? detail::Broadcast::Modulo
                                             : detail::Broadcast::General;
  BRAID_CUDA_CHECK(detail::launchBinary(
      kind == BinaryKind::Mul, in(lhs), in(rhs), out(result), count, mode,
      rhsCount, int(rl), dimsOf(lhs.shape), dimsOf(bc->rhsStride), stream));
  return Status::ok();
}

static Status unary(const char *name, detail::Unary kind, const TensorRef &x,
                    const TensorRef &y, cudaStream_t stream) {
  BRAID_RETURN_IF_ERROR(checkResult(name, y, x.shape));
  BRAID_RETURN_IF_ERROR(checkData(name, "input", x));
  BRAID_RETURN_IF_ERROR(checkData(name, "result", y));
  BRAID_CUDA_CHECK(
      detail::launchUnary(kind, in(x), out(y), numElements(x.shape), stream));
  return Status::ok();
}

Status cuda::silu(const TensorRef &x, const TensorRef &y, cudaStream_t stream) {
  return unary("silu", detail::Unary::Silu, x, y, stream);
}

Status cuda::activation(const TensorRef &x, const TensorRef &y,
                        plan::ActivationKind kind, cudaStream_t stream) {
  if (kind < plan::ActivationKind::MIN || kind > plan::ActivationKind::MAX)
    return errorf("activation: unknown kind ", int(kind));
  // Unary lists braid.activation's kinds in plan order after the GELUs.
  static_assert(int(detail::Unary::Relu) + int(plan::ActivationKind::MAX) ==
                int(detail::Unary::SqrtSoftplus));
  return unary("activation",
               detail::Unary(int(detail::Unary::Relu) + int(kind)), x, y,
               stream);
}

Status cuda::swiglu(const TensorRef &gate, const TensorRef &up,
                    const TensorRef &y, cudaStream_t stream) {
  if (up.shape != gate.shape)
    return errorf("swiglu: up ", formatShape(up.shape), " differs from gate ",
                  formatShape(gate.shape));
  BRAID_RETURN_IF_ERROR(checkResult("swiglu", y, gate.shape));
  BRAID_RETURN_IF_ERROR(checkData("swiglu", "gate", gate));
  BRAID_RETURN_IF_ERROR(checkData("swiglu", "up", up));
  BRAID_RETURN_IF_ERROR(checkData("swiglu", "result", y));
  BRAID_CUDA_CHECK(detail::launchSwiglu(in(gate), in(up), out(y),
                                        numElements(gate.shape), stream));
  return Status::ok();
}

Status cuda::gelu(const TensorRef &x, const TensorRef &y, GeluKind kind,
                  cudaStream_t stream) {
  return unary("gelu",
               kind == GeluKind::Erf ? detail::Unary::GeluErf
                                     : detail::Unary::GeluTanh,
               x, y, stream);
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

Status cuda::rmsNorm(const TensorRef &x, const TensorRef &weight,
                     const TensorRef &y, double epsilon, cudaStream_t stream) {
  BRAID_RETURN_IF_ERROR(
      cpu::checkNormParam("rms_norm", "weight", x.shape, weight.shape));
  BRAID_RETURN_IF_ERROR(checkResult("rms_norm", y, x.shape));
  BRAID_RETURN_IF_ERROR(checkData("rms_norm", "input", x));
  BRAID_RETURN_IF_ERROR(checkData("rms_norm", "weight", weight));
  BRAID_RETURN_IF_ERROR(checkData("rms_norm", "result", y));
  int64_t h = x.shape.back(), rows = numElements(x.shape) / h;
  BRAID_CUDA_CHECK(detail::launchRmsNorm(in(x), in(weight), out(y), rows, h,
                                         float(epsilon), stream));
  return Status::ok();
}

Status cuda::addRmsNorm(const TensorRef &x, const TensorRef &residual,
                        const TensorRef &weight, const TensorRef &sum,
                        const TensorRef &y, double epsilon,
                        cudaStream_t stream) {
  if (residual.shape != x.shape)
    return errorf("add_rms_norm: residual ", formatShape(residual.shape),
                  " differs from the input ", formatShape(x.shape));
  BRAID_RETURN_IF_ERROR(
      cpu::checkNormParam("add_rms_norm", "weight", x.shape, weight.shape));
  BRAID_RETURN_IF_ERROR(checkResult("add_rms_norm", sum, x.shape));
  BRAID_RETURN_IF_ERROR(checkResult("add_rms_norm", y, x.shape));
  BRAID_RETURN_IF_ERROR(checkData("add_rms_norm", "input", x));
  BRAID_RETURN_IF_ERROR(checkData("add_rms_norm", "residual", residual));
  BRAID_RETURN_IF_ERROR(checkData("add_rms_norm", "weight", weight));
  BRAID_RETURN_IF_ERROR(checkData("add_rms_norm", "sum", sum));
  BRAID_RETURN_IF_ERROR(checkData("add_rms_norm", "result", y));
  int64_t h = x.shape.back(), rows = numElements(x.shape) / h;
  BRAID_CUDA_CHECK(detail::launchAddRmsNorm(in(x), in(residual), in(weight),
                                            out(sum), out(y), rows, h,
                                            float(epsilon), stream));
  return Status::ok();
}

Status cuda::layerNorm(const TensorRef &x, const TensorRef &weight,
                       const TensorRef &bias, const TensorRef &y,
                       double epsilon, cudaStream_t stream) {
  BRAID_RETURN_IF_ERROR(
      cpu::checkNormParam("layer_norm", "weight", x.shape, weight.shape));
  BRAID_RETURN_IF_ERROR(
      cpu::checkNormParam("layer_norm", "bias", x.shape, bias.shape));
  BRAID_RETURN_IF_ERROR(checkResult("layer_norm", y, x.shape));
  BRAID_RETURN_IF_ERROR(checkData("layer_norm", "input", x));
  BRAID_RETURN_IF_ERROR(checkData("layer_norm", "weight", weight));
  BRAID_RETURN_IF_ERROR(checkData("layer_norm", "bias", bias));
  BRAID_RETURN_IF_ERROR(checkData("layer_norm", "result", y));
  int64_t h = x.shape.back(), rows = numElements(x.shape) / h;
  BRAID_CUDA_CHECK(detail::launchLayerNorm(in(x), in(weight), in(bias), out(y),
                                           rows, h, float(epsilon), stream));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Rope, softmax, embedding
//===----------------------------------------------------------------------===//

Status cuda::rope(const TensorRef &x, const TensorRef &positions,
                  const TensorRef &y, double theta, cudaStream_t stream,
                  const double *invFreq, double attentionFactor,
                  int64_t rotaryDim) {
  auto dims = cpu::checkRopeShapes(x.shape, positions.shape, rotaryDim);
  if (!dims)
    return dims.status();
  BRAID_RETURN_IF_ERROR(checkResult("rope", y, x.shape));
  BRAID_RETURN_IF_ERROR(checkData("rope", "input", x));
  BRAID_RETURN_IF_ERROR(checkData("rope", "positions", positions));
  BRAID_RETURN_IF_ERROR(checkData("rope", "result", y));
  BRAID_CUDA_CHECK(detail::launchRope(in(x), in(positions), out(y),
                                      dims->b * dims->s, dims->h, dims->d,
                                      rotaryDim, theta, invFreq,
                                      attentionFactor, stream));
  return Status::ok();
}

Status cuda::softmax(const TensorRef &x, const TensorRef &y, int64_t dim,
                     cudaStream_t stream) {
  auto dims = cpu::checkSoftmaxShape(x.shape, dim);
  if (!dims)
    return dims.status();
  BRAID_RETURN_IF_ERROR(checkResult("softmax", y, x.shape));
  BRAID_RETURN_IF_ERROR(checkData("softmax", "input", x));
  BRAID_RETURN_IF_ERROR(checkData("softmax", "result", y));
  BRAID_CUDA_CHECK(detail::launchSoftmax(in(x), out(y), dims->outer, dims->n,
                                         dims->inner, stream));
  return Status::ok();
}

Status cuda::embedding(const TensorRef &ids, const TensorRef &table,
                       const TensorRef &result, int64_t vocabStart,
                       cudaStream_t stream) {
  auto want = cpu::checkEmbeddingShapes(ids.shape, table.shape);
  if (!want)
    return want.status();
  int64_t v = table.shape[0], h = table.shape[1];
  BRAID_RETURN_IF_ERROR(checkResult("embedding", result, *want));
  BRAID_RETURN_IF_ERROR(checkData("embedding", "ids", ids));
  BRAID_RETURN_IF_ERROR(checkData("embedding", "table", table));
  BRAID_RETURN_IF_ERROR(checkData("embedding", "result", result));
  BRAID_CUDA_CHECK(detail::launchEmbedding(in(ids), in(table), out(result),
                                           numElements(ids.shape), v, h,
                                           vocabStart, stream));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

size_t cuda::attentionWorkspaceBytes(const Shape &q, int64_t kvHeads,
                                     int64_t keyRows, int multiprocessors,
                                     int keyTile, int blocksPerMultiprocessor,
                                     bool tensorCore) {
  if (q.size() != 4)
    return 0;
  // Enough for 16-bit and 32-bit caches alike (their tiles can differ), and
  // for the split kernel where the tensor-core one turns out not to apply.
  size_t most = 0;
  for (int64_t elem : {2, 4})
    for (bool tc : {false, tensorCore}) {
      detail::AttentionTiling t = detail::planAttention(
          q[0], q[1], q[2], kvHeads, q[3], keyRows, elem, multiprocessors,
          keyTile, blocksPerMultiprocessor, tc);
      if (t.fits)
        most = std::max(most, t.workspaceBytes);
    }
  return most;
}

bool cuda::attentionUsesTensorCores(const TensorRef &q, const TensorRef &k,
                                    const TensorRef &v) {
  if (q.shape.size() != 4)
    return false;
  detail::AttentionArgs a{};
  a.q = in(q);
  a.k = in(k);
  a.v = in(v);
  a.headDim = q.shape[3];
  return detail::tensorCoreAttentionApplies(a);
}

namespace {
/// Hands `ws` to the launch; launchAttention splits only when the tiling's
/// workspace fits in it.
void useWorkspace(detail::AttentionArgs &a, const AttentionWorkspace &ws) {
  a.keyTile = ws.keyTile;
  a.blocksPerMultiprocessor = ws.blocksPerMultiprocessor;
  a.tensorCore = ws.tensorCore;
  a.fuseCacheWrite = ws.fuseCacheWrite;
  if (ws.data && ws.multiprocessors > 0) {
    a.partials = static_cast<float *>(ws.data);
    a.partialsBytes = ws.bytes;
  }
}
} // namespace

Status cuda::attention(const TensorRef &q, const TensorRef &k,
                       const TensorRef &v, const TensorRef &o,
                       const AttentionParams &p, cudaStream_t stream,
                       const AttentionWorkspace &ws) {
  auto dims = checkQkv(q, k, v, p);
  if (!dims)
    return dims.status();
  const AttentionDims &d = *dims;
  BRAID_RETURN_IF_ERROR(checkKeyRows(d.sq));
  BRAID_RETURN_IF_ERROR(checkResult("attention", o, q.shape));
  BRAID_RETURN_IF_ERROR(checkData("attention", "q", q));
  BRAID_RETURN_IF_ERROR(checkData("attention", "k", k));
  BRAID_RETURN_IF_ERROR(checkData("attention", "v", v));
  BRAID_RETURN_IF_ERROR(checkData("attention", "o", o));
  detail::AttentionArgs a = attentionArgs(q, o, d, p);
  a.k = in(k);
  a.v = in(v);
  a.keyStride = d.sq;
  a.position = {nullptr, Dt::I64};
  a.newK = a.newV = {nullptr, Dt::F32};
  a.error = nullptr;
  useWorkspace(a, ws);
  BRAID_CUDA_CHECK(detail::launchAttention(a, ws.multiprocessors, stream));
  return Status::ok();
}

Status cuda::attentionWithCache(const TensorRef &q, const TensorRef &k,
                                const TensorRef &v, const TensorRef &kCache,
                                const TensorRef &vCache,
                                const TensorRef &position, const TensorRef &o,
                                const AttentionParams &p,
                                DeviceErrorRecord *errors,
                                cudaStream_t stream,
                                const AttentionWorkspace &ws) {
  auto dims = checkQkv(q, k, v, p);
  if (!dims)
    return dims.status();
  const AttentionDims &d = *dims;
  BRAID_RETURN_IF_ERROR(cpu::checkAttentionCacheShapes(
      d, kCache.shape, vCache.shape, position.shape));
  if (!errors)
    return errorf("attention: a KV cache needs a DeviceErrorRecord to report "
                  "positions out of range");
  BRAID_RETURN_IF_ERROR(checkKeyRows(kCache.shape[1]));
  BRAID_RETURN_IF_ERROR(checkResult("attention", o, q.shape));
  BRAID_RETURN_IF_ERROR(checkData("attention", "q", q));
  BRAID_RETURN_IF_ERROR(checkData("attention", "k", k));
  BRAID_RETURN_IF_ERROR(checkData("attention", "v", v));
  BRAID_RETURN_IF_ERROR(checkData("attention", "k_cache", kCache));
  BRAID_RETURN_IF_ERROR(checkData("attention", "v_cache", vCache));
  BRAID_RETURN_IF_ERROR(checkData("attention", "position", position));
  BRAID_RETURN_IF_ERROR(checkData("attention", "o", o));
  // One kernel checks the positions on the device (the first bad batch
  // recorded) and, when all are in range, writes the new rows; then
  // attention over the cache. Both do nothing while a record is set, so a
  // bad position writes nothing, as on the CPU.
  detail::AttentionArgs a = attentionArgs(q, o, d, p);
  a.k = in(kCache); // written through too (launchAttention)
  a.v = in(vCache);
  a.keyStride = kCache.shape[1];
  a.position = in(position);
  a.newK = in(k);
  a.newV = in(v);
  a.error = errors;
  useWorkspace(a, ws);
  BRAID_CUDA_CHECK(detail::launchAttention(a, ws.multiprocessors, stream));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

detail::CopyPlan detail::planStridedCopy(uintptr_t dst, uintptr_t src,
                                         const int64_t *sizes,
                                         const int64_t *dstStrides,
                                         const int64_t *srcStrides, int rank,
                                         int64_t elemSize) {
  // Work in bytes: one dim per size>1 dim plus the element's bytes, then
  // merge dims that are contiguous in both source and destination, so a
  // dense slice becomes a few long runs.
  struct Dim {
    int64_t size, dst, src; // strides in bytes
  };
  std::vector<Dim> dims;
  for (int d = 0; d < rank; ++d)
    if (sizes[d] != 1)
      dims.push_back(
          {sizes[d], dstStrides[d] * elemSize, srcStrides[d] * elemSize});
  dims.push_back({elemSize, 1, 1});
  std::vector<Dim> merged{dims.back()}; // innermost first
  for (size_t i = dims.size() - 1; i-- > 0;) {
    Dim &inner = merged.back();
    const Dim &outer = dims[i];
    if (outer.dst == inner.dst * inner.size &&
        outer.src == inner.src * inner.size)
      inner.size *= outer.size;
    else
      merged.push_back(outer);
  }
  std::reverse(merged.begin(), merged.end()); // outermost first again

  // The widest unit that divides both addresses, the contiguous innermost
  // run and every other stride.
  auto fits = [&](int64_t u) {
    if (dst % uint64_t(u) || src % uint64_t(u) || merged.back().size % u)
      return false;
    for (size_t i = 0; i + 1 < merged.size(); ++i)
      if (merged[i].dst % u || merged[i].src % u)
        return false;
    return true;
  };
  int unit = 16;
  while (unit > 1 && !fits(unit))
    unit /= 2;
  CopyPlan plan;
  plan.rank = int(merged.size());
  plan.unitBytes = unit;
  plan.count = 1;
  for (size_t i = 0; i < merged.size(); ++i) {
    bool innermost = i + 1 == merged.size();
    plan.sizes.v[i] = innermost ? merged[i].size / unit : merged[i].size;
    plan.dstStrides.v[i] = innermost ? 1 : merged[i].dst / unit;
    plan.srcStrides.v[i] = innermost ? 1 : merged[i].src / unit;
    plan.count *= plan.sizes.v[i];
  }
  return plan;
}

Status cuda::stridedCopy(void *dst, const Shape &dstStrides, const void *src,
                         const Shape &srcStrides, const Shape &sizes,
                         size_t elemSize, cudaStream_t stream) {
  size_t r = sizes.size();
  if (dstStrides.size() != r || srcStrides.size() != r)
    return errorf("strided copy: ", r, " sizes but ", dstStrides.size(),
                  " destination and ", srcStrides.size(), " source strides");
  if (r > kMaxPlanRank)
    return errorf("strided copy: rank ", r, " exceeds the limit of ",
                  kMaxPlanRank);
  if (elemSize == 0)
    return errorf("strided copy: zero element size");
  for (size_t d = 0; d < r; ++d)
    if (sizes[d] < 0 || dstStrides[d] < 0 || srcStrides[d] < 0)
      return errorf("strided copy: negative size or stride in dim ", d);
  if (numElements(sizes) == 0)
    return Status::ok();
  if (!dst || !src)
    return errorf("strided copy: null device pointer");

  detail::CopyPlan plan = detail::planStridedCopy(
      reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src),
      sizes.data(), dstStrides.data(), srcStrides.data(), int(r),
      int64_t(elemSize));
  BRAID_CUDA_CHECK(detail::launchStridedCopy(dst, src, plan, stream));
  return Status::ok();
}

Status cuda::slice(const TensorRef &x, const Shape &offsets, const Shape &sizes,
                   const TensorRef &y, cudaStream_t stream) {
  BRAID_RETURN_IF_ERROR(cpu::checkSliceShapes(x.shape, offsets, sizes));
  size_t r = x.shape.size();
  BRAID_RETURN_IF_ERROR(checkResult("slice", y, sizes));
  if (y.dtype != x.dtype)
    return errorf("slice: result dtype ", dtypeName(y.dtype),
                  " differs from the input's ", dtypeName(x.dtype));
  size_t es = dtypeSize(x.dtype);
  std::vector<int64_t> strides = contiguousStrides(x.shape);
  int64_t first = 0;
  for (size_t d = 0; d < r; ++d)
    first += offsets[d] * strides[d];
  if (numElements(sizes) == 0)
    return Status::ok();
  // A contiguous slice the plan placed on its own bytes is a view
  // (runtime/Views.h): nothing to copy.
  if (braid::contiguousSliceStart(x.shape.data(), offsets.data(), sizes.data(),
                                  r) &&
      y.data == static_cast<const uint8_t *>(x.data) + first * int64_t(es))
    return Status::ok();
  return stridedCopy(y.data, contiguousStrides(sizes),
                     static_cast<const uint8_t *>(x.data) + first * int64_t(es),
                     strides, sizes, es, stream);
}

Status cuda::concat(const std::vector<TensorRef> &inputs, int64_t dim,
                    const TensorRef &y, cudaStream_t stream) {
  std::vector<cpu::ConcatInput> parts;
  for (const TensorRef &t : inputs)
    parts.push_back({&t.shape, dtypeSize(t.dtype)});
  auto checked = cpu::checkConcatShapes(parts, dim);
  if (!checked)
    return checked.status();
  const TensorRef &first = inputs.front();
  const Shape &shape = *checked;
  BRAID_RETURN_IF_ERROR(checkResult("concat", y, shape));
  if (dtypeSize(y.dtype) != dtypeSize(first.dtype))
    return errorf("concat: result dtype ", dtypeName(y.dtype),
                  " differs from the inputs' ", dtypeName(first.dtype));
  size_t es = dtypeSize(first.dtype);
  std::vector<int64_t> yStrides = contiguousStrides(shape);
  int64_t at = 0; // running offset along dim
  for (const TensorRef &t : inputs) {
    BRAID_RETURN_IF_ERROR(stridedCopy(
        static_cast<uint8_t *>(y.data) +
            at * yStrides[size_t(dim)] * int64_t(es),
        yStrides, t.data, contiguousStrides(t.shape), t.shape, es, stream));
    at += t.shape[size_t(dim)];
  }
  return Status::ok();
}

Status cuda::reshape(const TensorRef &x, const TensorRef &y,
                     cudaStream_t stream) {
  BRAID_RETURN_IF_ERROR(cpu::checkReshape(x.shape, y.shape));
  if (dtypeSize(x.dtype) != dtypeSize(y.dtype))
    return errorf("reshape: result dtype ", dtypeName(y.dtype),
                  " differs from the input's ", dtypeName(x.dtype));
  size_t bytes = size_t(numElements(x.shape)) * dtypeSize(x.dtype);
  if (bytes == 0 || x.data == y.data)
    return Status::ok();
  BRAID_CUDA_CHECK(cudaMemcpyAsync(y.data, x.data, bytes,
                                   cudaMemcpyDeviceToDevice, stream));
  return Status::ok();
}

Status cuda::generateParameter(const plan::Plan &plan,
                               const plan::Parameter &param, int worldRank,
                               const SyntheticWeights &weights,
                               const TensorRef &y, cudaStream_t stream) {
  std::string name = param.name()->str();
  auto [full, local, padded] = parameterShapes(param);
  auto map = localIndexMap(full, padded, shardSpecFor(plan, param, worldRank));
  if (!map)
    return errorf("parameter '", name, "': ", map.status().message());
  if (y.shape != local || y.dtype != param.dtype())
    return errorf("parameter '", name, "' is ", formatShape(local), " x ",
                  dtypeName(param.dtype()), ", the buffer is ",
                  formatShape(y.shape), " x ", dtypeName(y.dtype));
  BRAID_RETURN_IF_ERROR(checkData("parameter", name.c_str(), y));
  BRAID_CUDA_CHECK(detail::launchGenerateWeights(
      out(y), *map, weights.seed, weightNameHash(name), isNormWeight(name),
      weightScale(weights.amplitude, full), stream));
  return Status::ok();
}

Status cuda::stallForTest(double seconds, cudaStream_t stream) {
  if (!(seconds >= 0 && seconds < 3600))
    return errorf("a test stall of ", seconds, " s is outside [0, 3600)");
  BRAID_CUDA_CHECK(detail::launchStall(uint64_t(seconds * 1e9), stream));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// DeviceErrorFlag
//===----------------------------------------------------------------------===//

void DeviceErrorFlag::Free::operator()(DeviceErrorRecord *p) const {
  (void)cudaFree(p);
}

Expected<DeviceErrorFlag> DeviceErrorFlag::create() {
  void *p = nullptr;
  BRAID_CUDA_CHECK(cudaMalloc(&p, sizeof(DeviceErrorRecord)));
  DeviceErrorFlag flag;
  flag.record_.reset(static_cast<DeviceErrorRecord *>(p));
  BRAID_CUDA_CHECK(cudaMemset(p, 0, sizeof(DeviceErrorRecord)));
  return flag;
}

Status DeviceErrorFlag::check(cudaStream_t stream) {
  DeviceErrorRecord record{};
  BRAID_CUDA_CHECK(cudaMemcpyAsync(&record, get(), sizeof record,
                                   cudaMemcpyDeviceToHost, stream));
  BRAID_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (record.code == kDeviceErrorNone)
    return Status::ok();
  BRAID_CUDA_CHECK(cudaMemsetAsync(get(), 0, sizeof record, stream));
  BRAID_CUDA_CHECK(cudaStreamSynchronize(stream));
  const int64_t *a = record.args;
  switch (record.code) {
  case kDeviceErrorAttentionPosition: // the CPU kernel's message
    return cpu::attentionCacheRangeError(a[0], a[1], a[2], a[3]);
  default:
    return errorf("a kernel recorded the unknown device error code ",
                  record.code);
  }
}
