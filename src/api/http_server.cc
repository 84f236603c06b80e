// Beast lives in this file and http_client.cc only: it is slow to compile.
#include "src/api/asio.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <list>
#include <optional>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "src/api/growing_body.h"
#include "src/api/http.h"
#include "src/core/json_codec.h"

namespace trainq {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Local = asio::local::stream_protocol;

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

struct PeerCred {
  int64_t uid = -1;
  int64_t pid = -1;
};

PeerCred ReadPeerCred(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return {};
  return {cred.uid, cred.pid};
}

}  // namespace

HttpResponse ErrorResponse(const Status& status) {
  nlohmann::json body = {
      {"error", {{"code", CodeName(status.code())}, {"message", status.message()}}}};
  return {HttpStatusFor(status.code()), DumpJson(body), "application/json"};
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    size_t eq = part.find('=');
    std::string key = PercentDecode(part.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : PercentDecode(part.substr(eq + 1));
    if (!key.empty()) out[key] = value;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

namespace {

class Listener;

// One connection: wait for a request (idle), read it within the request deadline, hand it to
// the handler, write the answer, repeat while the client keeps the connection alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Local::socket socket, std::shared_ptr<Listener> listener);
  ~Session();

  void Start();
  // Answers 503 (too many connections) without reading, then closes.
  void Refuse(size_t cap);
  void Close();
  bool idle() const { return idle_; }

 private:
  void WaitForRequest();
  void ReadRequest();
  void OnRead(beast::error_code ec);
  void Write(HttpResponse r);
  // Closes the connection unless re-armed or cancelled within `ms`.
  void Deadline(int64_t ms);

  Local::socket socket_;
  std::shared_ptr<Listener> listener_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<GrowingBody>> parser_;
  bool keep_alive_ = false;
  bool idle_ = false;
  bool registered_ = false;
  bool closed_ = false;
  std::list<Session*>::iterator pos_;
  int64_t peer_uid_ = -1;
  int64_t peer_pid_ = -1;
};

// The listening socket and the registry of open connections, oldest idle first.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context& io, HttpHandler handler, HttpLimits limits)
      : io_(io), handler_(std::move(handler)), limits_(std::move(limits)), pause_(io) {
    limits_.max_connections = std::max<size_t>(limits_.max_connections, 1);
  }

  Status Listen(const std::string& path);
  void Close();
  size_t Connections() const { return sessions_.size(); }

  const HttpHandler& handler() const { return handler_; }
  const HttpLimits& limits() const { return limits_; }
  std::list<Session*>::iterator Register(Session* s) {
    return sessions_.insert(sessions_.end(), s);
  }
  void Unregister(std::list<Session*>::iterator pos) { sessions_.erase(pos); }
  // The session went idle: it moves behind every other, so the front idle one has waited
  // longest.
  void MarkIdle(std::list<Session*>::iterator pos) {
    sessions_.splice(sessions_.end(), sessions_, pos);
  }

 private:
  void Accept();
  void OnAccept(beast::error_code ec, Local::socket socket);
  void OnAcceptError(beast::error_code ec);
  bool CloseOldestIdle();
  bool ClientWaiting();  // a connection waits in the backlog
  void Warn(const std::string& message) const {
    if (limits_.warn) limits_.warn(message);
  }

  asio::io_context& io_;
  HttpHandler handler_;
  HttpLimits limits_;
  std::optional<Local::acceptor> acceptor_;
  asio::steady_timer pause_;
  std::list<Session*> sessions_;
  // A failing accept() is warned about at most once per kWarnEvery, not per try.
  static constexpr std::chrono::minutes kWarnEvery{1};
  bool warned_ = false;
  std::chrono::steady_clock::time_point last_warning_;
  uint64_t accept_failures_ = 0;
  bool closed_ = false;
};

Session::Session(Local::socket socket, std::shared_ptr<Listener> listener)
    : socket_(std::move(socket)), listener_(std::move(listener)), timer_(socket_.get_executor()) {}

Session::~Session() { Close(); }

void Session::Start() {
  pos_ = listener_->Register(this);
  registered_ = true;
  PeerCred cred = ReadPeerCred(socket_.native_handle());
  peer_uid_ = cred.uid;
  peer_pid_ = cred.pid;
  WaitForRequest();
}

void Session::Refuse(size_t cap) {
  Write(ErrorResponse(
      Status::Unavailable("the trainq daemon has " + std::to_string(cap) +
                          " connections open, none idle (max_connections); try again shortly")));
}

void Session::WaitForRequest() {
  if (buffer_.size() > 0) return ReadRequest();  // a pipelined request already arrived
  idle_ = true;
  listener_->MarkIdle(pos_);
  Deadline(listener_->limits().idle_timeout_ms);
  socket_.async_wait(Local::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
    if (ec) return self->Close();
    self->ReadRequest();
  });
}

void Session::ReadRequest() {
  idle_ = false;
  Deadline(listener_->limits().request_timeout_ms);
  parser_.emplace();
  parser_->body_limit(listener_->limits().max_body_bytes);
  parser_->header_limit(64 * 1024);
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
}

void Session::OnRead(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::operation_aborted || closed_) {
    return Close();
  }
  if (ec) {
    keep_alive_ = false;
    uint64_t max_body = listener_->limits().max_body_bytes;
    Status st = ec == http::error::body_limit
                    ? Status::Invalid("request body is larger than the limit of " +
                                      std::to_string(max_body) + " bytes")
                    : Status::Invalid("malformed HTTP request: " + ec.message());
    HttpResponse r = ErrorResponse(st);
    if (ec == http::error::body_limit) r.status = 413;
    return Write(std::move(r));
  }
  timer_.cancel();  // the handler's own time is the daemon's, not the client's
  http::request<GrowingBody> req = parser_->release();
  keep_alive_ = req.keep_alive();
  HttpRequest out;
  out.method = std::string(req.method_string());
  std::string_view target(req.target().data(), req.target().size());
  size_t q = target.find('?');
  out.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) out.query = ParseQuery(target.substr(q + 1));
  out.body = std::move(req.body());
  if (auto key = req.find("Idempotency-Key"); key != req.end()) {
    out.idempotency_key = std::string(key->value());
  }
  out.peer_uid = peer_uid_;
  out.peer_pid = peer_pid_;
  listener_->handler()(std::move(out),
                       [self = shared_from_this()](HttpResponse r) { self->Write(std::move(r)); });
}

void Session::Write(HttpResponse r) {
  if (closed_) return;
  auto res =
      std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
  res->set(http::field::server, "trainq");
  res->set(http::field::content_type, r.content_type);
  res->keep_alive(keep_alive_);
  res->body() = std::move(r.body);
  res->prepare_payload();
  Deadline(listener_->limits().request_timeout_ms);  // a client that never reads
  http::async_write(socket_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
    if (ec || !self->keep_alive_) return self->Close();
    self->WaitForRequest();
  });
}

void Session::Deadline(int64_t ms) {
  timer_.expires_after(std::chrono::milliseconds(ms));
  timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->Close();
  });
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  idle_ = false;
  if (registered_) listener_->Unregister(pos_);
  registered_ = false;
  timer_.cancel();
  beast::error_code ignored;
  socket_.shutdown(Local::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

Status Listener::Listen(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::Invalid("socket path is too long for a Unix socket: " + path);
  }
  ::unlink(path.c_str());  // a stale socket of a dead daemon; the daemon lock guards live ones
  beast::error_code ec;
  acceptor_.emplace(io_);
  acceptor_->open(Local(), ec);
  if (!ec) {
    mode_t old = ::umask(0177);  // the socket is born 0600: no window for other users
    acceptor_->bind(Local::endpoint(path), ec);
    ::umask(old);
  }
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Io("cannot listen on " + path + ": " + ec.message());
  Accept();
  return Status::Ok();
}

void Listener::Close() {
  closed_ = true;
  pause_.cancel();
  if (acceptor_) {
    beast::error_code ignored;
    acceptor_->close(ignored);
  }
}

void Listener::Accept() {
  acceptor_->async_accept([self = shared_from_this()](beast::error_code ec, Local::socket s) {
    self->OnAccept(ec, std::move(s));
  });
}

void Listener::OnAccept(beast::error_code ec, Local::socket socket) {
  if (closed_ || ec == asio::error::operation_aborted || !acceptor_->is_open()) return;
  if (ec) return OnAcceptError(ec);
  auto session = std::make_shared<Session>(std::move(socket), shared_from_this());
  if (sessions_.size() >= limits_.max_connections && !CloseOldestIdle()) {
    session->Refuse(limits_.max_connections);
  } else {
    session->Start();
  }
  Accept();
}

// accept() failing leaves the listening socket readable: accepting again at once would spin
// (EMFILE at the fd limit ran the daemon at 95 % CPU). Out of fds, close the connection idle
// longest, but only for a client that waits: Linux fails accept() with EMFILE before it looks
// at the backlog, so an empty backlog would cost an idle client for nothing. Otherwise wait
// a moment.
void Listener::OnAcceptError(beast::error_code ec) {
  bool no_fd = ec == asio::error::no_descriptors || ec.value() == ENFILE;
  ++accept_failures_;
  auto now = std::chrono::steady_clock::now();
  if (!warned_ || now - last_warning_ >= kWarnEvery) {
    Warn("accepting an API connection failed: " + ec.message() + " (" +
         std::to_string(accept_failures_) + " time(s) since the last warning, " +
         std::to_string(sessions_.size()) + " connections open); " +
         (no_fd ? "closing idle connections for waiting clients, else retrying every "
                : "retrying every ") +
         std::to_string(limits_.accept_pause_ms) + " ms");
    warned_ = true;
    last_warning_ = now;
    accept_failures_ = 0;
  }
  if (no_fd && ClientWaiting() && CloseOldestIdle()) return Accept();
  pause_.expires_after(std::chrono::milliseconds(limits_.accept_pause_ms));
  pause_.async_wait([self = shared_from_this()](beast::error_code wait_ec) {
    if (!wait_ec && !self->closed_) self->Accept();
  });
}

bool Listener::ClientWaiting() {
  pollfd p{acceptor_->native_handle(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

bool Listener::CloseOldestIdle() {
  for (Session* s : sessions_) {
    if (s->idle()) {
      s->Close();
      return true;
    }
  }
  return false;
}

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<Listener> listener;
};

HttpServer::HttpServer(asio::io_context& io, HttpHandler handler, HttpLimits limits)
    : impl_(std::make_shared<Impl>(
          Impl{std::make_shared<Listener>(io, std::move(handler), std::move(limits))})) {}

HttpServer::~HttpServer() { Close(); }

Status HttpServer::ListenUnix(const std::string& path) { return impl_->listener->Listen(path); }

void HttpServer::Close() { impl_->listener->Close(); }

size_t HttpServer::Connections() const { return impl_->listener->Connections(); }

}  // namespace trainq
