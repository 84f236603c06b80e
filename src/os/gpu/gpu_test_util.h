// Helpers shared by the GPU probe tests: a temporary directory, environment variables set
// for one test, the fake NVML library's path. Test-only.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace trainq::gpu_test {

inline std::string FakeNvmlPath() {
  return std::string(TRAINQ_FAKE_NVML_DIR) + "/libnvidia-ml.so.1";
}

// A fresh directory under the system's temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "trainq-gpu-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Writes via a temporary name and a rename, as a well-behaved job does.
inline void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << "writing " << tmp;
  }
  std::filesystem::rename(tmp, path);
}

// Sets environment variables for the scope of one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }
  void Set(const std::string& name, const std::string& value) {
    Save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void Unset(const std::string& name) {
    Save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void Save(const std::string& name) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Clears every variable the fake NVML reads, so a test sees only what it sets.
inline void ClearFakeNvmlEnv(ScopedEnv* env) {
  for (const char* var :
       {"FAKE_NVML_GPUS", "FAKE_NVML_TOTAL_MIB", "FAKE_NVML_USED_MIB", "FAKE_NVML_RESERVED_MIB",
        "FAKE_NVML_UTIL", "FAKE_NVML_NAME", "FAKE_NVML_DRIVER", "FAKE_NVML_PROCS",
        "FAKE_NVML_PROCS_LATE", "FAKE_NVML_INIT_ERROR", "FAKE_NVML_LOST_GPU", "FAKE_NVML_TOPO",
        "FAKE_NVML_TOPO_ERROR"}) {
    env->Unset(var);
  }
}

}  // namespace trainq::gpu_test
