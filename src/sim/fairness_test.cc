#include "src/sim/fairness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

using ::testing::DoubleEq;

struct SharesCase {
  std::vector<double> demands;
  double capacity;
  std::vector<double> shares;
};

class Shares : public ::testing::TestWithParam<SharesCase> {};

TEST_P(Shares, MaxMinFair) {
  std::vector<double> got = MaxMinShares(GetParam().demands, GetParam().capacity);
  ASSERT_EQ(got.size(), GetParam().shares.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], GetParam().shares[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Fairness, Shares,
    ::testing::Values(SharesCase{{1, 1}, 10, {1, 1}},              // all demands fit
                      SharesCase{{10, 10}, 10, {5, 5}},            // an equal split
                      SharesCase{{10, 1, 10}, 10, {4.5, 1, 4.5}},  // the small one in full
                      SharesCase{{3, 2, 8, 8}, 12, {3, 2, 3.5, 3.5}}, SharesCase{{}, 4, {}}));

TEST(FairnessMeter, RatioOfReceivedToFairShareOverTheWindow) {
  FairnessMeter meter(4, 0, 100);
  // a wants 4 GPUs and holds 3, b wants 2 and holds 1: fair shares 2 and 2.
  meter.Add(0, 100, {{"a", 4}, {"b", 2}}, {{"a", 3}, {"b", 1}});
  meter.Add(100, 200, {{"a", 4}}, {{"a", 4}});  // outside the window: not counted
  FairnessReport r = meter.Report({{"a", 1e9}, {"b", 1e9}}, 1);
  ASSERT_EQ(r.per_user.size(), 2u);
  EXPECT_EQ(r.per_user[0].user, "a");
  EXPECT_DOUBLE_EQ(r.per_user[0].ratio, 1.5);
  EXPECT_DOUBLE_EQ(r.per_user[1].ratio, 0.5);
  EXPECT_EQ(r.users, 2);
  ASSERT_TRUE(r.figure.has_value());
  EXPECT_DOUBLE_EQ(*r.figure, 3.0);
  // Against an equal split (2 GPUs each) the same here.
  EXPECT_THAT(r.equal_split_figure.value_or(0), DoubleEq(3.0));
}

TEST(FairnessMeter, SmallUsersAreShownNotCountedAndNothingReceivedIsUnbounded) {
  FairnessMeter meter(2, 0, 10);
  meter.Add(0, 10, {{"a", 2}, {"b", 1}, {"c", 1}}, {{"a", 2}});
  FairnessReport r = meter.Report({{"a", 100}, {"b", 100}, {"c", 1}}, 50);
  EXPECT_EQ(r.users, 2);               // c asked for less than the minimum
  EXPECT_FALSE(r.figure.has_value());  // b received nothing
  EXPECT_THAT(r.per_user.size(), 3u);
  EXPECT_FALSE(r.per_user[2].counted);
}

}  // namespace
}  // namespace trainq::sim
