#include "src/api/asio.h"

#include <sys/socket.h>
#include <sys/time.h>

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

}  // namespace

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

  http::request<http::string_body> req(
      http::string_to_verb(beast::string_view(method.data(), method.size())),
      beast::string_view(target.data(), target.size()), 11);
  req.set(http::field::host, "trainq");
  req.set(http::field::content_type, "application/json");
  if (!idempotency_key.empty()) {
    req.set("Idempotency-Key",
            beast::string_view(idempotency_key.data(), idempotency_key.size()));
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
