#include "src/daemon/authenticator.h"

#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "src/os/crypto/token_crypto.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {

namespace {

constexpr char kHowTo[] =
    "; an admin makes one with 'trainq token create' (docs/operations.md, \"Tokens\")";

// The caller as Authorize's refusals name it.
std::string CallerName(const Caller& c) {
  if (c.token.empty()) return fmt::format("user {}", c.user);
  return fmt::format("token '{}' (user {}, role {})", c.token, c.user, RoleName(c.role));
}

// A caller that is not a node, against the row's Who. The roles' own sentences are
// Authorize's (src/core/auth.h).
Status UserMay(const Rule& rule, const Caller& caller, const HttpRequest& req, const Job* job) {
  std::string owner = job ? job->spec.user : "";
  JobId id = job ? job->id : 0;
  switch (rule.who) {
    case Who::kReader:
      return Status::Ok();
    case Who::kJobReader:
      return Authorize(caller, Action::kReadLog, owner, rule.what, id);
    case Who::kSubmitter:
      return Authorize(caller, Action::kSubmit, "", rule.what);
    case Who::kJobOwner:
      return Authorize(caller, Action::kChangeJob, owner, rule.what, id);
    case Who::kOwnJobs:
      if (caller.role != Role::kRead) return Status::Ok();
      return Status::Permission(
          fmt::format("{} may only read; to {} jobs needs the role submit or admin",
                      CallerName(caller), rule.what));
    case Who::kAdmin:
      return Authorize(caller, Action::kAdmin, "", rule.what);
    case Who::kSocketUser:
      if (!req.tcp) return Status::Ok();
      return Status::Permission(
          fmt::format("only a caller on the daemon's socket may {}: run trainq on the daemon's "
                      "machine",
                      rule.what));
    case Who::kNoUser:
      return Status::Permission(fmt::format(
          "only the nodes of a cluster may {} job {}, with requests signed by the cluster key",
          rule.what, id));
  }
  return Status::Permission("not allowed");
}

// The rank a node's request names (?rank=R): the part it asks about.
std::optional<size_t> RankOf(const HttpRequest& req) {
  auto it = req.query.find("rank");
  if (it == req.query.end()) return std::nullopt;
  const std::string& text = it->second;
  size_t rank = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return rank;
}

// A node's signed request, against the row's PeerMay.
Status NodeMay(PeerMay peer, const Caller& caller, const HttpRequest& req, const Job* job) {
  if (peer == PeerMay::kYes) return Status::Ok();
  if (peer == PeerMay::kNo) {
    return Status::Permission(fmt::format(
        "node {}: a node's request may only read a job's log (GET /v1/jobs/ID/log), the "
        "steps of a part it runs, the GPU history or whether the store is seen, or reach a "
        "session's terminal",
        caller.node));
  }
  const Attempt* a = job ? job->current() : nullptr;
  bool running =
      a != nullptr && (a->state == JobState::kStarting || a->state == JobState::kRunning);
  if (job != nullptr && !running) return Status::Ok();
  std::optional<size_t> rank = RankOf(req);
  if (a != nullptr && rank && *rank >= 1 && *rank < a->parts.size() &&
      a->parts[*rank].node == caller.node) {
    return Status::Ok();
  }
  return Status::Permission(fmt::format("node {} holds no part of job {} attempt {} with that rank",
                                        caller.node, job ? job->id : 0, a ? a->n : 0));
}

}  // namespace

Status Permit(const Rule& rule, const Caller& caller, const HttpRequest& req, const Job* job) {
  if (!caller.node.empty()) return NodeMay(rule.peer, caller, req, job);
  return UserMay(rule, caller, req, job);
}

bool OwnerOrAdmin(const Caller& caller, const Job& job) {
  return caller.node.empty() && Authorize(caller, Action::kReadLog, job.spec.user).ok();
}

Status MayActOn(const Caller& caller, const Job* job, std::string_view what) {
  if (job == nullptr) return Authorize(caller, Action::kAdmin, "", what);
  return Authorize(caller, Action::kChangeJob, job->spec.user, what, job->id);
}

// Looked up on every request: one indexed SQLite read, and a revocation takes effect at once.
// The lookup is by SHA-256 of the token, so its timing tells nothing about a stored token.
Result<Caller> Authenticator::Authenticate(const HttpRequest& req) const {
  if (!req.tcp) {
    int64_t uid = req.peer_uid;
    bool admin = RankOfUid(uid) != PeerRank::kUser;
    return Caller{UserName(uid), uid, admin ? Role::kAdmin : Role::kSubmit, "", ""};
  }
  if (req.authorization.empty()) {
    return Status::Unauthenticated(
        fmt::format("no Authorization header: a request over TCP needs 'Authorization: Bearer "
                    "TOKEN'{}",
                    kHowTo));
  }
  if (std::optional<Result<std::string>> node = trust_.PeerOf(req, clock_.Now())) {
    if (!node->ok()) return node->status();
    return Caller{"", -1, Role::kRead, "", **node};
  }
  Result<std::string> token = ParseBearer(req.authorization);
  if (!token.ok()) return token.status();
  Result<std::optional<TokenRecord>> found = store_.FindTokenByHash(Sha256Hex(*token));
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return Status::Unauthenticated(
        fmt::format("unknown token: this server has no such token{}", kHowTo));
  }
  const TokenRecord& t = **found;
  // In a cluster a token is good only when a node made it: one written into Redis by another
  // hand acts as nobody.
  if (!trust_.MadeByANode(t)) {
    return Status::Unauthenticated(
        fmt::format("token '{}' was not made by a node of this cluster (no valid signature){}",
                    t.name, kHowTo));
  }
  if (t.revoked_at != 0) {
    return Status::Unauthenticated(fmt::format("token '{}' was revoked{}", t.name, kHowTo));
  }
  if (t.expires_at != 0 && clock_.Now() >= t.expires_at) {
    return Status::Unauthenticated(fmt::format("token '{}' has expired{}", t.name, kHowTo));
  }
  return Caller{t.user, -1, t.role, t.name, ""};
}

PeerRank Authenticator::RankOfUid(int64_t uid) const {
  if (uid == 0 || uid == EffectiveUid()) return PeerRank::kOwner;
  return IsAdminUid(uid) ? PeerRank::kAdmin : PeerRank::kUser;
}

bool Authenticator::IsAdminUid(int64_t uid) const {
  if (!config_.shared || config_.admin_group.empty() || uid < 0) return false;
  Result<UserInfo> user = LookupUserById(uid);
  if (!user.ok()) return false;
  Result<bool> member = UserInGroup(*user, config_.admin_group);
  return member.ok() && *member;
}

}  // namespace trainq
