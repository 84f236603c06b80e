// HTTP over the daemon's Unix socket and over TCP (plain or TLS): the request and response as
// plain data, so routes and the CLI never see Beast, Asio's SSL or OpenSSL.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/core/endpoint.h"
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
  int64_t peer_uid = -1;  // SO_PEERCRED of the Unix socket's client; -1 over TCP
  int64_t peer_pid = -1;
  std::string idempotency_key;  // the Idempotency-Key header; "" when absent
  std::string authorization;    // the Authorization header as sent; "" when absent
  bool tcp = false;             // came over TCP (plain or TLS), not the Unix socket
  std::string remote;           // TCP: the peer's "ip:port" ("[ip6]:port"); "" on Unix
  std::string if_none_match{};  // the If-None-Match header; "" when absent
  // The protocol the client asks to switch to (Upgrade, with Connection naming upgrade); ""
  // for a plain request.
  std::string upgrade{};
};

struct TunnelTarget;

// A response body that goes on after the head (Server-Sent Events): whoever answered keeps it
// and writes to it, on the event loop's thread, as things happen; the session sends what was
// written. Bounded: a write that would leave more than `max_unsent` bytes unsent is refused,
// so a client that reads slowly costs the daemon that much at most and never blocks it.
class StreamBody {
 public:
  explicit StreamBody(size_t max_unsent) : max_unsent_(max_unsent) {}
  StreamBody(const StreamBody&) = delete;
  StreamBody& operator=(const StreamBody&) = delete;

  // Appends `bytes` to what is to be sent; false, and nothing kept, when the client is gone
  // or the bytes do not fit.
  bool Write(std::string_view bytes) {
    if (closed_ || ended_ || unsent_.size() + bytes.size() > max_unsent_) return false;
    bool was_empty = unsent_.empty();
    unsent_.append(bytes);
    if (was_empty && wake_) std::exchange(wake_, nullptr)();
    return true;
  }
  // Nothing more: the connection closes once what was written is sent.
  void End() {
    ended_ = true;
    if (wake_) std::exchange(wake_, nullptr)();
  }
  // The client went away (or the server closed): writers forget this body.
  bool closed() const { return closed_; }
  size_t unsent() const { return unsent_.size(); }

  // The session's side: what to send now (emptied), whether the writer ended, a call for
  // when there is more (once), and the connection's end.
  std::string Take() { return std::exchange(unsent_, std::string()); }
  bool ended() const { return ended_; }
  void OnMore(std::function<void()> wake) { wake_ = std::move(wake); }
  void Close() {
    closed_ = true;
    unsent_.clear();
    wake_ = nullptr;
  }

 private:
  size_t max_unsent_;
  std::string unsent_;
  std::function<void()> wake_;
  bool ended_ = false;
  bool closed_ = false;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // Further headers as sent (Cache-Control, ETag, Content-Security-Policy, ...).
  std::vector<std::pair<std::string, std::string>> headers{};
  // Set: the body is `body` and then what the stream gets, sent without a length until the
  // stream ends or the client goes; the connection is not kept alive.
  std::shared_ptr<StreamBody> stream{};
  // Set: the connection is switched to the protocol the request asked for (101) and its
  // bytes go both ways between the client and this target, untouched, until either side
  // closes; where the target cannot be opened, the client gets that answer instead.
  std::shared_ptr<const TunnelTarget> tunnel{};
};

// Routes answer through the Responder, now or later (a batched submit answers after its
// transaction). It must be called exactly once, on the event loop's thread.
using Responder = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest, Responder)>;

// How a Unix-socket client ranks for the connection limits (docs/operations.md, "Connections
// and limits"): whether it is under max_connections_per_peer and may take the reserve.
enum class PeerRank {
  kUser,   // capped; never takes the reserve
  kAdmin,  // capped; may take the reserve
  kOwner,  // root and the daemon's own user: not capped, may take the reserve
};

// What one server lets its clients hold (docs/operations.md, "Connections and limits").
struct HttpLimits {
  uint64_t max_body_bytes = 64ull << 20;
  // The request line and headers together; more is answered 431 and the connection closed.
  uint32_t max_header_bytes = 16 * 1024;
  // From a request's first byte to its last, and for the answer to be taken: a client that
  // trickles its header or body, or never reads, loses the connection.
  int64_t request_timeout_ms = 10000;
  // A request's head (request line and headers) must be in within this: on a new connection
  // from its accept, TLS handshake included; on a kept-alive one from the request's first
  // byte. A lower request_timeout_ms bounds it too.
  int64_t header_timeout_ms = 5000;
  // A connection waiting for its first or next request is closed after this long.
  int64_t idle_timeout_ms = 60000;
  // Open connections at most. At the cap a new one closes the connection idle the longest;
  // when none is idle, the new one gets a 503 and is closed. Of them, an eighth is kept for
  // the Unix socket's owners and admins, and another eighth for the Unix socket: other local
  // users hold at most seven eighths, TCP clients three quarters (the same rule applies
  // there: their idle longest is closed, else a 503).
  size_t max_connections = 1024;
  // Open connections of one peer at most: one uid on the Unix socket (owners are not
  // capped), one IP address over TCP (see TcpPeer). At it, the peer's new connection closes
  // the peer's own connection idle the longest; when none is idle, it gets a 503.
  size_t max_connections_per_peer = 64;
  // How a Unix-socket client's uid ranks; called on the event loop's thread once per
  // accepted connection. Unset: every client is kOwner (a socket only its owner can reach).
  std::function<PeerRank(int64_t uid)> rank_uid;
  // How long accepting pauses when accept() fails (no fd left, say) and no connection is
  // idle to close: the listening socket stays readable, so retrying at once would spin.
  int64_t accept_pause_ms = 200;
  // Warnings (accept failing: at most one a minute); called on the event loop's thread.
  std::function<void(const std::string&)> warn;
};

// The certificate chain and private key (PEM files) of a TLS listener; neither: plain TCP.
struct TlsFiles {
  std::string cert;
  std::string key;
  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// Whether `tls` can serve TLS: both files readable, a certificate and its key. kInvalid
// naming tls_cert or tls_key (the config options) and the file.
Status CheckTlsFiles(const TlsFiles& tls);

// Serves HTTP/1.1 on a Unix socket and any number of TCP addresses from the given
// io_context, every connection under the same limits and one connection cap. Malformed or
// oversized requests get a JSON error (400/413/431) without reaching the handler; the server
// keeps serving. A request body grows as its bytes arrive: a declared Content-Length
// reserves nothing.
class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, HttpHandler handler, HttpLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Replaces a stale socket file; the socket is made 0600 (only its owner may talk to it).
  Status ListenUnix(const std::string& path);
  // Listens on `host` (a name or an IP address, IPv6 without brackets) and `port` (0: any
  // free port); returns the port bound. With `tls` enabled every connection starts with a
  // TLS handshake (TLS 1.2 or later), under the head's deadline (header_timeout_ms); until
  // its first byte the connection counts as idle. kInvalid for unusable TLS files (see
  // CheckTlsFiles), kIo when the address cannot be bound.
  Result<int> ListenTcp(const std::string& host, int port, const TlsFiles& tls);
  // Stops accepting; open connections end with the io_context.
  void Close();
  // Open connections, idle or not (for tests and /metrics).
  size_t Connections() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

struct CallOptions {
  int timeout_ms = 30000;       // the whole exchange, connecting included
  int connect_timeout_ms = 0;   // TCP: the connection alone, within timeout_ms; 0: no own bound
  std::string idempotency_key;  // non-empty: sent as the Idempotency-Key header
  std::string bearer_token;     // non-empty: sent as "Authorization: Bearer TOKEN"
  std::string authorization;    // non-empty: the whole Authorization header (a node's signature)
  // https: a PEM file of the CA certificates to trust instead of the system's, and where it
  // was named, for the messages that say to set it.
  std::string ca_file;
  std::string ca_name = "TRAINQ_CA";
};

// Where a switched connection's bytes go (HttpResponse::tunnel): a Unix socket on this machine,
// or another server asked the same switch. The bytes are only copied: the protocol is the two
// ends' own.
struct TunnelTarget {
  std::string protocol;  // the Upgrade value, to the client and to another server
  std::string what;      // what is reached, for errors: "the terminal of job 12"
  // A Unix socket on this machine; a listener not there yet (ENOENT, ECONNREFUSED) is tried
  // again until `options.timeout_ms`.
  std::string unix_path;
  // Else GET `target` of this http(s) endpoint, with `options`'s Authorization and CA.
  Endpoint endpoint;
  std::string target;
  CallOptions options;  // timeout_ms bounds the opening, not the tunnel
};

// A connection switched by HttpUpgrade.
struct Upgraded {
  int fd = -1;          // the connection's socket (the caller's to close); -1: not switched
  std::string early;    // bytes that came right after the 101, before any read
  HttpResponse answer;  // the daemon's answer when it did not switch
};

// GET `target` on the Unix socket at `socket_path` asking to switch to `protocol`; the listener
// is judged as HttpCall judges it. A 101 gives the socket; any other answer is returned as the
// daemon gave it. kUnavailable when nothing was sent, kIo when the exchange broke after.
Result<Upgraded> HttpUpgrade(const std::string& socket_path, std::string_view target,
                             std::string_view protocol, int timeout_ms);

// Whether `path` is a PEM file of CA certificates a call can trust (`name`: where it was
// named, tls_ca or TRAINQ_CA). kInvalid naming both and what is wrong.
Status CheckCaFile(const std::string& path, const std::string& name);

// One request on a new connection to `endpoint`. kUnavailable only when nothing was sent:
// nobody listens there, the connection or the TLS handshake failed or timed out. kPermission
// when the listener is not to be trusted, nothing sent either: on a Unix socket not the
// caller's own daemon or root's (JudgeListener); over https a certificate that does not
// verify (against the system's CAs and `ca_file`, for the host name or IP address of the
// URL). kInvalid for an unreadable `ca_file`, and for a method, target or header value that
// holds a space (the target), CR, LF or NUL: a request is never built by pasting. kIo when the
// exchange broke after the request went out: it may have been received, so it must not be resent
// blindly.
Result<HttpResponse> HttpCall(const Endpoint& endpoint, std::string_view method,
                              std::string_view target, const std::string& body,
                              const CallOptions& options);
// The same on the Unix socket at `socket_path`.
Result<HttpResponse> HttpCall(const std::string& socket_path, std::string_view method,
                              std::string_view target, const std::string& body,
                              int timeout_ms = 30000, std::string_view idempotency_key = "");

// Whether the process listening on `socket_path` (SO_PEERCRED: `peer_uid`, named
// `peer_name`) may receive a request from `self_uid`: only the caller's own daemon or root's
// (a shared daemon). A request carries the caller's whole environment.
Status JudgeListener(const std::string& socket_path, int64_t peer_uid, std::string_view peer_name,
                     int64_t self_uid);

// The peer a TCP client at `ip` counts as for max_connections_per_peer: an IPv4 address
// itself (IPv4-mapped IPv6 too), an IPv6 address its /64 ("2001:db8:1:2::/64": one host
// commonly holds a whole /64), loopback and link-local IPv6 addresses themselves. "" for
// what is not an IP address.
std::string TcpPeer(std::string_view ip);

// {"error": {"code": "invalid", "message": "..."}} with the status's HTTP code.
HttpResponse ErrorResponse(const Status& status);
// Splits "a=1&b=x%20y" into a map, percent-decoding.
std::map<std::string, std::string> ParseQuery(std::string_view query);

}  // namespace trainq
