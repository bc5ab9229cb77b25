//===- Status.h - Error type at runtime API boundaries ----------*- C++ -*-===//
//
// One status/expected pair for the whole runtime: no exceptions cross an API
// boundary, every failure carries a message naming what is wrong.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_STATUS_H
#define BRAID_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace braid::rt {

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

/// Concatenates streamable pieces into an error Status.
template <typename... Args> Status errorf(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return Status::error(os.str());
}

/// A value or the Status saying why there is none.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status status) : status_(std::move(status)) {
    assert(!status_.isOk() && "Expected built from an ok Status");
  }
  bool hasValue() const { return value_.has_value(); }
  explicit operator bool() const { return hasValue(); }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  const Status &status() const { return status_; }
  T take() { return std::move(*value_); }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace braid::rt

#define BRAID_RETURN_IF_ERROR(expr)                                            \
  do {                                                                         \
    ::braid::rt::Status braidStatus_ = (expr);                                 \
    if (!braidStatus_.isOk())                                                  \
      return braidStatus_;                                                     \
  } while (0)

#endif // BRAID_RUNTIME_STATUS_H
