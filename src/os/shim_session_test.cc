// The shim's side of an interactive session (RunSpec::session_socket), driven through its
// socket frame by frame as `trainq shell` would.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/session_frames.h"
#include "src/os/fd.h"
#include "src/os/proc_test_util.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/terminal_session.h"

namespace trainq {
namespace {

using testing::ForkRun;
using ::testing::HasSubstr;
using testing::ReadAll;
using testing::TempDir;
using testing::WaitChild;

RunSpec SessionSpec(std::vector<std::string> command, const TempDir& dir) {
  RunSpec spec;
  spec.command = std::move(command);
  spec.cwd = dir.path();
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.log_path = LogPath(dir.path());
  spec.grace_ms = 300;
  spec.session_socket = dir.path() + "/session.sock";
  spec.session_wait_ms = 10000;
  return spec;
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// What the shim sent until its exit frame: the output, the notices and the exit.
struct Received {
  std::string output;
  std::string notices;
  std::optional<SessionExit> exit;
};

Received ReadUntilExit(int fd) {
  Received got;
  FrameReader reader;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!got.exit && std::chrono::steady_clock::now() < give_up) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    reader.Feed(std::string_view(buf, static_cast<size_t>(n)));
    for (;;) {
      Result<std::optional<Frame>> f = reader.Next();
      if (!f.ok() || !*f) break;
      if ((*f)->type == FrameType::kData) got.output += (*f)->payload;
      if ((*f)->type == FrameType::kNotice) got.notices += (*f)->payload + "\n";
      if ((*f)->type == FrameType::kExit) got.exit = *DecodeExit((*f)->payload);
    }
  }
  return got;
}

Result<ExitRecord> Finish(pid_t shim, const std::string& run_dir) {
  auto status = WaitChild(shim);
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return Status::Internal("the shim did not finish cleanly");
  }
  return ReadExitRecord(run_dir);
}

TEST(ShimSessionTest, PipesCarryInputOutputAndTheExitStatus) {
  TempDir dir;
  RunSpec spec = SessionSpec({"sh", "-c", "read x; echo got:$x; exit 4"}, dir);
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = ForkRun([&] { return RunShim(dir.path()); });
  Result<int> fd = ConnectSession(spec.session_socket, 10000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  UniqueFd sock(*fd);
  Send(sock.get(), EncodeHello({{}, false}) + EncodeFrame(FrameType::kData, "hi\n"));
  Received got = ReadUntilExit(sock.get());
  ASSERT_TRUE(got.exit);
  EXPECT_EQ(got.exit->status, 4);
  EXPECT_EQ(got.output, "got:hi\n");
  Result<ExitRecord> rec = Finish(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 4);
  EXPECT_THAT(ReadAll(LogPath(dir.path())), HasSubstr("got:hi"));  // the transcript
  EXPECT_FALSE(FileExists(spec.session_socket));                   // removed at the end
}

// A program that ends with input unread: the shim's write fails (EPIPE), and the shim lives
// on to report the program's own end.
TEST(ShimSessionTest, InputLeftUnreadDoesNotKillTheShim) {
  TempDir dir;
  RunSpec spec = SessionSpec({"sh", "-c", "exit 3"}, dir);
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  // As SpawnShim starts it: SIGPIPE's default disposition, whatever the test binary's.
  pid_t shim = ForkRun([&] {
    ::signal(SIGPIPE, SIG_DFL);
    return RunShim(dir.path());
  });
  Result<int> fd = ConnectSession(spec.session_socket, 10000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  UniqueFd sock(*fd);
  Send(sock.get(), EncodeHello({{}, false}));
  std::string chunk = EncodeFrame(FrameType::kData, std::string(256 * 1024, 'x'));
  for (int i = 0; i < 4; ++i) (void)::send(sock.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
  Received got = ReadUntilExit(sock.get());
  ASSERT_TRUE(got.exit);
  EXPECT_EQ(got.exit->status, 3);
  Result<ExitRecord> rec = Finish(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->exit_code, 3);
}

TEST(ShimSessionTest, ATerminalHasTheClientsSizeAndFollowsResizes) {
  TempDir dir;
  // The size at the start, then again once the first line of input (sent after the resize)
  // arrives.
  RunSpec spec = SessionSpec({"sh", "-c", "stty size; read x; stty size"}, dir);
  spec.session_no_log = true;
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = ForkRun([&] { return RunShim(dir.path()); });
  Result<int> fd = ConnectSession(spec.session_socket, 10000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  UniqueFd sock(*fd);
  Send(sock.get(), EncodeHello({{30, 100}, true}) + EncodeResize({50, 132}) +
                       EncodeFrame(FrameType::kData, "\r"));
  Received got = ReadUntilExit(sock.get());
  ASSERT_TRUE(got.exit);
  EXPECT_EQ(got.exit->status, 0);
  // Both sizes are the terminal's: which one the first stty saw depends on who ran first.
  EXPECT_THAT(got.output, HasSubstr("50 132\r\n"));
  ASSERT_TRUE(Finish(shim, dir.path()).ok());
  EXPECT_THAT(ReadAll(LogPath(dir.path())), ::testing::Not(HasSubstr("132")));  // --no-log
}

TEST(ShimSessionTest, TheClientGoingAwayHangsTheProgramUp) {
  TempDir dir;
  RunSpec spec = SessionSpec(
      {"sh", "-c", "trap 'echo hup > hup.txt; exit 9' HUP; echo up; while :; do sleep 0.05; done"},
      dir);
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = ForkRun([&] { return RunShim(dir.path()); });
  Result<int> fd = ConnectSession(spec.session_socket, 10000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  {
    UniqueFd sock(*fd);
    Send(sock.get(), EncodeHello({{}, false}));
    char buf[64];
    ASSERT_GT(::read(sock.get(), buf, sizeof(buf)), 0);  // "up": it runs
  }
  Result<ExitRecord> rec = Finish(shim, dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->hangup, "the terminal disconnected");
  EXPECT_EQ(ReadAll(dir.path() + "/hup.txt"), "hup\n");
  EXPECT_THAT(ReadAll(LogPath(dir.path())),
              HasSubstr("trainq: the terminal disconnected; hanging up the session"));
}

TEST(ShimSessionTest, NoClientInTimeMeansTheProgramNeverRuns) {
  TempDir dir;
  RunSpec spec = SessionSpec({"touch", "ran"}, dir);
  spec.session_wait_ms = 300;
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  Result<ExitRecord> rec = Finish(ForkRun([&] { return RunShim(dir.path()); }), dir.path());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_THAT(rec->hangup, HasSubstr("no terminal connected within"));
  EXPECT_FALSE(rec->exit_code);
  EXPECT_FALSE(FileExists(dir.path() + "/ran"));
}

TEST(ShimSessionTest, ASecondClientIsToldTheSessionHasItsTerminal) {
  TempDir dir;
  RunSpec spec = SessionSpec({"sh", "-c", "read x"}, dir);
  ASSERT_TRUE(WriteRunSpec(dir.path(), spec).ok());
  pid_t shim = ForkRun([&] { return RunShim(dir.path()); });
  Result<int> first = ConnectSession(spec.session_socket, 10000);
  ASSERT_TRUE(first.ok());
  UniqueFd one(*first);
  Send(one.get(), EncodeHello({{}, false}));
  Result<int> second = ConnectSession(spec.session_socket, 10000);
  ASSERT_TRUE(second.ok());
  UniqueFd two(*second);
  Received refused = ReadUntilExit(two.get());  // no exit frame: a notice, then closed
  EXPECT_THAT(refused.notices, HasSubstr("this session already has its terminal"));
  Send(one.get(), EncodeFrame(FrameType::kEof, ""));
  Received got = ReadUntilExit(one.get());
  ASSERT_TRUE(got.exit);
  EXPECT_EQ(got.exit->status, 1);  // `read` at the end of input
  ASSERT_TRUE(Finish(shim, dir.path()).ok());
}

}  // namespace
}  // namespace trainq
