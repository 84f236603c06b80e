// libFuzzer target for the session protocol (src/core/session_frames.h): any byte stream,
// fed in pieces of any size, yields whole frames of known types within the payload cap or one
// error; every frame re-encodes to the bytes it came from; fixed payloads decode and encode
// back to themselves.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/core/session_frames.h"

namespace trainq {
namespace {

void CheckPayload(const Frame& f) {
  if (f.type == FrameType::kHello) {
    Result<Hello> h = DecodeHello(f.payload);
    if (h.ok()) FUZZ_CHECK(EncodeHello(*h) == EncodeFrame(f.type, f.payload));
  } else if (f.type == FrameType::kResize) {
    Result<WindowSize> w = DecodeResize(f.payload);
    if (w.ok()) FUZZ_CHECK(EncodeResize(*w) == EncodeFrame(f.type, f.payload));
  } else if (f.type == FrameType::kExit) {
    Result<SessionExit> e = DecodeExit(f.payload);
    if (e.ok()) {
      FUZZ_CHECK(e->status >= 0 && e->status <= 255);
      FUZZ_CHECK(EncodeExit(*e) == EncodeFrame(f.type, f.payload));
    }
  }
}

void Check(std::string_view input) {
  if (input.empty()) return;
  // The first byte picks the piece size: the reader must not care how the bytes arrive.
  size_t piece = 1 + static_cast<unsigned char>(input[0]) % 16;
  input.remove_prefix(1);
  FrameReader reader;
  std::string consumed;
  for (size_t at = 0; at < input.size(); at += piece) {
    reader.Feed(input.substr(at, piece));
    for (;;) {
      Result<std::optional<Frame>> f = reader.Next();
      if (!f.ok()) {
        FUZZ_CHECK(f.status().code() == Code::kInvalid);
        return;
      }
      if (!*f) break;
      FUZZ_CHECK((*f)->payload.size() <= kMaxFramePayload);
      CheckPayload(**f);
      consumed += EncodeFrame((*f)->type, (*f)->payload);
    }
  }
  // What came out is exactly what went in, up to the last whole frame.
  FUZZ_CHECK(input.substr(0, consumed.size()) == consumed);
  FUZZ_CHECK(consumed.size() + reader.buffered() == input.size());
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trainq::Check(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
