// `trainq token create|ls|revoke`: API tokens for remote access (docs/operations.md,
// "Tokens"). The daemon makes the token and keeps only its SHA-256; the CLI shows it once.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/cli/reply.h"
#include "src/core/auth.h"
#include "src/core/duration.h"
#include "src/core/json_codec.h"
#include "src/os/system.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// "2026-11-22T10:00:01.123Z" -> "2026-11-22 10:00"; "-" when absent or null.
std::string Minutes(const Reply& r, const char* key) {
  std::string t = r.Text(key);
  if (t.size() < 16) return t;
  t = t.substr(0, 16);
  t[10] = ' ';
  return t;
}

// Checked here as the daemon checks them, so a mistake names the option the user typed.
Status CheckCreateArgs(const TokenArgs& a) {
  TRAINQ_RETURN_IF_ERROR(CheckTokenName(a.name));
  if (!ParseRole(a.role)) return Status::Invalid("--role: expected read, submit or admin");
  if (!a.expires.empty()) {
    Result<int64_t> ms = ParseDurationMs(a.expires, "--expires");
    if (!ms.ok()) return ms.status();
    if (*ms <= 0) {
      return Status::Invalid(
          "--expires: expected a duration longer than 0 such as 30d or 12h; leave it out for a "
          "token that does not expire");
    }
  }
  return Status::Ok();
}

}  // namespace

int CmdTokenCreate(Client& client, const TokenArgs& a) {
  if (Status st = CheckCreateArgs(a); !st.ok()) return Fail(st);
  json body = {{"name", a.name}, {"role", a.role}};
  if (!a.user.empty()) body["user"] = a.user;
  if (!a.expires.empty()) body["expires"] = a.expires;
  Result<json> r = client.Call("POST", api::TokensPath(), DumpJson(body));
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::string token = reply.Str("token");
  std::string role = reply.Text("role"), user = reply.Text("user");
  std::string expires = Minutes(reply, "expires_at");
  if (!reply.ok()) return Fail(reply.status());
  if (a.json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
  } else {
    // The token alone on stdout, so `trainq token create ... > FILE` writes just it.
    std::printf("%s\n", token.c_str());
  }
  std::fprintf(stderr,
               "token '%s' (role %s, user %s, expires %s) is shown only once: keep it now.\n"
               "On the client, set TRAINQ_TOKEN to it or put it in ~/.config/trainq/token "
               "(mode 0600).\n",
               a.name.c_str(), role.c_str(), user.c_str(),
               expires == "-" ? "never" : expires.c_str());
  return 0;
}

// The token goes in the URL's fragment: a browser never sends a fragment to any server, so
// it stays out of logs and Referer headers; the page keeps it in sessionStorage.
int CmdDashboard(Client& client, bool as_json, bool open) {
  Result<json> r = client.Call("POST", api::DashboardTokenPath(), "{}");
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::string token = reply.Str("token");
  std::string expires = Minutes(reply, "expires_at");
  std::vector<std::string> urls;
  for (const Reply& u : reply.Array("urls")) urls.push_back(u.AsStr() + "#token=" + token);
  if (!reply.ok()) return Fail(reply.status());
  if (urls.empty()) return Fail(Status::Internal("the daemon named no dashboard URL"));
  if (as_json) {
    json out = *r;
    out["urls"] = urls;
    std::printf("%s\n", DumpJson(out, 2).c_str());
  } else {
    for (const std::string& url : urls) std::printf("%s\n", url.c_str());
    std::fprintf(stderr, "a read token for you, valid until %s; open the URL in a browser\n",
                 expires.c_str());
  }
  bool display = !GetEnv("DISPLAY").empty() || !GetEnv("WAYLAND_DISPLAY").empty();
  if (open && display) {
    if (Result<std::string> xdg = FindOnPath("xdg-open"); xdg.ok()) {
      (void)StartDetached({*xdg, urls.front()}, "/dev/null");
    }
  }
  return 0;
}

int CmdTokenList(Client& client, bool as_json) {
  Result<json> r = client.Call("GET", api::TokensPath());
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "ROLE", "USER", "CREATED", "EXPIRES", "STATE"}};
  for (const Reply& t : reply.Array("tokens")) {
    rows.push_back({t.Text("name"), t.Text("role"), t.Text("user"), Minutes(t, "created_at"),
                    t.Has("expires_at") ? Minutes(t, "expires_at") : "never", t.Text("state")});
  }
  if (!reply.ok()) return Fail(reply.status());
  if (as_json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  std::fputs(RenderTable(rows).c_str(), stdout);
  return 0;
}

int CmdTokenRevoke(Client& client, const std::string& name) {
  if (Status st = CheckTokenName(name); !st.ok()) return Fail(st);
  return PrintReplyMessage(client.Call("DELETE", api::TokenPath(name)));
}

}  // namespace trainq
