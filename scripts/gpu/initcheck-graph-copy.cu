// Does compute-sanitizer's initcheck flag a CUDA Graph's copy node whose
// source an earlier kernel node of the same graph writes? The executor's
// graph-mode steps draw "Uninitialized access ... by cudaMemcpy source" at
// cuGraphLaunch while the same work launched eagerly is clean; this is the
// smallest program with that shape, in two variants, each eager and
// captured: `kernel` (a kernel writes every byte of a device buffer, then a
// device-to-host copy of it) and `pinned` (the host fills a cudaMallocHost
// buffer with memcpy, as the executor fills its page-locked inputs, then a
// host-to-device copy of it and the kernel adds to it). Built and run on a
// GPU machine by `scripts/gpu/suite initcheck-graph`:
//   nvcc -arch=sm_90 -o /tmp/igc initcheck-graph-copy.cu
//   compute-sanitizer --tool initcheck /tmp/igc {kernel|pinned} {eager|graph}
#include <cstdio>
#include <cstring>
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

__global__ void fill(float *p, int n, bool add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = add ? p[i] + float(i) : float(i);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s kernel|pinned eager|graph\n", argv[0]);
    return 2;
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
