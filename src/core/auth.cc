#include "src/core/auth.h"

#include <algorithm>

#include <fmt/format.h>

namespace trainq {

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kRead:
      return "read";
    case Role::kSubmit:
      return "submit";
    case Role::kAdmin:
      return "admin";
  }
  return "read";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kRead, Role::kSubmit, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

namespace {

std::string Who(const Caller& c) {
  if (!c.node.empty()) return fmt::format("node {}", c.node);
  if (c.token.empty()) return fmt::format("user {}", c.user);
  return fmt::format("token '{}' (user {}, role {})", c.token, c.user, RoleName(c.role));
}

}  // namespace

Status Authorize(const Caller& caller, Action action, const std::string& owner,
                 std::string_view what, int64_t job) {
  if (!caller.node.empty()) {  // a peer fetching a log for one of its own callers
    // kStep: the handler checks that the node runs the part it asks for.
    if (action == Action::kRead || action == Action::kReadLog || action == Action::kStep) {
      return Status::Ok();
    }
    return Status::Permission(
        fmt::format("{} may only read jobs and their logs; it asked to {}", Who(caller), what));
  }
  if (caller.role == Role::kAdmin) return Status::Ok();
  switch (action) {
    case Action::kRead:
      return Status::Ok();
    case Action::kReadLog:
      if (owner == caller.user) return Status::Ok();
      return Status::Permission(fmt::format("job {} belongs to {}; only {} or an admin may {} it",
                                            job, owner, owner, what));
    case Action::kSubmit:
      if (caller.role == Role::kSubmit) return Status::Ok();
      return Status::Permission(
          fmt::format("{} may only read; submitting needs the role submit or admin", Who(caller)));
    case Action::kChangeJob:
    case Action::kStep:
      if (owner != caller.user) {
        return Status::Permission(fmt::format("job {} belongs to {}; only {} or an admin may {} it",
                                              job, owner, owner, what));
      }
      if (caller.role == Role::kSubmit) return Status::Ok();
      return Status::Permission(fmt::format(
          "{} may only read; to {} job {} needs the role submit or admin", Who(caller), what, job));
    case Action::kAdmin:
      return Status::Permission(
          fmt::format("{} is not an admin; only an admin may {}", Who(caller), what));
  }
  return Status::Permission("not allowed");
}

namespace {

bool IsAsciiAlnum(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

bool IsB64TokenChar(char ch) {
  return IsAsciiAlnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '+' ||
         ch == '/';
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// A b64token: one character of the set or more, then '=' padding only.
bool IsB64Token(std::string_view t) {
  size_t i = 0;
  while (i < t.size() && IsB64TokenChar(t[i])) ++i;
  if (i == 0) return false;
  while (i < t.size() && t[i] == '=') ++i;
  return i == t.size();
}

}  // namespace

Result<std::string> ParseBearer(std::string_view header) {
  constexpr std::string_view kForm = "; send 'Authorization: Bearer TOKEN'";
  size_t space = header.find(' ');
  if (space == std::string_view::npos || !IEquals(header.substr(0, space), "bearer")) {
    return Status::Unauthenticated(
        fmt::format("the Authorization header does not use the Bearer scheme{}", kForm));
  }
  std::string_view token = header.substr(space);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (token.empty()) {
    return Status::Unauthenticated(fmt::format("the Authorization header has no token{}", kForm));
  }
  if (!IsB64Token(token)) {
    return Status::Unauthenticated(fmt::format(
        "the Authorization header's token is malformed (letters, digits, - . _ ~ + / and "
        "trailing =, nothing after it){}",
        kForm));
  }
  return std::string(token);
}

Status CheckTokenName(std::string_view name) {
  bool ok =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
        return IsAsciiAlnum(ch) || ch == '.' || ch == '_' || ch == '-';
      });
  if (ok) return Status::Ok();
  return Status::Invalid(
      "name: expected 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-', e.g. ada-laptop");
}

}  // namespace trainq
