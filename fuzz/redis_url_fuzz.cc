// libFuzzer target for the cluster's store URL (ParseRedisUrl), which config.toml and
// store_password_file feed. Invariants: an accepted URL has a host, a port in 1..65535 and
// a database >= 0, and written back with every user and password byte %-escaped it parses
// to the same target; a refusal is kInvalid naming `store` and the accepted form, and
// quotes nothing of the URL (it may hold a password).
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

std::string Url(const RedisTarget& t) {
  std::string url = "redis://";
  if (!t.password.empty()) {
    url += Escaped(t.user) + ":" + Escaped(t.password) + "@";
  } else if (!t.user.empty()) {
    url += Escaped(t.user) + "@";
  }
  bool v6 = t.host.find(':') != std::string::npos;
  url += v6 ? "[" + t.host + "]" : t.host;
  return url + ":" + std::to_string(t.port) + "/" + std::to_string(t.db);
}

void Check(const std::string& url) {
  Result<RedisTarget> got = ParseRedisUrl(url);
  if (!got.ok()) {
    FUZZ_CHECK(got.status().code() == Code::kInvalid);
    const std::string& message = got.status().message();
    FUZZ_CHECK(message.rfind("store: ", 0) == 0);
    FUZZ_CHECK(message.find("redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]") != std::string::npos);
    FUZZ_CHECK(message.size() < 160);  // fixed texts only
    return;
  }
  const RedisTarget& t = *got;
  FUZZ_CHECK(!t.host.empty());
  FUZZ_CHECK(t.port >= 1 && t.port <= 65535);
  FUZZ_CHECK(t.db >= 0);
  Result<RedisTarget> again = ParseRedisUrl(Url(t));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->host == t.host && again->port == t.port && again->db == t.db);
  FUZZ_CHECK(again->user == t.user && again->password == t.password);
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trainq::Check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
