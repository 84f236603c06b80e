// Elastic jobs in the replay: a job grows into an idle GPU at its start, shrinks for a job that
// arrives once its min runtime has passed, keeps its checkpointed work across the resize and
// pays the restart; worked out by hand. Which rows are elastic is the seed's choice.
#include <cmath>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/sim/replay.h"

namespace trainq::sim {
namespace {

constexpr char kHeader[] = "job_id,submit_s,duration_s,gpus,gpu_fraction,gpu_mem_gib,user\n";

ReplayMetrics Simulate(const std::string& rows, const char* nodes, const ReplayOptions& o) {
  Result<std::vector<TraceJob>> t = ParseTrace(std::string(kHeader) + rows, "t.csv");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return Replay(*t, *ParseNodesShorthand(nodes), o);
}

ReplayOptions AllElastic() {
  ReplayOptions o;
  o.elastic_fraction = 1.0;
  o.min_runtime_ms = 90 * 60 * 1000;
  return o;
}

TEST(ReplayElastic, AJobGrowsIntoAnIdleGpuThenShrinksForAJobThatArrives) {
  // Two GPUs. A asks for 1 GPU for 4 h from 0; B for 1 GPU for 1 h from 2 h.
  ReplayMetrics m = Simulate("A,0,14400,1,1,,a\nB,7200,3600,1,1,,b\n", "1x2", AllElastic());
  EXPECT_EQ(m.elastic_jobs, 2);
  // A starts at 0 on its min (1 GPU) and takes the idle second GPU at once: 2^0.8 times as
  // fast. At 2 h B finds no GPU; A, past its 90 m, shrinks back to 1 for it: it stops after the
  // 70 s stop time, when B starts on the GPU A gave up.
  EXPECT_THAT(m.start_ms, ::testing::ElementsAre(0, 7270000));
  EXPECT_EQ(m.shrinks, 1);
  EXPECT_EQ(m.grows, 0);  // growth at a start is not a resize
  EXPECT_EQ(m.preemptions, 0);
  // A ran 7270 s at 2 GPUs: four 30-minute checkpoints (7200 s) are kept, worth 7200 x 2^0.8
  // s of work at its request. The rest runs on 1 GPU after the 60 s restart.
  double speed = std::pow(2.0, 0.8);
  double a_end = 7270 + 60 + (14400000 - std::llround(7200000 * speed)) / 1000.0;
  double b_end = 7270 + 3600;
  EXPECT_NEAR(m.mean_jct_s, (a_end + (b_end - 7200)) / 2.0, 0.001);
  EXPECT_DOUBLE_EQ(m.mean_queue_s, (0 + 70) / 2.0);  // a resize is no wait
  EXPECT_EQ(m.stuck, 0);
}

TEST(ReplayElastic, AResizeWaitsForTheMinRuntime) {
  // B arrives 1 h into A: A may not shrink before 90 m, so B waits until then plus the stop.
  ReplayMetrics m = Simulate("A,0,14400,1,1,,a\nB,3600,3600,1,1,,b\n", "1x2", AllElastic());
  EXPECT_THAT(m.start_ms, ::testing::ElementsAre(0, 5400000 + 70000));
  EXPECT_EQ(m.shrinks, 1);
}

TEST(ReplayElastic, ASeedPicksTheSameRowsWhateverElseChanges) {
  std::string rows;
  for (int i = 0; i < 200; ++i) rows += fmt::format("J{},{},600,2,1,,u\n", i, i * 10);
  ReplayOptions o = AllElastic();
  o.elastic_fraction = 0.5;
  ReplayMetrics a = Simulate(rows, "4x8", o);
  EXPECT_GT(a.elastic_jobs, 70);  // about half of 200
  EXPECT_LT(a.elastic_jobs, 130);
  o.min_runtime_ms = 10 * 60 * 1000;
  EXPECT_EQ(Simulate(rows, "4x8", o).elastic_jobs, a.elastic_jobs);
  o.elastic_seed = 2;
  EXPECT_NE(Simulate(rows, "4x8", o).start_ms, a.start_ms);
  // Rigid jobs: a share of a GPU, or more than a node, are never elastic.
  o.elastic_fraction = 1.0;
  EXPECT_EQ(Simulate("A,0,600,1,0.5,,a\nB,0,600,16,1,,b\nC,0,600,1,1,,c\n", "2x8", o).elastic_jobs,
            1);
}

}  // namespace
}  // namespace trainq::sim
