// Helpers for the tests of processes, run dirs and the shim (real processes, real files).
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace trainq::testing {

// Output of a known shape for the log tests: lines numbered from `from`, each 16 bytes
// ("line 0000000042\n").
inline std::string NumberedLines(int from, int count) {
  std::string out;
  char buf[32];
  for (int i = from; i < from + count; ++i) {
    std::snprintf(buf, sizeof(buf), "line %010d\n", i);
    out += buf;
  }
  return out;
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/trainq-os-test.XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Polls `done` every 2 ms until it holds or `timeout` passes. True if it held.
inline bool WaitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Waits for our child `pid` to exit; its wait status, or nullopt after `timeout` (the child is
// then SIGKILLed and reaped so no test leaves processes behind).
inline std::optional<int> WaitChild(pid_t pid,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  int status = 0;
  bool exited = WaitUntil([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout);
  if (exited) return status;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return std::nullopt;
}

// Forks; the child runs `body` and exits with its result without running atexit handlers.
inline pid_t ForkRun(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  return pid;
}

inline std::string ReadAll(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

inline bool WriteAll(const std::string& path, const std::string& data, int mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  return ::close(fd) == 0 && ok;
}

}  // namespace trainq::testing
