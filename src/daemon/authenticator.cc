#include "src/daemon/authenticator.h"

#include <unistd.h>

#include <fmt/format.h>

#include "src/os/crypto/token_crypto.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {

namespace {

constexpr char kHowTo[] =
    "; an admin makes one with 'trainq token create' (docs/operations.md, \"Tokens\")";

}  // namespace

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
  if (cluster_key_ && req.authorization.rfind(ClusterKey::kPeerScheme, 0) == 0) {
    Result<std::string> node = cluster_key_->VerifyPeer(req.authorization, clock_.Now(), req.method,
                                                        CanonicalTarget(req.path, req.query));
    if (!node.ok()) return node.status();
    return Caller{"", -1, Role::kRead, "", *node};
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
  if (cluster_key_ && !cluster_key_->VerifyToken(t)) {
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
  if (uid == 0 || uid == static_cast<int64_t>(::geteuid())) return PeerRank::kOwner;
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
