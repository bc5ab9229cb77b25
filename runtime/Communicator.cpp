//===- Communicator.cpp - Thread rendezvous for CPU collectives -----------===//
#include "runtime/Communicator.h"

using namespace braid::rt;

Communicator::Communicator(int worldSize, std::chrono::milliseconds timeout)
    : worldSize_(worldSize), timeout_(timeout) {}

void Communicator::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

Expected<std::vector<Bytes>> Communicator::exchange(int64_t key, int size,
                                                    int rank, Bytes mine) {
  std::unique_lock<std::mutex> lock(mu_);
  Rendezvous &rv = rendezvous_[key];
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  // A fast rank may arrive for the next round while slow ranks still read
  // this one's slots: wait until the previous round has fully drained.
  if (!cv_.wait_until(lock, deadline, [&] { return aborted_ || !rv.ready; }))
    return errorf("collective on instance ", key, " timed out (rank ", rank,
                  " waiting for the previous round to drain)");
  if (aborted_)
    return errorf("collective aborted: another rank failed");
  if (rv.slots.size() != size_t(size))
    rv.slots.assign(size_t(size), Bytes());
  rv.slots[size_t(rank)] = std::move(mine);
  if (++rv.arrived == size) {
    rv.ready = true;
    cv_.notify_all();
  }
  if (!cv_.wait_until(lock, deadline, [&] { return aborted_ || rv.ready; }))
    return errorf("collective on instance ", key, " timed out: rank ", rank,
                  " waited for ", size - rv.arrived,
                  " more ranks (mismatched collectives?)");
  if (aborted_)
    return errorf("collective aborted: another rank failed");
  std::vector<Bytes> all = rv.slots;
  if (++rv.departed == size) {
    rv.arrived = rv.departed = 0;
    rv.ready = false;
    rv.slots.clear();
    cv_.notify_all();
  }
  return all;
}

Status Communicator::send(int64_t key, int src, int dst, Bytes data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_)
    return errorf("send aborted: another rank failed");
  mailboxes_[{key, src, dst}].push_back(std::move(data));
  cv_.notify_all();
  return Status::ok();
}

Expected<Bytes> Communicator::recv(int64_t key, int src, int dst) {
  std::unique_lock<std::mutex> lock(mu_);
  auto &box = mailboxes_[{key, src, dst}];
  if (!cv_.wait_for(lock, timeout_, [&] { return aborted_ || !box.empty(); }))
    return errorf("recv by rank ", dst, " from rank ", src,
                  " timed out (no matching send)");
  if (aborted_)
    return errorf("recv aborted: another rank failed");
  Bytes data = std::move(box.front());
  box.pop_front();
  return data;
}
