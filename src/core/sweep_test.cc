#include "src/core/sweep.h"

#include <gtest/gtest.h>

namespace trainq {
namespace {

std::vector<std::string> Cmd(std::initializer_list<const char*> words) {
  return {words.begin(), words.end()};
}

TEST(SweepTest, ParsesNameAndValues) {
  Result<SweepAxis> axis = ParseSweep("lr=1e-3,3e-4");
  ASSERT_TRUE(axis.ok()) << axis.status().message();
  EXPECT_EQ(axis->name, "lr");
  EXPECT_EQ(axis->values, (std::vector<std::string>{"1e-3", "3e-4"}));
}

TEST(SweepTest, RefusesBadFormsNamingTheOption) {
  for (const char* bad : {"lr", "=1,2", "l r=1", "lr=1,,2", "lr=", "index=1,2"}) {
    Result<SweepAxis> axis = ParseSweep(bad);
    ASSERT_FALSE(axis.ok()) << bad;
    EXPECT_EQ(axis.status().code(), Code::kInvalid);
    EXPECT_NE(axis.status().message().find("--sweep"), std::string::npos);
    EXPECT_NE(axis.status().message().find("NAME=V1,V2"), std::string::npos);
  }
}

TEST(SweepTest, CrossProductFirstAxisSlowest) {
  std::vector<SweepAxis> axes = {{"lr", {"1", "2", "3"}}, {"bs", {"32", "64"}}};
  Result<std::vector<ExpandedJob>> jobs =
      ExpandJobs(Cmd({"python", "t.py", "--lr={lr}", "--bs", "{bs}"}), axes, nullptr);
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 6u);
  EXPECT_EQ((*jobs)[0].command, Cmd({"python", "t.py", "--lr=1", "--bs", "32"}));
  EXPECT_EQ((*jobs)[1].command, Cmd({"python", "t.py", "--lr=1", "--bs", "64"}));
  EXPECT_EQ((*jobs)[5].command, Cmd({"python", "t.py", "--lr=3", "--bs", "64"}));
  EXPECT_EQ((*jobs)[1].label, "lr=1 bs=64");
  EXPECT_EQ((*jobs)[1].array_index, -1);
}

TEST(SweepTest, AnAxisTheCommandDoesNotUseIsRefused) {
  std::vector<SweepAxis> axes = {{"lr", {"1", "2"}}};
  Result<std::vector<ExpandedJob>> jobs = ExpandJobs(Cmd({"python", "t.py"}), axes, nullptr);
  ASSERT_FALSE(jobs.ok());
  EXPECT_NE(jobs.status().message().find("{lr} appears nowhere"), std::string::npos);
}

TEST(SweepTest, AnAxisGivenTwiceIsRefused) {
  std::vector<SweepAxis> axes = {{"lr", {"1"}}, {"lr", {"2"}}};
  EXPECT_FALSE(ExpandJobs(Cmd({"{lr}"}), axes, nullptr).ok());
}

TEST(ArrayTest, RangesListsStepsAndLimit) {
  Result<ArraySpec> a = ParseArray("0-15%4");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices.size(), 16u);
  EXPECT_EQ(a->indices.front(), 0);
  EXPECT_EQ(a->indices.back(), 15);
  EXPECT_EQ(a->limit, 4);
  a = ParseArray("1,3,5-9:2,3");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->indices, (std::vector<int>{1, 3, 5, 7, 9}));
  EXPECT_EQ(a->limit, 0);
}

TEST(ArrayTest, RefusesBadFormsNamingTheField) {
  for (const char* bad :
       {"", "a-b", "5-1", "0-15%0", "0-15%", "-1", "0-3:0", "3:2", "1-2-3", "0-99999999"}) {
    Result<ArraySpec> a = ParseArray(bad, "#SBATCH --array");
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().message().rfind("#SBATCH --array: ", 0), 0u) << a.status().message();
  }
}

TEST(ArrayTest, ArrayTimesSweepAndIndexInTheCommand) {
  ArraySpec array{{0, 1}, 1};
  std::vector<SweepAxis> axes = {{"lr", {"a", "b"}}};
  Result<std::vector<ExpandedJob>> jobs =
      ExpandJobs(Cmd({"run", "--lr", "{lr}", "--seed={index}"}), axes, &array);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 4u);
  EXPECT_EQ((*jobs)[1].command, Cmd({"run", "--lr", "a", "--seed=1"}));
  EXPECT_EQ((*jobs)[1].array_index, 1);
  EXPECT_EQ((*jobs)[1].label, "lr=a [1]");
  EXPECT_EQ((*jobs)[2].command, Cmd({"run", "--lr", "b", "--seed=0"}));
}

}  // namespace
}  // namespace trainq
