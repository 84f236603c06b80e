#include "src/core/endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace trainq {

namespace {

constexpr std::string_view kUrlForm =
    "unix:/ABSOLUTE/PATH.sock, http://HOST:PORT or https://HOST:PORT (HOST a name, an IPv4 "
    "address or [IPv6], PORT 1-65535)";
constexpr std::string_view kListenForm =
    "HOST:PORT or [IPv6]:PORT, like 0.0.0.0:7070 or [::1]:7070 (PORT 0-65535)";

bool IsIpv6(std::string_view host) {
  in6_addr addr{};
  return host.size() < INET6_ADDRSTRLEN &&
         inet_pton(AF_INET6, std::string(host).c_str(), &addr) == 1;
}

// A DNS name or an IPv4 address: letters, digits, dots and hyphens, at most 253 of them.
bool IsNameOrIpv4(std::string_view host) {
  if (host.empty() || host.size() > 253 || host.front() == '.' || host.front() == '-') {
    return false;
  }
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<int> ParsePort(std::string_view text, int min) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  int port = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || ptr != text.data() + text.size() || port < min || port > 65535) {
    return std::nullopt;
  }
  return port;
}

struct HostPort {
  std::string host;
  int port = 0;
};

// "HOST:PORT" or "[IPv6]:PORT"; nullopt when it is neither.
std::optional<HostPort> SplitHostPort(std::string_view text, int min_port) {
  std::string_view host;
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    if (!IsIpv6(host)) return std::nullopt;
    rest = text.substr(close + 1);
  } else {
    size_t colon = text.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    if (!IsNameOrIpv4(host)) return std::nullopt;
    rest = text.substr(colon);
  }
  if (rest.empty() || rest.front() != ':') return std::nullopt;
  std::optional<int> port = ParsePort(rest.substr(1), min_port);
  if (!port) return std::nullopt;
  return HostPort{std::string(host), *port};
}

std::string HostPortText(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Status BadUrl(std::string_view text, std::string_view field, std::string_view why) {
  return Status::Invalid(fmt::format("{}: '{}' {}; expected {}", field, text, why, kUrlForm));
}

}  // namespace

std::string Endpoint::Describe() const {
  switch (kind) {
    case Kind::kUnix:
      return "unix:" + path;
    case Kind::kHttp:
      return "http://" + HostPortText(host, port);
    case Kind::kHttps:
      return "https://" + HostPortText(host, port);
  }
  return "";
}

Result<Endpoint> ParseServerUrl(std::string_view text, std::string_view field) {
  std::string_view shown = text.size() > 200 ? text.substr(0, 200) : text;
  Endpoint out;
  if (text.starts_with("unix:")) {
    out.path = std::string(text.substr(5));
    if (out.path.size() < 2 || out.path.front() != '/') {
      return BadUrl(shown, field, "needs an absolute socket path after unix:");
    }
    if (out.path.find('\0') != std::string::npos || out.path.size() >= 108) {
      return BadUrl(shown, field, "is not a usable Unix socket path (at most 107 bytes)");
    }
    return out;
  }
  std::string_view rest;
  if (text.starts_with("http://")) {
    out.kind = Endpoint::Kind::kHttp;
    rest = text.substr(7);
  } else if (text.starts_with("https://")) {
    out.kind = Endpoint::Kind::kHttps;
    rest = text.substr(8);
  } else {
    return BadUrl(shown, field, "has no unix:, http:// or https:// in front");
  }
  if (rest.ends_with('/')) rest.remove_suffix(1);
  std::optional<HostPort> hp = SplitHostPort(rest, 1);
  if (!hp) return BadUrl(shown, field, "is not HOST:PORT after the scheme");
  out.host = std::move(hp->host);
  out.port = hp->port;
  return out;
}

std::string ListenAddress::Describe() const { return HostPortText(host, port); }

Result<ListenAddress> ParseListenAddress(std::string_view text, std::string_view field) {
  std::optional<HostPort> hp = SplitHostPort(text, 0);
  if (!hp) {
    std::string_view shown = text.size() > 200 ? text.substr(0, 200) : text;
    return Status::Invalid(fmt::format("{}: '{}' is not an address to listen on; expected {}",
                                       field, shown, kListenForm));
  }
  return ListenAddress{std::move(hp->host), hp->port};
}

bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.size() == 9) {
    std::string lower(host);
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower == "localhost") return true;
  }
  if (host.size() >= INET6_ADDRSTRLEN) return false;
  std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

Result<WebhookUrl> ParseWebhookUrl(std::string_view text, std::string_view field) {
  auto bad = [&]() {
    return Status::Invalid(fmt::format(
        "{}: '{}' is not a webhook URL; use http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH",
        field, text.substr(0, 200)));
  };
  bool tls = text.starts_with("https://");
  if (!tls && !text.starts_with("http://")) return bad();
  size_t host_at = text.find("://") + 3;
  size_t slash = text.find_first_of("/?", host_at);
  std::string_view authority = text.substr(host_at, slash - host_at);
  // A query without a path is sent as "/?...": built by appending, never by inserting in front.
  std::string target = slash != std::string_view::npos && text[slash] == '/' ? "" : "/";
  if (slash != std::string_view::npos) target.append(text.substr(slash));
  bool printable =
      std::all_of(target.begin(), target.end(), [](char c) { return c > ' ' && c < 127; });
  if (!printable || text.size() > 2048) return bad();
  // A port given or the scheme's own, so the endpoint parser (which needs one) reads it.
  bool has_port = !authority.empty() && authority.back() != ']' &&
                  authority.find(':', authority.rfind(']') == std::string_view::npos
                                          ? 0
                                          : authority.rfind(']')) != std::string_view::npos;
  std::string origin = fmt::format("{}://{}{}", tls ? "https" : "http", authority,
                                   has_port ? ""
                                   : tls    ? ":443"
                                            : ":80");
  Result<Endpoint> endpoint = ParseServerUrl(origin, field);
  if (!endpoint.ok()) return bad();
  return WebhookUrl{*endpoint, std::move(target)};
}

}  // namespace trainq
