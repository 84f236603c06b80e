// The log limit: the head as it came, one marker with the exact count dropped, the latest
// output; the file never over the limit; nothing changed without a limit.
#include "src/os/log_writer.h"

#include <fcntl.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/gpu/gpu_test_util.h"
#include "src/os/proc_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

class LogWriterTest : public ::testing::Test {
 protected:
  LogWriter Open(uint64_t max) {
    UniqueFd fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    EXPECT_TRUE(fd.valid());
    return LogWriter(std::move(fd), max);
  }
  std::string Read() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  gpu_test::TempDir dir_;
  std::string path_ = dir_.Path("output.log");
};

TEST_F(LogWriterTest, WithoutALimitEverythingIsKept) {
  LogWriter log = Open(0);
  std::string all = testing::NumberedLines(0, 100000);
  for (size_t i = 0; i < all.size(); i += 4000) ASSERT_TRUE(log.Append(all.substr(i, 4000)).ok());
  EXPECT_EQ(Read(), all);
  EXPECT_EQ(log.dropped(), 0u);
}

TEST_F(LogWriterTest, UnderTheLimitTheFileIsTheOutput) {
  LogWriter log = Open(1 << 20);
  std::string all = testing::NumberedLines(0, 1000);
  ASSERT_TRUE(log.Append(all).ok());
  EXPECT_EQ(Read(), all);
}

// Written in pieces of many sizes, 40 MiB of output through a 1 MiB limit: the first half
// and the latest output, byte for byte, and the count of what is between them.
TEST_F(LogWriterTest, KeepsTheHeadAndTheLatestOutputWithTheExactCountDropped) {
  constexpr uint64_t kMax = 1 << 20;
  LogWriter log = Open(kMax);
  std::string all = testing::NumberedLines(0, 40 * (1 << 20) / 16);
  std::mt19937 rng(7);
  for (size_t i = 0; i < all.size();) {
    size_t n = std::min<size_t>(all.size() - i, 1 + rng() % 70000);
    ASSERT_TRUE(log.Append(std::string_view(all).substr(i, n)).ok());
    ASSERT_LE(log.size(), kMax);
    i += n;
  }
  std::string file = Read();
  ASSERT_LE(file.size(), kMax);
  EXPECT_EQ(file.substr(0, kMax / 2), all.substr(0, kMax / 2));
  size_t marker_end = file.find("kept]\n", kMax / 2);
  ASSERT_NE(marker_end, std::string::npos);
  marker_end += 6;
  std::string marker = file.substr(kMax / 2, marker_end - kMax / 2);
  EXPECT_THAT(marker, HasSubstr(std::to_string(log.dropped()) + " bytes of output dropped here"));
  EXPECT_THAT(marker, HasSubstr("log_max_size is 1.0 MiB"));
  std::string tail = file.substr(marker_end);
  EXPECT_GT(tail.size(), kMax / 8);
  EXPECT_EQ(tail, all.substr(all.size() - tail.size()));
  EXPECT_EQ(kMax / 2 + log.dropped() + tail.size(), all.size());
}

TEST_F(LogWriterTest, OneHugeWriteKeepsItsOwnStartAndEnd) {
  LogWriter log = Open(64 * 1024);
  std::string all = testing::NumberedLines(0, 100000);
  ASSERT_TRUE(log.Append(all).ok());
  std::string file = Read();
  EXPECT_LE(file.size(), 64u * 1024);
  EXPECT_EQ(file.substr(0, 32 * 1024), all.substr(0, 32 * 1024));
  EXPECT_EQ(file.substr(file.size() - 1000), all.substr(all.size() - 1000));
  EXPECT_THAT(file, HasSubstr(std::to_string(log.dropped()) + " bytes of output dropped"));
}

// A shim run again on its run dir appends, as the O_APPEND log did.
TEST_F(LogWriterTest, AppendsAfterWhatTheFileHolds) {
  { std::ofstream(path_, std::ios::binary) << "before\n"; }
  UniqueFd fd(::open(path_.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  LogWriter log(std::move(fd), 1 << 20);
  ASSERT_TRUE(log.Append("after\n").ok());
  EXPECT_EQ(Read(), "before\nafter\n");
}

TEST_F(LogWriterTest, ATinyLimitIsRaisedToTheMinimum) {
  LogWriter log = Open(10);
  ASSERT_TRUE(log.Append(testing::NumberedLines(0, 1000)).ok());
  EXPECT_LE(Read().size(), LogWriter::kMinLogBytes);
  EXPECT_GT(log.dropped(), 0u);
}

}  // namespace
}  // namespace trainq
