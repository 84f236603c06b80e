#include "src/sim/allocation.h"
#include "src/sim/cluster.h"

#include <algorithm>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

constexpr char kHeader[] =
    "job_id,submit_s,duration_s,gpus,gpu_fraction,gpu_mem_gib,user,cpu_milli,memory_mib\n";

std::vector<TraceJob> Pods(const std::string& rows) {
  Result<std::vector<TraceJob>> t = ParseTrace(std::string(kHeader) + rows, "p.csv");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : std::vector<TraceJob>{};
}

std::vector<NodeSpec> Nodes(const std::string& csv) {
  Result<std::vector<NodeSpec>> n =
      ParseNodesCsv("node_id,gpus,gpu_model,gpu_mem_gib,cpu_milli,memory_mib\n" + csv, "n.csv");
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.ok() ? *n : std::vector<NodeSpec>{};
}

AllocationReport Simulate(const std::vector<TraceJob>& pods, const std::vector<NodeSpec>& nodes,
                          AllocationPolicy policy, double inflate,
                          std::vector<uint64_t> seeds = {42}) {
  return RunAllocation(pods, nodes, {policy, inflate, std::move(seeds)});
}

const AllocationPolicy kAll[] = {AllocationPolicy::kTrainq, AllocationPolicy::kBestFit,
                                 AllocationPolicy::kRandom};

TEST(ArrivalOrder, InflatesToTheLimitWithCopiesAndKeepsEveryPod) {
  std::vector<TraceJob> pods = Pods("a,0,1,1,1,,,0,0\nb,0,1,1,0.5,,,0,0\n");
  // 10 GPUs x 1.3 = 13000 thousandths; a and b ask 1500; copies of 1000 or 500 follow
  // until the next would pass 13000, so the total ends within one pod of the limit.
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<size_t> order = ArrivalOrder(pods, 10000, 1.3, seed);
    int64_t total = 0;
    for (size_t i : order) total += pods[i].gpu_milli;
    EXPECT_LE(total, 13000);
    EXPECT_GT(total, 13000 - 1000);
    EXPECT_EQ(std::count(order.begin(), order.end(), 0u) >= 1, true);
    EXPECT_EQ(std::count(order.begin(), order.end(), 1u) >= 1, true);
  }
  EXPECT_EQ(ArrivalOrder(pods, 10000, 1.3, 7), ArrivalOrder(pods, 10000, 1.3, 7));
  EXPECT_NE(ArrivalOrder(pods, 10000, 1.3, 7), ArrivalOrder(pods, 10000, 1.3, 8));
}

TEST(ArrivalOrder, OneWholeGpuPodIsCopiedToExactlyTheLimit) {
  std::vector<TraceJob> pods = Pods("a,0,1,1,1,,,0,0\n");
  EXPECT_EQ(ArrivalOrder(pods, 10000, 1.3, 42).size(), 13u);
  EXPECT_EQ(ArrivalOrder(pods, 10000, 1.0, 42).size(), 10u);
  // Already past the limit: no copies, the trace as it is.
  EXPECT_EQ(ArrivalOrder(Pods("a,0,1,4,1,,,0,0\n"), 1000, 1.3, 42).size(), 1u);
}

TEST(Allocation, RatioAtEachArrivedLevelThenFailures) {
  // One node of 10 GPUs, one-GPU pods: 13 arrive, 10 fit, 3 fail.
  std::vector<TraceJob> pods = Pods("a,0,1,1,1,,,0,0\n");
  for (AllocationPolicy p : kAll) {
    AllocationReport r = Simulate(pods, Nodes("n,10,X,16,,\n"), p, 1.3);
    ASSERT_EQ(r.per_seed.size(), 1u);
    EXPECT_EQ(r.per_seed[0].pods, 13);
    EXPECT_EQ(r.per_seed[0].failed, 3);
    EXPECT_EQ(r.per_seed[0].invalid, 0);
    EXPECT_THAT(r.mean, ::testing::ElementsAre(50, 80, 90, 100, 100, 100, 100))
        << AllocationPolicyName(p);
  }
}

TEST(Allocation, APodThatFitsNowhereFails) {
  std::vector<TraceJob> pods = Pods("big,0,1,2,1,,,0,0\n");
  for (AllocationPolicy p : kAll) {
    AllocationReport r = Simulate(pods, Nodes("n,1,X,16,,\n"), p, 1.0);
    EXPECT_EQ(r.per_seed[0].pods, 1);
    EXPECT_EQ(r.per_seed[0].failed, 1);
    EXPECT_THAT(r.mean, ::testing::Each(0.0));
  }
}

TEST(Allocation, HostCpuAndMemoryAreEnforced) {
  // Two GPUs but CPU for one pod; then memory for one pod.
  for (const char* node : {"n,2,X,16,1000,\n", "n,2,X,16,,1000\n"}) {
    for (AllocationPolicy p : kAll) {
      AllocationReport r = Simulate(Pods("a,0,1,1,1,,,800,800\n"), Nodes(node), p, 1.0);
      EXPECT_EQ(r.per_seed[0].pods, 2) << node;
      EXPECT_EQ(r.per_seed[0].failed, 1) << node << AllocationPolicyName(p);
      EXPECT_DOUBLE_EQ(r.mean[3], 50.0) << node << AllocationPolicyName(p);
    }
  }
}

TEST(Allocation, SharesSummingToOneGpuFitIt) {
  for (AllocationPolicy p : kAll) {
    AllocationReport r =
        Simulate(Pods("a,0,1,1,0.46,,,0,0\nb,0,1,1,0.54,,,0,0\n"), Nodes("n,1,X,16,,\n"), p, 1.0);
    EXPECT_EQ(r.per_seed[0].failed, 0) << AllocationPolicyName(p);
    EXPECT_DOUBLE_EQ(r.mean[3], 100.0);
  }
}

TEST(Allocation, BestFitPacksSharesSoAWholeGpuStaysFree) {
  // Whatever the order, BestFit puts the two halves on one GPU and the whole pod fits.
  std::vector<TraceJob> pods = Pods("h1,0,1,1,0.5,,,0,0\nh2,0,1,1,0.5,,,0,0\nw,0,1,1,1,,,0,0\n");
  AllocationReport r =
      Simulate(pods, Nodes("n,2,X,16,,\n"), AllocationPolicy::kBestFit, 1.0, {1, 2, 3, 4, 5, 6});
  for (const SeedRun& s : r.per_seed) EXPECT_EQ(s.failed, 0) << s.seed;
}

TEST(Allocation, BestFitPrefersTheFullerNode) {
  // The second half-GPU pod joins the node the first one went to (less GPU left there).
  std::vector<TraceJob> pods = Pods(
      "h1,0,1,1,0.5,,,0,0\nh2,0,1,1,0.5,,,0,0\n"
      "w1,0,1,2,1,,,0,0\nw2,0,1,2,1,,,0,0\n");
  AllocationReport r = Simulate(pods, Nodes("a,2,X,16,,\nb,2,X,16,,\nc,2,X,16,,\n"),
                                AllocationPolicy::kBestFit, 1.0, {11, 12, 13});
  for (const SeedRun& s : r.per_seed) EXPECT_EQ(s.failed, 0) << s.seed;
}

TEST(Allocation, DeterministicPerSeedWithMeanAndStd) {
  std::string rows;
  for (int i = 0; i < 60; ++i) {
    rows += fmt::format("p{},0,1,{},{},,,1000,1024\n", i, i % 5 == 0 ? 2 : 1,
                        i % 3 == 0 && i % 5 != 0 ? "0.3" : "1");
  }
  std::vector<TraceJob> pods = Pods(rows);
  std::vector<NodeSpec> nodes = Nodes("a,4,X,16,8000,8192\nb,4,X,32,8000,8192\nc,2,X,,4000,4096\n");
  for (AllocationPolicy p : kAll) {
    AllocationReport one = Simulate(pods, nodes, p, 1.3, {42, 43});
    AllocationReport two = Simulate(pods, nodes, p, 1.3, {42, 43});
    ASSERT_EQ(one.per_seed.size(), 2u);
    EXPECT_EQ(one.per_seed[0].ratio, two.per_seed[0].ratio);
    EXPECT_EQ(one.per_seed[1].failed, two.per_seed[1].failed);
    for (size_t l = 0; l < kLevels.size(); ++l) {
      double mean = (one.per_seed[0].ratio[l] + one.per_seed[1].ratio[l]) / 2;
      EXPECT_DOUBLE_EQ(one.mean[l], mean);
      EXPECT_NEAR(one.stddev[l], std::abs(one.per_seed[0].ratio[l] - mean), 1e-9);
      EXPECT_LE(one.mean[l], 100.0);
      if (l > 0) {
        EXPECT_GE(one.per_seed[0].ratio[l], one.per_seed[0].ratio[l - 1]);
      }
    }
  }
}

TEST(Allocation, JsonHasEveryLevelAndPerSeed) {
  AllocationOptions o{AllocationPolicy::kBestFit, 1.3, {42, 43}};
  AllocationReport r = RunAllocation(Pods("a,0,1,1,1,,,0,0\n"), Nodes("n,10,X,16,,\n"), o);
  std::string json = AllocationJson(r, o);
  EXPECT_THAT(json, ::testing::HasSubstr(
                        R"("allocation_ratio":{"50":50.0,"80":80.0,"90":90.0,"100":100.0,)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"("seeds":[42,43])"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"("failed_pods":3.0)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"("policy":"bestfit")"));
}

TEST(UniformIndex, StaysInRange) {
  std::mt19937_64 rng(1);
  std::vector<int> seen(3);
  for (int i = 0; i < 300; ++i) ++seen[UniformIndex(rng, 3)];
  EXPECT_THAT(seen, ::testing::Each(::testing::Gt(50)));
}

}  // namespace
}  // namespace trainq::sim

namespace trainq::sim {
namespace {

TEST(WorkloadMix, ClassesAreGpusShareAndCpuWeightedByCountAndGpuDemand) {
  // Host memory is not part of the key; CPU is. CPU-only pods are no class.
  std::vector<TraceJob> pods = Pods(
      "a,0,1,1,0.5,,,4000,100\nb,0,1,1,0.5,,,4000,900\nc,0,1,1,0.5,,,8000,100\n"
      "d,0,1,8,1,,,32000,100\ne,0,1,0,0,,,1000,100\n");
  std::vector<trainq::PolicyConfig::WorkloadClass> mix = WorkloadMix(pods);
  ASSERT_EQ(mix.size(), 3u);
  auto find = [&mix](int gpus, double share, int64_t cpus) {
    auto it =
        std::find_if(mix.begin(), mix.end(), [&](const trainq::PolicyConfig::WorkloadClass& c) {
          return c.gpus == gpus && c.fraction == share && c.cpus == cpus;
        });
    EXPECT_NE(it, mix.end()) << gpus << " " << share << " " << cpus;
    return it == mix.end() ? 0.0 : it->weight;
  };
  EXPECT_DOUBLE_EQ(find(1, 0.5, 4000), 2 * 1.5);  // a and b merge
  EXPECT_DOUBLE_EQ(find(1, 0.5, 8000), 1 * 1.5);
  EXPECT_DOUBLE_EQ(find(8, 1.0, 32000), 1 * 9.0);
}

}  // namespace
}  // namespace trainq::sim
