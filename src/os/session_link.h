// The shim's end of an interactive session (RunSpec::session_socket): the listening Unix
// socket, the one client connected to it, and the frames both ways (src/core/session_frames.h).
// It knows nothing of processes: the shim reads what the client sent (input, resizes, the end
// of input) and hands it the program's output and its own notices. Non-blocking throughout:
// the shim's single poll drives it (PollFds, Handle).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "src/core/session_frames.h"
#include "src/os/fd.h"
#include "trainq/status.h"

namespace trainq {

// Reads what non-blocking `fd` holds now into `reader`: 0 while the connection stays open,
// -1 at its end, else the errno it failed with. Shared by the two ends of a session.
int ReadFrames(int fd, FrameReader& reader);

class SessionLink {
 public:
  // Binds `path` (a socket left there by an earlier shim is replaced; anything else is an
  // error), owned by uid:gid when uid >= 0, 0600. Only these uids may connect (checked by
  // SO_PEERCRED): the job's user and the shim's own.
  static Result<SessionLink> Listen(const std::string& path, int64_t uid, int64_t gid);

  // The fds to poll, for the shim's poll array: the listener, and the client when connected
  // (POLLOUT while output waits to be sent).
  void PollFds(pollfd& listener, pollfd& client) const;
  // Whether to read the client: off while the program has not taken the input already read,
  // so a client that sends faster than the program reads holds back, not the shim's memory.
  void set_reading(bool reading) { reading_ = reading; }
  // After a poll: accepts (a second client or a stranger is told why and closed), reads and
  // writes the client. `listener` and `client` are the entries PollFds filled.
  void Handle(const pollfd& listener, const pollfd& client);

  bool hello() const { return hello_.has_value(); }  // the client said hello
  const Hello& hello_value() const { return *hello_; }
  // The client went away (closed, reset, or sent what is not the protocol); `why` says which.
  bool gone() const { return !why_gone_.empty(); }
  const std::string& why_gone() const { return why_gone_; }

  // What the client sent since the last call.
  std::string TakeInput();
  std::optional<WindowSize> TakeResize();
  bool TakeEof();

  // Output bytes that fit before the shim should stop reading the program: a client that
  // does not read holds the program as a stopped terminal would, never the shim's memory.
  size_t room() const;
  void SendOutput(std::string_view bytes);
  void SendNotice(std::string_view line);
  void SendExit(const SessionExit& exit);
  // Writes what is queued, waiting up to `patience` for a slow client; then closes the
  // connection and removes the socket.
  void Finish(std::chrono::milliseconds patience);

  SessionLink(SessionLink&&) = default;
  SessionLink& operator=(SessionLink&&) = default;
  ~SessionLink();

 private:
  SessionLink() = default;
  void Accept();
  void Refuse(int fd, const std::string& why);
  void ReadClient();
  void WriteClient();
  void Lost(std::string why);
  void Lost(int err);  // the connection ended (0) or failed with errno `err`

  std::string path_;
  UniqueFd listener_;
  UniqueFd client_;
  std::vector<uid_t> allowed_;
  FrameReader reader_;
  std::optional<Hello> hello_;
  std::string input_;
  std::optional<WindowSize> resize_;
  bool eof_ = false;
  std::string out_;  // frames not yet written to the client
  std::string why_gone_;
  bool ever_connected_ = false;
  bool reading_ = true;
};

}  // namespace trainq
