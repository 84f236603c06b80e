// The daemon's side of the researcher's workflow, on fakes: groups and their running limit
// (--array ...%N), the variables of array and sbatch jobs, notifications when a job ends.
#include "src/daemon/daemon_test_fixture.h"

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers

class WorkflowTest : public DaemonTest {
 protected:
  // A batch in one new group; returns {ids..., group}.
  std::pair<std::vector<JobId>, JobId> SubmitGroup(json defaults, int jobs) {
    defaults["command"] = {"train"};
    defaults["cwd"] = dir_;
    defaults["group"] = true;
    json list = json::array();
    for (int i = 0; i < jobs; ++i) list.push_back({{"array_index", i}});
    HttpResponse r = Call("POST", "/v1/jobs", json{{"defaults", defaults}, {"jobs", list}}.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    json doc = json::parse(r.body, nullptr, false);
    if (!doc.is_object() || !doc.contains("group")) return {{}, 0};
    return {doc["ids"].get<std::vector<JobId>>(), doc["group"].get<JobId>()};
  }
  int Running(const std::vector<JobId>& ids) {
    int n = 0;
    for (JobId id : ids) n += IsActive(Get(id).state) ? 1 : 0;
    return n;
  }
  std::string EnvOf(JobId id, const std::string& name) {
    Result<RunSpec> spec = ReadRunSpec(RunDir(id, 1));
    EXPECT_TRUE(spec.ok());
    if (!spec.ok()) return "";
    for (const auto& [k, v] : spec->env) {
      if (k == name) return v;
    }
    return "<unset>";
  }
};

TEST_F(WorkflowTest, AGroupIsNamedByItsFirstJobAndListedWhole) {
  SetGpus({Gpu(0, 80)});
  Start();
  auto [ids, group] = SubmitGroup({{"gpus", 0}}, 3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(group, ids[0]);
  JobId other = Submit({{"gpus", 0}});
  for (JobId id : ids) EXPECT_EQ(Get(id).spec.group, group);
  EXPECT_EQ(Get(other).spec.group, 0);
  HttpRequest req = Request("GET", "/v1/jobs", "");
  req.query = {{"all", "1"}, {"group", std::to_string(group)}};
  req.peer_uid = static_cast<int64_t>(::getuid());
  HttpResponse r = Send(std::move(req));
  ASSERT_EQ(r.status, 200);
  json listed = json::parse(r.body)["jobs"];
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[2]["array_index"], 2);
  EXPECT_EQ(listed[0]["group"], group);
}

// Two requests committed in one transaction still get a group each.
TEST_F(WorkflowTest, RequestsCommittedTogetherGetTheirOwnGroups) {
  SetGpus({Gpu(0, 80)});
  Start();
  std::vector<std::optional<HttpResponse>> answers(2);
  for (int k = 0; k < 2; ++k) {
    json body = {{"defaults", {{"command", {"x"}}, {"cwd", dir_}, {"gpus", 0}, {"group", true}}},
                 {"jobs", {json::object(), json::object()}}};
    HttpRequest req = Request("POST", "/v1/jobs", body.dump());
    req.peer_uid = static_cast<int64_t>(::getuid());
    daemon_->Handle(std::move(req), [&answers, k](HttpResponse r) { answers[k] = std::move(r); });
  }
  Loop();  // one loop turn: one group commit for both
  ASSERT_TRUE(answers[0] && answers[1]);
  json a = json::parse(answers[0]->body), b = json::parse(answers[1]->body);
  EXPECT_EQ(a["group"], a["ids"][0]);
  EXPECT_EQ(b["group"], b["ids"][0]);
  EXPECT_NE(a["group"], b["group"]);
  EXPECT_EQ(Get(b["ids"][1].get<JobId>()).spec.group, b["group"].get<JobId>());
}

TEST_F(WorkflowTest, AGroupLimitKeepsAtMostThatManyRunning) {
  SetGpus({Gpu(0, 80), Gpu(1, 80), Gpu(2, 80), Gpu(3, 80)});
  Start();
  auto [ids, group] = SubmitGroup({{"gpus", 1}, {"group_limit", 2}}, 5);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(Running(ids), 2);  // four GPUs free, two allowed
  EXPECT_THAT(Get(ids[2]).reason, HasSubstr("at most 2 of its jobs run at once"));
  JobId outsider = Submit({{"gpus", 1}});
  EXPECT_EQ(Get(outsider).state, JobState::kRunning);  // others are not held back
  ASSERT_TRUE(shims_.Exit(RunDir(ids[0], 1), Exited(0)));
  Loop();
  EXPECT_EQ(Running(ids), 2);
  EXPECT_EQ(Get(ids[2]).state, JobState::kRunning);  // next in line took the freed slot
  EXPECT_EQ(Get(ids[3]).state, JobState::kQueued);
}

TEST_F(WorkflowTest, ArrayAndSlurmVariablesReachTheJob) {
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  auto [ids, group] = SubmitGroup({{"gpus", 1}, {"slurm", true}, {"name", "probe"}}, 2);
  ASSERT_EQ(ids.size(), 2u);
  JobId second = ids[1];
  EXPECT_EQ(EnvOf(second, "TRAINQ_ARRAY_INDEX"), "1");
  EXPECT_EQ(EnvOf(second, "TRAINQ_GROUP"), std::to_string(group));
  EXPECT_EQ(EnvOf(second, "SLURM_JOB_ID"), std::to_string(second));
  EXPECT_EQ(EnvOf(second, "SLURM_ARRAY_JOB_ID"), std::to_string(group));
  EXPECT_EQ(EnvOf(second, "SLURM_ARRAY_TASK_ID"), "1");
  EXPECT_EQ(EnvOf(second, "SLURM_JOB_NAME"), "probe");
  EXPECT_EQ(EnvOf(second, "SLURM_JOB_NODELIST"), "node-a");
  EXPECT_EQ(EnvOf(second, "SLURMD_NODENAME"), "node-a");
  EXPECT_EQ(EnvOf(second, "SLURM_NNODES"), "1");
  EXPECT_EQ(EnvOf(second, "SLURM_NODEID"), "0");
  EXPECT_EQ(EnvOf(second, "SLURM_GPUS_ON_NODE"), "1");
  EXPECT_EQ(EnvOf(second, "SLURM_JOB_GPUS"), EnvOf(second, "CUDA_VISIBLE_DEVICES"));
  JobId plain = Submit({{"gpus", 0}});
  EXPECT_EQ(EnvOf(plain, "SLURM_JOB_ID"), "<unset>");
  EXPECT_EQ(EnvOf(plain, "TRAINQ_ARRAY_INDEX"), "<unset>");
}

TEST_F(WorkflowTest, AnEndedJobIsPostedToItsWebhook) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}, {"notify", "http://127.0.0.1:9/hook"}, {"name", "lr"}});
  JobId quiet = Submit({{"gpus", 0}});
  ASSERT_TRUE(shims_.Exit(RunDir(quiet, 1), Exited(0)));
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), Exited(3)));
  Loop();
  ASSERT_EQ(Get(id).state, JobState::kFailed);
  auto delivered = [this] {
    std::lock_guard lock(delivered_mu_);
    return delivered_.size();
  };
  for (int i = 0; i < 2000 && delivered() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the notifier's own thread
  }
  std::lock_guard lock(delivered_mu_);
  ASSERT_EQ(delivered_.size(), 1u);  // the job without --notify says nothing
  EXPECT_EQ(delivered_[0].target, "http://127.0.0.1:9/hook");
  json body = json::parse(delivered_[0].body);
  EXPECT_EQ(body["id"], id);
  EXPECT_EQ(body["state"], "failed");
  EXPECT_EQ(body["exit_code"], 3);
  EXPECT_EQ(body["name"], "lr");
}

// A mail carries the job's output through the daemon's sendmail: only to its submitter.
TEST_F(WorkflowTest, MailGoesOnlyToTheSubmittersOwnAddress) {
  config_.sendmail = "/bin/sh";  // there; never run, as the deliveries are recorded
  config_.mail_domains = {"lab.example.org"};
  SetGpus({Gpu(0, 80)});
  Start();
  Result<UserInfo> me = LookupUserById(static_cast<int64_t>(::getuid()));
  ASSERT_TRUE(me.ok());
  JobId local = Submit({{"gpus", 0}, {"mail", me->name}});
  JobId lab = Submit({{"gpus", 0}, {"mail", me->name + "@Lab.example.org"}});
  for (const std::string& other :
       {std::string("someone-else"), std::string("eve@evil.example"), me->name + "@evil.example"}) {
    json spec = {{"command", {"x"}}, {"cwd", dir_}, {"mail", other}};
    HttpResponse r = Call("POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 400) << other;
    EXPECT_THAT(r.body, HasSubstr("--mail: '" + other + "' is not your address"));
  }
  ASSERT_TRUE(shims_.Exit(RunDir(local, 1), Exited(0)));
  ASSERT_TRUE(shims_.Exit(RunDir(lab, 1), Exited(0)));
  Loop();
  auto delivered = [this] {
    std::lock_guard lock(delivered_mu_);
    return delivered_.size();
  };
  for (int i = 0; i < 2000 && delivered() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the notifier's own threads
  }
  EXPECT_EQ(delivered(), 2u);
}

TEST_F(WorkflowTest, WorkflowFieldsAreCheckedAtSubmit) {
  SetGpus({Gpu(0, 80)});
  Start();
  json spec = {{"command", {"x"}},
               {"cwd", dir_},
               {"notify", "ftp://x"},
               {"group_limit", -1},
               {"mail", "-oQ/tmp/evil"}};
  HttpResponse r = Call("POST", "/v1/jobs", spec.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("--notify"));
  EXPECT_THAT(r.body, HasSubstr("group_limit"));
  EXPECT_THAT(r.body, HasSubstr("--mail"));
  HttpRequest req = Request("GET", "/v1/jobs", "");
  req.query = {{"all", "1"}};
  req.peer_uid = static_cast<int64_t>(::getuid());
  HttpResponse list = Send(std::move(req));
  EXPECT_EQ(json::parse(list.body)["jobs"].size(), 0u);
}

// `trainq update`: a waiting job's asks change, checked as a submit; the next pass places it
// with them. A running job's name changes, nothing it holds; an ended job nothing at all.
TEST_F(WorkflowTest, UpdateChangesAWaitingJobAndIsCheckedAsASubmit) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId big = Submit({{"mem", "70GiB"}});
  JobId waits = Submit({{"mem", "40GiB"}});
  EXPECT_EQ(Get(waits).state, JobState::kQueued);
  HttpResponse bad = Call("POST", "/v1/jobs/" + std::to_string(waits) + "/update",
                          R"({"mem": "500GiB", "gpus": "two", "command": ["x"]})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("gpus: expected an integer"));
  EXPECT_THAT(bad.body, HasSubstr("command: cannot change after submit"));
  EXPECT_EQ(Get(waits).spec.mem_bytes, 40ull << 30);  // nothing changed
  HttpResponse too_big =
      Call("POST", "/v1/jobs/" + std::to_string(waits) + "/update", R"({"mem": "500GiB"})");
  EXPECT_EQ(too_big.status, 400) << too_big.body;
  EXPECT_THAT(too_big.body, HasSubstr("--mem"));
  // Small enough to share the GPU with the big one: it starts at once.
  HttpResponse ok = Call("POST", "/v1/jobs/" + std::to_string(waits) + "/update",
                         R"({"mem": "5GiB", "priority": 3, "name": "small"})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  Job now = Get(waits);
  EXPECT_EQ(now.spec.mem_bytes, 5ull << 30);
  EXPECT_EQ(now.spec.priority, 3);
  EXPECT_EQ(now.spec.name, "small");
  EXPECT_EQ(now.state, JobState::kRunning);
  HttpResponse running = Call("POST", "/v1/jobs/" + std::to_string(big) + "/update",
                              R"({"mem": "10GiB", "name": "still-big"})");
  EXPECT_EQ(running.status, 400) << running.body;
  EXPECT_THAT(running.body, HasSubstr("only name and priority change"));
  EXPECT_EQ(Call("POST", "/v1/jobs/" + std::to_string(big) + "/update", R"({"name": "still-big"})")
                .status,
            200);
  EXPECT_EQ(Get(big).spec.name, "still-big");
  ASSERT_TRUE(shims_.Exit(RunDir(big, 1), Exited(0)));
  Loop();
  EXPECT_EQ(
      Call("POST", "/v1/jobs/" + std::to_string(big) + "/update", R"({"priority": 1})").status,
      409);
}

// --gpu-type and --constraint on one machine: the GPUs' model names (NVML's, here the fake
// probe's) and the config's label and features decide; what no GPU or node here offers is
// refused at submit; a waiting job's reason counts its type; `update` changes the type.
TEST_F(WorkflowTest, GpuTypesAndFeaturesChooseTheGpu) {
  GpuInfo t4 = Gpu(0, 80), a100 = Gpu(1, 80);
  t4.name = "Tesla T4";
  a100.name = "NVIDIA A100-SXM4-80GB";
  SetGpus({t4, a100});
  config_.node_features = {"ib"};
  config_.gpu_type = "lab-big";
  Start();
  JobId first = Submit({{"gpu_type", "a100"}, {"constraints", "ib"}});
  EXPECT_EQ(Get(first).state, JobState::kRunning);
  EXPECT_EQ(Get(first).current()->gpu_indices, std::vector<int>{1});
  JobId second = Submit({{"gpu_type", "A100"}});
  EXPECT_EQ(Get(second).state, JobState::kQueued);  // the T4 is free, but not an A100
  EXPECT_THAT(Get(second).reason, HasSubstr("A100s: 1, all taken by job " + std::to_string(first)));
  // The label matches every GPU here: the T4 takes it.
  JobId labelled = Submit({{"gpu_type", "lab-big"}});
  EXPECT_EQ(Get(labelled).current()->gpu_indices, std::vector<int>{0});
  for (const auto& [field, value, says] :
       {std::tuple{"gpu_type", json("h100"), "--gpu-type: no GPU is of type h100"},
        std::tuple{"constraints", json("nvlink"), "--constraint: no node has nvlink"},
        std::tuple{"constraints", json("a|b&c"), "mixes & and |"},
        std::tuple{"gpu_type", json("a100;x"), "gpu_type: 'a100;x' is not a GPU model"}}) {
    json spec = {{"command", {"x"}}, {"cwd", dir_}, {field, value}};
    HttpResponse r = Call("POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 400) << field;
    EXPECT_THAT(r.body, HasSubstr(says));
  }
  HttpResponse update =
      Call("POST", "/v1/jobs/" + std::to_string(second) + "/update", R"({"gpu_type": "h100"})");
  EXPECT_EQ(update.status, 400) << update.body;
  EXPECT_THAT(update.body, HasSubstr("--gpu-type: no GPU is of type h100"));
  update = Call("POST", "/v1/jobs/" + std::to_string(second) + "/update", R"({"gpu_type": null})");
  ASSERT_EQ(update.status, 200) << update.body;
  EXPECT_EQ(Get(second).spec.gpu_type, "");
  json nodes = json::parse(Call("GET", "/v1/nodes").body);
  EXPECT_EQ(nodes["nodes"][0]["features"], json({"ib"}));
  EXPECT_EQ(nodes["nodes"][0]["gpus"][1]["label"], "lab-big");
}

// A job held while blocked stays held once its dependencies are met, its reason naming who
// held it.
TEST_F(WorkflowTest, AJobHeldWhileBlockedStaysHeldWhenItsDependencyEnds) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId first = Submit({{"gpus", 1}});
  JobId second = Submit({{"gpus", 1}});
  JobId held = Submit({{"gpus", 1}, {"after_any", {first, second}}});
  ASSERT_EQ(Get(held).state, JobState::kBlocked);
  ASSERT_EQ(
      Call("POST", "/v1/jobs/" + std::to_string(held) + "/update", R"({"hold": true})").status,
      200);
  ASSERT_TRUE(shims_.Exit(RunDir(first, 1), Exited(0)));  // one dependency met, one to go
  Loop();
  EXPECT_EQ(Get(held).state, JobState::kBlocked);
  EXPECT_THAT(Get(held).reason, ::testing::StartsWith("held by "));
  Loop();
  ASSERT_TRUE(shims_.Exit(RunDir(second, 1), Exited(0)));
  Loop();
  Loop();
  EXPECT_EQ(Get(held).state, JobState::kQueued);  // the GPU is free; it is held
  EXPECT_EQ(Get(held).attempts.size(), 0u);
  EXPECT_THAT(Get(held).reason,
              ::testing::MatchesRegex("held by [^:]+: no pass starts it until trainq release .*"));
}

// `trainq hold` keeps a job from starting, with its reason, until `trainq release`; changed
// dependencies are judged at once.
TEST_F(WorkflowTest, AHeldJobWaitsUntilReleasedAndNewDependenciesAreJudgedAtOnce) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId blocker = Submit({{"gpus", 1}});
  JobId held = Submit({{"gpus", 1}});
  ASSERT_EQ(
      Call("POST", "/v1/jobs/" + std::to_string(held) + "/update", R"({"hold": true})").status,
      200);
  EXPECT_TRUE(json::parse(Call("GET", "/v1/jobs/" + std::to_string(held)).body)["held"]);
  ASSERT_TRUE(shims_.Exit(RunDir(blocker, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(held).state, JobState::kQueued);  // the GPU is free; it is held
  // Who held it stays in the reason the passes write.
  EXPECT_THAT(Get(held).reason,
              ::testing::MatchesRegex("held by [^:]+: no pass starts it until trainq release .*"));
  EXPECT_EQ(daemon_->NextWakeup(), 0);  // nothing to wake up for
  JobId failed = Submit({{"gpus", 1}});
  ASSERT_TRUE(shims_.Exit(RunDir(failed, 1), Exited(3)));
  Loop();
  EXPECT_EQ(Call("POST", "/v1/jobs/" + std::to_string(held) + "/update",
                 json{{"hold", false}, {"after", {failed}}}.dump())
                .status,
            400);  // a job waits only for earlier ones
  EXPECT_TRUE(json::parse(Call("GET", "/v1/jobs/" + std::to_string(held)).body)["held"]);
  JobId later = Submit({{"gpus", 1}, {"after", {held}}});
  JobId doomed = Submit({{"gpus", 1}, {"after", {held}}});
  EXPECT_EQ(Get(later).state, JobState::kBlocked);
  // Its dependency dropped and held instead: queued at once, held.
  HttpResponse r = Call("POST", "/v1/jobs/" + std::to_string(later) + "/update",
                        R"({"after": [], "hold": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Get(later).state, JobState::kQueued);
  EXPECT_EQ(Get(later).not_before, kHeldNotBefore);
  // A dependency that already failed: cancelled at once.
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(doomed) + "/update",
                 json{{"after", {held, failed}}}.dump())
                .status,
            200);
  EXPECT_EQ(Get(doomed).state, JobState::kCancelled);
  ASSERT_EQ(
      Call("POST", "/v1/jobs/" + std::to_string(held) + "/update", R"({"hold": false})").status,
      200);
  EXPECT_EQ(Get(held).state, JobState::kRunning);
  EXPECT_FALSE(json::parse(Call("GET", "/v1/jobs/" + std::to_string(held)).body)["held"]);
  ASSERT_EQ(
      Call("POST", "/v1/jobs/" + std::to_string(later) + "/update", R"({"hold": false})").status,
      200);
  EXPECT_EQ(Get(later).state, JobState::kQueued);  // released; the GPU is held's
  EXPECT_EQ(Get(later).not_before, 0);
  ASSERT_TRUE(shims_.Exit(RunDir(held, 1), Exited(0)));
  Loop();
  EXPECT_EQ(Get(later).state, JobState::kRunning);
}

}  // namespace
}  // namespace trainq
