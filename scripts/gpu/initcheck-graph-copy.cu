// Does compute-sanitizer's initcheck flag a CUDA Graph's copy node whose
// source an earlier node of the same graph writes? The executor's
// graph-mode steps draw "Uninitialized access ... by cudaMemcpy source" at
// cuGraphLaunch (4096 bytes: the MLP test's [2, 8, 64] fp32 tensors) while
// the same work launched eagerly is clean; this is the smallest program
// with that shape, in four variants, each eager and captured:
//   kernel  a kernel writes every byte of a device buffer, then a
//           device-to-host copy of it;
//   pinned  the host fills a cudaMallocHost buffer with memcpy, as the
//           executor fills its page-locked inputs, then a host-to-device
//           copy of it and the kernel adds to it;
//   lt32    cuBLASLt writes the buffer (an fp32 GEMM, the MLP test's down
//           projection's shape), then a device-to-host copy of it;
//   lt16    the same with bf16 operands (Hopper GEMMs that store through
//           the tensor memory accelerator, which the tool may not see).
// The first two were clean on the H100 (2026-11-24). Built here by
// scripts/gpu/bundle (the GPU machine may lack cuBLASLt's headers) and
// run there by `scripts/gpu/suite initcheck-graph`:
//   nvcc -arch=sm_90 -o igc initcheck-graph-copy.cu -lcublasLt
//   compute-sanitizer --tool initcheck igc {kernel|pinned|lt32|lt16}
//   {eager|graph}
#include <cstdio>
#include <cstring>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));            \
      return 1;                                                                \
    }                                                                          \
  } while (0)

#define CHECK_LT(x)                                                            \
  do {                                                                         \
    cublasStatus_t s_ = (x);                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      std::fprintf(stderr, "%s: cuBLAS status %d\n", #x, int(s_));             \
      return 1;                                                                \
    }                                                                          \
  } while (0)

__global__ void fill(float *p, int n, bool add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = add ? p[i] + float(i) : float(i);
}

/// Small integers (exact in bf16 and in fp32 sums of 128 products).
template <typename T> __global__ void fillSmall(T *p, int n, int salt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = T(float((i * 7 + salt) % 5 - 2));
}

/// Runs `enqueue` (which returns a cudaError_t) on `s` eagerly, or
/// captured into a graph that is launched once; then waits for `s`.
template <typename Enqueue>
int launch(Enqueue enqueue, bool graph, cudaStream_t s) {
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CHECK(enqueue());
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
  } else {
    CHECK(enqueue());
  }
  CHECK(cudaStreamSynchronize(s));
  return 0;
}

constexpr int kM = 64, kN = 16, kK = 128; // D [kM x kN] = A [kM x kK] B

/// D = A B, column-major, written by cuBLASLt with the heuristic's first
/// algorithm and a 32 MiB workspace (as the executor gives it), then
/// copied to `host`; eager or captured. Returns non-zero on a failure or
/// a wrong product.
template <typename T>
int gemmThenCopy(cudaDataType_t type, bool graph, cudaStream_t s) {
  T *a = nullptr, *b = nullptr;
  float *d = nullptr, *host = nullptr;
  void *workspace = nullptr;
  constexpr size_t kWorkspace = size_t(32) << 20;
  CHECK(cudaMalloc(&a, kM * kK * sizeof(T)));
  CHECK(cudaMalloc(&b, kK * kN * sizeof(T)));
  CHECK(cudaMalloc(&d, kM * kN * sizeof(float)));
  CHECK(cudaMalloc(&workspace, kWorkspace));
  CHECK(cudaMallocHost(&host, kM * kN * sizeof(float)));
  fillSmall<<<(kM * kK + 255) / 256, 256, 0, s>>>(a, kM * kK, 1);
  fillSmall<<<(kK * kN + 255) / 256, 256, 0, s>>>(b, kK * kN, 3);
  CHECK(cudaStreamSynchronize(s));

  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtCreate(&lt));
  CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, type, kM, kK, kM));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, type, kK, kN, kK));
  CHECK_LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, kM, kN, kM));
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = kWorkspace;
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1,
                                          &found, &count));
  if (count == 0) {
    std::fprintf(stderr, "cuBLASLt offers no algorithm\n");
    return 1;
  }
  const float one = 1.0f, zero = 0.0f;
  auto enqueue = [&]() {
    cublasStatus_t st =
        cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, d, ld, d, ld,
                       &found.algo, workspace, kWorkspace, s);
    if (st != CUBLAS_STATUS_SUCCESS)
      return cudaErrorUnknown;
    return cudaMemcpyAsync(host, d, kM * kN * sizeof(float),
                           cudaMemcpyDeviceToHost, s);
  };
  if (launch(enqueue, graph, s) != 0)
    return 1;
  for (int j = 0; j < kN; ++j)
    for (int i = 0; i < kM; ++i) {
      float want = 0.0f;
      for (int k = 0; k < kK; ++k)
        want += float(((i + k * kM) * 7 + 1) % 5 - 2) *
                float(((k + j * kK) * 7 + 3) % 5 - 2);
      if (host[i + j * kM] != want) {
        std::fprintf(stderr, "D[%d, %d] is %g, not %g\n", i, j,
                     host[i + j * kM], want);
        return 1;
      }
    }
  std::printf("cuBLASLt GEMM then copy, %s: %d floats as expected\n",
              graph ? "graph" : "eager", kM * kN);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(d));
  CHECK(cudaFree(workspace));
  CHECK(cudaFreeHost(host));
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s kernel|pinned|lt32|lt16 eager|graph\n",
                 argv[0]);
    return 2;
  }
  if (std::strcmp(argv[1], "lt32") == 0 || std::strcmp(argv[1], "lt16") == 0) {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    const bool graph = std::strcmp(argv[2], "graph") == 0;
    int rc = argv[1][2] == '3'
                 ? gemmThenCopy<float>(CUDA_R_32F, graph, s)
                 : gemmThenCopy<__nv_bfloat16>(CUDA_R_16BF, graph, s);
    CHECK(cudaStreamDestroy(s));
    return rc;
  }
  const bool pinned = std::strcmp(argv[1], "pinned") == 0;
  const bool graph = std::strcmp(argv[2], "graph") == 0;
  constexpr int n = 1024; // 4096 bytes, the size the executor's reports name
  float *dev = nullptr, *host = nullptr, *in = nullptr;
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMalloc(&dev, n * sizeof(float)));
  CHECK(cudaMallocHost(&host, n * sizeof(float)));
  CHECK(cudaMallocHost(&in, n * sizeof(float)));
  std::vector<float> values(n, 1.0f);
  std::memcpy(in, values.data(), n * sizeof(float)); // a CPU write
  auto enqueue = [&]() {
    if (pinned) {
      cudaError_t e = cudaMemcpyAsync(dev, in, n * sizeof(float),
                                      cudaMemcpyHostToDevice, s);
      if (e != cudaSuccess)
        return e;
    }
    fill<<<(n + 255) / 256, 256, 0, s>>>(dev, n, pinned);
    return cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost,
                           s);
  };
  if (launch(enqueue, graph, s) != 0)
    return 1;
  for (int i = 0; i < n; ++i)
    if (host[i] != float(i) + (pinned ? 1.0f : 0.0f)) {
      std::fprintf(stderr, "element %d is %g\n", i, host[i]);
      return 1;
    }
  std::printf("%s %s: %d floats copied back as expected\n", argv[1], argv[2],
              n);
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(host));
  CHECK(cudaFreeHost(in));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
