// EnvVars: the jobs of a batch share one environment, and a change to one job's copies it
// first, so no other job sees it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "trainq/job.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(EnvVarsTest, CopiesShareOneListUntilOneChanges) {
  EnvVars a = EnvVars::List{{"HOME", "/home/ada"}, {"PATH", "/usr/bin"}};
  EnvVars b = a;
  EXPECT_TRUE(a.SharedWith(b));
  EXPECT_EQ(&a.list(), &b.list());
  b.emplace_back("CUDA_VISIBLE_DEVICES", "0");
  EXPECT_FALSE(a.SharedWith(b));
  EXPECT_THAT(a, ElementsAre(Pair("HOME", "/home/ada"), Pair("PATH", "/usr/bin")));
  EXPECT_THAT(b, ElementsAre(Pair("HOME", "/home/ada"), Pair("PATH", "/usr/bin"),
                             Pair("CUDA_VISIBLE_DEVICES", "0")));
  EnvVars c = a;
  c.clear();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(a.size(), 2u);
}

TEST(EnvVarsTest, EqualByContentWhetherSharedOrNot) {
  EnvVars a = {{"A", "1"}};
  EnvVars b = {{"A", "1"}};
  EXPECT_FALSE(a.SharedWith(b));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, (EnvVars::List{{"A", "1"}}));
  b.push_back({"B", "2"});
  EXPECT_FALSE(a == b);
  EXPECT_FALSE(EnvVars().SharedWith(EnvVars()));  // nothing shared by two empty ones
  EXPECT_EQ(EnvVars(), EnvVars::List{});
}

TEST(EnvVarsTest, ALoneOwnerChangesInPlace) {
  EnvVars a = {{"A", "1"}};
  const EnvVars::List* before = &a.list();
  a.emplace_back("B", "2");
  EXPECT_EQ(&a.list(), before);
  EXPECT_EQ(a.size(), 2u);
}

}  // namespace
}  // namespace trainq
