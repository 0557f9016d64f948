// Status and Expected<T>: error values for everything a user can cause
// (bad model file, bad request, missing file). Bugs use TANDEM_CHECK instead.
//
// A Status is either OK or carries a code and a human-readable message that
// names what is wrong (the file, the tensor, the field). Cheap to move; the
// OK status holds no allocation. Thread-compatible (no shared state).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tandem {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // malformed input: request field, model file, template
  kNotFound,            // missing file, tensor, model id
  kOutOfRange,          // offsets, positions, sizes beyond limits
  kUnimplemented,       // a feature tandem does not support (yet)
  kResourceExhausted,   // KV cache full, out of memory
  kFailedPrecondition,  // called in the wrong state
  kIo,                  // the operating system refused (open, mmap, read)
  kInternal,            // a bug surfaced as a value at a boundary
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : rep_(code == StatusCode::kOk ? nullptr : std::make_shared<const Rep>(Rep{code, std::move(message)})) {
  }

  static Status Ok() { return Status(); }
  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "InvalidArgument: message" or "OK".
  std::string to_string() const;

  // Returns a copy whose message is "context: message"; OK stays OK.
  Status with_context(const std::string& context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Expected<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Expected(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Expected built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Expected*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Expected*>(this)->checked(); }
  T& operator*() & { return checked(); }
  T&& operator*() && { return std::move(checked()); }
  const T& operator*() const& { return const_cast<Expected*>(this)->checked(); }

 private:
  T& checked() {
    if (!ok()) {
      std::fprintf(stderr, "tandem: value() on error: %s\n", std::get<Status>(v_).to_string().c_str());
      std::abort();
    }
    return std::get<T>(v_);
  }
  std::variant<T, Status> v_;
};

}  // namespace tandem

// Propagate a non-OK Status from an expression returning Status.
#define TANDEM_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::tandem::Status tandem_status_ = (expr);        \
    if (!tandem_status_.ok()) return tandem_status_; \
  } while (0)

#define TANDEM_CONCAT_INNER_(a, b) a##b
#define TANDEM_CONCAT_(a, b) TANDEM_CONCAT_INNER_(a, b)
// TANDEM_ASSIGN_OR_RETURN(auto x, expr_returning_expected);
#define TANDEM_ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(TANDEM_CONCAT_(tandem_expected_, __LINE__), lhs, expr)
#define TANDEM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
