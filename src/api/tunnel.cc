// The far end of a switched connection: a Unix socket, or another server asked the same
// switch over http(s), each opened without blocking the event loop.
#include "src/api/tunnel.h"

#include <chrono>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "src/api/tls_client.h"

namespace trainq::tunnel {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using Local = asio::local::stream_protocol;
using Tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

template <class Stream>
class StreamEnd final : public FarEnd {
 public:
  template <class... Args>
  explicit StreamEnd(std::shared_ptr<ssl::context> tls, Args&&... args)
      : tls_(std::move(tls)), stream_(std::forward<Args>(args)...) {}
  Stream& stream() { return stream_; }
  auto& socket() { return beast::get_lowest_layer(stream_); }
  void ReadSome(asio::mutable_buffer into, ReadDone done) override {
    stream_.async_read_some(into, std::move(done));
  }
  void WriteAll(asio::const_buffer bytes, WriteDone done) override {
    asio::async_write(stream_, bytes,
                      [done = std::move(done)](boost::system::error_code ec, size_t) { done(ec); });
  }
  // No TLS close_notify: the two ends' own protocol says when it is over.
  void ShutdownSend() override {
    boost::system::error_code ignored;
    socket().shutdown(asio::socket_base::shutdown_send, ignored);
  }
  void Close() override {
    boost::system::error_code ignored;
    socket().shutdown(asio::socket_base::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  std::shared_ptr<ssl::context> tls_;  // before stream_: it outlives it
  Stream stream_;
};

Opened Unreachable(const TunnelTarget& target, const std::string& where, const std::string& why) {
  return {nullptr, ErrorResponse(Status::Unavailable(
                       fmt::format("{} cannot be reached at {}: {}", target.what, where, why)))};
}

// A Unix socket whose listener may still be starting: tried every 50 ms until the deadline.
class UnixOpener : public std::enable_shared_from_this<UnixOpener> {
 public:
  UnixOpener(asio::any_io_executor executor, std::shared_ptr<const TunnelTarget> target,
             std::function<void(Opened)> done)
      : executor_(std::move(executor)),
        target_(std::move(target)),
        done_(std::move(done)),
        retry_(executor_),
        give_up_(Clock::now() + std::chrono::milliseconds(target_->options.timeout_ms)) {}

  void Try() {
    end_ = std::make_shared<StreamEnd<Local::socket>>(nullptr, executor_);
    end_->stream().async_connect(
        Local::endpoint(target_->unix_path),
        [self = shared_from_this()](boost::system::error_code ec) { self->OnConnect(ec); });
  }

 private:
  void OnConnect(boost::system::error_code ec) {
    if (!ec) return done_({end_, {}});
    bool starting = ec == boost::system::errc::no_such_file_or_directory ||
                    ec == boost::system::errc::connection_refused;
    constexpr std::chrono::milliseconds kRetry{50};
    if (!starting || Clock::now() + kRetry >= give_up_) {
      return done_(Unreachable(*target_, target_->unix_path, ec.message()));
    }
    retry_.expires_after(kRetry);
    retry_.async_wait([self = shared_from_this()](boost::system::error_code wait_ec) {
      if (!wait_ec) self->Try();
    });
  }

  asio::any_io_executor executor_;
  std::shared_ptr<const TunnelTarget> target_;
  std::function<void(Opened)> done_;
  asio::steady_timer retry_;
  Clock::time_point give_up_;
  std::shared_ptr<StreamEnd<Local::socket>> end_;
};

// Another server, asked the same switch: resolve, connect, (TLS: handshake, verifying it,)
// the request, the answer's head; all under the target's timeout.
template <class Stream>
class PeerOpener : public std::enable_shared_from_this<PeerOpener<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, Tcp::socket>;

  PeerOpener(asio::any_io_executor executor, std::shared_ptr<const TunnelTarget> target,
             std::function<void(Opened)> done, std::shared_ptr<ssl::context> tls)
      : target_(std::move(target)),
        done_(std::move(done)),
        resolver_(executor),
        deadline_(executor) {
    if constexpr (kTls) {
      end_ = std::make_shared<StreamEnd<Stream>>(tls, executor, *tls);
      ExpectServerName(end_->stream().native_handle(), target_->endpoint.host);
    } else {
      end_ = std::make_shared<StreamEnd<Stream>>(nullptr, executor);
    }
  }

  void Start() {
    const Endpoint& at = target_->endpoint;
    request_ = {http::verb::get, target_->target, 11};
    request_.set(http::field::host, ListenAddress{at.host, at.port}.Describe());
    request_.set(http::field::connection, "Upgrade");
    request_.set(http::field::upgrade, target_->protocol);
    if (!target_->options.authorization.empty()) {
      request_.set(http::field::authorization, target_->options.authorization);
    }
    auto self = this->shared_from_this();
    deadline_.expires_after(std::chrono::milliseconds(target_->options.timeout_ms));
    deadline_.async_wait([self](boost::system::error_code ec) {
      if (ec || self->finished_) return;
      self->expired_ = true;
      self->resolver_.cancel();
      self->end_->Close();
    });
    resolver_.async_resolve(
        at.host, std::to_string(at.port),
        [self](boost::system::error_code ec, const Tcp::resolver::results_type& found) {
          if (ec) return self->Fail(ec);
          asio::async_connect(self->end_->socket(), found,
                              [self](boost::system::error_code c, const Tcp::endpoint&) {
                                if (c) return self->Fail(c);
                                self->Handshake();
                              });
        });
  }

 private:
  void Handshake() {
    if constexpr (kTls) {
      end_->stream().async_handshake(ssl::stream_base::client, [self = this->shared_from_this()](
                                                                   boost::system::error_code ec) {
        if (!ec) return self->Send();
        self->Finish({nullptr, ErrorResponse(HandshakeFailed(
                                   self->target_->endpoint, self->end_->stream().native_handle(),
                                   ec, self->expired_, self->target_->options.ca_name))});
      });
    } else {
      Send();
    }
  }

  void Send() {
    auto self = this->shared_from_this();
    http::async_write(end_->stream(), request_, [self](boost::system::error_code ec, size_t) {
      if (ec) return self->Fail(ec);
      self->parser_.body_limit(1u << 20);
      http::async_read_header(
          self->end_->stream(), self->buffer_, self->parser_,
          [self](boost::system::error_code head_ec, size_t) { self->OnHead(head_ec); });
    });
  }

  void OnHead(boost::system::error_code ec) {
    if (ec) return Fail(ec);
    if (parser_.get().result() == http::status::switching_protocols) {
      end_->early.assign(static_cast<const char*>(buffer_.data().data()), buffer_.size());
      return Finish({end_, {}});
    }
    // Its refusal is the client's answer: the other server knows best why.
    auto self = this->shared_from_this();
    http::async_read(
        end_->stream(), buffer_, parser_, [self](boost::system::error_code body_ec, size_t) {
          if (body_ec) return self->Fail(body_ec);
          const auto& res = self->parser_.get();
          self->end_->Close();
          self->Finish({nullptr, HttpResponse{static_cast<int>(res.result_int()), res.body(),
                                              std::string(res[http::field::content_type])}});
        });
  }

  void Fail(boost::system::error_code ec) {
    end_->Close();
    Finish(
        Unreachable(*target_, target_->endpoint.Describe(), expired_ ? "timed out" : ec.message()));
  }

  void Finish(Opened opened) {
    if (finished_) return;
    finished_ = true;
    deadline_.cancel();
    done_(std::move(opened));
  }

  std::shared_ptr<const TunnelTarget> target_;
  std::function<void(Opened)> done_;
  Tcp::resolver resolver_;
  asio::steady_timer deadline_;
  std::shared_ptr<StreamEnd<Stream>> end_;
  http::request<http::empty_body> request_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  bool expired_ = false;
  bool finished_ = false;
};

}  // namespace

void Open(asio::any_io_executor executor, std::shared_ptr<const TunnelTarget> target,
          std::function<void(Opened)> done) {
  if (!target->unix_path.empty()) {
    auto opener =
        std::make_shared<UnixOpener>(std::move(executor), std::move(target), std::move(done));
    return opener->Try();
  }
  if (target->endpoint.kind == Endpoint::Kind::kHttp) {
    auto opener = std::make_shared<PeerOpener<Tcp::socket>>(std::move(executor), std::move(target),
                                                            std::move(done), nullptr);
    return opener->Start();
  }
  // `done` is called from the loop, never from within Open.
  auto answer = [&executor, &done](Opened opened) {
    asio::post(executor, [done = std::move(done), opened = std::move(opened)]() mutable {
      done(std::move(opened));
    });
  };
  if (target->endpoint.kind != Endpoint::Kind::kHttps) {
    return answer(Unreachable(*target, target->endpoint.Describe(), "not an http(s) address"));
  }
  Result<std::unique_ptr<ssl::context>> tls =
      ClientTlsContext(target->options.ca_file, target->options.ca_name);
  if (!tls.ok()) return answer({nullptr, ErrorResponse(tls.status())});
  auto opener = std::make_shared<PeerOpener<ssl::stream<Tcp::socket>>>(
      std::move(executor), std::move(target), std::move(done),
      std::shared_ptr<ssl::context>(std::move(*tls)));
  opener->Start();
}

}  // namespace trainq::tunnel
