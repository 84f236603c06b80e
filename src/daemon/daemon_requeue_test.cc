// Requeue and signals against the fakes: `trainq requeue` (and scontrol requeue) stops the
// running attempt through control.json and queues the job again under its id; a signal
// reaches the shim the same way; what is not running here is refused saying why.
#include <csignal>

#include "src/daemon/daemon_test_fixture.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers
using ::testing::HasSubstr;

class RequeueTest : public DaemonTest {
 protected:
  HttpResponse Post(JobId id, const std::string& action) {
    return Call("POST", "/v1/jobs/" + std::to_string(id) + "/" + action);
  }
};

TEST_F(RequeueTest, ARequeueFromInsideStopsTheAttemptAndQueuesTheJobUnderItsId) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}, {"signal", "USR1@30"}, {"checkpoint", "ckpt/*.pt"}});
  ASSERT_EQ(Get(id).state, JobState::kRunning);
  Result<RunSpec> spec = ReadRunSpec(RunDir(id, 1));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->warn_signal, SIGUSR1);
  EXPECT_EQ(spec->warn_lead_ms, 30'000);
  EXPECT_EQ(spec->checkpoint, "ckpt/*.pt");

  HttpResponse r = Post(id, "requeue?self=1");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("queued again as attempt 2"));
  const FakeShims::Shim* shim = shims_.Find(RunDir(id, 1));
  ASSERT_NE(shim, nullptr);
  EXPECT_EQ(shim->signals, std::vector<int>{SIGUSR1});
  Result<ShimControl> control = ReadShimControl(RunDir(id, 1));
  ASSERT_TRUE(control.ok());
  EXPECT_EQ(control->stop, "requeued");
  EXPECT_EQ(control->reason, "requeued by itself");
  EXPECT_EQ(control->stop_in_ms, 0);
  // A second request while it stops is refused: one stop at a time.
  EXPECT_EQ(Post(id, "requeue").status, 409);

  ExitRecord rec;
  rec.signal = SIGTERM;
  rec.stop = "requeued";
  rec.stop_reason = control->reason;
  rec.started_at = rec.ended_at = kT0;
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), rec));
  Loop();
  Job job = Get(id);
  ASSERT_EQ(job.attempts.size(), 2u) << job.reason;  // started again at once: the GPU is free
  EXPECT_EQ(job.attempts[0].state, JobState::kCancelled);
  EXPECT_EQ(job.attempts[0].end_reason, "requeued by itself");
  EXPECT_EQ(job.state, JobState::kRunning);
  spec = ReadRunSpec(RunDir(id, 2));
  ASSERT_TRUE(spec.ok());
  std::map<std::string, std::string> env(spec->env.begin(), spec->env.end());
  EXPECT_EQ(env["TRAINQ_RESTART_COUNT"], "1");
  EXPECT_EQ(env["TRAINQ_ATTEMPT"], "2");
}

TEST_F(RequeueTest, ASignalReachesTheShimAndWhatIsNotRunningIsRefusedSayingWhy) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId running = Submit({{"gpus", 1}});
  JobId waiting = Submit({{"gpus", 1}});
  HttpResponse r = Post(running, "signal?signal=USR2&batch=1");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("sent SIGUSR2 to its batch shell"));
  Result<ShimControl> control = ReadShimControl(RunDir(running, 1));
  ASSERT_TRUE(control.ok());
  EXPECT_EQ(control->signal, SIGUSR2);
  EXPECT_TRUE(control->batch_only);
  EXPECT_EQ(control->stop, "");
  ASSERT_EQ(Post(running, "signal?signal=TERM").status, 200);
  EXPECT_EQ(ReadShimControl(RunDir(running, 1))->seq, control->seq + 1);

  r = Post(running, "signal?signal=KILL");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("no program can catch"));
  EXPECT_EQ(Post(running, "signal").status, 400);
  r = Post(waiting, "requeue");
  EXPECT_EQ(r.status, 409);
  EXPECT_THAT(r.body, HasSubstr("is queued, not running: nothing to requeue"));
  ASSERT_EQ(Post(waiting, "cancel").status, 200);
  r = Post(waiting, "requeue");
  EXPECT_EQ(r.status, 409);
  EXPECT_THAT(r.body, HasSubstr("trainq retry"));
}

}  // namespace
}  // namespace trainq
