// HTTP over the daemon's Unix socket: the request and response as
// plain data, so routes and the CLI never see Beast.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "trainq/status.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace trainq {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  std::map<std::string, std::string> query;
  std::string body;
  int64_t peer_uid = -1;  // SO_PEERCRED of the Unix socket's client
  int64_t peer_pid = -1;
  std::string idempotency_key;  // the Idempotency-Key header; "" when absent
  std::string authorization;    // the raw Authorization header; "" when absent
  bool tcp = false;             // came over a TCP listener (authenticated by token)
  std::string remote;           // the TCP peer, "HOST:PORT"; "" on the Unix socket
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Routes answer through the Responder, now or later (a batched submit answers after its
// transaction). It must be called exactly once, on the event loop's thread.
using Responder = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest, Responder)>;

// What one server lets its clients hold (docs/operations.md, "Connections and limits").
struct HttpLimits {
  uint64_t max_body_bytes = 64ull << 20;
  // From a request's first byte to its last, and for the answer to be taken: a client that
  // trickles its header or body, or never reads, loses the connection.
  int64_t request_timeout_ms = 10000;
  // A connection waiting for its first or next request is closed after this long.
  int64_t idle_timeout_ms = 60000;
  // Open connections at most. At the cap a new one closes the connection idle the longest;
  // when none is idle, the new one gets a 503 and is closed.
  size_t max_connections = 1024;
  // How long accepting pauses when accept() fails (no fd left, say) and no connection is
  // idle to close: the listening socket stays readable, so retrying at once would spin.
  int64_t accept_pause_ms = 200;
  // Warnings (accept failing: at most one a minute); called on the event loop's thread.
  std::function<void(const std::string&)> warn;
};

// Serves HTTP/1.1 on a Unix socket from the given io_context. Malformed or oversized
// requests get a JSON error (400/413) without reaching the handler; the server keeps serving.
// A request body grows as its bytes arrive: a declared Content-Length reserves nothing.
class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, HttpHandler handler, HttpLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Replaces a stale socket file; the socket is made 0600 (only its owner may talk to it).
  Status ListenUnix(const std::string& path);
  // Stops accepting; open connections end with the io_context.
  void Close();
  // Open connections, idle or not (for tests and /metrics).
  size_t Connections() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// One request on a new connection; kUnavailable when nobody listens at `socket_path` (the
// request was not sent), kPermission when the listener is not the caller's own daemon (see
// JudgeListener; nothing was sent), kIo when the exchange broke after connecting. A non-empty
// `idempotency_key` is sent as the Idempotency-Key header.
Result<HttpResponse> HttpCall(const std::string& socket_path, std::string_view method,
                              std::string_view target, const std::string& body,
                              int timeout_ms = 30000, std::string_view idempotency_key = "");

// Whether the process listening on `socket_path` (SO_PEERCRED: `peer_uid`, named
// `peer_name`) may receive a request from `self_uid`: only the caller's own daemon or root's
// (a shared daemon). A request carries the caller's whole environment.
Status JudgeListener(const std::string& socket_path, int64_t peer_uid, std::string_view peer_name,
                     int64_t self_uid);

// {"error": {"code": "invalid", "message": "..."}} with the status's HTTP code.
HttpResponse ErrorResponse(const Status& status);
// Splits "a=1&b=x%20y" into a map, percent-decoding.
std::map<std::string, std::string> ParseQuery(std::string_view query);

}  // namespace trainq
