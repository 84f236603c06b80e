// The server on a real Unix socket in a temp dir, with deadlines of milliseconds: the loop
// runs until what the test waits for happens, never for a fixed time.
#include "src/api/asio.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <string>
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
  Client() : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
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
  void TearDown() override { ::unlink(path_.c_str()); }

  void Listen() {
    server_ = std::make_unique<HttpServer>(
        io_,
        [](HttpRequest r, Responder respond) {
          respond({200, "{\"path\":\"" + r.path + "\",\"bytes\":" + std::to_string(r.body.size()) +
                            "}"});
        },
        limits_);
    ASSERT_TRUE(server_->ListenUnix(path_).ok());
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
  std::unique_ptr<Client> Open(Client* evicted = nullptr) {
    auto c = std::make_unique<Client>();
    EXPECT_TRUE(c->Connect(path_));
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
  std::vector<std::string> warnings_;
  std::unique_ptr<HttpServer> server_;
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
