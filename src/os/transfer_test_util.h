// What the transfer tests share: small chunk limits, random bytes, files written as asked.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "src/os/transfer.h"

namespace trainq::testing {

inline constexpr ChunkLimits kSmall{.min = 1 << 10, .avg = 4 << 10, .max = 16 << 10};

// `size` bytes from a generator seeded with `seed`: the same on every run.
inline std::string RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, size - i));
  }
  return out;
}

inline void Write(const std::string& path, const std::string& data, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

}  // namespace trainq::testing
