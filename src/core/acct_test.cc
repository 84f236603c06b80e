#include "src/core/acct.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace trainq {
namespace {

TEST(AcctTest, UsedGpuHoursComeFromTheAttemptsUsage) {
  Job job;
  job.id = 7;
  job.spec.user = "ada";
  job.state = JobState::kSucceeded;
  Attempt a;
  a.gpu_indices = {0, 1};
  a.started_at = 1000;
  a.ended_at = 1000 + 3'600'000;
  a.usage = {7'200'000, 3'600'000, 900'000, 0};  // utilisation known for half: 25 % of it
  job.attempts = {a, a};
  AcctRow row = AcctOf(job, 0);
  EXPECT_DOUBLE_EQ(row.gpu_hours, 4.0);
  EXPECT_DOUBLE_EQ(row.gpu_hours_used, 0.5);
  EXPECT_DOUBLE_EQ(row.utilization, 0.25);
  Result<AcctRow> back = AcctFromJson(AcctToJson(row).dump());
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->gpu_hours_used, 0.5);
  EXPECT_DOUBLE_EQ(back->utilization, 0.25);
  EXPECT_DOUBLE_EQ(AcctTotals({row, *back})["ada"].gpu_hours_used, 1.0);
}

TEST(AcctTest, ARowKeptBeforeUsageWasMeasuredReadsAsUnknown) {
  Result<AcctRow> old = AcctFromJson(R"({"id": 3, "user": "bob", "gpu_hours": 2.5})");
  ASSERT_TRUE(old.ok());
  EXPECT_DOUBLE_EQ(old->gpu_hours_used, 0.0);
  EXPECT_LT(old->utilization, 0);
  EXPECT_TRUE(AcctToJson(*old)["utilization"].is_null());
}

}  // namespace
}  // namespace trainq
