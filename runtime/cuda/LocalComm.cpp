//===- LocalComm.cpp - The one-GPU test communicator ----------------------===//
#include "runtime/cuda/LocalComm.h"

#include "runtime/HostTensor.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/LocalCommKernels.h"
#include "runtime/cuda/Resources.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace braid::rt;
using namespace braid::rt::cuda;
namespace plan = braid::plan;
using detail::LocalCommDeviceState;
using detail::LocalCommHostState;
using detail::LocalCommRank;

namespace braid::rt::cuda {

/// One group instance on one stream: device state shared by its ranks, and
/// the host-mapped word through which the host aborts and learns why a
/// wait ended.
class LocalCommGroup {
public:
  static Expected<std::shared_ptr<LocalCommGroup>> create(int64_t instance) {
    auto g = std::shared_ptr<LocalCommGroup>(new LocalCommGroup());
    g->instance_ = instance;
    BRAID_CUDA_CHECK(cudaMalloc(g->dev_.out(), sizeof(LocalCommDeviceState)));
    BRAID_CUDA_CHECK(cudaMemset(g->dev_.get(), 0, sizeof(LocalCommDeviceState)));
    void *host = nullptr;
    BRAID_CUDA_CHECK(cudaHostAlloc(&host, sizeof(LocalCommHostState),
                                   cudaHostAllocMapped));
    g->host_ = static_cast<LocalCommHostState *>(host);
    std::memset(host, 0, sizeof(LocalCommHostState));
    void *mapped = nullptr;
    BRAID_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, host, 0));
    g->mapped_ = static_cast<LocalCommHostState *>(mapped);
    BRAID_CUDA_CHECK(cudaDeviceSynchronize()); // the memset, before any use
    return g;
  }
  ~LocalCommGroup() {
    if (host_)
      (void)cudaFreeHost(host_);
  }

  LocalCommRank view(int rank, int size, double timeoutSeconds) const {
    LocalCommRank r;
    r.dev = static_cast<LocalCommDeviceState *>(dev_.get());
    r.host = mapped_;
    r.rank = rank;
    r.size = size;
    r.timeoutNs = (unsigned long long)(std::ceil(timeoutSeconds * 1e9));
    return r;
  }
  void abort() { host_->abort = 1; }
  /// Why a wait of this group ended early; ok while none did.
  Status failure(double timeoutSeconds) const {
    int why = host_->failure;
    if (why == detail::kLocalCommOk)
      return Status::ok();
    std::string where = "single-GPU test communicator, group instance " +
                        std::to_string(instance_) + ": rank " +
                        std::to_string(host_->rank) + " waited for rank " +
                        std::to_string(host_->peer) + " (barrier or message " +
                        std::to_string(host_->epoch) + ")";
    if (why == detail::kLocalCommTimedOut)
      return errorf(where, " longer than ", timeoutSeconds,
                    " s: a collective is stuck (do all ranks run the same "
                    "plan?)");
    // The executor aborts when a rank failed: the root cause is that
    // rank's error (CudaRunner reports it instead of this one).
    return errorf("aborted: another rank failed (", where, ")");
  }

private:
  LocalCommGroup() = default;
  int64_t instance_ = 0;
  DeviceMemory dev_;
  LocalCommHostState *host_ = nullptr;   // host view
  LocalCommHostState *mapped_ = nullptr; // device view
};

} // namespace braid::rt::cuda

namespace {

static_assert(int(plan::DType::F32) == int(detail::Dt::F32) &&
                  int(plan::DType::F16) == int(detail::Dt::F16) &&
                  int(plan::DType::BF16) == int(detail::Dt::BF16) &&
                  int(plan::DType::I32) == int(detail::Dt::I32) &&
                  int(plan::DType::I64) == int(detail::Dt::I64),
              "the device code's storage types mirror the plan's");

int kindIndex(plan::ReduceKind k) {
  switch (k) {
  case plan::ReduceKind::Sum:
    return 0;
  case plan::ReduceKind::Max:
    return 1;
  case plan::ReduceKind::Min:
    return 2;
  case plan::ReduceKind::Prod:
    return 3;
  }
  return 0;
}

class LocalDeviceComm final : public DeviceComm {
public:
  LocalDeviceComm(std::shared_ptr<LocalCommGroup> group, LocalCommRank view,
                  DeviceMemory scratch, size_t scratchBytes,
                  double timeoutSeconds)
      : group_(std::move(group)), r_(view), scratch_(std::move(scratch)),
        scratchBytes_(scratchBytes), timeoutSeconds_(timeoutSeconds) {}

  Status allReduce(const void *in, void *out, size_t count, DType dtype,
                   plan::ReduceKind kind, cudaStream_t stream) override {
    size_t bytes = count * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(bytes));
    BRAID_CUDA_CHECK(detail::launchLocalBarrier(r_, true, in, stream));
    BRAID_CUDA_CHECK(detail::launchLocalReduce(
        r_, {scratch_.get(), detail::Dt(dtype)}, int64_t(count), 0,
        kindIndex(kind), stream));
    return finish(out, bytes, stream);
  }
  Status broadcast(const void *in, void *out, size_t count, DType dtype,
                   int root, cudaStream_t stream) override {
    if (root < 0 || root >= r_.size)
      return errorf("broadcast root ", root, " of ", r_.size, " ranks");
    size_t bytes = count * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(bytes));
    BRAID_CUDA_CHECK(detail::launchLocalBarrier(r_, true, in, stream));
    BRAID_CUDA_CHECK(detail::launchLocalGather(r_, scratch_.get(), bytes, 0,
                                               root, stream));
    return finish(out, bytes, stream);
  }
  Status allGather(const void *in, void *out, size_t count, DType dtype,
                   cudaStream_t stream) override {
    size_t piece = count * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(piece * size_t(r_.size)));
    BRAID_CUDA_CHECK(detail::launchLocalBarrier(r_, true, in, stream));
    BRAID_CUDA_CHECK(
        detail::launchLocalGather(r_, scratch_.get(), piece, 0, -1, stream));
    return finish(out, piece * size_t(r_.size), stream);
  }
  Status reduceScatter(const void *in, void *out, size_t recvCount,
                       DType dtype, plan::ReduceKind kind,
                       cudaStream_t stream) override {
    size_t bytes = recvCount * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(bytes));
    BRAID_CUDA_CHECK(detail::launchLocalBarrier(r_, true, in, stream));
    BRAID_CUDA_CHECK(detail::launchLocalReduce(
        r_, {scratch_.get(), detail::Dt(dtype)}, int64_t(recvCount),
        int64_t(recvCount) * r_.rank, kindIndex(kind), stream));
    return finish(out, bytes, stream);
  }
  Status allToAll(const void *send, void *recv, size_t pieceCount,
                  DType dtype, cudaStream_t stream) override {
    size_t piece = pieceCount * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(piece * size_t(r_.size)));
    BRAID_CUDA_CHECK(detail::launchLocalBarrier(r_, true, send, stream));
    BRAID_CUDA_CHECK(detail::launchLocalGather(
        r_, scratch_.get(), piece, piece * size_t(r_.rank), -1, stream));
    return finish(recv, piece * size_t(r_.size), stream);
  }
  Status send(const void *in, size_t, DType, int peer,
              cudaStream_t stream) override {
    BRAID_RETURN_IF_ERROR(checkPeer(peer));
    BRAID_CUDA_CHECK(detail::launchLocalSend(r_, peer, in, stream));
    return Status::ok();
  }
  Status recv(void *out, size_t count, DType dtype, int peer,
              cudaStream_t stream) override {
    BRAID_RETURN_IF_ERROR(checkPeer(peer));
    BRAID_CUDA_CHECK(detail::launchLocalRecv(r_, peer, out,
                                             count * dtypeSize(dtype), stream));
    return Status::ok();
  }

  Status asyncError() override { return group_->failure(timeoutSeconds_); }
  void abort() override { group_->abort(); }

private:
  Status fits(size_t bytes) const {
    if (bytes > scratchBytes_)
      return errorf("single-GPU test communicator: a collective of ", bytes,
                    " bytes exceeds the ", scratchBytes_,
                    " bytes planned for it");
    return Status::ok();
  }
  Status checkPeer(int peer) const {
    if (peer < 0 || peer >= r_.size || peer == r_.rank)
      return errorf("peer ", peer, " of rank ", r_.rank, " in a group of ",
                    r_.size);
    return Status::ok();
  }
  /// Every rank has read its peers' inputs: only now may the result land
  /// in the output (which may be the input, or a buffer a peer reads).
  Status finish(void *out, size_t bytes, cudaStream_t stream) {
    BRAID_CUDA_CHECK(detail::launchLocalBarrier(r_, false, nullptr, stream));
    if (bytes)
      BRAID_CUDA_CHECK(cudaMemcpyAsync(out, scratch_.get(), bytes,
                                       cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }

  std::shared_ptr<LocalCommGroup> group_;
  LocalCommRank r_;
  DeviceMemory scratch_;
  size_t scratchBytes_;
  double timeoutSeconds_;
};

} // namespace

LocalCommRegistry::~LocalCommRegistry() = default;

Expected<std::unique_ptr<DeviceComm>>
LocalCommRegistry::join(const CommIdKey &key, int size, int rank,
                        size_t scratchBytes) {
  if (size < 1 || size > detail::kLocalCommMaxRanks)
    return errorf("the single-GPU test communicator runs groups of 1 to ",
                  detail::kLocalCommMaxRanks, " ranks, not ", size);
  if (rank < 0 || rank >= size)
    return errorf("rank ", rank, " of a group of ", size);
  std::shared_ptr<LocalCommGroup> group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto &slot = groups_[key];
    if (!slot) {
      auto made = LocalCommGroup::create(key.instance);
      if (!made)
        return made.status();
      slot = made.take();
    }
    group = slot;
  }
  DeviceMemory scratch;
  BRAID_CUDA_CHECK(cudaMalloc(scratch.out(), std::max<size_t>(scratchBytes, 1)));
  LocalCommRank view = group->view(rank, size, timeoutSeconds_);
  return std::unique_ptr<DeviceComm>(std::make_unique<LocalDeviceComm>(
      std::move(group), view, std::move(scratch), scratchBytes,
      timeoutSeconds_));
}
