// Elastic jobs against the fakes (docs/workflow.md, "Elastic jobs"): a --gpus 1:2 job on two
// GPUs starts on both, shrinks to one when a 1-GPU job arrives (after its --signal warning,
// the same id, TRAINQ_RESTART_COUNT 1), and grows back to two once that job ended and its
// attempt has kept its size min_runtime; the reasons, /metrics and the API say so.
#include <csignal>

#include <fmt/format.h>

#include "src/daemon/daemon_test_fixture.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kMinute = 60 * 1000;
using Var = std::pair<std::string, std::string>;

class ElasticTest : public DaemonTest {
 protected:
  std::vector<Var> Env(JobId id, int attempt) {
    Result<RunSpec> spec = ReadRunSpec(RunDir(id, attempt));
    EXPECT_TRUE(spec.ok()) << "job " << id << " attempt " << attempt << " did not start";
    return spec.ok() ? spec->env : std::vector<Var>{};
  }
};

TEST_F(ElasticTest, AJobOf1To2GpusStartsOnTwoShrinksForAJobAndGrowsBackAfterIt) {
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId elastic = Submit({{"gpus", 1}, {"max_gpus", 2}, {"signal", "USR1@30"}});
  Job e = Get(elastic);
  ASSERT_EQ(e.state, JobState::kRunning);
  EXPECT_EQ(e.spec.max_gpus, 2);
  EXPECT_EQ(e.attempts[0].gpu_indices, (std::vector<int>{0, 1}));  // both were idle
  EXPECT_THAT(Env(elastic, 1), Contains(Var("CUDA_VISIBLE_DEVICES", "0,1")));
  EXPECT_THAT(Env(elastic, 1), Contains(Var("TRAINQ_NUM_GPUS", "2")));
  EXPECT_THAT(Env(elastic, 1), Contains(Var("TRAINQ_RESTART_COUNT", "0")));

  // A 1-GPU job arrives 20 minutes in (past min_runtime, 10m): the elastic job shrinks.
  clock_.Set(kT0 + 20 * kMinute);
  JobId one = Submit({{"gpus", 1}});
  Result<ShimControl> control = ReadShimControl(RunDir(elastic, 1));
  ASSERT_TRUE(control.ok()) << "the elastic job was not asked to shrink";
  EXPECT_EQ(control->stop, "resized");
  EXPECT_EQ(control->reason, fmt::format("resized: shrinks from 2 to 1 GPU for job {}", one));
  EXPECT_EQ(control->stop_in_ms, 30'000);  // its --signal lead
  EXPECT_EQ(shims_.Find(RunDir(elastic, 1))->signals, std::vector<int>{SIGUSR1});
  EXPECT_THAT(
      Reason(one),
      StartsWith(fmt::format(
          "will start when job {} shrinks from 2 to 1 GPU, in 40s: the GPUs are held for this job",
          elastic)));
  EXPECT_EQ(Get(one).state, JobState::kQueued);
  // explain says the same of the waiting job.
  json why = json::parse(Call("GET", fmt::format("/v1/jobs/{}/explain", one)).body);
  EXPECT_THAT(why["reason"].get<std::string>(),
              StartsWith(fmt::format("will start when job {} shrinks from 2 to 1 GPU", elastic)));

  // Its stop carried out, it is queued and restarted at once on the GPU it kept, and the
  // other job takes the one it gave up.
  EndStopped(elastic, 1);
  e = Get(elastic);
  EXPECT_EQ(e.state, JobState::kRunning);
  ASSERT_EQ(e.attempts.size(), 2u);
  EXPECT_EQ(e.attempts[0].end_reason, control->reason);
  EXPECT_EQ(e.attempts[1].gpu_indices, std::vector<int>{0});
  EXPECT_THAT(Env(elastic, 2), Contains(Var("CUDA_VISIBLE_DEVICES", "0")));
  EXPECT_THAT(Env(elastic, 2), Contains(Var("TRAINQ_NUM_GPUS", "1")));
  EXPECT_THAT(Env(elastic, 2), Contains(Var("TRAINQ_RESTART_COUNT", "1")));
  // torchrun's variables at the new size, a private port on 1 GPU too.
  EXPECT_THAT(Env(elastic, 2), Contains(Var("PET_NPROC_PER_NODE", "1")));
  ASSERT_NE(Get(elastic).attempts[1].master_port, 0);
  EXPECT_EQ(Get(one).state, JobState::kRunning);
  EXPECT_EQ(Get(one).attempts[0].gpu_indices, std::vector<int>{1});

  // The other job ends: GPU 1 is idle, but the elastic job keeps its size min_runtime first;
  // the daemon wakes for that and grows it then.
  clock_.Set(kT0 + 25 * kMinute);
  Finish(one, 1);
  EXPECT_FALSE(ReadShimControl(RunDir(elastic, 2)).ok());
  WakeUp();
  EXPECT_EQ(clock_.Now(), kT0 + 30 * kMinute);  // the restart at 20m, plus 10m
  control = ReadShimControl(RunDir(elastic, 2));
  ASSERT_TRUE(control.ok()) << "the elastic job did not grow";
  EXPECT_EQ(control->stop, "resized");
  EXPECT_EQ(control->reason, "resized: grows from 1 to 2 GPUs (GPU 1 idle)");
  EndStopped(elastic, 2);
  e = Get(elastic);
  ASSERT_EQ(e.attempts.size(), 3u);
  EXPECT_EQ(e.state, JobState::kRunning);
  EXPECT_EQ(e.attempts[2].gpu_indices, (std::vector<int>{0, 1}));
  EXPECT_THAT(Env(elastic, 3), Contains(Var("TRAINQ_RESTART_COUNT", "2")));

  // explain lists both resizes, oldest first.
  json resizes =
      json::parse(Call("GET", fmt::format("/v1/jobs/{}/explain", elastic)).body)["resizes"];
  ASSERT_EQ(resizes.size(), 2u) << resizes.dump();
  EXPECT_EQ(resizes[0]["attempt"], 1);
  EXPECT_EQ(resizes[0]["what"], fmt::format("shrinks from 2 to 1 GPU for job {}", one));
  EXPECT_EQ(resizes[1]["attempt"], 2);
  EXPECT_EQ(resizes[1]["what"], "grows from 1 to 2 GPUs (GPU 1 idle)");

  std::string metrics = Call("GET", "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("trainq_resizes_total{direction=\"grow\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("trainq_resizes_total{direction=\"shrink\"} 1"));
}

// The GPU a growing job adds is its own while it stops: a job submitted meanwhile waits.
TEST_F(ElasticTest, TheGpuAGrowAddsIsKeptWhileTheJobStops) {
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId first = Submit({{"gpus", 1}});
  JobId elastic = Submit({{"gpus", 1}, {"max_gpus", 2}, {"signal", "USR1@30"}});
  ASSERT_EQ(Get(elastic).attempts[0].gpu_indices, std::vector<int>{1});
  clock_.Set(kT0 + 15 * kMinute);
  Finish(first, 1);
  ASSERT_TRUE(ReadShimControl(RunDir(elastic, 1)).ok()) << "it did not grow";
  JobId late = Submit({{"gpus", 1}});
  EXPECT_EQ(Get(late).state, JobState::kQueued);
  EndStopped(elastic, 1);
  EXPECT_EQ(Get(elastic).attempts[1].gpu_indices, (std::vector<int>{0, 1}));
  EXPECT_EQ(Get(late).state, JobState::kQueued);
}

TEST_F(ElasticTest, ARangeThatIsNoRangeOrCannotBeHonouredIsRefusedAndNothingStored) {
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  for (auto [body, says] : std::vector<std::pair<json, std::string>>{
           {{{"gpus", 2}, {"max_gpus", 2}}, "--gpus: 2:2 is not an elastic range"},
           {{{"gpus", 0}, {"max_gpus", 2}}, "--gpus: 0:2 is not an elastic range"},
           {{{"gpus", 1}, {"max_gpus", 4}}, "the largest has 2 GPUs; use at most 1:2"},
           {{{"gpus", 1}, {"max_gpus", 2}, {"num_nodes", 2}}, "in GPUs on one node or in nodes"},
           {{{"gpus", 1}, {"num_nodes", 1}, {"max_nodes", 2}}, "this is one machine"},
       }) {
    body["command"] = {"train"};
    body["cwd"] = dir_;
    HttpResponse r = Call("POST", "/v1/jobs", body.dump());
    EXPECT_EQ(r.status, 400) << body.dump();
    EXPECT_THAT(r.body, HasSubstr(says));
  }
  EXPECT_EQ(json::parse(Call("GET", "/v1/jobs").body)["jobs"].size(), 0u);
}

}  // namespace
}  // namespace trainq
