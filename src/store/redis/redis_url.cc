// ParseRedisUrl (src/store/cluster.h): no hiredis here, so the fuzzer and the config
// checks link it alone.
#include <fmt/format.h>

#include <charconv>

#include "src/store/cluster.h"

namespace trainq {

namespace {

constexpr char kForm[] = "redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]";

Status Bad(std::string_view what) {
  return Status::Invalid(fmt::format("store: {}; expected {}", what, kForm));
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

Status ParseUserInfo(std::string_view info, RedisTarget& t) {
  size_t colon = info.find(':');
  std::optional<std::string> user = PercentDecode(info.substr(0, colon));
  std::optional<std::string> password =
      colon == std::string_view::npos ? std::string() : PercentDecode(info.substr(colon + 1));
  if (!user || !password) return Bad("a broken %-escape in the user or password");
  // A user with no password here is the documented form: its password comes from
  // store_password_file, and the daemon's config check refuses it when that is unset.
  t.user = std::move(*user);
  t.password = std::move(*password);
  return Status::Ok();
}

Status ParseHostPort(std::string_view hp, RedisTarget& t) {
  std::string_view port;
  if (!hp.empty() && hp.front() == '[') {  // [IPv6]:PORT
    size_t close = hp.find(']');
    if (close == std::string_view::npos) return Bad("an IPv6 host without its closing ']'");
    t.host = std::string(hp.substr(1, close - 1));
    std::string_view rest = hp.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return Bad("text after the IPv6 host");
    if (!rest.empty()) port = rest.substr(1);
    if (t.host.empty() ||
        t.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      return Bad("a bad IPv6 host");
    }
  } else {
    size_t colon = hp.find(':');
    t.host = std::string(hp.substr(0, colon));
    if (colon != std::string_view::npos) port = hp.substr(colon + 1);
    if (!IsHostName(t.host)) return Bad("a missing or bad host");
  }
  if (hp.find(':') != std::string_view::npos && hp.back() == ':') return Bad("an empty port");
  if (!port.empty()) {
    std::optional<int> p = Number(port, 1, 65535);
    if (!p) return Bad("the port must be a number from 1 to 65535");
    t.port = *p;
  }
  return Status::Ok();
}

}  // namespace

Result<RedisTarget> ParseRedisUrl(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  std::string_view rest(url);
  if (rest.substr(0, 9) == "rediss://") return Bad("TLS (rediss://) is not supported");
  if (rest.substr(0, kScheme.size()) != kScheme) return Bad("the URL must start with redis://");
  rest.remove_prefix(kScheme.size());
  RedisTarget t;
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    TRAINQ_RETURN_IF_ERROR(ParseUserInfo(rest.substr(0, at), t));
    rest.remove_prefix(at + 1);
  }
  if (rest.find_first_of("?#") != std::string_view::npos)
    return Bad("query options are not supported");
  size_t slash = rest.find('/');
  TRAINQ_RETURN_IF_ERROR(ParseHostPort(rest.substr(0, slash), t));
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      std::optional<int> n = Number(db, 0, 1'000'000);
      if (!n) return Bad("the database must be a number (0, 1, ...)");
      t.db = *n;
    }
  }
  return t;
}

}  // namespace trainq
