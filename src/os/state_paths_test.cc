#include "src/os/state_paths.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace trainq {
namespace {

using ::testing::StartsWith;

// Sets an environment variable for one test and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

const std::string kLongDir = "/tmp/" + std::string(120, 'x');

TEST(StatePathsTest, ShortStateDirKeepsTheSocketInside) {
  StatePaths p = ResolveStatePaths("/srv/tq");
  EXPECT_EQ(p.socket, "/srv/tq/trainq.sock");
  EXPECT_EQ(p.socket_dir, "");
}

// Defect: the fallback was /tmp/trainq-<hash>.sock, a name anyone could take first.
TEST(StatePathsTest, LongStateDirPutsTheSocketInAPrivateDirOfTheUser) {
  ScopedEnv runtime("XDG_RUNTIME_DIR", nullptr);
  StatePaths p = ResolveStatePaths(kLongDir);
  EXPECT_EQ(p.socket_dir, "/tmp/trainq-" + std::to_string(::geteuid()));
  EXPECT_THAT(p.socket, StartsWith(p.socket_dir + "/"));
  EXPECT_LT(p.socket.size(), 108u);
  EXPECT_NE(ResolveStatePaths(kLongDir + "y").socket, p.socket);  // keyed by the state dir
}

TEST(StatePathsTest, LongStateDirUsesTheRuntimeDirWhenSet) {
  ScopedEnv runtime("XDG_RUNTIME_DIR", "/run/user/1000");
  StatePaths p = ResolveStatePaths(kLongDir);
  EXPECT_EQ(p.socket_dir, "/run/user/1000/trainq");
  EXPECT_THAT(p.socket, StartsWith("/run/user/1000/trainq/"));
}

}  // namespace
}  // namespace trainq
