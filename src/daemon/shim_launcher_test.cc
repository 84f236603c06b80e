// The real ShimLauncher's watches of processes it did not start (a Python gate's), with real
// processes: a process of another uid is never watched, and two watches of one pid never
// replace each other; and its adoptions, which never wait on the event loop.
#include "src/daemon/shim_launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/api/asio.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

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

// A run dir whose lock the test holds, as a shim that has just started and not yet written
// shim.json holds it.
class AdoptTest : public WatchTest {
 protected:
  void SetUp() override {
    WatchTest::SetUp();
    char tmpl[] = "/tmp/trainq-adopt-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    run_dir_ = tmpl;
    Result<UniqueFd> lock = LockFile(LockPath(run_dir_));
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    lock_ = std::move(*lock);
  }
  void TearDown() override {
    std::filesystem::remove_all(run_dir_);
    WatchTest::TearDown();
  }
  // Adopts run_dir_; the answer lands in `found_`.
  void Adopt() {
    launcher_->Adopt(
        run_dir_, [this](Result<ShimProcess> r) { found_ = std::move(r); }, [this] { ++exits_; });
  }

  std::string run_dir_;
  UniqueFd lock_;
  std::optional<Result<ShimProcess>> found_;
  int exits_ = 0;
};

TEST_F(AdoptTest, AStartingShimIsAdoptedFromATimerNotWaitedFor) {
  auto before = std::chrono::steady_clock::now();
  Adopt();
  // Returned at once (the old Adopt slept up to 2 s here, on the event loop), with no answer.
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(500));
  EXPECT_FALSE(found_.has_value());
  ASSERT_TRUE(WriteShimRecord(run_dir_, {child_, stat_->start_ticks}).ok());
  ASSERT_TRUE(RunUntil([&] { return found_.has_value(); }));
  ASSERT_TRUE(found_->ok()) << found_->status().message();
  EXPECT_EQ((*found_)->pid, child_);
  ASSERT_TRUE(launcher_->Signal(**found_, SIGTERM).ok());
  EXPECT_TRUE(RunUntil([&] { return exits_ == 1; }));  // watched once adopted
  child_ = -1;                                         // reaped by the launcher
}

TEST_F(AdoptTest, AShimThatLetsGoOfItsLockUnrecordedIsNotFound) {
  Adopt();
  EXPECT_FALSE(found_.has_value());
  lock_ = UniqueFd();
  ASSERT_TRUE(RunUntil([&] { return found_.has_value(); }));
  EXPECT_EQ(found_->status().code(), Code::kNotFound);
}

TEST_F(AdoptTest, StopWatchingDropsAnAdoptionStillWaiting) {
  Adopt();
  launcher_->StopWatching();
  ASSERT_TRUE(WriteShimRecord(run_dir_, {child_, stat_->start_ticks}).ok());
  io_.run_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(found_.has_value());
}

TEST_F(AdoptTest, NoShimAnswersBeforeAdoptReturns) {
  lock_ = UniqueFd();
  Adopt();
  ASSERT_TRUE(found_.has_value());
  EXPECT_EQ(found_->status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace trainq
