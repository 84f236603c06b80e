// Opening what a request names on a path its user controls: only the type asked for, never
// blocking, never through a link, and as the user when asked.
#include "src/os/user_file.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "src/os/proc_test_util.h"
#include "src/os/run_dir.h"
#include "src/os/user_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::TestUser;

// OpenUserFile on a thread, waited for at most 2 s: an open that blocks fails the test (and is
// let go by a writer, so the test ends) instead of hanging it.
Result<UniqueFd> OpenWithin(const std::string& path, FileWant want, const UserInfo* as = nullptr) {
  std::promise<Result<UniqueFd>> done;
  std::future<Result<UniqueFd>> result = done.get_future();
  std::thread([&done, path, want, as] { done.set_value(OpenUserFile(path, want, as)); }).detach();
  if (result.wait_for(std::chrono::seconds(2)) == std::future_status::ready) return result.get();
  ADD_FAILURE() << "opening " << path << " blocked";
  UniqueFd writer(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  return result.get();
}

TEST(OpenUserFileTest, ARegularFileOpensForReadingWithoutBlockingOrLeaking) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "f", "hello").ok());
  Result<UniqueFd> fd = OpenWithin(dir / "f", FileWant::kRegular);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  Result<std::string> text = ReadAtMost(fd->get(), 1, 100, dir / "f");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "ello");
  EXPECT_NE(::fcntl(fd->get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_TRUE(OpenWithin(dir / "f", FileWant::kRegularOrDirectory).ok());
}

TEST(OpenUserFileTest, AFifoIsRefusedAtOnceAndNeverOpened) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "p").c_str(), 0644), 0);
  for (FileWant want : {FileWant::kRegular, FileWant::kDirectory, FileWant::kRegularOrDirectory}) {
    Result<UniqueFd> fd = OpenWithin(dir / "p", want);
    EXPECT_EQ(fd.status().code(), Code::kInvalid);
    EXPECT_EQ(fd.status().message(), dir / "p" + " is a FIFO (named pipe)");
  }
  // No reader holds it: a writer that does not wait finds none (ENXIO).
  EXPECT_EQ(::open((dir / "p").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC), -1);
  EXPECT_EQ(errno, ENXIO);
}

TEST(OpenUserFileTest, ADeviceOrASocketIsRefusedNamingWhatItIs) {
  Result<UniqueFd> fd = OpenWithin("/dev/zero", FileWant::kRegular);
  EXPECT_EQ(fd.status().code(), Code::kInvalid);
  EXPECT_EQ(fd.status().message(), "/dev/zero is a character device");
  TempDir dir;
  UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = dir / "s";
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  path.copy(addr.sun_path, path.size());
  ASSERT_EQ(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_THAT(OpenWithin(path, FileWant::kRegularOrDirectory).status().message(),
              HasSubstr("is a socket"));
}

TEST(OpenUserFileTest, ASymbolicLinkIsNeverFollowedWhateverItNames) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "f", "x").ok());
  ASSERT_EQ(::mkfifo((dir / "p").c_str(), 0644), 0);
  for (const char* target : {"f", "p", "/dev/zero", "/nonexistent"}) {
    std::string link = dir / "link";
    ::unlink(link.c_str());
    ASSERT_EQ(::symlink(target, link.c_str()), 0);
    Result<UniqueFd> fd = OpenWithin(link, FileWant::kRegularOrDirectory);
    EXPECT_EQ(fd.status().code(), Code::kInvalid) << target;
    EXPECT_EQ(fd.status().message(), link + " is a symbolic link") << target;
  }
}

TEST(OpenUserFileTest, ADirectoryIsWhatIsWantedOrNamedAsOne) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir / "d").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomic(dir / "f", "x").ok());
  EXPECT_EQ(OpenWithin(dir / "d", FileWant::kRegular).status().message(),
            dir / "d" + " is a directory");
  EXPECT_EQ(OpenWithin(dir / "f", FileWant::kDirectory).status().message(),
            dir / "f" + " is a regular file");
  for (FileWant want : {FileWant::kDirectory, FileWant::kRegularOrDirectory}) {
    Result<UniqueFd> fd = OpenWithin(dir / "d", want);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    struct stat st = {};
    ASSERT_EQ(::fstat(fd->get(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
  }
}

TEST(OpenUserFileTest, AMissingFileIsNotFound) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "f", "x").ok());
  for (const std::string& path : {dir / "gone", dir / "f/below"}) {
    Result<UniqueFd> fd = OpenWithin(path, FileWant::kRegular);
    EXPECT_EQ(fd.status().code(), Code::kNotFound) << path;
    EXPECT_EQ(fd.status().message(), path + " does not exist");
  }
}

class OpenAsUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!user_.ok()) GTEST_SKIP() << user_.why();
    Result<UserInfo> info = LookupUserByName(user_.name());
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    info_ = *info;
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  }
  TestUser user_;
  UserInfo info_;
  TempDir dir_;
};

TEST_F(OpenAsUserTest, TheKernelJudgesTheUsersAccessAsForTheUser) {
  ASSERT_TRUE(WriteFileAtomic(dir_ / "open", "x").ok());
  ASSERT_EQ(::chmod((dir_ / "open").c_str(), 0644), 0);
  EXPECT_TRUE(OpenWithin(dir_ / "open", FileWant::kRegular, &info_).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ / "roots", "secret").ok());  // 0600, root's
  Result<UniqueFd> fd = OpenWithin(dir_ / "roots", FileWant::kRegular, &info_);
  EXPECT_EQ(fd.status().code(), Code::kPermission);
  EXPECT_EQ(fd.status().message(), "user " + user_.name() + " may not read " + dir_ / "roots");
  // A readable file in a directory the user may not enter.
  ASSERT_EQ(::mkdir((dir_ / "private").c_str(), 0700), 0);
  ASSERT_TRUE(WriteFileAtomic(dir_ / "private/f", "x").ok());
  ASSERT_EQ(::chmod((dir_ / "private/f").c_str(), 0644), 0);
  EXPECT_EQ(OpenWithin(dir_ / "private/f", FileWant::kRegular, &info_).status().code(),
            Code::kPermission);
  // The user's own file, though its mode lets only the owner read it.
  ASSERT_TRUE(WriteFileAtomic(dir_ / "theirs", "x").ok());
  ASSERT_EQ(::chown((dir_ / "theirs").c_str(), info_.uid, info_.gid), 0);
  EXPECT_TRUE(OpenWithin(dir_ / "theirs", FileWant::kRegular, &info_).ok());
  // The type is still judged first, as the user.
  EXPECT_THAT(OpenWithin("/dev/zero", FileWant::kRegular, &info_).status().message(),
              HasSubstr("is a character device"));
}

TEST_F(OpenAsUserTest, TheCallersIdsAreLeftAsTheyWere) {
  ASSERT_TRUE(WriteFileAtomic(dir_ / "roots", "secret").ok());
  EXPECT_FALSE(OpenWithin(dir_ / "roots", FileWant::kRegular, &info_).ok());
  EXPECT_EQ(::setfsuid(static_cast<uid_t>(-1)), 0);
  EXPECT_EQ(::setfsgid(static_cast<gid_t>(-1)), 0);
  EXPECT_TRUE(OpenUserFile(dir_ / "roots", FileWant::kRegular).ok());
}

}  // namespace
}  // namespace trainq
