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
  bool ConnectTcp(int port) {  // 127.0.0.1
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
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
          std::string body =
              "{\"path\":\"" + r.path + "\",\"bytes\":" + std::to_string(r.body.size()) + "}";
          {
            // Kept before the answer leaves: a client that has its answer finds it in Requests().
            std::lock_guard lock(mu_);
            requests_.push_back(std::move(r));
          }
          respond({200, std::move(body)});
        },
        limits_);
    ASSERT_TRUE(server_->ListenUnix(path_).ok());
    if (!tcp_) return;
    Result<int> port = server_->ListenTcp("127.0.0.1", 0, tls_);
    ASSERT_TRUE(port.ok()) << port.status().message();
    port_ = *port;
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

  // A new connection, once the server took it: one more open, or `evicted` closed.
  std::unique_ptr<Client> Open(Client* evicted = nullptr, bool tcp = false) {
    auto c = std::make_unique<Client>(tcp ? AF_INET : AF_UNIX);
    EXPECT_TRUE(tcp ? c->ConnectTcp(port_) : c->Connect(path_));
    size_t before = server_->Connections();
    EXPECT_TRUE(
        RunUntil([&] { return evicted ? evicted->Drain() : server_->Connections() > before; }));
    return c;
  }

  bool Answered(Client& c) {
    return RunUntil([&] { return (c.Drain(), c.received().find("200 OK") != std::string::npos); });
  }

  boost::asio::io_context io_;
  std::string path_;
  HttpLimits limits_;
  bool tcp_ = false;
  TlsFiles tls_;
  int port_ = 0;
  std::vector<std::string> warnings_;
  std::unique_ptr<HttpServer> server_;
  std::thread loop_;
  std::mutex mu_;
  std::vector<HttpRequest> requests_;
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
  Client refused;
  ASSERT_TRUE(refused.Connect(path_));
  ASSERT_TRUE(RunUntil([&] { return refused.Drain(); }));
  EXPECT_THAT(refused.received(), HasSubstr("503 Service Unavailable"));
  EXPECT_THAT(refused.received(), HasSubstr("max_connections"));
  EXPECT_FALSE(busy->Drain());
  EXPECT_EQ(server_->Connections(), 1u);
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

// A TLS handshake is a request's time, not an idle wait: a client that connects and says
// nothing is cut at request_timeout.
TEST_F(TlsTest, AHandshakeNeverFinishedIsCutAtRequestTimeout) {
  limits_.request_timeout_ms = 50;
  Listen();
  auto c = Open(nullptr, true);
  c->Send(std::string("\x16\x03\x01", 3));  // the start of a ClientHello
  EXPECT_TRUE(RunUntil([&] { return c->Drain(); }, std::chrono::seconds(5)));
  EXPECT_EQ(server_->Connections(), 0u);
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
