// Only src/os touches the OS (STYLE.md, rule 1; docs/architecture.md, "Layers"): no production
// file outside it includes a header of the POSIX or Linux system interface, with no exception.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace trainq {
namespace {

namespace fs = std::filesystem;

// Headers that reach the OS: system calls, the process, users, the loader, signals' handlers.
// Signal numbers come from <csignal>; <fnmatch.h> and <arpa/inet.h> (inet_pton) only parse.
bool IsOsHeader(const std::string& header) {
  static const std::vector<std::string> kHeaders = {"unistd.h", "fcntl.h",  "pwd.h",  "grp.h",
                                                    "dlfcn.h",  "signal.h", "poll.h", "termios.h",
                                                    "dirent.h", "spawn.h",  "sched.h"};
  return header.starts_with("sys/") || header.starts_with("linux/") ||
         std::find(kHeaders.begin(), kHeaders.end(), header) != kHeaders.end();
}

// Tests, their helpers and fakes set the world up (children, modes, sockets) to test against.
bool Production(const std::string& name) {
  for (const char* part : {"_test.cc", "_test_util.h", "_test_fixture.h", "test_rig.h"}) {
    if (name.find(part) != std::string::npos) return false;
  }
  return name.ends_with(".cc") || name.ends_with(".h");
}

// The <...> headers a file includes.
std::vector<std::string> SystemIncludes(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("#include <")) continue;
    size_t end = line.find('>');
    if (end != std::string::npos) out.push_back(line.substr(10, end - 10));
  }
  return out;
}

// Production files outside src/os -> the OS headers each includes.
std::map<std::string, std::vector<std::string>> OsIncludesOutsideOs() {
  fs::path root = TRAINQ_SOURCE_DIR;
  std::map<std::string, std::vector<std::string>> found;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(root / "src")) {
    std::string rel = fs::relative(e.path(), root).string();
    if (!e.is_regular_file() || rel.starts_with("src/os/") || !Production(rel)) continue;
    for (const std::string& header : SystemIncludes(e.path())) {
      if (IsOsHeader(header)) found[rel].push_back(header);
    }
  }
  return found;
}

TEST(LayeringTest, OnlySrcOsIncludesOsHeaders) {
  ASSERT_TRUE(fs::is_directory(fs::path(TRAINQ_SOURCE_DIR) / "src/os"));
  for (const auto& [file, headers] : OsIncludesOutsideOs()) {
    for (const std::string& h : headers) {
      ADD_FAILURE() << file << " includes <" << h
                    << ">: move the call into a src/os function (docs/architecture.md, \"The OS "
                       "layer\")";
    }
  }
}

TEST(LayeringTest, TheRuleTellsOsHeadersFromTheLanguagesOwn) {
  for (const char* h : {"unistd.h", "sys/stat.h", "sys/socket.h", "pwd.h", "dlfcn.h", "poll.h",
                        "signal.h", "linux/close_range.h"}) {
    EXPECT_TRUE(IsOsHeader(h)) << h;
  }
  for (const char* h : {"csignal", "cstdio", "filesystem", "fnmatch.h", "spdlog/spdlog.h"}) {
    EXPECT_FALSE(IsOsHeader(h)) << h;
  }
  EXPECT_FALSE(Production("src/daemon/stager_test.cc"));
  EXPECT_FALSE(Production("src/daemon/daemon_test_fixture.h"));
  EXPECT_TRUE(Production("src/daemon/stager.cc"));
}

}  // namespace
}  // namespace trainq
