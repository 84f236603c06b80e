// Preemption in the replay: trainq's rules through ChoosePreemptions, and Tiresias's 2D-LAS,
// on traces small enough to work out by hand.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/preemption.h"
#include "src/sim/replay.h"

namespace trainq::sim {
namespace {

constexpr char kHeader[] = "job_id,submit_s,duration_s,gpus,gpu_fraction,gpu_mem_gib,user\n";

std::vector<TraceJob> Trace(const std::string& rows) {
  Result<std::vector<TraceJob>> t = ParseTrace(std::string(kHeader) + rows, "t.csv");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : std::vector<TraceJob>{};
}

// Fair share only, no decay (so a user's hours are their GPU-seconds so far), defaults else.
ReplayOptions FairShare() {
  ReplayOptions o;
  o.preempt = true;
  o.preempt_for_fair_share = true;
  o.half_life_ms = 0;
  return o;
}

ReplayMetrics Simulate(const std::string& rows, const char* nodes, const ReplayOptions& o) {
  std::vector<TraceJob> trace = Trace(rows);
  return Replay(trace, *ParseNodesShorthand(nodes), o);
}

std::vector<double> Starts(const ReplayMetrics& m) {
  std::vector<double> s;
  for (const auto& t : m.start_ms) s.push_back(t ? double(*t) / 1000.0 : -1);
  return s;
}

// One GPU. a runs 10 h from 0; b, of a user with no hours, arrives at 1 h.
constexpr char kOneVictim[] = "A,0,36000,1,1,,a\nB,3600,600,1,1,,b\n";

TEST(ReplayPreempt, VictimLosesWorkSinceItsLastCheckpointAndPaysTheRestart) {
  ReplayMetrics m = Simulate(kOneVictim, "1x1", FairShare());
  // B preempts A at 3600 s; A stops after the 70 s stop time, B starts then and runs 600 s.
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 3670}));
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_EQ(m.preempted_jobs, 1);
  // A ran 3670 s: two 30-minute checkpoints kept (3600 s), 70 s lost. Requeued at 3670, it
  // waits for B (to 4270), then runs 36000 - 3600 left + 60 s restart: ends 36730.
  EXPECT_DOUBLE_EQ(m.mean_jct_s, (36730 + (4270 - 3600)) / 2.0);
  EXPECT_DOUBLE_EQ(m.mean_queue_s, ((4270 - 3670) + 70) / 2.0);  // waits after requeue count
  EXPECT_DOUBLE_EQ(m.mean_first_queue_s, (0 + 70) / 2.0);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, (70 + 60) / 3600.0);  // lost work + restart cost
  EXPECT_EQ(m.stuck, 0);
}

// The simulator's preemption settings are the daemon's (src/daemon/config_test.cc checks the
// daemon's side): the same defaults, each read by the one PreemptConfigFrom.
TEST(ReplayPreempt, SettingsAreTheDaemonsThroughPreemptConfigFrom) {
  EXPECT_EQ(PreemptConfigFrom(ReplayOptions{}), PreemptConfig{});
  ReplayOptions o;
  o.preempt_priority_gap = 0;
  o.preempt_for_fair_share = o.preempt_for_aging = true;
  o.min_runtime_ms = 5;
  o.preempt_spare_ms = 6;
  o.preempt_for_attained_service = true;
  o.attained_service_ms = 7;
  PreemptConfig c = PreemptConfigFrom(o);
  EXPECT_EQ(c.priority_gap, 0);
  EXPECT_TRUE(c.for_fair_share && c.for_aging);
  EXPECT_EQ(c.min_runtime_ms, 5);
  EXPECT_EQ(c.spare_ms, 6);
  EXPECT_TRUE(c.for_attained_service);
  EXPECT_EQ(c.attained_service_ms, 7);
}

// preempt_priority_gap reaches the replay: at 0, as in the daemon, equal priorities preempt one
// another, so B takes A's GPU with no other rule on; at the default 1 nothing preempts.
TEST(ReplayPreempt, APriorityGapOfZeroLetsEqualPrioritiesPreempt) {
  ReplayOptions o;
  o.preempt = true;
  o.half_life_ms = 0;
  o.preempt_priority_gap = 0;
  ReplayMetrics m = Simulate(kOneVictim, "1x1", o);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 3670}));
  EXPECT_EQ(m.preemptions, 1);
  o.preempt_priority_gap = 1;
  EXPECT_EQ(Simulate(kOneVictim, "1x1", o).preemptions, 0);
}

struct CheckpointCase {
  const char* name;
  int64_t interval_ms, restart_ms;
  double a_end_s;  // when A ends at last
};

class ReplayCheckpoint : public ::testing::TestWithParam<CheckpointCase> {};

TEST_P(ReplayCheckpoint, RemainingIsDurationLessCheckpointedPlusRestart) {
  ReplayOptions o = FairShare();
  o.checkpoint = {GetParam().interval_ms, GetParam().restart_ms};
  ReplayMetrics m = Simulate(kOneVictim, "1x1", o);
  EXPECT_DOUBLE_EQ(m.mean_jct_s, (GetParam().a_end_s + 670) / 2.0);
}

INSTANTIATE_TEST_SUITE_P(Model, ReplayCheckpoint,
                         ::testing::Values(
                             // Restarted at 4270 with 36000 - saved + restart to run.
                             CheckpointCase{"every_30m", 1800000, 60000, 4270 + 36000 - 3600 + 60},
                             CheckpointCase{"every_hour", 3600000, 60000, 4270 + 36000 - 3600 + 60},
                             CheckpointCase{"every_2h", 7200000, 60000,
                                            4270 + 36000 + 60},  // nothing saved yet
                             CheckpointCase{"never", 0, 60000, 4270 + 36000 + 60},
                             CheckpointCase{"free_restart", 1800000, 0, 4270 + 36000 - 3600}),
                         [](const auto& info) { return std::string(info.param.name); });

struct MinRuntimeCase {
  const char* name;
  int64_t min_runtime_ms;
  double b_start_s;
};

class ReplayMinRuntime : public ::testing::TestWithParam<MinRuntimeCase> {};

TEST_P(ReplayMinRuntime, AYoungAttemptIsSparedUntilItHasRunMinRuntime) {
  ReplayOptions o = FairShare();
  o.min_runtime_ms = GetParam().min_runtime_ms;
  // B arrives when A has run 5 minutes; a pass is due when A reaches min_runtime.
  ReplayMetrics m = Simulate("A,0,36000,1,1,,a\nB,300,600,1,1,,b\n", "1x1", o);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, GetParam().b_start_s}));
}

INSTANTIATE_TEST_SUITE_P(Config, ReplayMinRuntime,
                         ::testing::Values(MinRuntimeCase{"none", 0, 300 + 70},
                                           MinRuntimeCase{"ten_minutes", 600000, 600 + 70},
                                           MinRuntimeCase{"twenty_minutes", 1200000, 1200 + 70}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReplayPreempt, GpusFreedByAPreemptionAreHeldForThePreemptor) {
  // Two GPUs. A1 and A2 (user a) run long; b0 gives user b a little usage. At 3600 s B (user
  // b) preempts A2, the younger attempt. C, of a user with no hours at all, arrives when A2's
  // GPU frees: Place would put C first, but the GPU is held for B. C then preempts A1.
  std::string rows =
      "A1,0,36000,1,1,,a\nb0,0,600,1,1,,b\nA2,700,36000,1,1,,a\nB,3600,600,1,1,,b\n"
      "C,3670,600,1,1,,c\n";
  ReplayMetrics m = Simulate(rows, "1x2", FairShare());
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 0, 700, 3670, 3740}));
  EXPECT_EQ(m.preemptions, 2);
}

TEST(ReplayPreempt, WithoutPreemptTheSameTraceWaits) {
  ReplayOptions o;
  o.half_life_ms = 0;
  ReplayMetrics m = Simulate(kOneVictim, "1x1", o);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 36000}));
  EXPECT_EQ(m.preemptions, 0);
  EXPECT_DOUBLE_EQ(m.lost_gpu_hours, 0);
}

struct SpareCase {
  const char* name;
  int64_t spare_ms;
  double b3_start_s;
};

class ReplaySpare : public ::testing::TestWithParam<SpareCase> {};

TEST_P(ReplaySpare, AJobPreemptedTwiceInARowIsSpared) {
  ReplayOptions o = FairShare();
  o.preempt_spare_ms = GetParam().spare_ms;
  // A is preempted at 3600 (stops 3670) and at 8000 (stops 8070) by b's jobs; B3 comes at
  // 10000, when A has run long enough again.
  std::string rows =
      "A,0,36000,1,1,,a\nB1,3600,600,1,1,,b\nB2,8000,600,1,1,,b\nB3,10000,600,1,1,,b\n";
  ReplayMetrics m = Simulate(rows, "1x1", o);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 3670, 8070, GetParam().b3_start_s}));
}

INSTANTIATE_TEST_SUITE_P(Config, ReplaySpare,
                         ::testing::Values(SpareCase{"off", 0, 10070},
                                           // Spared until 8070 + 1 h; a pass is due then.
                                           SpareCase{"one_hour", 3600000, 8070 + 3600 + 70}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReplayPreempt, ALargeJobPastAgingPreemptsOtherUsers) {
  ReplayOptions o;
  o.preempt = true;
  o.preempt_for_aging = true;  // no fair-share rule
  o.aging_ms = 3600 * 1000;
  // Eight 1-GPU jobs of a fill the node; L (b, 4 GPUs: large on an 8-GPU node) arrives at
  // 600 s. Aged a millisecond past 4200 s it preempts four of them and starts after the stop.
  std::string rows;
  for (int i = 0; i < 8; ++i) rows += fmt::format("a{},0,36000,1,1,,a\n", i);
  rows += "L,600,600,4,1,,b\n";
  ReplayMetrics m = Simulate(rows, "1x8", o);
  EXPECT_DOUBLE_EQ(Starts(m).back(), 4200.001 + 70);
  EXPECT_EQ(m.preemptions, 4);
}

// The attained-service rule: B, which has had nothing, preempts A once A has had its hour
// (the same user's: the rule does not ask whose), and A, requeued with its hour, waits behind
// C, submitted after it. Without the rule B waits for A's end.
TEST(ReplayPreempt, AJobThatHadLessPreemptsOneThatHadItsHourAndGoesFirst) {
  ReplayOptions o;
  o.preempt = true;
  o.preempt_for_attained_service = true;
  o.attained_service_ms = 3600 * 1000;
  const char* rows = "A,0,36000,1,1,,a\nB,600,600,1,1,,a\nC,3700,600,1,1,,a\n";
  ReplayMetrics m = Simulate(rows, "1x1", o);
  // A passes 1 GPU-hour at 3600 s (a pass is due a millisecond later), stops after 70 s.
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 3670.001, 4270.001}));
  EXPECT_EQ(m.preemptions, 1);
  o.preempt_for_attained_service = false;
  o.preempt_priority_gap = 0;  // every job may preempt, but A is never past min_runtime first
  o.min_runtime_ms = 100 * 3600 * 1000;
  m = Simulate(rows, "1x1", o);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 36000, 36600}));
}

TEST(ReplayWarmUp, EarlierRowsLoadTheClusterButAreNotMeasured) {
  // W (a warm-up row, before 50 s) holds the only GPU until 150 s; M waits for it.
  ReplayOptions o;
  o.measure_from_ms = 50000;
  ReplayMetrics m = Simulate("W,0,150,1,1,,a\nM,50,10,1,1,,b\n", "1x1", o);
  EXPECT_EQ(m.jobs, 1);
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 150}));
  EXPECT_DOUBLE_EQ(m.mean_queue_s, 100);
  EXPECT_DOUBLE_EQ(m.mean_jct_s, 110);
}

ReplayOptions Tiresias() {
  ReplayOptions o;
  o.policy = ReplayPolicy::kTiresias;
  return o;
}

TEST(ReplayTiresias, ADemotedJobIsPreemptedByANewOne) {
  // One GPU. A crosses 3250 GPU-seconds at 3250 s and drops to the second queue; B (queue 0)
  // then preempts it. A ran 3320 s (one checkpoint: 1800 s kept), and restarts after B with
  // 10000 - 1800 + 60 s to run.
  ReplayMetrics m = Simulate("A,0,10000,1,1,,a\nB,100,100,1,1,,b\n", "1x1", Tiresias());
  EXPECT_EQ(Starts(m), (std::vector<double>{0, 3320}));
  EXPECT_EQ(m.preemptions, 1);
  EXPECT_DOUBLE_EQ(m.mean_jct_s, ((3420 + 8260) + (3420 - 100)) / 2.0);
}

struct LasCase {
  const char* name;
  double threshold_gpu_s;
  std::vector<double> starts;
};

class ReplayLas : public ::testing::TestWithParam<LasCase> {};

TEST_P(ReplayLas, LeastAttainedServiceFirst) {
  ReplayOptions o = Tiresias();
  o.las_threshold_gpu_s = GetParam().threshold_gpu_s;
  // Two GPUs: A takes both for 2000 s of wall time (service 2 x t); B and C want one each.
  ReplayMetrics m = Simulate("A,0,2000,2,1,,a\nB,10,300,1,1,,b\nC,20,300,1,1,,c\n", "1x2", o);
  EXPECT_EQ(Starts(m), GetParam().starts);
}

INSTANTIATE_TEST_SUITE_P(
    Threshold, ReplayLas,
    ::testing::Values(
        // A reaches 1000 GPU-seconds at 500 s and is preempted: B and C start after the stop.
        LasCase{"low", 1000, {0, 570, 570}},
        // A never leaves the first queue before it ends: the others wait, FIFO.
        LasCase{"high", 1e6, {0, 2000, 2000}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ReplayPreempt, SameInputSameResult) {
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    rows += fmt::format("j{},{},{},{},1,,u{}\n", i, (i * 37) % 2000, 300 + (i * 7919) % 6000,
                        1 << (i % 3), i % 5);
  }
  ReplayOptions both = FairShare();
  both.preempt_for_aging = true;
  both.aging_ms = 1800 * 1000;
  for (const ReplayOptions& o : {both, Tiresias()}) {
    ReplayMetrics a = Simulate(rows, "2x4", o);
    ReplayMetrics b = Simulate(rows, "2x4", o);
    EXPECT_EQ(ReplayJson(a, o), ReplayJson(b, o));
    EXPECT_EQ(a.jobs, 40);
    EXPECT_EQ(a.stuck, 0);
    EXPECT_GT(a.preemptions, 0);
    EXPECT_GT(a.lost_gpu_hours, 0);
  }
}

TEST(ReplayPreempt, JsonCarriesPreemptionAndFairness) {
  ReplayOptions o = FairShare();
  ReplayMetrics m = Simulate(kOneVictim, "1x1", o);
  std::string json = ReplayJson(m, o);
  for (const char* field :
       {R"("preemptions":1)", R"("lost_gpu_hours":)", R"("fairness":)", R"("fairness_per_user":{)",
        R"("preempt":true)", R"("ckpt_interval_s":1800.0)", R"("restart_cost_s":60.0)"}) {
    EXPECT_THAT(json, ::testing::HasSubstr(field));
  }
}

}  // namespace
}  // namespace trainq::sim
