#include "src/cli/suggest.h"

#include <gtest/gtest.h>

namespace trainq {
namespace {

TEST(SuggestTest, EditDistanceCountsEachKindOfSlipOnce) {
  EXPECT_EQ(EditDistance("submit", "submit"), 0u);
  EXPECT_EQ(EditDistance("submt", "submit"), 1u);    // a letter left out
  EXPECT_EQ(EditDistance("submiit", "submit"), 1u);  // one too many
  EXPECT_EQ(EditDistance("sumbit", "submit"), 1u);   // two swapped
  EXPECT_EQ(EditDistance("submot", "submit"), 1u);   // one wrong
  EXPECT_EQ(EditDistance("", "ls"), 2u);
  EXPECT_EQ(EditDistance("cancel", "logs"), 6u);
}

TEST(SuggestTest, ClosestWordNamesOnlyAPlausibleSlip) {
  const std::vector<std::string> commands = {"submit", "show",  "sbatch", "cancel", "logs",
                                             "ls",     "retry", "run",    "gpus",   "explain"};
  EXPECT_EQ(ClosestWord("submt", commands), "submit");
  EXPECT_EQ(ClosestWord("cancle", commands), "cancel");
  EXPECT_EQ(ClosestWord("expl", commands), "explain");  // the one command it starts
  EXPECT_EQ(ClosestWord("gpu", commands), "gpus");
  EXPECT_EQ(ClosestWord("lg", commands), "ls");  // ties: the first listed
  EXPECT_EQ(ClosestWord("frobnicate", commands), std::nullopt);
  EXPECT_EQ(ClosestWord("s", commands), std::nullopt);  // starts several, near none
  EXPECT_EQ(ClosestWord("", commands), std::nullopt);
}

}  // namespace
}  // namespace trainq
