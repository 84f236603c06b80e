// Descriptors, signals and a shared counter (declared in system.h): what the client's srun and
// its follow loops wait on.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

#include "src/os/system.h"

namespace trainq {

std::vector<size_t> WaitReadable(std::span<const int> fds, int timeout_ms) {
  std::vector<pollfd> polled;
  polled.reserve(fds.size());
  for (int fd : fds) polled.push_back({fd, POLLIN, 0});
  std::vector<size_t> ready;
  if (::poll(polled.data(), polled.size(), timeout_ms) <= 0) return ready;
  for (size_t i = 0; i < polled.size(); ++i) {
    if (polled[i].revents != 0) ready.push_back(i);
  }
  return ready;
}

Result<size_t> ReadSome(int fd, std::span<char> buf) {
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return ErrnoStatus("read", errno);
  }
}

Result<size_t> ReadAt(int fd, uint64_t offset, std::span<char> buf) {
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(offset));
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return ErrnoStatus("read", errno);
  }
}

bool IsTerminal(int fd) { return ::isatty(fd) == 1; }

void CatchSignals(std::span<const int> signals, void (*handler)(int), bool restart_calls) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = restart_calls ? SA_RESTART : 0;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : signals) ::sigaction(sig, &sa, nullptr);
}

Result<int64_t> NextCounterValue(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoStatus("open " + path, errno);
  if (::flock(fd.get(), LOCK_EX) != 0) return ErrnoStatus("flock " + path, errno);
  char buf[32] = {};
  Result<size_t> n = ReadAt(fd.get(), 0, std::span<char>(buf, sizeof buf - 1));
  if (!n.ok()) return n.status();
  int64_t value = 0;
  std::from_chars(buf, buf + *n, value);
  std::string next = std::to_string(value + 1);
  if (::pwrite(fd.get(), next.data(), next.size(), 0) != static_cast<ssize_t>(next.size()) ||
      ::ftruncate(fd.get(), static_cast<off_t>(next.size())) != 0) {
    return ErrnoStatus("write " + path, errno);
  }
  return value;  // the lock goes with the fd
}

}  // namespace trainq
