// The token API (docs/api.md, "Tokens"): POST /v1/tokens makes a token and shows it once, GET
// /v1/tokens lists them without their hashes, DELETE /v1/tokens/NAME revokes one. Only the
// token's SHA-256 is stored; nothing here logs or keeps the token itself. Who may call each
// (admins; a user on the socket for the dashboard's) is the route table's rule, judged
// before these run (routes.h).
#pragma once

#include "src/api/http.h"
#include "src/core/auth.h"
#include "src/daemon/config.h"
#include "src/daemon/trust.h"
#include "src/os/clock.h"
#include "src/store/store.h"

namespace trainq {

class TokenRoutes {
 public:
  // `trust` signs new tokens where a node's signature is asked (a cluster's), and a stored
  // token no node made is listed "unsigned". Everything given outlives the object.
  TokenRoutes(Store& store, const Clock& clock, const Config& config, const Trust& trust)
      : store_(store), clock_(clock), config_(config), trust_(trust) {}

  // `caller` made it (created_by), and it acts as caller's user unless the body names one.
  void Create(const HttpRequest& req, const Caller& caller, Responder& respond);
  // `trainq dashboard`: a read token for the caller, valid kDashboardTokenMs, and the
  // dashboard's URLs (one per `listen` address). Its route is for the Unix socket's callers
  // only: a token's holder cannot make itself a new one.
  void CreateForDashboard(const Caller& caller, Responder& respond);
  static constexpr int64_t kDashboardTokenMs = 24 * 3600 * 1000;
  void List(Responder& respond);
  // `name`: what follows /v1/tokens/, checked as a name (a '/' in it is refused as one).
  void Revoke(const std::string& name, const Caller& caller, Responder& respond);

 private:
  Store& store_;
  const Clock& clock_;
  const Config& config_;
  const Trust& trust_;
};

}  // namespace trainq
