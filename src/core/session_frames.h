// The session protocol (docs/architecture.md, "Interactive sessions"): what `trainq shell`
// and the shim of an interactive job say to each other over the shim's session socket. A
// stream of frames, each a type byte, a 4-byte big-endian payload length and the payload.
// The framing is end to end: whatever carries the bytes between the two (a local socket
// today) only copies them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq {

// What a connection to the daemon's session route switches to (HTTP Upgrade) when it is to
// carry these frames through the daemon.
inline constexpr std::string_view kSessionProtocol = "trainq-session";

enum class FrameType : char {
  kHello = 'H',   // client: the first frame; the terminal's size and whether there is one
  kData = 'D',    // either way: the program's input, or its output
  kResize = 'W',  // client: the terminal's new size
  kEof = 'E',     // client: no more input (stdin reached its end)
  kNotice = 'N',  // shim: a line from trainq itself (a warning, why the session ends)
  kExit = 'X',    // shim: the program ended; its status and how it ended, then nothing more
};

// More is a broken or hostile peer: a reader never holds more than this for one frame.
inline constexpr uint32_t kMaxFramePayload = 1 << 20;

struct Frame {
  FrameType type = FrameType::kData;
  std::string payload;
};

struct WindowSize {
  uint16_t rows = 0;
  uint16_t cols = 0;
};

struct Hello {
  WindowSize size;   // 0x0 without a terminal
  bool tty = false;  // the client has a terminal: the program gets a pseudo-terminal
};

// The exit: the status `trainq shell` exits with (the program's exit code, or 128 + its
// signal, as a shell reports it) and a sentence for the user ("" when it simply exited).
struct SessionExit {
  int status = 0;
  std::string how;
};

std::string EncodeFrame(FrameType type, std::string_view payload);
std::string EncodeHello(const Hello& hello);
std::string EncodeResize(WindowSize size);
std::string EncodeExit(const SessionExit& exit);

Result<Hello> DecodeHello(std::string_view payload);
Result<WindowSize> DecodeResize(std::string_view payload);
Result<SessionExit> DecodeExit(std::string_view payload);

// Collects bytes as they arrive and hands out whole frames. An unknown type or a length past
// kMaxFramePayload is an error, after which the stream is not trusted any further.
class FrameReader {
 public:
  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame, nullopt while it has not all arrived, or the error.
  Result<std::optional<Frame>> Next();
  size_t buffered() const { return buffer_.size() - start_; }  // not yet handed out

 private:
  std::string buffer_;
  size_t start_ = 0;  // bytes already handed out (dropped from the buffer in batches)
};

}  // namespace trainq
