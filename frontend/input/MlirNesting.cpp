//===- MlirNesting.cpp - Bound MLIR text nesting before parsing -----------===//
#include "frontend/input/MlirNesting.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <vector>

using namespace braid;
using llvm::StringRef;

namespace {
bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isLetter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
/// Characters of identifiers, keywords and numbers (bare-id, suffix-id,
/// `4x8xf32`, `0x1F`, `1.5e`).
bool isWordChar(char c) {
  return isLetter(c) || isDigit(c) || c == '_' || c == '$' || c == '.';
}
/// Whether a token ending in `c` ends an operand, so that a `-` after it is
/// binary (`d0 - 1`, `(d0) - 1`) rather than unary (`[-1`, `, -d0`).
bool endsOperand(char c) { return isWordChar(c) || c == ')' || c == ']'; }

/// The scanner's state; see MlirNesting.h for what counts as a level.
class Scanner {
public:
  Scanner(StringRef text, unsigned limit) : text_(text), limit_(limit) {
    ops_.push_back(0);
  }

  MlirNestingScan run() {
    size_t n = text_.size();
    size_t i = 0;
    while (i < n && !stop_) {
      char c = text_[i];
      if (isSpace(c)) {
        ++i;
        continue;
      }
      if (c == '/' && i + 1 < n && text_[i + 1] == '/') {
        i = skipLine(i);
        continue;
      }
      if (c != '-')
        unaryRun_ = 0;
      // At the top level, an operation starting ends an alias definition
      // (which may span lines: `#a = dense<1>\n  : tensor<1xi32>`).
      if (depth_ == 0 && !defining_.empty() && startsOperation(c))
        endDefinition();
      if (c == '"') {
        i = skipString(i);
        prev_ = '"';
        continue;
      }
      if (c == '#' || c == '!') {
        i = alias(i);
        continue;
      }
      if (c == '%' || c == '^' || c == '@') {
        // SSA names, block labels and symbols are no keywords.
        size_t j = i + 1;
        while (j < n && isWordChar(text_[j]))
          ++j;
        prev_ = j > i + 1 ? 'a' : c;
        i = j;
        continue;
      }
      if (isWordChar(c)) {
        size_t j = i;
        while (j < n && isWordChar(text_[j]))
          ++j;
        StringRef word = text_.slice(i, j);
        if ((word == "floordiv" || word == "ceildiv" || word == "mod") &&
            endsOperand(prev_))
          binaryOperator(i);
        prev_ = text_[j - 1];
        i = j;
        continue;
      }
      switch (c) {
      case '[':
      case '{':
      case '(':
      case '<':
        ++depth_;
        ops_.push_back(0);
        reach(level(), i);
        break;
      case ']':
      case '}':
      case ')':
        close();
        break;
      case '>':
        if (!isComparison(i))
          close();
        break;
      case ',':
        endExpression();
        break;
      case '-':
        if (i + 1 < n && text_[i + 1] == '>') { // `->`
          prev_ = '>';
          i += 2;
          continue;
        }
        if (isExponentSign(i))
          break;
        if (endsOperand(prev_)) {
          binaryOperator(i);
        } else {
          ++unaryRun_;
          reach(level() + unaryRun_, i);
        }
        break;
      case '+':
      case '*':
        if (!isExponentSign(i) && endsOperand(prev_))
          binaryOperator(i);
        break;
      default:
        break;
      }
      prev_ = c;
      ++i;
    }
    return result_;
  }

private:
  /// Brackets open here plus operators before here in open expressions.
  uint64_t level() const { return depth_ + opsSum_; }

  void reach(uint64_t level, size_t at) {
    if (!defining_.empty())
      definingMax_ = std::max(definingMax_, level);
    if (level > result_.maxDepth) {
      result_.maxDepth = std::min<uint64_t>(level, uint64_t(limit_) + 1);
      result_.offset = at;
    }
    if (level > limit_)
      stop_ = true;
  }

  void binaryOperator(size_t at) {
    ++ops_.back();
    ++opsSum_;
    reach(level(), at);
  }
  void endExpression() {
    opsSum_ -= ops_.back();
    ops_.back() = 0;
  }
  void close() {
    if (depth_ == 0)
      return; // unbalanced: the parser reports it
    endExpression();
    ops_.pop_back();
    --depth_;
  }

  size_t skipLine(size_t i) const {
    while (i < text_.size() && text_[i] != '\n')
      ++i;
    return i;
  }
  /// Past the string literal at `i`; an unterminated one ends at the line
  /// end, as MLIR's lexer ends it.
  size_t skipString(size_t i) const {
    size_t n = text_.size();
    for (++i; i < n; ++i) {
      if (text_[i] == '\\') {
        ++i;
        continue;
      }
      if (text_[i] == '"')
        return i + 1;
      if (text_[i] == '\n')
        return i;
    }
    return n;
  }
  /// `>` followed by `=` is the `>=` of an affine constraint (MLIR also
  /// accepts `> =`), not a closing bracket.
  bool isComparison(size_t i) const {
    size_t j = i + 1;
    while (j < text_.size() && isSpace(text_[j]))
      ++j;
    return j < text_.size() && text_[j] == '=';
  }
  /// The sign of a float's exponent: `1.0e-05`, `2E+3`.
  bool isExponentSign(size_t i) const {
    return i >= 2 && (text_[i - 1] == 'e' || text_[i - 1] == 'E') &&
           (isDigit(text_[i - 2]) || text_[i - 2] == '.');
  }
  /// Whether the top-level token starting with `c` begins an operation
  /// rather than continuing the value of an alias definition.
  bool startsOperation(char c) const {
    if (c == '%' || c == '^')
      return true;
    // `#a = 1 : i32` then `module {`: a word or string right after the end
    // of a value (not after `=`, `:` or `::`).
    return (isWordChar(c) || c == '"') &&
           (endsOperand(prev_) || prev_ == '>' || prev_ == '}' || prev_ == '"');
  }

  /// `#name`/`!name` at `i`: an alias definition at the top level
  /// (`#name =`), else a use that reaches the definition's levels.
  size_t alias(size_t i) {
    size_t n = text_.size(), j = i + 1;
    while (j < n && isWordChar(text_[j]))
      ++j;
    StringRef name = text_.slice(i, j);
    if (j == i + 1) { // `#-}` ends file metadata; a lone `!` is no alias
      prev_ = text_[i];
      return j;
    }
    prev_ = 'a';
    if (depth_ == 0) {
      size_t k = j;
      while (k < n && isSpace(text_[k]))
        ++k;
      if (k < n && text_[k] == '=' && !(k + 1 < n && text_[k + 1] == '=')) {
        endDefinition();
        defining_ = name;
        definingMax_ = 0;
        prev_ = '=';
        return k + 1;
      }
    }
    auto it = aliases_.find(name);
    if (it != aliases_.end())
      reach(level() + it->second, i);
    return j;
  }
  void endDefinition() {
    if (defining_.empty())
      return;
    aliases_[defining_] = definingMax_;
    defining_ = StringRef();
    definingMax_ = 0;
  }

  StringRef text_;
  unsigned limit_;
  MlirNestingScan result_;
  bool stop_ = false;
  uint64_t depth_ = 0;
  std::vector<uint64_t> ops_; // operators per open expression, by depth
  uint64_t opsSum_ = 0;
  uint64_t unaryRun_ = 0;
  char prev_ = '\0';                  // last character of the previous token
  llvm::StringMap<uint64_t> aliases_; // levels of each alias defined so far
  StringRef defining_;                // alias being defined
  uint64_t definingMax_ = 0;
};
} // namespace

MlirNestingScan braid::scanMlirNesting(StringRef text, unsigned limit) {
  return Scanner(text, limit).run();
}

void braid::lineAndColumn(StringRef text, size_t offset, size_t &line,
                          size_t &column) {
  StringRef before = text.take_front(offset);
  line = 1 + size_t(std::count(before.begin(), before.end(), '\n'));
  size_t lastNewline = before.rfind('\n');
  column = lastNewline == StringRef::npos ? offset + 1 : offset - lastNewline;
}

llvm::Error braid::checkMlirNesting(StringRef text, StringRef source,
                                    unsigned maxDepth) {
  MlirNestingScan scan = scanMlirNesting(text, maxDepth);
  if (scan.maxDepth <= maxDepth)
    return llvm::Error::success();
  size_t line = 0, column = 0;
  lineAndColumn(text, scan.offset, line, column);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 source + ":" + llvm::Twine(line) + ":" +
                                     llvm::Twine(column) + ": " +
                                     mlirNestingMessage(maxDepth));
}

std::string braid::mlirNestingMessage(unsigned maxDepth) {
  return "MLIR text nests deeper than " + std::to_string(maxDepth) +
         " levels (brackets, alias uses and affine operators); MLIR's "
         "parser recurses once per level";
}
