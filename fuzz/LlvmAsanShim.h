//===- LlvmAsanShim.h - LLVM headers in an ASan build, LLVM libs without --===//
//
// Force-included (-include) into the config fuzzer's sources, which are
// compiled with ASan against Debian's uninstrumented LLVM/MLIR libraries.
// Under ASan, llvm/Support/Compiler.h turns on the manual poisoning in
// header code (BumpPtrAllocator, Recycler): our inlined copy poisons a new
// slab, the library's copy of Allocate() hands out pieces of it without
// unpoisoning, and ASan reports a use-after-poison inside MLIR. Manual
// poisoning only helps when every user is instrumented, so it is turned
// off here; ASan's own checks (heap, stack, globals) stay on.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FUZZ_LLVMASANSHIM_H
#define BRAID_FUZZ_LLVMASANSHIM_H
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define __asan_poison_memory_region(addr, size) ((void)(addr), (void)(size))
#define __asan_unpoison_memory_region(addr, size) ((void)(addr), (void)(size))
#endif
#endif

// Pass statistics: without NDEBUG, llvm::Statistic is TrackingStatistic
// (a name, counters and an `Initialized` flag); Debian's libraries are
// built with NDEBUG, where it is NoopStatistic, so mlir::Pass::Statistic's
// constructor in libMLIR leaves our view's fields unset (UBSan: a bool of
// 190 at a pass's `++statistic`). Our sources see the libraries' layout;
// our own asserts stay live.
#ifndef NDEBUG
#define NDEBUG
#include "llvm/ADT/Statistic.h"
#undef NDEBUG
#endif

#endif // BRAID_FUZZ_LLVMASANSHIM_H
