//===- InputFile.h - Read a tool's input file with a bound ------*- C++ -*-===//
//
// Every file a compiler tool reads from its command line (braid-opt's and
// braid-translate's input, the config.json of braid-import and
// braid-compile) is read here, so that an endless or huge input is an error
// naming the file instead of `LLVM ERROR: out of memory`:
//
// - "-" is stdin, read as a stream of at most `maxBytes` bytes;
// - a path is stat()ed before it is opened: a regular file must be at most
//   `maxBytes` long (checked before reading it); a pipe (a FIFO,
//   `braid-import <(...)`, `/dev/stdin` on a pipe) is read like stdin; a
//   directory, a device (`/dev/zero`) or a socket is refused.
//
// A FIFO with no writer blocks in open() as it blocks `cat`; the runtime's
// loader, which maps plans, refuses FIFOs instead (runtime/PlanLoader.h).
//
// LLVM Support only, in the frontend room so that both the importer and the
// tools (which depend on it) share it.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FRONTEND_INPUT_INPUTFILE_H
#define BRAID_FRONTEND_INPUT_INPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Alignment.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <optional>

namespace braid {

/// Largest IR (.mlir text or bytecode) or plan a compiler tool reads: the
/// IR of the largest bundled model after the default pipeline is a few MB.
constexpr uint64_t kMaxIrInputBytes = uint64_t(1) << 30; // 1 GiB
/// Largest config.json: Hugging Face configs are a few KB.
constexpr uint64_t kMaxConfigBytes = uint64_t(16) << 20; // 16 MiB

/// Reads `path` ("-": stdin) whole, refusing what the file comment lists.
/// `what` names the input in messages ("input", "config"). The buffer is
/// null-terminated and named `path` ("<stdin>" for "-").
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, uint64_t maxBytes, llvm::StringRef what,
              std::optional<llvm::Align> alignment = std::nullopt);

/// readInputFile with kMaxIrInputBytes, then, unless the bytes are MLIR
/// bytecode, checkMlirNesting (frontend/input/MlirNesting.h): what braid-opt
/// reads before MLIR parses it.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readMlirInputFile(llvm::StringRef path);

} // namespace braid

#endif // BRAID_FRONTEND_INPUT_INPUTFILE_H
