#include "src/sim/usage.h"

#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

constexpr int64_t kHour = 3600 * 1000;

TEST(AdvanceUsage, NoDecayAccruesGpuHours) {
  UsageByUser usage;
  AdvanceUsage(usage, {{"a", 2.0}, {"b", 0.5}}, 3 * kHour, 0);
  EXPECT_DOUBLE_EQ(usage["a"], 6.0);
  EXPECT_DOUBLE_EQ(usage["b"], 1.5);
}

TEST(AdvanceUsage, HalvesPerHalfLife) {
  UsageByUser usage{{"a", 8.0}};
  AdvanceUsage(usage, {}, 2 * kHour, kHour);
  EXPECT_NEAR(usage["a"], 2.0, 1e-12);
}

TEST(AdvanceUsage, SplittingTheIntervalGivesTheSameValue) {
  UsageByUser once{{"a", 1.0}}, twice{{"a", 1.0}};
  AdvanceUsage(once, {{"a", 4.0}}, 10 * kHour, 3 * kHour);
  AdvanceUsage(twice, {{"a", 4.0}}, 4 * kHour, 3 * kHour);
  AdvanceUsage(twice, {{"a", 4.0}}, 6 * kHour, 3 * kHour);
  EXPECT_NEAR(once["a"], twice["a"], 1e-9);
  EXPECT_LT(once["a"], 1.0 + 40.0);  // decayed below the undecayed sum
  EXPECT_GT(once["a"], 4.0 * 3);
}

}  // namespace
}  // namespace trainq::sim
