// Errors as values. Our code never throws; a dependency that throws is
// caught at its boundary and turned into a Status.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace trainq {

// Each code maps to one CLI exit code and one HTTP status (see ExitCodeFor/HttpStatusFor).
enum class Code {
  kOk,
  kInvalid,          // bad input from a user: exit 2, HTTP 400
  kNotFound,         // no such job: exit 3, HTTP 404
  kConflict,         // compare-and-set lost, wrong state for the request: exit 1, HTTP 409
  kUnavailable,      // daemon, store or device not reachable now: exit 1, HTTP 503
  kIo,               // file system or database failure: exit 1, HTTP 500
  kNoSpace,          // a disk full or over quota (ENOSPC, EDQUOT, SQLITE_FULL): exit 1, HTTP 507
  kInternal,         // broken invariant: exit 1, HTTP 500
  kPermission,       // not allowed: another user's socket, state dir, file or job: exit 4, HTTP 403
  kUnauthenticated,  // no credentials, or bad, revoked or expired ones: exit 4, HTTP 401
};

const char* CodeName(Code code);  // "invalid", "not_found", ...
int ExitCodeFor(Code code);
int HttpStatusFor(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status Invalid(std::string m) { return {Code::kInvalid, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status Io(std::string m) { return {Code::kIo, std::move(m)}; }
  static Status NoSpace(std::string m) { return {Code::kNoSpace, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Permission(std::string m) { return {Code::kPermission, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid: --mem: ..." for logs.
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none. Never holds an ok Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

// Errno to Status: "what: strerror". kNoSpace for ENOSPC and EDQUOT (the caller may wait
// for space and try again), kIo for the others.
Status ErrnoStatus(const std::string& what, int err);

}  // namespace trainq

#define TRAINQ_RETURN_IF_ERROR(expr) \
  do {                               \
    ::trainq::Status _st = (expr);   \
    if (!_st.ok()) return _st;       \
  } while (0)
