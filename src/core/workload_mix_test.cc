#include "src/core/workload_mix.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

PendingJob Job(int gpus, std::optional<uint64_t> mem = std::nullopt, int cpus = 1) {
  PendingJob j;
  j.gpus = gpus;
  j.mem_bytes = mem;
  j.cpus = cpus;
  return j;
}

TEST(WorkloadMixTest, OneClassPerShapeWeightedByCountAndSize) {
  std::vector<RequestShape> shapes = {
      {1, 1000, 4}, {1, 250, 1}, {1, 250, 1}, {2, 1000, 8}, {0, 0, 2}};
  std::vector<WorkloadClass> mix = WorkloadMix(shapes);
  ASSERT_EQ(mix.size(), 3u);  // the CPU-only request is left out
  EXPECT_EQ(mix[0].gpus, 1);
  EXPECT_DOUBLE_EQ(mix[0].fraction, 0.25);
  EXPECT_DOUBLE_EQ(mix[0].weight, 2 * (1 + 0.25));
  EXPECT_EQ(mix[0].cpus, 1);
  EXPECT_DOUBLE_EQ(mix[1].fraction, 1.0);
  EXPECT_DOUBLE_EQ(mix[1].weight, 1 * (1 + 1.0));
  EXPECT_EQ(mix[2].gpus, 2);
  EXPECT_DOUBLE_EQ(mix[2].weight, 1 * (1 + 2.0));
  EXPECT_TRUE(WorkloadMix({}).empty());
}

TEST(WorkloadMixTest, AJobsShareIsOfTheGpuItWouldRunOn) {
  EXPECT_EQ(ShapeOfRequest(Job(2), 80 * kGiB).gpu_milli, 1000);  // exclusive
  EXPECT_EQ(ShapeOfRequest(Job(1, 20 * kGiB), 80 * kGiB).gpu_milli, 250);
  EXPECT_EQ(ShapeOfRequest(Job(1, 20 * kGiB + 1), 80 * kGiB).gpu_milli, 251);  // rounded up
  EXPECT_EQ(ShapeOfRequest(Job(1, 200 * kGiB), 80 * kGiB).gpu_milli, 1000);
  EXPECT_EQ(ShapeOfRequest(Job(1, 1), 80 * kGiB).gpu_milli, 1);
  EXPECT_EQ(ShapeOfRequest(Job(1, 20 * kGiB), 0).gpu_milli, 1000);  // no GPU seen yet
  PendingJob pct = Job(1);
  pct.mem_percent = 40;
  EXPECT_EQ(ShapeOfRequest(pct, 80 * kGiB).gpu_milli, 400);
  EXPECT_EQ(ShapeOfRequest(Job(1, 20 * kGiB, 6), 80 * kGiB).cpus, 6);
}

TEST(RecentRequestsTest, KeepsTheLastGpuRequestsOnly) {
  RecentRequests recent(2);
  recent.Add(Job(1));  // dropped below: the oldest of three
  recent.Add(Job(0));  // asks for no GPU: not kept
  recent.Add(Job(1, 20 * kGiB));
  recent.Add(Job(1, 40 * kGiB));
  EXPECT_EQ(recent.size(), 2u);
  std::vector<WorkloadClass> mix = recent.Mix(80 * kGiB);
  ASSERT_EQ(mix.size(), 2u);
  EXPECT_DOUBLE_EQ(mix[0].fraction, 0.25);
  EXPECT_DOUBLE_EQ(mix[1].fraction, 0.5);

  RecentRequests off(0);
  off.Add(Job(1));
  EXPECT_EQ(off.size(), 0u);
  EXPECT_TRUE(off.Mix(80 * kGiB).empty());
}

}  // namespace
}  // namespace trainq
