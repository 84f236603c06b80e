#include "src/core/json_codec.h"

#include <algorithm>
#include <climits>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace trainq {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr UnixMs kT0 = 1'795'860'000'123;  // 2026-11-28T10:00:00.123Z

std::set<std::string> Keys(const json& j) {
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  return keys;
}

json Parse(const char* text) {
  json j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

void ExpectSameSpec(const JobSpec& a, const JobSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.cwd, b.cwd);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.mem_bytes, b.mem_bytes);
  EXPECT_EQ(a.mem_percent, b.mem_percent);
  EXPECT_EQ(a.cpus, b.cpus);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.retries, b.retries);
  EXPECT_EQ(a.after, b.after);
  EXPECT_EQ(a.after_any, b.after_any);
  EXPECT_EQ(a.time_limit_ms, b.time_limit_ms);
  EXPECT_EQ(a.mem_limit_bytes, b.mem_limit_bytes);
  EXPECT_EQ(a.max_procs, b.max_procs);
  EXPECT_EQ(a.nodes_allowed, b.nodes_allowed);
  EXPECT_EQ(a.nodes_excluded, b.nodes_excluded);
  EXPECT_EQ(a.num_nodes, b.num_nodes);
}

Attempt FullAttempt() {
  Attempt a;
  a.n = 2;
  a.state = JobState::kFailed;
  a.node = "gpu07";
  a.gpu_indices = {0, 3};
  a.gpu_uuids = {"GPU-aaa", "GPU-bbb"};
  a.reserved_bytes = 20ull << 30;
  a.cpus = 4;
  a.run_dir = "/state/runs/42.2";
  a.log_path = "/state/runs/42.2/output.log";
  a.pid = 4242;
  a.started_at = kT0;
  a.ended_at = kT0 + 61'000;
  a.exit_code = 1;
  a.oom = true;
  a.peak_mem_bytes = 39ull << 30;
  a.usage = {120000, 60000, 45000, (30ull << 30) * 120};
  a.end_reason = "out of memory (retry 1 of 3 in 30s)";
  a.master_port = 29501;
  return a;
}

TEST(AttemptToJsonTest, EveryKeyWithTimesAsRfc3339) {
  json j = AttemptToJson(FullAttempt());
  EXPECT_EQ(Keys(j), (std::set<std::string>{"n",
                                            "state",
                                            "node",
                                            "gpu_indices",
                                            "gpu_uuids",
                                            "reserved_bytes",
                                            "cpus",
                                            "started_at",
                                            "ended_at",
                                            "exit_code",
                                            "signal",
                                            "oom",
                                            "peak_mem_bytes",
                                            "log_path",
                                            "run_dir",
                                            "pid",
                                            "end_reason",
                                            "master_port",
                                            "nodes",
                                            "parts",
                                            "usage"}));
  EXPECT_EQ(j["n"], 2);
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["node"], "gpu07");
  EXPECT_EQ(j["gpu_indices"], json({0, 3}));
  EXPECT_EQ(j["gpu_uuids"], json({"GPU-aaa", "GPU-bbb"}));
  EXPECT_EQ(j["reserved_bytes"], 21474836480ull);
  EXPECT_EQ(j["started_at"], "2026-11-28T10:00:00.123Z");
  EXPECT_EQ(j["ended_at"], "2026-11-28T10:01:01.123Z");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_TRUE(j["signal"].is_null());
  EXPECT_EQ(j["oom"], true);
  EXPECT_EQ(j["peak_mem_bytes"], 39ull << 30);
  EXPECT_EQ(j["log_path"], "/state/runs/42.2/output.log");
  EXPECT_EQ(j["run_dir"], "/state/runs/42.2");
  EXPECT_EQ(j["pid"], 4242);
  EXPECT_EQ(j["end_reason"], "out of memory (retry 1 of 3 in 30s)");
  EXPECT_EQ(j["master_port"], 29501);
  // Held 120 GPU-seconds, utilisation known for 60 of them, at 75 %: 45 used.
  EXPECT_EQ(j["usage"], json({{"gpu_seconds_held", 120.0},
                              {"gpu_seconds_used", 45.0},
                              {"utilization_mean", 0.75},
                              {"memory_mean_bytes", 30ull << 30}}));
}

TEST(AttemptToJsonTest, UnsetValuesAreNull) {
  Attempt a;
  a.signal = 9;
  json j = AttemptToJson(a);
  EXPECT_TRUE(j["started_at"].is_null());
  EXPECT_TRUE(j["ended_at"].is_null());
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["signal"], 9);
  EXPECT_EQ(j["state"], "starting");
  EXPECT_EQ(j["oom"], false);
  EXPECT_TRUE(j["usage"]["utilization_mean"].is_null());
  EXPECT_TRUE(j["usage"]["memory_mean_bytes"].is_null());
  EXPECT_TRUE(j["master_port"].is_null());
}

Job FullJob() {
  Job job;
  job.id = 42;
  job.spec.name = "train.py";
  job.spec.command = {"python", "train.py", "--lr", "3e-4"};
  job.spec.cwd = "/home/ada/proj";
  job.spec.env = {{"WANDB_API_KEY", "secret"}};
  job.spec.gpus = 2;
  job.spec.mem_bytes = 20ull << 30;
  job.spec.cpus = 4;
  job.spec.priority = 5;
  job.spec.retries = 3;
  job.spec.user = "ada";
  job.spec.after = {40, 41};
  job.spec.after_any = {39};
  job.spec.time_limit_ms = 9'000'000;
  job.state = JobState::kQueued;
  job.submitted_at = kT0;
  job.reason = "retrying after out of memory in 25s";
  job.attempt = 2;
  job.not_before = kT0 + 30'000;
  job.attempts = {FullAttempt(), FullAttempt()};
  return job;
}

TEST(JobToJsonTest, EveryKeyAndNoEnvironment) {
  json j = JobToJson(FullJob());
  EXPECT_EQ(Keys(j), (std::set<std::string>{"id",
                                            "name",
                                            "state",
                                            "command",
                                            "cwd",
                                            "gpus",
                                            "max_gpus",
                                            "mem_bytes",
                                            "mem_percent",
                                            "exclusive",
                                            "cpus",
                                            "priority",
                                            "retries",
                                            "submitted_held",
                                            "user",
                                            "submitted_at",
                                            "reason",
                                            "attempt",
                                            "not_before",
                                            "held",
                                            "after",
                                            "after_any",
                                            "time_limit_ms",
                                            "nodes",
                                            "exclude_nodes",
                                            "num_nodes",
                                            "max_nodes",
                                            "attempts",
                                            "group",
                                            "group_limit",
                                            "array_index",
                                            "record",
                                            "notify",
                                            "mail",
                                            "slurm",
                                            "gate_pid",
                                            "mem_limit_bytes",
                                            "max_procs",
                                            "gpu_type",
                                            "constraints",
                                            "transfers",
                                            "collect",
                                            "collect_to",
                                            "image",
                                            "mounts",
                                            "shm_size_bytes",
                                            "container_workdir",
                                            "signal",
                                            "requeue",
                                            "preemptible",
                                            "checkpoint",
                                            "interactive",
                                            "no_log"}));
  EXPECT_EQ(j["id"], 42);
  EXPECT_EQ(j["name"], "train.py");
  EXPECT_EQ(j["state"], "queued");
  EXPECT_EQ(j["command"], json({"python", "train.py", "--lr", "3e-4"}));
  EXPECT_EQ(j["cwd"], "/home/ada/proj");
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["mem_bytes"], 20ull << 30);
  EXPECT_TRUE(j["mem_percent"].is_null());
  EXPECT_EQ(j["exclusive"], false);
  EXPECT_EQ(j["cpus"], 4);
  EXPECT_EQ(j["priority"], 5);
  EXPECT_EQ(j["retries"], 3);
  EXPECT_EQ(j["user"], "ada");
  EXPECT_EQ(j["submitted_at"], "2026-11-28T10:00:00.123Z");
  EXPECT_EQ(j["reason"], "retrying after out of memory in 25s");
  EXPECT_EQ(j["attempt"], 2);
  EXPECT_EQ(j["not_before"], "2026-11-28T10:00:30.123Z");
  ASSERT_EQ(j["attempts"].size(), 2u);
  EXPECT_EQ(j["attempts"][1], AttemptToJson(FullAttempt()));
  EXPECT_THAT(j.dump(), Not(HasSubstr("secret")));
}

TEST(JobToJsonTest, ExclusivePercentAndUnsetTimes) {
  Job job = FullJob();
  job.spec.mem_bytes.reset();
  job.not_before = 0;
  job.attempts.clear();
  json j = JobToJson(job);
  EXPECT_EQ(j["exclusive"], true);
  EXPECT_TRUE(j["mem_bytes"].is_null());
  EXPECT_TRUE(j["not_before"].is_null());
  EXPECT_EQ(j["attempts"], json::array());
  job.spec.mem_percent = 40.0;
  j = JobToJson(job);
  EXPECT_EQ(j["exclusive"], false);
  EXPECT_EQ(j["mem_percent"], 40.0);
}

TEST(SpecFromJsonTest, ReadsEveryField) {
  Result<JobSpec> spec = SpecFromJson(Parse(R"({
    "command": ["python", "train.py"], "cwd": "/home/ada/proj", "name": "sweep-1",
    "env": {"B": "2", "A": "1"}, "gpus": 2, "mem": "20GiB", "cpus": 4, "priority": -3,
    "retries": 0, "after": [12, 13], "after_any": [7], "time": "2h30m"})"));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->after, (std::vector<JobId>{12, 13}));
  EXPECT_EQ(spec->after_any, (std::vector<JobId>{7}));
  EXPECT_EQ(spec->time_limit_ms, 9'000'000);
  EXPECT_EQ(spec->command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(spec->cwd, "/home/ada/proj");
  EXPECT_EQ(spec->name, "sweep-1");
  EXPECT_EQ(spec->env, (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(spec->gpus, 2);
  EXPECT_EQ(spec->mem_bytes, 20ull << 30);
  EXPECT_EQ(spec->mem_percent, std::nullopt);
  EXPECT_EQ(spec->cpus, 4);
  EXPECT_EQ(spec->priority, -3);
  EXPECT_EQ(spec->retries, 0);
  EXPECT_EQ(spec->user, "");
}

TEST(SpecFromJsonTest, AbsentKeysKeepDefaults) {
  Result<JobSpec> spec = SpecFromJson(Parse(R"({"command": [], "mem": null})"));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  JobSpec defaults;
  defaults.cpus = 0;  // a GPU job (gpus 1 by default) holds no CPU slot unless it asks
  ExpectSameSpec(*spec, defaults);
  spec = SpecFromJson(Parse(R"({"command": ["x"], "gpus": 0})"));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->cpus, 1) << "a CPU job holds one slot by default";
  spec = SpecFromJson(Parse(R"({"cpus": 2, "command": ["x"], "gpus": 1})"));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->cpus, 2) << "asked for, in any order of the fields";
  spec = SpecFromJson(Parse(R"({"command": ["x"], "mem": "40%"})"));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->mem_percent, 40.0);
  EXPECT_EQ(spec->mem_bytes, std::nullopt);
}

struct BadCase {
  const char* request;
  const char* message;
};

TEST(SpecFromJsonTest, WrongTypesNameTheFieldAndTheType) {
  const BadCase cases[] = {
      {R"({"command": "python train.py"})", "command: expected an array of strings, got string"},
      {R"({"command": ["python", 3]})", "command[1]: expected a string, got number"},
      {R"({"command": null})", "command: expected an array of strings, got null"},
      {R"({"command": [], "cwd": 7})", "cwd: expected a string, got number"},
      {R"({"command": [], "name": ["a"]})", "name: expected a string, got array"},
      {R"({"command": [], "env": ["A=1"]})", "env: expected an object of strings, got array"},
      {R"({"command": [], "env": {"A": 1}})", "env.A: expected a string, got number"},
      {R"({"command": [], "gpus": "2"})", "gpus: expected an integer, got string"},
      {R"({"command": [], "gpus": 1.5})", "gpus: expected an integer, got number 1.5"},
      {R"({"command": [], "gpus": 2.0})", "gpus: expected an integer, got number 2"},
      {R"({"command": [], "gpus": true})", "gpus: expected an integer, got boolean"},
      {R"({"command": [], "cpus": {}})", "cpus: expected an integer, got object"},
      {R"({"command": [], "priority": null})", "priority: expected an integer, got null"},
      {R"({"command": [], "retries": "3"})", "retries: expected an integer, got string"},
      {R"({"command": [], "mem": 20})", "mem: expected a string or null, got number"},
      {R"({"command": [], "mem": "20XB"})", "--mem: '20XB' has an unknown unit"},
      {R"({"command": [], "mem": "0%"})", "--mem: '0%' is not a percentage"},
      {R"({"command": [], "user": "root"})", "user: unknown field; expected command, cwd"},
      {R"({"cwd": "/"})", "command: required"},
      {R"(["python"])", "request: expected an object, got array"},
      {R"("python")", "request: expected an object, got string"},
      {R"(null)", "request: expected an object, got null"},
  };
  for (const BadCase& c : cases) {
    Result<JobSpec> spec = SpecFromJson(Parse(c.request));
    ASSERT_FALSE(spec.ok()) << c.request;
    EXPECT_EQ(spec.status().code(), Code::kInvalid) << c.request;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.message)) << c.request;
  }
}

TEST(SpecFromJsonTest, HugeIntegersAreOutOfRangeNotWrapped) {
  const BadCase cases[] = {
      {R"({"command": [], "gpus": 2147483648})",
       "gpus: 2147483648 is out of range; expected an integer from -2147483648 to 2147483647"},
      {R"({"command": [], "cpus": -2147483649})",
       "cpus: -2147483649 is out of range; expected an integer from -2147483648 to 2147483647"},
      {R"({"command": [], "priority": 18446744073709551615})",
       "priority: 18446744073709551615 is out of range; expected an integer from -2147483648 to "
       "2147483647"},
      {R"({"command": [], "retries": 99999999999999999999})", "retries: expected an integer"},
      {R"({"command": [], "gpus": 1e30})", "gpus: expected an integer, got number"},
  };
  for (const BadCase& c : cases) {
    Result<JobSpec> spec = SpecFromJson(Parse(c.request));
    ASSERT_FALSE(spec.ok()) << c.request;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.message)) << c.request;
  }
  Result<JobSpec> edge =
      SpecFromJson(Parse(R"({"command": [], "gpus": 2147483647, "priority": -2147483648})"));
  ASSERT_TRUE(edge.ok()) << edge.status().message();
  EXPECT_EQ(edge->gpus, INT_MAX);
  EXPECT_EQ(edge->priority, INT_MIN);
}

TEST(SpecFromJsonTest, ReportsEveryProblemAtOnce) {
  Result<JobSpec> spec =
      SpecFromJson(Parse(R"({"gpus": "2", "mem": 5, "bogus": 1, "env": {"A": null}})"));
  ASSERT_FALSE(spec.ok());
  const std::string& m = spec.status().message();
  EXPECT_THAT(m, HasSubstr("command: required"));
  EXPECT_THAT(m, HasSubstr("gpus: expected an integer, got string"));
  EXPECT_THAT(m, HasSubstr("mem: expected a string or null, got number"));
  EXPECT_THAT(m, HasSubstr("bogus: unknown field"));
  EXPECT_THAT(m, HasSubstr("env.A: expected a string, got null"));
  EXPECT_EQ(std::count(m.begin(), m.end(), ';') >= 4, true) << m;
}

TEST(SpecToJsonTest, WireForm) {
  JobSpec spec;
  spec.command = {"python", "train.py"};
  spec.mem_bytes = 20ull << 30;
  spec.user = "ada";
  json j = SpecToJson(spec);
  EXPECT_EQ(Keys(j), (std::set<std::string>{"command", "cwd", "env", "name", "gpus", "mem", "cpus",
                                            "priority", "retries", "after", "after_any", "time"}));
  EXPECT_TRUE(j["time"].is_null());
  EXPECT_EQ(j["after"], json::array());
  EXPECT_EQ(j["mem"], "21474836480B");
  EXPECT_EQ(j["env"], json::object());
  spec.mem_bytes.reset();
  spec.mem_percent = 40.0;
  EXPECT_EQ(SpecToJson(spec)["mem"], "40%");
  spec.mem_percent.reset();
  EXPECT_TRUE(SpecToJson(spec)["mem"].is_null());
}

TEST(SpecToJsonTest, NodeFieldsOnlyWhenSet) {
  JobSpec spec;
  spec.command = {"python"};
  json plain = SpecToJson(spec);
  EXPECT_FALSE(plain.contains("nodes"));
  EXPECT_FALSE(plain.contains("exclude_nodes"));
  EXPECT_FALSE(plain.contains("num_nodes"));
  spec.nodes_allowed = {"a"};
  spec.nodes_excluded = {"b"};
  spec.num_nodes = 3;
  json j = SpecToJson(spec);
  EXPECT_EQ(j["nodes"], json::array({"a"}));
  EXPECT_EQ(j["exclude_nodes"], json::array({"b"}));
  EXPECT_EQ(j["num_nodes"], 3);
  Job job;
  job.spec = spec;
  json shown = JobToJson(job);
  EXPECT_EQ(shown["nodes"], json::array({"a"}));
  EXPECT_EQ(shown["num_nodes"], 3);
}

TEST(SpecFromJsonTest, NodeFieldsOfTheWrongTypeAreNamed) {
  Result<JobSpec> bad = SpecFromJson(
      json{{"command", {"x"}}, {"nodes", "gpu1"}, {"exclude_nodes", {"a", 7}}, {"num_nodes", "2"}});
  ASSERT_FALSE(bad.ok());
  const std::string& m = bad.status().message();
  EXPECT_THAT(m, HasSubstr("nodes: expected an array of node names, got string"));
  EXPECT_THAT(m, HasSubstr("exclude_nodes[1]: expected a node name (string), got number"));
  EXPECT_THAT(m, HasSubstr("num_nodes: expected an integer, got string"));
  Result<JobSpec> none = SpecFromJson(json{{"command", {"x"}}, {"nodes", nullptr}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->nodes_allowed.empty());
}

TEST(SpecToJsonTest, RoundTripsThroughText) {
  JobSpec specs[3];
  specs[0].command = {"torchrun", "--nproc_per_node", "8", "train.py", "--name=résumé"};
  specs[0].cwd = "/data/exp";
  specs[0].env = {{"A", "x=y"}, {"PATH", "/usr/bin"}, {"Z", ""}};  // sorted, as JSON keeps it
  specs[0].name = "big run";
  specs[0].gpus = 8;
  specs[0].mem_bytes = (1ull << 53) + 1;  // not representable as a double
  specs[0].cpus = 32;
  specs[0].priority = -7;
  specs[0].retries = 100;
  specs[0].after = {3, 1, 2};
  specs[0].after_any = {9};
  specs[0].time_limit_ms = 9'000'001;  // not a whole second
  specs[0].mem_limit_bytes = (64ull << 20) + 1;
  specs[0].max_procs = 20;
  specs[1].command = {"python", "eval.py"};
  specs[1].mem_percent = 100.0 / 3;
  specs[1].nodes_allowed = {"gpu1", "gpu2"};
  specs[1].nodes_excluded = {"gpu9"};
  specs[1].num_nodes = 2;
  specs[2].gpus = 0;
  for (const JobSpec& spec : specs) {
    Result<JobSpec> back = SpecFromJson(json::parse(DumpJson(SpecToJson(spec))));
    ASSERT_TRUE(back.ok()) << back.status().message();
    ExpectSameSpec(*back, spec);
  }
}

TEST(JobToJsonTest, DependenciesAndTimeLimit) {
  json j = JobToJson(FullJob());
  EXPECT_EQ(j["after"], json({40, 41}));
  EXPECT_EQ(j["after_any"], json({39}));
  EXPECT_EQ(j["time_limit_ms"], 9'000'000);
  Job plain;
  j = JobToJson(plain);
  EXPECT_EQ(j["after"], json::array());
  EXPECT_TRUE(j["time_limit_ms"].is_null());
  EXPECT_TRUE(j["mem_limit_bytes"].is_null());
  EXPECT_TRUE(j["max_procs"].is_null());
  plain.spec.mem_limit_bytes = 4ull << 30;
  plain.spec.max_procs = 20;
  j = JobToJson(plain);
  EXPECT_EQ(j["mem_limit_bytes"], 4ull << 30);
  EXPECT_EQ(j["max_procs"], 20);
}

TEST(SpecFromJsonTest, HostLimitsAreParsedAndCheckedByType) {
  Result<JobSpec> spec =
      SpecFromJson(Parse(R"({"command": ["x"], "mem_limit": "64MiB", "max_procs": 20})"));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->mem_limit_bytes, 64ull << 20);
  EXPECT_EQ(spec->max_procs, 20);
  spec = SpecFromJson(Parse(R"({"command": ["x"], "mem_limit": null, "max_procs": null})"));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->mem_limit_bytes, 0u);
  EXPECT_EQ(spec->max_procs, 0);
  const std::pair<const char*, const char*> cases[] = {
      {R"({"command": ["x"], "mem_limit": 64})", "mem_limit: expected a size such as"},
      {R"({"command": ["x"], "mem_limit": "lots"})", "--mem-limit"},
      {R"({"command": ["x"], "max_procs": "20"})", "max_procs: expected an integer"},
      {R"({"command": ["x"], "max_procs": 0})", "--max-procs: 0 is not between 1 and 4194304"},
      {R"({"command": ["x"], "max_procs": 99999999999})", "max_procs"},
  };
  for (const auto& [request, message] : cases) {
    Result<JobSpec> bad = SpecFromJson(Parse(request));
    ASSERT_FALSE(bad.ok()) << request;
    EXPECT_THAT(bad.status().message(), HasSubstr(message)) << request;
  }
}

TEST(SpecFromJsonTest, DependenciesAndTimeAreCheckedByType) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"command": ["x"], "after": 12})", "after: expected an array of job ids, got number"},
      {R"({"command": ["x"], "after": ["12"]})",
       "after[0]: expected a job id (integer), got string"},
      {R"({"command": ["x"], "after_any": [1.5]})", "after_any[0]: expected a job id (integer)"},
      {R"({"command": ["x"], "after": [18446744073709551615]})",
       "after[0]: 18446744073709551615 is out of range"},
      {R"({"command": ["x"], "time": 90})", "time: expected a string"},
      {R"({"command": ["x"], "time": "soon"})", "--time: 'soon' is not a time limit"},
      {R"({"command": ["x"], "time": "0m"})", "--time: must be more than zero"},
  };
  for (const auto& [request, message] : cases) {
    Result<JobSpec> spec = SpecFromJson(Parse(request));
    ASSERT_FALSE(spec.ok()) << request;
    EXPECT_THAT(spec.status().message(), HasSubstr(message)) << request;
  }
  Result<JobSpec> spec = SpecFromJson(Parse(R"({"command": ["x"], "time": null, "after": null})"));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->time_limit_ms, 0);
  EXPECT_TRUE(spec->after.empty());
}

TEST(DumpJsonTest, InvalidUtf8DoesNotThrow) {
  JobSpec spec;
  spec.command = {"python", "caf\xe9.py"};  // Latin-1 file name
  std::string text = DumpJson(SpecToJson(spec));
  EXPECT_THAT(text, HasSubstr("caf\xef\xbf\xbd.py"));  // U+FFFD
  EXPECT_EQ(DumpJson(json{{"a", 1}}, 2), "{\n  \"a\": 1\n}");
}

}  // namespace
}  // namespace trainq
