#include "src/os/session_link.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace trainq {
namespace {

constexpr size_t kMaxQueued = 4 << 20;  // output queued for a client that reads slowly
constexpr size_t kReadChunk = 64 * 1024;

std::optional<uid_t> PeerUid(int fd) {
  struct ucred cred = {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) return std::nullopt;
  return cred.uid;
}

}  // namespace

Result<SessionLink> SessionLink::Listen(const std::string& path, int64_t uid, int64_t gid) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::Invalid(fmt::format(
        "session socket {}: {} bytes, longer than a Unix socket path may be ({}); use a "
        "shorter state_dir",
        path, path.size(), sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st = {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::Invalid("session socket " + path + ": not a socket");
    if (::unlink(path.c_str()) < 0) return ErrnoStatus("remove old session socket " + path, errno);
  }
  SessionLink link;
  link.path_ = path;
  link.listener_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!link.listener_.valid()) return ErrnoStatus("session socket", errno);
  if (::bind(link.listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
    return ErrnoStatus("bind session socket " + path, errno);
  }
  // Bound under the shim's umask (077): only its owner may connect, and that is made the
  // job's user.
  if (uid >= 0 && ::chown(path.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) < 0) {
    return ErrnoStatus("chown session socket " + path, errno);
  }
  if (::chmod(path.c_str(), 0600) < 0) return ErrnoStatus("chmod session socket " + path, errno);
  if (::listen(link.listener_.get(), 4) < 0) return ErrnoStatus("listen " + path, errno);
  link.allowed_.push_back(::geteuid());
  if (uid >= 0) link.allowed_.push_back(static_cast<uid_t>(uid));
  return link;
}

SessionLink::~SessionLink() {
  if (!path_.empty() && listener_.valid()) ::unlink(path_.c_str());
}

void SessionLink::PollFds(pollfd& listener, pollfd& client) const {
  listener = {listener_.get(), POLLIN, 0};
  client = {-1, 0, 0};
  if (!client_.valid()) return;
  client.fd = client_.get();
  client.events = static_cast<short>((reading_ ? POLLIN : 0) | (out_.empty() ? 0 : POLLOUT));
}

void SessionLink::Handle(const pollfd& listener, const pollfd& client) {
  if (listener.fd >= 0 && (listener.revents & POLLIN) != 0) Accept();
  if (client.fd < 0 || client.fd != client_.get() || client.revents == 0) return;
  if ((client.revents & POLLOUT) != 0) WriteClient();
  if (client_.valid() && (client.revents & (POLLIN | POLLHUP | POLLERR)) != 0) ReadClient();
}

void SessionLink::Accept() {
  for (;;) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: none left; anything else: the next poll tries again
    std::optional<uid_t> peer = PeerUid(fd);
    if (!peer || std::find(allowed_.begin(), allowed_.end(), *peer) == allowed_.end()) {
      Refuse(fd, "this session is not yours");
    } else if (ever_connected_) {
      Refuse(fd, "this session already has its terminal");
    } else {
      client_.Reset(fd);
      ever_connected_ = true;
    }
  }
}

void SessionLink::Refuse(int fd, const std::string& why) {
  std::string notice = EncodeFrame(FrameType::kNotice, "trainq: " + why);
  (void)!::write(fd, notice.data(), notice.size());
  ::close(fd);
}

int ReadFrames(int fd, FrameReader& reader) {
  char buf[kReadChunk];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    if (n <= 0) return n == 0 ? -1 : errno;
    reader.Feed(std::string_view(buf, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) < sizeof(buf)) return 0;
  }
}

void SessionLink::ReadClient() {
  if (int end = ReadFrames(client_.get(), reader_); end != 0) return Lost(end < 0 ? 0 : end);
  for (;;) {
    Result<std::optional<Frame>> f = reader_.Next();
    if (!f.ok()) return Lost("the client broke the session protocol: " + f.status().message());
    if (!*f) return;
    Frame& frame = **f;
    if (!hello_ && frame.type != FrameType::kHello) {
      return Lost("the client sent no hello first");
    }
    switch (frame.type) {
      case FrameType::kHello: {
        Result<Hello> h = DecodeHello(frame.payload);
        if (!h.ok() || hello_) return Lost("the client broke the session protocol: a bad hello");
        hello_ = *h;
        break;
      }
      case FrameType::kData:
        input_ += frame.payload;
        break;
      case FrameType::kResize: {
        Result<WindowSize> w = DecodeResize(frame.payload);
        if (!w.ok()) return Lost("the client broke the session protocol: " + w.status().message());
        resize_ = *w;
        break;
      }
      case FrameType::kEof:
        eof_ = true;
        break;
      default:
        return Lost("the client sent a frame only the shim sends");
    }
  }
}

void SessionLink::WriteClient() {
  while (!out_.empty()) {
    ssize_t n = ::send(client_.get(), out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0) return Lost(errno);
    out_.erase(0, static_cast<size_t>(n));
  }
}

// A client that closed, or died and left the kernel to reset its end, simply disconnected.
void SessionLink::Lost(int err) {
  bool gone = err == 0 || err == EPIPE || err == ECONNRESET;
  Lost(gone ? std::string("the terminal disconnected")
            : fmt::format("the terminal's connection failed: {}", std::strerror(err)));
}

void SessionLink::Lost(std::string why) {
  if (why_gone_.empty()) why_gone_ = std::move(why);
  client_.Reset();
  out_.clear();
}

std::string SessionLink::TakeInput() { return std::exchange(input_, {}); }
std::optional<WindowSize> SessionLink::TakeResize() { return std::exchange(resize_, std::nullopt); }
bool SessionLink::TakeEof() { return std::exchange(eof_, false); }

size_t SessionLink::room() const {
  if (!client_.valid()) return kMaxQueued;  // nobody to send to: output only goes to the log
  return out_.size() >= kMaxQueued ? 0 : kMaxQueued - out_.size();
}

void SessionLink::SendOutput(std::string_view bytes) {
  if (!client_.valid() || bytes.empty()) return;
  out_ += EncodeFrame(FrameType::kData, bytes);
  WriteClient();
}

void SessionLink::SendNotice(std::string_view line) {
  if (!client_.valid()) return;
  out_ += EncodeFrame(FrameType::kNotice, line);
  WriteClient();
}

void SessionLink::SendExit(const SessionExit& exit) {
  if (!client_.valid()) return;
  out_ += EncodeExit(exit);
  WriteClient();
}

void SessionLink::Finish(std::chrono::milliseconds patience) {
  auto give_up = std::chrono::steady_clock::now() + patience;
  while (client_.valid() && !out_.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p = {client_.get(), POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    WriteClient();
  }
  client_.Reset();
  if (!path_.empty()) ::unlink(path_.c_str());
  listener_.Reset();
}

}  // namespace trainq
