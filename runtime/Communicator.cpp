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

Status Communicator::stall() {
  std::unique_lock<std::mutex> lock(mu_);
  // Longer than the peers wait: their timeout, not this, is the failure.
  auto deadline =
      std::chrono::steady_clock::now() + 2 * timeout_ + std::chrono::seconds(1);
  if (!cv_.wait_until(lock, deadline, [&] { return aborted_; }))
    return errorf("stuck on purpose (a test fault) past the timeout");
  return errorf("collective aborted: another rank failed while this one was "
                "stuck on purpose (a test fault)");
}

Expected<std::vector<Bytes>> Communicator::exchange(int64_t key, int stream,
                                                    int size, int rank,
                                                    Contribution mine) {
  std::unique_lock<std::mutex> lock(mu_);
  Rendezvous &rv = rendezvous_[{key, stream}];
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  // A fast rank may arrive for the next round while slow ranks still read
  // this one's slots: wait until the previous round has fully drained.
  if (!cv_.wait_until(lock, deadline, [&] { return aborted_ || !rv.ready; }))
    return errorf("collective on instance ", key, " stream ", stream,
                  " timed out (rank ", rank,
                  " waiting for the previous round to drain)");
  if (aborted_)
    return errorf("collective aborted: another rank failed");
  if (rv.slots.size() != size_t(size))
    rv.slots.assign(size_t(size), Contribution());
  rv.slots[size_t(rank)] = std::move(mine);
  if (++rv.arrived == size) {
    rv.ready = true;
    cv_.notify_all();
  }
  if (!cv_.wait_until(lock, deadline, [&] { return aborted_ || rv.ready; }))
    return errorf("collective on instance ", key, " stream ", stream,
                  " timed out: rank ", rank, " waited for ", size - rv.arrived,
                  " more ranks (mismatched collectives?)");
  if (aborted_)
    return errorf("collective aborted: another rank failed");
  // Every member compares the same slots, so all fail alike.
  const Contribution &first = rv.slots[0];
  std::string mismatch;
  for (const Contribution &c : rv.slots)
    if (mismatch.empty() && c.signature != first.signature)
      mismatch = "collective on instance " + std::to_string(key) + " stream " +
                 std::to_string(stream) +
                 " joins different collectives: world rank " +
                 std::to_string(first.worldRank) + " runs " + first.signature +
                 ", but world rank " + std::to_string(c.worldRank) + " runs " +
                 c.signature;
  std::vector<Bytes> all;
  if (mismatch.empty())
    for (const Contribution &c : rv.slots)
      all.push_back(c.data);
  if (++rv.departed == size) {
    rv.arrived = rv.departed = 0;
    rv.ready = false;
    rv.slots.clear();
    cv_.notify_all();
  }
  if (!mismatch.empty())
    return errorf(mismatch);
  return all;
}

Expected<uint64_t> Communicator::postSend(const Channel &c, Bytes data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_)
    return errorf("send aborted: another rank failed");
  Mailbox &box = mailboxes_[c];
  uint64_t ticket = box.sends++;
  box.messages[ticket] = std::move(data);
  cv_.notify_all();
  return ticket;
}

Status Communicator::awaitTaken(const Channel &c, uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  Mailbox &box = mailboxes_[c];
  if (!cv_.wait_for(lock, timeout_,
                    [&] { return aborted_ || box.recvs > ticket; }))
    return errorf("send by rank ", c.src, " to rank ", c.dst, " on stream ",
                  c.stream,
                  " timed out (no matching receive: a send completes only "
                  "when its receive is issued, as NCCL's does)");
  if (aborted_)
    return errorf("send aborted: another rank failed");
  return Status::ok();
}

Status Communicator::send(const Channel &c, Bytes data) {
  auto ticket = postSend(c, std::move(data));
  if (!ticket)
    return ticket.status();
  return awaitTaken(c, *ticket);
}

Expected<uint64_t> Communicator::postRecv(const Channel &c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_)
    return errorf("recv aborted: another rank failed");
  uint64_t ticket = mailboxes_[c].recvs++;
  cv_.notify_all();
  return ticket;
}

Expected<Bytes> Communicator::awaitReceived(const Channel &c,
                                            uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  Mailbox &box = mailboxes_[c];
  if (!cv_.wait_for(lock, timeout_,
                    [&] { return aborted_ || box.sends > ticket; }))
    return errorf("recv by rank ", c.dst, " from rank ", c.src, " on stream ",
                  c.stream, " timed out (no matching send)");
  if (aborted_)
    return errorf("recv aborted: another rank failed");
  auto it = box.messages.find(ticket);
  Bytes data = std::move(it->second);
  box.messages.erase(it);
  return data;
}

Expected<Bytes> Communicator::recv(const Channel &c) {
  auto ticket = postRecv(c);
  if (!ticket)
    return ticket.status();
  return awaitReceived(c, *ticket);
}
