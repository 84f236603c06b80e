#include "src/daemon/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::HasSubstr;

TEST(HistogramTest, BucketsAreCumulative) {
  Histogram h({1, 5});
  h.Observe(0.5);
  h.Observe(3);
  h.Observe(9);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(h.count(), 3u);
  EXPECT_DOUBLE_EQ(h.sum(), 12.5);
}

TEST(RenderMetricsTest, FamiliesAreTypedAndLabelValuesEscaped) {
  MetricsFacts f;
  f.version = "0.9.0";
  f.node = "n\"1";
  f.hostname = "host\\a";
  f.gpus = {{0, "GPU-x", "A100\nB", 100, 40, 10, 50, 37}};
  f.gpus_known = true;
  DaemonCounters c;
  c.queue_wait.Observe(2);
  std::string text = RenderMetrics(f, c, false);
  EXPECT_THAT(text, HasSubstr("# TYPE trainq_gpu_utilization_ratio gauge\n"));
  EXPECT_THAT(text, HasSubstr("trainq_gpu_utilization_ratio{gpu=\"0\",UUID=\"GPU-x\","
                              "Hostname=\"host\\\\a\",node=\"n\\\"1\"} 0.37\n"));
  EXPECT_THAT(text, HasSubstr(",model_name=\"A100\\nB\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("trainq_queue_wait_seconds_bucket{le=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("trainq_queue_wait_seconds_bucket{le=\"5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("trainq_queue_wait_seconds_bucket{le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("trainq_queue_wait_seconds_sum 2\n"));
  // Every waiting kind is a series, zero or not, so a query never finds one missing.
  EXPECT_THAT(text, HasSubstr("trainq_jobs_waiting{reason=\"gpu_memory\"} 0\n"));
}

}  // namespace
}  // namespace trainq
