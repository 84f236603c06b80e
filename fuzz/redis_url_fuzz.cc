// libFuzzer target for the cluster's store URL (ParseRedisUrl), which config.toml and
// store_password_file feed. Invariants: an accepted redis:// URL has a host, a
// redis+sentinel:// one at least one sentinel (each with a host) and a master name; ports
// are in 1..65535 and the database >= 0; written back with every user and password byte
// %-escaped it parses to the same target; a refusal is kInvalid naming `store` and an
// accepted form, and quotes nothing of the URL (it may hold a password).
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/store/cluster.h"

namespace trainq {
namespace {

std::string Escaped(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : text) {
    out += '%';
    out += kHex[ch >> 4];
    out += kHex[ch & 15];
  }
  return out;
}

std::string HostPort(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Url(const RedisTarget& t) {
  std::string url = t.sentinels.empty() ? "redis://" : "redis+sentinel://";
  if (!t.password.empty()) {
    url += Escaped(t.user) + ":" + Escaped(t.password) + "@";
  } else if (!t.user.empty()) {
    url += Escaped(t.user) + "@";
  }
  if (t.sentinels.empty()) return url + HostPort(t.host, t.port) + "/" + std::to_string(t.db);
  for (size_t i = 0; i < t.sentinels.size(); ++i) {
    url += (i ? "," : "") + HostPort(t.sentinels[i].host, t.sentinels[i].port);
  }
  return url + "/" + t.master_name + "/" + std::to_string(t.db);
}

bool SameSentinels(const RedisTarget& a, const RedisTarget& b) {
  if (a.sentinels.size() != b.sentinels.size() || a.master_name != b.master_name) return false;
  for (size_t i = 0; i < a.sentinels.size(); ++i) {
    if (a.sentinels[i].host != b.sentinels[i].host || a.sentinels[i].port != b.sentinels[i].port)
      return false;
  }
  return true;
}

void Check(const std::string& url) {
  Result<RedisTarget> got = ParseRedisUrl(url);
  if (!got.ok()) {
    FUZZ_CHECK(got.status().code() == Code::kInvalid);
    const std::string& message = got.status().message();
    FUZZ_CHECK(message.rfind("store: ", 0) == 0);
    FUZZ_CHECK(message.find("redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]") != std::string::npos ||
               message.find("redis+sentinel://[USER[:PASSWORD]@]HOST[:PORT],") !=
                   std::string::npos);
    FUZZ_CHECK(message.size() < 160);  // fixed texts only
    return;
  }
  const RedisTarget& t = *got;
  FUZZ_CHECK(t.sentinels.empty() ? !t.host.empty() : t.host.empty() && !t.master_name.empty());
  FUZZ_CHECK(t.port >= 1 && t.port <= 65535);
  for (const RedisAddress& s : t.sentinels) {
    FUZZ_CHECK(!s.host.empty() && s.port >= 1 && s.port <= 65535);
  }
  FUZZ_CHECK(t.db >= 0);
  Result<RedisTarget> again = ParseRedisUrl(Url(t));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->host == t.host && again->port == t.port && again->db == t.db);
  FUZZ_CHECK(again->user == t.user && again->password == t.password);
  FUZZ_CHECK(SameSentinels(*again, t));
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trainq::Check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
