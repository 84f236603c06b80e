#include "src/core/fair_share.h"

#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace trainq {
namespace {

constexpr int64_t kHour = 3600 * 1000;
constexpr UnixMs kNow = 1'700'000'000'000;

// One attempt's run; end nullopt: still running (counts up to `now`).
struct GpuRun {
  std::string user;
  int gpus = 0;
  UnixMs start = 0;
  std::optional<UnixMs> end;
};

// The direct sum the ledger must agree with.
UsageByUser DecayedUsage(std::span<const GpuRun> runs, UnixMs now, int64_t half_life_ms) {
  UsageByUser usage;
  for (const GpuRun& r : runs) {
    usage[r.user] += DecayedGpuHours(r.gpus, r.start, r.end.value_or(now), now, half_life_ms);
  }
  return usage;
}

TEST(DecayedGpuHoursTest, Table) {
  const double kLn2 = std::log(2.0);
  struct Case {
    const char* what;
    int gpus;
    UnixMs start, end;
    int64_t half_life;
    double hours;
  };
  const Case cases[] = {
      {"no decay: GPUs x hours", 2, kNow - 3 * kHour, kNow, 0, 6.0},
      {"no decay counts only up to now", 1, kNow - kHour, kNow + kHour, -1, 1.0},
      {"a run over the last half-life", 1, kNow - kHour, kNow, kHour, 0.5 / kLn2},
      {"the half-life before that counts half as much", 1, kNow - 2 * kHour, kNow - kHour, kHour,
       0.25 / kLn2},
      {"four GPUs count four times", 4, kNow - kHour, kNow, kHour, 2.0 / kLn2},
      {"a run not yet started counts nothing", 1, kNow + kHour, kNow + 2 * kHour, kHour, 0.0},
      {"an empty run counts nothing", 3, kNow - kHour, kNow - kHour, kHour, 0.0},
      {"CPU jobs hold no GPU-hours", 0, kNow - kHour, kNow, kHour, 0.0},
  };
  for (const Case& c : cases) {
    EXPECT_NEAR(DecayedGpuHours(c.gpus, c.start, c.end, kNow, c.half_life), c.hours, 1e-9)
        << c.what;
  }
}

TEST(DecayedUsageTest, TheReferenceSumsPerUserAndRunningRunsCountToNow) {
  std::vector<GpuRun> runs = {{"ann", 1, kNow - 2 * kHour, kNow - kHour},
                              {"ann", 2, kNow - kHour, std::nullopt},
                              {"bob", 8, kNow - 10 * kHour, kNow - 9 * kHour}};
  UsageByUser usage = DecayedUsage(runs, kNow, 0);
  EXPECT_DOUBLE_EQ(usage["ann"], 3.0);
  EXPECT_DOUBLE_EQ(usage["bob"], 8.0);
  usage = DecayedUsage(runs, kNow, kHour);
  EXPECT_LT(usage["bob"], usage["ann"]);  // 8 GPU-hours nine half-lives ago weigh little
}

TEST(FairShareLedgerTest, MatchesTheDirectSumWhateverTheOrderOfEnds) {
  std::vector<GpuRun> runs = {{"ann", 1, kNow - 5 * kHour, kNow - 4 * kHour},
                              {"ann", 4, kNow - 3 * kHour, kNow - 2 * kHour},
                              {"bob", 2, kNow - 6 * kHour, kNow - 1 * kHour},
                              {"ann", 2, kNow - 9 * kHour, kNow - 8 * kHour}};  // reported late
  FairShareLedger ledger(2 * kHour);
  for (const GpuRun& r : runs) ledger.AddEnded(r.user, r.gpus, r.start, *r.end);
  UsageByUser want = DecayedUsage(runs, kNow, 2 * kHour);
  UsageByUser got = ledger.At(kNow);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NEAR(got["ann"], want["ann"], 1e-9);
  EXPECT_NEAR(got["bob"], want["bob"], 1e-9);
  // Later, everything has decayed by the same factor.
  UsageByUser later = ledger.At(kNow + 2 * kHour);
  EXPECT_NEAR(later["ann"], want["ann"] / 2, 1e-9);
}

TEST(FairShareLedgerTest, WithoutDecayItIsPlainGpuHours) {
  FairShareLedger ledger(0);
  ledger.AddEnded("ann", 2, kNow - 3 * kHour, kNow - kHour);
  ledger.AddEnded("ann", 1, kNow - kHour, kNow);
  EXPECT_DOUBLE_EQ(ledger.At(kNow + 100 * kHour)["ann"], 5.0);
}

}  // namespace
}  // namespace trainq
