#include "src/core/deps.h"

#include <gtest/gtest.h>

#include <vector>

namespace trainq {
namespace {

using S = JobState;

JobSpec Waits(std::vector<JobId> after, std::vector<JobId> after_any = {}) {
  JobSpec spec;
  spec.after = std::move(after);
  spec.after_any = std::move(after_any);
  return spec;
}

struct Case {
  const char* name;
  JobSpec spec;
  std::vector<DepState> deps;
  JobState want;
  std::string reason;
};

TEST(DecideDepsTest, Table) {
  const Case cases[] = {
      {"no dependencies", Waits({}), {}, S::kQueued, ""},
      {"after: all succeeded",
       Waits({1, 2}),
       {{1, true, S::kSucceeded, ""}, {2, true, S::kSucceeded, ""}},
       S::kQueued,
       ""},
      {"after: one still running",
       Waits({1, 2}),
       {{1, true, S::kSucceeded, ""}, {2, true, S::kRunning, ""}},
       S::kBlocked,
       "waiting for job 2 (running)"},
      {"after: open ones listed in order",
       Waits({12, 13}),
       {{12, true, S::kRunning, ""}, {13, true, S::kQueued, ""}},
       S::kBlocked,
       "waiting for job 12 (running), 13 (queued)"},
      {"after: a failure cancels even while others run",
       Waits({1, 2}),
       {{1, true, S::kRunning, ""}, {2, true, S::kFailed, "exit code 1"}},
       S::kCancelled,
       "dependency 2 failed"},
      {"after: a cancelled dependency cancels",
       Waits({5}),
       {{5, true, S::kCancelled, "cancelled by ada"}},
       S::kCancelled,
       "dependency 5 was cancelled"},
      {"after: chains name the root cause",
       Waits({13}),
       {{13, true, S::kCancelled, "dependency 12 failed"}},
       S::kCancelled,
       "dependency 13 was cancelled (dependency 12 failed)"},
      {"after: the root cause does not grow down a chain",
       Waits({14}),
       {{14, true, S::kCancelled, "dependency 13 was cancelled (dependency 12 failed)"}},
       S::kCancelled,
       "dependency 14 was cancelled (dependency 12 failed)"},
      {"after: a vanished dependency cancels",
       Waits({9}),
       {{9, false, S::kQueued, ""}},
       S::kCancelled,
       "dependency 9 does not exist"},
      {"after-any: failures and cancels satisfy",
       Waits({}, {1, 2}),
       {{1, true, S::kFailed, ""}, {2, true, S::kCancelled, ""}},
       S::kQueued,
       ""},
      {"after-any: open while blocked",
       Waits({}, {1}),
       {{1, true, S::kBlocked, ""}},
       S::kBlocked,
       "waiting for job 1 (blocked)"},
      {"both kinds: after satisfied, any open",
       Waits({1}, {2}),
       {{1, true, S::kSucceeded, ""}, {2, true, S::kStarting, ""}},
       S::kBlocked,
       "waiting for job 2 (starting)"},
      {"same id in both lists is listed once",
       Waits({3}, {3}),
       {{3, true, S::kQueued, ""}},
       S::kBlocked,
       "waiting for job 3 (queued)"},
      {"a state not known yet counts as open",
       Waits({4}),
       {},
       S::kBlocked,
       "waiting for job 4 (unknown)"},
      {"requeued (retried) dependency is open again",
       Waits({6}),
       {{6, true, S::kQueued, ""}},
       S::kBlocked,
       "waiting for job 6 (queued)"},
  };
  for (const Case& c : cases) {
    DepDecision d = DecideDeps(c.spec, c.deps);
    EXPECT_EQ(d.state, c.want) << c.name;
    EXPECT_EQ(d.reason, c.reason) << c.name;
  }
}

}  // namespace
}  // namespace trainq
