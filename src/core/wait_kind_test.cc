#include "src/core/wait_kind.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace trainq {
namespace {

TEST(WaitKindTest, EachReasonHasItsKind) {
  struct Case {
    JobState state;
    const char* reason;
    const char* kind;
  };
  const Case cases[] = {
      {JobState::kBlocked, "dependency 12 is running", "dependency"},
      {JobState::kBlocked, "held: no pass starts it until trainq release 4", "held"},
      {JobState::kQueued, "held by carol: no pass starts it until trainq release 4", "held"},
      {JobState::kQueued, "out of memory (CUDA out of memory) on attempt 1: retry 1 of 3 after 30s",
       "oom_backoff"},
      {JobState::kQueued, "alice has 1 GPU in use; max_gpus_per_user = 1", "user_limit"},
      {JobState::kQueued, "group 7: at most 2 of its jobs run at once", "group_limit"},
      {JobState::kQueued, "needs 1 GPU; none free (all 2 paused)", "paused"},
      {JobState::kQueued, "GPU 0 last sampled 40s ago, more than gpu_stale_after = 10s",
       "stale_gpus"},
      {JobState::kQueued, "node n2 lost; queued again (node failure 1 of 3)", "node"},
      {JobState::kQueued, "needs 9 GPUs; more GPUs than any node has: cannot be placed", "no_fit"},
      {JobState::kQueued, "needs 1 CPU slot; 0 of 16 free (raise cpu_slots)", "cpu_slots"},
      {JobState::kQueued, "needs 1 GPU with 20.0 GiB usable; best: GPU 0 with 12.0 GiB",
       "gpu_memory"},
      {JobState::kQueued, "needs 1 GPU; GPU 0 held for job 3", "gpus_busy"},
      {JobState::kQueued,
       "needs 1 whole GPU (no other job or process on it); none is free; taken: GPU 0 by job 5",
       "gpus_busy"},
      {JobState::kQueued,
       "needs 2 whole A100s (no other job or process on them) on one node; only 1 is free on "
       "gpu1; taken: gpu1 GPU 1 by job 7",
       "gpus_busy"},
      {JobState::kQueued,
       "will preempt job 12 (bob, priority 0) in 40s: its GPUs are held for this job", "gpus_busy"},
      {JobState::kQueued, "preempting job 12 (bob, priority 0): waiting for its processes to end",
       "gpus_busy"},
      {JobState::kQueued, "the state dir is full; trying again every 5s", "storage"},
      {JobState::kQueued, "", "other"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(WaitKind(c.state, c.reason), c.kind) << c.reason;
    EXPECT_NE(std::find(kWaitKinds.begin(), kWaitKinds.end(), WaitKind(c.state, c.reason)),
              kWaitKinds.end());
  }
}

}  // namespace
}  // namespace trainq
