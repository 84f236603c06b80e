// Who sent a request: a bearer token's record over TCP, a peer node's signature in a cluster,
// the peer's uid on the Unix socket (docs/architecture.md, "Authentication"). What each
// caller may then do is one row of the route table (routes.h): its Rule, which Permit judges.
#pragma once

#include <cstdint>
#include <string_view>

#include "src/api/http.h"
#include "src/core/auth.h"
#include "src/daemon/config.h"
#include "src/daemon/trust.h"
#include "src/os/clock.h"
#include "src/store/store.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

// Who may call a route, of the callers that are not a node of the cluster. Every caller has
// authenticated: a token, or a user on the Unix socket (a socket user is submit or admin).
enum class Who {
  kReader,      // every caller: read is the least role
  kJobReader,   // the owner of job {id}, whatever its role, or an admin (OwnerOrAdmin)
  kSubmitter,   // role submit or admin
  kJobOwner,    // the owner of job {id} with role submit, or an admin
  kOwnJobs,     // role submit or admin, on the jobs its body names: each by MayActOn
  kAdmin,       // role admin
  kSocketUser,  // a user on the daemon's Unix socket, never a token
  kNoUser,      // no user at all: only a node, where PeerMay lets one
};

// Whether a node of the cluster (a request signed with the cluster key, Caller::node) may.
enum class PeerMay {
  kNo,
  kYes,
  // Only for a part of job {id}'s running attempt placed on that node, named by ?rank=R
  // (never part 0: the first node answers for it itself). A job with no running attempt has
  // no part to guard: the route answers only that it ended.
  kItsPart,
};

// Who may call a route: one row of the route table says it, Permit judges it.
struct Rule {
  Who who;
  PeerMay peer;
  const char* what;  // the verb a refusal names: "cancel", "read the log of", "list tokens"
};

// Ok when `caller` may call a route with `rule`; kPermission with the sentence the caller
// reads otherwise ("job 12 belongs to ada; only ada or an admin may cancel it"). `req` is the
// request (where it came from, its ?rank=); `job` the job of a route with {id}, else null.
Status Permit(const Rule& rule, const Caller& caller, const HttpRequest& req, const Job* job);

// The caller, not a node, is `job`'s owner or an admin: Who::kJobReader, and who sees the
// job's secrets (its --env values, its notify and mail addresses).
bool OwnerOrAdmin(const Caller& caller, const Job& job);

// The rule of a Who::kOwnJobs row, which its handler applies to each job its body names:
// a job of the caller's own user, or any for an admin; `job` null: every user's jobs, an
// admin's alone. kPermission naming the job and `what` otherwise.
Status MayActOn(const Caller& caller, const Job* job, std::string_view what);

class Authenticator {
 public:
  // `trust`: whether tokens carry a node's signature and which peer nodes may call (trust.h).
  // Everything given outlives the object; `config` is read at each call (run-time settings
  // change it).
  Authenticator(Store& store, const Clock& clock, const Config& config, const Trust& trust)
      : store_(store), clock_(clock), config_(config), trust_(trust) {}

  // Over TCP, the bearer token's record, or a peer node (Caller::node) whose signature
  // holds: kUnauthenticated when it is missing, malformed, unknown, unsigned in a cluster,
  // revoked or expired, and the message never holds the token. On the Unix socket, the
  // peer's uid: an admin when it ranks above kUser, submit otherwise.
  Result<Caller> Authenticate(const HttpRequest& req) const;
  // Root and the daemon's own user own it; then admins (IsAdminUid), then everyone else.
  PeerRank RankOfUid(int64_t uid) const;
  // A member of admin_group in shared mode.
  bool IsAdminUid(int64_t uid) const;

 private:
  Store& store_;
  const Clock& clock_;
  const Config& config_;
  const Trust& trust_;
};

}  // namespace trainq
