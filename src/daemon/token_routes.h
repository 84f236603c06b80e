// The token API (docs/api.md, "Tokens"), for admins: POST /v1/tokens makes a token and shows
// it once, GET /v1/tokens lists them without their hashes, DELETE /v1/tokens/NAME revokes
// one. Only the token's SHA-256 is stored; nothing here logs or keeps the token itself.
#pragma once

#include "src/api/http.h"
#include "src/core/auth.h"
#include "src/daemon/cluster_key.h"
#include "src/daemon/config.h"
#include "src/os/clock.h"
#include "src/store/store.h"

namespace trainq {

class TokenRoutes {
 public:
  // `cluster_key`: the cluster's key where the store is a cluster's (tokens are then signed,
  // and one without a valid signature is listed "unsigned"), else null. Everything given
  // outlives the object.
  TokenRoutes(Store& store, const Clock& clock, const Config& config, const ClusterKey* cluster_key)
      : store_(store), clock_(clock), config_(config), cluster_key_(cluster_key) {}

  void Create(const HttpRequest& req, const Caller& caller, Responder& respond);
  // `trainq dashboard`: a read token for the caller, valid kDashboardTokenMs, and the
  // dashboard's URLs (one per `listen` address). Only on the Unix socket: a token's holder
  // cannot make itself a new one.
  void CreateForDashboard(const HttpRequest& req, const Caller& caller, Responder& respond);
  static constexpr int64_t kDashboardTokenMs = 24 * 3600 * 1000;
  void List(const Caller& caller, Responder& respond);
  void Revoke(const HttpRequest& req, const Caller& caller, Responder& respond);

 private:
  Store& store_;
  const Clock& clock_;
  const Config& config_;
  const ClusterKey* cluster_key_;
};

}  // namespace trainq
