//===- CostFiles.h - Read a target or calibration file with a bound -*- C++ -*-===//
//
// Target JSON and calibration CSV files come from the command line
// (`--braid-estimate="target=... calibration=..."`). A device such as
// /dev/zero would be read until memory runs out (`LLVM ERROR: out of
// memory`), so the type and size are checked before anything is read.
// Both files are a few KB; pipes are refused too (nothing here needs one).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_COST_COSTFILES_H
#define BRAID_PASSES_COST_COSTFILES_H

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>

namespace braid::cost {

/// Largest target or calibration file read.
constexpr uint64_t kMaxCostFileBytes = uint64_t(16) << 20; // 16 MiB

/// The contents of regular file `path`; `what` ("target", "calibration")
/// starts the error messages.
inline llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readCostFile(llvm::StringRef path, llvm::StringRef what) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot read " + what + " '" + path +
                                       "': " + why);
  };
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st))
    return fail(ec.message());
  if (!llvm::sys::fs::is_regular_file(st))
    return fail(llvm::sys::fs::is_directory(st) ? "it is a directory"
                                                : "it is not a regular file");
  if (st.getSize() > kMaxCostFileBytes)
    return fail("it is " + llvm::Twine(st.getSize()) +
                " bytes, more than the limit of " +
                llvm::Twine(kMaxCostFileBytes));
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail(buffer.getError().message());
  return std::move(*buffer);
}

} // namespace braid::cost

#endif // BRAID_PASSES_COST_COSTFILES_H
