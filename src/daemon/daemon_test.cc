// The daemon's loop against fakes (clock, GPUs, shims), driven through its API and timer
// callbacks: no process, no socket, no sleep. Time moves only when a test moves it.
#include "src/daemon/daemon_test_fixture.h"

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers

TEST_F(DaemonTest, SubmittedJobStartsOnAFreeGpuWithItsEnvironment) {
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}, {"mem", "20GiB"}});
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  ASSERT_NE(shims_.Find(RunDir(id, 1)), nullptr);
  Result<RunSpec> spec = ReadRunSpec(RunDir(id, 1));
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(spec->env, ::testing::Contains(
                             std::pair<std::string, std::string>("CUDA_VISIBLE_DEVICES", "0")));
  EXPECT_EQ(spec->umask, 022);  // the daemon's at start, not the 077 it runs under
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(id).state, JobState::kSucceeded);
}

// Defect: ArmWakeup knew only the OOM backoff, so a job reaching the aging limit took its
// hold only when some other event ran a pass.
TEST_F(DaemonTest, AgingReachesItsLimitAndTheHoldIsTakenOnTimeAlone) {
  config_.policy.aging_ms = 30 * kMinute;
  SetGpus({Gpu(0, 80)});
  Start();
  JobId small = Submit({{"mem", "40GiB"}});
  ASSERT_EQ(Get(small).state, JobState::kRunning);
  JobId big = Submit({{"mem", "60GiB"}});  // 40 GiB left: waits
  EXPECT_EQ(Get(big).state, JobState::kQueued);
  EXPECT_EQ(daemon_->NextWakeup(), kT0 + 30 * kMinute + 1);
  clock_.Advance(10 * kMinute);
  JobId backfill = Submit({{"mem", "10GiB"}});  // not aged yet: it may pass the big one
  EXPECT_EQ(Get(backfill).state, JobState::kRunning);

  WakeUp();  // nothing but time: the big job is aged now and GPU 0 is held for it
  EXPECT_EQ(clock_.Now(), kT0 + 30 * kMinute + 1);
  EXPECT_THAT(Get(big).reason, HasSubstr("held"));
  JobId later = Submit({{"mem", "10GiB"}});
  EXPECT_EQ(Get(later).state, JobState::kQueued);
  EXPECT_THAT(Get(later).reason, HasSubstr(std::to_string(big)));
}

// A retried job is aged from its retry, not its first submit: it must not take the hold
// from jobs that waited longer.
TEST_F(DaemonTest, ARetriedJobAgesFromItsRetry) {
  config_.policy.aging_ms = 30 * kMinute;
  SetGpus({Gpu(0, 80)});
  Start();
  JobId old = Submit({{"mem", "10GiB"}});
  ASSERT_TRUE(shims_.Exit(RunDir(old, 1), Exited(1)));
  Loop();
  ASSERT_EQ(Get(old).state, JobState::kFailed);
  JobId hog = Submit({{"mem", "75GiB"}});
  ASSERT_EQ(Get(hog).state, JobState::kRunning);
  clock_.Advance(60 * kMinute);
  HttpResponse r = Call("POST", "/v1/jobs/" + std::to_string(old) + "/retry");
  ASSERT_EQ(r.status, 200) << r.body;
  Job retried = Get(old);
  EXPECT_EQ(retried.state, JobState::kQueued);
  EXPECT_EQ(retried.queued_at, kT0 + 60 * kMinute);
  EXPECT_THAT(retried.reason, Not(HasSubstr("held")));
  EXPECT_EQ(daemon_->NextWakeup(), kT0 + 90 * kMinute + 1);
}

TEST_F(DaemonTest, OomBackoffEndsAndTheJobStartsAgain) {
  config_.oom_backoff_ms = 2 * kMinute;
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"mem", "20GiB"}, {"retries", 2}});
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), Exited(1),
                          "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"));
  Loop();
  Job job = Get(id);
  ASSERT_EQ(job.state, JobState::kQueued) << job.reason;
  EXPECT_EQ(job.not_before, kT0 + 2 * kMinute);
  EXPECT_EQ(daemon_->NextWakeup(), kT0 + 2 * kMinute);
  WakeUp();
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  EXPECT_EQ(Get(id).attempt, 2);
  EXPECT_NE(shims_.Find(RunDir(id, 2)), nullptr);
}

// Per-process usage unknown: a new job's reservation counts in full for ramp_up, then the
// probe's free memory is trusted. The end of that window alone must start a waiting job.
TEST_F(DaemonTest, RampUpEndsAndAWaitingJobFits) {
  config_.policy.ramp_up_ms = 5 * kMinute;
  config_.policy.aging_ms = 0;
  SetGpus({Gpu(0, 80, /*processes_known=*/false)});
  Start();
  JobId first = Submit({{"mem", "50GiB"}});
  ASSERT_EQ(Get(first).state, JobState::kRunning);
  JobId second = Submit({{"mem", "50GiB"}});
  EXPECT_EQ(Get(second).state, JobState::kQueued);  // 80 free, 50 of them reserved
  EXPECT_EQ(daemon_->NextWakeup(), kT0 + 5 * kMinute);
  WakeUp();  // the probe still says 80 GiB free: the first job allocated nothing
  EXPECT_EQ(Get(second).state, JobState::kRunning);
}

// Defect: a MarkRunning that failed after the shim was spawned dropped the attempt from the
// daemon's books while its shim ran on, holding its GPU.
TEST_F(DaemonTest, FailedMarkRunningKeepsTheShimCounted) {
  SetGpus({Gpu(0, 80)});
  Start();
  store_->FailNext("MarkRunning", Status::Unavailable("database is locked"));
  JobId first = Submit({{"gpus", 1}});  // a whole GPU
  ASSERT_NE(shims_.Find(RunDir(first, 1)), nullptr);
  EXPECT_EQ(Get(first).state, JobState::kStarting);
  JobId second = Submit({{"gpus", 1}});
  EXPECT_EQ(Get(second).state, JobState::kQueued);  // GPU 0 is still the first job's
  EXPECT_EQ(shims_.alive_count(), 1);
  ASSERT_TRUE(shims_.Exit(RunDir(first, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(first).state, JobState::kSucceeded);
  EXPECT_EQ(Get(second).state, JobState::kRunning);
}

TEST_F(DaemonTest, AFailedJobCancelsItsDependencyChain) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId a = Submit({{"mem", "10GiB"}});
  JobId b = Submit({{"mem", "10GiB"}, {"after", {a}}});
  JobId c = Submit({{"mem", "10GiB"}, {"after", {b}}});
  EXPECT_EQ(Get(b).state, JobState::kBlocked);
  EXPECT_EQ(Get(c).state, JobState::kBlocked);
  ASSERT_TRUE(shims_.Exit(RunDir(a, 1), Exited(3)));
  Loop();
  EXPECT_EQ(Get(a).state, JobState::kFailed);
  EXPECT_EQ(Get(b).state, JobState::kCancelled);
  EXPECT_EQ(Get(c).state, JobState::kCancelled);
  EXPECT_THAT(Get(c).reason, HasSubstr(std::to_string(b)));
  EXPECT_EQ(shims_.alive_count(), 0);
}

// The daemon dies while a job runs; the next one re-adopts the live shim (its GPU stays
// taken) and records the exit the shim writes later.
TEST_F(DaemonTest, RestartReadoptsAnAttemptWhoseExitRecordAppearsLater) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId running = Submit({{"gpus", 1}});
  ASSERT_EQ(Get(running).state, JobState::kRunning);
  clock_.Advance(kMinute);
  Start();  // a restart: the shim is alive and has not written exit.json
  EXPECT_EQ(Get(running).state, JobState::kRunning);
  JobId next = Submit({{"gpus", 1}});
  EXPECT_EQ(Get(next).state, JobState::kQueued);  // the re-adopted job keeps GPU 0
  ASSERT_TRUE(shims_.Exit(RunDir(running, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(running).state, JobState::kSucceeded);
  EXPECT_EQ(Get(next).state, JobState::kRunning);
}

TEST_F(DaemonTest, RestartCollectsAnExitThatHappenedWhileItWasDown) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  daemon_.reset();  // down: the exit below reaches no daemon
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), Exited(4)));
  Start();
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].exit_code, 4);
}

// A container run by docker's daemon is no shim's descendant: its GPU memory is the job's by
// the TRAINQ_RUN_DIR in its environment, never another process's that a second job avoids.
TEST_F(DaemonTest, AGpuProcessBelowNoShimIsTheJobsWhoseRunDirItCarries) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"mem", "20GiB"}});
  ASSERT_EQ(Get(id).state, JobState::kRunning);
  GpuInfo gpu = Gpu(0, 80);
  gpu.processes = {{7000, 30 * kGiB}, {7001, 5 * kGiB}};  // 7001 carries no marker
  gpu.free_bytes = gpu.total_bytes - 35 * kGiB;
  SetGpus({gpu});
  shims_.run_dir_of[7000] = RunDir(id, 1);
  daemon_->OnSampleTimer();
  Loop();
  EXPECT_EQ(Get(id).attempts[0].peak_mem_bytes, 30 * kGiB);
}

// Guards against ending an attempt at once, "failed", when its shim is killed -9 while the
// job's processes run on: their GPU memory would no longer be reserved and a second job would
// land beside them.
TEST_F(DaemonTest, AShimDeadWithoutARecordHasItsJobStoppedBeforeItsEndAndItsGpuFreed) {
  config_.grace_ms = 10'000;
  SetGpus({Gpu(0, 80)});
  Start();
  JobId first = Submit({{"mem", "60GiB"}});
  ASSERT_EQ(Get(first).state, JobState::kRunning);
  std::string run = RunDir(first, 1);
  shims_.leftovers[run] = {ProcStat{5001, 1, 5001, 'S', 77}};  // the job's process lives on

  ASSERT_TRUE(shims_.Crash(run));
  Loop();
  EXPECT_EQ(Get(first).state, JobState::kRunning);
  EXPECT_EQ(shims_.leftover_signals[5001], std::vector<int>{SIGTERM});
  JobId second = Submit({{"mem", "60GiB"}});
  EXPECT_EQ(Get(second).state, JobState::kQueued) << "GPU 0's 60 GiB are still the first's";

  clock_.Advance(config_.grace_ms);
  daemon_->OnSampleTimer();
  Loop();
  EXPECT_EQ(shims_.leftover_signals[5001], (std::vector<int>{SIGTERM, SIGKILL}));
  EXPECT_EQ(Get(first).state, JobState::kRunning);
  EXPECT_EQ(Get(second).state, JobState::kQueued);
  EXPECT_TRUE(shims_.cleanups_run.empty()) << "the attempt's cleanup waits for its processes";

  shims_.leftovers.erase(run);  // SIGKILL did it
  daemon_->OnSampleTimer();
  Loop();
  Job job = Get(first);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.reason,
            "the job's supervisor (shim) died without an exit record; its 1 process was stopped");
  // What the shim would have run once the tree was gone (a container's removal) runs now.
  EXPECT_EQ(shims_.cleanups_run, std::vector<std::string>{run});
  EXPECT_EQ(Get(second).state, JobState::kRunning);
}

// A failed sample keeps the last good one, shown with its age and error; once it is older
// than gpu_stale_after, nothing starts on its GPUs and the reason says why.
TEST_F(DaemonTest, AFailedSampleMakesTheGpusStaleAfterTheBound) {
  config_.policy.stale_after_ms = 5000;
  SetGpus({Gpu(0, 80)});
  Start();
  *probe_error_ = "NVML: GPU is lost";
  daemon_->OnSampleTimer();
  Loop();
  json gpus = json::parse(Call("GET", "/v1/gpus").body);
  EXPECT_EQ(gpus["sample_error"], "NVML: GPU is lost");
  EXPECT_EQ(gpus["gpus"][0]["closed"], nullptr);
  JobId first = Submit({{"mem", "10GiB"}});
  EXPECT_EQ(Get(first).state, JobState::kRunning) << "facts within the bound are used";

  JobId second = Submit({{"mem", "75GiB"}});  // does not fit beside the first: it waits
  ASSERT_EQ(daemon_->NextWakeup(), clock_.Now() + 5001) << "a pass when the facts turn stale";
  WakeUp();
  JobId third = Submit({{"mem", "10GiB"}});
  Job job = Get(third);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_THAT(job.reason, HasSubstr("GPU 0 last sampled 5s ago (sampling fails: NVML: GPU is "
                                    "lost), more than gpu_stale_after = 5s"));
  gpus = json::parse(Call("GET", "/v1/gpus").body);
  EXPECT_EQ(gpus["gpus"][0]["closed"], "stale");
  EXPECT_EQ(gpus["sample_age_ms"], 5001);

  *probe_error_ = "";
  daemon_->OnSampleTimer();
  Loop();
  EXPECT_EQ(Get(third).state, JobState::kRunning);
  EXPECT_EQ(json::parse(Call("GET", "/v1/gpus").body)["sample_error"], nullptr);
  EXPECT_EQ(Get(second).state, JobState::kQueued);
}

TEST_F(DaemonTest, AShimDeadWithoutARecordAndNothingLeftEndsAtOnce) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  ASSERT_TRUE(shims_.Crash(RunDir(id, 1)));
  Loop();
  EXPECT_EQ(Get(id).state, JobState::kFailed);
  EXPECT_THAT(Get(id).reason, HasSubstr("no process of the job was left"));
}

// Guards against a restart that finds a run dir removed while the daemon was down queueing
// the job again and starting attempt 2 beside the still running attempt 1.
TEST_F(DaemonTest, ARunDirMissingAfterARestartHasTheOldAttemptStoppedBeforeTheNext) {
  JobId id = RestartWithARunningJobsRunDirGone();
  std::string run = RunDir(id, 1);
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(shims_.Find(run)->signals, std::vector<int>{SIGTERM});  // the old shim lives
  EXPECT_EQ(shims_.leftover_signals[6001], std::vector<int>{SIGTERM});
  EXPECT_EQ(shims_.Find(RunDir(id, 2)), nullptr);

  ASSERT_TRUE(shims_.Crash(run));
  shims_.leftovers.erase(run);
  daemon_->OnSampleTimer();
  Loop();
  job = Get(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 2);
  ASSERT_EQ(job.attempts.size(), 2u);
  EXPECT_EQ(job.attempts[0].end_reason,
            "the run dir " + run + " was missing; its 2 processes were stopped");
  EXPECT_NE(shims_.Find(RunDir(id, 2)), nullptr);
}

TEST_F(DaemonTest, CancelSignalsTheShimAndTheExitEndsTheJobCancelled) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  HttpResponse r = Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel");
  ASSERT_EQ(r.status, 200) << r.body;
  const FakeShims::Shim* shim = shims_.Find(RunDir(id, 1));
  ASSERT_NE(shim, nullptr);
  EXPECT_EQ(shim->signals, std::vector<int>{SIGTERM});
  ExitRecord rec;
  rec.signal = SIGTERM;
  rec.cancelled = true;
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), rec));
  Loop();
  EXPECT_EQ(Get(id).state, JobState::kCancelled);
}

TEST_F(DaemonTest, AShimThatCannotStartFailsTheAttempt) {
  SetGpus({Gpu(0, 80)});
  Start();
  shims_.FailNextLaunch(Status::Io("exec trainqd: no such file"));
  JobId id = Submit({{"gpus", 1}});
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_THAT(job.reason, HasSubstr("could not start the shim"));
}

// Defect: a start that failed on a full disk left the job queued with no reason, and no pass
// came to try again once space was freed.
TEST_F(DaemonTest, AStartOnAFullDiskWaitsWithAReasonAndIsTriedAgain) {
  SetGpus({Gpu(0, 80)});
  Start();
  store_->FailNext("StartAttempt", ErrnoStatus("write " + paths_.runs + "/1/1/spec.json", ENOSPC),
                   2);
  JobId id = Submit({{"gpus", 1}});
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_THAT(job.reason, HasSubstr("disk full in " + paths_.state_dir + ": write"));
  EXPECT_EQ(daemon_->NextWakeup(), kT0 + 5000);
  WakeUp();  // still full
  EXPECT_EQ(Get(id).state, JobState::kQueued);
  EXPECT_EQ(daemon_->NextWakeup(), kT0 + 10000);
  WakeUp();  // space came back: nothing else happened, yet the job starts
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  EXPECT_EQ(Get(id).reason, "");
  EXPECT_EQ(daemon_->NextWakeup(), 0) << "the retry must stop once the write succeeded";
}

// A shim that cannot start for want of space ran nothing: the job waits, it does not fail.
TEST_F(DaemonTest, AShimThatFindsTheDiskFullLeavesTheJobQueued) {
  SetGpus({Gpu(0, 80)});
  Start();
  shims_.FailNextLaunch(ErrnoStatus("open lock", EDQUOT));
  JobId id = Submit({{"gpus", 1}});
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_THAT(job.reason, HasSubstr("disk full in " + paths_.state_dir));
  WakeUp();
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  EXPECT_EQ(Get(id).attempt, 2);
}

// Defect: an end the store refused was dropped: the job stayed `running` with no process,
// cancel said "not running on this node", and nothing ever recorded the end.
TEST_F(DaemonTest, AnEndTheStoreRefusesIsKeptAndRecordedOnceItCanBe) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  Status full = Status::NoSpace("disk full in " + dir_ + ": COMMIT: database or disk is full");
  // Refused at the exit, at the passes after it and after the next submit, and at a wake-up.
  store_->FailNext("FinishAttempt", full, 4);
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  HttpResponse shown = Call("GET", "/v1/jobs/" + std::to_string(id));
  EXPECT_THAT(json::parse(shown.body)["reason"].get<std::string>(),
              HasSubstr("ended (exit code 0); recording its end waits: disk full in " + dir_));
  HttpResponse cancel = Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel");
  EXPECT_EQ(cancel.status, 409);
  EXPECT_THAT(cancel.body, HasSubstr("already ended"));
  JobId next = Submit({{"gpus", 1}});  // the ended attempt holds no GPU
  EXPECT_EQ(Get(next).state, JobState::kRunning);

  WakeUp();  // still full: kept, and tried again later
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  WakeUp();
  Job job = Get(id);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].exit_code, 0);
}

// --hold: the job is stored held and the pass that follows its submit leaves it, the GPU
// free; a release starts it.
TEST_F(DaemonTest, AHeldSubmitWaitsForItsRelease) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}, {"hold", true}});
  Loop();
  Job held = Get(id);
  EXPECT_EQ(held.state, JobState::kQueued);
  EXPECT_EQ(held.not_before, kHeldNotBefore);
  HttpResponse shown = Call("GET", "/v1/jobs/" + std::to_string(id));
  json doc = json::parse(shown.body);
  EXPECT_EQ(doc["held"], true);
  EXPECT_EQ(doc["submitted_held"], true);
  EXPECT_THAT(doc["reason"].get<std::string>(),
              HasSubstr("no pass starts it until trainq release " + std::to_string(id)));
  JobId other = Submit({{"gpus", 1}});
  EXPECT_EQ(Get(other).state, JobState::kRunning);  // the held one takes no GPU
  ASSERT_TRUE(shims_.Exit(RunDir(other, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(id).state, JobState::kQueued);  // a pass ran again, and left it
  HttpResponse released =
      Call("POST", "/v1/jobs/" + std::to_string(id) + "/update", json{{"hold", false}}.dump());
  EXPECT_EQ(released.status, 200) << released.body;
  Loop();
  EXPECT_EQ(Get(id).state, JobState::kRunning);
}

// Reasons are written to the store only when their text changed: in a long queue most
// passes change few, and each write rewrites a row in SQLite.
TEST_F(DaemonTest, APassWritesOnlyTheReasonsThatChanged) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId running = Submit({{"gpus", 1}});
  JobId share = Submit({{"mem", "10GiB"}});
  JobId whole = Submit({{"gpus", 1}});
  ASSERT_EQ(Get(running).state, JobState::kRunning);
  std::string share_reason = Get(share).reason;
  ASSERT_FALSE(share_reason.empty());
  size_t written = store_->reasons_written();
  clock_.Advance(kMinute);
  daemon_->OnWakeupTimer();
  Loop();
  EXPECT_EQ(store_->reasons_written(), written) << "unchanged reasons were written again";
  ASSERT_TRUE(shims_.Exit(RunDir(running, 1), Exited(0)));
  Loop();
  ASSERT_EQ(Get(share).state, JobState::kRunning);
  EXPECT_EQ(store_->reasons_written(), written + 1) << "only the whole-GPU job's reason changed";
  EXPECT_THAT(Get(whole).reason, HasSubstr(std::to_string(share)));
}

// A pass over a long queue leaves most changed reasons for later loop turns; the API shows
// each job the pass's reason meanwhile, never the older one the store still holds.
TEST_F(DaemonTest, TheApiShowsAPasssReasonBeforeTheStoreHasIt) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId running = Submit({{"gpus", 1}});
  ASSERT_EQ(Get(running).state, JobState::kRunning);
  json batch = {{"defaults", {{"command", {"train"}}, {"cwd", dir_}, {"gpus", 1}}},
                {"jobs", json::array()}};
  for (int i = 0; i < 3000; ++i) batch["jobs"].push_back(json::object());
  HttpResponse r = Call("POST", "/v1/jobs", batch.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  JobId last = json::parse(r.body)["ids"].back().get<JobId>();
  std::string stored = Get(last).reason;  // the first pass's chunk did not reach it
  ASSERT_GT(daemon_->ReasonsUnwritten(), 0u);
  json shown = json::parse(Call("GET", "/v1/jobs/" + std::to_string(last)).body);
  EXPECT_THAT(shown["reason"].get<std::string>(), HasSubstr(std::to_string(running)));
  EXPECT_NE(shown["reason"].get<std::string>(), stored);
  HttpRequest query = Request("GET", "/v1/jobs", "");
  query.query["state"] = "queued";
  query.peer_uid = static_cast<int64_t>(::getuid());
  query.peer_pid = ::getpid();
  HttpResponse list = Send(std::move(query));
  ASSERT_EQ(list.status, 200) << list.body.substr(0, 300);
  json listed = json::parse(list.body);
  ASSERT_FALSE(listed["jobs"].empty()) << list.body.substr(0, 300);
  EXPECT_EQ(listed["jobs"].back()["reason"], shown["reason"]);
  HttpResponse log = Call("GET", "/v1/jobs/" + std::to_string(last) + "/log");
  EXPECT_EQ(log.status, 409);
  EXPECT_THAT(log.body, HasSubstr(std::to_string(running)));
}

// A job that leaves the queue and comes back gets its reason written again, though the text
// is the same as before it left.
TEST_F(DaemonTest, ACancelledJobQueuedAgainGetsItsReasonBack) {
  SetGpus({Gpu(0, 80)});
  Start();
  Submit({{"gpus", 1}});
  JobId waiting = Submit({{"gpus", 1}});
  std::string reason = Get(waiting).reason;
  ASSERT_FALSE(reason.empty());
  std::string path = "/v1/jobs/" + std::to_string(waiting);
  ASSERT_EQ(Call("POST", path + "/cancel").status, 200);
  ASSERT_EQ(Call("POST", path + "/retry").status, 200);
  EXPECT_EQ(Get(waiting).state, JobState::kQueued);
  EXPECT_EQ(Get(waiting).reason, reason);
}

// Defect: a priority of INT_MIN made the pass loop forever.
TEST_F(DaemonTest, EveryPriorityTheApiAcceptsIsScheduled) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId low = Submit({{"mem", "1GiB"}, {"priority", std::numeric_limits<int>::min()}});
  JobId high = Submit({{"mem", "1GiB"}, {"priority", std::numeric_limits<int>::max()}});
  EXPECT_EQ(Get(low).state, JobState::kRunning);
  EXPECT_EQ(Get(high).state, JobState::kRunning);
}

// --- Tokens: requests over TCP are authenticated by a bearer token ---

class TokenTest : public DaemonTest {
 protected:
  // A token made over the Unix socket, where the test's user (the daemon's owner) is an admin.
  std::string Create(const std::string& name, const std::string& role,
                     json request = json::object()) {
    request["name"] = name;
    request["role"] = role;
    HttpResponse r = Call("POST", "/v1/tokens", request.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    json doc = json::parse(r.body, nullptr, false);
    return doc.is_object() && doc.contains("token") ? doc["token"].get<std::string>() : "";
  }
  static std::string Bearer(const std::string& token) { return "Bearer " + token; }
  static std::string Message(const HttpResponse& r) {
    json doc = json::parse(r.body, nullptr, false);
    return doc.is_object() && doc.contains("error") ? doc["error"].value("message", "") : "";
  }
  std::vector<TokenRecord> Stored() {
    Result<std::vector<TokenRecord>> all = store_->ListTokens();
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    return all.ok() ? *all : std::vector<TokenRecord>{};
  }
};

TEST_F(TokenTest, TcpWithoutAValidTokenIsUnauthenticated) {
  SetGpus({Gpu(0, 80)});
  Start();
  std::string token = Create("laptop", "admin");
  HttpResponse none = CallTcp("", "GET", "/v1/jobs");
  EXPECT_EQ(none.status, 401);
  EXPECT_THAT(Message(none), HasSubstr("no Authorization header"));
  std::string guess = "tq_" + std::string(64, '7');
  HttpResponse wrong = CallTcp(Bearer(guess), "GET", "/v1/jobs");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_THAT(Message(wrong), HasSubstr("unknown token"));
  EXPECT_THAT(wrong.body, Not(HasSubstr(guess)));
  for (const std::string& bad :
       std::vector<std::string>{"Basic " + token, Bearer(token) + " x", "Bearer"}) {
    HttpResponse r = CallTcp(bad, "GET", "/v1/jobs");
    EXPECT_EQ(r.status, 401) << bad;
    EXPECT_THAT(r.body, Not(HasSubstr(token.substr(3))));
  }
  // Refused before any route: nothing is stored.
  json spec = {{"command", {"train"}}, {"cwd", dir_}};
  EXPECT_EQ(CallTcp("", "POST", "/v1/jobs", spec.dump()).status, 401);
  Result<std::vector<Job>> jobs = store_->List({});
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty());
}

TEST_F(TokenTest, ARevokedTokenIsRefusedAtOnce) {
  Start();
  std::string token = Create("laptop", "read");
  EXPECT_EQ(CallTcp(Bearer(token), "GET", "/v1/jobs").status, 200);
  EXPECT_EQ(Call("DELETE", "/v1/tokens/laptop").status, 200);
  HttpResponse r = CallTcp(Bearer(token), "GET", "/v1/jobs");
  EXPECT_EQ(r.status, 401);
  EXPECT_THAT(Message(r), HasSubstr("token 'laptop' was revoked"));
  EXPECT_THAT(r.body, Not(HasSubstr(token)));
  HttpResponse again = Call("DELETE", "/v1/tokens/laptop");
  EXPECT_EQ(again.status, 404);
  EXPECT_THAT(Message(again), HasSubstr("'laptop'"));
}

TEST_F(TokenTest, AnExpiredTokenIsRefused) {
  Start();
  std::string token = Create("ci", "read", {{"expires", "1h"}});
  clock_.Advance(60 * kMinute - 1);
  EXPECT_EQ(CallTcp(Bearer(token), "GET", "/v1/jobs").status, 200);
  clock_.Advance(1);
  HttpResponse r = CallTcp(Bearer(token), "GET", "/v1/jobs");
  EXPECT_EQ(r.status, 401);
  EXPECT_THAT(Message(r), HasSubstr("token 'ci' has expired"));
}

TEST_F(TokenTest, AReadTokenReadsButCannotAdminister) {
  SetGpus({Gpu(0, 80)});
  Start();
  std::string token = Create("viewer", "read");
  EXPECT_EQ(CallTcp(Bearer(token), "GET", "/v1/jobs").status, 200);
  EXPECT_EQ(CallTcp(Bearer(token), "GET", "/v1/gpus").status, 200);
  json more = {{"name", "mine"}, {"role", "admin"}};
  HttpResponse r = CallTcp(Bearer(token), "POST", "/v1/tokens", more.dump());
  EXPECT_EQ(r.status, 403);
  EXPECT_THAT(Message(r), HasSubstr("token 'viewer'"));
  EXPECT_EQ(CallTcp(Bearer(token), "GET", "/v1/tokens").status, 403);
  EXPECT_EQ(CallTcp(Bearer(token), "DELETE", "/v1/tokens/viewer").status, 403);
  EXPECT_EQ(Stored().size(), 1u);
}

TEST_F(TokenTest, ASubmitTokensJobsBelongToItsUser) {
  SetGpus({Gpu(0, 80)});
  Start();
  std::string token = Create("trainer", "submit", {{"user", "tqalice"}});
  json spec = {{"command", {"train"}}, {"cwd", dir_}, {"mem", "10GiB"}};
  HttpResponse r = CallTcp(Bearer(token), "POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  JobId id = json::parse(r.body)["ids"][0].get<JobId>();
  EXPECT_EQ(Get(id).spec.user, "tqalice");
}

TEST_F(TokenTest, BadRequestsNameTheFieldAndStoreNothing) {
  config_.shared = true;  // the user must exist on the machine
  Start();
  struct Case {
    json request;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{
           {{{"name", "a b"}, {"role", "read"}}, "name:"},
           {{{"role", "read"}}, "name:"},
           {{{"name", "x"}, {"role", "owner"}}, "role:"},
           {{{"name", "x"}, {"role", "read"}, {"expires", "soon"}}, "expires"},
           {{{"name", "x"}, {"role", "read"}, {"expires", "0s"}}, "expires:"},
           {{{"name", "x"}, {"role", "read"}, {"user", "tq-nosuch-user-9"}}, "user:"},
           {{{"name", "x"}, {"role", "read"}, {"user", "-rf"}}, "user:"},
           {{{"name", "x"}, {"role", "read"}, {"colour", "red"}}, "colour:"},
       }) {
    HttpResponse r = Call("POST", "/v1/tokens", c.request.dump());
    EXPECT_EQ(r.status, 400) << c.request.dump();
    EXPECT_THAT(Message(r), HasSubstr(c.field)) << c.request.dump();
  }
  EXPECT_TRUE(Stored().empty());
  EXPECT_EQ(Call("DELETE", "/v1/tokens/bad name").status, 400);
}

// Only SHA-256 digests reach the disk: the token text is in no file of the state dir, the
// digest is (so the files read are the right ones), and the database is 0600 whatever the
// umask it was created under.
TEST_F(TokenTest, TokensAreNeverStoredInClear) {
  mode_t old_umask = ::umask(022);
  Start();
  ::umask(old_umask);
  std::string token = Create("laptop", "admin", {{"expires", "30d"}});
  ASSERT_EQ(token.size(), 67u);
  EXPECT_EQ(CallTcp(Bearer(token), "GET", "/v1/jobs").status, 200);
  HttpResponse list = Call("GET", "/v1/tokens");
  EXPECT_EQ(list.status, 200);
  EXPECT_THAT(list.body, Not(HasSubstr(token.substr(3))));
  EXPECT_THAT(list.body, Not(HasSubstr("hash")));
  std::string digest = Sha256Hex(token);
  bool digest_found = false;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.find(token.substr(3)), std::string::npos) << entry.path();
    digest_found = digest_found || bytes.find(digest) != std::string::npos;
  }
  EXPECT_TRUE(digest_found);
  struct stat st {};
  ASSERT_EQ(::stat(paths_.db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (::stat((paths_.db + "-wal").c_str(), &st) == 0) {
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
}

// Per-user limits through the API: a job past its user's cap waits with the reason, and
// raising the cap at run time starts it at once.
TEST_F(DaemonTest, MaxGpusPerUserHoldsBackAJobUntilTheLimitIsRaised) {
  config_.policy.max_gpus_per_user = 1;
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId first = Submit({{"gpus", 1}});
  JobId second = Submit({{"gpus", 1}});
  ASSERT_EQ(Get(first).state, JobState::kRunning);
  Job waiting = Get(second);
  ASSERT_EQ(waiting.state, JobState::kQueued);
  EXPECT_EQ(waiting.reason,
            "waiting: " + waiting.spec.user + " has 1 GPU in use; max_gpus_per_user = 1");
  HttpResponse set = Call("PUT", "/v1/config", R"({"max_gpus_per_user": 2})");
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(Get(second).state, JobState::kRunning);
  EXPECT_THAT(Get(second).attempts.back().gpu_indices, ::testing::ElementsAre(1));
}

// The attempts a daemon adopts at start count for their user as those it started.
TEST_F(DaemonTest, MaxJobsPerUserCountsAttemptsAdoptedAfterARestart) {
  config_.policy.max_jobs_per_user = 1;
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId running = Submit({{"cpus", 1}, {"gpus", 0}});  // a CPU job counts as a job
  ASSERT_EQ(Get(running).state, JobState::kRunning);
  Start();  // a restart: the attempt is adopted
  JobId next = Submit({{"gpus", 1}});
  EXPECT_EQ(Get(next).state, JobState::kQueued);
  EXPECT_THAT(Get(next).reason, HasSubstr("has 1 job running; max_jobs_per_user = 1"));
  ASSERT_TRUE(shims_.Exit(RunDir(running, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(next).state, JobState::kRunning);
}

// Where a 20 GiB share lands after an exclusive job came and went and a 40 GiB share runs on
// GPU 0: where the plain rule and FGD with the learned mix differ.
class WorkloadWindowTest : public DaemonTest {
 protected:
  std::vector<int> PlaceShareAfterHistory() {
    SetGpus({Gpu(0, 80), Gpu(1, 80)});
    Start();
    JobId whole = Submit({{"gpus", 1}});  // exclusive: the mix learns whole-GPU requests
    EXPECT_TRUE(shims_.Exit(RunDir(whole, 1), Exited(0)));
    Loop();
    JobId half = Submit({{"gpus", 1}, {"mem", "40GiB"}});
    EXPECT_THAT(Get(half).attempts.back().gpu_indices, ::testing::ElementsAre(0));
    JobId quarter = Submit({{"gpus", 1}, {"mem", "20GiB"}});
    EXPECT_EQ(Get(quarter).state, JobState::kRunning);
    return Get(quarter).attempts.back().gpu_indices;
  }
};

TEST_F(WorkloadWindowTest, OffByDefaultTheShareTakesAnUnusedGpu) {
  EXPECT_THAT(PlaceShareAfterHistory(), ::testing::ElementsAre(1));
}

// With a window the daemon learns that whole-GPU requests arrive and, as the simulator's FGD,
// keeps GPU 1 whole by packing the share next to the one on GPU 0.
TEST_F(WorkloadWindowTest, RecentSubmitsGiveTheMixAndFgdKeepsAWholeGpuFree) {
  config_.workload_window = 10;
  EXPECT_THAT(PlaceShareAfterHistory(), ::testing::ElementsAre(0));
}

}  // namespace
}  // namespace trainq

namespace trainq {
namespace {

// A shared daemon (config shared): each job runs as the user who submitted it.
class SharedDaemonTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    config_.shared = true;
  }
  // Submits `spec` as `uid` with `cwd`; the response.
  HttpResponse SubmitAs(int64_t uid, const std::string& cwd, json spec = json::object()) {
    spec["command"] = {"train"};
    spec["cwd"] = cwd;
    return CallAs(uid, "POST", "/v1/jobs", spec.dump());
  }
  static JobId IdOf(const HttpResponse& r) {
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("ids") ? j["ids"][0].get<JobId>() : 0;
  }
};

TEST_F(SharedDaemonTest, TheRunSpecOfAnAttemptCarriesItsSubmitter) {
  testing::TestUser user;
  if (!user.ok()) GTEST_SKIP() << user.why();
  Result<UserInfo> info = LookupUserByName(user.name());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  SetGpus({Gpu(0, 80)});
  Start();
  HttpResponse r = SubmitAs(info->uid, "/", {{"mem", "1GiB"}});
  ASSERT_EQ(r.status, 201) << r.body;
  JobId id = IdOf(r);
  EXPECT_EQ(Get(id).spec.user, user.name());
  Result<RunSpec> spec = ReadRunSpec(RunDir(id, 1));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->uid, info->uid);
  EXPECT_EQ(spec->gid, info->gid);
  EXPECT_EQ(spec->user, user.name());
  EXPECT_EQ(spec->home, "/home/" + user.name());

  JobId by_root = Submit({{"mem", "1GiB"}});  // root is a user like any other
  spec = ReadRunSpec(RunDir(by_root, 1));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->uid, 0);
  EXPECT_EQ(spec->gid, 0);
  EXPECT_EQ(spec->user, "root");
}

TEST_F(DaemonTest, APersonalDaemonRunsJobsAsItself) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"mem", "1GiB"}});
  Result<RunSpec> spec = ReadRunSpec(RunDir(id, 1));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->uid, -1);
  EXPECT_EQ(spec->user, "");
}

TEST_F(SharedDaemonTest, ASubmitWithACwdTheUserMayNotEnterIsRefusedNamingCwd) {
  testing::TestUser user;
  if (!user.ok()) GTEST_SKIP() << user.why();
  Result<UserInfo> info = LookupUserByName(user.name());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  std::string shut = dir_ + "/shut";
  std::filesystem::create_directories(shut);
  std::filesystem::permissions(shut, std::filesystem::perms::owner_all);
  SetGpus({Gpu(0, 80)});
  Start();
  HttpResponse r = SubmitAs(info->uid, shut);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("cwd: user " + user.name() + " may not enter " + shut +
                                " (drwx------ root root)"));
  EXPECT_EQ(SubmitAs(0, shut).status, 201);  // root may enter it
}

TEST_F(SharedDaemonTest, ASubmitterWhoIsGoneWhenTheJobStartsFailsTheAttemptWithAReason) {
  auto user = std::make_unique<testing::TestUser>();
  if (!user->ok()) GTEST_SKIP() << user->why();
  std::string name = user->name();
  Result<UserInfo> info = LookupUserByName(name);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  SetGpus({Gpu(0, 80)});
  Start();
  JobId first = Submit({{"gpus", 1}});
  HttpResponse r = SubmitAs(info->uid, "/", {{"gpus", 1}});
  ASSERT_EQ(r.status, 201) << r.body;
  JobId waiting = IdOf(r);
  EXPECT_EQ(Get(waiting).state, JobState::kQueued);
  user.reset();  // userdel
  ASSERT_TRUE(shims_.Exit(RunDir(first, 1), Exited(0)));
  Loop();
  Job job = Get(waiting);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.reason,
            "cannot run as " + name + ", who submitted it: no local user '" + name + "'");
  EXPECT_EQ(shims_.Find(RunDir(waiting, 1)), nullptr);  // no shim ever ran it
  EXPECT_FALSE(std::filesystem::exists(SpecPath(RunDir(waiting, 1))));
}

}  // namespace
}  // namespace trainq
