// Beast lives in this file and http_client.cc only: it is slow to compile.
#include "src/api/asio.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <list>
#include <map>
#include <optional>
#include <type_traits>
#include <vector>

#include <openssl/ssl.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "src/api/growing_body.h"
#include "src/api/http.h"
#include "src/api/tunnel.h"
#include "src/core/json_codec.h"
#include "src/os/permissions.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Local = asio::local::stream_protocol;
using Tcp = asio::ip::tcp;
namespace ssl = asio::ssl;
using TlsStream = ssl::stream<Tcp::socket>;

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

// Whether bytes (or the end of the stream) wait to be read on `fd`, without waiting.
bool Readable(int fd) { return !WaitReadable(std::span<const int>(&fd, 1), 0).empty(); }

PeerCred ReadPeerCred(int fd) {
  Result<PeerCredentials> peer = PeerOf(fd);
  if (!peer.ok()) return {};
  return {peer->uid, peer->pid};
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

template <class Stream>
struct IsTls : std::false_type {};
template <class Next>
struct IsTls<ssl::stream<Next>> : std::true_type {};

std::string EndpointText(const Tcp::endpoint& e) {
  std::string ip = e.address().to_string();
  if (e.address().is_v6()) ip = "[" + ip + "]";
  return ip + ":" + std::to_string(e.port());
}

std::string TcpPeerOf(asio::ip::address ip) {
  if (ip.is_v6() && ip.to_v6().is_v4_mapped()) {
    ip = asio::ip::make_address_v4(asio::ip::v4_mapped, ip.to_v6());
  }
  if (ip.is_v4() || ip.is_loopback() || ip.to_v6().is_link_local()) return ip.to_string();
  asio::ip::address_v6::bytes_type bytes = ip.to_v6().to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return asio::ip::address_v6(bytes).to_string() + "/64";
}

// The tiers of the reserve, least trusted first: the connections of a tier and those below
// it may fill max_connections less an eighth for each tier above.
enum class Tier { kTcp = 0, kLocal = 1, kReserved = 2 };
constexpr int kTopTier = static_cast<int>(Tier::kReserved);

// Who is at the other end of a connection, as the limits count it.
struct Peer {
  Tier tier = Tier::kTcp;
  bool capped = true;  // under max_connections_per_peer
  std::string name;    // what the per-peer cap counts: "uid 1001", "192.0.2.7"
  PeerCred cred;       // the Unix socket's SO_PEERCRED
  std::string remote;  // TCP: "ip:port"
};

Peer UnixPeer(Local::socket& socket, const HttpLimits& limits) {
  Peer peer;
  peer.cred = ReadPeerCred(socket.native_handle());
  peer.name = "uid " + std::to_string(peer.cred.uid);
  PeerRank rank = !limits.rank_uid    ? PeerRank::kOwner
                  : peer.cred.uid < 0 ? PeerRank::kUser
                                      : limits.rank_uid(peer.cred.uid);
  peer.tier = rank == PeerRank::kUser ? Tier::kLocal : Tier::kReserved;
  peer.capped = rank != PeerRank::kOwner;
  return peer;
}

Peer NetworkPeer(Tcp::socket& socket) {
  Peer peer;
  beast::error_code ec;
  Tcp::endpoint at = socket.remote_endpoint(ec);
  if (ec) {
    peer.name = "an unknown address";  // gone already; it fails at its first read
  } else {
    peer.name = TcpPeerOf(at.address());
    peer.remote = EndpointText(at);
  }
  return peer;
}

// What the listeners share: the handler, the limits, and every open connection of every
// listener, so the caps and the choice of whom to close count Unix and TCP alike.
class SessionBase {
 public:
  explicit SessionBase(Peer peer) : peer_(std::move(peer)) {}
  virtual ~SessionBase() = default;
  virtual void Close() = 0;
  // Waiting for a request, and none has begun to arrive: a client that sent its request
  // just now, before the loop saw it, is not idle.
  bool idle() { return idle_ && !Readable(fd()); }
  const Peer& peer() const { return peer_; }

 protected:
  virtual int fd() = 0;

  bool idle_ = false;
  const Peer peer_;
};

class Registry {
 public:
  Registry(HttpHandler handler, HttpLimits limits)
      : handler_(std::move(handler)), limits_(std::move(limits)) {
    limits_.max_connections = std::max<size_t>(limits_.max_connections, 1);
    limits_.max_connections_per_peer = std::max<size_t>(limits_.max_connections_per_peer, 1);
    limits_.header_timeout_ms = std::min(limits_.header_timeout_ms, limits_.request_timeout_ms);
  }

  const HttpHandler& handler() const { return handler_; }
  const HttpLimits& limits() const { return limits_; }
  size_t Connections() const { return sessions_.size(); }
  // Makes room for a connection of `peer`, closing idle connections as the caps need; the
  // 503's reason when a cap is reached and nothing it counts is idle.
  Status MakeRoom(const Peer& peer);
  std::list<SessionBase*>::iterator Register(SessionBase* s);
  void Unregister(std::list<SessionBase*>::iterator pos);
  // The session went idle: it moves behind every other, so the front idle one has waited
  // longest.
  void MarkIdle(std::list<SessionBase*>::iterator pos) {
    sessions_.splice(sessions_.end(), sessions_, pos);
  }
  // Closes the connection idle longest, whoever holds it.
  bool CloseOldestIdle() {
    return CloseOldestIdleWhere([](const Peer&) { return true; });
  }
  // A refused connection is answered (a TLS one after its handshake), then read until the
  // client closes it (Session::Linger): at most kMaxRefusing at once, so refusals cannot take
  // every fd. Beyond that the oldest refusal is closed for the newest.
  std::list<SessionBase*>::iterator StartRefusal(SessionBase* s);
  void EndRefusal(std::list<SessionBase*>::iterator pos) { refusing_.erase(pos); }
  void Warn(const std::string& message) const {
    if (limits_.warn) limits_.warn(message);
  }

 private:
  static constexpr size_t kMaxRefusing = 32;
  // Closes the connection idle longest among those whose peer `counts`.
  template <class Pred>
  bool CloseOldestIdleWhere(Pred counts);
  size_t HeldBy(const std::string& peer) const {
    auto it = per_peer_.find(peer);
    return it == per_peer_.end() ? 0 : it->second;
  }
  // Open connections of tiers up to `tier`, and how many they may be.
  size_t HeldUpTo(int tier) const;
  size_t CeilingOf(int tier) const {
    return limits_.max_connections - (kTopTier - tier) * (limits_.max_connections / 8);
  }
  Status PeerFull(const Peer& peer) const;
  Status TierFull(int tier) const;

  HttpHandler handler_;
  HttpLimits limits_;
  std::list<SessionBase*> sessions_;
  std::map<std::string, size_t> per_peer_;  // open connections of each capped peer
  size_t per_tier_[kTopTier + 1] = {};
  std::list<SessionBase*> refusing_;
};

Status Registry::MakeRoom(const Peer& peer) {
  if (peer.capped && HeldBy(peer.name) >= limits_.max_connections_per_peer &&
      !CloseOldestIdleWhere([&](const Peer& p) { return p.capped && p.name == peer.name; })) {
    return PeerFull(peer);
  }
  // The smallest pool first: closing one of its connections frees a place in every larger.
  for (int tier = static_cast<int>(peer.tier); tier <= kTopTier; ++tier) {
    if (HeldUpTo(tier) >= CeilingOf(tier) &&
        !CloseOldestIdleWhere([tier](const Peer& p) { return static_cast<int>(p.tier) <= tier; })) {
      return TierFull(tier);
    }
  }
  return Status::Ok();
}

Status Registry::PeerFull(const Peer& peer) const {
  return Status::Unavailable("too many connections from " + peer.name + ": " +
                             std::to_string(HeldBy(peer.name)) +
                             " open, none idle (max_connections_per_peer); try again shortly");
}

Status Registry::TierFull(int tier) const {
  static constexpr const char* kWhose[] = {
      (" TCP connections open, none idle (max_connections, less a quarter kept for the Unix "
       "socket)"),
      " connections open, none idle (max_connections, less an eighth kept for admins)",
      " connections open, none idle (max_connections)"};
  return Status::Unavailable("the trainq daemon has " + std::to_string(HeldUpTo(tier)) +
                             kWhose[tier] + "; try again shortly");
}

std::list<SessionBase*>::iterator Registry::Register(SessionBase* s) {
  if (s->peer().capped) ++per_peer_[s->peer().name];
  ++per_tier_[static_cast<int>(s->peer().tier)];
  return sessions_.insert(sessions_.end(), s);
}

void Registry::Unregister(std::list<SessionBase*>::iterator pos) {
  const Peer& peer = (*pos)->peer();
  if (peer.capped) {
    auto it = per_peer_.find(peer.name);
    if (--it->second == 0) per_peer_.erase(it);
  }
  --per_tier_[static_cast<int>(peer.tier)];
  sessions_.erase(pos);
}

std::list<SessionBase*>::iterator Registry::StartRefusal(SessionBase* s) {
  if (refusing_.size() >= kMaxRefusing) refusing_.front()->Close();
  return refusing_.insert(refusing_.end(), s);
}

template <class Pred>
bool Registry::CloseOldestIdleWhere(Pred counts) {
  for (SessionBase* s : sessions_) {
    if (counts(s->peer()) && s->idle()) {
      s->Close();
      return true;
    }
  }
  return false;
}

size_t Registry::HeldUpTo(int tier) const {
  size_t n = 0;
  for (int t = 0; t <= tier; ++t) n += per_tier_[t];
  return n;
}

// One connection: (TLS: the handshake,) wait for a request (idle), read its head within the
// head's deadline and all of it within the request's, hand it to the handler, write the
// answer, repeat while the client keeps the connection alive. `Stream` is a Unix socket, a
// TCP socket or TLS over TCP.
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  using Time = std::chrono::steady_clock::time_point;
  // `keep` holds what the stream refers to (the TLS context); `args` make the stream.
  template <class... Args>
  Session(std::shared_ptr<Registry> registry, Peer peer, std::shared_ptr<void> keep, Args&&... args)
      : SessionBase(std::move(peer)),
        registry_(std::move(registry)),
        keep_(std::move(keep)),
        stream_(std::forward<Args>(args)...),
        timer_(stream_.get_executor()),
        head_deadline_(After(registry_->limits().header_timeout_ms)) {}
  ~Session() override { Close(); }

  void Start() {
    pos_ = registry_->Register(this);
    registered_ = true;
    Handshake([](Session& s) { s.WaitForRequest(); });
  }
  // Answers 503 with `why` without parsing the request, then lingers (Linger).
  void Refuse(const Status& why) {
    refusal_pos_ = registry_->StartRefusal(this);
    refusing_ = true;
    Handshake([why](Session& s) { s.Write(ErrorResponse(why)); });
  }
  void Close() override;

 private:
  static Time After(int64_t ms) {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  }
  auto& socket() { return beast::get_lowest_layer(stream_); }
  int fd() override { return socket().native_handle(); }
  template <class Then>
  void Handshake(Then then);
  void SetIdle(bool idle);
  void WaitForRequest();
  void ReadRequest();
  void OnHead(beast::error_code ec);
  void OnRead(beast::error_code ec);
  HttpRequest ToRequest(http::request<GrowingBody>& req);
  void Write(HttpResponse r);
  // A response that goes on (HttpResponse::stream): the head, then what the stream gets.
  void WriteStream(HttpResponse r);
  void PumpStream();
  void SendStream(std::string data);
  // While a stream is sent: a client that closes its end ends the stream.
  void WatchForClose();
  // A switched connection (HttpResponse::tunnel): the far end opened, then 101 and the bytes
  // copied both ways, one buffer in flight each way (the slower side holds the other back).
  void Tunnel(std::shared_ptr<const TunnelTarget> target);
  void OnFarEnd(tunnel::Opened opened, const std::string& protocol);
  void ClientToFar();
  void FarToClient();
  void Linger();
  void DropInput();
  // Closes the connection unless re-armed or cancelled by `at`.
  void Deadline(Time at);

  std::shared_ptr<Registry> registry_;
  std::shared_ptr<void> keep_;  // before stream_: it outlives it
  Stream stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<GrowingBody>> parser_;
  // When the current request's head, and all of it, must be in. The first head's deadline
  // runs from the accept: a connection that never speaks is closed by it.
  Time head_deadline_;
  Time request_deadline_;
  uint64_t deadline_ = 0;  // which Deadline() call the timer serves
  bool first_request_ = true;
  bool keep_alive_ = false;
  bool registered_ = false;
  bool refusing_ = false;
  bool closed_ = false;
  std::list<SessionBase*>::iterator pos_;
  std::list<SessionBase*>::iterator refusal_pos_;
  std::shared_ptr<StreamBody> stream_body_;
  std::shared_ptr<tunnel::FarEnd> far_;
  std::vector<char> from_client_, to_client_;
  bool client_ended_ = false, far_ended_ = false;  // each side's end, passed on to the other
};

// Until a TLS client's first byte its connection is idle: one that never speaks holds no
// more than a plain one that never does, and is closed first when the caps need room.
template <class Stream>
template <class Then>
void Session<Stream>::Handshake(Then then) {
  if constexpr (IsTls<Stream>::value) {
    Deadline(head_deadline_);
    SetIdle(true);
    auto self = this->shared_from_this();
    socket().async_wait(Tcp::socket::wait_read, [self, then](beast::error_code ec) {
      if (ec) return self->Close();
      self->SetIdle(false);
      self->stream_.async_handshake(ssl::stream_base::server, [self, then](beast::error_code e) {
        if (e) return self->Close();
        then(*self);
      });
    });
  } else {
    then(*this);
  }
}

template <class Stream>
void Session<Stream>::SetIdle(bool idle) {
  idle_ = idle;
  if (idle && registered_) registry_->MarkIdle(pos_);
}

template <class Stream>
void Session<Stream>::WaitForRequest() {
  if (buffer_.size() > 0) return ReadRequest();  // a pipelined request already arrived
  SetIdle(true);
  Time idle_until = After(registry_->limits().idle_timeout_ms);
  Deadline(first_request_ ? std::min(head_deadline_, idle_until) : idle_until);
  auto self = this->shared_from_this();
  if constexpr (IsTls<Stream>::value) {
    // Decrypted bytes may already wait inside OpenSSL, where waiting on the socket would
    // miss them: read instead.
    stream_.async_read_some(buffer_.prepare(4096), [self](beast::error_code ec, size_t n) {
      if (ec) return self->Close();
      self->buffer_.commit(n);
      self->ReadRequest();
    });
  } else {
    socket().async_wait(Stream::wait_read, [self](beast::error_code ec) {
      if (ec) return self->Close();
      self->ReadRequest();
    });
  }
}

template <class Stream>
void Session<Stream>::ReadRequest() {
  SetIdle(false);
  const HttpLimits& limits = registry_->limits();
  request_deadline_ = After(limits.request_timeout_ms);
  if (!first_request_) head_deadline_ = After(limits.header_timeout_ms);
  first_request_ = false;
  Deadline(std::min(head_deadline_, request_deadline_));
  parser_.emplace();
  parser_->body_limit(limits.max_body_bytes);
  parser_->header_limit(limits.max_header_bytes);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHead(ec); });
}

template <class Stream>
void Session<Stream>::OnHead(beast::error_code ec) {
  if (ec || closed_) return OnRead(ec);
  Deadline(request_deadline_);
  http::async_read(stream_, buffer_, *parser_,
                   [self = this->shared_from_this()](beast::error_code body_ec, size_t) {
                     self->OnRead(body_ec);
                   });
}

template <class Stream>
void Session<Stream>::OnRead(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
      ec == ssl::error::stream_truncated || closed_) {
    return Close();
  }
  if (ec) {
    keep_alive_ = false;
    const HttpLimits& limits = registry_->limits();
    HttpResponse r;
    if (ec == http::error::body_limit) {
      r = ErrorResponse(Status::Invalid("request body is larger than the limit of " +
                                        std::to_string(limits.max_body_bytes) + " bytes"));
      r.status = 413;
    } else if (ec == http::error::header_limit) {
      r = ErrorResponse(Status::Invalid("request header is larger than the limit of " +
                                        std::to_string(limits.max_header_bytes) + " bytes"));
      r.status = 431;
    } else {
      r = ErrorResponse(Status::Invalid("malformed HTTP request: " + ec.message()));
    }
    return Write(std::move(r));
  }
  timer_.cancel();  // the handler's own time is the daemon's, not the client's
  http::request<GrowingBody> req = parser_->release();
  keep_alive_ = req.keep_alive();
  registry_->handler()(ToRequest(req), [self = this->shared_from_this()](HttpResponse r) {
    self->Write(std::move(r));
  });
}

template <class Stream>
HttpRequest Session<Stream>::ToRequest(http::request<GrowingBody>& req) {
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
  if (auto auth = req.find(http::field::authorization); auth != req.end()) {
    out.authorization = std::string(auth->value());
  }
  if (auto tag = req.find(http::field::if_none_match); tag != req.end()) {
    out.if_none_match = std::string(tag->value());
  }
  if (http::token_list(req[http::field::connection]).exists("upgrade")) {
    out.upgrade = std::string(req[http::field::upgrade]);
  }
  if constexpr (std::is_same_v<Stream, Local::socket>) {
    out.peer_uid = peer_.cred.uid;
    out.peer_pid = peer_.cred.pid;
  } else {
    out.tcp = true;
    out.remote = peer_.remote;
  }
  return out;
}

template <class Stream>
void Session<Stream>::Write(HttpResponse r) {
  if (closed_) return;
  if (r.stream) return WriteStream(std::move(r));
  if (r.tunnel) return Tunnel(std::move(r.tunnel));
  auto res =
      std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
  res->set(http::field::server, "trainq");
  res->set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) res->set(name, value);
  res->keep_alive(keep_alive_);
  res->body() = std::move(r.body);
  res->prepare_payload();
  Deadline(After(registry_->limits().request_timeout_ms));  // a client that never reads
  http::async_write(stream_, *res,
                    [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
                      if (!ec && self->refusing_) return self->Linger();
                      if (ec || !self->keep_alive_) return self->Close();
                      self->WaitForRequest();
                    });
}

// No length: the body runs until the connection closes (HTTP/1.1 allows it with Connection:
// close), which is what a stream's end is. A client that stops reading for idle_timeout_ms
// while bytes wait is closed; one that waits for events has no deadline (the writer's
// keep-alive comments find a vanished one).
template <class Stream>
void Session<Stream>::WriteStream(HttpResponse r) {
  keep_alive_ = false;
  stream_body_ = std::move(r.stream);
  auto res =
      std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(r.status), 11);
  res->set(http::field::server, "trainq");
  res->set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) res->set(name, value);
  res->keep_alive(false);
  auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
  Deadline(After(registry_->limits().idle_timeout_ms));
  http::async_write_header(stream_, *sr,
                           [self = this->shared_from_this(), res, sr, first = std::move(r.body)](
                               beast::error_code ec, size_t) mutable {
                             if (ec) return self->Close();
                             self->WatchForClose();
                             if (first.empty()) return self->PumpStream();
                             self->SendStream(std::move(first));
                           });
}

template <class Stream>
void Session<Stream>::PumpStream() {
  if (closed_) return;
  std::string data = stream_body_->Take();
  if (!data.empty()) return SendStream(std::move(data));
  if (stream_body_->ended()) return Close();
  timer_.cancel();
  stream_body_->OnMore([self = this->shared_from_this()] {
    asio::post(self->stream_.get_executor(), [self] { self->PumpStream(); });
  });
}

template <class Stream>
void Session<Stream>::SendStream(std::string data) {
  auto bytes = std::make_shared<std::string>(std::move(data));
  Deadline(After(registry_->limits().idle_timeout_ms));
  asio::async_write(stream_, asio::buffer(*bytes),
                    [self = this->shared_from_this(), bytes](beast::error_code ec, size_t) {
                      if (ec) return self->Close();
                      self->PumpStream();
                    });
}

template <class Stream>
void Session<Stream>::WatchForClose() {
  auto scratch = std::make_shared<std::array<char, 512>>();
  stream_.async_read_some(asio::buffer(*scratch),
                          [self = this->shared_from_this(), scratch](beast::error_code ec, size_t) {
                            if (ec) return self->Close();
                            self->WatchForClose();
                          });
}

// The end of a stream, plain or TLS (a peer's end without close_notify is one too).
inline bool EndOfStream(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == ssl::error::stream_truncated;
}

// Opening the far end is bounded by its own timeout; the client has none once switched (a
// terminal may be silent for hours). Each side's end is passed on to the other as a
// half-close; both ended, or an error on either, closes the connection.
template <class Stream>
void Session<Stream>::Tunnel(std::shared_ptr<const TunnelTarget> target) {
  keep_alive_ = false;
  ++deadline_;  // no deadline of the client's applies from here
  timer_.cancel();
  std::string protocol = target->protocol;
  tunnel::Open(stream_.get_executor(), std::move(target),
               [self = this->shared_from_this(), protocol](tunnel::Opened opened) {
                 self->OnFarEnd(std::move(opened), protocol);
               });
}

template <class Stream>
void Session<Stream>::OnFarEnd(tunnel::Opened opened, const std::string& protocol) {
  if (closed_) {
    if (opened.far) opened.far->Close();
    return;
  }
  if (!opened.far) return Write(std::move(opened.refusal));
  far_ = std::move(opened.far);
  auto head = std::make_shared<std::string>(
      "HTTP/1.1 101 Switching Protocols\r\nServer: trainq\r\nConnection: Upgrade\r\nUpgrade: " +
      protocol + "\r\n\r\n" + std::exchange(far_->early, std::string()));
  asio::async_write(
      stream_, asio::buffer(*head),
      [self = this->shared_from_this(), head](beast::error_code ec, size_t) {
        if (ec || self->closed_) return self->Close();
        self->from_client_.resize(64 * 1024);
        self->to_client_.resize(64 * 1024);
        self->FarToClient();
        // What the client sent after its request, before the switch, goes first.
        if (self->buffer_.size() == 0) return self->ClientToFar();
        auto early = std::make_shared<std::string>(
            static_cast<const char*>(self->buffer_.data().data()), self->buffer_.size());
        self->buffer_.consume(self->buffer_.size());
        self->far_->WriteAll(asio::buffer(*early), [self, early](beast::error_code write_ec) {
          if (write_ec) return self->Close();
          self->ClientToFar();
        });
      });
}

template <class Stream>
void Session<Stream>::ClientToFar() {
  auto self = this->shared_from_this();
  stream_.async_read_some(asio::buffer(from_client_), [self](beast::error_code ec, size_t n) {
    if (self->closed_) return;
    if (EndOfStream(ec)) {
      self->client_ended_ = true;
      if (self->far_ended_) return self->Close();
      return self->far_->ShutdownSend();
    }
    if (ec) return self->Close();
    self->far_->WriteAll(asio::buffer(self->from_client_.data(), n),
                         [self](beast::error_code write_ec) {
                           if (write_ec || self->closed_) return self->Close();
                           self->ClientToFar();
                         });
  });
}

template <class Stream>
void Session<Stream>::FarToClient() {
  auto self = this->shared_from_this();
  far_->ReadSome(asio::buffer(to_client_), [self](beast::error_code ec, size_t n) {
    if (self->closed_) return;
    if (EndOfStream(ec)) {
      // The far end said all it had: the client is told so, and closing the connection is
      // left to it (closing with its bytes unread would reset what it has not read yet).
      self->far_ended_ = true;
      if (self->client_ended_) return self->Close();
      beast::error_code ignored;
      self->socket().shutdown(asio::socket_base::shutdown_send, ignored);
      return self->Deadline(After(self->registry_->limits().header_timeout_ms));
    }
    if (ec) return self->Close();
    asio::async_write(self->stream_, asio::buffer(self->to_client_.data(), n),
                      [self](beast::error_code write_ec, size_t) {
                        if (write_ec || self->closed_) return self->Close();
                        self->FarToClient();
                      });
  });
}

// A refused client may not have sent its request yet, or not all of it: closing with its
// bytes unread, or before they come, would reset the connection, and its answer with it
// (the client's write fails with EPIPE first). So the rest is read and dropped until the
// client closes, by the head's deadline.
template <class Stream>
void Session<Stream>::Linger() {
  beast::error_code ignored;
  socket().shutdown(asio::socket_base::shutdown_send, ignored);
  Deadline(head_deadline_);
  DropInput();
}

template <class Stream>
void Session<Stream>::DropInput() {
  socket().async_read_some(buffer_.prepare(4096),
                           [self = this->shared_from_this()](beast::error_code ec, size_t) {
                             if (ec) return self->Close();
                             self->DropInput();
                           });
}

// A timer that expired before it was re-armed still runs its handler, with success: after
// a stall of the loop, the deadline of a wait that a request has since ended would close
// that request's connection. Only the latest deadline counts.
template <class Stream>
void Session<Stream>::Deadline(Time at) {
  timer_.expires_at(at);
  timer_.async_wait([self = this->shared_from_this(), n = ++deadline_](beast::error_code ec) {
    if (!ec && n == self->deadline_) self->Close();
  });
}

// No TLS close_notify: the answer was complete (its length is in its header), and waiting
// for a client's reply to it would let the client hold the connection.
template <class Stream>
void Session<Stream>::Close() {
  if (closed_) return;
  closed_ = true;
  idle_ = false;
  if (registered_) registry_->Unregister(pos_);
  registered_ = false;
  if (refusing_) registry_->EndRefusal(refusal_pos_);
  refusing_ = false;
  if (stream_body_) stream_body_->Close();
  if (far_) far_->Close();
  timer_.cancel();
  beast::error_code ignored;
  socket().shutdown(asio::socket_base::shutdown_both, ignored);
  socket().close(ignored);
}

class AcceptorBase {
 public:
  virtual ~AcceptorBase() = default;
  virtual void Close() = 0;
};

// One listening socket (Unix or TCP, TLS or not): accepts into sessions of the registry.
template <class Protocol>
class Acceptor final : public AcceptorBase,
                       public std::enable_shared_from_this<Acceptor<Protocol>> {
 public:
  using Endpoint = typename Protocol::endpoint;
  Acceptor(asio::io_context& io, std::shared_ptr<Registry> registry,
           std::shared_ptr<ssl::context> tls)
      : registry_(std::move(registry)), tls_(std::move(tls)), acceptor_(io), pause_(io) {}

  // Opens, binds and listens (a Unix socket is born 0600).
  Status Listen(const Endpoint& at, const std::string& what, bool reuse_address);
  void Start() { Accept(); }
  void Close() override {
    closed_ = true;
    pause_.cancel();
    beast::error_code ignored;
    acceptor_.close(ignored);
  }
  int Port() {
    if constexpr (std::is_same_v<Protocol, Tcp>) {
      beast::error_code ec;
      return acceptor_.local_endpoint(ec).port();
    }
    return 0;
  }

 private:
  void Accept() {
    acceptor_.async_accept(
        [self = this->shared_from_this()](beast::error_code ec, typename Protocol::socket s) {
          self->OnAccept(ec, std::move(s));
        });
  }
  void OnAccept(beast::error_code ec, typename Protocol::socket socket);
  // Takes `socket` into a session, or answers it 503 when the caps leave no room.
  template <class Stream, class... Args>
  void Admit(typename Protocol::socket socket, Args&&... args);
  void OnAcceptError(beast::error_code ec);
  bool ClientWaiting() { return Readable(acceptor_.native_handle()); }  // in the backlog

  std::shared_ptr<Registry> registry_;
  std::shared_ptr<ssl::context> tls_;  // null: plain
  typename Protocol::acceptor acceptor_;
  asio::steady_timer pause_;
  // A failing accept() is warned about at most once per kWarnEvery, not per try.
  static constexpr std::chrono::minutes kWarnEvery{1};
  bool warned_ = false;
  std::chrono::steady_clock::time_point last_warning_;
  uint64_t accept_failures_ = 0;
  bool closed_ = false;
};

template <class Protocol>
Status Acceptor<Protocol>::Listen(const Endpoint& at, const std::string& what, bool reuse_address) {
  beast::error_code ec;
  acceptor_.open(at.protocol(), ec);
  if (!ec && reuse_address) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) {
    if constexpr (std::is_same_v<Protocol, Local>) {
      mode_t old = SetUmask(0177);  // the socket is born 0600: no window for other users
      acceptor_.bind(at, ec);
      SetUmask(old);
    } else {
      acceptor_.bind(at, ec);
    }
  }
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Io("cannot listen on " + what + ": " + ec.message());
  return Status::Ok();
}

template <class Protocol>
void Acceptor<Protocol>::OnAccept(beast::error_code ec, typename Protocol::socket socket) {
  if (closed_ || ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) return OnAcceptError(ec);
  if constexpr (std::is_same_v<Protocol, Local>) {
    Admit<Local::socket>(std::move(socket));
  } else if (tls_) {
    Admit<TlsStream>(std::move(socket), *tls_);
  } else {
    Admit<Tcp::socket>(std::move(socket));
  }
  Accept();
}

template <class Protocol>
template <class Stream, class... Args>
void Acceptor<Protocol>::Admit(typename Protocol::socket socket, Args&&... args) {
  Peer peer;
  if constexpr (std::is_same_v<Protocol, Local>) {
    peer = UnixPeer(socket, registry_->limits());
  } else {
    peer = NetworkPeer(socket);
  }
  Status room = registry_->MakeRoom(peer);
  auto session = std::make_shared<Session<Stream>>(registry_, std::move(peer), tls_,
                                                   std::move(socket), std::forward<Args>(args)...);
  if (room.ok()) {
    session->Start();
  } else {
    session->Refuse(room);
  }
}

// accept() failing leaves the listening socket readable: accepting again at once would spin
// (EMFILE at the fd limit ran the daemon at 95 % CPU). Out of fds, close the connection idle
// longest, but only for a client that waits: Linux fails accept() with EMFILE before it looks
// at the backlog, so an empty backlog would cost an idle client for nothing. Otherwise wait
// a moment.
template <class Protocol>
void Acceptor<Protocol>::OnAcceptError(beast::error_code ec) {
  bool no_fd = ec == asio::error::no_descriptors || ec.value() == ENFILE;
  const HttpLimits& limits = registry_->limits();
  ++accept_failures_;
  auto now = std::chrono::steady_clock::now();
  if (!warned_ || now - last_warning_ >= kWarnEvery) {
    registry_->Warn("accepting an API connection failed: " + ec.message() + " (" +
                    std::to_string(accept_failures_) + " time(s) since the last warning, " +
                    std::to_string(registry_->Connections()) + " connections open); " +
                    (no_fd ? "closing idle connections for waiting clients, else retrying every "
                           : "retrying every ") +
                    std::to_string(limits.accept_pause_ms) + " ms");
    warned_ = true;
    last_warning_ = now;
    accept_failures_ = 0;
  }
  if (no_fd && ClientWaiting() && registry_->CloseOldestIdle()) return Accept();
  pause_.expires_after(std::chrono::milliseconds(limits.accept_pause_ms));
  pause_.async_wait([self = this->shared_from_this()](beast::error_code wait_ec) {
    if (!wait_ec && !self->closed_) self->Accept();
  });
}

std::string SslReason(const beast::error_code& ec) {
  std::string m = ec.message();
  return m.empty() ? "unknown error" : m;
}

Result<std::shared_ptr<ssl::context>> ServerTlsContext(const TlsFiles& tls) {
  if (tls.cert.empty() || tls.key.empty()) {
    return Status::Invalid(
        "tls_cert and tls_key go together: set both (a PEM certificate chain and its private "
        "key) or neither");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::single_dh_use);
  beast::error_code ec;
  ctx->use_certificate_chain_file(tls.cert, ec);
  if (ec) {
    return Status::Invalid("tls_cert: cannot use " + tls.cert +
                           " as a PEM certificate chain: " + SslReason(ec));
  }
  ctx->use_private_key_file(tls.key, ssl::context::pem, ec);
  if (ec) {
    return Status::Invalid("tls_key: cannot use " + tls.key + " as the PEM private key of " +
                           tls.cert + ": " + SslReason(ec));
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return Status::Invalid("tls_key: " + tls.key +
                           " is not the private key of the certificate in " + tls.cert);
  }
  return ctx;
}

Result<Tcp::endpoint> ResolveListenAddress(asio::io_context& io, const std::string& host,
                                           int port) {
  beast::error_code ec;
  asio::ip::address ip = asio::ip::make_address(host, ec);
  if (!ec) return Tcp::endpoint(ip, static_cast<unsigned short>(port));
  Tcp::resolver resolver(io);
  auto found = resolver.resolve(host, std::to_string(port), Tcp::resolver::passive, ec);
  if (ec || found.empty()) {
    return Status::Invalid("listen: cannot resolve " + host + ": " +
                           (ec ? ec.message() : "no address"));
  }
  return found.begin()->endpoint();
}

}  // namespace

Status CheckTlsFiles(const TlsFiles& tls) { return ServerTlsContext(tls).status(); }

std::string TcpPeer(std::string_view ip) {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(std::string(ip), ec);
  return ec ? "" : TcpPeerOf(address);
}

struct HttpServer::Impl {
  asio::io_context& io;
  std::shared_ptr<Registry> registry;
  std::vector<std::shared_ptr<AcceptorBase>> acceptors;
};

HttpServer::HttpServer(asio::io_context& io, HttpHandler handler, HttpLimits limits)
    : impl_(std::make_shared<Impl>(
          Impl{io, std::make_shared<Registry>(std::move(handler), std::move(limits)), {}})) {}

HttpServer::~HttpServer() { Close(); }

Status HttpServer::ListenUnix(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::Invalid("socket path is too long for a Unix socket: " + path);
  }
  // A stale socket of a dead daemon; the daemon lock guards live ones.
  (void)RemoveFile(path);
  auto acceptor = std::make_shared<Acceptor<Local>>(impl_->io, impl_->registry, nullptr);
  TRAINQ_RETURN_IF_ERROR(acceptor->Listen(Local::endpoint(path), path, false));
  acceptor->Start();
  impl_->acceptors.push_back(acceptor);
  return Status::Ok();
}

Result<int> HttpServer::ListenTcp(const std::string& host, int port, const TlsFiles& tls) {
  std::shared_ptr<ssl::context> ctx;
  if (tls.enabled()) {
    Result<std::shared_ptr<ssl::context>> made = ServerTlsContext(tls);
    if (!made.ok()) return made.status();
    ctx = std::move(*made);
  }
  Result<Tcp::endpoint> at = ResolveListenAddress(impl_->io, host, port);
  if (!at.ok()) return at.status();
  auto acceptor = std::make_shared<Acceptor<Tcp>>(impl_->io, impl_->registry, std::move(ctx));
  TRAINQ_RETURN_IF_ERROR(acceptor->Listen(*at, EndpointText(*at), true));
  acceptor->Start();
  impl_->acceptors.push_back(acceptor);
  return acceptor->Port();
}

void HttpServer::Close() {
  for (auto& a : impl_->acceptors) a->Close();
}

size_t HttpServer::Connections() const { return impl_->registry->Connections(); }

}  // namespace trainq
