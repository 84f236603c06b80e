#include "src/core/hostlist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Expand(std::string_view list) {
  Result<std::vector<std::string>> names = ExpandHostlist(list);
  EXPECT_TRUE(names.ok()) << names.status().message();
  return names.ok() ? *names : std::vector<std::string>{};
}

TEST(HostlistTest, ExpandsRangesListsAndPaddingAsSlurmDoes) {
  EXPECT_THAT(Expand("node[1-3,5],gpu07,a[01-02]b"),
              ElementsAre("node1", "node2", "node3", "node5", "gpu07", "a01b", "a02b"));
  EXPECT_THAT(Expand("n[08-11]"), ElementsAre("n08", "n09", "n10", "n11"));
  EXPECT_THAT(Expand("n[8-11]"), ElementsAre("n8", "n9", "n10", "n11"));
  EXPECT_THAT(Expand("rack1-node[001-003]"),
              ElementsAre("rack1-node001", "rack1-node002", "rack1-node003"));
  EXPECT_THAT(Expand("x[1-2]-y[3-4]"), ElementsAre("x1-y3", "x1-y4", "x2-y3", "x2-y4"));
  EXPECT_THAT(Expand("a,b,c"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(Expand("127.0.0.[1-2]"), ElementsAre("127.0.0.1", "127.0.0.2"));
  EXPECT_THAT(Expand(""), ElementsAre());
}

TEST(HostlistTest, RefusesWhatCannotBeReadNamingTheItem) {
  for (std::string_view bad : {"bad[1-", "n[3-1]", "n[a-b]", "n]1[", "n[1-2", "a b"}) {
    Result<std::vector<std::string>> names = ExpandHostlist(bad);
    ASSERT_FALSE(names.ok()) << bad;
    EXPECT_EQ(names.status().code(), Code::kInvalid);
    EXPECT_THAT(names.status().message(), HasSubstr("node list: '"));
    EXPECT_THAT(names.status().message(), HasSubstr("expected NAME or PREFIX[RANGES]SUFFIX"));
  }
  Result<std::vector<std::string>> huge = ExpandHostlist("n[1-999999999]");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("expands past 65536 names"));
}

TEST(HostlistTest, CompressesRunsAndKeepsTheOrder) {
  EXPECT_EQ(CompressHostlist({"n1", "n2", "n3", "n5"}), "n[1-3,5]");
  EXPECT_EQ(CompressHostlist({"node1"}), "node1");
  EXPECT_EQ(CompressHostlist({"n01", "n02", "n10"}), "n[01-02,10]");
  EXPECT_EQ(CompressHostlist({"127.0.0.1", "127.0.0.2"}), "127.0.0.[1-2]");
  EXPECT_EQ(CompressHostlist({"alpha", "beta", "gpu1", "gpu2"}), "alpha,beta,gpu[1-2]");
  EXPECT_EQ(CompressHostlist({"n3", "n1", "n2"}), "n[3,1-2]");
  EXPECT_EQ(CompressHostlist({"n9", "n010"}), "n9,n010");
  EXPECT_EQ(CompressHostlist({}), "");
}

TEST(HostlistTest, CompressedListsExpandBackToTheSameNames) {
  for (std::vector<std::string> names : std::vector<std::vector<std::string>>{
           {"n1", "n2", "n4", "m7", "m8"}, {"gpu01", "gpu02", "gpu003", "x"}, {"a1b", "a2b"}}) {
    EXPECT_EQ(Expand(CompressHostlist(names)), names);
  }
}

TEST(HostlistTest, CountsCompressAsSlurmWritesTasksPerNode) {
  EXPECT_EQ(CompressCounts({1}), "1");
  EXPECT_EQ(CompressCounts({1, 1}), "1(x2)");
  EXPECT_EQ(CompressCounts({2, 2, 1}), "2(x2),1");
  EXPECT_EQ(CompressCounts({}), "");
}

}  // namespace
}  // namespace trainq
