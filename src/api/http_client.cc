#include "src/api/http_call.h"

#include "src/api/tls_call.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {

using namespace http_call;  // NOLINT: the pieces of a call, shared with tls_call.cc
using Local = asio::local::stream_protocol;

namespace {

// Before anything is sent: who listens there?
Status CheckListener(int fd, const std::string& socket_path) {
  Result<PeerCredentials> peer = PeerOf(fd);
  if (!peer.ok()) {
    return Status::Permission("cannot tell who listens on " + socket_path +
                              " (SO_PEERCRED failed); nothing was sent");
  }
  std::string name = UserName(peer->uid);  // its number when the databases do not know it
  if (name == std::to_string(peer->uid)) name.clear();
  return JudgeListener(socket_path, peer->uid, name, EffectiveUid());
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

Result<HttpResponse> CallTcp(const Endpoint& endpoint, Request& req, Call& call,
                             const CallOptions& options) {
  Tcp::socket socket(call.io());
  call.Arm(socket);
  TRAINQ_RETURN_IF_ERROR(ConnectTcp(endpoint, socket, call, options.connect_timeout_ms));
  return Exchange(call, socket, req);
}

#ifdef TRAINQ_TLS_MODULE
using TlsEntry = void (*)(const Endpoint&, const TlsCallArgs&, Result<HttpResponse>&);

// The module beside the binary (a build tree), else in ../lib/trainq (an installed tree).
Result<TlsEntry> LoadTlsModule() {
  Result<std::string> self = SelfExecutable();
  std::string dir = self.ok() ? *self : std::string();
  dir = dir.substr(0, dir.rfind('/') + 1);
  std::string tried;
  for (const std::string& path : {dir + "trainq-tls.so", dir + "../lib/trainq/trainq-tls.so"}) {
    Result<void*> entry = LoadSymbol(path, "trainq_tls_call_v1");
    if (entry.ok()) return reinterpret_cast<TlsEntry>(*entry);
    if (entry.status().code() == Code::kInvalid) {
      return Status::Internal(path +
                              " is not this trainq's TLS module (no trainq_tls_call_v1); "
                              "reinstall trainq; nothing was sent");
    }
    tried += (tried.empty() ? "" : "; ") + entry.status().message();
  }
  // Not kUnavailable: that reads as "no daemon answers" and is tried again.
  return Status::Internal(
      "https needs trainq's TLS module, trainq-tls.so, which could not be "
      "loaded (" +
      tried + "); reinstall trainq; nothing was sent");
}
#endif

}  // namespace

Result<HttpResponse> CallTls(const Endpoint& endpoint, std::string_view method,
                             std::string_view target, const std::string& body,
                             const CallOptions& options, std::string_view host) {
#ifdef TRAINQ_TLS_MODULE
  static const Result<TlsEntry> entry = LoadTlsModule();
  if (!entry.ok()) return entry.status();
  Result<HttpResponse> out = Status::Internal("the TLS module gave no answer");
  (*entry)(endpoint, TlsCallArgs{method, target, &body, &options, host}, out);
  return out;
#else
  return TlsCall(endpoint, method, target, body, options, host);
#endif
}

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
  bool unix_socket = endpoint.kind == Endpoint::Kind::kUnix;
  std::string host =
      unix_socket ? "trainq" : ListenAddress{endpoint.host, endpoint.port}.Describe();
  if (endpoint.kind == Endpoint::Kind::kHttps) {
    return CallTls(endpoint, method, target, body, options, host);
  }
  Call call(options.timeout_ms);
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

Result<Upgraded> HttpUpgrade(const std::string& socket_path, std::string_view target,
                             std::string_view protocol, int timeout_ms) {
  CallOptions options;
  options.timeout_ms = timeout_ms;
  TRAINQ_RETURN_IF_ERROR(CheckRequestText("GET", target, options));
  if (protocol.empty() ||
      protocol.find_first_of(std::string_view(" \t\r\n\0", 5)) != std::string_view::npos) {
    return Status::Invalid("Upgrade: expected a protocol token");
  }
  Call call(timeout_ms);
  Request req = MakeRequest("GET", target, "", options, "trainq");
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, beast::string_view(protocol.data(), protocol.size()));
  Local::socket socket(call.io());
  call.Arm(socket);
  beast::error_code ec = call.Await([&](auto handler) {
    socket.async_connect(Local::endpoint(socket_path), std::move(handler));
  });
  if (ec) return Unreachable(socket_path, ec);
  TRAINQ_RETURN_IF_ERROR(CheckListener(socket.native_handle(), socket_path));
  ec = call.Await([&](auto handler) { http::async_write(socket, req, std::move(handler)); });
  if (ec) return Status::Io("sending to the trainq daemon failed: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  ec = call.Await(
      [&](auto handler) { http::async_read_header(socket, buffer, parser, std::move(handler)); });
  if (!ec && parser.get().result() != http::status::switching_protocols && !parser.is_done()) {
    ec = call.Await(
        [&](auto handler) { http::async_read(socket, buffer, parser, std::move(handler)); });
  }
  if (ec) return Status::Io("reading the trainq daemon's answer failed: " + ec.message());
  const http::response<http::string_body>& res = parser.get();
  Upgraded out;
  if (res.result() != http::status::switching_protocols) {
    out.answer = HttpResponse{static_cast<int>(res.result_int()), res.body(),
                              std::string(res[http::field::content_type])};
    return out;
  }
  out.early.assign(static_cast<const char*>(buffer.data().data()), buffer.size());
  out.fd = socket.release(ec);
  if (ec) return Status::Io("taking the switched connection failed: " + ec.message());
  return out;
}

}  // namespace trainq
