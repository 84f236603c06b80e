#include "trainq/status.h"

#include <cerrno>
#include <cstring>

namespace trainq {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalid:
      return "invalid";
    case Code::kNotFound:
      return "not_found";
    case Code::kConflict:
      return "conflict";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kIo:
      return "io";
    case Code::kNoSpace:
      return "no_space";
    case Code::kInternal:
      return "internal";
    case Code::kPermission:
      return "permission";
    case Code::kUnauthenticated:
      return "unauthenticated";
  }
  return "internal";
}

int ExitCodeFor(Code code) {
  switch (code) {
    case Code::kOk:
      return 0;
    case Code::kInvalid:
      return 2;
    case Code::kNotFound:
      return 3;
    case Code::kPermission:
    case Code::kUnauthenticated:
      return 4;
    default:
      return 1;
  }
}

int HttpStatusFor(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalid:
      return 400;
    case Code::kNotFound:
      return 404;
    case Code::kPermission:
      return 403;
    case Code::kUnauthenticated:
      return 401;
    case Code::kConflict:
      return 409;
    case Code::kUnavailable:
      return 503;
    case Code::kNoSpace:
      return 507;  // Insufficient Storage
    default:
      return 500;
  }
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status ErrnoStatus(const std::string& what, int err) {
  std::string message = what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return Status::NoSpace(std::move(message));
  return Status::Io(std::move(message));
}

}  // namespace trainq
