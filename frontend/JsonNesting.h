//===- JsonNesting.h - Bound JSON nesting before llvm::json -----*- C++ -*-===//
//
// llvm::json::parse recurses once per nested array or object, so a file of
// 40,000 `[` overflows the stack. Every JSON file a tool reads from a user
// (a model config.json, a hardware target) is pre-scanned here first: a
// linear pass over the bytes that counts brackets outside strings and stops
// at the first level past the bound, with an error naming where.
//
// Header-only (LLVM Support only) so that the frontend and the cost model's
// target reader share it without a library dependency.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FRONTEND_JSONNESTING_H
#define BRAID_FRONTEND_JSONNESTING_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstddef>

namespace braid {

/// Deepest nesting of arrays and objects a config or target may have. Real
/// files nest a handful of levels (a Hugging Face config with a
/// `text_config`, a target's `[[min_dim, efficiency], ...]`).
constexpr unsigned kMaxJsonNesting = 64;

/// Fails when `json` nests arrays/objects deeper than `maxDepth`, naming
/// `source`, the line and the column of the bracket that goes too deep.
/// Anything else (even malformed JSON) is left to the parser.
inline llvm::Error checkJsonNesting(llvm::StringRef json,
                                    llvm::StringRef source,
                                    unsigned maxDepth = kMaxJsonNesting) {
  unsigned depth = 0;
  size_t line = 1, column = 0;
  bool inString = false, escaped = false;
  for (char c : json) {
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
    }
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    switch (c) {
    case '"':
      inString = true;
      break;
    case '[':
    case '{':
      if (++depth > maxDepth)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            source + ":" + llvm::Twine(line) + ":" + llvm::Twine(column) +
                ": JSON nests arrays and objects deeper than " +
                llvm::Twine(maxDepth) + " levels");
      break;
    case ']':
    case '}':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return llvm::Error::success();
}

} // namespace braid

#endif // BRAID_FRONTEND_JSONNESTING_H
