//===- NcclComm.cpp - DeviceComm over an NCCL communicator ----------------===//
#include "runtime/cuda/NcclComm.h"

#include "runtime/HostTensor.h"
#include "runtime/cuda/LibraryCheck.h"
#include "runtime/cuda/Resources.h"

using namespace braid::rt;
using namespace braid::rt::cuda;
namespace plan = braid::plan;

namespace {

Expected<ncclDataType_t> ncclTypeOf(DType t) {
  switch (t) {
  case DType::F32:
    return ncclFloat32;
  case DType::F16:
    return ncclFloat16;
  case DType::BF16:
    return ncclBfloat16;
  case DType::I32:
    return ncclInt32;
  case DType::I64:
    return ncclInt64;
  }
  return errorf("no NCCL type for dtype ", int(t));
}

ncclRedOp_t ncclOpOf(plan::ReduceKind k) {
  switch (k) {
  case plan::ReduceKind::Sum:
    return ncclSum;
  case plan::ReduceKind::Max:
    return ncclMax;
  case plan::ReduceKind::Min:
    return ncclMin;
  case plan::ReduceKind::Prod:
    return ncclProd;
  }
  return ncclSum;
}

class NcclDeviceComm final : public DeviceComm {
public:
  explicit NcclDeviceComm(NcclComm comm, int size)
      : comm_(std::move(comm)), size_(size) {}

  Status allReduce(const void *in, void *out, size_t count, DType dtype,
                   plan::ReduceKind kind, cudaStream_t stream) override {
    auto t = ncclTypeOf(dtype);
    if (!t)
      return t.status();
    BRAID_NCCL_CHECK(ncclAllReduce(in, out, count, *t, ncclOpOf(kind),
                                   comm_.get(), stream));
    return Status::ok();
  }
  Status broadcast(const void *in, void *out, size_t count, DType dtype,
                   int root, cudaStream_t stream) override {
    auto t = ncclTypeOf(dtype);
    if (!t)
      return t.status();
    BRAID_NCCL_CHECK(
        ncclBroadcast(in, out, count, *t, root, comm_.get(), stream));
    return Status::ok();
  }
  Status allGather(const void *in, void *out, size_t count, DType dtype,
                   cudaStream_t stream) override {
    auto t = ncclTypeOf(dtype);
    if (!t)
      return t.status();
    BRAID_NCCL_CHECK(ncclAllGather(in, out, count, *t, comm_.get(), stream));
    return Status::ok();
  }
  Status reduceScatter(const void *in, void *out, size_t recvCount,
                       DType dtype, plan::ReduceKind kind,
                       cudaStream_t stream) override {
    auto t = ncclTypeOf(dtype);
    if (!t)
      return t.status();
    BRAID_NCCL_CHECK(ncclReduceScatter(in, out, recvCount, *t, ncclOpOf(kind),
                                       comm_.get(), stream));
    return Status::ok();
  }
  Status allToAll(const void *send, void *recv, size_t pieceCount,
                  DType dtype, cudaStream_t stream) override {
    auto t = ncclTypeOf(dtype);
    if (!t)
      return t.status();
    size_t bytes = pieceCount * dtypeSize(dtype);
    const auto *from = static_cast<const uint8_t *>(send);
    auto *to = static_cast<uint8_t *>(recv);
    // One group: the sends and receives progress together (lone ones run
    // in order per communicator and would deadlock).
    BRAID_NCCL_CHECK(ncclGroupStart());
    Status st = Status::ok();
    for (int j = 0; j < size_ && st; ++j) {
      ncclResult_t r = ncclSend(from + size_t(j) * bytes, pieceCount, *t, j,
                                comm_.get(), stream);
      if (r == ncclSuccess)
        r = ncclRecv(to + size_t(j) * bytes, pieceCount, *t, j, comm_.get(),
                     stream);
      if (r != ncclSuccess)
        st = errorf("ncclSend/ncclRecv of all_to_all piece ", j, ": ",
                    ncclGetErrorString(r), " (", ncclGetLastError(comm_.get()),
                    ")");
    }
    // The group is closed even when a call in it failed.
    ncclResult_t end = ncclGroupEnd();
    BRAID_RETURN_IF_ERROR(st);
    BRAID_NCCL_CHECK(end);
    return Status::ok();
  }
  Status groupStart() override {
    BRAID_NCCL_CHECK(ncclGroupStart());
    return Status::ok();
  }
  Status groupEnd() override {
    BRAID_NCCL_CHECK(ncclGroupEnd());
    return Status::ok();
  }
  Status send(const void *in, size_t count, DType dtype, int peer,
              cudaStream_t stream) override {
    auto t = ncclTypeOf(dtype);
    if (!t)
      return t.status();
    BRAID_NCCL_CHECK(ncclSend(in, count, *t, peer, comm_.get(), stream));
    return Status::ok();
  }
  Status recv(void *out, size_t count, DType dtype, int peer,
              cudaStream_t stream) override {
    auto t = ncclTypeOf(dtype);
    if (!t)
      return t.status();
    BRAID_NCCL_CHECK(ncclRecv(out, count, *t, peer, comm_.get(), stream));
    return Status::ok();
  }

  Status asyncError() override {
    ncclComm_t c = comm_.get();
    ncclResult_t async = ncclSuccess;
    if (c && ncclCommGetAsyncError(c, &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress) {
      std::string detail = ncclGetLastError(c);
      return errorf("NCCL asynchronous error: ", ncclGetErrorString(async),
                    detail.empty() ? "" : " (" + detail + ")");
    }
    return Status::ok();
  }
  void abort() override {
    if (comm_)
      (void)ncclCommAbort(comm_.release());
  }

private:
  NcclComm comm_; // ncclCommDestroy when not aborted
  int size_;
};

} // namespace

Expected<std::unique_ptr<DeviceComm>>
cuda::createNcclComm(const ncclUniqueId &id, int size, int rank) {
  NcclComm comm;
  BRAID_NCCL_CHECK(ncclCommInitRank(comm.out(), size, id, rank));
  return std::unique_ptr<DeviceComm>(
      std::make_unique<NcclDeviceComm>(std::move(comm), size));
}

NcclAbortBatch::NcclAbortBatch() : open_(ncclGroupStart() == ncclSuccess) {}

NcclAbortBatch::~NcclAbortBatch() {
  if (open_)
    (void)ncclGroupEnd();
}
