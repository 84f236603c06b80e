#include "src/os/child_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace trainq {

CStringArray::CStringArray(std::vector<std::string> strings) : strings_(std::move(strings)) {
  ptrs_.reserve(strings_.size() + 1);
  for (auto& s : strings_) ptrs_.push_back(s.data());
  ptrs_.push_back(nullptr);
}

Result<CloexecPipe> MakeCloexecPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) return ErrnoStatus("pipe2", errno);
  return CloexecPipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::optional<ChildFailure> ReadChildReport(int read_fd) {
  int msg[2];
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(msg);
  while (got < sizeof(msg)) {
    ssize_t n = ::read(read_fd, bytes + got, sizeof(msg) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < sizeof(msg)) return std::nullopt;
  return ChildFailure{msg[0], msg[1]};
}

namespace child {
namespace {

// The fallback where close_range(CLOSE_RANGE_CLOEXEC) is missing (kernels before 5.11):
// walk /proc/self/fd with getdents64, which needs no allocation.
bool CloexecByListing(int first) {
  int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char buf[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      int fd = 0;
      const char* p = d->d_name;
      if (*p < '0' || *p > '9') continue;
      for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + (*p - '0');
      if (fd >= first && fd != dir) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  ::close(dir);
  return true;
}

bool CloexecFrom(int first) {
  if (::syscall(SYS_close_range, first, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return true;
  return CloexecByListing(first);
}

}  // namespace

int MoveHigh(int fd) { return ::fcntl(fd, F_DUPFD_CLOEXEC, 10); }

void ResetSignals(const sigset_t* blocked) {
  // Dispositions before the mask: a signal let through first would run the daemon's handler
  // in the child (in the daemon's own memory, after a vfork).
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // EINVAL for 32, 33
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, blocked != nullptr ? blocked : &none, nullptr);
}

bool InstallFds(const int* fds, int count, bool cloexec_rest) {
  int high[4];
  for (int i = 0; i < count; ++i) {
    high[i] = fds[i] < 0 ? -1 : MoveHigh(fds[i]);
    if (fds[i] >= 0 && high[i] < 0) return false;
  }
  for (int i = 0; i < count; ++i) {
    if (high[i] >= 0 && ::dup2(high[i], i) < 0) return false;  // dup2 clears close-on-exec on i
  }
  return !cloexec_rest || CloexecFrom(count);
}

int LockExclusive(int fd) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EWOULDBLOCK && errno != EINTR) return errno;
    struct timespec pause = {0, 5'000'000};
    ::nanosleep(&pause, nullptr);
  }
  return EWOULDBLOCK;
}

void Fail(int report_fd, int step, int err, int code) {
  int msg[2] = {step, err};
  ssize_t ignored = ::write(report_fd, msg, sizeof(msg));  // a pipe: atomic, below PIPE_BUF
  (void)ignored;
  ::_exit(code);
}

}  // namespace child
}  // namespace trainq
