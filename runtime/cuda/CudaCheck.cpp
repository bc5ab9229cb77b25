//===- CudaCheck.cpp - CUDA runtime errors as Status ----------------------===//
#include "runtime/cuda/CudaCheck.h"

using namespace braid::rt;

namespace {
/// "13.0" for the CUDA version number 13000 (major * 1000 + minor * 10).
std::string version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
} // namespace

Status cuda::cudaStatus(cudaError_t error, const char *expr, const char *file,
                        int line) {
  if (error == cudaSuccess)
    return Status::ok();
  return errorf(expr, " failed at ", file, ":", line, ": ",
                cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

Status cuda::cudaDeviceAvailable() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess && count > 0)
    return Status::ok();
  (void)cudaGetLastError(); // leave no error behind for the next check
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaGetLastError();
  std::string detail = error == cudaSuccess
                           ? std::string("cudaGetDeviceCount found 0 devices")
                           : std::string("cudaGetDeviceCount: ") +
                                 cudaGetErrorName(error) + " (" +
                                 cudaGetErrorString(error) + ")";
  if (driver == 0)
    return errorf("no usable CUDA device: no NVIDIA driver is installed on "
                  "this machine (",
                  detail, ")");
  if (error == cudaErrorInsufficientDriver)
    return errorf("no usable CUDA device: the NVIDIA driver supports CUDA ",
                  version(driver), " but this program uses the CUDA ",
                  version(runtime), " runtime (", detail, ")");
  return errorf("no usable CUDA device: ", detail);
}

Expected<std::string> cuda::describeGpus() {
  BRAID_RETURN_IF_ERROR(cudaDeviceAvailable());
  int driver = 0, runtime = 0, count = 0;
  BRAID_CUDA_CHECK(cudaDriverGetVersion(&driver));
  BRAID_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  BRAID_CUDA_CHECK(cudaGetDeviceCount(&count));
  std::string out = "CUDA driver " + version(driver) + ", runtime " +
                    version(runtime) + ", " + std::to_string(count) +
                    " device(s)\n";
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    BRAID_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    out += "GPU " + std::to_string(d) + ": " + prop.name + ", sm_" +
           std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           std::to_string(prop.multiProcessorCount) + " multiprocessors, " +
           std::to_string(prop.totalGlobalMem >> 20) + " MiB\n";
  }
  return out;
}
