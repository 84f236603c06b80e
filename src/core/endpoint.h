// Where a client finds the API (`--server URL`, TRAINQ_SERVER) and where the daemon serves it
// over TCP (the `listen` option): parsing and printing only, no I/O.
#pragma once

#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq {

struct Endpoint {
  enum class Kind { kUnix, kHttp, kHttps };
  Kind kind = Kind::kUnix;
  std::string path;  // kUnix: an absolute socket path
  std::string host;  // kHttp(s): a name, an IPv4 address or an IPv6 address (no brackets)
  int port = 0;      // kHttp(s): 1..65535

  // The URL that parses back to this endpoint: "unix:/run/trainq/trainq.sock",
  // "https://gpu1.lab:7070", "http://[::1]:7070".
  std::string Describe() const;
  bool operator==(const Endpoint&) const = default;
};

// `unix:/abs/path.sock`, `http://HOST:PORT` or `https://HOST:PORT`, HOST a name, an IPv4
// address or `[IPv6]`, PORT 1..65535, an optional trailing "/" and nothing else. kInvalid
// naming `field` ("--server") and the accepted form.
Result<Endpoint> ParseServerUrl(std::string_view text, std::string_view field);

// A webhook URL (--notify, notify_url): `http(s)://HOST:PORT/PATH?QUERY`, the port optional
// (80, 443). The endpoint to connect to and the request target ("/PATH?QUERY", "/" when
// none). kInvalid naming `field` and the accepted form.
struct WebhookUrl {
  Endpoint endpoint;
  std::string target;
};
Result<WebhookUrl> ParseWebhookUrl(std::string_view text, std::string_view field);

struct ListenAddress {
  std::string host;  // a name, an IPv4 address or an IPv6 address (no brackets)
  int port = 0;      // 0..65535; 0: any free port (the daemon logs the one it got)
  // "HOST:PORT", with the IPv6 host in brackets: parses back to this address.
  std::string Describe() const;
  bool operator==(const ListenAddress&) const = default;
};

// "HOST:PORT" or "[IPv6]:PORT" (an entry of the `listen` option). kInvalid naming `field`
// and the accepted form.
Result<ListenAddress> ParseListenAddress(std::string_view text, std::string_view field);

// 127.0.0.0/8, ::1 (also as ::ffff:127.x.x.x) and "localhost": addresses no other machine
// can reach. Brackets around an IPv6 address are allowed.
bool IsLoopbackHost(std::string_view host);

}  // namespace trainq
