#include "src/daemon/token_routes.h"

#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/duration.h"
#include "src/core/json_codec.h"
#include "src/daemon/json_response.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// RFC 3339 as the jobs' times are; null when unset.
json TimeOrNull(UnixMs t) { return t == 0 ? json(nullptr) : json(FormatTime(t)); }

// The login-name form most systems accept; the shared mode also wants the user to exist.
Status CheckUserForm(const std::string& user) {
  bool ok = !user.empty() && user.size() <= 32 && user[0] != '-' &&
            user.find_first_not_of(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789._-") == std::string::npos;
  if (ok) return Status::Ok();
  return Status::Invalid(
      "user: expected a login name (1 to 32 of A-Z a-z 0-9 . _ -, not starting with '-')");
}

// What a create request asks for, every field checked.
struct TokenRequest {
  std::string name;
  Role role = Role::kRead;
  std::string user;
  int64_t expires_ms = 0;  // 0: never
};

Result<std::string> StringField(const json& doc, const char* field, const char* form) {
  if (!doc.contains(field)) return Status::Invalid(fmt::format("{}: missing; {}", field, form));
  if (!doc[field].is_string()) {
    return Status::Invalid(fmt::format("{}: expected a string; {}", field, form));
  }
  return doc[field].get<std::string>();
}

Result<TokenRequest> ParseTokenRequest(const std::string& body, const std::string& caller_user) {
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) {
    return Status::Invalid(
        "request body: expected a JSON object {\"name\", \"role\", \"user\", \"expires\"}");
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "name" && key != "role" && key != "user" && key != "expires") {
      return Status::Invalid(
          fmt::format("{}: unknown field; a token request has name, role, user and expires", key));
    }
  }
  TokenRequest r;
  Result<std::string> name = StringField(doc, "name", "1 to 64 of A-Z a-z 0-9 . _ -");
  if (!name.ok()) return name.status();
  TRAINQ_RETURN_IF_ERROR(CheckTokenName(*name));
  r.name = *name;
  Result<std::string> role = StringField(doc, "role", "read, submit or admin");
  if (!role.ok()) return role.status();
  std::optional<Role> parsed = ParseRole(*role);
  if (!parsed) return Status::Invalid("role: expected read, submit or admin");
  r.role = *parsed;
  r.user = caller_user;
  if (doc.contains("user") && !doc["user"].is_null()) {
    Result<std::string> user = StringField(doc, "user", "a login name");
    if (!user.ok()) return user.status();
    TRAINQ_RETURN_IF_ERROR(CheckUserForm(*user));
    r.user = *user;
  }
  if (doc.contains("expires") && !doc["expires"].is_null()) {
    Result<std::string> text = StringField(doc, "expires", "a duration such as 30d or 12h");
    if (!text.ok()) return text.status();
    Result<int64_t> ms = ParseDurationMs(*text, "expires");
    if (!ms.ok()) return ms.status();
    if (*ms <= 0) {
      return Status::Invalid(
          "expires: expected a duration longer than 0 such as 30d or 12h; leave it out for a "
          "token that does not expire");
    }
    r.expires_ms = *ms;
  }
  return r;
}

std::string TokenState(const TokenRecord& t, UnixMs now, const Trust& trust) {
  if (t.revoked_at != 0) return "revoked";
  if (!trust.MadeByANode(t)) return "unsigned";  // written into Redis by another hand
  if (t.expires_at != 0 && now >= t.expires_at) return "expired";
  return "active";
}

}  // namespace

void TokenRoutes::Create(const HttpRequest& req, const Caller& caller, Responder& respond) {
  Result<TokenRequest> r = ParseTokenRequest(req.body, caller.user);
  if (!r.ok()) return respond(ErrorResponse(r.status()));
  if (config_.shared && !LookupUserByName(r->user).ok()) {
    return respond(ErrorResponse(Status::Invalid(fmt::format(
        "user: no local user '{}' on this machine; a token acts as an existing user", r->user))));
  }
  Result<std::string> token = NewToken();
  if (!token.ok()) return respond(ErrorResponse(token.status()));
  UnixMs now = clock_.Now();
  TokenRecord record{
      r->name, Sha256Hex(*token), r->role, r->user, now, r->expires_ms ? now + r->expires_ms : 0,
      0,       caller.user,       ""};
  record.signature = trust_.SignToken(record);
  if (Status st = store_.AddToken(record); !st.ok()) return respond(ErrorResponse(st));
  spdlog::info("token '{}' created for user {} with role {} by {}{}", record.name, record.user,
               RoleName(record.role), caller.user,
               record.expires_at ? fmt::format(", expires in {}", FormatDuration(r->expires_ms))
                                 : std::string());
  respond(Json(201, {{"name", record.name},
                     {"token", *token},
                     {"role", RoleName(record.role)},
                     {"user", record.user},
                     {"expires_at", TimeOrNull(record.expires_at)}}));
}

namespace {

// The dashboard's URL at each `listen` address, "HOST:PORT": a wildcard address is reached by
// this node's address.
json DashboardUrls(const Config& config) {
  json urls = json::array();
  std::string scheme = config.tls_cert.empty() ? "http" : "https";
  std::string self = config.node_address.empty() ? HostName() : config.node_address;
  for (const std::string& at : config.listen) {
    size_t colon = at.rfind(':');
    if (colon == std::string::npos) continue;
    std::string host = at.substr(0, colon);
    if (host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty()) host = self;
    if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
    urls.push_back(fmt::format("{}://{}:{}/", scheme, host, at.substr(colon + 1)));
  }
  return urls;
}

}  // namespace

void TokenRoutes::CreateForDashboard(const Caller& caller, Responder& respond) {
  json urls = DashboardUrls(config_);
  if (urls.empty()) {
    return respond(ErrorResponse(Status::Conflict(
        "the dashboard is served on the daemon's TCP listener, and `listen` is empty: set "
        "listen = [\"127.0.0.1:7070\"] in config.toml and restart the daemon "
        "(docs/dashboard.md)")));
  }
  Result<std::string> hex = RandomHex(4);
  Result<std::string> token = NewToken();
  if (!hex.ok() || !token.ok())
    return respond(ErrorResponse(hex.ok() ? token.status() : hex.status()));
  UnixMs now = clock_.Now();
  TokenRecord record{"dashboard-" + *hex,
                     Sha256Hex(*token),
                     Role::kRead,
                     caller.user,
                     now,
                     now + kDashboardTokenMs,
                     0,
                     caller.user,
                     ""};
  record.signature = trust_.SignToken(record);
  if (Status st = store_.AddToken(record); !st.ok()) return respond(ErrorResponse(st));
  spdlog::info("token '{}' created for user {}'s dashboard, expires in {}", record.name,
               record.user, FormatDuration(kDashboardTokenMs));
  respond(Json(201, {{"name", record.name},
                     {"token", *token},
                     {"role", RoleName(record.role)},
                     {"user", record.user},
                     {"expires_at", TimeOrNull(record.expires_at)},
                     {"urls", std::move(urls)}}));
}

void TokenRoutes::List(Responder& respond) {
  Result<std::vector<TokenRecord>> tokens = store_.ListTokens();
  if (!tokens.ok()) return respond(ErrorResponse(tokens.status()));
  UnixMs now = clock_.Now();
  json out = json::array();
  for (const TokenRecord& t : *tokens) {
    out.push_back({{"name", t.name},
                   {"role", RoleName(t.role)},
                   {"user", t.user},
                   {"created_at", FormatTime(t.created_at)},
                   {"created_by", t.created_by},
                   {"expires_at", TimeOrNull(t.expires_at)},
                   {"revoked_at", TimeOrNull(t.revoked_at)},
                   {"state", TokenState(t, now, trust_)}});
  }
  respond(Json(200, {{"tokens", std::move(out)}}));
}

void TokenRoutes::Revoke(const std::string& name, const Caller& caller, Responder& respond) {
  if (Status st = CheckTokenName(name); !st.ok()) return respond(ErrorResponse(st));
  if (Status st = store_.RevokeToken(name, clock_.Now()); !st.ok()) {
    return respond(ErrorResponse(st));
  }
  spdlog::info("token '{}' revoked by {}", name, caller.user);
  respond(Json(200, {{"message", fmt::format("token '{}' revoked; requests with it are refused "
                                             "from now on",
                                             name)},
                     {"name", name}}));
}

}  // namespace trainq
