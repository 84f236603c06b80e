#include "src/api/asio.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "src/api/http.h"

namespace trainq {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Local = asio::local::stream_protocol;

namespace {

void SetTimeouts(int fd, int timeout_ms) {
  struct timeval tv {};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

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

Result<HttpResponse> HttpCall(const std::string& socket_path, std::string_view method,
                              std::string_view target, const std::string& body, int timeout_ms,
                              std::string_view idempotency_key) {
  asio::io_context io;
  Local::socket socket(io);
  beast::error_code ec;
  socket.connect(Local::endpoint(socket_path), ec);
  if (ec)
    return Status::Unavailable("cannot reach the trainq daemon at " + socket_path + ": " +
                               ec.message());
  SetTimeouts(socket.native_handle(), timeout_ms);
  TRAINQ_RETURN_IF_ERROR(CheckListener(socket.native_handle(), socket_path));

  http::request<http::string_body> req(
      http::string_to_verb(beast::string_view(method.data(), method.size())),
      beast::string_view(target.data(), target.size()), 11);
  req.set(http::field::host, "trainq");
  req.set(http::field::content_type, "application/json");
  if (!idempotency_key.empty()) {
    req.set("Idempotency-Key", beast::string_view(idempotency_key.data(), idempotency_key.size()));
  }
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req, ec);
  // kIo from here on: the request may have been received, so it must not be resent blindly.
  if (ec) return Status::Io("sending to the trainq daemon failed: " + ec.message());

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 34);
  http::read(socket, buffer, parser, ec);
  if (ec) return Status::Io("reading the trainq daemon's answer failed: " + ec.message());
  http::response<http::string_body> res = parser.release();
  socket.shutdown(Local::socket::shutdown_both, ec);
  return HttpResponse{static_cast<int>(res.result_int()), std::move(res.body()),
                      std::string(res[http::field::content_type])};
}

}  // namespace trainq
