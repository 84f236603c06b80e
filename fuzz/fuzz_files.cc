#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/fuzz_check.h"

namespace trainq::fuzz {

std::string WriteInputFile(const std::string& name, const uint8_t* data, size_t size) {
  // One directory per process, reused for every input: tmpfs-backed where /dev/shm exists.
  static const std::string dir = [] {
    std::filesystem::path base = std::filesystem::exists("/dev/shm")
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    std::string d = (base / ("trainq-fuzz-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(d);
    static std::string to_remove = d;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(to_remove, ignored);
    });
    return d;
  }();
  std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  FUZZ_CHECK(out.good());
  return path;
}

}  // namespace trainq::fuzz
