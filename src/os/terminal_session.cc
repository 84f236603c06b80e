#include "src/os/terminal_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "src/core/session_frames.h"
#include "src/os/fd.h"
#include "src/os/session_link.h"

namespace trainq {
namespace {

constexpr size_t kMaxUnsent = 1 << 20;  // typed or piped input not yet taken by the socket
constexpr size_t kChunk = 64 * 1024;

// The terminal as it was, put back however the relay ends.
class RawMode {
 public:
  explicit RawMode(int fd) : fd_(fd) {
    if (::tcgetattr(fd_, &saved_) < 0) return;
    struct termios raw = saved_;
    ::cfmakeraw(&raw);
    if (::tcsetattr(fd_, TCSADRAIN, &raw) == 0) on_ = true;
  }
  ~RawMode() {
    if (on_) ::tcsetattr(fd_, TCSADRAIN, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  int fd_;
  struct termios saved_ = {};
  bool on_ = false;
};

WindowSize SizeOf(int fd) {
  struct winsize ws = {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) < 0) return {};
  return {ws.ws_row, ws.ws_col};
}

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p = {fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (n < 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class Relay {
 public:
  explicit Relay(int fd) : sock_(fd), tty_(::isatty(0) == 1) {}
  int Run(std::string_view early);

 private:
  bool SendPending();
  void ReadStdin();
  bool ReadSocket();  // false once the session is over (exit frame, or the connection ended)
  void Notice(std::string_view line);

  UniqueFd sock_;
  bool tty_;
  std::string unsent_;
  FrameReader reader_;
  bool stdin_open_ = true;
  std::optional<SessionExit> exit_;
  std::string lost_;
};

int Relay::Run(std::string_view early) {
  reader_.Feed(early);
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGWINCH, SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGPIPE}) sigaddset(&set, sig);
  // Without a terminal, Ctrl-C is the user's way to leave: it ends the relay like SIGTERM.
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &set, &old);
  UniqueFd signals(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  ::fcntl(sock_.get(), F_SETFL, ::fcntl(sock_.get(), F_GETFL) | O_NONBLOCK);
  std::optional<RawMode> raw;
  if (tty_) raw.emplace(0);
  unsent_ += EncodeHello({tty_ ? SizeOf(0) : WindowSize{}, tty_});
  int ended_by = 0;
  while (!exit_ && lost_.empty() && ended_by == 0) {
    pollfd p[3] = {{sock_.get(), static_cast<short>(POLLIN | (unsent_.empty() ? 0 : POLLOUT)), 0},
                   {stdin_open_ && unsent_.size() < kMaxUnsent ? 0 : -1, POLLIN, 0},
                   {signals.get(), POLLIN, 0}};
    if (::poll(p, 3, -1) < 0 && errno != EINTR) break;
    if ((p[2].revents & POLLIN) != 0) {
      struct signalfd_siginfo info;
      while (::read(signals.get(), &info, sizeof(info)) == sizeof(info)) {
        if (info.ssi_signo == SIGWINCH) {
          if (tty_) unsent_ += EncodeResize(SizeOf(0));
        } else if (info.ssi_signo != SIGPIPE) {
          ended_by = static_cast<int>(info.ssi_signo);
        }
      }
    }
    if (p[1].fd >= 0 && p[1].revents != 0) ReadStdin();
    if ((p[0].revents & POLLOUT) != 0 && !SendPending()) break;
    if (p[0].revents != 0 && !ReadSocket()) break;
    if (!unsent_.empty() && !SendPending()) break;
  }
  sock_.Reset();  // before the terminal is restored: a hangup for the shim, at once
  raw.reset();
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (exit_) {
    if (!exit_->how.empty()) std::fprintf(stderr, "trainq: %s\n", exit_->how.c_str());
    return exit_->status;
  }
  if (ended_by != 0) {
    std::fprintf(stderr, "trainq: SIG%s: the session is hung up\n", sigabbrev_np(ended_by));
    return 128 + ended_by;
  }
  std::fprintf(stderr, "trainq: %s\n",
               lost_.empty() ? "the session's connection ended" : lost_.c_str());
  return 255;
}

bool Relay::SendPending() {
  while (!unsent_.empty()) {
    ssize_t n = ::send(sock_.get(), unsent_.data(), unsent_.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n < 0) {
      lost_ = fmt::format("the session's connection failed: {}", std::strerror(errno));
      return false;
    }
    unsent_.erase(0, static_cast<size_t>(n));
  }
  return true;
}

void Relay::ReadStdin() {
  char buf[kChunk];
  ssize_t n = ::read(0, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    stdin_open_ = false;
    unsent_ += EncodeFrame(FrameType::kEof, "");
    return;
  }
  unsent_ += EncodeFrame(FrameType::kData, std::string_view(buf, static_cast<size_t>(n)));
}

bool Relay::ReadSocket() {
  if (int end = ReadFrames(sock_.get(), reader_); end != 0) {
    lost_ = end < 0 ? "the session's connection ended before the program did"
                    : fmt::format("the session's connection failed: {}", std::strerror(end));
  }
  // Frames already received count, even when the connection ended after them.
  for (;;) {
    Result<std::optional<Frame>> f = reader_.Next();
    if (!f.ok()) {
      lost_ = "the session sent what is not the protocol: " + f.status().message();
      return false;
    }
    if (!*f) break;
    const Frame& frame = **f;
    if (frame.type == FrameType::kData) {
      if (!WriteAll(1, frame.payload)) {
        lost_ = fmt::format("cannot write the output: {}", std::strerror(errno));
        return false;
      }
    } else if (frame.type == FrameType::kNotice) {
      Notice(frame.payload);
    } else if (frame.type == FrameType::kExit) {
      Result<SessionExit> e = DecodeExit(frame.payload);
      if (!e.ok()) {
        lost_ = e.status().message();
        return false;
      }
      exit_ = *e;
      lost_.clear();
      return false;
    }
  }
  return lost_.empty();
}

// trainq's own line, on stderr; in raw mode the terminal does not return the carriage itself.
void Relay::Notice(std::string_view line) {
  std::string text = tty_ ? fmt::format("\r\n{}\r\n", line) : fmt::format("{}\n", line);
  (void)WriteAll(2, text);
}

}  // namespace

Result<int> ConnectSession(const std::string& socket, int patience_ms) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket.size() >= sizeof(addr.sun_path)) {
    return Status::Invalid("session socket " + socket + ": path too long");
  }
  std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
  auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(patience_ms);
  for (;;) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return ErrnoStatus("socket", errno);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      struct ucred cred = {};
      socklen_t len = sizeof(cred);
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
          (cred.uid != 0 && cred.uid != ::getuid())) {
        return Status::Permission(
            fmt::format("session socket {}: served by uid {}, neither root nor you; not connecting",
                        socket, cred.uid));
      }
      return fd.Release();
    }
    int err = errno;
    // Not bound yet, or bound and not yet listening: the shim is still starting.
    bool starting = err == ENOENT || err == ECONNREFUSED;
    if (!starting || std::chrono::steady_clock::now() >= give_up) {
      return ErrnoStatus("connect to session socket " + socket, err);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int RelaySession(int fd, std::string_view early) { return Relay(fd).Run(early); }

}  // namespace trainq
