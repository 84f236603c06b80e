// Who is asking and what they may do: the daemon's authorisation, as pure decisions.
// Identities come from the Unix socket's peer credentials (SO_PEERCRED) or from a bearer
// token on TCP; see docs/operations.md, "A shared server" and "Remote access".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq {

// What a token (or a socket user) may do, each role including the one before.
//   read:   jobs, GPUs, nodes, metrics; the logs of its own user's jobs
//   submit: also submit, and cancel and retry its own user's jobs (they run as that user)
//   admin:  everything, every user's jobs, tokens, config, daemon
// A node of the cluster reads jobs and logs, and the steps of the parts it runs (Caller::node).
enum class Role { kRead, kSubmit, kAdmin };

std::string_view RoleName(Role r);  // "read", "submit", "admin"
std::optional<Role> ParseRole(std::string_view name);

struct Caller {
  std::string user;  // the login name jobs run as and are owned by
  int64_t uid = -1;  // -1 for a token's caller
  Role role = Role::kRead;
  std::string token;  // the token's name; "" on the Unix socket
  // Another node of the cluster, by its signed request (src/daemon/cluster_key.h): it may
  // read logs (kReadLog) and nothing else; `user` is empty.
  std::string node;
};

// What a request does, for Authorize.
enum class Action {
  kRead,       // list/show jobs, GPUs, status, explain, config show
  kReadLog,    // a job's output: its owner's or an admin's
  kSubmit,     // new jobs (owned by the caller)
  kChangeJob,  // cancel, retry: the job's owner (with submit) or an admin
  kStep,       // a batch script's steps: as kChangeJob; a node for the part it holds
  kAdmin,      // config set, tokens, daemon stop/backup
};

// Ok, or kPermission with the sentence a user reads, e.g. "job 12 belongs to ada; only ada
// or an admin may cancel it". `owner` is the job's user (kReadLog, kChangeJob); `what` the
// verb shown ("cancel", "retry", "read the log of", ...) and `job` its id.
Status Authorize(const Caller& caller, Action action, const std::string& owner = "",
                 std::string_view what = "", int64_t job = 0);

// The token of an Authorization header "Bearer TOKEN" (RFC 6750): the scheme in any case,
// one space or more, then a b64token (letters, digits, - . _ ~ + /, then '=' padding) and
// nothing after it. kUnauthenticated otherwise; the message never contains the header's text,
// which may hold a secret.
Result<std::string> ParseBearer(std::string_view header);

// A token's name: 1 to 64 of A-Z a-z 0-9 . _ -. kInvalid naming `name` and that form.
Status CheckTokenName(std::string_view name);

}  // namespace trainq
