#include "src/sim/attempts.h"

#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

constexpr int64_t kMin = 60 * 1000;

struct CutCase {
  const char* name;
  int64_t ran_ms, overhead_ms, interval_ms;
  int64_t saved_ms, lost_ms;
};

class Cut : public ::testing::TestWithParam<CutCase> {};

TEST_P(Cut, KeepsWholeCheckpointIntervalsOfUsefulTime) {
  const CutCase& c = GetParam();
  AttemptCut cut = CutAttempt(c.ran_ms, c.overhead_ms, {c.interval_ms, kMin});
  EXPECT_EQ(cut.saved_ms, c.saved_ms);
  EXPECT_EQ(cut.lost_ms, c.lost_ms);
}

INSTANTIATE_TEST_SUITE_P(
    Attempts, Cut,
    ::testing::Values(CutCase{"three_checkpoints", 100 * kMin, 0, 30 * kMin, 90 * kMin, 10 * kMin},
                      CutCase{"before_the_first", 25 * kMin, 0, 30 * kMin, 0, 25 * kMin},
                      CutCase{"on_a_checkpoint", 60 * kMin, 0, 30 * kMin, 60 * kMin, 0},
                      // The restart cost is run time that makes no progress.
                      CutCase{"restart_first", 31 * kMin, kMin, 30 * kMin, 30 * kMin, kMin},
                      CutCase{"restart_short_of_one", 30 * kMin, kMin, 30 * kMin, 0, 30 * kMin},
                      CutCase{"cut_inside_restart", kMin / 2, kMin, 30 * kMin, 0, kMin / 2},
                      CutCase{"never_checkpoints", 100 * kMin, 0, 0, 0, 100 * kMin}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(JobWork, CutKeepsProgressAndEveryLaterAttemptPaysTheRestart) {
  CheckpointModel model{30 * kMin, kMin};
  JobWork work{100 * kMin, 0};
  EXPECT_EQ(work.AttemptMs(), 100 * kMin);
  AttemptCut first = work.Cut(45 * kMin, model);
  EXPECT_EQ(first.saved_ms, 30 * kMin);
  EXPECT_EQ(first.lost_ms, 15 * kMin);
  EXPECT_EQ(work.left_ms, 70 * kMin);              // original duration - checkpointed progress
  EXPECT_EQ(work.AttemptMs(), 71 * kMin);          // + the restart cost
  AttemptCut second = work.Cut(31 * kMin, model);  // 30 useful minutes: one checkpoint
  EXPECT_EQ(second.saved_ms, 30 * kMin);
  EXPECT_EQ(second.lost_ms, kMin);
  EXPECT_EQ(work.left_ms, 40 * kMin);
  EXPECT_EQ(work.AttemptMs(), 41 * kMin);
}

}  // namespace
}  // namespace trainq::sim
