#include "src/core/auth.h"

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
  if (c.token.empty()) return fmt::format("user {}", c.user);
  return fmt::format("token '{}' (user {}, role {})", c.token, c.user, RoleName(c.role));
}

}  // namespace

Status Authorize(const Caller& caller, Action action, const std::string& owner,
                 std::string_view what, int64_t job) {
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

}  // namespace trainq
