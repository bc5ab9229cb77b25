//===- LaunchWindow.h - How far eager launches run ahead of the GPU -*- C++
//-*-===//
//
// In eager mode a rank's thread enqueues a whole step before it waits for
// the step's end, and only that wait checks the step timeout, the cancel
// flag and the communicators' errors. CUDA queues about a thousand launches
// per stream; past that, a launch blocks the host until the GPU drains one.
// Behind a collective whose peer never comes the GPU drains nothing, so the
// host would block in a launch forever, never reaching the timeout (a
// graph step is one launch and has no such problem).
//
// The window bounds the lead: every `opsPerMark` ops the executor records a
// mark (one CUDA event per stream the step uses), and before an op it waits,
// with the step's timeout and cancel checks, for the oldest mark once
// `marks` of them are outstanding. The host is then at most
// opsPerMark * marks ops ahead of the GPU, and never less than
// opsPerMark * (marks - 1) ahead while the GPU keeps up: enough launches
// queued that the GPU never starves on a decode step.
//
// Waiting for a mark cannot deadlock ranks that run the same function: a
// mark only covers ops every rank has already enqueued, and a peer that
// waits for its own mark likewise only needs ops this rank enqueued long
// ago. The executor paces only such steps: a pipeline's stages may pair a
// send and its receive far apart in op order, where holding one stage back
// could hold back what its peer waits for. Nor does it wait inside an open
// send/receive group (NCCL issues the members only at the group's end).
//
// No CUDA include: the arithmetic is unit-tested without a GPU
// (test/runtime/LaunchWindowTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CUDA_LAUNCHWINDOW_H
#define BRAID_RUNTIME_CUDA_LAUNCHWINDOW_H

#include <cassert>

namespace braid::rt::cuda {

class LaunchWindow {
public:
  /// 16 ops between marks and 8 marks: at most 128 ops ahead. An op is at
  /// most a few launches (a GEMM and its epilogue, attention's split and
  /// combine, a collective), well inside CUDA's queue.
  static constexpr int defaultOpsPerMark = 16, defaultMarks = 8;

  explicit LaunchWindow(int opsPerMark = defaultOpsPerMark,
                        int marks = defaultMarks)
      : opsPerMark_(opsPerMark), marks_(marks) {
    assert(opsPerMark > 0 && marks > 0);
  }

  /// Mark slots (each holds one event per stream); a mark reuses the slot
  /// of the mark `marks` before it.
  int slots() const { return marks_; }

  /// Before enqueueing an op: the slot of a mark to wait for, or -1. Call
  /// until it returns -1 (once the window is full, one mark at a time).
  int slotToAwait() {
    if (recorded_ - awaited_ < marks_)
      return -1;
    return slotOf(awaited_++);
  }

  /// After enqueueing op `op` (counted from 0 in the step): the slot to
  /// record a new mark in, or -1. When the window is full because waits
  /// were skipped (inside a send/receive group), the new mark replaces the
  /// oldest one: it is later on every stream, so waiting for it later
  /// covers both.
  int slotToRecord(int op) {
    if ((op + 1) % opsPerMark_ != 0)
      return -1;
    if (recorded_ - awaited_ >= marks_)
      ++awaited_;
    return slotOf(recorded_++);
  }

  /// Marks recorded and not yet waited for.
  int outstanding() const { return recorded_ - awaited_; }

private:
  int slotOf(int mark) const { return mark % marks_; }

  int opsPerMark_, marks_;
  int recorded_ = 0, awaited_ = 0;
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_LAUNCHWINDOW_H
