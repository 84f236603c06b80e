// What every fuzz target shares: an invariant check that reports and aborts (so libFuzzer
// keeps the input), and a reader that turns the fuzzer's bytes into choices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

namespace trainq::fuzz {

// Reads integers from the input; past its end every read is 0, so any input decodes.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint64_t U64(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | (at_ < size_ ? data_[at_++] : 0);
    return v;
  }
  uint8_t U8() { return static_cast<uint8_t>(U64(1)); }
  // In [lo, hi].
  int64_t Range(int64_t lo, int64_t hi) {
    uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(span == 0 ? U64(8) : U64(8) % span);
  }
  std::string Rest() {
    std::string s(reinterpret_cast<const char*>(data_) + (at_ < size_ ? at_ : size_),
                  at_ < size_ ? size_ - at_ : 0);
    at_ = size_;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// The input as a file a parser reads by path, in a directory private to this process.
std::string WriteInputFile(const std::string& name, const uint8_t* data, size_t size);

}  // namespace trainq::fuzz
