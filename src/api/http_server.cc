// Beast lives in this file and http_client.cc only: it is slow to compile.
#include "src/api/asio.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

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

// One connection: read a request, hand it to the handler, write the answer, repeat while the
// client keeps the connection alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Local::socket socket, const HttpHandler& handler, uint64_t max_body)
      : socket_(std::move(socket)), handler_(handler), max_body_(max_body) {}

  void Start() {
    PeerCred cred = ReadPeerCred(socket_.native_handle());
    peer_uid_ = cred.uid;
    peer_pid_ = cred.pid;
    ReadNext();
  }

 private:
  void ReadNext() {
    parser_.emplace();
    parser_->body_limit(max_body_);
    parser_->header_limit(64 * 1024);
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      return Close();
    }
    if (ec) {
      keep_alive_ = false;
      Status st = ec == http::error::body_limit
                      ? Status::Invalid("request body is larger than the limit of " +
                                        std::to_string(max_body_) + " bytes")
                      : Status::Invalid("malformed HTTP request: " + ec.message());
      HttpResponse r = ErrorResponse(st);
      if (ec == http::error::body_limit) r.status = 413;
      return Write(std::move(r));
    }
    http::request<http::string_body> req = parser_->release();
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
    handler_(std::move(out),
             [self = shared_from_this()](HttpResponse r) { self->Write(std::move(r)); });
  }

  void Write(HttpResponse r) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "trainq");
    res->set(http::field::content_type, r.content_type);
    res->keep_alive(keep_alive_);
    res->body() = std::move(r.body);
    res->prepare_payload();
    http::async_write(socket_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec || !self->keep_alive_) return self->Close();
                        self->ReadNext();
                      });
  }

  void Close() {
    beast::error_code ignored;
    socket_.shutdown(Local::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  Local::socket socket_;
  const HttpHandler& handler_;
  uint64_t max_body_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
  int64_t peer_uid_ = -1;
  int64_t peer_pid_ = -1;
};

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& io, HttpHandler h, uint64_t max_body)
      : io(io), handler(std::move(h)), max_body(max_body) {}

  void Accept() {
    acceptor->async_accept([self = shared_from_this()](beast::error_code ec, Local::socket s) {
      if (ec == asio::error::operation_aborted || !self->acceptor || !self->acceptor->is_open())
        return;
      if (!ec) std::make_shared<Session>(std::move(s), self->handler, self->max_body)->Start();
      self->Accept();
    });
  }

  asio::io_context& io;
  HttpHandler handler;
  uint64_t max_body;
  std::optional<Local::acceptor> acceptor;
};

HttpServer::HttpServer(asio::io_context& io, HttpHandler handler, uint64_t max_body_bytes)
    : impl_(std::make_shared<Impl>(io, std::move(handler), max_body_bytes)) {}

HttpServer::~HttpServer() { Close(); }

Status HttpServer::ListenUnix(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::Invalid("socket path is too long for a Unix socket: " + path);
  }
  ::unlink(path.c_str());  // a stale socket of a dead daemon; the daemon lock guards live ones
  beast::error_code ec;
  impl_->acceptor.emplace(impl_->io);
  impl_->acceptor->open(Local(), ec);
  if (!ec) {
    mode_t old = ::umask(0177);  // the socket is born 0600: no window for other users
    impl_->acceptor->bind(Local::endpoint(path), ec);
    ::umask(old);
  }
  if (!ec) impl_->acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Io("cannot listen on " + path + ": " + ec.message());
  impl_->Accept();
  return Status::Ok();
}

void HttpServer::Close() {
  if (impl_ && impl_->acceptor) {
    beast::error_code ignored;
    impl_->acceptor->close(ignored);
  }
}

}  // namespace trainq
