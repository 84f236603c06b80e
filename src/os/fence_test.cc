#include "src/os/fence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/proc_test_util.h"

namespace trainq {
namespace {

using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

TEST(FenceTest, StampRoundTripsInThisBoot) {
  TempDir dir;
  std::string path = dir / "fence";
  EXPECT_EQ(ReadFenceStamp(path).status().code(), Code::kNotFound);  // not renewed yet
  int64_t now = BootClockMs();
  ASSERT_TRUE(WriteFenceStamp(path, now).ok());
  auto stamp = ReadFenceStamp(path);
  ASSERT_TRUE(stamp.ok()) << stamp.status().ToString();
  EXPECT_EQ(*stamp, now);
  EXPECT_EQ(ReadAll(path), std::to_string(now) + " " + BootId() + "\n");
  EXPECT_EQ(BootId().size(), 36u);
}

TEST(FenceTest, AStampFromAnotherBootCountsAsAbsent) {
  TempDir dir;
  std::string path = dir / "fence";
  ASSERT_TRUE(WriteAll(path, "5000 00000000-0000-0000-0000-000000000000\n"));
  EXPECT_EQ(ReadFenceStamp(path).status().code(), Code::kNotFound);
}

TEST(FenceTest, AnythingElseIsInvalid) {
  TempDir dir;
  std::string path = dir / "fence";
  std::string good = "5000 " + BootId() + "\n";
  for (std::string text : {std::string(""), std::string("5000"), "-5 " + BootId() + "\n",
                           "x " + BootId() + "\n", good.substr(0, good.size() - 1)}) {
    ASSERT_TRUE(WriteAll(path, text));
    EXPECT_EQ(ReadFenceStamp(path).status().code(), Code::kInvalid) << text;
  }
  EXPECT_EQ(WriteFenceStamp(path, -1).code(), Code::kInvalid);
}

TEST(FenceTest, TheBootClockCountsForward) {
  int64_t a = BootClockMs();
  EXPECT_GT(a, 0);
  EXPECT_GE(BootClockMs(), a);
}

TEST(FenceTest, CheckIntervalIsATenthWithin50And500Ms) {
  EXPECT_EQ(FenceCheckIntervalMs(300), 50);
  EXPECT_EQ(FenceCheckIntervalMs(2000), 200);
  EXPECT_EQ(FenceCheckIntervalMs(270'000), 500);
}

}  // namespace
}  // namespace trainq
