// The server on a real Unix socket in a temp dir, with deadlines of milliseconds: the loop
// runs until what the test waits for happens, never for a fixed time.
#include "src/api/asio.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <boost/beast/http.hpp>

#include "src/api/growing_body.h"
#include "src/api/http.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

// A client end, as a raw fd: the test drives both sides from one thread.
class Client {
 public:
  explicit Client(int family = AF_UNIX) : fd_(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool Connect(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  // To 127.0.0.1, from `from` (any loopback address: a peer of its own) or 127.0.0.1.
  bool ConnectTcp(int port, const char* from = nullptr) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    if (from != nullptr) {
      ::inet_pton(AF_INET, from, &addr.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return false;
    }
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }
  void Send(const std::string& data) {
    ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL), ssize_t(data.size()));
  }
  // Reads what has arrived without waiting; true once the server closed its end.
  bool Drain() {
    char buf[4096];
    while (true) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        received_.append(buf, n);
        continue;
      }
      return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }
  const std::string& received() const { return received_; }

 private:
  int fd_;
  std::string received_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "tq_http_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".sock";
    limits_.request_timeout_ms = 10000;
    limits_.idle_timeout_ms = 10000;
    limits_.warn = [this](const std::string& m) { warnings_.push_back(m); };
  }
  void TearDown() override {
    if (loop_.joinable()) {
      io_.stop();
      loop_.join();
    }
    ::unlink(path_.c_str());
  }

  // The Unix socket, and with `tcp_` 127.0.0.1 on a free port (port_) with `tls_`.
  void Listen() {
    server_ = std::make_unique<HttpServer>(
        io_,
        [this](HttpRequest r, Responder respond) {
          if (r.path == "/events") {
            auto stream = std::make_shared<StreamBody>(64);
            streams_.push_back(stream);
            return respond({200, ": hello\n\n", "text/event-stream", {{"X-Test", "1"}}, stream});
          }
          if (r.path == "/page") {
            return respond({200,
                            "<p>" + r.if_none_match + "</p>",
                            "text/html",
                            {{"ETag", "\"abc\""}, {"Cache-Control", "no-cache"}}});
          }
          std::string body =
              "{\"path\":\"" + r.path + "\",\"bytes\":" + std::to_string(r.body.size()) + "}";
          std::shared_ptr<const TunnelTarget> tunnel;
          if (auto t = tunnels_.find(r.path); t != tunnels_.end() && r.upgrade == "tq-test") {
            tunnel = t->second;
          }
          {
            // Kept before the answer leaves: a client that has its answer finds it in Requests().
            std::lock_guard lock(mu_);
            requests_.push_back(std::move(r));
          }
          HttpResponse answer{200, std::move(body)};
          answer.tunnel = std::move(tunnel);
          respond(std::move(answer));
        },
        limits_);
    ASSERT_TRUE(server_->ListenUnix(path_).ok());
    if (!tcp_) return;
    Result<int> port = server_->ListenTcp("127.0.0.1", 0, tls_);
    ASSERT_TRUE(port.ok()) << port.status().message();
    port_ = *port;
    for (auto& [path, target] : tunnels_) target->endpoint.port = port_;
  }

  // For clients that block (HttpCall): the server's loop runs on its own thread until
  // TearDown.
  void ServeInBackground() {
    loop_ = std::thread([this] {
      auto work = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }
  std::vector<HttpRequest> Requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

  // Runs the loop until `done` holds; false after `limit` (a generous bound, not a wait).
  template <typename Pred>
  bool RunUntil(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    auto deadline = Clock::now() + limit;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      io_.run_for(std::chrono::milliseconds(2));
    }
    return true;
  }

  // A new connection, once the server took it: one more open, or `evicted` closed. Over
  // TCP from `from` (127.0.0.1 when null).
  std::unique_ptr<Client> Open(Client* evicted = nullptr, bool tcp = false,
                               const char* from = nullptr) {
    auto c = std::make_unique<Client>(tcp ? AF_INET : AF_UNIX);
    size_t before = server_->Connections();
    EXPECT_TRUE(tcp ? c->ConnectTcp(port_, from) : c->Connect(path_));
    EXPECT_TRUE(
        RunUntil([&] { return evicted ? evicted->Drain() : server_->Connections() > before; }));
    return c;
  }
  // A connection mid-request (half a header), which no cap may close for another.
  std::unique_ptr<Client> Busy(bool tcp = false, const char* from = nullptr) {
    auto c = Open(nullptr, tcp, from);
    c->Send("GET /v1/status HTTP/1.1\r\n");
    Settle();
    return c;
  }
  // Runs the loop a moment, so the server takes in what clients already sent (not a wait
  // for anything to happen).
  void Settle() { io_.run_for(std::chrono::milliseconds(20)); }
  // Runs the loop until `c` got a whole error answer (its JSON body ends the answer).
  bool GotError(Client& c) {
    return RunUntil([&] { return (c.Drain(), c.received().ends_with("\"}}")); });
  }
  // A connection that the server refuses: the 503 it got.
  std::string Refused(bool tcp = false, const char* from = nullptr) {
    Client c(tcp ? AF_INET : AF_UNIX);
    EXPECT_TRUE(tcp ? c.ConnectTcp(port_, from) : c.Connect(path_));
    EXPECT_TRUE(GotError(c));
    EXPECT_THAT(c.received(), HasSubstr("503 Service Unavailable"));
    return c.received();
  }

  bool Answered(Client& c) {
    return RunUntil([&] { return (c.Drain(), c.received().find("200 OK") != std::string::npos); });
  }

  boost::asio::io_context io_;
  std::string path_;
  HttpLimits limits_;
  bool tcp_ = false;
  PeerRank rank_ = PeerRank::kUser;  // of every Unix client, where the test sets rank_uid
  TlsFiles tls_;
  int port_ = 0;
  std::vector<std::string> warnings_;
  std::unique_ptr<HttpServer> server_;
  std::thread loop_;
  std::mutex mu_;
  std::vector<HttpRequest> requests_;
  std::vector<std::shared_ptr<StreamBody>> streams_;  // of requests for /events
  // Paths whose upgrade to "tq-test" is switched to a target; set before Listen().
  // The port of an https target is set once listening (PortTunnels).
  std::map<std::string, std::shared_ptr<TunnelTarget>> tunnels_;
};

constexpr const char* kGet = "GET /v1/status HTTP/1.1\r\nHost: trainq\r\n\r\n";

TEST_F(HttpServerTest, KeepAliveConnectionAnswersRequestAfterRequest) {
  Listen();
  auto c = Open();
  c->Send(std::string(kGet) + kGet);  // pipelined
  ASSERT_TRUE(RunUntil([&] {
    c->Drain();
    return c->received().find("/v1/status", c->received().find("/v1/status") + 1) !=
           std::string::npos;
  }));
  c->Send(kGet);  // and after the connection went idle
  ASSERT_TRUE(RunUntil([&] {
    c->Drain();
    size_t n = 0;
    for (size_t at = 0; (at = c->received().find("/v1/status", at)) != std::string::npos; ++at) ++n;
    return n == 3;
  }));
  EXPECT_EQ(server_->Connections(), 1u);
}

TEST_F(HttpServerTest, IdleConnectionIsClosedAfterIdleTimeout) {
  limits_.idle_timeout_ms = 50;
  Listen();
  auto silent = Open();
  auto after_one = Open();
  after_one->Send(kGet);
  auto start = Clock::now();
  EXPECT_TRUE(RunUntil([&] { return silent->Drain() && after_one->Drain(); }));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_THAT(after_one->received(), HasSubstr("200 OK"));
  EXPECT_EQ(server_->Connections(), 0u);
}

TEST_F(HttpServerTest, SlowHeaderAndSlowBodyAreCutAtRequestTimeout) {
  limits_.request_timeout_ms = 50;  // idle_timeout stays 10 s: these are not idle
  Listen();
  auto header = Open();
  header->Send("GET /v1/status HTTP/1.1\r\nHost: tr");
  auto body = Open();
  body->Send("POST /v1/jobs HTTP/1.1\r\nContent-Length: 100\r\n\r\n{");
  EXPECT_TRUE(RunUntil([&] { return header->Drain() && body->Drain(); }, std::chrono::seconds(5)));
  EXPECT_EQ(server_->Connections(), 0u);
}

TEST_F(HttpServerTest, AtTheCapTheConnectionIdleLongestIsClosed) {
  limits_.max_connections = 3;
  Listen();
  auto busy = Open();
  busy->Send("GET /v1/status HTTP/1.1\r\n");  // mid-request: never evicted
  auto first_idle = Open();
  auto second_idle = Open();
  auto used = Open(first_idle.get());  // the cap: first_idle goes, it waited longest
  EXPECT_FALSE(second_idle->Drain());
  EXPECT_FALSE(busy->Drain());
  used->Send(kGet);  // answered and idle again: now the newest idle
  ASSERT_TRUE(Answered(*used));
  auto last = Open(second_idle.get());
  EXPECT_FALSE(used->Drain());
  EXPECT_FALSE(busy->Drain());
  EXPECT_EQ(server_->Connections(), 3u);
}

TEST_F(HttpServerTest, AtTheCapWithNoneIdleTheNewConnectionGets503) {
  limits_.max_connections = 1;
  Listen();
  auto busy = Open();
  busy->Send("GET /v1/status HTTP/1.1\r\n");
  EXPECT_THAT(Refused(), HasSubstr("max_connections"));
  EXPECT_FALSE(busy->Drain());
  EXPECT_EQ(server_->Connections(), 1u);
}

// The 503 may leave before the client sends its request: the server reads and drops it
// rather than close, which would fail the client's write and lose the answer.
TEST_F(HttpServerTest, ARefusedClientThatSendsAfterTheAnswerStillReadsIt) {
  limits_.max_connections = 1;
  Listen();
  auto busy = Busy();
  Client late;
  ASSERT_TRUE(late.Connect(path_));
  ASSERT_TRUE(GotError(late));
  late.Send(kGet);
  late.ShutdownWrite();
  EXPECT_TRUE(RunUntil([&] { return late.Drain(); }));  // closed once the client is done
  EXPECT_THAT(late.received(), HasSubstr("503 Service Unavailable"));
  EXPECT_FALSE(busy->Drain());
}

// A request that arrived before the loop saw it makes its connection busy already: a
// newcomer at the cap must not close it.
TEST_F(HttpServerTest, AConnectionWhoseRequestWaitsUnreadIsNotIdle) {
  limits_.max_connections = 1;
  Listen();
  auto asking = Open();
  Client late;
  ASSERT_TRUE(late.Connect(path_));  // waits in the backlog
  asking->Send(kGet);                // the loop sees it after the newcomer
  ASSERT_TRUE(GotError(late));
  EXPECT_THAT(late.received(), HasSubstr("503 Service Unavailable"));
  EXPECT_TRUE(Answered(*asking));
}

// Sets the soft fd limit to the lowest free fd, so the next fd anyone opens fails EMFILE;
// restores it at the end of the scope.
class NoFreeFds {
 public:
  NoFreeFds() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int lowest = ::dup(0);
    ::close(lowest);
    rlimit lowered = saved_;
    lowered.rlim_cur = lowest;
    ::setrlimit(RLIMIT_NOFILE, &lowered);
  }
  ~NoFreeFds() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

TEST_F(HttpServerTest, OutOfFdsAcceptClosesAnIdleConnection) {
  Listen();
  auto idle = Open();
  Client next;  // its fd exists before the limit falls
  bool idle_closed = false;
  {
    NoFreeFds guard;
    next.Connect(path_);
    idle_closed = RunUntil([&] { return idle->Drain(); });
  }
  EXPECT_TRUE(idle_closed);
  next.Send(kGet);
  ASSERT_TRUE(Answered(next));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("accepting an API connection failed"));
}

TEST_F(HttpServerTest, OutOfFdsAcceptPausesInsteadOfSpinning) {
  limits_.accept_pause_ms = 100;
  Listen();
  Client waiting;
  size_t handlers = 0;
  // UBSan's vptr check opens a pipe the first time it meets a type behind a pointer; with no
  // fd free it would call the server's pause timer a bad object. It meets that type here.
  boost::asio::steady_timer warm(io_, std::chrono::milliseconds(0));
  warm.async_wait([](const boost::system::error_code&) {});
  io_.run_for(std::chrono::milliseconds(10));
  {
    NoFreeFds guard;
    ASSERT_TRUE(waiting.Connect(path_));
    // About 300 ms of failing accepts: a few tries, not the tens of thousands of a spin.
    auto until = Clock::now() + std::chrono::milliseconds(300);
    while (Clock::now() < until) handlers += io_.run_for(std::chrono::milliseconds(10));
  }
  EXPECT_LE(handlers, 20u);
  EXPECT_GE(handlers, 1u);
  ASSERT_EQ(warnings_.size(), 1u);  // once, not per try
  ASSERT_TRUE(RunUntil([&] { return server_->Connections() == 1; }));
  waiting.Send(kGet);
  ASSERT_TRUE(Answered(waiting));
  EXPECT_EQ(warnings_.size(), 1u);
}

// ---- TCP and TLS: the same sessions, limits and cap as the Unix socket ----

TEST_F(HttpServerTest, TcpRequestSaysTcpTheRemoteAndTheAuthorizationHeader) {
  tcp_ = true;
  Listen();
  auto c = Open(nullptr, true);
  c->Send("GET /v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tq_abc\r\n\r\n");
  ASSERT_TRUE(Answered(*c));
  auto unix_client = Open();
  unix_client->Send(kGet);
  ASSERT_TRUE(Answered(*unix_client));
  std::vector<HttpRequest> seen = Requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].tcp);
  EXPECT_THAT(seen[0].remote, ::testing::StartsWith("127.0.0.1:"));
  EXPECT_EQ(seen[0].authorization, "Bearer tq_abc");
  EXPECT_EQ(seen[0].peer_uid, -1);  // no SO_PEERCRED over TCP
  EXPECT_FALSE(seen[1].tcp);
  EXPECT_EQ(seen[1].remote, "");
  EXPECT_EQ(seen[1].authorization, "");
  EXPECT_EQ(seen[1].peer_uid, static_cast<int64_t>(::geteuid()));
}

TEST_F(HttpServerTest, HeaderOverTheLimitIs431AndTheConnectionCloses) {
  tcp_ = true;
  limits_.max_header_bytes = 1024;
  Listen();
  auto c = Open(nullptr, true);
  c->Send("GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(2000, 'a') + "\r\n\r\n");
  ASSERT_TRUE(RunUntil([&] { return c->Drain(); }));
  EXPECT_THAT(c->received(), HasSubstr("431 Request Header Fields Too Large"));
  EXPECT_THAT(c->received(), HasSubstr("\"code\":\"invalid\""));
  EXPECT_THAT(c->received(), HasSubstr("limit of 1024 bytes"));
  EXPECT_TRUE(Requests().empty());
  auto ok = Open(nullptr, true);  // the server keeps serving
  ok->Send("GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(900, 'a') + "\r\n\r\n");
  EXPECT_TRUE(Answered(*ok));
}

TEST_F(HttpServerTest, IdleTcpConnectionIsClosedAfterIdleTimeout) {
  tcp_ = true;
  limits_.idle_timeout_ms = 50;
  Listen();
  auto silent = Open(nullptr, true);
  auto after_one = Open(nullptr, true);
  after_one->Send(kGet);
  auto start = Clock::now();
  EXPECT_TRUE(RunUntil([&] { return silent->Drain() && after_one->Drain(); }));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_THAT(after_one->received(), HasSubstr("200 OK"));
  EXPECT_EQ(server_->Connections(), 0u);
}

// One cap for the Unix socket and TCP: the connection idle longest goes, whichever it is.
TEST_F(HttpServerTest, AtTheCapTheIdleLongestGoesAcrossUnixAndTcp) {
  tcp_ = true;
  limits_.max_connections = 2;
  Listen();
  auto unix_idle = Open();
  auto tcp_idle = Open(nullptr, true);
  auto tcp_new = Open(unix_idle.get(), true);  // the Unix one waited longest
  EXPECT_FALSE(tcp_idle->Drain());
  auto unix_new = Open(tcp_idle.get());  // now the first TCP one has
  EXPECT_FALSE(tcp_new->Drain());
  EXPECT_EQ(server_->Connections(), 2u);
}

// ---- Per peer: one client's connections cannot lock others out ----

TEST_F(HttpServerTest, OneAddressHoldingItsShareCannotStarveAnother) {
  tcp_ = true;
  limits_.max_connections_per_peer = 4;
  Listen();
  std::vector<std::unique_ptr<Client>> hog;
  for (int i = 0; i < 4; ++i) hog.push_back(Busy(true, "127.0.0.2"));
  EXPECT_THAT(Refused(true, "127.0.0.2"),
              HasSubstr("too many connections from 127.0.0.2: 4 open, none idle "
                        "(max_connections_per_peer)"));
  auto other = Open(nullptr, true);  // 127.0.0.1
  other->Send(kGet);
  EXPECT_TRUE(Answered(*other));
  for (auto& c : hog) EXPECT_FALSE(c->Drain());
  EXPECT_EQ(server_->Connections(), 5u);
}

TEST_F(HttpServerTest, AtItsCapAPeersNewConnectionClosesItsOwnIdleOneNotAnothers) {
  tcp_ = true;
  limits_.max_connections_per_peer = 2;
  Listen();
  auto others_idle = Open(nullptr, true);  // idle longest of all, but another peer's
  auto busy = Busy(true, "127.0.0.2");
  auto own_idle = Open(nullptr, true, "127.0.0.2");
  auto fresh = Open(own_idle.get(), true, "127.0.0.2");
  EXPECT_FALSE(others_idle->Drain());
  EXPECT_FALSE(busy->Drain());
  fresh->Send(kGet);
  EXPECT_TRUE(Answered(*fresh));
}

// On the Unix socket a peer is a uid; the owners (root, the server's own user) are not
// counted, admins are.
TEST_F(HttpServerTest, OnTheUnixSocketTheCapCountsAUidAndSparesItsOwners) {
  limits_.max_connections_per_peer = 2;
  limits_.rank_uid = [this](int64_t) { return rank_; };
  Listen();
  auto first = Busy();
  auto second = Busy();
  EXPECT_THAT(Refused(), HasSubstr("too many connections from uid " + std::to_string(::geteuid()) +
                                   ": 2 open, none idle"));
  rank_ = PeerRank::kAdmin;
  EXPECT_THAT(Refused(), HasSubstr("(max_connections_per_peer)"));
  rank_ = PeerRank::kOwner;
  std::vector<std::unique_ptr<Client>> owner;
  for (int i = 0; i < 3; ++i) owner.push_back(Busy());
  auto asks = Open();
  asks->Send(kGet);
  EXPECT_TRUE(Answered(*asks));
  EXPECT_FALSE(first->Drain());
}

// An eighth of the cap is kept for the Unix socket's owners and admins, another for the Unix
// socket: with TCP holding all it may, local users still get in, and admins past them.
TEST_F(HttpServerTest, TcpCannotTakeTheUnixSocketsReserveNorUsersTheAdmins) {
  tcp_ = true;
  limits_.max_connections = 16;  // an eighth is 2: TCP holds 12 at most, local users 14
  limits_.max_connections_per_peer = 100;
  limits_.rank_uid = [this](int64_t) { return rank_; };
  Listen();
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 12; ++i) held.push_back(Busy(true));
  EXPECT_THAT(Refused(true), HasSubstr("12 TCP connections open, none idle (max_connections, "
                                       "less a quarter kept for the Unix socket)"));
  held.push_back(Busy());
  auto user = Open();
  user->Send(kGet);
  ASSERT_TRUE(Answered(*user));
  held.push_back(Open(user.get()));  // the 14th: the idle `user` is closed for it
  held.back()->Send("GET /v1/status HTTP/1.1\r\n");
  Settle();
  EXPECT_THAT(Refused(), HasSubstr("14 connections open, none idle (max_connections, less an "
                                   "eighth kept for admins)"));
  rank_ = PeerRank::kAdmin;
  auto admin = Open();
  admin->Send(kGet);
  EXPECT_TRUE(Answered(*admin));
  for (auto& c : held) EXPECT_FALSE(c->Drain());
}

// ---- The head's deadline: connections that never finish a header ----

TEST_F(HttpServerTest, ASilentConnectionAndHalfAHeaderAreClosedAtHeaderTimeout) {
  limits_.header_timeout_ms = 200;  // request_timeout and idle_timeout stay 10 s
  Listen();
  auto silent = Open();
  auto half = Open();
  half->Send("GET /v1/status HTTP/1.1\r\nHost: tr");
  EXPECT_TRUE(RunUntil([&] { return silent->Drain() && half->Drain(); }, std::chrono::seconds(5)));
  EXPECT_EQ(server_->Connections(), 0u);
}

// The loop stalled (a slow disk, say) past a deadline while a request waited unread: the
// daemon fell behind, not the client, and the request is answered.
TEST_F(HttpServerTest, ARequestThatArrivedInTimeIsAnsweredAfterTheLoopStalled) {
  limits_.header_timeout_ms = 100;
  Listen();
  auto kept = Open();
  kept->Send(kGet);
  ASSERT_TRUE(Answered(*kept));
  auto fresh = Open();
  fresh->Send(kGet);
  kept->Send(kGet);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the loop does not run
  EXPECT_TRUE(Answered(*fresh));
  EXPECT_TRUE(RunUntil([&] {
    kept->Drain();
    return kept->received().find("200 OK", kept->received().find("200 OK") + 1) !=
           std::string::npos;
  }));
}

// A kept-alive connection waits for its next request under idle_timeout; once that request
// starts, its header has header_timeout.
TEST_F(HttpServerTest, OnAKeptAliveConnectionTheHeadDeadlineRunsFromTheRequestsFirstByte) {
  limits_.header_timeout_ms = 100;
  Listen();
  auto c = Open();
  c->Send(kGet);
  ASSERT_TRUE(Answered(*c));
  io_.run_for(std::chrono::milliseconds(300));  // thrice header_timeout, idle
  ASSERT_FALSE(c->Drain());
  c->Send("GET /v1/status HTTP/1.1\r\nHost: tr");
  EXPECT_TRUE(RunUntil([&] { return c->Drain(); }, std::chrono::seconds(5)));
}

// A certificate for localhost and 127.0.0.1 made by the openssl command, as an operator
// would, in a directory of its own.
class TlsTest : public HttpServerTest {
 protected:
  void SetUp() override {
    HttpServerTest::SetUp();
    dir_ = path_ + ".d";
    tcp_ = true;
    tls_ = {dir_ + "/cert.pem", dir_ + "/key.pem"};
    MakeCertificate("localhost", "DNS:localhost,IP:127.0.0.1");
  }
  void MakeCertificate(const std::string& cn, const std::string& alt_names) {
    std::string cmd = "mkdir -p " + dir_ + " && openssl req -x509 -newkey ec -pkeyopt " +
                      "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=" + cn +
                      " -addext subjectAltName=" + alt_names + " -keyout " + tls_.key + " -out " +
                      tls_.cert + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  void TearDown() override {
    HttpServerTest::TearDown();
    std::filesystem::remove_all(dir_);
  }

  Endpoint At(Endpoint::Kind kind, const std::string& host = "localhost") {
    Endpoint e;
    e.kind = kind;
    e.host = host;
    e.port = port_;
    return e;
  }
  CallOptions Trusting() {
    CallOptions o;
    o.timeout_ms = 10000;
    o.ca_file = tls_.cert;  // self-signed: the certificate is its own CA
    o.bearer_token = "tq_secret";
    return o;
  }

  std::string dir_;
};

TEST_F(TlsTest, AClientTrustingTheCaIsServedByNameAndByAddress) {
  Listen();
  ServeInBackground();
  for (const char* host : {"localhost", "127.0.0.1"}) {
    Result<HttpResponse> r =
        HttpCall(At(Endpoint::Kind::kHttps, host), "POST", "/v1/jobs", "{}", Trusting());
    ASSERT_TRUE(r.ok()) << host << ": " << r.status().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_THAT(r->body, HasSubstr("/v1/jobs"));
  }
  std::vector<HttpRequest> seen = Requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].tcp);
  EXPECT_EQ(seen[0].authorization, "Bearer tq_secret");
  EXPECT_EQ(seen[0].body, "{}");
}

// Defect guarded: a client that sends its token to whoever answers on the port.
TEST_F(TlsTest, AClientNotTrustingTheCertificateIsRefusedAndSendsNothing) {
  Listen();
  ServeInBackground();
  CallOptions options = Trusting();
  options.ca_file.clear();
  Result<HttpResponse> r = HttpCall(At(Endpoint::Kind::kHttps), "GET", "/v1/status", "", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermission);
  EXPECT_THAT(r.status().message(), HasSubstr("nothing was sent"));
  EXPECT_THAT(r.status().message(), HasSubstr("set TRAINQ_CA to the CA certificate file"));
  EXPECT_TRUE(Requests().empty());
}

// A trusted certificate for another host is not this host's: the name and the address
// in the URL are checked.
TEST_F(TlsTest, ACertificateForAnotherHostIsRefused) {
  MakeCertificate("gpu1.lab", "DNS:gpu1.lab,IP:10.1.2.3");
  Listen();
  ServeInBackground();
  for (const char* host : {"localhost", "127.0.0.1"}) {
    Result<HttpResponse> r =
        HttpCall(At(Endpoint::Kind::kHttps, host), "GET", "/v1/status", "", Trusting());
    ASSERT_FALSE(r.ok()) << host;
    EXPECT_EQ(r.status().code(), Code::kPermission) << r.status().message();
    EXPECT_THAT(r.status().message(), HasSubstr("mismatch")) << host;
  }
  EXPECT_TRUE(Requests().empty());
}

TEST_F(TlsTest, PlaintextToTheTlsPortAndTlsToAPlainPortFailCleanly) {
  Listen();
  ServeInBackground();
  Result<HttpResponse> plain =
      HttpCall(At(Endpoint::Kind::kHttp), "GET", "/v1/status", "", Trusting());
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), Code::kIo) << plain.status().message();
  EXPECT_TRUE(Requests().empty());

  boost::asio::io_context io2;
  HttpServer plain_server(
      io2,
      [](HttpRequest, Responder respond) {
        respond({200, "{}"});
      },
      limits_);
  Result<int> plain_port = plain_server.ListenTcp("127.0.0.1", 0, {});
  ASSERT_TRUE(plain_port.ok());
  std::thread t([&] { io2.run_for(std::chrono::seconds(5)); });
  Endpoint e = At(Endpoint::Kind::kHttps);
  e.port = *plain_port;
  Result<HttpResponse> tls = HttpCall(e, "GET", "/v1/status", "", Trusting());
  plain_server.Close();
  io2.stop();
  t.join();
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().code(), Code::kUnavailable) << tls.status().message();
  EXPECT_THAT(tls.status().message(), HasSubstr("is it serving https?"));
}

// A lower request_timeout bounds a TLS handshake too.
TEST_F(TlsTest, AHandshakeNeverFinishedIsCutAtRequestTimeout) {
  limits_.request_timeout_ms = 50;
  Listen();
  auto c = Open(nullptr, true);
  c->Send(std::string("\x16\x03\x01", 3));  // the start of a ClientHello
  EXPECT_TRUE(RunUntil([&] { return c->Drain(); }, std::chrono::seconds(5)));
  EXPECT_EQ(server_->Connections(), 0u);
}

TEST_F(TlsTest, AHandshakeNeverFinishedOrNeverBegunIsCutAtHeaderTimeout) {
  limits_.header_timeout_ms = 200;  // request_timeout stays 10 s
  Listen();
  auto silent = Open(nullptr, true);
  auto stalled = Open(nullptr, true);
  stalled->Send(std::string("\x16\x03\x01", 3));
  EXPECT_TRUE(
      RunUntil([&] { return silent->Drain() && stalled->Drain(); }, std::chrono::seconds(5)));
  EXPECT_EQ(server_->Connections(), 0u);
}

// Until its first byte a TLS connection is as idle as a plain one: the cap closes it for a
// newcomer. One mid-handshake is not.
TEST_F(TlsTest, AClientThatSentNothingIsIdleOneMidHandshakeIsNot) {
  limits_.max_connections = 1;
  Listen();
  auto silent = Open(nullptr, true);
  auto stalled = Open(silent.get(), true);
  stalled->Send(std::string("\x16\x03\x01", 3));
  Settle();
  EXPECT_THAT(Refused(), HasSubstr("(max_connections)"));
  EXPECT_FALSE(stalled->Drain());
}

// A TLS connection refused is told so only after its handshake, which it may never do: a few
// such wait at once, the oldest closed for the newest, so refusals cannot take every fd.
TEST_F(TlsTest, FewRefusalsWaitForAHandshakeTheOldestCloseFirst) {
  limits_.max_connections_per_peer = 1;
  limits_.header_timeout_ms = 60000;  // nothing here is closed by a deadline
  limits_.request_timeout_ms = 60000;
  Listen();
  auto held = Open(nullptr, true);
  held->Send(std::string("\x16\x03\x01", 3));
  Settle();
  std::vector<std::unique_ptr<Client>> refused;
  for (int i = 0; i < 40; ++i) {
    refused.push_back(std::make_unique<Client>(AF_INET));
    ASSERT_TRUE(refused.back()->ConnectTcp(port_));
  }
  auto closed = [&] {
    std::vector<size_t> which;
    for (size_t i = 0; i < refused.size(); ++i) {
      if (refused[i]->Drain()) which.push_back(i);
    }
    return which;
  };
  EXPECT_TRUE(RunUntil([&] { return closed().size() == 8; }, std::chrono::seconds(5)));
  Settle();
  EXPECT_THAT(closed(), ::testing::ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_FALSE(held->Drain());
}

TEST_F(TlsTest, UnusableCertificateOrKeyFilesAreNamed) {
  HttpServer server(
      io_, [](HttpRequest, Responder) {}, limits_);
  Result<int> no_key = server.ListenTcp("127.0.0.1", 0, {tls_.cert, dir_ + "/missing.pem"});
  EXPECT_EQ(no_key.status().code(), Code::kInvalid);
  EXPECT_THAT(no_key.status().message(), HasSubstr("tls_key"));
  EXPECT_THAT(no_key.status().message(), HasSubstr("missing.pem"));
  Result<int> key_as_cert = server.ListenTcp("127.0.0.1", 0, {tls_.key, tls_.key});
  EXPECT_EQ(key_as_cert.status().code(), Code::kInvalid);
  EXPECT_THAT(key_as_cert.status().message(), HasSubstr("tls_cert"));
  Result<int> cert_as_key = server.ListenTcp("127.0.0.1", 0, {tls_.cert, tls_.cert});
  EXPECT_EQ(cert_as_key.status().code(), Code::kInvalid);
  EXPECT_THAT(cert_as_key.status().message(), HasSubstr("tls_key"));
  EXPECT_THAT(CheckTlsFiles({tls_.cert, ""}).message(), HasSubstr("tls_cert and tls_key"));
  EXPECT_TRUE(CheckTlsFiles(tls_).ok());
}

TEST(TcpPeerTest, AnAddressCountsAsItselfAnIpv6OneAsItsSlash64) {
  EXPECT_EQ(TcpPeer("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(TcpPeer("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(TcpPeer("2001:db8:1:2:a:b:c:d"), "2001:db8:1:2::/64");
  EXPECT_EQ(TcpPeer("2001:db8:1:2::9"), "2001:db8:1:2::/64");
  EXPECT_EQ(TcpPeer("::1"), "::1");
  EXPECT_EQ(TcpPeer("fe80::1:2"), "fe80::1:2");  // every host on a link shares fe80::/64
  EXPECT_EQ(TcpPeer("gpu1"), "");
}

// A declared Content-Length reserves nothing: memory follows the bytes that arrived.
TEST(GrowingBodyTest, DeclaredLengthReservesNothing) {
  namespace http = boost::beast::http;
  http::request_parser<GrowingBody> parser;
  parser.body_limit(1ull << 30);
  std::string head = "POST /v1/jobs HTTP/1.1\r\nContent-Length: 67108864\r\n\r\n{";
  boost::beast::error_code ec;
  size_t used = parser.put(boost::asio::buffer(head), ec);
  if (!ec && used < head.size())
    parser.put(boost::asio::buffer(head.data() + used, head.size() - used), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.get().body(), "{");
  EXPECT_LT(parser.get().body().capacity(), 64u * 1024);
}

}  // namespace
}  // namespace trainq

namespace trainq {
namespace {

TEST_F(HttpServerTest, AnswerCarriesItsHeadersAndTheRequestItsIfNoneMatch) {
  Listen();
  auto c = Open();
  c->Send("GET /page HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"abc\"\r\n\r\n");
  ASSERT_TRUE(RunUntil([&] { return (c->Drain(), c->received().ends_with("</p>")); }));
  EXPECT_THAT(c->received(), HasSubstr("ETag: \"abc\"\r\n"));
  EXPECT_THAT(c->received(), HasSubstr("Cache-Control: no-cache\r\n"));
  EXPECT_THAT(c->received(), HasSubstr("<p>\"abc\"</p>"));
}

TEST_F(HttpServerTest, AStreamSendsItsHeadThenWhatIsWrittenUntilItEnds) {
  Listen();
  auto c = Open();
  c->Send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(RunUntil([&] { return (c->Drain(), c->received().ends_with(": hello\n\n")); }));
  EXPECT_THAT(c->received(), HasSubstr("Content-Type: text/event-stream\r\n"));
  EXPECT_THAT(c->received(), HasSubstr("X-Test: 1\r\n"));
  EXPECT_THAT(c->received(), HasSubstr("Connection: close\r\n"));
  EXPECT_THAT(c->received(), Not(HasSubstr("Content-Length")));
  EXPECT_THAT(c->received(), Not(HasSubstr("chunked")));
  ASSERT_EQ(streams_.size(), 1u);
  StreamBody& s = *streams_[0];
  // Idle, waiting for events, the stream is neither closed by a deadline nor counted idle.
  io_.run_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(s.closed());
  EXPECT_TRUE(s.Write("data: 1\n\n"));
  EXPECT_TRUE(s.Write("data: 2\n\n"));
  ASSERT_TRUE(RunUntil([&] { return (c->Drain(), c->received().ends_with("data: 2\n\n")); }));
  EXPECT_THAT(c->received(), HasSubstr("data: 1\n\ndata: 2\n\n"));
  EXPECT_TRUE(s.Write("data: 3\n\n"));
  s.End();
  EXPECT_FALSE(s.Write("data: 4\n\n"));
  ASSERT_TRUE(RunUntil([&] { return c->Drain(); }));  // closed by the server
  EXPECT_TRUE(c->received().ends_with("data: 3\n\n"));
  EXPECT_TRUE(RunUntil([&] { return server_->Connections() == 0; }));
}

TEST_F(HttpServerTest, AClientThatGoesAwayClosesItsStream) {
  tcp_ = true;
  Listen();
  auto c = Open(nullptr, true);
  c->Send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(RunUntil([&] { return streams_.size() == 1; }));
  c.reset();
  ASSERT_TRUE(RunUntil([&] { return streams_[0]->closed(); }));
  EXPECT_FALSE(streams_[0]->Write("data: late\n\n"));
  EXPECT_TRUE(RunUntil([&] { return server_->Connections() == 0; }));
}

TEST(StreamBodyTest, AWriteThatWouldPassTheBoundIsRefusedWhole) {
  StreamBody s(10);
  int woken = 0;
  s.OnMore([&] { ++woken; });
  EXPECT_TRUE(s.Write("12345"));
  EXPECT_EQ(woken, 1);
  EXPECT_FALSE(s.Write("123456"));  // 11 unsent: refused, nothing kept
  EXPECT_EQ(s.unsent(), 5u);
  EXPECT_TRUE(s.Write("12345"));
  EXPECT_EQ(woken, 1);  // a wake is asked for again, not kept
  EXPECT_EQ(s.Take(), "1234512345");
  EXPECT_TRUE(s.Write("123456"));  // sent bytes free their room
  s.Close();
  EXPECT_TRUE(s.closed());
  EXPECT_FALSE(s.Write("x"));
}

// A Unix socket that answers each connection's bytes upper-cased until the client's end:
// what a session's shim is to a switched connection.
class UpperServer {
 public:
  explicit UpperServer(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    thread_ = std::thread([this] {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      ssize_t n;
      while ((n = ::read(c, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; ++i) buf[i] = static_cast<char>(std::toupper(buf[i]));
        (void)::send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
      ::close(c);
    });
  }
  ~UpperServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
};

// A target switched to "tq-test": a Unix socket when `unix_path` is set, else the https
// `endpoint`'s `target`.
std::shared_ptr<TunnelTarget> TestTarget(const std::string& what, const std::string& unix_path,
                                         Endpoint endpoint = {}, const std::string& target = "",
                                         CallOptions options = {}) {
  auto t = std::make_shared<TunnelTarget>();
  t->protocol = "tq-test";
  t->what = what;
  t->unix_path = unix_path;
  t->endpoint = std::move(endpoint);
  t->target = target;
  t->options = std::move(options);
  return t;
}

// Reads from `fd` until `want` bytes came or the connection ended; what came.
std::string ReadBytes(int fd, size_t want) {
  std::string out;
  char buf[4096];
  while (out.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// A session on another node: the client's daemon switches the connection and asks the other
// node (over TLS, verified, with its Authorization) to switch too, which joins it to the
// shim's socket. Here one server is both daemons.
TEST_F(TlsTest, ASwitchedConnectionCarriesBytesThroughAnotherServerOverTls) {
  std::string shim = dir_ + "/shim.sock";
  CallOptions quick;
  quick.timeout_ms = 5000;
  tunnels_["/there"] = TestTarget("the terminal of job 7", shim, {}, "", quick);
  CallOptions signed_call = Trusting();
  signed_call.bearer_token.clear();
  signed_call.authorization = "TrainqNode gpu1 1 abc";
  tunnels_["/here"] = TestTarget("the terminal of job 7", "", At(Endpoint::Kind::kHttps),
                                 "/there?attempt=1", signed_call);
  Listen();
  ServeInBackground();
  // The shim binds its socket after the client asked: the far end is tried until it is there.
  std::unique_ptr<UpperServer> upper;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    upper = std::make_unique<UpperServer>(shim);
  });
  Result<Upgraded> up = HttpUpgrade(path_, "/here", "tq-test", 10000);
  late.join();
  ASSERT_TRUE(up.ok()) << up.status().message();
  ASSERT_GE(up->fd, 0) << up->answer.status << " " << up->answer.body;
  EXPECT_EQ(up->early, "");
  std::string text(200000, 'a');  // more than one buffer each way
  std::thread writer([&] {
    ASSERT_EQ(::send(up->fd, text.data(), text.size(), MSG_NOSIGNAL), ssize_t(text.size()));
    ::shutdown(up->fd, SHUT_WR);
  });
  std::string back = ReadBytes(up->fd, text.size() + 1);
  writer.join();
  EXPECT_EQ(back.size(), text.size());  // all of it, then the end
  EXPECT_EQ(back.find_first_not_of('A'), std::string::npos);
  ::close(up->fd);
  std::vector<HttpRequest> seen = Requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].path, "/here");
  EXPECT_FALSE(seen[0].tcp);
  EXPECT_EQ(seen[1].path, "/there");
  EXPECT_TRUE(seen[1].tcp);
  EXPECT_EQ(seen[1].upgrade, "tq-test");
  EXPECT_EQ(seen[1].authorization, "TrainqNode gpu1 1 abc");
  EXPECT_EQ(seen[1].query.at("attempt"), "1");
}

// What cannot be reached is the client's answer, named, and the connection is not switched:
// a socket nobody binds (503 after the target's timeout), another server's own refusal (as
// it gave it), a server whose certificate does not verify, and a request that asks no switch.
TEST_F(TlsTest, AFarEndThatCannotBeOpenedIsTheClientsAnswer) {
  CallOptions brief;
  brief.timeout_ms = 300;
  tunnels_["/nobody"] = TestTarget("the terminal of job 8", dir_ + "/nobody.sock", {}, "", brief);
  // "/plain" answers 200 JSON, no switch.
  tunnels_["/refusing"] =
      TestTarget("the terminal of job 9", "", At(Endpoint::Kind::kHttps), "/plain", Trusting());
  CallOptions system_cas = Trusting();
  system_cas.ca_file.clear();  // the system's CAs know no self-signed certificate
  tunnels_["/untrusted"] =
      TestTarget("the terminal of job 9", "", At(Endpoint::Kind::kHttps), "/plain", system_cas);
  Listen();
  ServeInBackground();
  Result<Upgraded> r = HttpUpgrade(path_, "/nobody", "tq-test", 10000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fd, -1);
  EXPECT_EQ(r->answer.status, 503);
  EXPECT_THAT(r->answer.body,
              HasSubstr("the terminal of job 8 cannot be reached at " + dir_ + "/nobody.sock"));
  r = HttpUpgrade(path_, "/refusing", "tq-test", 10000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fd, -1);
  EXPECT_EQ(r->answer.status, 200);
  EXPECT_THAT(r->answer.body, HasSubstr("\"path\":\"/plain\""));
  r = HttpUpgrade(path_, "/untrusted", "tq-test", 10000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->answer.status, 403);
  EXPECT_THAT(r->answer.body, HasSubstr("does not verify"));
  r = HttpUpgrade(path_, "/plain", "tq-test", 10000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fd, -1);
  EXPECT_EQ(r->answer.status, 200);
}

}  // namespace
}  // namespace trainq
