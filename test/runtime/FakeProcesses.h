//===- FakeProcesses.h - A scripted process of a run -----------*- C++ -*-===//
#ifndef BRAID_TEST_RUNTIME_FAKEPROCESSES_H
#define BRAID_TEST_RUNTIME_FAKEPROCESSES_H

#include "runtime/Bootstrap.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace braid::rt::test {

/// This process is `rank` of a run whose other processes send `others` to
/// every allGather (by rank, this process's slot left empty); `sent`
/// records what this process sent.
class FakeProcesses : public Bootstrap {
public:
  FakeProcesses(int rank, std::vector<std::string> others)
      : rank_(rank), others_(std::move(others)) {}
  int rank() const override { return rank_; }
  int size() const override { return int(others_.size()); }
  int localRank() const override { return 0; }
  Expected<std::vector<std::string>>
  allGather(const std::string &mine) override {
    sent.push_back(mine);
    std::vector<std::string> all = others_;
    all[size_t(rank_)] = mine;
    return all;
  }
  Status broadcast(std::string &, int) override { return Status::ok(); }
  [[noreturn]] void abortAll(int) override { std::abort(); }
  std::vector<std::string> sent;

private:
  int rank_;
  std::vector<std::string> others_;
};

} // namespace braid::rt::test

#endif // BRAID_TEST_RUNTIME_FAKEPROCESSES_H
