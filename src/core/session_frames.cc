#include "src/core/session_frames.h"

#include <fmt/format.h>

namespace trainq {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t GetU32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[static_cast<size_t>(i)]);
  return v;
}

void PutU16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}

uint16_t GetU16(std::string_view in) {
  return static_cast<uint16_t>((static_cast<unsigned char>(in[0]) << 8) |
                               static_cast<unsigned char>(in[1]));
}

bool KnownType(char c) {
  switch (static_cast<FrameType>(c)) {
    case FrameType::kHello:
    case FrameType::kData:
    case FrameType::kResize:
    case FrameType::kEof:
    case FrameType::kNotice:
    case FrameType::kExit:
      return true;
  }
  return false;
}

}  // namespace

std::string EncodeFrame(FrameType type, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  out.push_back(static_cast<char>(type));
  PutU32(out, static_cast<uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

std::string EncodeHello(const Hello& hello) {
  std::string p;
  PutU16(p, hello.size.rows);
  PutU16(p, hello.size.cols);
  p.push_back(hello.tty ? 1 : 0);
  return EncodeFrame(FrameType::kHello, p);
}

std::string EncodeResize(WindowSize size) {
  std::string p;
  PutU16(p, size.rows);
  PutU16(p, size.cols);
  return EncodeFrame(FrameType::kResize, p);
}

std::string EncodeExit(const SessionExit& exit) {
  std::string p;
  PutU32(p, static_cast<uint32_t>(exit.status));
  p.append(exit.how);
  return EncodeFrame(FrameType::kExit, p);
}

Result<Hello> DecodeHello(std::string_view payload) {
  if (payload.size() != 5 || static_cast<unsigned char>(payload[4]) > 1) {
    return Status::Invalid(
        fmt::format("session hello: {} bytes; expected rows, cols (2 bytes each) and a tty flag "
                    "(0 or 1)",
                    payload.size()));
  }
  return Hello{{GetU16(payload), GetU16(payload.substr(2))}, payload[4] == 1};
}

Result<WindowSize> DecodeResize(std::string_view payload) {
  if (payload.size() != 4) {
    return Status::Invalid(fmt::format(
        "session resize: {} bytes; expected rows and cols, 2 bytes each", payload.size()));
  }
  return WindowSize{GetU16(payload), GetU16(payload.substr(2))};
}

Result<SessionExit> DecodeExit(std::string_view payload) {
  if (payload.size() < 4) {
    return Status::Invalid(
        fmt::format("session exit: {} bytes; expected a 4-byte status and a text", payload.size()));
  }
  uint32_t status = GetU32(payload);
  if (status > 255) {
    return Status::Invalid(fmt::format("session exit: status {} is not 0..255", status));
  }
  return SessionExit{static_cast<int>(status), std::string(payload.substr(4))};
}

Result<std::optional<Frame>> FrameReader::Next() {
  std::string_view rest = std::string_view(buffer_).substr(start_);
  if (rest.empty()) return std::optional<Frame>();
  if (!KnownType(rest[0])) {
    return Status::Invalid(
        fmt::format("session: unknown frame type {:#04x}", static_cast<unsigned char>(rest[0])));
  }
  if (rest.size() < 5) return std::optional<Frame>();
  uint32_t length = GetU32(rest.substr(1));
  if (length > kMaxFramePayload) {
    return Status::Invalid(
        fmt::format("session: a frame of {} bytes; at most {}", length, kMaxFramePayload));
  }
  if (rest.size() < 5 + size_t{length}) return std::optional<Frame>();
  Frame f{static_cast<FrameType>(rest[0]), std::string(rest.substr(5, length))};
  start_ += 5 + size_t{length};
  // Compacted once most of the buffer is consumed: appends stay amortised, reads cheap.
  if (start_ > 64 * 1024 && start_ * 2 > buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  return std::optional<Frame>(std::move(f));
}

}  // namespace trainq
