#include "src/daemon/outcome.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/oom.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

OutcomeInput Exited(std::optional<int> code, std::optional<int> sig = std::nullopt) {
  OutcomeInput in;
  ExitRecord rec;
  rec.exit_code = code;
  rec.signal = sig;
  rec.ended_at = 5000;
  in.record = rec;
  in.oom_patterns = DefaultOomPatterns();
  in.now = 6000;
  return in;
}

const char kTorchOom[] =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.19 GiB is free.\n";

TEST(OutcomeTest, ExitZeroSucceeds) {
  AttemptEnd e = DecideOutcome(Exited(0));
  EXPECT_EQ(e.job_state, JobState::kSucceeded);
  EXPECT_EQ(e.attempt_state, JobState::kSucceeded);
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(e.ended_at, 5000);
}

// The runtime's own words when a container cannot start; the same exit from a command (or a
// host job) stays a plain exit code.
TEST(OutcomeTest, AContainerThatCannotStartEndsWithTheRuntimesError) {
  OutcomeInput in = Exited(125);
  in.container = true;
  in.log_tail = "Trying to pull...\nError: localhost/env:3: image not known\n";
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_EQ(e.end_reason, "container did not start: Error: localhost/env:3: image not known");
  in.record->exit_code = 126;  // podman's code for devices it could not set up
  in.log_tail = "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=GPU-a\n";
  EXPECT_EQ(DecideOutcome(in).end_reason,
            "container did not start: Error: setting up CDI devices: unresolvable CDI devices "
            "nvidia.com/gpu=GPU-a");
  // A node whose setup failed the GPU isolation check says so for every later GPU job.
  in.record->exit_code = 125;
  in.log_tail = "trainq: GPU isolation failed: a container given GPUs GPU-a lists GPU-a, GPU-b\n";
  EXPECT_EQ(DecideOutcome(in).end_reason,
            "container did not start: trainq: GPU isolation failed: a container given GPUs GPU-a "
            "lists GPU-a, GPU-b");
  in.record->exit_code = 126;
  in.log_tail = "done\n";
  EXPECT_EQ(DecideOutcome(in).end_reason, "exit code 126");
  in.record->exit_code = 125;
  in.container = false;
  in.log_tail = "Error: something of the job\n";
  EXPECT_EQ(DecideOutcome(in).end_reason, "exit code 125");
}

// A session whose terminal went away ends cancelled, its why as the reason, whatever the
// program's own end (killed by the hangup, or an exit of its own after it).
TEST(OutcomeTest, AHungUpSessionIsCancelledWithTheReason) {
  OutcomeInput in = Exited(std::nullopt, 1);
  in.record->hangup = "the terminal disconnected";
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kCancelled);
  EXPECT_EQ(e.job_reason, "the terminal disconnected");
  EXPECT_EQ(e.signal, 1);
}

TEST(OutcomeTest, NonZeroExitFails) {
  AttemptEnd e = DecideOutcome(Exited(3));
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_FALSE(e.oom);
  EXPECT_EQ(e.job_reason, "exit code 3");
}

TEST(OutcomeTest, SignalIsNamed) {
  AttemptEnd e = DecideOutcome(Exited(std::nullopt, 9));
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_EQ(e.signal, 9);
  EXPECT_FALSE(e.exit_code.has_value());
  EXPECT_THAT(e.job_reason, HasSubstr("SIGKILL"));
}

TEST(OutcomeTest, OomIsRetriedAfterBackoff) {
  OutcomeInput in = Exited(1);
  in.log_tail = std::string("epoch 1\n") + kTorchOom;
  in.oom_retries_used = 1;
  in.retries_allowed = 3;
  in.backoff_ms = 30000;
  AttemptEnd e = DecideOutcome(in);
  EXPECT_TRUE(e.oom);
  EXPECT_EQ(e.attempt_state, JobState::kFailed);
  EXPECT_EQ(e.job_state, JobState::kQueued);
  EXPECT_EQ(e.not_before, 5000 + 60000);  // second retry: 30 s doubled
  EXPECT_THAT(e.job_reason, HasSubstr("retry 2 of 3"));
}

TEST(OutcomeTest, OomWithoutRetriesLeftFails) {
  OutcomeInput in = Exited(1);
  in.log_tail = kTorchOom;
  in.oom_retries_used = 3;
  in.retries_allowed = 3;
  AttemptEnd e = DecideOutcome(in);
  EXPECT_TRUE(e.oom);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_THAT(e.job_reason, HasSubstr("no retries left"));
}

// torchrun 1.13's message when its store cannot bind MASTER_PORT.
const char kPortTaken[] =
    "RuntimeError: The server socket has failed to listen on any local network address. The "
    "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n";

TEST(OutcomeTest, ATakenRendezvousPortQueuesTheJobAgainAtOnceWithoutAnOomRetry) {
  OutcomeInput in = Exited(1);
  in.log_tail = kPortTaken;
  in.master_port = 29500;
  in.oom_retries_used = 3;  // none left: a taken port must not need one
  AttemptEnd e = DecideOutcome(in);
  EXPECT_FALSE(e.oom);
  EXPECT_EQ(e.attempt_state, JobState::kFailed);
  EXPECT_EQ(e.job_state, JobState::kQueued);
  EXPECT_EQ(e.not_before, 0) << "at once";
  EXPECT_THAT(e.end_reason, ::testing::StartsWith(std::string(kPortTakenReason) + "29500"));
  EXPECT_EQ(e.job_reason,
            "requeued with another MASTER_PORT: port 29500 was taken by another program (retry "
            "1 of 3)");
}

TEST(OutcomeTest, ATakenPortFailsTheJobWhenItHadNoPortOrItsRetriesAreUsed) {
  OutcomeInput single = Exited(1);
  single.log_tail = kPortTaken;  // its own server, not the rendezvous trainq handed out
  EXPECT_EQ(DecideOutcome(single).job_state, JobState::kFailed);
  OutcomeInput used = single;
  used.master_port = 29501;
  used.port_retries_used = kPortRetries;
  AttemptEnd e = DecideOutcome(used);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_EQ(e.job_reason, "exit code 1");
}

TEST(OutcomeTest, OomTextInASuccessfulRunIsIgnored) {
  OutcomeInput in = Exited(0);
  in.log_tail = kTorchOom;  // caught and handled by the job itself
  EXPECT_EQ(DecideOutcome(in).job_state, JobState::kSucceeded);
}

TEST(OutcomeTest, CancelledWins) {
  OutcomeInput in = Exited(std::nullopt, 15);
  in.record->cancelled = true;
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kCancelled);
  EXPECT_EQ(e.attempt_state, JobState::kCancelled);
  EXPECT_EQ(e.end_reason, "cancelled");
}

TEST(OutcomeTest, ACancelSaysWhoAskedIt) {
  OutcomeInput in = Exited(std::nullopt, 15);
  in.record->cancelled = true;
  in.cancelled_by = "carol";  // an admin, not the job's owner
  EXPECT_EQ(DecideOutcome(in).end_reason, "cancelled by carol");
}

TEST(OutcomeTest, TimeLimitFailsNamingTheLimit) {
  OutcomeInput in = Exited(std::nullopt, 15);
  in.record->time_limit = true;
  in.time_limit_ms = 9'000'000;
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_EQ(e.attempt_state, JobState::kFailed);
  EXPECT_EQ(e.job_reason, "time limit (2h30m)");
  EXPECT_EQ(e.signal, 15);
  EXPECT_EQ(e.ended_at, 5000);
}

TEST(OutcomeTest, TimeLimitIsNotRetriedAsOomEvenWithOomText) {
  OutcomeInput in = Exited(1);
  in.record->time_limit = true;
  in.time_limit_ms = 60'000;
  in.log_tail = kTorchOom;
  in.retries_allowed = 3;
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_FALSE(e.oom);
  EXPECT_EQ(e.not_before, 0);
  EXPECT_EQ(e.job_reason, "time limit (1m00s)");
}

TEST(OutcomeTest, TimeLimitThatTheJobSurvivedWithExitZeroStillFails) {
  OutcomeInput in = Exited(0);  // it caught SIGTERM and exited cleanly
  in.record->time_limit = true;
  in.time_limit_ms = 30'000;
  EXPECT_EQ(DecideOutcome(in).job_state, JobState::kFailed);
}

TEST(OutcomeTest, AWarnedTimeLimitSaysWhenAndWhetherACheckpointWasWritten) {
  OutcomeInput in = Exited(std::nullopt, 15);
  in.record->time_limit = true;
  in.record->ended_at = 100'000;
  in.record->warned_at = 40'000;
  in.time_limit_ms = 9'000'000;
  in.stop.signal = 10;
  in.stop.checkpoint = "ckpt/*.pt";
  EXPECT_EQ(DecideOutcome(in).job_reason,
            "time limit (2h30m); SIGUSR1 sent 1m00s before the end; no file matching "
            "--checkpoint ckpt/*.pt was written after it");
  in.record->checkpoint = "ckpt/step-900.pt";
  EXPECT_EQ(DecideOutcome(in).job_reason,
            "time limit (2h30m); SIGUSR1 sent 1m00s before the end; checkpoint ckpt/step-900.pt "
            "written after it");
}

// A stop the daemon asked for: requeued under the same id (its attempt cancelled, not failed,
// whatever the exit), or, preempted without --requeue, cancelled saying so.
TEST(OutcomeTest, StopsRequeueOrCancelAndSayWhy) {
  OutcomeInput in = Exited(0);
  in.record->stop = "requeued";
  in.record->stop_reason = "requeued by itself";
  in.log_tail = kTorchOom;  // never an OOM retry
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kQueued);
  EXPECT_EQ(e.attempt_state, JobState::kCancelled);
  EXPECT_EQ(e.end_reason, "requeued by itself");
  EXPECT_FALSE(e.oom);
  EXPECT_EQ(e.not_before, 0);

  in = Exited(std::nullopt, 9);
  in.record->stop = "preempted";
  in.record->stop_reason = "preempted by job 31 (priority 100)";
  in.record->ended_at = 100'000;
  in.record->warned_at = 60'000;
  in.record->checkpoint = "last.ckpt";
  in.stop = {10, 60'000, false, true, true, "*.ckpt"};
  e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kQueued);
  EXPECT_EQ(e.attempt_state, JobState::kCancelled);
  EXPECT_EQ(e.end_reason,
            "preempted by job 31 (priority 100); SIGUSR1 sent 40s before the end; checkpoint "
            "last.ckpt written after it");
  EXPECT_EQ(e.job_reason, "requeued: preempted by job 31 (priority 100)");

  in.stop.requeue = false;
  e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kCancelled);
  EXPECT_THAT(e.job_reason, HasSubstr("not queued again (submit with --requeue for that)"));

  in.record->cancelled = true;  // a cancel during the warning wins
  in.stop.requeue = true;
  EXPECT_EQ(DecideOutcome(in).job_state, JobState::kCancelled);
}

TEST(OutcomeTest, HostMemoryLimitFailsNamingItNeverAnOomRetry) {
  OutcomeInput in = Exited(std::nullopt, 9);
  in.record->mem_limit_hit = 64ull << 20;
  in.log_tail = kTorchOom;  // whatever the log says: the host's limit, not the GPU's
  in.retries_allowed = 3;
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_FALSE(e.oom);
  EXPECT_EQ(e.job_reason, "host memory limit 64.0 MiB reached (--mem-limit); killed by SIGKILL");
  EXPECT_EQ(e.signal, 9);
}

TEST(OutcomeTest, HostMemoryLimitThatTheJobSurvivedIsASuccess) {
  OutcomeInput in = Exited(0);  // a worker was killed, the job carried on and finished
  in.record->mem_limit_hit = 64ull << 20;
  EXPECT_EQ(DecideOutcome(in).job_state, JobState::kSucceeded);
}

TEST(OutcomeTest, CancelBeatsTimeLimit) {
  OutcomeInput in = Exited(std::nullopt, 15);
  in.record->cancelled = true;
  in.record->time_limit = true;
  EXPECT_EQ(DecideOutcome(in).job_state, JobState::kCancelled);
}

TEST(OutcomeTest, SelfFencingQueuesTheJobAgainWithoutUsingAnOomRetry) {
  OutcomeInput in = Exited(0, std::nullopt);  // it caught SIGTERM and exited cleanly
  in.record->fenced = true;
  in.record->error = "stopped: node heartbeat not renewed for 4.5 s (fence_after 4.5 s)";
  in.log_tail = kTorchOom;
  in.oom_retries_used = 3;  // none left: a fenced attempt must not need one
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.attempt_state, JobState::kFailed);
  EXPECT_EQ(e.job_state, JobState::kQueued);
  EXPECT_FALSE(e.oom);
  EXPECT_EQ(e.not_before, 0);
  EXPECT_EQ(e.end_reason, "stopped by self-fencing: node heartbeat lapsed");
  EXPECT_EQ(e.job_reason, "requeued: stopped by self-fencing: node heartbeat lapsed");
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(e.ended_at, 5000);
}

TEST(OutcomeTest, CancelBeatsSelfFencing) {
  OutcomeInput in = Exited(std::nullopt, 15);
  in.record->cancelled = true;
  in.record->fenced = true;
  EXPECT_EQ(DecideOutcome(in).job_state, JobState::kCancelled);
}

TEST(OutcomeTest, SpawnFailureFailsWithTheError) {
  OutcomeInput in = Exited(127);
  in.record->spawn_failed = true;
  in.record->error = "cannot run 'trian.py': No such file or directory";
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_THAT(e.job_reason, HasSubstr("No such file"));
}

TEST(OutcomeTest, MissingRecordFails) {
  OutcomeInput in = Exited(0);
  in.record.reset();
  AttemptEnd e = DecideOutcome(in);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_THAT(e.job_reason, HasSubstr("without an exit record"));
}

TEST(OutcomeTest, UnrecordedEndsSayWhatWasStopped) {
  UnrecordedInput in{Unrecorded::kShimDied, "/s/runs/3/1", 2, 0, 6000};
  AttemptEnd e = DecideUnrecorded(in);
  EXPECT_EQ(e.job_state, JobState::kFailed);
  EXPECT_EQ(
      e.end_reason,
      "the job's supervisor (shim) died without an exit record; its 2 processes were stopped");
  in.survivors = 1;
  EXPECT_THAT(DecideUnrecorded(in).end_reason,
              HasSubstr("(1 process survived SIGKILL and is left running)"));

  in = {Unrecorded::kRunDirMissing, "/s/runs/3/1", 0, 0, 6000};
  e = DecideUnrecorded(in);
  EXPECT_EQ(e.job_state, JobState::kQueued);
  EXPECT_EQ(e.attempt_state, JobState::kFailed);
  EXPECT_EQ(e.job_reason,
            "requeued: the run dir /s/runs/3/1 was missing; no process of the attempt was left");

  in = {Unrecorded::kNeverStarted, "/s/runs/3/1", 0, 0, 6000};
  EXPECT_EQ(DecideUnrecorded(in).end_reason, "the daemon stopped before this attempt started");
  in.stopped = 1;
  EXPECT_EQ(DecideUnrecorded(in).job_reason,
            "requeued: the daemon stopped before this attempt started; its 1 process was stopped");
}

// The daemon's own stop may end a shim before it could record anything: that is the cancel
// the user asked for, not a failure (no --notify "failed", no dependents cancelled, nothing
// for retry --failed).
TEST(OutcomeTest, AShimGoneAfterTheDaemonsStopIsCancelledNotFailed) {
  UnrecordedInput in{Unrecorded::kShimDied, "/s/runs/3/1", 1, 0, 6000, CancelAt::kBeforeTheEnd};
  AttemptEnd e = DecideUnrecorded(in);
  EXPECT_EQ(e.job_state, JobState::kCancelled);
  EXPECT_EQ(e.attempt_state, JobState::kCancelled);
  EXPECT_EQ(e.end_reason,
            "cancelled; the job's supervisor (shim) ended without an exit record; its 1 process "
            "was stopped");
  EXPECT_EQ(e.ended_at, 6000);

  // The shim died first and the cancel came while its processes were stopped: a failure.
  in.cancel = CancelAt::kWhileStopping;
  EXPECT_EQ(DecideUnrecorded(in).job_state, JobState::kFailed);
}

// What would be queued again (it never started, its run dir was missing) is cancelled by a
// cancel at any time before the end is recorded: the user asked it not to run again.
TEST(OutcomeTest, ACancelKeepsAnUnrecordedAttemptFromBeingQueuedAgain) {
  for (Unrecorded why : {Unrecorded::kNeverStarted, Unrecorded::kRunDirMissing}) {
    for (CancelAt at : {CancelAt::kBeforeTheEnd, CancelAt::kWhileStopping}) {
      UnrecordedInput in{why, "/s/runs/3/1", 0, 0, 6000, at};
      AttemptEnd e = DecideUnrecorded(in);
      EXPECT_EQ(e.job_state, JobState::kCancelled) << static_cast<int>(why);
      EXPECT_THAT(e.end_reason, ::testing::StartsWith("cancelled; "));
      EXPECT_THAT(e.end_reason, HasSubstr("no process of the job was left"));
    }
  }
}

}  // namespace
}  // namespace trainq
