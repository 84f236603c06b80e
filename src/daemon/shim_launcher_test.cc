// The real ShimLauncher's watches of processes it did not start (a Python gate's), with real
// processes: a process of another uid is never watched, and two watches of one pid never
// replace each other.
#include "src/daemon/shim_launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/api/asio.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      ::execl("/bin/sleep", "sleep", "300", nullptr);
      ::_exit(127);
    }
    // Its start time once it runs as sleep.
    for (int i = 0; i < 500 && !stat_; ++i) {
      stat_ = ReadProcStat(child_);
      if (!stat_) ::usleep(1000);
    }
    ASSERT_TRUE(stat_.has_value());
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
  }
  // Runs the loop until `done` or 10 s.
  template <class F>
  bool RunUntil(F done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(std::chrono::milliseconds(10));
      io_.restart();
    }
    return done();
  }

  boost::asio::io_context io_;
  std::unique_ptr<ShimLauncher> launcher_ =
      MakeShimLauncher(io_, ShimCommand("/nonexistent"), -1, CgroupHost{});
  pid_t child_ = -1;
  std::optional<ProcStat> stat_;
};

TEST_F(WatchTest, AProcessOfAnotherUidIsNeitherWatchedNorSignalled) {
  ShimProcess p{child_, stat_->start_ticks};
  Result<ShimProcess> r = launcher_->WatchProcess("/run/x", p, ::geteuid() + 1, [] {});
  EXPECT_EQ(r.status().code(), Code::kPermission);
  EXPECT_THAT(r.status().message(), HasSubstr("not the job's user"));
  // A start time that is not the process's: another process that took the pid.
  r = launcher_->WatchProcess("/run/x", {child_, stat_->start_ticks + 1}, ::geteuid(), [] {});
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(::waitpid(child_, nullptr, WNOHANG), 0);  // untouched
}

TEST_F(WatchTest, TwoWatchesOfOnePidBothSeeItsEndAndSignalsGoThroughThePidfd) {
  ShimProcess p{child_, stat_->start_ticks};
  int ended = 0;
  ASSERT_TRUE(launcher_->WatchProcess("/run/a", p, ::geteuid(), [&] { ++ended; }).ok());
  ASSERT_TRUE(launcher_->WatchProcess("/run/b", p, ::geteuid(), [&] { ++ended; }).ok());
  ASSERT_TRUE(launcher_->Signal(p, SIGTERM).ok());
  EXPECT_TRUE(RunUntil([&] { return ended == 2; })) << ended;
  ::waitpid(child_, nullptr, 0);
  child_ = -1;
  EXPECT_EQ(launcher_->Signal(p, SIGTERM).code(), Code::kNotFound);
}

}  // namespace
}  // namespace trainq
