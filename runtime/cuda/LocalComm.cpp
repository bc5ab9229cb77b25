//===- LocalComm.cpp - The one-GPU test communicator ----------------------===//
#include "runtime/cuda/LocalComm.h"

#include "runtime/HostTensor.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/HostRendezvous.h"
#include "runtime/cuda/LocalCommKernels.h"
#include "runtime/cuda/Resources.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace braid::rt;
using namespace braid::rt::cuda;
namespace plan = braid::plan;

namespace braid::rt::cuda {

/// What a rank posts when it meets its peers: the buffer they read (or
/// null) and the event after which they may.
struct LocalPost {
  const void *ptr = nullptr;
  cudaEvent_t event = nullptr;
  size_t bytes = 0; // a send's size, checked by its receive
};

/// One group instance on one stream: where its ranks meet on the host.
class LocalCommGroup {
public:
  LocalCommGroup(int64_t instance, int size, double timeoutSeconds)
      : collectives_(size, timeoutSeconds, name(instance)),
        messages_(size, timeoutSeconds, name(instance)) {}

  HostRendezvous<LocalPost> &collectives() { return collectives_; }
  HostMailbox<LocalPost> &messages() { return messages_; }
  void abort() {
    collectives_.abort();
    messages_.abort();
  }

private:
  static std::string name(int64_t instance) {
    return "single-GPU test communicator, group instance " +
           std::to_string(instance);
  }
  HostRendezvous<LocalPost> collectives_;
  HostMailbox<LocalPost> messages_;
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
  LocalDeviceComm(std::shared_ptr<LocalCommGroup> group, int rank, int size,
                  DeviceMemory scratch, size_t scratchBytes,
                  std::vector<Event> events)
      : group_(std::move(group)), rank_(rank), size_(size),
        scratch_(std::move(scratch)), scratchBytes_(scratchBytes),
        events_(std::move(events)) {}

  Status allReduce(const void *in, void *out, size_t count, DType dtype,
                   plan::ReduceKind kind, cudaStream_t stream) override {
    size_t bytes = count * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(bytes));
    auto src = meet(in, stream);
    if (!src)
      return src.status();
    BRAID_CUDA_CHECK(
        detail::launchLocalReduce(*src, {scratch_.get(), detail::Dt(dtype)},
                                  int64_t(count), 0, kindIndex(kind), stream));
    return finish(out, bytes, stream);
  }
  Status broadcast(const void *in, void *out, size_t count, DType dtype,
                   int root, cudaStream_t stream) override {
    if (root < 0 || root >= size_)
      return errorf("broadcast root ", root, " of ", size_, " ranks");
    size_t bytes = count * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(bytes));
    auto src = meet(in, stream);
    if (!src)
      return src.status();
    BRAID_CUDA_CHECK(detail::launchLocalGather(*src, scratch_.get(), bytes, 0,
                                               root, stream));
    return finish(out, bytes, stream);
  }
  Status allGather(const void *in, void *out, size_t count, DType dtype,
                   cudaStream_t stream) override {
    size_t piece = count * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(piece * size_t(size_)));
    auto src = meet(in, stream);
    if (!src)
      return src.status();
    BRAID_CUDA_CHECK(
        detail::launchLocalGather(*src, scratch_.get(), piece, 0, -1, stream));
    return finish(out, piece * size_t(size_), stream);
  }
  Status reduceScatter(const void *in, void *out, size_t recvCount,
                       DType dtype, plan::ReduceKind kind,
                       cudaStream_t stream) override {
    size_t bytes = recvCount * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(bytes));
    auto src = meet(in, stream);
    if (!src)
      return src.status();
    BRAID_CUDA_CHECK(detail::launchLocalReduce(
        *src, {scratch_.get(), detail::Dt(dtype)}, int64_t(recvCount),
        int64_t(recvCount) * rank_, kindIndex(kind), stream));
    return finish(out, bytes, stream);
  }
  Status allToAll(const void *send, void *recv, size_t pieceCount,
                  DType dtype, cudaStream_t stream) override {
    size_t piece = pieceCount * dtypeSize(dtype);
    BRAID_RETURN_IF_ERROR(fits(piece * size_t(size_)));
    auto src = meet(send, stream);
    if (!src)
      return src.status();
    BRAID_CUDA_CHECK(detail::launchLocalGather(
        *src, scratch_.get(), piece, piece * size_t(rank_), -1, stream));
    return finish(recv, piece * size_t(size_), stream);
  }
  /// Posts `in` and waits (on the host) until `peer` has enqueued its
  /// copy; the stream then waits for that copy, so `in` is not overwritten
  /// before it is read (NCCL's rendezvous). In a group the wait comes at
  /// groupEnd, after the group's receives.
  Status send(const void *in, size_t count, DType dtype, int peer,
              cudaStream_t stream) override {
    BRAID_RETURN_IF_ERROR(checkPeer(peer));
    cudaEvent_t ready = events_[kSendReady + size_t(peer)].get();
    BRAID_CUDA_CHECK(cudaEventRecord(ready, stream));
    BRAID_RETURN_IF_ERROR(group_->messages().post(
        rank_, peer, LocalPost{in, ready, count * dtypeSize(dtype)}));
    if (inGroup_) {
      groupSends_.push_back({peer, stream});
      return Status::ok();
    }
    return awaitCopied(peer, stream);
  }
  Status recv(void *out, size_t count, DType dtype, int peer,
              cudaStream_t stream) override {
    BRAID_RETURN_IF_ERROR(checkPeer(peer));
    size_t bytes = count * dtypeSize(dtype);
    if (inGroup_) {
      groupRecvs_.push_back({out, bytes, peer, stream});
      return Status::ok();
    }
    return receive({out, bytes, peer, stream});
  }
  /// Sends are posted as they come; receives wait for groupEnd, which
  /// takes their messages in whatever order the senders post them (NCCL
  /// posts a group's receives together: one whose sender first waits for
  /// another receive of the group must not hold it back), then waits for
  /// the sends' receivers: every rank posts before it blocks, so a group
  /// never waits for itself.
  Status groupStart() override {
    inGroup_ = true;
    return Status::ok();
  }
  Status groupEnd() override {
    inGroup_ = false;
    Status first = receiveAll(groupRecvs_);
    for (const auto &[peer, stream] : groupSends_) {
      Status st = first ? awaitCopied(peer, stream) : first;
      if (first && !st)
        first = st;
    }
    groupRecvs_.clear();
    groupSends_.clear();
    return first;
  }

  /// Every failure shows when the collective is enqueued (the waits are on
  /// the host): there is nothing asynchronous left to report.
  Status asyncError() override { return Status::ok(); }
  void abort() override { group_->abort(); }

  /// Events: two for collectives, then one per peer for sends and one per
  /// peer for receives.
  static constexpr size_t kInputReady = 0, kInputRead = 1, kSendReady = 2;
  static size_t eventCount(int size) { return kSendReady + 2 * size_t(size); }

private:
  struct PendingRecv {
    void *out;
    size_t bytes;
    int peer;
    cudaStream_t stream;
  };
  Status awaitCopied(int peer, cudaStream_t stream) {
    auto done = group_->messages().awaitAnswer(rank_, peer);
    if (!done)
      return done.status();
    BRAID_CUDA_CHECK(cudaStreamWaitEvent(stream, done->event, 0));
    return Status::ok();
  }
  Status receive(const PendingRecv &r) {
    auto got = group_->messages().receive(
        rank_, r.peer,
        [&](const LocalPost &message) { return take(r, message); });
    return got ? Status::ok() : got.status();
  }
  /// A group's receives, each as its sender posts (receiveAny); two from
  /// one peer in their order.
  Status receiveAll(std::vector<PendingRecv> left) {
    while (!left.empty()) {
      std::vector<int> peers;
      for (const PendingRecv &r : left)
        if (std::find(peers.begin(), peers.end(), r.peer) == peers.end())
          peers.push_back(r.peer);
      size_t taken = left.size();
      auto sender = group_->messages().receiveAny(
          rank_, peers,
          [&](int peer, const LocalPost &message) -> Expected<LocalPost> {
            for (size_t i = 0; i < left.size(); ++i)
              if (left[i].peer == peer) {
                taken = i;
                return take(left[i], message);
              }
            return errorf("rank ", rank_, " has no receive from rank ", peer);
          });
      if (!sender)
        return sender.status();
      left.erase(left.begin() + std::ptrdiff_t(taken));
    }
    return Status::ok();
  }
  /// Receive `r` of `message`: the copy enqueued, and the answer its
  /// sender waits for.
  Expected<LocalPost> take(const PendingRecv &r, const LocalPost &message) {
    cudaEvent_t copied =
        events_[kSendReady + size_t(size_) + size_t(r.peer)].get();
    if (message.bytes != r.bytes)
      return errorf("rank ", rank_, " receives ", r.bytes, " bytes from rank ",
                    r.peer, ", which sends ", message.bytes);
    BRAID_CUDA_CHECK(cudaStreamWaitEvent(r.stream, message.event, 0));
    if (r.bytes) {
      detail::LocalSources src{};
      src.ptr[0] = message.ptr;
      src.size = 1;
      BRAID_CUDA_CHECK(
          detail::launchLocalGather(src, r.out, r.bytes, 0, 0, r.stream));
    }
    BRAID_CUDA_CHECK(cudaEventRecord(copied, r.stream));
    return LocalPost{nullptr, copied};
  }

  Status fits(size_t bytes) const {
    if (bytes > scratchBytes_)
      return errorf("single-GPU test communicator: a collective of ", bytes,
                    " bytes exceeds the ", scratchBytes_,
                    " bytes planned for it");
    return Status::ok();
  }
  Status checkPeer(int peer) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return errorf("peer ", peer, " of rank ", rank_, " in a group of ",
                    size_);
    return Status::ok();
  }
  /// Meets the peers: posts `in` and the event after which it is ready;
  /// the stream waits for every peer's. Returns the ranks' operands.
  Expected<detail::LocalSources> meet(const void *in, cudaStream_t stream) {
    cudaEvent_t ready = events_[kInputReady].get();
    BRAID_CUDA_CHECK(cudaEventRecord(ready, stream));
    auto posts = group_->collectives().arrive(rank_, LocalPost{in, ready});
    if (!posts)
      return posts.status();
    detail::LocalSources src{};
    src.size = size_;
    for (int j = 0; j < size_; ++j) {
      src.ptr[j] = (*posts)[size_t(j)].ptr;
      if (j != rank_)
        BRAID_CUDA_CHECK(
            cudaStreamWaitEvent(stream, (*posts)[size_t(j)].event, 0));
    }
    return src;
  }
  /// Every rank has read its peers' operands: only now may the result land
  /// in the output (which may be the operand, or a buffer a peer reads).
  Status finish(void *out, size_t bytes, cudaStream_t stream) {
    cudaEvent_t read = events_[kInputRead].get();
    BRAID_CUDA_CHECK(cudaEventRecord(read, stream));
    auto posts = group_->collectives().arrive(rank_, LocalPost{nullptr, read});
    if (!posts)
      return posts.status();
    for (int j = 0; j < size_; ++j)
      if (j != rank_)
        BRAID_CUDA_CHECK(
            cudaStreamWaitEvent(stream, (*posts)[size_t(j)].event, 0));
    if (bytes)
      BRAID_CUDA_CHECK(cudaMemcpyAsync(out, scratch_.get(), bytes,
                                       cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }

  std::shared_ptr<LocalCommGroup> group_;
  int rank_, size_;
  DeviceMemory scratch_;
  size_t scratchBytes_;
  std::vector<Event> events_;
  bool inGroup_ = false;
  std::vector<PendingRecv> groupRecvs_;
  std::vector<std::pair<int, cudaStream_t>> groupSends_; // peer, stream
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
    if (!slot)
      slot =
          std::make_shared<LocalCommGroup>(key.instance, size, timeoutSeconds_);
    group = slot;
  }
  std::vector<Event> events(LocalDeviceComm::eventCount(size));
  for (Event &e : events)
    BRAID_CUDA_CHECK(cudaEventCreateWithFlags(e.out(), cudaEventDisableTiming));
  DeviceMemory scratch;
  BRAID_CUDA_CHECK(
      cudaMalloc(scratch.out(), std::max<size_t>(scratchBytes, 1)));
  return std::unique_ptr<DeviceComm>(std::make_unique<LocalDeviceComm>(
      std::move(group), rank, size, std::move(scratch), scratchBytes,
      std::move(events)));
}

void LocalCommRegistry::abortAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto &[key, group] : groups_)
    group->abort();
}
