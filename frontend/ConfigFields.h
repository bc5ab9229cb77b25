//===- ConfigFields.h - Typed, checked access to config.json fields -*- C++ -*-===//
//
// Private to frontend/: the readers of ModelConfig.cpp and RopeConfig.cpp.
// Every key a reader looks at is remembered, so the config's remaining keys
// are exactly the ones Braid did not read (refused unless known harmless).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FRONTEND_CONFIGFIELDS_H
#define BRAID_FRONTEND_CONFIGFIELDS_H

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace braid::config {

using llvm::Expected;
using llvm::StringRef;

/// A number as a config would spell it (0.5, 1e-05), for messages.
inline std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

/// Typed, error-reporting access to the fields of one config object.
class Fields {
public:
  /// `prefix` names a nested object in messages ("rope_parameters.").
  Fields(const llvm::json::Object &obj, StringRef source, StringRef prefix = "")
      : obj(obj), source(source), prefix(prefix.str()) {}

  llvm::Error error(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   source + ": " + msg);
  }

  /// Whether `key` is present and not null; either way the key counts as
  /// read (a reader that asks about a key understands it).
  bool has(StringRef key) const {
    read.insert(key);
    const llvm::json::Value *v = obj.get(key);
    return v && v->kind() != llvm::json::Value::Null;
  }

  /// The error for a required field that is absent, or null (which
  /// transformers would pass on as None).
  llvm::Error missing(StringRef key) const {
    const llvm::json::Value *v = obj.get(key);
    return error(v ? "field '" + name(key) + "' is null; it needs a value"
                   : "missing field '" + name(key) + "'");
  }

  /// A positive integer field of at most `max`.
  Expected<int64_t> integer(StringRef key, int64_t max) const {
    if (!has(key))
      return missing(key);
    return positiveInt(key, max);
  }
  Expected<int64_t> integerOr(StringRef key, int64_t def, int64_t max) const {
    if (!has(key))
      return checkBound(key, def, max);
    return positiveInt(key, max);
  }
  /// A count that may be 0 (at most `max`), `def` when absent or null.
  Expected<int64_t> countOr(StringRef key, int64_t def, int64_t max) const {
    if (!has(key))
      return checkBound(key, def, max);
    return positiveInt(key, max, /*allowZero=*/true);
  }
  /// Whether `key` is in the object at all (null included); counts as read.
  bool present(StringRef key) const {
    read.insert(key);
    return obj.get(key) != nullptr;
  }
  /// `value` of field `key` (or, with `derived`, a value computed from
  /// other fields, named by `key`) is at most `max`.
  Expected<int64_t> checkBound(StringRef key, int64_t value, int64_t max,
                               bool derived = false) const {
    if (value > max)
      return error((derived ? key.str() + " is " : "field '" + name(key) + "' is ") +
                   llvm::Twine(value) + "; Braid imports at most " +
                   llvm::Twine(max) + " (see docs/frontend.md)");
    return value;
  }
  Expected<double> number(StringRef key) const {
    if (!has(key))
      return missing(key);
    return positiveNumber(key);
  }
  Expected<double> numberOr(StringRef key, double def) const {
    if (!has(key))
      return def;
    return positiveNumber(key);
  }
  /// As numberOr, but 0 also gives `def` (transformers' `get(key) or def`).
  Expected<double> numberOrIfZero(StringRef key, double def) const {
    if (!has(key))
      return def;
    if (std::optional<double> d = obj.get(key)->getAsNumber(); d && *d == 0.0)
      return def;
    return positiveNumber(key);
  }
  /// `def` when absent; false when null: transformers 4 passes None on and
  /// tests it as a flag (`if config.use_parallel_residual:`), so a null
  /// flag whose default is true runs as false there (transformers 5
  /// refuses the config).
  Expected<bool> booleanOr(StringRef key, bool def) const {
    if (!present(key))
      return def;
    if (!has(key))
      return false;
    if (auto b = obj.get(key)->getAsBoolean())
      return *b;
    return error("field '" + name(key) + "' must be a boolean");
  }
  Expected<std::string> stringOr(StringRef key, StringRef def) const {
    if (!has(key))
      return def.str();
    if (auto s = obj.get(key)->getAsString())
      return s->str();
    return error("field '" + name(key) + "' must be a string");
  }

  /// A number that may be zero or negative (finite).
  Expected<double> anyNumberOr(StringRef key, double def) const {
    if (!has(key))
      return def;
    std::optional<double> d = obj.get(key)->getAsNumber();
    if (!d || !std::isfinite(*d))
      return error("field '" + name(key) + "' must be a finite number");
    return *d;
  }
  /// A nested object, or null when absent.
  Expected<const llvm::json::Object *> objectOr(StringRef key) const {
    if (!has(key))
      return nullptr;
    if (const llvm::json::Object *o = obj.get(key)->getAsObject())
      return o;
    return error("field '" + name(key) + "' must be an object");
  }
  /// An array of strings, empty when absent.
  Expected<std::vector<std::string>> stringsOr(StringRef key) const {
    std::vector<std::string> out;
    if (!has(key))
      return out;
    const llvm::json::Array *a = obj.get(key)->getAsArray();
    if (!a)
      return error("field '" + name(key) + "' must be an array of strings");
    for (const llvm::json::Value &v : *a) {
      std::optional<StringRef> s = v.getAsString();
      if (!s)
        return error("field '" + name(key) + "' must be an array of strings");
      out.push_back(s->str());
    }
    return out;
  }
  /// The keys present (null or not) that no reader asked about, sorted.
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto &kv : obj)
      if (!read.contains(StringRef(kv.first)))
        out.push_back(std::string(StringRef(kv.first)));
    std::sort(out.begin(), out.end());
    return out;
  }
  /// Marks keys as understood without reading them (known harmless).
  void markRead(StringRef key) const { read.insert(key); }
  std::string name(StringRef key) const { return prefix + key.str(); }
  StringRef sourceName() const { return source; }

private:
  Expected<int64_t> positiveInt(StringRef key, int64_t max,
                                bool allowZero = false) const {
    const llvm::json::Value *v = obj.get(key);
    // llvm::json converts a double of 2^63 to int64 (undefined behaviour):
    // refuse numbers that far out before asking for an integer.
    if (std::optional<double> d = v->getAsNumber();
        d && !(std::abs(*d) < 0x1p62))
      return error("field '" + name(key) + "' is " +
                   llvm::formatv("{0}", *v).str() + "; Braid imports at most " +
                   llvm::Twine(max));
    std::optional<int64_t> i = v->getAsInteger();
    if (!i) {
      // Accept 4096.0 but not 4096.5.
      std::optional<double> d = v->getAsNumber();
      if (d && std::floor(*d) == *d && std::abs(*d) < 9e15)
        i = (int64_t)*d;
    }
    if (!i)
      return error("field '" + name(key) + "' must be an integer");
    if (*i < 0 || (*i == 0 && !allowZero))
      return error("field '" + name(key) + "' must be " +
                   (allowZero ? "non-negative" : "positive") + ", got " +
                   llvm::Twine(*i));
    return checkBound(key, *i, max);
  }
  Expected<double> positiveNumber(StringRef key) const {
    std::optional<double> d = obj.get(key)->getAsNumber();
    if (!d)
      return error("field '" + name(key) + "' must be a number");
    if (!(*d > 0.0) || !std::isfinite(*d))
      return error("field '" + name(key) + "' must be positive and finite");
    return *d;
  }

  const llvm::json::Object &obj;
  StringRef source;
  std::string prefix;
  mutable llvm::StringSet<> read;
};

/// Assigns an Expected to `dst` or returns its error from the enclosing
/// function.
#define BRAID_ASSIGN(dst, expr)                                                \
  do {                                                                         \
    auto _v = (expr);                                                          \
    if (!_v)                                                                   \
      return _v.takeError();                                                   \
    dst = *_v;                                                                 \
  } while (0)

} // namespace braid::config

#endif // BRAID_FRONTEND_CONFIGFIELDS_H
