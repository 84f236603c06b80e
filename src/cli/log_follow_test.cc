// `trainq logs -f` over a log the shim compacts: what it prints is never garbled, and after
// each poll it shows the file's marker and latest output as they are.
#include "src/cli/log_follow.h"

#include <fcntl.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "src/os/log_writer.h"
#include "src/os/proc_test_util.h"

namespace trainq {
namespace {

// What the follower printed, through a memory stream.
class Printed {
 public:
  Printed() : out_(::open_memstream(&data_, &size_)) {}
  ~Printed() {
    std::fclose(out_);
    std::free(data_);
  }
  std::FILE* out() { return out_; }
  std::string text() {
    std::fflush(out_);
    return std::string(data_, size_);
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::FILE* out_;
};

// From the last marker on (the whole text without one).
std::string FromLastMarker(const std::string& text) {
  size_t last = std::string::npos;
  for (size_t from = 0;;) {
    size_t at = FindLogMarker(std::string_view(text).substr(from));
    if (at == std::string::npos) break;
    last = from + at;
    from = last + 1;
  }
  return last == std::string::npos ? text : text.substr(last);
}

// Every line is a whole output line or a marker. A line may be cut short by a marker: the
// end of a line whose start was dropped after it, or (printed again from the marker on) the
// start of a line before it.
void ExpectNotGarbled(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  auto marker = [&](size_t i) { return i < lines.size() && lines[i].starts_with("[trainq: "); };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty() || marker(i)) continue;  // empty: the marker's leading newline
    bool whole = line.size() == 15 && line.starts_with("line ");
    bool cut = line.size() < 15 && ((i > 0 && marker(i - 1)) || marker(i + 1));
    ASSERT_TRUE(whole || cut) << "garbled line " << i << ": " << line;
  }
}

// Guards `logs -f` across the shim's compactions: a follower by offset printed misplaced
// bytes once the log was compacted, and never the marker.
TEST(LogFollowerTest, FollowsALogThroughCompactions) {
  testing::TempDir dir;
  std::string path = dir / "output.log";
  LogWriter log(UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)), 64 * 1024);
  LogFollower follower(path);
  Printed printed;
  std::string all = testing::NumberedLines(0, 100000);
  std::mt19937 rng(3);
  int compactions_seen = 0;
  for (size_t i = 0; i < all.size();) {
    size_t n = std::min<size_t>(all.size() - i, 1 + rng() % 40000);
    uint64_t dropped = log.dropped();
    ASSERT_TRUE(log.Append(std::string_view(all).substr(i, n)).ok());
    i += n;
    if (rng() % 2 != 0) continue;  // several appends, compactions too, between two polls
    follower.Poll(printed.out());
    std::string text = printed.text();
    std::string file = testing::ReadAll(path);
    ASSERT_EQ(FromLastMarker(text), FromLastMarker(file)) << "after " << i << " bytes";
    compactions_seen += log.dropped() != dropped;
  }
  EXPECT_GT(compactions_seen, 5);
  follower.Poll(printed.out());
  EXPECT_EQ(FromLastMarker(printed.text()), FromLastMarker(testing::ReadAll(path)));
  EXPECT_TRUE(printed.text().ends_with(all.substr(all.size() - 1000)));
  ExpectNotGarbled(printed.text());
  EXPECT_TRUE(printed.text().starts_with(all.substr(0, 32 * 1024)));
}

TEST(LogFollowerTest, AMissingLogPrintsNothingAndAGrowingOneIsPrintedOnce) {
  testing::TempDir dir;
  std::string path = dir / "output.log";
  LogFollower follower(path);
  Printed printed;
  follower.Poll(printed.out());
  EXPECT_EQ(printed.text(), "");
  LogWriter log(UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)), 0);
  ASSERT_TRUE(log.Append("one\n").ok());
  follower.Poll(printed.out());
  ASSERT_TRUE(log.Append("two\n").ok());
  follower.Poll(printed.out());
  follower.Poll(printed.out());
  EXPECT_EQ(printed.text(), "one\ntwo\n");
}

// A log held in memory, as the daemon's API would serve it.
class Memory : public LogSource {
 public:
  explicit Memory(std::string* text) : text_(text) {}
  std::optional<uint64_t> Size() override { return text_->size(); }
  std::string ReadAt(uint64_t offset, size_t length) override {
    return offset >= text_->size() ? "" : text_->substr(offset, length);
  }

 private:
  std::string* text_;
};

std::string Tail(std::string text, size_t lines) {
  LogFollower follower(std::make_unique<Memory>(&text));
  follower.SkipToLastLines(lines);
  Printed printed;
  follower.Poll(printed.out());
  return printed.text();
}

TEST(LogFollowerTest, TailStartsAtTheLastLinesAndFollowsOn) {
  EXPECT_EQ(Tail("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(Tail("a\nb\nc", 2), "b\nc") << "an unfinished last line counts";
  EXPECT_EQ(Tail("a\nb\n", 5), "a\nb\n") << "fewer lines than asked: all of them";
  EXPECT_EQ(Tail("a\nb\n", 0), "");
  EXPECT_EQ(Tail("", 3), "");
  // Lines across the 64 KiB chunks the tail is searched in.
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(Tail(big, 3), "line 19997\nline 19998\nline 19999\n");
  std::string text = "one\ntwo\n";
  LogFollower follower(std::make_unique<Memory>(&text));
  follower.SkipToLastLines(1);
  Printed printed;
  follower.Poll(printed.out());
  text += "three\n";
  follower.Poll(printed.out());
  EXPECT_EQ(printed.text(), "two\nthree\n");
}

}  // namespace
}  // namespace trainq
