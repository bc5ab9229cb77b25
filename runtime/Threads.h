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

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
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

} // namespace braid::rt

#endif // BRAID_RUNTIME_THREADS_H
