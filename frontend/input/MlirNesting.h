//===- MlirNesting.h - Bound MLIR text nesting before parsing ---*- C++ -*-===//
//
// MLIR's parser recurses once per nested bracket, region, alias level and
// affine operator, and so do the printer and the verifier on what it
// builds: 5,000 nested modules, 8,000 nested `[`, 10,000 unary minuses,
// 20,000 chained aliases (`#a1 = [#a0]`, `#a2 = [#a1]`, ...), 80,000 `+`
// terms or 100,000 `floordiv`s overflow an 8 MB stack (SIGSEGV; measured
// with braid-opt, LLVM 22). Every MLIR text a
// tool reads from a user is pre-scanned here first, as JSON is
// (frontend/JsonNesting.h): one linear pass over the bytes that stops at
// the first level past the bound, with an error naming where.
//
// A level is one of:
// - an open `[`, `{`, `(` or `<` (closed by `]`, `}`, `)`, `>`; `->` and
//   the `>=` of an affine constraint close nothing);
// - one affine operator (`+`, binary `-`, `*`, `floordiv`, `ceildiv`,
//   `mod`) before it in the same expression (a `,` or a closing bracket ends
//   the expression), and one per unary `-` of a run (`- - -d0`);
// - at a use of an alias (`#name`, `!name`), the levels of its definition.
// String literals ("..." with backslash escapes) and `//` comments are
// skipped; a number's exponent sign (`1.0e-05`) is no operator.
//
// Real IR nests a handful of levels; anything that is not MLIR text is left
// to the parser (MLIR bytecode is not scanned: isMlirBytecode).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FRONTEND_INPUT_MLIRNESTING_H
#define BRAID_FRONTEND_INPUT_MLIRNESTING_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid {

/// Deepest nesting an MLIR text may have. The imported and compiled IR of
/// every bundled model and every test input nest fewer than 16 levels; the
/// parser overflows an 8 MB stack past ~5,000 levels of the most expensive
/// kind (nested regions).
constexpr unsigned kMaxMlirNesting = 1000;

struct MlirNestingScan {
  /// Deepest level seen, at most `limit + 1` (the scan stops there).
  uint64_t maxDepth = 0;
  /// Byte offset where `maxDepth` was first reached.
  size_t offset = 0;
};

/// Scans `text` as described above, stopping at the first level past
/// `limit`.
MlirNestingScan scanMlirNesting(llvm::StringRef text,
                                unsigned limit = kMaxMlirNesting);

/// Fails when `text` nests deeper than `maxDepth`, naming `source`, the
/// line and the column where it goes too deep.
llvm::Error checkMlirNesting(llvm::StringRef text, llvm::StringRef source,
                             unsigned maxDepth = kMaxMlirNesting);

/// What checkMlirNesting says after "source:line:column: ".
std::string mlirNestingMessage(unsigned maxDepth);

/// The 1-based line and column of byte `offset` of `text`.
void lineAndColumn(llvm::StringRef text, size_t offset, size_t &line,
                   size_t &column);

/// Whether `bytes` start with MLIR bytecode's magic number ("ML\xEFR").
inline bool isMlirBytecode(llvm::StringRef bytes) {
  return bytes.starts_with(llvm::StringRef("ML\xEFR", 4));
}

} // namespace braid

#endif // BRAID_FRONTEND_INPUT_MLIRNESTING_H
