// A real redis-server for tests: started on a free local port in a temporary directory,
// killed (and the directory removed) when the object goes. Not a fake: the Redis store's
// scripts only mean something run by Redis itself.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/store/cluster.h"
#include "src/store/redis/redis_conn.h"

extern char** environ;

namespace trainq::redis {

// A TCP port that nothing listens on now, from below the kernel's ephemeral range: a port
// bind(0) hands out is an ephemeral one, which an outgoing connection of a test running
// beside may take before our server binds it.
inline int FreeLocalPort() {
  int low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> low;
  std::random_device seed;
  std::uniform_int_distribution<int> pick(std::max(1024, low - 20000), low - 1);
  for (int tries = 0; tries < 200; ++tries) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(pick(seed)));
    bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return ntohs(addr.sin_port);
  }
  return 0;
}

// Starts `args` (argv[0] looked up on PATH); 0 when it cannot.
inline pid_t Spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return 0;
  return pid;
}

// Whether a server on `port` answers PING with PONG (after AUTH as `user` when given).
inline bool PingsOn(int port, const std::string& user, const std::string& password) {
  timeval tv{0, 200'000};
  Context c(redisConnectWithTimeout("127.0.0.1", port, tv));
  if (!c || c->err) return false;
  if (!password.empty()) {
    Reply auth(static_cast<redisReply*>(
        user.empty() ? redisCommand(c.get(), "AUTH %s", password.c_str())
                     : redisCommand(c.get(), "AUTH %s %s", user.c_str(), password.c_str())));
    if (!auth || Text(auth.get()) != "OK") return false;
  }
  Reply r(static_cast<redisReply*>(redisCommand(c.get(), "PING")));
  return r && Text(r.get()) == "PONG";
}

class RedisServer {
 public:
  // aof: appendonly yes with appendfsync always, so a killed server loses nothing.
  explicit RedisServer(bool aof = false) : aof_(aof) {
    char tmpl[] = "/tmp/trainq-redis-XXXXXX";
    dir_ = ::mkdtemp(tmpl) ? tmpl : "";
    port_ = FreeLocalPort();
  }
  ~RedisServer() {
    Kill();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Whether redis-server is on PATH; the tests fail (never skip) without it.
  static bool Installed() { return ::system("command -v redis-server >/dev/null 2>&1") == 0; }

  // Redis's ACL users, one `user ...` line each, written to an ACL file the next Start
  // loads (aclfile). With the default user off, Start logs in as `user` to ask whether the
  // server is up: an unauthenticated PING is answered NOAUTH even while the AOF loads.
  void SetAcl(const std::vector<std::string>& lines, std::string user, std::string password) {
    std::ofstream out(dir_ + "/users.acl");
    for (const std::string& line : lines) out << line << "\n";
    acl_ = true;
    user_ = std::move(user);
    password_ = std::move(password);
  }

  // More redis-server options for the next Start ("--replicaof", "127.0.0.1", "6379").
  void AddArgs(const std::vector<std::string>& args) {
    extra_.insert(extra_.end(), args.begin(), args.end());
  }

  // Starts it (again, on the same port and directory) and waits until it answers, which is
  // once it has loaded its AOF.
  ::testing::AssertionResult Start() {
    if (!Installed()) {
      return ::testing::AssertionFailure()
             << "redis-server is not installed; the Redis store's tests need it "
                "(scripts/deps.sh test installs it)";
    }
    std::vector<std::string> args = {"redis-server",
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--dir",
                                     dir_,
                                     "--daemonize",
                                     "no",
                                     "--loglevel",
                                     "warning",
                                     "--logfile",
                                     dir_ + "/redis.log"};
    if (acl_) {
      args.push_back("--aclfile");
      args.push_back(dir_ + "/users.acl");
    }
    if (aof_) {
      for (const char* a : {"--appendonly", "yes", "--appendfsync", "always"}) args.push_back(a);
    } else {
      for (const char* a : {"--appendonly", "no"}) args.push_back(a);
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = Spawn(std::move(args));
    if (pid_ == 0) return ::testing::AssertionFailure() << "cannot start redis-server";
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (Pings()) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ::testing::AssertionFailure() << "redis-server did not answer on port " << port_;
  }

  // SIGKILL, as a crash or a power cut would stop it.
  void Kill() { Stop(SIGKILL); }
  // SIGTERM, as `systemctl restart` stops it: Redis flushes its AOF and exits.
  void Terminate() { Stop(SIGTERM); }

  RedisTarget Target(std::string prefix = "trainq:") const {
    RedisTarget t;
    t.host = "127.0.0.1";
    t.port = port_;
    t.prefix = std::move(prefix);
    t.timeout_ms = 1000;
    return t;
  }
  int port() const { return port_; }

 private:
  void Stop(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
  }

  // PONG: up, its AOF loaded (never LOADING).
  bool Pings() const { return PingsOn(port_, user_, password_); }

  bool aof_ = false;
  bool acl_ = false;
  std::vector<std::string> extra_;
  std::string user_, password_;  // whom Pings logs in as; "" the default user
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// A real redis-sentinel on a free local port, its config (`lines` after its port, dir and
// log) in a temporary directory; killed when the object goes.
class SentinelServer {
 public:
  SentinelServer() {
    char tmpl[] = "/tmp/trainq-sentinel-XXXXXX";
    dir_ = ::mkdtemp(tmpl) ? tmpl : "";
    port_ = FreeLocalPort();
  }
  ~SentinelServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  SentinelServer(const SentinelServer&) = delete;
  SentinelServer& operator=(const SentinelServer&) = delete;

  // Starts it and waits until it answers PING (as `user` with `password` when given).
  ::testing::AssertionResult Start(const std::vector<std::string>& lines, std::string user = "",
                                   std::string password = "") {
    std::string conf = dir_ + "/sentinel.conf";
    {
      std::ofstream out(conf);
      out << "port " << port_ << "\nbind 127.0.0.1\ndir " << dir_ << "\nlogfile " << dir_
          << "/sentinel.log\n";
      for (const std::string& line : lines) out << line << "\n";
    }
    pid_ = Spawn({"redis-sentinel", conf});
    if (pid_ == 0) return ::testing::AssertionFailure() << "cannot start redis-sentinel";
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (PingsOn(port_, user, password)) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ::testing::AssertionFailure() << "redis-sentinel did not answer on port " << port_;
  }
  RedisAddress Address() const { return {"127.0.0.1", port_}; }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// The `user ...` lines of docs/cluster.md's "Redis ACL" block, as an operator copies them,
// with its placeholders filled in: the test and the doc cannot drift apart.
inline std::vector<std::string> DocumentedAcl() {
  std::ifstream in(std::string(TRAINQ_SOURCE_DIR) + "/docs/cluster.md");
  std::vector<std::string> lines;
  bool in_section = false, in_block = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) in_section = line == "## Redis ACL";
    if (!in_section) continue;
    if (line.starts_with("```")) {
      if (in_block) break;
      in_block = true;
    } else if (in_block && line.starts_with("user ")) {
      for (auto [from, to] :
           {std::pair{"NODE-PASSWORD", "node-secret"}, std::pair{"VIEW-PASSWORD", "view-secret"}}) {
        if (size_t at = line.find(from); at != std::string::npos) {
          line.replace(at, std::string_view(from).size(), to);
        }
      }
      lines.push_back(line);
    }
  }
  return lines;
}

inline std::string AclLineOf(const std::vector<std::string>& acl, const std::string& user) {
  for (const std::string& line : acl) {
    if (line.starts_with("user " + user + " ")) return line;
  }
  return "";
}

}  // namespace trainq::redis
