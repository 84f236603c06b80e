#include "src/api/asio.h"

#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "src/api/http.h"

namespace trainq {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Local = asio::local::stream_protocol;
using Tcp = asio::ip::tcp;
namespace ssl = asio::ssl;

namespace {

std::string UserNameOf(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found) return found->pw_name;
  return "";
}

// Before anything is sent: who listens there?
Status CheckListener(int fd, const std::string& socket_path) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::Permission("cannot tell who listens on " + socket_path +
                              " (SO_PEERCRED failed); nothing was sent");
  }
  return JudgeListener(socket_path, cred.uid, UserNameOf(cred.uid), ::geteuid());
}

}  // namespace

Status JudgeListener(const std::string& socket_path, int64_t peer_uid, std::string_view peer_name,
                     int64_t self_uid) {
  if (peer_uid == self_uid || peer_uid == 0) return Status::Ok();
  std::string who = "uid " + std::to_string(peer_uid);
  if (!peer_name.empty()) who = "user " + std::string(peer_name) + " (" + who + ")";
  return Status::Permission(
      "refusing to talk to " + socket_path + ": the process listening there runs as " + who +
      ", not as you (uid " + std::to_string(self_uid) +
      ") or root, so it is not your trainq daemon; nothing was sent. Find out who put it "
      "there, remove that socket file, or use another --state-dir");
}

namespace {

using Request = http::request<http::string_body>;

// One call's io_context and deadline: every step runs asynchronously until it ends or the
// deadline closes the socket under it (a blocking socket with SO_RCVTIMEO would not do:
// Asio polls again after the timeout).
class Call {
 public:
  explicit Call(int timeout_ms) : timer_(io_), step_timer_(io_) {
    timer_.expires_after(std::chrono::milliseconds(std::max(timeout_ms, 1)));
  }
  asio::io_context& io() { return io_; }
  bool expired() const { return expired_; }

  // From now on the deadline closes `socket`.
  template <class Socket>
  void Arm(Socket& socket) {
    timer_.async_wait([this, &socket](beast::error_code ec) {
      if (ec) return;
      expired_ = true;
      beast::error_code ignored;
      socket.close(ignored);
    });
  }
  // Until Settle(), a deadline of `ms` (0: none) closes `socket` too: a connection's own,
  // shorter than the whole call's.
  template <class Socket>
  void Limit(Socket& socket, int ms) {
    if (ms <= 0) return;
    step_timer_.expires_after(std::chrono::milliseconds(ms));
    step_timer_.async_wait([this, &socket](beast::error_code ec) {
      if (ec) return;
      expired_ = true;
      beast::error_code ignored;
      socket.close(ignored);
    });
  }
  void Settle() { step_timer_.cancel(); }
  // Starts one operation with a handler and runs the loop until it completes.
  template <class Start>
  beast::error_code Await(Start start) {
    std::optional<beast::error_code> done;
    start([&done](beast::error_code ec, auto&&...) { done = ec; });
    while (!done && io_.run_one() > 0) {
    }
    if (expired_) return asio::error::timed_out;
    return done.value_or(asio::error::timed_out);
  }

 private:
  asio::io_context io_;
  asio::steady_timer timer_;
  asio::steady_timer step_timer_;
  bool expired_ = false;
};

Request MakeRequest(std::string_view method, std::string_view target, const std::string& body,
                    const CallOptions& options, std::string_view host) {
  Request req(http::string_to_verb(beast::string_view(method.data(), method.size())),
              beast::string_view(target.data(), target.size()), 11);
  req.set(http::field::host, beast::string_view(host.data(), host.size()));
  req.set(http::field::content_type, "application/json");
  if (!options.idempotency_key.empty()) req.set("Idempotency-Key", options.idempotency_key);
  if (!options.bearer_token.empty()) {
    req.set(http::field::authorization, "Bearer " + options.bearer_token);
  }
  if (!options.authorization.empty()) req.set(http::field::authorization, options.authorization);
  req.body() = body;
  req.prepare_payload();
  return req;
}

// The request out and the answer in, once the connection (and TLS) is up.
template <class Stream>
Result<HttpResponse> Exchange(Call& call, Stream& stream, Request& req) {
  beast::error_code ec =
      call.Await([&](auto handler) { http::async_write(stream, req, std::move(handler)); });
  // kIo from here on: the request may have been received, so it must not be resent blindly.
  if (ec) return Status::Io("sending to the trainq daemon failed: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 34);
  ec = call.Await(
      [&](auto handler) { http::async_read(stream, buffer, parser, std::move(handler)); });
  if (ec) return Status::Io("reading the trainq daemon's answer failed: " + ec.message());
  http::response<http::string_body> res = parser.release();
  return HttpResponse{static_cast<int>(res.result_int()), std::move(res.body()),
                      std::string(res[http::field::content_type])};
}

Status Unreachable(const std::string& where, const beast::error_code& ec) {
  return Status::Unavailable("cannot reach the trainq daemon at " + where + ": " + ec.message());
}

Result<HttpResponse> CallUnix(const std::string& path, Request& req, Call& call) {
  Local::socket socket(call.io());
  call.Arm(socket);
  beast::error_code ec = call.Await(
      [&](auto handler) { socket.async_connect(Local::endpoint(path), std::move(handler)); });
  if (ec) return Unreachable(path, ec);
  TRAINQ_RETURN_IF_ERROR(CheckListener(socket.native_handle(), path));
  Result<HttpResponse> out = Exchange(call, socket, req);
  socket.shutdown(Local::socket::shutdown_both, ec);
  return out;
}

// Connects `socket` to the endpoint's host and port within `connect_timeout_ms` (0: the
// call's own deadline); kUnavailable when it cannot.
Status ConnectTcp(const Endpoint& endpoint, Tcp::socket& socket, Call& call,
                  int connect_timeout_ms) {
  Tcp::resolver resolver(call.io());
  beast::error_code ec;
  auto found = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
  if (ec) return Unreachable(endpoint.Describe(), ec);
  call.Limit(socket, connect_timeout_ms);
  ec = call.Await([&](auto handler) { asio::async_connect(socket, found, std::move(handler)); });
  call.Settle();
  if (ec) return Unreachable(endpoint.Describe(), ec);
  return Status::Ok();
}

// Verification of the server's name: its IP address when the URL gives one, else its DNS
// name, which is also sent as SNI.
void ExpectServerName(SSL* ssl_handle, const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle), host.c_str());
    return;
  }
  SSL_set1_host(ssl_handle, host.c_str());
  SSL_set_tlsext_host_name(ssl_handle, host.c_str());
}

Result<std::unique_ptr<ssl::context>> ClientTlsContext(const std::string& ca_file) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  beast::error_code ec;
  // As curl's --cacert: a CA file named replaces the system's store. Reading the store (all
  // of ca-certificates) costs ~20 ms, a third of a TLS submit, and a lab's own CA is the case.
  if (ca_file.empty()) ctx->set_default_verify_paths(ec);  // none is no error: a refusal says
  if (!ca_file.empty()) {
    ctx->load_verify_file(ca_file, ec);
    if (ec) {
      return Status::Invalid("the CA certificate file " + ca_file +
                             " (TRAINQ_CA) cannot be used: " + ec.message());
    }
  }
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

Status HandshakeFailed(const Endpoint& endpoint, SSL* ssl_handle, const beast::error_code& ec,
                       bool expired) {
  long verdict = SSL_get_verify_result(ssl_handle);
  if (verdict != X509_V_OK) {
    return Status::Permission(
        "the TLS certificate of " + endpoint.Describe() + " does not verify (" +
        X509_verify_cert_error_string(verdict) +
        "); nothing was sent. If the server's certificate is signed by your own CA, set "
        "TRAINQ_CA to the CA certificate file");
  }
  return Status::Unavailable("TLS handshake with " + endpoint.Describe() +
                             " failed: " + (expired ? std::string("timed out") : ec.message()) +
                             "; is it serving https?");
}

Result<HttpResponse> CallTcp(const Endpoint& endpoint, Request& req, Call& call,
                             const CallOptions& options) {
  if (endpoint.kind == Endpoint::Kind::kHttp) {
    Tcp::socket socket(call.io());
    call.Arm(socket);
    TRAINQ_RETURN_IF_ERROR(ConnectTcp(endpoint, socket, call, options.connect_timeout_ms));
    return Exchange(call, socket, req);
  }
  Result<std::unique_ptr<ssl::context>> ctx = ClientTlsContext(options.ca_file);
  if (!ctx.ok()) return ctx.status();
  ssl::stream<Tcp::socket> stream(call.io(), **ctx);
  call.Arm(stream.next_layer());
  ExpectServerName(stream.native_handle(), endpoint.host);
  TRAINQ_RETURN_IF_ERROR(
      ConnectTcp(endpoint, stream.next_layer(), call, options.connect_timeout_ms));
  beast::error_code ec = call.Await(
      [&](auto handler) { stream.async_handshake(ssl::stream_base::client, std::move(handler)); });
  if (ec) return HandshakeFailed(endpoint, stream.native_handle(), ec, call.expired());
  // No close_notify after the answer: it is complete, and the connection closes with us.
  return Exchange(call, stream, req);
}

}  // namespace

namespace {

// A request line or header that holds CR, LF or NUL (or a target with a space) would end
// early and start another request on the same connection (request smuggling).
Status CheckRequestText(std::string_view method, std::string_view target,
                        const CallOptions& options) {
  auto bad = [](std::string_view text, std::string_view also) {
    return text.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos ||
           text.find_first_of(also) != std::string_view::npos;
  };
  if (method.empty() || bad(method, " ")) return Status::Invalid("request method: not a token");
  if (target.empty() || target[0] != '/' || bad(target, " \t")) {
    return Status::Invalid(
        "request target: expected a path starting with '/' and no space, tab, CR, LF or NUL");
  }
  for (const std::string* value :
       {&options.idempotency_key, &options.bearer_token, &options.authorization}) {
    if (bad(*value, "")) return Status::Invalid("request header: holds CR, LF or NUL");
  }
  return Status::Ok();
}

}  // namespace

Result<HttpResponse> HttpCall(const Endpoint& endpoint, std::string_view method,
                              std::string_view target, const std::string& body,
                              const CallOptions& options) {
  TRAINQ_RETURN_IF_ERROR(CheckRequestText(method, target, options));
  Call call(options.timeout_ms);
  bool unix_socket = endpoint.kind == Endpoint::Kind::kUnix;
  std::string host =
      unix_socket ? "trainq" : ListenAddress{endpoint.host, endpoint.port}.Describe();
  Request req = MakeRequest(method, target, body, options, host);
  if (unix_socket) return CallUnix(endpoint.path, req, call);
  return CallTcp(endpoint, req, call, options);
}

Result<HttpResponse> HttpCall(const std::string& socket_path, std::string_view method,
                              std::string_view target, const std::string& body, int timeout_ms,
                              std::string_view idempotency_key) {
  Endpoint endpoint;
  endpoint.path = socket_path;
  CallOptions options;
  options.timeout_ms = timeout_ms;
  options.idempotency_key = std::string(idempotency_key);
  return HttpCall(endpoint, method, target, body, options);
}

}  // namespace trainq
