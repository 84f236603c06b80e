// What a client call is made of, for the two files that make one: http_client.cc (Unix
// socket, plain TCP) and tls_call.cc (https, linked into the daemon, loaded by the client as
// a module). Beast and Asio are here, so nothing else includes this.
#pragma once

#include "src/api/asio.h"

#include <chrono>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "src/api/http.h"

namespace trainq::http_call {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Tcp = asio::ip::tcp;

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

inline Request MakeRequest(std::string_view method, std::string_view target,
                           const std::string& body, const CallOptions& options,
                           std::string_view host) {
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
  constexpr uint64_t kMaxBody = 1ull << 34;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBody);
  ec = call.Await(
      [&](auto handler) { http::async_read_header(stream, buffer, parser, std::move(handler)); });
  if (ec) return Status::Io("reading the trainq daemon's answer failed: " + ec.message());
  std::string body;
  auto length = parser.content_length();  // boost::optional
  if (!parser.is_done() && length && *length <= kMaxBody) {
    // A body of known length goes straight into its string: Beast reads 64 KiB at a time
    // and copies each, and a node's chunks come megabytes at a time.
    body.resize(*length);
    size_t have = asio::buffer_copy(asio::buffer(body), buffer.data());
    ec = call.Await([&](auto handler) {
      asio::async_read(stream, asio::buffer(body.data() + have, body.size() - have),
                       std::move(handler));
    });
  } else if (!parser.is_done()) {
    ec = call.Await(
        [&](auto handler) { http::async_read(stream, buffer, parser, std::move(handler)); });
    body = std::move(parser.get().body());
  }
  if (ec) return Status::Io("reading the trainq daemon's answer failed: " + ec.message());
  const http::response<http::string_body>& res = parser.get();
  return HttpResponse{static_cast<int>(res.result_int()), std::move(body),
                      std::string(res[http::field::content_type])};
}

inline Status Unreachable(const std::string& where, const beast::error_code& ec) {
  return Status::Unavailable("cannot reach the trainq daemon at " + where + ": " + ec.message());
}

// Connects `socket` to the endpoint's host and port within `connect_timeout_ms` (0: the
// call's own deadline); kUnavailable when it cannot.
inline Status ConnectTcp(const Endpoint& endpoint, Tcp::socket& socket, Call& call,
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

}  // namespace trainq::http_call
