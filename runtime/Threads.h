//===- Threads.h - Run one body per rank on threads, never abort -*- C++
//-*-===//
//
// std::thread's constructor throws std::system_error when the process is
// out of threads or memory, and a std::vector of joinable threads that
// unwinds calls std::terminate. runOnThreads turns that into a Status. The
// bodies start only once every thread exists, so when one cannot be
// started none has run yet: no rank is left waiting in a collective (or an
// NCCL initialization) for a rank that never came.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_THREADS_H
#define BRAID_RUNTIME_THREADS_H

#include "runtime/Status.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace braid::rt {

/// Starts a thread running `body`; tests replace it to simulate failure.
using ThreadStarter = std::function<std::thread(std::function<void()> body)>;

inline std::thread startThread(std::function<void()> body) {
  return std::thread(std::move(body));
}

/// Runs body(i) for every i in [0, n), each on its own thread, and joins
/// them all. When a thread cannot be started, no body runs and the error
/// names `what` ("rank threads") and the reason.
inline Status runOnThreads(size_t n, const std::function<void(size_t)> &body,
                           const char *what,
                           const ThreadStarter &start = startThread) {
  std::mutex mu;
  std::condition_variable cv;
  enum class Gate { Closed, Run, Cancel } gate = Gate::Closed;
  std::vector<std::thread> threads;
  Status failure;
  try {
    threads.reserve(n);
    for (size_t i = 0; i < n; ++i)
      threads.push_back(start([&, i] {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return gate != Gate::Closed; });
          if (gate == Gate::Cancel)
            return;
        }
        body(i);
      }));
  } catch (const std::exception &e) { // std::system_error, std::bad_alloc
    failure = errorf("cannot start ", what, ": started ", threads.size(),
                     " of ", n, " (", e.what(), ")");
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    gate = failure.isOk() ? Gate::Run : Gate::Cancel;
  }
  cv.notify_all();
  for (std::thread &t : threads)
    if (t.joinable())
      t.join();
  return failure;
}

/// Runs body(begin, end) over [0, count) cut into at most `parts` even
/// ranges, one thread each, and joins them; on the caller's thread alone,
/// body(0, count), when one part is asked for or threads cannot be started
/// (then no thread's body has run). For work whose result does not depend
/// on the split.
inline void
splitAcrossThreads(int64_t count, int64_t parts,
                   const std::function<void(int64_t, int64_t)> &body,
                   const char *what) {
  parts = std::min(parts, count);
  if (parts <= 1 || !runOnThreads(
                        size_t(parts),
                        [&](size_t i) {
                          body(count * int64_t(i) / parts,
                               count * int64_t(i + 1) / parts);
                        },
                        what))
    body(0, count);
}

/// One persistent thread per rank for a runner's steps: a decode step lasts
/// about a millisecond, and starting a thread per rank per step (tens of
/// microseconds each, and a cold CUDA thread state) showed in the wall
/// clock. run(body) runs body(0) on the caller's thread and hands body(i)
/// to worker i for i >= 1; it returns when all are done. A worker spins
/// briefly for its next step before it sleeps.
class RankThreads {
public:
  /// Starts n - 1 workers (none for n <= 1); an error, with nothing left
  /// running, when one cannot be started.
  static Expected<std::unique_ptr<RankThreads>>
  start(size_t n, const char *what,
        const ThreadStarter &starter = startThread) {
    std::unique_ptr<RankThreads> t(new RankThreads(n));
    try {
      t->threads_.reserve(n);
      for (size_t i = 1; i < n; ++i)
        t->threads_.push_back(starter([p = t.get(), i] { p->work(i); }));
    } catch (const std::exception &e) { // std::system_error, std::bad_alloc
      return errorf("cannot start ", what, ": started ", t->threads_.size(),
                    " of ", n, " (", e.what(), ")");
    }
    return t;
  }
  ~RankThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread &t : threads_)
      if (t.joinable())
        t.join();
  }
  RankThreads(const RankThreads &) = delete;
  RankThreads &operator=(const RankThreads &) = delete;

  size_t size() const { return n_; }

  /// body(i) for every i in [0, size()), i on its own thread; one call at
  /// a time.
  void run(const std::function<void(size_t)> &body) {
    if (n_ == 0)
      return;
    if (n_ > 1) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        body_ = &body;
        pending_ = n_ - 1;
        generation_.fetch_add(1);
      }
      cv_.notify_all();
    }
    // A body that throws: the others still finish before `body` goes
    // away, then the first exception is rethrown here.
    std::exception_ptr failure;
    try {
      body(0);
    } catch (...) {
      failure = std::current_exception();
    }
    if (n_ > 1) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return pending_ == 0; });
      body_ = nullptr;
      if (!failure)
        failure = std::exchange(workerFailure_, nullptr);
      workerFailure_ = nullptr;
    }
    if (failure)
      std::rethrow_exception(failure);
  }

private:
  explicit RankThreads(size_t n) : n_(n) {}

  void work(size_t i) {
    uint64_t seen = 0;
    for (;;) {
      // Spin a little first: the next step usually follows at once.
      auto spinUntil =
          std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (generation_.load() == seen && !stop_.load() &&
             std::chrono::steady_clock::now() < spinUntil)
        std::this_thread::yield();
      const std::function<void(size_t)> *body = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock,
                 [&] { return stop_.load() || generation_.load() != seen; });
        if (stop_)
          return;
        seen = generation_.load();
        body = body_;
      }
      std::exception_ptr failure;
      try {
        (*body)(i);
      } catch (...) {
        failure = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (failure && !workerFailure_)
          workerFailure_ = failure;
        if (--pending_ == 0)
          done_.notify_all();
      }
    }
  }
  size_t n_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  const std::function<void(size_t)> *body_ = nullptr;
  size_t pending_ = 0;
  std::exception_ptr workerFailure_; // the first a worker's body threw
  // Written under mu_ (for the condition variables), read by spinning
  // workers without it.
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_THREADS_H
