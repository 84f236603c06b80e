#include "src/core/session_frames.h"

#include <gtest/gtest.h>

namespace trainq {
namespace {

std::vector<Frame> ReadAll(FrameReader& r) {
  std::vector<Frame> out;
  for (;;) {
    Result<std::optional<Frame>> f = r.Next();
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok() || !*f) return out;
    out.push_back(std::move(**f));
  }
}

TEST(SessionFramesTest, FramesArriveWholeHoweverTheBytesAreSplit) {
  std::string stream = EncodeHello({{24, 80}, true}) + EncodeFrame(FrameType::kData, "ls -l\r") +
                       EncodeResize({50, 132}) + EncodeFrame(FrameType::kEof, "");
  for (size_t piece : {size_t{1}, size_t{3}, stream.size()}) {
    FrameReader r;
    std::vector<Frame> got;
    for (size_t at = 0; at < stream.size(); at += piece) {
      r.Feed(std::string_view(stream).substr(at, piece));
      for (Frame& f : ReadAll(r)) got.push_back(std::move(f));
    }
    ASSERT_EQ(got.size(), 4u) << "piece " << piece;
    EXPECT_EQ(got[0].type, FrameType::kHello);
    Result<Hello> h = DecodeHello(got[0].payload);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->size.rows, 24);
    EXPECT_EQ(h->size.cols, 80);
    EXPECT_TRUE(h->tty);
    EXPECT_EQ(got[1].payload, "ls -l\r");
    Result<WindowSize> w = DecodeResize(got[2].payload);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w->rows, 50);
    EXPECT_EQ(w->cols, 132);
    EXPECT_EQ(got[3].type, FrameType::kEof);
    EXPECT_EQ(r.buffered(), 0u);
  }
}

TEST(SessionFramesTest, ExitCarriesStatusAndWhy) {
  FrameReader r;
  r.Feed(EncodeExit({130, "killed by SIGINT"}));
  std::vector<Frame> got = ReadAll(r);
  ASSERT_EQ(got.size(), 1u);
  Result<SessionExit> e = DecodeExit(got[0].payload);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->status, 130);
  EXPECT_EQ(e->how, "killed by SIGINT");
}

TEST(SessionFramesTest, RefusesUnknownTypesAndOversizedFrames) {
  FrameReader unknown;
  unknown.Feed("Q");
  Result<std::optional<Frame>> f = unknown.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("unknown frame type 0x51"), std::string::npos);

  FrameReader big;
  big.Feed(std::string("D\x00\x10\x00\x01", 5));  // 1 MiB + 1
  f = big.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("at most 1048576"), std::string::npos);

  EXPECT_FALSE(DecodeHello("abc").ok());
  EXPECT_FALSE(DecodeHello(std::string("\0\1\0\1\2", 5)).ok());  // tty flag 2
  EXPECT_FALSE(DecodeResize("abcde").ok());
  EXPECT_FALSE(DecodeExit(std::string("\0\0\1\0", 4)).ok());  // status 256
}

TEST(SessionFramesTest, WaitsForTheRestOfAFrame) {
  std::string frame = EncodeFrame(FrameType::kData, std::string(70000, 'x'));
  FrameReader r;
  r.Feed(std::string_view(frame).substr(0, 40000));
  EXPECT_TRUE(ReadAll(r).empty());
  r.Feed(std::string_view(frame).substr(40000));
  std::vector<Frame> got = ReadAll(r);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload.size(), 70000u);
}

}  // namespace
}  // namespace trainq
