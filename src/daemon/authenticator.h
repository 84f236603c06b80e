// Who sent a request: a bearer token's record over TCP, a peer node's signature in a cluster,
// the peer's uid on the Unix socket (docs/architecture.md, "Authentication"). What each
// caller may then do is decided per route with Authorize (src/core/auth.h).
#pragma once

#include <cstdint>

#include "src/api/http.h"
#include "src/core/auth.h"
#include "src/daemon/cluster_key.h"
#include "src/daemon/config.h"
#include "src/os/clock.h"
#include "src/store/store.h"
#include "trainq/status.h"

namespace trainq {

class Authenticator {
 public:
  // `cluster_key`: the cluster's key where the store is a cluster's, else null (tokens are
  // then not signed and no peer node calls). Everything given outlives the object; `config`
  // is read at each call (run-time settings change it).
  Authenticator(Store& store, const Clock& clock, const Config& config,
                const ClusterKey* cluster_key)
      : store_(store), clock_(clock), config_(config), cluster_key_(cluster_key) {}

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
  const ClusterKey* cluster_key_;
};

}  // namespace trainq
