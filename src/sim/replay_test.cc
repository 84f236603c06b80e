#include "src/sim/replay.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

constexpr char kHeader[] = "job_id,submit_s,duration_s,gpus,gpu_fraction,gpu_mem_gib,user\n";

std::vector<TraceJob> Trace(const std::string& rows) {
  Result<std::vector<TraceJob>> t = ParseTrace(std::string(kHeader) + rows, "t.csv");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : std::vector<TraceJob>{};
}

std::vector<NodeSpec> Nodes(const char* shorthand) { return *ParseNodesShorthand(shorthand); }

ReplayMetrics Simulate(const std::string& rows, const char* nodes, ReplayPolicy policy,
                       int64_t aging_ms = 2 * 3600 * 1000) {
  std::vector<TraceJob> trace = Trace(rows);
  ReplayOptions o;
  o.policy = policy;
  o.aging_ms = aging_ms;
  return Replay(trace, Nodes(nodes), o);
}

// Start times in seconds per row; -1 for a row that never started.
std::vector<double> Starts(const ReplayMetrics& m) {
  std::vector<double> s;
  for (const auto& t : m.start_ms) s.push_back(t ? *t / 1000.0 : -1);
  return s;
}

// One node of 2 GPUs: A holds one GPU for 100 s, B wants both, C one.
constexpr char kHeadOfLine[] = "A,0,100,1,1,,\nB,1,10,2,1,,\nC,2,10,1,1,,\n";

struct HeadOfLineCase {
  ReplayPolicy policy;
  std::vector<double> starts;
};

class HeadOfLine : public ::testing::TestWithParam<HeadOfLineCase> {};

TEST_P(HeadOfLine, FifoBlocksBehindTheHeadOthersBackfill) {
  ReplayMetrics m = Simulate(kHeadOfLine, "1x2", GetParam().policy);
  EXPECT_EQ(Starts(m), GetParam().starts);
  EXPECT_EQ(m.jobs, 3);
  EXPECT_EQ(m.stuck, 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, HeadOfLine,
                         ::testing::Values(HeadOfLineCase{ReplayPolicy::kFifo, {0, 100, 110}},
                                           HeadOfLineCase{ReplayPolicy::kNaive, {0, 100, 2}},
                                           HeadOfLineCase{ReplayPolicy::kTrainq, {0, 100, 2}}));

TEST(Replay, MetricsOnAHandComputedTrace) {
  // fifo: A 0-100, B 100-110, C 110-120. Queues 0, 99, 108; JCTs 100, 109, 118.
  ReplayMetrics m = Simulate(kHeadOfLine, "1x2", ReplayPolicy::kFifo);
  EXPECT_DOUBLE_EQ(m.makespan_s, 120);
  EXPECT_DOUBLE_EQ(m.mean_queue_s, (0 + 99 + 108) / 3.0);
  EXPECT_DOUBLE_EQ(m.median_queue_s, 99);
  EXPECT_DOUBLE_EQ(m.p99_queue_s, 108);
  EXPECT_DOUBLE_EQ(m.mean_jct_s, (100 + 109 + 118) / 3.0);
  EXPECT_DOUBLE_EQ(m.p99_jct_s, 118);
  // GPU-seconds asked: 100 + 20 + 10 of 2 GPUs x 120 s.
  EXPECT_DOUBLE_EQ(m.gpu_utilization, 130.0 / 240.0);
  EXPECT_EQ(m.gpus, 2);
  EXPECT_EQ(m.nodes, 1);
}

TEST(Replay, SkipsRowsWithoutDurationAndCountsUnplaceable) {
  ReplayMetrics m = Simulate("a,0,,1,1,,\nb,0,5,3,1,,\nc,0,5,1,1,40,\nd,0,5,1,1,,\n", "1x2:16GiB",
                             ReplayPolicy::kTrainq);
  EXPECT_EQ(m.skipped_no_duration, 1);
  EXPECT_EQ(m.unplaceable, 2);  // 3 GPUs on a 2-GPU cluster; 40 GiB on 16 GiB GPUs
  EXPECT_EQ(m.jobs, 1);
  EXPECT_EQ(Starts(m), (std::vector<double>{-1, -1, -1, 0}));
}

TEST(Replay, SharesFitOneGpuUnderTrainqNotUnderNaive) {
  ReplayMetrics trainq =
      Simulate("a,0,10,1,0.46,,\nb,0,10,1,0.54,,\n", "1x1", ReplayPolicy::kTrainq);
  EXPECT_EQ(Starts(trainq), (std::vector<double>{0, 0}));
  ReplayMetrics naive = Simulate("a,0,10,1,0.46,,\nb,0,10,1,0.54,,\n", "1x1", ReplayPolicy::kNaive);
  EXPECT_EQ(Starts(naive), (std::vector<double>{0, 10}));  // one job per GPU
}

TEST(Replay, NaiveCountsTheJobItPutsOnATooFullGpu) {
  // 5 % used looks free to the naive rule, so the whole-GPU job lands beside it.
  ReplayMetrics m = Simulate("a,0,10,1,0.05,,\nb,1,10,1,1,,\n", "1x1", ReplayPolicy::kNaive);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 1}));
  EXPECT_EQ(m.naive_overcommits, 1);
  ReplayMetrics t = Simulate("a,0,10,1,0.05,,\nb,1,10,1,1,,\n", "1x1", ReplayPolicy::kTrainq);
  EXPECT_EQ(Starts(t), (std::vector<double>{0, 10}));
  EXPECT_EQ(t.naive_overcommits, 0);
}

// Two nodes of 2 GPUs. G wants 4 GPUs: both nodes whole.
constexpr char kGang[] = "A,0,100,1,1,,\nG,1,10,4,1,,\nC,2,50,1,1,,\nD,10,100,1,1,,\n";

TEST(Replay, GangJobTakesSeveralWholeNodes) {
  ReplayMetrics m = Simulate("A,0,10,1,1,,\nG,1,10,4,1,,\n", "2x2", ReplayPolicy::kTrainq);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 10}));
  EXPECT_EQ(m.gang_jobs, 1);
}

TEST(Replay, AgingHoldsNodesForAWaitingGangJob) {
  // Without aging D backfills onto the idle node at 10 s and G waits for it until 110 s.
  ReplayMetrics late = Simulate(kGang, "2x2", ReplayPolicy::kTrainq, 1000 * 1000);
  EXPECT_EQ(Starts(late), (std::vector<double>{0, 110, 2, 10}));
  // Past a 5 s aging limit at 10 s, both nodes are held for G: D waits until G is done.
  ReplayMetrics aged = Simulate(kGang, "2x2", ReplayPolicy::kTrainq, 5 * 1000);
  EXPECT_EQ(Starts(aged), (std::vector<double>{0, 100, 2, 110}));
}

TEST(Replay, FifoGangJobBlocksTheLine) {
  ReplayMetrics m = Simulate(kGang, "2x2", ReplayPolicy::kFifo);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 100, 110, 110}));
}

TEST(Replay, SameInputSameResult) {
  std::string rows;
  for (int i = 0; i < 200; ++i) {
    rows += fmt::format("j{},{},{},{},1,,u{}\n", i, i % 37, 5 + (i * 7919) % 300, 1 + i % 3, i % 4);
  }
  for (ReplayPolicy p : {ReplayPolicy::kTrainq, ReplayPolicy::kFifo, ReplayPolicy::kNaive}) {
    ReplayMetrics a = Simulate(rows, "2x4", p);
    ReplayMetrics b = Simulate(rows, "2x4", p);
    EXPECT_EQ(a.start_ms, b.start_ms);
    EXPECT_EQ(a.jobs, 200);
    EXPECT_EQ(a.stuck, 0);
    EXPECT_GT(a.gpu_utilization, 0.0);
    EXPECT_LE(a.gpu_utilization, 1.0);
  }
}

TEST(Replay, JsonCarriesTheMetricsAndThePolicy) {
  ReplayMetrics m = Simulate(kHeadOfLine, "1x2", ReplayPolicy::kFifo);
  ReplayOptions o;
  o.policy = ReplayPolicy::kFifo;
  std::string json = ReplayJson(m, o);
  EXPECT_THAT(json, ::testing::HasSubstr(R"("jobs":3)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"("makespan_s":120.0)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"("policy":"fifo")"));
}

TEST(Percentile, NearestRank) {
  EXPECT_EQ(Percentile({}, 99), 0);
  EXPECT_EQ(Percentile({5}, 50), 5);
  EXPECT_EQ(Percentile({4, 1, 3, 2}, 50), 2);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(Percentile(hundred, 99), 99);
  EXPECT_EQ(Percentile(hundred, 100), 100);
}

}  // namespace
}  // namespace trainq::sim
