// ParseRedisUrl (src/store/cluster.h): no hiredis here, so the fuzzer and the config
// checks link it alone.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "src/store/cluster.h"

namespace trainq {

namespace {

constexpr char kForm[] = "redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]";
constexpr char kSentinelForm[] =
    "redis+sentinel://[USER[:PASSWORD]@]HOST[:PORT],HOST[:PORT],.../MASTER[/DB]";
constexpr int kSentinelPort = 26379;

Status Bad(std::string_view what, std::string_view form = kForm) {
  return Status::Invalid(fmt::format("store: {}; expected {}", what, form));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes; nullopt for a broken one.
std::optional<std::string> PercentDecode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int hi = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
    int lo = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// A decimal number in [low, high]; nullopt otherwise.
std::optional<int> Number(std::string_view text, int low, int high) {
  if (text.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < low ||
      v > high) {
    return std::nullopt;
  }
  return v;
}

bool IsHostName(std::string_view host) {
  return !host.empty() &&
         host.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") ==
             std::string_view::npos;
}

Status ParseUserInfo(std::string_view info, RedisTarget& t, std::string_view form) {
  size_t colon = info.find(':');
  std::optional<std::string> user = PercentDecode(info.substr(0, colon));
  std::optional<std::string> password =
      colon == std::string_view::npos ? std::string() : PercentDecode(info.substr(colon + 1));
  if (!user || !password) return Bad("a broken %-escape in the user or password", form);
  // A user with no password here is the documented form: its password comes from
  // store_password_file, and the daemon's config check refuses it when that is unset.
  t.user = std::move(*user);
  t.password = std::move(*password);
  return Status::Ok();
}

Status ParseHostPort(std::string_view hp, RedisAddress& a, std::string_view form) {
  std::string_view port;
  if (!hp.empty() && hp.front() == '[') {  // [IPv6]:PORT
    size_t close = hp.find(']');
    if (close == std::string_view::npos) return Bad("an IPv6 host without its closing ']'", form);
    a.host = std::string(hp.substr(1, close - 1));
    std::string_view rest = hp.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return Bad("text after the IPv6 host", form);
    if (!rest.empty()) port = rest.substr(1);
    if (a.host.empty() ||
        a.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      return Bad("a bad IPv6 host", form);
    }
  } else {
    size_t colon = hp.find(':');
    a.host = std::string(hp.substr(0, colon));
    if (colon != std::string_view::npos) port = hp.substr(colon + 1);
    if (!IsHostName(a.host)) return Bad("a missing or bad host", form);
  }
  if (hp.find(':') != std::string_view::npos && hp.back() == ':') return Bad("an empty port", form);
  if (!port.empty()) {
    std::optional<int> p = Number(port, 1, 65535);
    if (!p) return Bad("the port must be a number from 1 to 65535", form);
    a.port = *p;
  }
  return Status::Ok();
}

// The part after the hosts: "/DB" for redis://, "/MASTER[/DB]" for redis+sentinel://.
Status ParseDb(std::string_view db, RedisTarget& t, std::string_view form) {
  if (db.empty()) return Status::Ok();
  std::optional<int> n = Number(db, 0, 1'000'000);
  if (!n) return Bad("the database must be a number (0, 1, ...)", form);
  t.db = *n;
  return Status::Ok();
}

// Sentinel's own names are any text; these characters keep it one argument everywhere.
bool IsMasterName(std::string_view name) {
  return !name.empty() && name.size() <= 64 &&
         name.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") ==
             std::string_view::npos;
}

Status ParseSentinels(std::string_view hosts, std::string_view path, RedisTarget& t) {
  for (size_t from = 0; from <= hosts.size();) {
    size_t comma = std::min(hosts.find(',', from), hosts.size());
    RedisAddress a{"", kSentinelPort};
    TRAINQ_RETURN_IF_ERROR(ParseHostPort(hosts.substr(from, comma - from), a, kSentinelForm));
    t.sentinels.push_back(std::move(a));
    from = comma + 1;
  }
  size_t slash = path.find('/');
  if (!IsMasterName(path.substr(0, slash))) {
    return Bad("a missing or bad master name (letters, digits, '.', '_', '-')", kSentinelForm);
  }
  t.master_name = std::string(path.substr(0, slash));
  if (slash == std::string_view::npos) return Status::Ok();
  return ParseDb(path.substr(slash + 1), t, kSentinelForm);
}

}  // namespace

Result<RedisTarget> ParseRedisUrl(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  constexpr std::string_view kSentinelScheme = "redis+sentinel://";
  std::string_view rest(url);
  if (rest.substr(0, 9) == "rediss://") return Bad("TLS (rediss://) is not supported");
  bool sentinel = rest.substr(0, kSentinelScheme.size()) == kSentinelScheme;
  if (!sentinel && rest.substr(0, kScheme.size()) != kScheme) {
    return Bad("the URL must start with redis:// or redis+sentinel://");
  }
  std::string_view form = sentinel ? kSentinelForm : kForm;
  rest.remove_prefix(sentinel ? kSentinelScheme.size() : kScheme.size());
  RedisTarget t;
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    TRAINQ_RETURN_IF_ERROR(ParseUserInfo(rest.substr(0, at), t, form));
    rest.remove_prefix(at + 1);
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Bad("query options are not supported", form);
  }
  size_t slash = rest.find('/');
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (sentinel) {
    TRAINQ_RETURN_IF_ERROR(ParseSentinels(rest.substr(0, slash), path, t));
    t.host.clear();
    return t;
  }
  RedisAddress a{"", t.port};
  TRAINQ_RETURN_IF_ERROR(ParseHostPort(rest.substr(0, slash), a, form));
  t.host = std::move(a.host);
  t.port = a.port;
  TRAINQ_RETURN_IF_ERROR(ParseDb(path, t, form));
  return t;
}

}  // namespace trainq
