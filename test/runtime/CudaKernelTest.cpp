//===- CudaKernelTest.cpp - CUDA kernels against the CPU reference ---------===//
//
// Every CUDA kernel (runtime/cuda/Kernels.h) runs on random inputs (fixed
// seeds) next to its CPU reference kernel (runtime/cpu/Kernels.h), for F32,
// BF16 and F16 storage. Both sides read the same stored input values; the
// CPU result is rounded to the storage dtype as the interpreter stores it.
//
// Tolerances, per element: |gpu - cpu| <= atol + rtol * |cpu|
//   F32:  rtol 1e-4,     atol 1e-5  both sides compute in fp32; they differ
//                                   only in summation order, FMA contraction
//                                   and the 1-2 ulp of expf/erff/tanhf vs
//                                   glibc.
//   BF16: rtol 2^-7 +1%, atol 1e-5  each side rounds its fp32 result once:
//                                   values that straddle a rounding boundary
//                                   differ by one bf16 ulp, at most 2^-7 of
//                                   the value.
//   F16:  rtol 2^-10 +1%, atol 1e-5 likewise, one f16 ulp.
// Copies (slice, concat, strided copy, reshape, embedding rows, KV cache
// writes) must match byte for byte.
//
// Without a usable GPU every test that needs one skips with the reason
// (cudaDeviceAvailable); the CudaKernelChecks tests need none: they check
// that the launchers reject bad shapes before touching the device, with the
// CPU kernel's messages.
//
//===----------------------------------------------------------------------===//
#include "runtime/PlanLoader.h"
#include "runtime/Weights.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceKernels.h" // the copy plan, tested without a GPU
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/Resources.h"
#include "test/runtime/Expect.h"
#include "test/runtime/GpuTestUtil.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

using namespace braid::rt;
namespace cu = braid::rt::cuda;
using cpu::AttentionParams;
using cpu::BinaryKind;
using cpu::ByteTensor;
using cpu::FTensor;
using cpu::GeluKind;
using cpu::ITensor;

// gtest prints parameters through PrintTo (found by ADL): "bf16", not a
// byte dump, in test output and in ctest's discovered test names.
namespace braid::plan {
inline void PrintTo(DType t, std::ostream *os) { *os << rt::dtypeName(t); }
} // namespace braid::plan



namespace {

struct Tolerance {
  float rtol, atol;
};
Tolerance toleranceFor(DType t) {
  switch (t) {
  case DType::BF16:
    return {1.01f / 128.0f, 1e-5f};
  case DType::F16:
    return {1.01f / 1024.0f, 1e-5f};
  default:
    return {1e-4f, 1e-5f};
  }
}

std::vector<float> randomFloats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

std::vector<int64_t> randomInts(size_t n, int64_t lo, int64_t hi,
                                uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  std::vector<int64_t> v(n);
  for (int64_t &x : v)
    x = dist(gen);
  return v;
}

HostTensor randomTensor(DType dt, const Shape &shape, float lo, float hi,
                        uint32_t seed) {
  return HostTensor::fromFloats(
      dt, shape, randomFloats(size_t(numElements(shape)), lo, hi, seed));
}

FTensor asF(const HostTensor &h) { return {h.shape, h.toFloats()}; }
ITensor asI(const HostTensor &h) { return {h.shape, h.toInts()}; }
HostTensor stored(DType dt, const FTensor &f) {
  return HostTensor::fromFloats(dt, f.shape, f.data);
}
ByteTensor asBytes(const HostTensor &h) {
  return {h.shape, dtypeSize(h.dtype), h.bytes};
}

/// `rowScaled`: for kernels that round an intermediate to the storage
/// dtype (tensor-core attention rounds P before P V). Their error is
/// absolute, about one rounding of the row's typical magnitude, so an
/// output near 0 (an average of values that cancel) is held to twice the
/// relative tolerance of the largest magnitude in its row (the last dim),
/// not of itself.
void expectClose(const HostTensor &got, const HostTensor &want,
                 const std::string &what, bool rowScaled = false) {
  ASSERT_EQ(got.shape, want.shape) << what;
  ASSERT_EQ(got.dtype, want.dtype) << what;
  Tolerance tol = toleranceFor(want.dtype);
  std::vector<float> g = got.toFloats(), w = want.toFloats();
  const size_t row =
      rowScaled && !want.shape.empty() ? size_t(want.shape.back()) : 0;
  std::vector<double> rowMax;
  if (row) {
    rowMax.assign(w.size() / row + 1, 0.0);
    for (size_t i = 0; i < w.size(); ++i)
      rowMax[i / row] = std::max(rowMax[i / row], std::fabs(double(w[i])));
  }
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double diff = std::fabs(double(g[i]) - double(w[i]));
    double bound = tol.atol + tol.rtol * std::fabs(double(w[i]));
    if (row)
      bound = tol.atol +
              2 * tol.rtol * std::max(std::fabs(double(w[i])), rowMax[i / row]);
    if (!(diff <= bound)) { // NaN fails too
      if (bad < 5)
        ADD_FAILURE() << what << ": element " << i << " is " << g[i]
                      << ", CPU reference " << w[i] << " (tolerance " << bound
                      << ")";
      ++bad;
    }
    if (diff > worst)
      worst = diff;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << g.size()
                     << " elements outside tolerance (max |diff| " << worst
                     << ", " << dtypeName(want.dtype) << ")";
}

void expectSameBytes(const std::vector<uint8_t> &got,
                     const std::vector<uint8_t> &want,
                     const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t first = got.size();
  for (size_t i = 0; i < got.size() && first == got.size(); ++i)
    if (got[i] != want[i])
      first = i;
  EXPECT_EQ(first, got.size()) << what << ": first differing byte " << first;
}

std::string paramName(const testing::TestParamInfo<DType> &info) {
  return dtypeName(info.param);
}

/// A test that needs a GPU: skips with cudaDeviceAvailable's reason when
/// there is none (fails with BRAID_REQUIRE_GPU=1). Owns its device buffers and a non-blocking stream.
class CudaTest : public testing::Test {
public:
  void SetUp() override {
    BRAID_SKIP_WITHOUT_GPU();
    ASSERT_CUDA(cudaStreamCreateWithFlags(stream_.out(),
                                          cudaStreamNonBlocking));
  }

  cudaStream_t stream() const { return stream_.get(); }

  /// Device memory of `bytes` (+ `offset`), filled with 0xff (NaN for every
  /// float dtype) so unwritten outputs show.
  uint8_t *rawAlloc(size_t bytes) {
    buffers_.emplace_back();
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess);
    buffers_.back() = cu::DeviceMemory(p);
    EXPECT_EQ(cudaMemset(p, 0xff, bytes ? bytes : 1), cudaSuccess);
    return static_cast<uint8_t *>(p);
  }
  cu::TensorRef alloc(DType dt, const Shape &shape, size_t offset = 0) {
    size_t bytes = size_t(numElements(shape)) * dtypeSize(dt);
    return {rawAlloc(bytes + offset) + offset, dt, shape};
  }
  cu::TensorRef upload(const HostTensor &h, size_t offset = 0) {
    cu::TensorRef t = alloc(h.dtype, h.shape, offset);
    write(t, h);
    return t;
  }
  void write(const cu::TensorRef &t, const HostTensor &h) {
    EXPECT_EQ(cudaMemcpyAsync(t.data, h.bytes.data(), h.bytes.size(),
                              cudaMemcpyHostToDevice, stream()),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
  }
  HostTensor download(const cu::TensorRef &t) {
    HostTensor h(t.dtype, t.shape);
    EXPECT_EQ(cudaMemcpyAsync(h.bytes.data(), t.data, h.bytes.size(),
                              cudaMemcpyDeviceToHost, stream()),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
    return h;
  }
  void expectCloseTo(const cu::TensorRef &t, const HostTensor &want,
                     const std::string &what, bool rowScaled = false) {
    expectClose(download(t), want, what, rowScaled);
  }

  std::vector<cu::DeviceMemory> buffers_;
  cu::Stream stream_;
};

/// Parameterized by the storage dtype of the float tensors.
class CudaKernels : public CudaTest,
                    public testing::WithParamInterface<DType> {};

} // namespace

TEST(CudaDevice, ReportsWhyNoneIsUsable) {
  Status available = cu::cudaDeviceAvailable();
  if (!available) {
    EXPECT_NE(available.message().find("no usable CUDA device"),
              std::string::npos)
        << available.message();
    BRAID_SKIP_WITHOUT_GPU();
  }
  int count = 0;
  auto described = cu::describeGpus();
  ASSERT_TRUE(described) << described.status().message();
  EXPECT_NE(described->find("GPU 0: "), std::string::npos) << *described;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_GT(count, 0);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_P(CudaKernels, AddMulBroadcast) {
  DType dt = GetParam();
  Shape lhsShape{4, 5, 33};
  std::vector<Shape> rhsShapes{{4, 5, 33}, {33},     {5, 1},   {4, 1, 33},
                               {1},        {1, 5, 33}, {4, 5, 1}, {5, 33}};
  uint32_t seed = 1;
  for (const Shape &rhsShape : rhsShapes)
    for (BinaryKind kind : {BinaryKind::Add, BinaryKind::Mul})
      for (DType rhsDt : {dt, DType::F32}) { // also a mixed-dtype rhs
        std::string what = std::string(kind == BinaryKind::Add ? "add" : "mul") +
                           " rhs " + formatShape(rhsShape) + " " +
                           dtypeName(rhsDt);
        HostTensor lhs = randomTensor(dt, lhsShape, -3, 3, seed++);
        HostTensor rhs = randomTensor(rhsDt, rhsShape, -3, 3, seed++);
        cu::TensorRef out = alloc(dt, lhsShape);
        ASSERT_OK(cu::binary(kind, upload(lhs), upload(rhs), out, stream()));
        auto want = cpu::binary(kind, asF(lhs), asF(rhs));
        ASSERT_TRUE(want) << want.status().message();
        expectClose(download(out), stored(dt, *want), what);
      }
}

TEST_P(CudaKernels, AddInPlace) {
  DType dt = GetParam();
  HostTensor lhs = randomTensor(dt, {7, 129}, -3, 3, 11);
  HostTensor rhs = randomTensor(dt, {129}, -3, 3, 12);
  cu::TensorRef x = upload(lhs);
  ASSERT_OK(cu::binary(BinaryKind::Add, x, upload(rhs), x, stream()));
  auto want = cpu::binary(BinaryKind::Add, asF(lhs), asF(rhs));
  ASSERT_TRUE(want);
  expectClose(download(x), stored(dt, *want), "add in place");
}

TEST_P(CudaKernels, SiluAndGelu) {
  DType dt = GetParam();
  HostTensor x = randomTensor(dt, {3, 1031}, -8, 8, 21);
  cu::TensorRef dx = upload(x);
  cu::TensorRef y = alloc(dt, x.shape);
  ASSERT_OK(cu::silu(dx, y, stream()));
  expectClose(download(y), stored(dt, cpu::silu(asF(x))), "silu");
  ASSERT_OK(cu::gelu(dx, y, GeluKind::Erf, stream()));
  expectClose(download(y), stored(dt, cpu::gelu(asF(x), GeluKind::Erf)),
              "gelu erf");
  ASSERT_OK(cu::gelu(dx, y, GeluKind::Tanh, stream()));
  expectClose(download(y), stored(dt, cpu::gelu(asF(x), GeluKind::Tanh)),
              "gelu tanh");
}

// Every braid.activation kind against the CPU kernel, over the ReLUs'
// kinks and the exponentials' tails, and in place; an unknown kind is an
// error, not another function.
TEST_P(CudaKernels, ActivationKinds) {
  DType dt = GetParam();
  HostTensor x = randomTensor(dt, {3, 1031}, -12, 12, 23);
  cu::TensorRef dx = upload(x);
  cu::TensorRef y = alloc(dt, x.shape);
  for (int k = 0; k <= int(braid::plan::ActivationKind::MAX); ++k) {
    auto kind = braid::plan::ActivationKind(k);
    ASSERT_OK(cu::activation(dx, y, kind, stream()));
    expectClose(download(y), stored(dt, cpu::activation(asF(x), kind)),
                activationKindName(kind));
  }
  cu::TensorRef inPlace = upload(x);
  ASSERT_OK(cu::activation(inPlace, inPlace, braid::plan::ActivationKind::Mish,
                           stream()));
  expectClose(
      download(inPlace),
      stored(dt, cpu::activation(asF(x), braid::plan::ActivationKind::Mish)),
      "mish in place");
  Status unknown =
      cu::activation(dx, y, braid::plan::ActivationKind(42), stream());
  EXPECT_EQ(unknown.message(), "activation: unknown kind 42");
}

// swiglu against the CPU kernel: 16-byte vectors (3 x 1032 elements) and
// the per-element kernel (3 x 1031: not whole vectors), and in place.
TEST_P(CudaKernels, Swiglu) {
  DType dt = GetParam();
  for (int64_t n : {1032, 1031}) {
    HostTensor g = randomTensor(dt, {3, n}, -8, 8, 23);
    HostTensor u = randomTensor(dt, {3, n}, -2, 2, 24);
    cu::TensorRef dg = upload(g), du = upload(u);
    cu::TensorRef y = alloc(dt, g.shape);
    ASSERT_OK(cu::swiglu(dg, du, y, stream()));
    auto want = cpu::swiglu(asF(g), asF(u));
    ASSERT_TRUE(want);
    std::string what = "swiglu [3, " + std::to_string(n) + "]";
    expectClose(download(y), stored(dt, *want), what);
    ASSERT_OK(cu::swiglu(dg, du, dg, stream()));
    expectClose(download(dg), stored(dt, *want), what + " in place");
  }
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

TEST_P(CudaKernels, RmsNorm) {
  DType dt = GetParam();
  uint32_t seed = 31;
  // Rows of whole 16-byte vectors run the register-resident kernel with 1,
  // 2 and 4 vectors per thread ({1, 4096}, {2, 16384}); {1, 40000} is too
  // long for it and {3, 7} not whole vectors: the per-element kernel.
  for (Shape shape : {Shape{6, 1000}, Shape{2, 3, 64}, Shape{1, 4096},
                      Shape{2, 16384}, Shape{1, 40000}, Shape{3, 7}, Shape{5}})
    for (DType wDt : {dt, DType::F32}) {
      std::string what = "rms_norm " + formatShape(shape) + " weight " +
                         dtypeName(wDt);
      HostTensor x = randomTensor(dt, shape, -3, 3, seed++);
      HostTensor w = randomTensor(wDt, {shape.back()}, 0.5f, 1.5f, seed++);
      cu::TensorRef y = alloc(dt, shape);
      ASSERT_OK(cu::rmsNorm(upload(x), upload(w), y, 1e-5, stream()));
      auto want = cpu::rmsNorm(asF(x), asF(w), 1e-5);
      ASSERT_TRUE(want) << want.status().message();
      expectClose(download(y), stored(dt, *want), what);
    }
}

// add_rms_norm against the CPU's pair (the sum stored, then normalized
// from the stored sum): vector rows, rows not whole vectors, in place.
TEST_P(CudaKernels, AddRmsNorm) {
  DType dt = GetParam();
  uint32_t seed = 61;
  for (Shape shape :
       {Shape{1, 4096}, Shape{3, 1000}, Shape{2, 16384}, Shape{3, 7}}) {
    std::string what = "add_rms_norm " + formatShape(shape);
    HostTensor x = randomTensor(dt, shape, -3, 3, seed++);
    HostTensor r = randomTensor(dt, shape, -3, 3, seed++);
    HostTensor w = randomTensor(dt, {shape.back()}, 0.5f, 1.5f, seed++);
    cu::TensorRef dx = upload(x);
    cu::TensorRef sum = alloc(dt, shape), y = alloc(dt, shape);
    ASSERT_OK(cu::addRmsNorm(dx, upload(r), upload(w), sum, y, 1e-5, stream()));
    auto wantSum = cpu::binary(BinaryKind::Add, asF(x), asF(r));
    ASSERT_TRUE(wantSum);
    HostTensor storedSum = stored(dt, *wantSum);
    auto want = cpu::rmsNorm(asF(storedSum), asF(w), 1e-5);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(download(sum), storedSum, what + " sum");
    expectClose(download(y), stored(dt, *want), what);
    // The sum written over the input.
    ASSERT_OK(cu::addRmsNorm(dx, upload(r), upload(w), dx, y, 1e-5, stream()));
    expectClose(download(dx), storedSum, what + " sum in place");
    expectClose(download(y), stored(dt, *want), what + " in place");
  }
}

TEST_P(CudaKernels, LayerNorm) {
  DType dt = GetParam();
  uint32_t seed = 41;
  // Too long a row for the register-resident kernel is left to RmsNorm: an
  // offset mean over 40000 elements differs from the CPU's sequential sum
  // by more than the tolerance in either kernel.
  for (Shape shape : {Shape{6, 1000}, Shape{2, 3, 64}, Shape{1, 4096},
                      Shape{2, 16384}, Shape{3, 7}})
    for (DType wDt : {dt, DType::F32}) {
      std::string what = "layer_norm " + formatShape(shape) + " weight " +
                         dtypeName(wDt);
      // An offset mean checks the two-pass variance.
      HostTensor x = randomTensor(dt, shape, 1, 5, seed++);
      HostTensor w = randomTensor(wDt, {shape.back()}, 0.5f, 1.5f, seed++);
      HostTensor b = randomTensor(wDt, {shape.back()}, -1, 1, seed++);
      cu::TensorRef y = alloc(dt, shape);
      ASSERT_OK(
          cu::layerNorm(upload(x), upload(w), upload(b), y, 1e-5, stream()));
      auto want = cpu::layerNorm(asF(x), asF(w), asF(b), 1e-5);
      ASSERT_TRUE(want) << want.status().message();
      expectClose(download(y), stored(dt, *want), what);
    }
}

TEST_P(CudaKernels, NormsInPlace) {
  DType dt = GetParam();
  HostTensor x = randomTensor(dt, {4, 300}, -3, 3, 51);
  HostTensor w = randomTensor(dt, {300}, 0.5f, 1.5f, 52);
  cu::TensorRef dx = upload(x);
  ASSERT_OK(cu::rmsNorm(dx, upload(w), dx, 1e-6, stream()));
  auto want = cpu::rmsNorm(asF(x), asF(w), 1e-6);
  ASSERT_TRUE(want);
  expectClose(download(dx), stored(dt, *want), "rms_norm in place");
}

//===----------------------------------------------------------------------===//
// Rope
//===----------------------------------------------------------------------===//

TEST_P(CudaKernels, Rope) {
  DType dt = GetParam();
  struct Case {
    Shape shape;
    DType posDt;
    int64_t maxPos;
    double theta;
  };
  uint32_t seed = 61;
  for (const Case &c : {Case{{2, 7, 3, 64}, DType::I64, 5000, 10000.0},
                        Case{{1, 5, 4, 128}, DType::I32, 100000, 500000.0},
                        Case{{3, 1, 8, 64}, DType::I64, 4096, 10000.0}}) {
    std::string what = "rope " + formatShape(c.shape) + " positions " +
                       dtypeName(c.posDt);
    HostTensor x = randomTensor(dt, c.shape, -2, 2, seed++);
    Shape posShape{c.shape[0], c.shape[1]};
    HostTensor pos = HostTensor::fromInts(
        c.posDt, posShape,
        randomInts(size_t(numElements(posShape)), 0, c.maxPos, seed++));
    cu::TensorRef y = alloc(dt, c.shape);
    ASSERT_OK(cu::rope(upload(x), upload(pos), y, c.theta, stream()));
    auto want = cpu::rope(asF(x), asI(pos), c.theta);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(download(y), stored(dt, *want), what);
  }
}

// Scaled RoPE: a device frequency table and yarn's attention factor.
TEST_P(CudaKernels, RopeFrequencyTableMatchesCpu) {
  DType dt = GetParam();
  const Shape shape{2, 7, 3, 64};
  cpu::RopeParams params(10000.0);
  for (int64_t i = 0; i < 32; ++i) // a llama3-like bend in the slow half
    params.invFreq.push_back(std::pow(10000.0, -double(i) / 32.0) /
                             (i < 16 ? 1.0 : 8.0));
  params.attentionFactor = 1.1386;
  HostTensor x = randomTensor(dt, shape, -2, 2, 71);
  HostTensor pos = HostTensor::fromInts(
      DType::I64, {2, 7}, randomInts(14, 0, 100000, 72));
  void *dtable = rawAlloc(params.invFreq.size() * sizeof(double));
  ASSERT_CUDA(cudaMemcpy(dtable, params.invFreq.data(),
                         params.invFreq.size() * sizeof(double),
                         cudaMemcpyHostToDevice));
  cu::TensorRef y = alloc(dt, shape);
  ASSERT_OK(cu::rope(upload(x), upload(pos), y, params.theta, stream(),
                     static_cast<const double *>(dtable),
                     params.attentionFactor));
  auto want = cpu::rope(asF(x), asI(pos), params);
  ASSERT_TRUE(want) << want.status().message();
  expectClose(download(y), stored(dt, *want), "rope with a table");

  // Partial rotary (GPT-NeoX): the first 16 of 64 elements turn, with and
  // without a table; the rest are copied.
  for (bool withTable : {false, true}) {
    cpu::RopeParams partial(10000.0);
    partial.rotaryDim = 16;
    if (withTable)
      partial.invFreq = {1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 0.0003};
    void *ptable = nullptr;
    if (withTable) {
      ptable = rawAlloc(partial.invFreq.size() * sizeof(double));
      ASSERT_CUDA(cudaMemcpy(ptable, partial.invFreq.data(),
                             partial.invFreq.size() * sizeof(double),
                             cudaMemcpyHostToDevice));
    }
    cu::TensorRef yp = alloc(dt, shape);
    ASSERT_OK(cu::rope(upload(x), upload(pos), yp, partial.theta, stream(),
                       static_cast<const double *>(ptable), 1.0, 16));
    auto wantp = cpu::rope(asF(x), asI(pos), partial);
    ASSERT_TRUE(wantp) << wantp.status().message();
    expectClose(download(yp), stored(dt, *wantp),
                withTable ? "partial rope with a table" : "partial rope");
  }
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

TEST_P(CudaKernels, SoftmaxEveryDim) {
  DType dt = GetParam();
  uint32_t seed = 71;
  Shape shape{3, 4, 50};
  for (int64_t dim = 0; dim < 3; ++dim) {
    HostTensor x = randomTensor(dt, shape, -10, 10, seed++);
    cu::TensorRef y = alloc(dt, shape);
    ASSERT_OK(cu::softmax(upload(x), y, dim, stream()));
    auto want = cpu::softmax(asF(x), dim);
    ASSERT_TRUE(want);
    expectClose(download(y), stored(dt, *want),
                "softmax dim " + std::to_string(dim));
  }
  // A long row (several strides of the block) and a lone dim.
  for (Shape s : {Shape{2, 5000}, Shape{1}, Shape{7, 1, 3}}) {
    HostTensor x = randomTensor(dt, s, -10, 10, seed++);
    int64_t dim = int64_t(s.size()) - 1;
    cu::TensorRef y = alloc(dt, s);
    ASSERT_OK(cu::softmax(upload(x), y, dim, stream()));
    auto want = cpu::softmax(asF(x), dim);
    ASSERT_TRUE(want);
    expectClose(download(y), stored(dt, *want), "softmax " + formatShape(s));
  }
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

TEST_P(CudaKernels, EmbeddingWithVocabShard) {
  DType dt = GetParam();
  uint32_t seed = 81;
  HostTensor table = randomTensor(dt, {50, 33}, -1, 1, seed++);
  cu::TensorRef dTable = upload(table);
  for (DType idDt : {DType::I64, DType::I32})
    for (int64_t vocabStart : {int64_t(0), int64_t(50)}) {
      // Ids below, inside and above this shard, and negative ones.
      HostTensor ids = HostTensor::fromInts(
          idDt, {3, 7}, randomInts(21, -5, 130, seed++));
      cu::TensorRef out = alloc(dt, {3, 7, 33});
      ASSERT_OK(cu::embedding(upload(ids), dTable, out, vocabStart, stream()));
      auto want = cpu::embedding(asI(ids), asF(table), vocabStart);
      ASSERT_TRUE(want);
      expectSameBytes(download(out).bytes, stored(dt, *want).bytes,
                      std::string("embedding ids ") + dtypeName(idDt) +
                          " vocab_start " + std::to_string(vocabStart));
    }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {
AttentionParams attnParams(int64_t hq, int64_t hkv, int64_t d, bool causal,
                           double scale = 0.0) {
  AttentionParams p;
  p.causal = causal;
  p.numHeads = hq;
  p.numKvHeads = hkv;
  p.headDim = d;
  p.scale = scale;
  return p;
}
} // namespace

TEST_P(CudaKernels, AttentionPrefill) {
  DType dt = GetParam();
  struct Case {
    int64_t b, s, hq, hkv, d;
    bool causal;
    double scale;
  };
  uint32_t seed = 91;
  for (const Case &c : {Case{2, 37, 8, 2, 64, true, 0.0},  // GQA causal
                        Case{2, 37, 8, 2, 64, false, 0.0}, // GQA full
                        Case{1, 5, 4, 4, 32, true, 0.3},   // MHA, scale
                        Case{1, 150, 4, 1, 128, true, 0.0}, // > one key tile
                        Case{1, 3, 2, 1, 80, false, 0.0}}) { // D not 2^k
    std::string what = "attention b" + std::to_string(c.b) + " s" +
                       std::to_string(c.s) + " hq" + std::to_string(c.hq) +
                       " hkv" + std::to_string(c.hkv) + " d" +
                       std::to_string(c.d) + (c.causal ? " causal" : "");
    HostTensor q = randomTensor(dt, {c.b, c.s, c.hq, c.d}, -1, 1, seed++);
    HostTensor k = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    HostTensor v = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    AttentionParams p = attnParams(c.hq, c.hkv, c.d, c.causal, c.scale);
    cu::TensorRef o = alloc(dt, q.shape);
    ASSERT_OK(
        cu::attention(upload(q), upload(k), upload(v), o, p, stream()));
    auto want = cpu::attention(asF(q), asF(k), asF(v), p);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(download(o), stored(dt, *want), what);
  }
}

TEST_P(CudaKernels, AttentionWithCacheAtNonzeroPositions) {
  DType dt = GetParam();
  const int64_t b = 2, s = 20, hq = 8, hkv = 2, d = 64, maxS = 96;
  uint32_t seed = 101;
  for (DType posDt : {DType::I64, DType::I32})
    for (bool causal : {true, false}) {
      std::string what = std::string("attention with cache, positions ") +
                         dtypeName(posDt) + (causal ? ", causal" : "");
      HostTensor q = randomTensor(dt, {b, s, hq, d}, -1, 1, seed++);
      HostTensor k = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
      HostTensor v = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
      // Earlier rows hold history the queries attend to.
      HostTensor kc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
      HostTensor vc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
      HostTensor pos = HostTensor::fromInts(posDt, {b}, {37, 5});
      AttentionParams p = attnParams(hq, hkv, d, causal);

      auto flag = cu::DeviceErrorFlag::create();
      ASSERT_TRUE(flag) << flag.status().message();
      cu::TensorRef dkc = upload(kc), dvc = upload(vc), o = alloc(dt, q.shape);
      ASSERT_OK(cu::attentionWithCache(upload(q), upload(k), upload(v), dkc,
                                       dvc, upload(pos), o, p, flag->get(),
                                       stream()));
      ASSERT_OK(flag->check(stream()));

      FTensor ckc = asF(kc), cvc = asF(vc);
      auto want = cpu::attentionWithCache(asF(q), asF(k), asF(v), ckc, cvc,
                                          asI(pos), p);
      ASSERT_TRUE(want) << want.status().message();
      expectClose(download(o), stored(dt, *want), what + ": o");
      expectSameBytes(download(dkc).bytes, stored(dt, ckc).bytes,
                      what + ": k cache");
      expectSameBytes(download(dvc).bytes, stored(dt, cvc).bytes,
                      what + ": v cache");
    }
}

namespace {
/// Prefill (S = 9) then decode steps (S = 1) against the CPU, with the same
/// device position buffer rewritten between steps; in graph mode the decode
/// step is captured once and replayed.
/// `split`: with a split-KV workspace sized for a 132-multiprocessor GPU
/// (the partials and their combine inside the captured graph too).
/// `tensorCore`: ask for the tensor-core kernel (it runs for bf16 and f16;
/// fp32 runs the split kernel), compared row-scaled (expectClose), over a
/// cache long enough that its 64-key ranges split too.
void runDecode(CudaTest &t, DType dt, bool graph, bool split = false,
               bool tensorCore = false, bool fuseCacheWrite = false) {
  const int64_t b = 2, hq = 4, hkv = 2, d = 64, prefill = 9;
  const int64_t maxS = tensorCore ? 256 : 80;
  const int steps = 4;
  cu::AttentionWorkspace ws;
  ws.tensorCore = tensorCore;
  ws.fuseCacheWrite = fuseCacheWrite;
  if (split) {
    ws.multiprocessors = 132;
    ws.bytes = cu::attentionWorkspaceBytes({b, 1, hq, d}, hkv, maxS, 132, 0, 0,
                                           tensorCore);
    ASSERT_GT(ws.bytes, 0u) << "decode over 80 keys should split";
    // The prefill (S = 9) may split differently: size for the larger.
    ws.bytes = std::max(
        ws.bytes, cu::attentionWorkspaceBytes({b, prefill, hq, d}, hkv, maxS,
                                              132, 0, 0, tensorCore));
    ws.data = t.rawAlloc(ws.bytes);
    if (tensorCore && dt != DType::F32) {
      auto tiling =
          cu::detail::planAttention(b, 1, hq, hkv, d, maxS, 2, 132, 0, 0, true);
      ASSERT_TRUE(tiling.tensorCore);
      ASSERT_GT(tiling.splits, 1) << "the combine should run in the graph";
    }
  }
  AttentionParams p = attnParams(hq, hkv, d, true);
  uint32_t seed = graph ? 211 : 111;
  HostTensor kc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
  HostTensor vc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
  FTensor ckc = asF(kc), cvc = asF(vc);
  cu::TensorRef dkc = t.upload(kc), dvc = t.upload(vc);
  auto flag = cu::DeviceErrorFlag::create();
  ASSERT_TRUE(flag) << flag.status().message();
  std::vector<int64_t> start{30, 60}; // batch 1 crosses a 64-key tile
  cu::TensorRef pos = t.upload(HostTensor::fromInts(DType::I64, {b}, start));

  // Prefill.
  {
    HostTensor q = randomTensor(dt, {b, prefill, hq, d}, -1, 1, seed++);
    HostTensor k = randomTensor(dt, {b, prefill, hkv, d}, -1, 1, seed++);
    HostTensor v = randomTensor(dt, {b, prefill, hkv, d}, -1, 1, seed++);
    cu::TensorRef o = t.alloc(dt, q.shape);
    ASSERT_OK(cu::attentionWithCache(t.upload(q), t.upload(k), t.upload(v),
                                     dkc, dvc, pos, o, p, flag->get(),
                                     t.stream(), ws));
    ASSERT_OK(flag->check(t.stream()));
    auto want = cpu::attentionWithCache(
        asF(q), asF(k), asF(v), ckc, cvc,
        ITensor{{b}, start}, p);
    ASSERT_TRUE(want);
    t.expectCloseTo(o, stored(dt, *want), "prefill o", tensorCore);
  }

  // Decode: fixed buffers for q, k, v, o and the position.
  cu::TensorRef q = t.alloc(dt, {b, 1, hq, d}), k = t.alloc(dt, {b, 1, hkv, d}),
                v = t.alloc(dt, {b, 1, hkv, d}), o = t.alloc(dt, {b, 1, hq, d});
  cu::Graph g;
  cu::GraphExec exec;
  if (graph) {
    ASSERT_CUDA(
        cudaStreamBeginCapture(t.stream(), cudaStreamCaptureModeThreadLocal));
    Status captured = cu::attentionWithCache(q, k, v, dkc, dvc, pos, o, p,
                                             flag->get(), t.stream(), ws);
    ASSERT_CUDA(cudaStreamEndCapture(t.stream(), g.out()));
    ASSERT_OK(captured);
    ASSERT_CUDA(cudaGraphInstantiate(exec.out(), g.get(), 0));
    ASSERT_CUDA(cudaGraphUpload(exec.get(), t.stream()));
  }
  for (int step = 0; step < steps; ++step) {
    std::string what = std::string(graph ? "graph" : "eager") +
                       " decode step " + std::to_string(step);
    std::vector<int64_t> now{start[0] + prefill + step,
                             start[1] + prefill + step};
    HostTensor hq_ = randomTensor(dt, q.shape, -1, 1, seed++);
    HostTensor hk = randomTensor(dt, k.shape, -1, 1, seed++);
    HostTensor hv = randomTensor(dt, v.shape, -1, 1, seed++);
    t.write(q, hq_);
    t.write(k, hk);
    t.write(v, hv);
    t.write(pos, HostTensor::fromInts(DType::I64, {b}, now));
    if (graph)
      ASSERT_CUDA(cudaGraphLaunch(exec.get(), t.stream()));
    else
      ASSERT_OK(cu::attentionWithCache(q, k, v, dkc, dvc, pos, o, p,
                                       flag->get(), t.stream(), ws));
    ASSERT_OK(flag->check(t.stream()));
    auto want = cpu::attentionWithCache(asF(hq_), asF(hk), asF(hv), ckc, cvc,
                                        ITensor{{b}, now}, p);
    ASSERT_TRUE(want) << want.status().message();
    t.expectCloseTo(o, stored(dt, *want), what, tensorCore);
  }
  expectSameBytes(t.download(dkc).bytes, stored(dt, ckc).bytes,
                  "k cache after decode");
  expectSameBytes(t.download(dvc).bytes, stored(dt, cvc).bytes,
                  "v cache after decode");
}
} // namespace

TEST_P(CudaKernels, AttentionDecodeSteps) { runDecode(*this, GetParam(), false); }

TEST_P(CudaKernels, AttentionDecodeStepsCapturedInGraph) {
  runDecode(*this, GetParam(), true);
}

TEST_P(CudaKernels, AttentionSplitKvDecodeStepsCapturedInGraph) {
  runDecode(*this, GetParam(), true, /*split=*/true);
}

TEST_P(CudaKernels, AttentionTensorCoreDecodeStepsCapturedInGraph) {
  runDecode(*this, GetParam(), true, /*split=*/true, /*tensorCore=*/true);
}

TEST_P(CudaKernels, AttentionTensorCoreDecodeStepsOneSplit) {
  runDecode(*this, GetParam(), false, /*split=*/false, /*tensorCore=*/true);
}

// The same with the cache write fused into the tensor-core kernel.
TEST_P(CudaKernels, AttentionTensorCoreFusedWriteDecodeStepsCapturedInGraph) {
  runDecode(*this, GetParam(), true, /*split=*/true, /*tensorCore=*/true,
            /*fuseCacheWrite=*/true);
}

TEST_P(CudaKernels, AttentionTensorCoreFusedWriteDecodeStepsOneSplit) {
  runDecode(*this, GetParam(), false, /*split=*/false, /*tensorCore=*/true,
            /*fuseCacheWrite=*/true);
}

// The tensor-core kernel (AttentionTensorCore.cuh) against the CPU kernel,
// row-scaled (expectClose: P is rounded to the value dtype before P V, an
// error absolute in the row's magnitude): every head_dim it is built for,
// decode over long caches split across blocks, nearly empty caches, GQA,
// MHA and MQA, chunked prefill whose rows span several 16-row tiles,
// sliding windows, prefill without a cache (causal and not), a last key
// tile that is partial, peaked softmaxes (q 8x larger, so a wrong score
// shows), and shapes it does not take (head_dim 36; fp32), which run the
// split kernel.
TEST_P(CudaKernels, AttentionTensorCoreMatchesCpu) {
  DType dt = GetParam();
  struct Case {
    int64_t b, s, hq, hkv, d, maxS; // maxS 0: no cache (k, v of S rows)
    std::vector<int64_t> pos;
    bool causal;
    int64_t window;
    float qRange = 1; // q in [-qRange, qRange]: 8 gives peaked softmaxes
  };
  uint32_t seed = 1301;
  for (const Case &c :
       {Case{2, 1, 32, 8, 128, 4096, {4095, 700}, true, 0}, // Llama-3-8B
        Case{2, 1, 32, 8, 128, 4096, {0, 63}, true, 0},     // nearly empty
        Case{1, 1, 4, 4, 64, 300, {299}, true, 0},          // MHA, ragged
        Case{1, 1, 8, 1, 96, 1000, {998}, true, 0},         // MQA
        Case{1, 1, 16, 2, 80, 520, {517}, false, 0},        // D = 80
        Case{1, 40, 8, 2, 64, 2048, {1000}, true, 0},       // chunked
        Case{2, 9, 8, 2, 64, 256, {60, 3}, true, 0}, // new rows span ranges
        Case{2, 3, 16, 2, 128, 1024, {1021, 5}, false, 0},
        Case{1, 1, 4, 2, 32, 200, {150}, true, 0},
        Case{1, 5, 4, 2, 16, 64, {20}, true, 0},              // tiny's D
        Case{2, 1, 32, 8, 128, 4096, {4095, 300}, true, 512}, // windows
        Case{2, 1, 32, 8, 128, 4096, {4095, 0}, true, 1},
        Case{2, 40, 32, 8, 128, 4096, {1000, 3}, true, 16},
        Case{2, 37, 8, 2, 64, 0, {}, true, 0}, // no cache
        Case{2, 37, 8, 2, 64, 0, {}, false, 0},
        Case{1, 150, 4, 1, 128, 0, {}, true, 0},
        Case{2, 37, 8, 2, 64, 0, {}, true, 7},
        Case{2, 1, 32, 8, 128, 4096, {4095, 700}, true, 0, 8}, // peaked
        Case{1, 40, 8, 2, 64, 2048, {1000}, true, 0, 8},
        Case{1, 1, 8, 2, 36, 520, {517}, true, 0}}) { // split kernel
    std::string what = "tensor-core attention b" + std::to_string(c.b) + " s" +
                       std::to_string(c.s) + " hq" + std::to_string(c.hq) +
                       " hkv" + std::to_string(c.hkv) + " d" +
                       std::to_string(c.d) + " maxS" + std::to_string(c.maxS) +
                       " w" + std::to_string(c.window) + " q range " +
                       std::to_string(c.qRange);
    const int64_t keyRows = c.maxS ? c.maxS : c.s;
    cu::AttentionWorkspace ws;
    ws.tensorCore = true;
    ws.multiprocessors = 132;
    ws.bytes = cu::attentionWorkspaceBytes(
        {c.b, c.s, c.hq, c.d}, c.hkv, keyRows, ws.multiprocessors, 0, 0, true);
    ws.data = ws.bytes ? rawAlloc(ws.bytes) : nullptr;
    HostTensor q =
        randomTensor(dt, {c.b, c.s, c.hq, c.d}, -c.qRange, c.qRange, seed++);
    HostTensor k = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    HostTensor v = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    AttentionParams p = attnParams(c.hq, c.hkv, c.d, c.causal);
    p.slidingWindow = c.window;
    cu::TensorRef o = alloc(dt, q.shape);
    cu::TensorRef dq = upload(q), dk = upload(k), dv = upload(v);
    // The kernel under test must be the one that runs: no silent fallback.
    const bool tensorCores = dt != DType::F32 && c.d != 36;
    if (!c.maxS) {
      EXPECT_EQ(cu::attentionUsesTensorCores(dq, dk, dv), tensorCores) << what;
      ASSERT_OK(cu::attention(dq, dk, dv, o, p, stream(), ws));
      auto want = cpu::attention(asF(q), asF(k), asF(v), p);
      ASSERT_TRUE(want) << want.status().message();
      expectClose(download(o), stored(dt, *want), what, true);
      continue;
    }
    HostTensor kc = randomTensor(dt, {c.b, c.maxS, c.hkv, c.d}, -1, 1, seed++);
    HostTensor vc = randomTensor(dt, {c.b, c.maxS, c.hkv, c.d}, -1, 1, seed++);
    std::vector<int64_t> pos = c.pos;
    for (int64_t &x : pos)
      x = std::min(x, c.maxS - c.s);
    HostTensor dpos = HostTensor::fromInts(DType::I64, {c.b}, pos);
    auto flag = cu::DeviceErrorFlag::create();
    ASSERT_TRUE(flag) << flag.status().message();
    cu::TensorRef dkc = upload(kc), dvc = upload(vc);
    EXPECT_EQ(cu::attentionUsesTensorCores(dq, dkc, dvc), tensorCores) << what;
    ASSERT_OK(cu::attentionWithCache(dq, dk, dv, dkc, dvc, upload(dpos), o, p,
                                     flag->get(), stream(), ws));
    ASSERT_OK(flag->check(stream()));
    FTensor ckc = asF(kc), cvc = asF(vc);
    auto want =
        cpu::attentionWithCache(asF(q), asF(k), asF(v), ckc, cvc, asI(dpos), p);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(download(o), stored(dt, *want), what, true);
    // Again from the same caches with the cache write fused into the
    // tensor-core kernel (AttentionWorkspace::fuseCacheWrite): the same
    // output and the same caches.
    ws.fuseCacheWrite = true;
    cu::TensorRef fkc = upload(kc), fvc = upload(vc), fo = alloc(dt, q.shape);
    ASSERT_OK(cu::attentionWithCache(dq, dk, dv, fkc, fvc, upload(dpos), fo, p,
                                     flag->get(), stream(), ws));
    ASSERT_OK(flag->check(stream()));
    expectClose(download(fo), stored(dt, *want), what + ", write fused", true);
    // The same tiling and order over the same bytes (the new rows read
    // from k and v instead of the caches): bit for bit the unfused output.
    expectSameBytes(download(fo).bytes, download(o).bytes,
                    what + ", write fused: o as unfused");
    expectSameBytes(download(fkc).bytes, stored(dt, ckc).bytes,
                    what + ", write fused: k cache");
    expectSameBytes(download(fvc).bytes, stored(dt, cvc).bytes,
                    what + ", write fused: v cache");
  }
}

// Split-KV attention (flash-decoding) against the CPU kernel: long caches
// split across many blocks, positions at the cache's end, at its start and
// inside one key range; GQA and MHA; a head_dim that is not a multiple of
// the 16-byte load; prefill rows that span several row tiles.
TEST_P(CudaKernels, AttentionSplitKvMatchesCpu) {
  DType dt = GetParam();
  struct Case {
    int64_t b, s, hq, hkv, d, maxS;
    std::vector<int64_t> pos;
    bool causal;
  };
  uint32_t seed = 301;
  for (const Case &c :
       {Case{2, 1, 32, 8, 128, 4096, {4095, 700}, true}, // Llama-3-8B decode
        Case{2, 1, 32, 8, 128, 4096, {0, 63}, true},     // nearly empty
        Case{1, 1, 4, 4, 64, 300, {299}, true},          // MHA, ragged tile
        Case{1, 1, 8, 2, 36, 520, {517}, false},         // D * 2 % 16 != 0
        Case{1, 40, 8, 2, 64, 2048, {1000}, true},       // chunked prefill
        Case{2, 3, 16, 2, 128, 1024, {1021, 5}, false},
        Case{1, 2, 4, 2, 10, 200, {150}, true}}) {      // d % 4 != 0
    std::string what = "split-KV attention s" + std::to_string(c.s) + " hq" +
                       std::to_string(c.hq) + " hkv" + std::to_string(c.hkv) +
                       " d" + std::to_string(c.d) + " maxS" +
                       std::to_string(c.maxS) + " pos " +
                       std::to_string(c.pos[0]);
    cu::AttentionWorkspace ws;
    ws.multiprocessors = 132;
    ws.bytes = cu::attentionWorkspaceBytes({c.b, c.s, c.hq, c.d}, c.hkv,
                                           c.maxS, ws.multiprocessors);
    ASSERT_GT(ws.bytes, 0u) << what << ": this case should split";
    ws.data = rawAlloc(ws.bytes);
    HostTensor q = randomTensor(dt, {c.b, c.s, c.hq, c.d}, -1, 1, seed++);
    HostTensor k = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    HostTensor v = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    HostTensor kc = randomTensor(dt, {c.b, c.maxS, c.hkv, c.d}, -1, 1, seed++);
    HostTensor vc = randomTensor(dt, {c.b, c.maxS, c.hkv, c.d}, -1, 1, seed++);
    HostTensor pos = HostTensor::fromInts(DType::I64, {c.b}, c.pos);
    AttentionParams p = attnParams(c.hq, c.hkv, c.d, c.causal);
    auto flag = cu::DeviceErrorFlag::create();
    ASSERT_TRUE(flag) << flag.status().message();
    cu::TensorRef o = alloc(dt, q.shape);
    ASSERT_OK(cu::attentionWithCache(upload(q), upload(k), upload(v),
                                     upload(kc), upload(vc), upload(pos), o, p,
                                     flag->get(), stream(), ws));
    ASSERT_OK(flag->check(stream()));
    FTensor ckc = asF(kc), cvc = asF(vc);
    auto want = cpu::attentionWithCache(asF(q), asF(k), asF(v), ckc, cvc,
                                        asI(pos), p);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(download(o), stored(dt, *want), what);
  }
}

// Sliding-window attention (Mistral, Qwen) against the CPU kernel: without
// a cache (prefill), and over a cache split across blocks, with windows
// shorter than one split, than one key tile, of one key, and longer than
// the history.
TEST_P(CudaKernels, AttentionSlidingWindowMatchesCpu) {
  DType dt = GetParam();
  uint32_t seed = 401;
  for (int64_t window : {1, 7, 40}) {
    const int64_t b = 2, s = 37, hq = 8, hkv = 2, d = 64;
    std::string what = "sliding-window prefill w" + std::to_string(window);
    HostTensor q = randomTensor(dt, {b, s, hq, d}, -1, 1, seed++);
    HostTensor k = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
    HostTensor v = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
    AttentionParams p = attnParams(hq, hkv, d, true);
    p.slidingWindow = window;
    cu::TensorRef o = alloc(dt, q.shape);
    ASSERT_OK(cu::attention(upload(q), upload(k), upload(v), o, p, stream()));
    auto want = cpu::attention(asF(q), asF(k), asF(v), p);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(download(o), stored(dt, *want), what);
  }
  struct Case {
    int64_t s, window;
    std::vector<int64_t> pos;
  };
  for (const Case &c : {Case{1, 512, {4095, 300}}, Case{1, 1, {4095, 0}},
                        Case{1, 4096, {4095, 17}}, Case{40, 16, {1000, 3}},
                        Case{40, 700, {3000, 2500}}}) {
    const int64_t b = 2, hq = 32, hkv = 8, d = 128, maxS = 4096;
    std::string what = "sliding-window split-KV s" + std::to_string(c.s) +
                       " w" + std::to_string(c.window) + " pos " +
                       std::to_string(c.pos[0]);
    cu::AttentionWorkspace ws;
    ws.multiprocessors = 132;
    ws.bytes = cu::attentionWorkspaceBytes({b, c.s, hq, d}, hkv, maxS,
                                           ws.multiprocessors);
    ws.data = ws.bytes ? rawAlloc(ws.bytes) : nullptr;
    HostTensor q = randomTensor(dt, {b, c.s, hq, d}, -1, 1, seed++);
    HostTensor k = randomTensor(dt, {b, c.s, hkv, d}, -1, 1, seed++);
    HostTensor v = randomTensor(dt, {b, c.s, hkv, d}, -1, 1, seed++);
    HostTensor kc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
    HostTensor vc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
    std::vector<int64_t> pos = c.pos;
    for (int64_t &x : pos)
      x = std::min(x, maxS - c.s);
    HostTensor dpos = HostTensor::fromInts(DType::I64, {b}, pos);
    AttentionParams p = attnParams(hq, hkv, d, true);
    p.slidingWindow = c.window;
    auto flag = cu::DeviceErrorFlag::create();
    ASSERT_TRUE(flag) << flag.status().message();
    cu::TensorRef o = alloc(dt, q.shape);
    ASSERT_OK(cu::attentionWithCache(upload(q), upload(k), upload(v),
                                     upload(kc), upload(vc), upload(dpos), o,
                                     p, flag->get(), stream(), ws));
    ASSERT_OK(flag->check(stream()));
    FTensor ckc = asF(kc), cvc = asF(vc);
    auto want = cpu::attentionWithCache(asF(q), asF(k), asF(v), ckc, cvc,
                                        asI(dpos), p);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(download(o), stored(dt, *want), what);
  }
}

// Split-KV attention without a cache launched again and again on one
// workspace, eager and from a graph replayed twice, each launch the same
// bytes: nothing a launch leaves in the workspace changes the next.
// Several splits, several row tiles, GQA; D even and odd.
TEST_P(CudaKernels, AttentionSplitKvRelaunchedOnOneWorkspace) {
  DType dt = GetParam();
  struct Case {
    int64_t b, s, hq, hkv, d;
    bool causal;
  };
  uint32_t seed = 501;
  for (const Case &c :
       {Case{2, 100, 8, 2, 64, true}, Case{1, 70, 4, 2, 10, false}}) {
    std::string what = "split-KV attention without a cache s" +
                       std::to_string(c.s) + " hq" + std::to_string(c.hq) +
                       " hkv" + std::to_string(c.hkv) + " d" +
                       std::to_string(c.d);
    auto tiling = cu::detail::planAttention(c.b, c.s, c.hq, c.hkv, c.d, c.s,
                                            int64_t(dtypeSize(dt)), 132);
    ASSERT_GT(tiling.splits, 1) << what;
    ASSERT_GT(c.s * c.hq / c.hkv, tiling.rowTile) << what << ": one row tile";
    cu::AttentionWorkspace ws;
    ws.multiprocessors = 132;
    ws.bytes = cu::attentionWorkspaceBytes({c.b, c.s, c.hq, c.d}, c.hkv, c.s,
                                           ws.multiprocessors);
    ASSERT_GT(ws.bytes, 0u) << what << ": this case should split";
    ws.data = rawAlloc(ws.bytes);
    HostTensor q = randomTensor(dt, {c.b, c.s, c.hq, c.d}, -1, 1, seed++);
    HostTensor k = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    HostTensor v = randomTensor(dt, {c.b, c.s, c.hkv, c.d}, -1, 1, seed++);
    AttentionParams p = attnParams(c.hq, c.hkv, c.d, c.causal);
    auto want = cpu::attention(asF(q), asF(k), asF(v), p);
    ASSERT_TRUE(want) << want.status().message();
    cu::TensorRef dq = upload(q), dk = upload(k), dv = upload(v),
                  o = alloc(dt, q.shape);
    const size_t oBytes = size_t(numElements(q.shape)) * dtypeSize(dt);
    std::vector<uint8_t> first;
    for (int launch = 0; launch < 3; ++launch) {
      ASSERT_CUDA(cudaMemsetAsync(o.data, 0xff, oBytes, stream()));
      ASSERT_OK(cu::attention(dq, dk, dv, o, p, stream(), ws));
      HostTensor got = download(o);
      expectClose(got, stored(dt, *want),
                  what + ", launch " + std::to_string(launch));
      if (launch == 0)
        first = got.bytes;
      else
        expectSameBytes(got.bytes, first, what + ": launch again");
    }
    cu::Graph g;
    cu::GraphExec exec;
    ASSERT_CUDA(
        cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    Status captured = cu::attention(dq, dk, dv, o, p, stream(), ws);
    ASSERT_CUDA(cudaStreamEndCapture(stream(), g.out()));
    ASSERT_OK(captured);
    ASSERT_CUDA(cudaGraphInstantiate(exec.out(), g.get(), 0));
    for (int replay = 0; replay < 2; ++replay) {
      ASSERT_CUDA(cudaMemsetAsync(o.data, 0xff, oBytes, stream()));
      ASSERT_CUDA(cudaGraphLaunch(exec.get(), stream()));
      expectSameBytes(download(o).bytes, first,
                      what + ": graph replay " + std::to_string(replay));
    }
  }
}

// A position out of range with a split-KV workspace: the error is
// recorded and nothing is written (caches, o, by the split blocks and the
// combine alike); attention without a cache and a valid decode step on the
// same workspace match the CPU afterwards. With `tensorCore`, the
// tensor-core kernel; with `fuseCacheWrite` too, it does the cache write
// and its position check itself.
void runPositionOutOfRange(CudaTest &t, DType dt, bool tensorCore,
                           bool fuseCacheWrite = false) {
  const int64_t b = 2, hq = 8, hkv = 2, d = 64, maxS = 512, s = 100;
  AttentionParams p = attnParams(hq, hkv, d, true);
  cu::AttentionWorkspace ws;
  ws.multiprocessors = 132;
  ws.tensorCore = tensorCore;
  ws.fuseCacheWrite = fuseCacheWrite;
  const size_t decodeBytes = cu::attentionWorkspaceBytes(
      {b, 1, hq, d}, hkv, maxS, 132, 0, 0, tensorCore);
  const size_t prefillBytes =
      cu::attentionWorkspaceBytes({b, s, hq, d}, hkv, s, 132, 0, 0, tensorCore);
  ws.bytes = std::max(decodeBytes, prefillBytes);
  ASSERT_GT(decodeBytes, 0u);
  ASSERT_GT(prefillBytes, 0u);
  ws.data = t.rawAlloc(ws.bytes);
  uint32_t seed = 601;
  HostTensor q = randomTensor(dt, {b, 1, hq, d}, -1, 1, seed++);
  HostTensor k = randomTensor(dt, {b, 1, hkv, d}, -1, 1, seed++);
  HostTensor v = randomTensor(dt, {b, 1, hkv, d}, -1, 1, seed++);
  HostTensor kc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
  HostTensor vc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
  cu::TensorRef dq = t.upload(q), dk = t.upload(k), dv = t.upload(v);
  auto flag = cu::DeviceErrorFlag::create();
  ASSERT_TRUE(flag) << flag.status().message();

  // Batch 1 would write row 512 of 512; batch 0 is in range and is not
  // written either.
  const std::vector<int64_t> bad{300, maxS};
  cu::TensorRef dkc = t.upload(kc), dvc = t.upload(vc),
                o = t.alloc(dt, q.shape);
  HostTensor before = t.download(o);
  ASSERT_OK(cu::attentionWithCache(
      dq, dk, dv, dkc, dvc,
      t.upload(HostTensor::fromInts(DType::I64, {b}, bad)), o, p, flag->get(),
      t.stream(), ws));
  Status st = flag->check(t.stream());
  FTensor ckc = asF(kc), cvc = asF(vc);
  auto cpuResult = cpu::attentionWithCache(asF(q), asF(k), asF(v), ckc, cvc,
                                           ITensor{{b}, bad}, p);
  ASSERT_FALSE(cpuResult);
  ASSERT_FALSE(st) << "no device error for position " << bad[1];
  EXPECT_EQ(st.message(), cpuResult.status().message());
  expectSameBytes(t.download(dkc).bytes, kc.bytes, "k cache untouched");
  expectSameBytes(t.download(dvc).bytes, vc.bytes, "v cache untouched");
  expectSameBytes(t.download(o).bytes, before.bytes, "o untouched");

  // Attention without a cache on the same workspace.
  {
    HostTensor pq = randomTensor(dt, {b, s, hq, d}, -1, 1, seed++);
    HostTensor pk = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
    HostTensor pv = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
    cu::TensorRef po = t.alloc(dt, pq.shape);
    ASSERT_OK(cu::attention(t.upload(pq), t.upload(pk), t.upload(pv), po, p,
                            t.stream(), ws));
    auto want = cpu::attention(asF(pq), asF(pk), asF(pv), p);
    ASSERT_TRUE(want) << want.status().message();
    expectClose(t.download(po), stored(dt, *want),
                "attention without a cache after the error", tensorCore);
  }

  // A valid decode step.
  const std::vector<int64_t> good{300, maxS - 1};
  ASSERT_OK(cu::attentionWithCache(
      dq, dk, dv, dkc, dvc,
      t.upload(HostTensor::fromInts(DType::I64, {b}, good)), o, p, flag->get(),
      t.stream(), ws));
  ASSERT_OK(flag->check(t.stream()));
  auto want = cpu::attentionWithCache(asF(q), asF(k), asF(v), ckc, cvc,
                                      ITensor{{b}, good}, p);
  ASSERT_TRUE(want) << want.status().message();
  expectClose(t.download(o), stored(dt, *want), "decode after the error: o",
              tensorCore);
  expectSameBytes(t.download(dkc).bytes, stored(dt, ckc).bytes,
                  "decode after the error: k cache");
  expectSameBytes(t.download(dvc).bytes, stored(dt, cvc).bytes,
                  "decode after the error: v cache");
}

TEST_P(CudaKernels, AttentionSplitKvPositionOutOfRange) {
  runPositionOutOfRange(*this, GetParam(), /*tensorCore=*/false);
}

TEST_P(CudaKernels, AttentionTensorCorePositionOutOfRange) {
  runPositionOutOfRange(*this, GetParam(), /*tensorCore=*/true);
}

TEST_P(CudaKernels, AttentionTensorCoreFusedWritePositionOutOfRange) {
  runPositionOutOfRange(*this, GetParam(), /*tensorCore=*/true,
                        /*fuseCacheWrite=*/true);
}

TEST_P(CudaKernels, AttentionCachePositionOutOfRange) {
  DType dt = GetParam();
  const int64_t b = 2, s = 4, hq = 4, hkv = 2, d = 32, maxS = 16;
  AttentionParams p = attnParams(hq, hkv, d, true);
  uint32_t seed = 121;
  HostTensor q = randomTensor(dt, {b, s, hq, d}, -1, 1, seed++);
  HostTensor k = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
  HostTensor v = randomTensor(dt, {b, s, hkv, d}, -1, 1, seed++);
  HostTensor kc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
  HostTensor vc = randomTensor(dt, {b, maxS, hkv, d}, -1, 1, seed++);
  cu::TensorRef dq = upload(q), dk = upload(k), dv = upload(v);
  auto flag = cu::DeviceErrorFlag::create();
  ASSERT_TRUE(flag) << flag.status().message();
  // Batch 1 would write rows [13, 17) of 16; then a negative position.
  for (std::vector<int64_t> bad : {std::vector<int64_t>{3, 13},
                                   std::vector<int64_t>{-1, 0}}) {
    cu::TensorRef dkc = upload(kc), dvc = upload(vc), o = alloc(dt, q.shape);
    HostTensor before = download(o);
    ASSERT_OK(cu::attentionWithCache(
        dq, dk, dv, dkc, dvc, upload(HostTensor::fromInts(DType::I32, {b}, bad)),
        o, p, flag->get(), stream()));
    Status st = flag->check(stream());
    FTensor ckc = asF(kc), cvc = asF(vc);
    auto cpuResult = cpu::attentionWithCache(asF(q), asF(k), asF(v), ckc, cvc,
                                             ITensor{{b}, bad}, p);
    ASSERT_FALSE(cpuResult);
    ASSERT_FALSE(st) << "no device error for positions " << bad[0] << ", "
                     << bad[1];
    EXPECT_EQ(st.message(), cpuResult.status().message());
    // Nothing written, as on the CPU.
    expectSameBytes(download(dkc).bytes, kc.bytes, "k cache untouched");
    expectSameBytes(download(dvc).bytes, vc.bytes, "v cache untouched");
    expectSameBytes(download(o).bytes, before.bytes, "o untouched");
  }
  // check() cleared the record: a valid call works again.
  cu::TensorRef dkc = upload(kc), dvc = upload(vc), o = alloc(dt, q.shape);
  ASSERT_OK(cu::attentionWithCache(
      dq, dk, dv, dkc, dvc,
      upload(HostTensor::fromInts(DType::I64, {b}, {12, 0})), o, p,
      flag->get(), stream()));
  ASSERT_OK(flag->check(stream()));
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

TEST_P(CudaKernels, SliceAnyOffsetAndAlignment) {
  DType dt = GetParam();
  uint32_t seed = 131;
  Shape shape{4, 6, 10};
  struct Case {
    Shape offsets, sizes;
  };
  for (DType elem : {dt, DType::I64})
    for (size_t misalign : {size_t(0), size_t(1), size_t(2)})
      for (const Case &c : {Case{{1, 2, 3}, {2, 3, 5}},
                            Case{{0, 0, 0}, {4, 6, 10}},
                            Case{{2, 0, 0}, {2, 6, 10}},
                            Case{{0, 1, 0}, {4, 4, 10}},
                            Case{{3, 5, 9}, {1, 1, 1}},
                            Case{{0, 0, 4}, {4, 6, 0}}}) {
        std::string what = std::string("slice ") + dtypeName(elem) +
                           " offsets " + formatShape(c.offsets) + " sizes " +
                           formatShape(c.sizes) + " misaligned by " +
                           std::to_string(misalign);
        HostTensor x = randomTensor(elem, shape, -100, 100, seed++);
        cu::TensorRef y = alloc(elem, c.sizes, misalign);
        ASSERT_OK(
            cu::slice(upload(x, misalign), c.offsets, c.sizes, y, stream()));
        auto want = cpu::slice(asBytes(x), c.offsets, c.sizes);
        ASSERT_TRUE(want);
        expectSameBytes(download(y).bytes, want->data, what);
      }
}

TEST_P(CudaKernels, ConcatEveryDim) {
  DType dt = GetParam();
  uint32_t seed = 141;
  for (int64_t dim = 0; dim < 3; ++dim) {
    std::vector<HostTensor> hs;
    std::vector<cu::TensorRef> ds;
    Shape outShape{2, 3, 4};
    outShape[size_t(dim)] = 0;
    for (int64_t extent : {1, 3, 2}) {
      Shape s{2, 3, 4};
      s[size_t(dim)] = extent;
      outShape[size_t(dim)] += extent;
      hs.push_back(randomTensor(dt, s, -5, 5, seed++));
      ds.push_back(upload(hs.back()));
    }
    cu::TensorRef y = alloc(dt, outShape);
    ASSERT_OK(cu::concat(ds, dim, y, stream()));
    std::vector<ByteTensor> bs;
    for (const HostTensor &h : hs)
      bs.push_back(asBytes(h));
    std::vector<const ByteTensor *> ptrs;
    for (const ByteTensor &bt : bs)
      ptrs.push_back(&bt);
    auto want = cpu::concat(ptrs, dim);
    ASSERT_TRUE(want);
    expectSameBytes(download(y).bytes, want->data,
                    "concat dim " + std::to_string(dim));
  }
}

TEST_P(CudaKernels, StridedCopyTransposeAndGatherPermute) {
  DType dt = GetParam();
  size_t es = dtypeSize(dt);
  // Transpose x [3, 4, 5] -> y [5, 3, 4], y[k, i, j] = x[i, j, k].
  HostTensor x = randomTensor(dt, {3, 4, 5}, -5, 5, 151);
  cu::TensorRef y = alloc(dt, {5, 3, 4});
  ASSERT_OK(cu::stridedCopy(y.data, {4, 1, 12}, upload(x).data, {20, 5, 1},
                            {3, 4, 5}, es, stream()));
  std::vector<uint8_t> want(x.bytes.size());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k)
        std::memcpy(&want[size_t((k * 3 + i) * 4 + j) * es],
                    &x.bytes[size_t((i * 4 + j) * 5 + k) * es], es);
  expectSameBytes(download(y).bytes, want, "transpose");

  // all_gather along dim 1: NCCL yields G pieces [2, 4, 6] stacked as
  // [G, 2, 4, 6]; the plan wants them concatenated along dim 1: [2, 12, 6].
  const int64_t g = 3;
  HostTensor gathered = randomTensor(dt, {g, 2, 4, 6}, -5, 5, 152);
  cu::TensorRef out = alloc(dt, {2, g * 4, 6});
  ASSERT_OK(cu::stridedCopy(out.data, {4 * 6, g * 4 * 6, 6, 1},
                            upload(gathered).data, {2 * 4 * 6, 4 * 6, 6, 1},
                            {g, 2, 4, 6}, es, stream()));
  std::vector<ByteTensor> pieces;
  size_t pieceBytes = gathered.bytes.size() / size_t(g);
  for (int64_t r = 0; r < g; ++r)
    pieces.push_back(ByteTensor{
        {2, 4, 6},
        es,
        std::vector<uint8_t>(gathered.bytes.begin() + long(size_t(r) * pieceBytes),
                             gathered.bytes.begin() +
                                 long(size_t(r + 1) * pieceBytes))});
  std::vector<const ByteTensor *> ptrs;
  for (const ByteTensor &bt : pieces)
    ptrs.push_back(&bt);
  auto cat = cpu::concat(ptrs, 1);
  ASSERT_TRUE(cat);
  expectSameBytes(download(out).bytes, cat->data, "all_gather permute");
}

TEST_P(CudaKernels, Reshape) {
  DType dt = GetParam();
  HostTensor x = randomTensor(dt, {4, 6}, -5, 5, 161);
  cu::TensorRef y = alloc(dt, {3, 8});
  ASSERT_OK(cu::reshape(upload(x), y, stream()));
  expectSameBytes(download(y).bytes, x.bytes, "reshape");
}

//===----------------------------------------------------------------------===//
// Deterministic weights generated on the device
//===----------------------------------------------------------------------===//

namespace {
/// Parameters covering every shard rule: replicated, column- and
/// row-parallel, fused blocks (q|k|v), fewer shards than ranks, a padded
/// vocabulary, norm weights (1 + noise), and a 3-d tensor.
test::PlanBuilder weightsPlan(DType dt) {
  test::PlanBuilder b(4);
  int tp = b.group("tp", 4);
  b.param("model.norm.weight", {40}, {40}, dt);
  b.param("mlp.up_proj.weight", {64, 40}, {16, 40}, dt, 0, tp);
  b.param("mlp.down_proj.weight", {40, 64}, {40, 16}, dt, 1, tp);
  b.param("attn.qkv.weight", {96, 40}, {24, 40}, dt, 0, tp, 0, 3);
  b.param("attn.k_proj.weight", {16, 40}, {8, 40}, dt, 0, tp, 2);
  b.param("lm_head.weight", {1001, 40}, {251, 40}, dt, 0, tp);
  b.plan().parameters.back()->padded_shape = {1004, 40};
  b.param("experts.w", {3, 8, 40}, {3, 2, 40}, dt, 1, tp);
  return b;
}
} // namespace

TEST_P(CudaKernels, GeneratedWeightsMatchHostBitForBit) {
  DType dt = GetParam();
  std::vector<uint8_t> bytes = weightsPlan(dt).finish();
  const braid::plan::Plan &p = *braid::plan::GetPlan(bytes.data());
  for (SyntheticWeights w : {SyntheticWeights(0), SyntheticWeights(12345),
                             SyntheticWeights(7, weights::Amplitude::FanIn)})
    for (int rank = 0; rank < 4; ++rank)
      for (const braid::plan::Parameter *param : *p.parameters()) {
        auto want = initialParameterValue(p, *param, rank, w);
        ASSERT_TRUE(want) << want.status().message();
        cu::TensorRef t = alloc(dt, want->shape);
        ASSERT_OK(cu::generateParameter(p, *param, rank, w, t, stream()));
        expectSameBytes(download(t).bytes, want->bytes,
                        param->name()->str() + " rank " + std::to_string(rank) +
                            " seed " + std::to_string(w.seed) + " " +
                            amplitudeName(w.amplitude));
      }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKernels,
                         testing::Values(DType::F32, DType::BF16, DType::F16),
                         paramName);

//===----------------------------------------------------------------------===//
// Host-side checks: no GPU needed, nothing is launched
//===----------------------------------------------------------------------===//

namespace {
// Never dereferenced: every call below fails its host-side checks first.
void *fakeDevicePointer() { return reinterpret_cast<void *>(uintptr_t(0x1000)); }
cu::TensorRef fake(Shape shape, DType dt = DType::F32) {
  return {fakeDevicePointer(), dt, std::move(shape)};
}
FTensor zeros(Shape shape) {
  return {shape, std::vector<float>(size_t(numElements(shape)))};
}
} // namespace

TEST(CudaKernelChecks, GenerateParameterChecksItsBuffer) {
  std::vector<uint8_t> bytes = weightsPlan(DType::BF16).finish();
  const braid::plan::Plan &p = *braid::plan::GetPlan(bytes.data());
  // The host half of GeneratedWeightsMatchHostBitForBit: every rule is
  // valid for every rank.
  for (int rank = 0; rank < 4; ++rank)
    for (const braid::plan::Parameter *param : *p.parameters()) {
      auto value = initialParameterValue(p, *param, rank, SyntheticWeights(0));
      EXPECT_TRUE(value) << value.status().message();
    }
  const braid::plan::Parameter &up = *p.parameters()->Get(1);
  Status st = cu::generateParameter(p, up, 0, SyntheticWeights(0),
                                    fake({16, 40}), nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "parameter 'mlp.up_proj.weight' is [16, 40] x bf16, "
                          "the buffer is [16, 40] x f32");
  st = cu::generateParameter(p, up, 0, SyntheticWeights(0),
                             fake({64, 40}, DType::BF16), nullptr);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("the buffer is [64, 40] x bf16"),
            std::string::npos)
      << st.message();
}

TEST(CudaKernelChecks, BinaryBroadcastMatchesCpuMessage) {
  Status st = cu::binary(BinaryKind::Add, fake({2, 3}), fake({2}),
                         fake({2, 3}), nullptr);
  auto want = cpu::binary(BinaryKind::Add, zeros({2, 3}), zeros({2}));
  ASSERT_FALSE(st);
  ASSERT_FALSE(want);
  EXPECT_EQ(st.message(), want.status().message());
  st = cu::binary(BinaryKind::Mul, fake({3}), fake({2, 3}), fake({3}), nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            cpu::binary(BinaryKind::Mul, zeros({3}), zeros({2, 3}))
                .status()
                .message());
}

TEST(CudaKernelChecks, ResultShapeAndAlignment) {
  Status st = cu::silu(fake({4}), fake({3}), nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "silu: result [3] must be [4]");
  cu::TensorRef misaligned{
      reinterpret_cast<void *>(uintptr_t(0x1002)), DType::F32, {2, 8}};
  st = cu::rmsNorm(misaligned, fake({8}), fake({2, 8}), 1e-5, nullptr);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("not aligned to its 4-byte f32 elements"),
            std::string::npos)
      << st.message();
  st = cu::rmsNorm(cu::TensorRef{nullptr, DType::F32, {2, 8}}, fake({8}),
                   fake({2, 8}), 1e-5, nullptr);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("has no device data"), std::string::npos)
      << st.message();
}

TEST(CudaKernelChecks, NormRopeSoftmaxEmbeddingMatchCpuMessages) {
  Status st = cu::layerNorm(fake({2, 8}), fake({8}), fake({7}), fake({2, 8}),
                            1e-5, nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), cpu::layerNorm(zeros({2, 8}), zeros({8}),
                                         zeros({7}), 1e-5)
                              .status()
                              .message());
  st = cu::rope(fake({1, 2, 1, 4}), fake({2}, DType::I64), fake({1, 2, 1, 4}),
                1e4, nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), cpu::rope(zeros({1, 2, 1, 4}), ITensor{{2}, {0, 1}},
                                    1e4)
                              .status()
                              .message());
  st = cu::softmax(fake({2, 3}), fake({2, 3}), 2, nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            cpu::softmax(zeros({2, 3}), 2).status().message());
  st = cu::embedding(fake({3}, DType::I64), fake({4}), fake({3, 4}), 0,
                     nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            cpu::embedding(ITensor{{3}, {0, 1, 2}}, zeros({4}), 0)
                .status()
                .message());
}

// The split-KV tiling, computed on the host: decode over a long cache
// spreads over the GPU, prefill (rows enough) does not split, every key is
// in one range, and shared memory fits.
TEST(CudaKernelChecks, AttentionTilingSplitsDecodeNotPrefill) {
  using cu::detail::planAttention;
  auto decode = planAttention(1, 1, 32, 8, 128, 4096, 2, 132);
  ASSERT_TRUE(decode.fits);
  EXPECT_GE(int64_t(decode.splits) * 8, 2 * 132)
      << "a Llama-3-8B decode step should give every multiprocessor blocks";
  EXPECT_GE(decode.splits * decode.keysPerSplit, 4096);
  EXPECT_LT((decode.splits - 1) * decode.keysPerSplit, 4096);
  EXPECT_EQ(decode.keysPerSplit % decode.keyTile, 0);
  EXPECT_LE(decode.sharedBytes, size_t(48) << 10);
  EXPECT_EQ(decode.stages, 2) << "bf16 tiles of 32 keys double-buffer";
  EXPECT_EQ(decode.workspaceBytes,
            size_t(32) * size_t(decode.splits) * (128 + 2) * sizeof(float));
  EXPECT_EQ(decode.rowTile, 4) << "the 4 query heads of a GQA group";
  EXPECT_EQ(planAttention(1, 1, 32, 8, 128, 4096, 4, 132).stages, 1)
      << "fp32 tiles of 32 keys fit once in 48 KiB";

  auto prefill = planAttention(1, 4096, 32, 8, 128, 4096, 2, 132);
  ASSERT_TRUE(prefill.fits);
  EXPECT_EQ(prefill.splits, 1);
  EXPECT_EQ(prefill.workspaceBytes, 0u);

  auto noGpu = planAttention(1, 1, 32, 8, 128, 4096, 2, 0);
  EXPECT_EQ(noGpu.splits, 1) << "no multiprocessor count: no split";

  auto wide = planAttention(1, 1, 8, 8, 4096, 64, 4, 132);
  EXPECT_TRUE(wide.fits) << "head_dim 4096 fits with the shared-memory opt-in";
  EXPECT_GT(wide.sharedBytes, size_t(48) << 10);
  EXPECT_FALSE(planAttention(1, 1, 8, 8, 4097, 64, 2, 132).fits);
  EXPECT_FALSE(planAttention(1, 1, 6, 4, 64, 64, 2, 132).fits) << "Hq % Hkv";
  EXPECT_FALSE(planAttention(1, 1, 8, 8, 64, 64, 8, 132).fits) << "i64 cache";
}

// The tensor-core kernel's tiling: 16 rows, ranges of whole 4-warp tile
// rounds, every key in one range, ~2 blocks per multiprocessor for a
// Llama-3-8B decode step; shapes it is not built for get the split
// kernel's tiling, and the workspace covers both.
TEST(CudaKernelChecks, AttentionTensorCoreTiling) {
  using cu::detail::planAttention;
  auto decode = planAttention(1, 1, 32, 8, 128, 4096, 2, 132, 0, 0, true);
  ASSERT_TRUE(decode.fits);
  EXPECT_TRUE(decode.tensorCore);
  EXPECT_EQ(decode.rowTile, 16);
  EXPECT_EQ(decode.keyTile, 16);
  EXPECT_EQ(decode.keysPerSplit % 64, 0);
  EXPECT_GE(decode.splits * decode.keysPerSplit, 4096);
  EXPECT_LT((decode.splits - 1) * decode.keysPerSplit, 4096);
  EXPECT_GE(int64_t(decode.splits) * 8, 132)
      << "every multiprocessor should get a block";
  EXPECT_EQ(decode.sharedBytes, size_t(64) << 10)
      << "4 warps x 2 stages x (16 keys + 16 values) x 256 bytes";
  EXPECT_EQ(decode.workspaceBytes,
            size_t(32) * size_t(decode.splits) * (128 + 2) * sizeof(float));

  for (int64_t d : {16, 32, 64, 80, 96, 128})
    EXPECT_TRUE(
        planAttention(1, 1, 8, 2, d, 512, 2, 132, 0, 0, true).tensorCore)
        << "head_dim " << d;
  for (int64_t d : {8, 36, 48, 112, 256})
    EXPECT_FALSE(
        planAttention(1, 1, 8, 2, d, 512, 2, 132, 0, 0, true).tensorCore)
        << "head_dim " << d;
  auto f32 = planAttention(1, 1, 32, 8, 128, 4096, 4, 132, 0, 0, true);
  EXPECT_TRUE(f32.fits);
  EXPECT_FALSE(f32.tensorCore) << "fp32 caches run the split kernel";
  EXPECT_FALSE(planAttention(1, 1, 32, 8, 128, 4096, 2, 132).tensorCore)
      << "not asked for";

  auto prefill = planAttention(1, 4096, 32, 8, 128, 4096, 2, 132, 0, 0, true);
  EXPECT_TRUE(prefill.tensorCore);
  EXPECT_EQ(prefill.splits, 1) << "8192 row tiles fill the GPU";

  const size_t split =
      cu::attentionWorkspaceBytes({1, 1, 32, 128}, 8, 4096, 132);
  const size_t both =
      cu::attentionWorkspaceBytes({1, 1, 32, 128}, 8, 4096, 132, 0, 0, true);
  EXPECT_GE(both, split);
  EXPECT_GE(both, decode.workspaceBytes);
}

// More keys than the split kernel counts exactly is a clear error before
// any launch (no GPU needed: the check comes first).
TEST(CudaKernelChecks, AttentionKeyRowsBeyondTheKernelLimit) {
  AttentionParams p = attnParams(4, 2, 8, true);
  const int64_t rows = cu::detail::kMaxAttentionKeys + 1;
  Status st = cu::attention(fake({1, rows, 4, 8}), fake({1, rows, 2, 8}),
                            fake({1, rows, 2, 8}), fake({1, rows, 4, 8}), p,
                            nullptr);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("key rows exceed the CUDA kernel's limit"),
            std::string::npos)
      << st.message();
  cu::DeviceErrorRecord record{};
  st = cu::attentionWithCache(fake({1, 1, 4, 8}), fake({1, 1, 2, 8}),
                              fake({1, 1, 2, 8}), fake({1, rows, 2, 8}),
                              fake({1, rows, 2, 8}),
                              fake({1}, DType::I64), fake({1, 1, 4, 8}), p,
                              &record, nullptr);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("key rows exceed the CUDA kernel's limit"),
            std::string::npos)
      << st.message();
}

TEST(CudaKernelChecks, AttentionMatchesCpuMessages) {
  AttentionParams p = attnParams(6, 4, 8, true);
  Status st = cu::attention(fake({1, 2, 6, 8}), fake({1, 2, 4, 8}),
                            fake({1, 2, 4, 8}), fake({1, 2, 6, 8}), p,
                            nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), cpu::attention(zeros({1, 2, 6, 8}),
                                         zeros({1, 2, 4, 8}),
                                         zeros({1, 2, 4, 8}), p)
                              .status()
                              .message());
  p = attnParams(4, 2, 8, true);
  FTensor kc = zeros({1, 16, 2, 4}), vc = zeros({1, 16, 2, 4});
  st = cu::attentionWithCache(
      fake({1, 2, 4, 8}), fake({1, 2, 2, 8}), fake({1, 2, 2, 8}),
      fake({1, 16, 2, 4}), fake({1, 16, 2, 4}), fake({1}, DType::I64),
      fake({1, 2, 4, 8}), p, nullptr, nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            cpu::attentionWithCache(zeros({1, 2, 4, 8}), zeros({1, 2, 2, 8}),
                                    zeros({1, 2, 2, 8}), kc, vc,
                                    ITensor{{1}, {0}}, p)
                .status()
                .message());
  st = cu::attentionWithCache(
      fake({1, 2, 4, 8}), fake({1, 2, 2, 8}), fake({1, 2, 2, 8}),
      fake({1, 16, 2, 8}), fake({1, 16, 2, 8}), fake({1}, DType::I64),
      fake({1, 2, 4, 8}), p, nullptr, nullptr);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("needs a DeviceErrorRecord"), std::string::npos)
      << st.message();
}

TEST(CudaKernelChecks, LayoutMatchesCpuMessages) {
  Status st = cu::slice(fake({4, 6}), {1, 2}, {4, 2}, fake({4, 2}), nullptr);
  ByteTensor x{{4, 6}, 4, std::vector<uint8_t>(96)};
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), cpu::slice(x, {1, 2}, {4, 2}).status().message());
  ByteTensor a{{2, 3}, 4, std::vector<uint8_t>(24)};
  ByteTensor b{{3, 3}, 4, std::vector<uint8_t>(36)};
  st = cu::concat({fake({2, 3}), fake({3, 3})}, 1, fake({2, 6}), nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), cpu::concat({&a, &b}, 1).status().message());
  st = cu::reshape(fake({2, 3}), fake({7}), nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "reshape of [2, 3] to [7] changes the element count");
}

// The host half of every layout op: the copy plan (dims merged, widest unit
// chosen), run here by a host loop with the kernel's index arithmetic.
namespace {
namespace detail = braid::rt::cuda::detail;

std::vector<uint8_t> runPlanOnHost(const detail::CopyPlan &p,
                                   std::vector<uint8_t> dst,
                                   const uint8_t *src, size_t dstOffset = 0) {
  for (int64_t e = 0; e < p.count; ++e) {
    int64_t rem = e, so = 0, dOff = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t idx = rem % p.sizes.v[d];
      rem /= p.sizes.v[d];
      so += idx * p.srcStrides.v[d];
      dOff += idx * p.dstStrides.v[d];
    }
    std::memcpy(dst.data() + dstOffset + size_t(dOff * p.unitBytes),
                src + size_t(so * p.unitBytes), size_t(p.unitBytes));
  }
  return dst;
}

std::vector<int64_t> denseStrides(const Shape &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}
} // namespace

TEST(CudaKernelChecks, StridedCopyPlanSlices) {
  const uintptr_t base = 0x10000; // device addresses only decide the unit
  Shape shape{4, 6, 10};
  std::vector<int64_t> xs = denseStrides(shape);
  struct Case {
    Shape offsets, sizes;
    int rank; // after merging
  };
  uint32_t seed = 171;
  for (size_t es : {size_t(1), size_t(2), size_t(4), size_t(8)})
    for (uintptr_t misalign : {uintptr_t(0), uintptr_t(1), uintptr_t(2),
                               uintptr_t(4), uintptr_t(8)})
      for (const Case &c : {Case{{1, 2, 3}, {2, 3, 5}, 3},
                            Case{{0, 0, 0}, {4, 6, 10}, 1},
                            Case{{2, 0, 0}, {2, 6, 10}, 1},
                            Case{{0, 1, 0}, {4, 4, 10}, 2},
                            Case{{0, 0, 3}, {4, 6, 7}, 2},
                            Case{{3, 5, 9}, {1, 1, 1}, 1},
                            Case{{1, 0, 2}, {1, 6, 1}, 2}}) {
        std::string what = "slice elem " + std::to_string(es) + " offsets " +
                           formatShape(c.offsets) + " sizes " +
                           formatShape(c.sizes) + " misaligned by " +
                           std::to_string(misalign);
        ByteTensor x{shape, es, {}};
        x.data.resize(size_t(numElements(shape)) * es);
        std::mt19937 gen(seed++);
        for (uint8_t &b : x.data)
          b = uint8_t(gen());
        int64_t first = 0;
        for (size_t d = 0; d < 3; ++d)
          first += c.offsets[d] * xs[d];
        std::vector<int64_t> ys = denseStrides(c.sizes);
        detail::CopyPlan plan = detail::planStridedCopy(
            base + misalign, base + misalign + uintptr_t(first) * es,
            c.sizes.data(), ys.data(), xs.data(), 3, int64_t(es));
        EXPECT_EQ(plan.rank, c.rank) << what;
        EXPECT_EQ(plan.count * plan.unitBytes,
                  numElements(c.sizes) * int64_t(es))
            << what;
        if (misalign % 2) {
          EXPECT_EQ(plan.unitBytes, 1) << what;
        }
        auto want = cpu::slice(x, c.offsets, c.sizes);
        ASSERT_TRUE(want);
        expectSameBytes(runPlanOnHost(plan,
                                      std::vector<uint8_t>(want->data.size()),
                                      x.data.data() + size_t(first) * es),
                        want->data, what);
      }
}

TEST(CudaKernelChecks, StridedCopyPlanWidestUnit) {
  const uintptr_t base = 0x10000;
  Shape sizes{4, 6, 10};
  std::vector<int64_t> s = denseStrides(sizes);
  // A dense f32 copy is one run of 960 bytes: 16-byte units.
  detail::CopyPlan plan = detail::planStridedCopy(
      base, base + 64, sizes.data(), s.data(), s.data(), 3, 4);
  EXPECT_EQ(plan.rank, 1);
  EXPECT_EQ(plan.unitBytes, 16);
  EXPECT_EQ(plan.count, 60);
  // A source 4 bytes off a 16-byte boundary: 4-byte units.
  plan = detail::planStridedCopy(base, base + 4, sizes.data(), s.data(),
                                 s.data(), 3, 4);
  EXPECT_EQ(plan.unitBytes, 4);
  // bf16 rows of 10 elements (20 bytes) between strided rows: 4-byte units.
  Shape rows{4, 10};
  std::vector<int64_t> dst{10, 1}, src{20, 1};
  plan = detail::planStridedCopy(base, base, rows.data(), dst.data(),
                                 src.data(), 2, 2);
  EXPECT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.unitBytes, 4);
}

TEST(CudaKernelChecks, StridedCopyPlanConcatAndPermutes) {
  const uintptr_t base = 0x10000;
  uint32_t seed = 181;
  auto randomBytes = [&](size_t n) {
    std::mt19937 gen(seed++);
    std::vector<uint8_t> v(n);
    for (uint8_t &b : v)
      b = uint8_t(gen());
    return v;
  };
  for (size_t es : {size_t(2), size_t(4)}) {
    // Concat along every dim, as cu::concat places each input.
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<ByteTensor> ins;
      Shape outShape{2, 3, 4};
      outShape[size_t(dim)] = 0;
      for (int64_t extent : {1, 3, 2}) {
        Shape s{2, 3, 4};
        s[size_t(dim)] = extent;
        outShape[size_t(dim)] += extent;
        ins.push_back({s, es, randomBytes(size_t(numElements(s)) * es)});
      }
      std::vector<int64_t> ys = denseStrides(outShape);
      std::vector<uint8_t> got(size_t(numElements(outShape)) * es);
      int64_t at = 0;
      for (const ByteTensor &t : ins) {
        size_t offset = size_t(at * ys[size_t(dim)]) * es;
        std::vector<int64_t> ts = denseStrides(t.shape);
        detail::CopyPlan plan = detail::planStridedCopy(
            base + offset, base, t.shape.data(), ys.data(), ts.data(), 3,
            int64_t(es));
        got = runPlanOnHost(plan, got, t.data.data(), offset);
        at += t.shape[size_t(dim)];
      }
      std::vector<const ByteTensor *> ptrs;
      for (const ByteTensor &t : ins)
        ptrs.push_back(&t);
      auto want = cpu::concat(ptrs, dim);
      ASSERT_TRUE(want);
      expectSameBytes(got, want->data,
                      "concat plan dim " + std::to_string(dim));
    }
    // all_gather along dim 1 from [G, 2, 4, 6] to [2, G*4, 6].
    const int64_t g = 3;
    Shape sizes{g, 2, 4, 6};
    std::vector<uint8_t> gathered = randomBytes(size_t(g * 48) * es);
    std::vector<int64_t> dstStrides{24, g * 24, 6, 1},
        srcStrides = denseStrides(sizes);
    detail::CopyPlan plan =
        detail::planStridedCopy(base, base, sizes.data(), dstStrides.data(),
                                srcStrides.data(), 4, int64_t(es));
    std::vector<uint8_t> got =
        runPlanOnHost(plan, std::vector<uint8_t>(gathered.size()),
                      gathered.data());
    std::vector<ByteTensor> pieces;
    for (int64_t r = 0; r < g; ++r)
      pieces.push_back(ByteTensor{
          {2, 4, 6},
          es,
          std::vector<uint8_t>(gathered.begin() + long(size_t(r * 48) * es),
                               gathered.begin() +
                                   long(size_t((r + 1) * 48) * es))});
    std::vector<const ByteTensor *> ptrs;
    for (const ByteTensor &t : pieces)
      ptrs.push_back(&t);
    auto want = cpu::concat(ptrs, 1);
    ASSERT_TRUE(want);
    expectSameBytes(got, want->data, "all_gather permute plan");
  }
}
