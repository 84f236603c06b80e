#include "src/core/spec.h"

#include "src/core/duration.h"

#include <functional>
#include <map>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

JobSpec GoodSpec() {
  JobSpec spec;
  spec.name = "train";
  spec.command = {"python", "train.py", "--lr", "3e-4"};
  spec.cwd = "/home/ada/proj";
  spec.env = {{"PATH", "/usr/bin"}, {"WANDB_MODE", "offline"}};
  spec.gpus = 2;
  spec.mem_bytes = 20ull << 30;
  spec.cpus = 4;
  spec.retries = 3;
  return spec;
}

const SpecLimits kLimits{.max_gpus_per_node = 4, .max_cpu_slots = 16, .max_nodes = 1024};
constexpr CwdKind kDir = CwdKind::kDirectory;

TEST(ValidateSpecTest, AcceptsAGoodSpec) {
  EXPECT_THAT(ValidateSpec(GoodSpec(), kLimits, kDir), IsEmpty());
  JobSpec cpu = GoodSpec();
  cpu.gpus = 0;
  cpu.mem_bytes.reset();
  EXPECT_THAT(ValidateSpec(cpu, kLimits, kDir), IsEmpty());
  JobSpec pct = GoodSpec();
  pct.mem_bytes.reset();
  pct.mem_percent = 100.0;
  EXPECT_THAT(ValidateSpec(pct, kLimits, kDir), IsEmpty());
}

// An ask above the largest GPU less the headroom would wait forever: refused, naming the most
// one may ask (trap: --mem 80GiB or 100% on an 80 GiB GPU).
TEST(ValidateSpecTest, AnAskNoGpuCanEverGiveIsRefusedNamingTheMost) {
  SpecLimits limits = kLimits;
  limits.largest_gpu_bytes = 80ull << 30;
  limits.headroom_bytes = 256ull << 20;
  JobSpec whole = GoodSpec();
  whole.mem_bytes = 80ull << 30;
  std::vector<FieldError> errors = ValidateSpec(whole, limits, kDir);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "--mem");
  EXPECT_THAT(errors[0].message, HasSubstr("can never fit"));
  EXPECT_THAT(errors[0].message, HasSubstr("at most 79.8 GiB"));
  JobSpec most = GoodSpec();
  most.mem_bytes = (80ull << 30) - (256ull << 20);
  EXPECT_THAT(ValidateSpec(most, limits, kDir), IsEmpty());
  JobSpec pct = GoodSpec();
  pct.mem_bytes.reset();
  pct.mem_percent = 100.0;
  errors = ValidateSpec(pct, limits, kDir);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message, HasSubstr("100% can never fit"));
  EXPECT_THAT(errors[0].message, HasSubstr("at most 99.6%"));
  pct.mem_percent = 99.6;
  EXPECT_THAT(ValidateSpec(pct, limits, kDir), IsEmpty());
}

struct SpecCase {
  const char* what;
  std::function<void(JobSpec&)> edit;
  const char* field;
  const char* message;  // substring
  SpecLimits limits = kLimits;
  CwdKind cwd = CwdKind::kDirectory;
};

TEST(ValidateSpecTest, NamesTheFieldOfEachProblem) {
  const SpecCase cases[] = {
      {"no command", [](JobSpec& s) { s.command.clear(); }, "command",
       "give the command after --, e.g. trainq submit -- python train.py"},
      {"empty program", [](JobSpec& s) { s.command = {""}; }, "command", "program name is empty"},
      {"NUL in argv", [](JobSpec& s) { s.command[1] = std::string("a\0b", 3); }, "command",
       "argument 1 contains a NUL"},
      {"negative gpus", [](JobSpec& s) { s.gpus = -1; }, "--gpus", "got -1"},
      {"too many gpus", [](JobSpec& s) { s.gpus = 9999; }, "--gpus",
       "asks for 9999 GPUs but the largest node has 4; use --gpus 4 or fewer"},
      {"no gpus here",
       [](JobSpec& s) { s.gpus = 1; },
       "--gpus",
       "this machine has no GPUs; use --gpus 0 to run on CPU",
       {0, 16}},
      {"mem without gpus", [](JobSpec& s) { s.gpus = 0; }, "--mem", "needs GPUs"},
      {"zero mem", [](JobSpec& s) { s.mem_bytes = 0; }, "--mem", "more than zero"},
      {"zero percent",
       [](JobSpec& s) {
         s.mem_bytes.reset();
         s.mem_percent = 0.0;
       },
       "--mem", "0% is not a percentage"},
      {"percent over 100",
       [](JobSpec& s) {
         s.mem_bytes.reset();
         s.mem_percent = 100.5;
       },
       "--mem", "100.5% is not a percentage"},
      {"both mem forms", [](JobSpec& s) { s.mem_percent = 50.0; }, "--mem", "not both"},
      {"zero cpus for a CPU job",
       [](JobSpec& s) {
         s.gpus = 0;
         s.mem_bytes.reset();
         s.cpus = 0;
       },
       "--cpus", "asks for 0 CPU slots; use 1 to 16"},
      {"negative cpus for a GPU job", [](JobSpec& s) { s.cpus = -1; }, "--cpus",
       "asks for -1 CPU slots; use 0 to 16"},
      {"too many cpus", [](JobSpec& s) { s.cpus = 17; }, "--cpus", "use 0 to 16"},
      {"negative retries", [](JobSpec& s) { s.retries = -1; }, "--retries", "-1 is not between"},
      {"too many retries", [](JobSpec& s) { s.retries = 101; }, "--retries", "between 0 and 100"},
      {"relative cwd", [](JobSpec& s) { s.cwd = "proj"; }, "--cwd", "'proj' is not an absolute"},
      {"empty cwd", [](JobSpec& s) { s.cwd = ""; }, "--cwd", "not an absolute path"},
      {"missing cwd", [](JobSpec&) {}, "--cwd", "directory /home/ada/proj does not exist", kLimits,
       CwdKind::kMissing},
      {"cwd is a file", [](JobSpec&) {}, "--cwd", "/home/ada/proj is not a directory", kLimits,
       CwdKind::kNotADirectory},
      {"mem beyond the largest GPU",
       [](JobSpec& s) { s.mem_bytes = 81ull << 30; },
       "--mem",
       "81.0 GiB is more than any GPU here has (the largest has 80.0 GiB)",
       {.max_gpus_per_node = 4, .max_cpu_slots = 16, .largest_gpu_bytes = 80ull << 30}},
      {"an argument execve refuses",
       [](JobSpec& s) { s.command[1] = std::string(kMaxExecString, 'a'); },
       "command",
       "argument 1 is 131072 bytes; one argument may have at most 131071",
       {.max_gpus_per_node = 4, .max_cpu_slots = 16, .arg_max = 2 << 20}},
      {"a variable execve refuses",
       [](JobSpec& s) {
         s.env.push_back({"BIG", std::string(kMaxExecString, 'v')});
       },
       "--env",
       "BIG is 131076 bytes with its value",
       {.max_gpus_per_node = 4, .max_cpu_slots = 16, .arg_max = 2 << 20}},
      {"more than ARG_MAX in all",
       [](JobSpec& s) {
         for (int i = 0; i < 40; ++i)
           s.env.push_back({fmt::format("V{}", i), std::string(60000, 'v')});
       },
       "command",
       "programs here may be given at most",
       {.max_gpus_per_node = 4, .max_cpu_slots = 16, .arg_max = 2 << 20}},
      {"long name", [](JobSpec& s) { s.name = std::string(201, 'x'); }, "--name",
       "201 bytes long; use at most 200"},
      {"newline in name", [](JobSpec& s) { s.name = "a\nb"; }, "--name", "control characters"},
      {"DEL in name", [](JobSpec& s) { s.name = "a\x7f"; }, "--name", "control characters"},
      {"empty env key",
       [](JobSpec& s) {
         s.env.push_back({"", "x"});
       },
       "--env", "empty name"},
      {"= in env key",
       [](JobSpec& s) {
         s.env.push_back({"A=B", "x"});
       },
       "--env", "'A=B' is not a variable name"},
      {"NUL in env key",
       [](JobSpec& s) {
         s.env.push_back({std::string("A\0B", 3), "x"});
       },
       "--env", "is not a variable name"},
      {"NUL in env value",
       [](JobSpec& s) {
         s.env.push_back({"A", std::string("x\0y", 3)});
       },
       "--env", "value of A contains NUL"},
  };
  for (const SpecCase& c : cases) {
    JobSpec spec = GoodSpec();
    c.edit(spec);
    std::vector<FieldError> errors = ValidateSpec(spec, c.limits, c.cwd);
    ASSERT_EQ(errors.size(), 1u) << c.what << ": " << ToStatus(errors).message();
    EXPECT_EQ(errors[0].field, c.field) << c.what;
    EXPECT_THAT(errors[0].message, HasSubstr(c.message)) << c.what;
  }
}

// As Slurm refuses a request no node's configuration can meet: a type no GPU has, a feature no
// node has, more GPUs of a type than one node has, each refused naming what there is.
TEST(ValidateSpecTest, GpuTypesAndFeaturesNoNodeOffersAreRefused) {
  SpecLimits limits = kLimits;
  limits.offers = {{"a", {{"NVIDIA A100-SXM4-80GB", ""}, {"Tesla T4", ""}}, {"ib"}},
                   {"b", {{"NVIDIA A100-SXM4-80GB", ""}, {"NVIDIA A100-SXM4-80GB", ""}}, {}}};
  auto errors = [&limits](const std::function<void(JobSpec&)>& change) {
    JobSpec spec = GoodSpec();
    spec.gpus = 1;
    change(spec);
    std::vector<std::string> out;
    for (const FieldError& e : ValidateSpec(spec, limits, kDir)) {
      out.push_back(e.field + ": " + e.message);
    }
    return out;
  };
  EXPECT_THAT(errors([](JobSpec& s) { s.gpu_type = "a100"; }), IsEmpty());
  EXPECT_THAT(errors([](JobSpec& s) { s.gpu_type = "t4"; }), IsEmpty());
  EXPECT_THAT(errors([](JobSpec& s) { s.constraints = {"ib"}; }), IsEmpty());
  EXPECT_THAT(errors([](JobSpec& s) { s.gpu_type = "h100"; }),
              ElementsAre("--gpu-type: no GPU is of type h100 (a word of its model name, or of "
                          "its node's gpu_type label); GPUs: 3 NVIDIA A100-SXM4-80GB, 1 Tesla T4"));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.gpu_type = "a100";
                s.gpus = 3;
              }),
              ElementsAre("--gpus: asks for 3 A100s on one node but the most one node has is 2; "
                          "use --gpus 2 or fewer"));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.gpu_type = "a100";
                s.gpus = 2;
                s.constraints = {"ib"};
              }),
              ElementsAre("--gpus: asks for 2 A100s on one node but the most one node with its "
                          "--constraint has is 1; use --gpus 1 or fewer"));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.constraints = {"nvlink", "ib|eth"};
              }),
              ElementsAre("--constraint: no node has nvlink and ib|eth (node features, config "
                          "node_features: a: ib; b: none)"));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.constraints = {"ib"};
                s.num_nodes = 2;
              }),
              ElementsAre("--nodes: asks for 2 nodes but only 1 has ib"));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.gpu_type = "t4";
                s.num_nodes = 2;
              }),
              ElementsAre("--nodes: asks for 2 nodes with 1 T4 each, but only 1 has them"));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.gpu_type = "a100";
                s.gpus = 0;
                s.mem_bytes.reset();
              }),
              ElementsAre(HasSubstr("--gpu-type: a CPU job (--gpus 0) uses no GPU")));
  limits.offers.clear();  // not known: not judged
  EXPECT_THAT(errors([](JobSpec& s) { s.gpu_type = "h100"; }), IsEmpty());
}

TEST(ValidateSpecTest, ContainerFieldsAreJudgedNamingTheOption) {
  auto errors = [](const std::function<void(JobSpec&)>& change) {
    JobSpec spec = GoodSpec();
    change(spec);
    std::vector<std::string> out;
    for (const FieldError& e : ValidateSpec(spec, kLimits, kDir)) {
      out.push_back(e.field + ": " + e.message);
    }
    return out;
  };
  EXPECT_THAT(errors([](JobSpec& s) {
                s.container = {"env:1", {"/data:/data:ro"}, 1ull << 30, "/work", {}};
              }),
              IsEmpty());
  EXPECT_THAT(errors([](JobSpec& s) { s.container.mounts = {"/data:/data"}; }),
              ElementsAre(HasSubstr("--image: --mount, --shm-size and --container-workdir")));
  EXPECT_THAT(errors([](JobSpec& s) { s.container.image = "a b"; }),
              ElementsAre(HasSubstr("--image: 'a b' is not an image")));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.container.image = "env";
                s.container.mounts = {"data:/data"};
              }),
              ElementsAre(HasSubstr("--mount: 'data:/data' is not SRC:DST")));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.container.image = "env";
                s.container.workdir = "work";
              }),
              ElementsAre(HasSubstr("--container-workdir: 'work' is not an absolute path")));
  EXPECT_THAT(errors([](JobSpec& s) {
                s.container.image = "env";
                s.cwd = "/home/a:b";
              }),
              ElementsAre(HasSubstr("cwd: '/home/a:b' holds ':'")));
}

TEST(ValidateSpecTest, AcceptsBoundaries) {
  JobSpec spec = GoodSpec();
  spec.gpus = 4;
  spec.cpus = 16;
  spec.retries = 100;
  spec.name = std::string(200, 'x');
  EXPECT_THAT(ValidateSpec(spec, kLimits, kDir), IsEmpty());
  spec.retries = 0;
  spec.name = "résumé-训练";  // UTF-8 is not a control character
  EXPECT_THAT(ValidateSpec(spec, kLimits, kDir), IsEmpty());
}

TEST(ValidateSpecTest, ReportsEveryProblemAtOnce) {
  JobSpec spec = GoodSpec();
  spec.command.clear();
  spec.gpus = 0;
  spec.cwd = "rel";
  std::vector<FieldError> errors = ValidateSpec(spec, kLimits, CwdKind::kMissing);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].field, "command");
  EXPECT_EQ(errors[1].field, "--mem");
  EXPECT_EQ(errors[2].field, "--cwd");
  Status st = ToStatus(errors);
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("command: give the command"));
  EXPECT_THAT(st.message(), HasSubstr("; --mem: is GPU memory and needs GPUs"));
  EXPECT_THAT(st.message(), HasSubstr("; --cwd: 'rel' is not an absolute path"));
}

TEST(CheckMailOwnerTest, TakesOnlyTheSubmittersOwnAddress) {
  const std::vector<std::string> none;
  const std::vector<std::string> lab = {"lab.example.org", "cs.example.org"};
  EXPECT_TRUE(CheckMailOwner("ada", "ada", none).ok());
  EXPECT_TRUE(CheckMailOwner("ada", "ada", lab).ok());
  EXPECT_TRUE(CheckMailOwner("ada@lab.example.org", "ada", lab).ok());
  EXPECT_TRUE(CheckMailOwner("ada@CS.Example.org", "ada", lab).ok());
  EXPECT_FALSE(CheckMailOwner("ada@lab.example.org", "ada", none).ok());
  const char* refused[] = {
      "bob",     "bob@lab.example.org",   "ada@evil.example",
      "ada,bob", "ada@x@lab.example.org", "ada@lab.example.org,eve@evil.example",
      "Ada"};
  for (const char* mail : refused) {
    Status st = CheckMailOwner(mail, "ada", lab);
    EXPECT_EQ(st.code(), Code::kInvalid) << mail;
    EXPECT_THAT(st.message(), HasSubstr(fmt::format("--mail: '{}' is not your address", mail)));
  }
  EXPECT_EQ(CheckMailOwner("eve@evil.example", "ada", lab).message(),
            "--mail: 'eve@evil.example' is not your address; use 'ada' (mailed on this machine) "
            "or 'ada@lab.example.org' or 'ada@cs.example.org'");
  EXPECT_EQ(CheckMailOwner("bob", "ada", none).message(),
            "--mail: 'bob' is not your address; use 'ada' (mailed on this machine); ada@DOMAIN "
            "needs DOMAIN in the daemon's mail_domains option, which names none");
}

TEST(ValidateSpecTest, AMailAddressMayBeAUserNameButNeverAnOption) {
  JobSpec spec = GoodSpec();
  spec.mail = "ada";
  EXPECT_THAT(ValidateSpec(spec, kLimits, kDir), IsEmpty());
  for (const char* bad : {"-oQ/tmp/x", "@host", "ada bob", "ada\nBcc: eve@evil.example"}) {
    spec.mail = bad;
    std::vector<FieldError> errors = ValidateSpec(spec, kLimits, kDir);
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_EQ(errors[0].field, "--mail");
  }
}

TEST(ToStatusTest, OkWhenNoErrorsAndJoinsInOrder) {
  EXPECT_TRUE(ToStatus({}).ok());
  Status st = ToStatus({{"--mem", "bad"}, {"--gpus", "worse"}});
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_EQ(st.message(), "--mem: bad; --gpus: worse");
}

TEST(ParseEnvAssignmentTest, SplitsAtTheFirstEquals) {
  Result<std::pair<std::string, std::string>> kv = ParseEnvAssignment("OPTS=a=b");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "OPTS");
  EXPECT_EQ(kv->second, "a=b");
  kv = ParseEnvAssignment("EMPTY=");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "EMPTY");
  EXPECT_EQ(kv->second, "");
}

TEST(ParseEnvAssignmentTest, RejectsMissingEqualsOrName) {
  Result<std::pair<std::string, std::string>> kv = ParseEnvAssignment("NOEQUALS");
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().code(), Code::kInvalid);
  EXPECT_EQ(kv.status().message(), "--env: 'NOEQUALS' is not K=V; use --env NAME=value");
  kv = ParseEnvAssignment("=value");
  ASSERT_FALSE(kv.ok());
  EXPECT_THAT(kv.status().message(), HasSubstr("--env: '=value' has an empty name"));
}

TEST(BuildAttemptEnvTest, SetsGpuAndJobVariablesOverridingTheJobs) {
  JobSpec spec;
  spec.env = {{"PATH", "/usr/bin"},
              {"CUDA_VISIBLE_DEVICES", "7"},
              {"HOME", "/home/ada"},
              {"TRAINQ_JOB_ID", "999"},
              {"TRAINQ_RUN_DIR", "/elsewhere"}};
  auto env = BuildAttemptEnv(spec, {.job = 42,
                                    .attempt = 2,
                                    .gpu_indices = {3, 1},
                                    .gpu_uuids = {"GPU-aaa", "GPU-bbb"},
                                    .run_dir = "/state/runs/42/2"});
  EXPECT_THAT(env,
              ElementsAre(Pair("PATH", "/usr/bin"), Pair("CUDA_VISIBLE_DEVICES", "3,1"),
                          Pair("HOME", "/home/ada"), Pair("TRAINQ_JOB_ID", "42"),
                          Pair("TRAINQ_RUN_DIR", "/state/runs/42/2"),
                          Pair("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), Pair("TRAINQ_ATTEMPT", "2"),
                          Pair("TRAINQ_RESTART_COUNT", "1"), Pair("TRAINQ_GPUS", "GPU-aaa,GPU-bbb"),
                          Pair("TRAINQ_NUM_GPUS", "2")));
}

TEST(BuildAttemptEnvTest, CpuJobsSeeNoGpusAndLaterEnvEntriesWin) {
  JobSpec spec;
  spec.env = {{"A", "1"}, {"B", "2"}, {"A", "3"}};
  auto env = BuildAttemptEnv(spec, {.job = 1, .attempt = 1, .gpu_indices = {}, .gpu_uuids = {}});
  EXPECT_THAT(env, ElementsAre(Pair("A", "3"), Pair("B", "2"), Pair("CUDA_VISIBLE_DEVICES", ""),
                               Pair("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), Pair("TRAINQ_JOB_ID", "1"),
                               Pair("TRAINQ_ATTEMPT", "1"), Pair("TRAINQ_RESTART_COUNT", "0"),
                               Pair("TRAINQ_GPUS", ""), Pair("TRAINQ_NUM_GPUS", "0")));
}

using Env = std::vector<std::pair<std::string, std::string>>;

std::map<std::string, std::string> AsMap(const Env& env) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : env) {
    EXPECT_TRUE(out.emplace(k, v).second) << k << " set twice";
  }
  return out;
}

TEST(BuildAttemptEnvTest, MultiGpuJobsGetTheDistributedEnvironmentForTorchrun) {
  JobSpec spec;
  spec.gpus = 2;
  // Stale values from the submitting shell (say, inside another torchrun): replaced or gone.
  spec.env = {{"PATH", "/usr/bin"},    {"WORLD_SIZE", "16"},        {"RANK", "3"},
              {"LOCAL_RANK", "3"},     {"LOCAL_WORLD_SIZE", "8"},   {"GROUP_RANK", "1"},
              {"MASTER_PORT", "1234"}, {"PET_NPROC_PER_NODE", "8"}, {"MASTER_ADDR", "10.0.0.9"}};
  auto env = AsMap(BuildAttemptEnv(spec, {.job = 7,
                                          .attempt = 1,
                                          .gpu_indices = {2, 5},
                                          .gpu_uuids = {"GPU-c", "GPU-f"},
                                          .master_port = 29501}));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "2,5");
  EXPECT_EQ(env["TRAINQ_NUM_GPUS"], "2");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29501");
  EXPECT_EQ(env["PET_MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["PET_MASTER_PORT"], "29501");
  EXPECT_EQ(env["PET_NPROC_PER_NODE"], "2");
  EXPECT_EQ(env["PET_NNODES"], "1");
  EXPECT_EQ(env["PATH"], "/usr/bin");
  for (const char* gone : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}) {
    EXPECT_EQ(env.count(gone), 0u) << gone;
  }
}

// Node 1 of a two-node job with 4 GPUs per node: one master (node 0's address and port) for
// all parts, and the ranks torchrun needs to form one job of 8 processes.
TEST(BuildAttemptEnvTest, APartOfAMultiNodeJobGetsItsNodeRankAndNodeZerosMaster) {
  JobSpec spec;
  spec.gpus = 4;
  spec.env = {{"RANK", "3"},          {"LOCAL_RANK", "3"},  {"NODE_RANK", "5"},
              {"PET_NODE_RANK", "5"}, {"WORLD_SIZE", "99"}, {"MASTER_ADDR", "10.9.9.9"},
              {"PET_NNODES", "7"}};
  auto env = AsMap(BuildAttemptEnv(spec, {.job = 7,
                                          .attempt = 2,
                                          .gpu_indices = {0, 1, 2, 3},
                                          .gpu_uuids = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"},
                                          .master_port = 29507,
                                          .node_rank = 1,
                                          .num_nodes = 2,
                                          .master_addr = "10.0.0.7"}));
  const std::pair<const char*, const char*> want[] = {{"TRAINQ_NODE_RANK", "1"},
                                                      {"TRAINQ_NUM_NODES", "2"},
                                                      {"MASTER_ADDR", "10.0.0.7"},
                                                      {"MASTER_PORT", "29507"},
                                                      {"WORLD_SIZE", "8"},
                                                      {"NNODES", "2"},
                                                      {"NODE_RANK", "1"},
                                                      {"PET_NNODES", "2"},
                                                      {"PET_NODE_RANK", "1"},
                                                      {"PET_NPROC_PER_NODE", "4"},
                                                      {"PET_MASTER_ADDR", "10.0.0.7"},
                                                      {"PET_MASTER_PORT", "29507"},
                                                      {"TRAINQ_NUM_GPUS", "4"},
                                                      {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}};
  for (const auto& [key, value] : want) EXPECT_EQ(env[key], value) << key;
  EXPECT_EQ(env.count("RANK"), 0u);  // per worker: torchrun's to set
  EXPECT_EQ(env.count("LOCAL_RANK"), 0u);
}

// One GPU on each of three nodes still needs the master: the ranks are on different nodes.
TEST(BuildAttemptEnvTest, AMultiNodeJobWithOneGpuPerNodeIsDistributed) {
  JobSpec spec;
  spec.gpus = 1;
  auto env = AsMap(BuildAttemptEnv(spec, {.job = 3,
                                          .attempt = 1,
                                          .gpu_indices = {6},
                                          .gpu_uuids = {"GPU-g"},
                                          .master_port = 29600,
                                          .node_rank = 0,
                                          .num_nodes = 3,
                                          .master_addr = "gpu01.lab"}));
  EXPECT_EQ(env["MASTER_ADDR"], "gpu01.lab");
  EXPECT_EQ(env["PET_NODE_RANK"], "0");
  EXPECT_EQ(env["PET_NNODES"], "3");
  EXPECT_EQ(env["PET_NPROC_PER_NODE"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "3");
  EXPECT_EQ(env["TRAINQ_NODE_RANK"], "0");
}

// An elastic gang's parts meet in torchrun's rendezvous, hosted by part 0: no fixed ranks.
TEST(BuildAttemptEnvTest, AnElasticGangsPartsGetTorchrunsRendezvousInsteadOfRanks) {
  JobSpec spec;
  spec.gpus = 2;
  spec.num_nodes = 1;
  spec.max_nodes = 4;
  spec.env = {{"PET_NODE_RANK", "5"}, {"PET_RDZV_CONF", "is_host=true"}};
  AttemptEnvInput in{.job = 9,
                     .attempt = 3,
                     .gpu_indices = {0, 1},
                     .gpu_uuids = {},
                     .master_port = 29610,
                     .node_rank = 0,
                     .num_nodes = 1,
                     .master_addr = "gpu01.lab"};
  auto env = AsMap(BuildAttemptEnv(spec, in));
  const std::pair<const char*, const char*> want[] = {
      {"PET_NNODES", "1:4"},
      {"PET_RDZV_BACKEND", "c10d"},
      {"PET_RDZV_ENDPOINT", "gpu01.lab:29610"},
      {"PET_RDZV_ID", "trainq-9-3"},
      {"PET_RDZV_CONF", "is_host=true,last_call_timeout=5"},
      {"PET_NPROC_PER_NODE", "2"},
      {"TRAINQ_NUM_NODES", "1"},
      {"TRAINQ_MIN_NODES", "1"},
      {"TRAINQ_MAX_NODES", "4"}};
  for (const auto& [key, value] : want) EXPECT_EQ(env[key], value) << key;
  EXPECT_EQ(env.count("PET_NODE_RANK"), 0u);
  // A part added later: the same rendezvous, joined rather than hosted.
  in.node_rank = 2;
  in.num_nodes = 3;
  env = AsMap(BuildAttemptEnv(spec, in));
  EXPECT_EQ(env["PET_RDZV_CONF"], "is_host=false,last_call_timeout=5");
  EXPECT_EQ(env["PET_RDZV_ENDPOINT"], "gpu01.lab:29610");
  EXPECT_EQ(env["TRAINQ_NODE_RANK"], "2");
}

// A batch script's node range is Slurm's: fixed ranks on the nodes it got, its tasks laid out
// per node then.
TEST(BuildAttemptEnvTest, ABatchScriptsNodeRangeGetsTheLayoutOfTheNodesItGot) {
  JobSpec spec;
  spec.gpus = 1;
  spec.num_nodes = 1;
  spec.max_nodes = 3;
  spec.slurm_env = true;
  spec.env = {{"SLURM_NTASKS_PER_NODE", "2"}};
  auto env = AsMap(BuildAttemptEnv(spec, {.job = 4,
                                          .attempt = 1,
                                          .gpu_indices = {0},
                                          .gpu_uuids = {},
                                          .master_port = 29700,
                                          .node_rank = 1,
                                          .num_nodes = 2,
                                          .master_addr = "gpu01",
                                          .node_names = {"gpu01", "gpu02"}}));
  EXPECT_EQ(env["SLURM_NNODES"], "2");
  EXPECT_EQ(env["SLURM_TASKS_PER_NODE"], "2(x2)");
  EXPECT_EQ(env["SLURM_NTASKS"], "4");
  EXPECT_EQ(env["PET_NODE_RANK"], "1");
  EXPECT_EQ(env["PET_NNODES"], "2");
  EXPECT_EQ(env.count("PET_RDZV_BACKEND"), 0u);
}

TEST(BuildAttemptEnvTest, SingleNodeJobsGetNoNodeVariables) {
  JobSpec spec;
  spec.gpus = 2;
  auto env = AsMap(BuildAttemptEnv(
      spec,
      {.job = 7, .attempt = 1, .gpu_indices = {0, 1}, .gpu_uuids = {}, .master_port = 29501}));
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["PET_NNODES"], "1");
  for (const char* absent :
       {"TRAINQ_NODE_RANK", "TRAINQ_NUM_NODES", "NODE_RANK", "NNODES", "PET_NODE_RANK"}) {
    EXPECT_EQ(env.count(absent), 0u) << absent;
  }
}

TEST(BuildAttemptEnvTest, SingleGpuJobsKeepTheirOwnDistributedVariables) {
  JobSpec spec;
  spec.gpus = 1;
  spec.env = {{"MASTER_PORT", "1234"}, {"WORLD_SIZE", "1"}};
  EXPECT_FALSE(NeedsMasterPort(spec));
  auto env = AsMap(BuildAttemptEnv(
      spec,
      {.job = 7, .attempt = 1, .gpu_indices = {4}, .gpu_uuids = {"GPU-e"}, .master_port = 0}));
  EXPECT_EQ(env["TRAINQ_NUM_GPUS"], "1");
  EXPECT_EQ(env["MASTER_PORT"], "1234");
  EXPECT_EQ(env["WORLD_SIZE"], "1");
  EXPECT_EQ(env.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(env.count("PET_NPROC_PER_NODE"), 0u);
  spec.gpus = 2;
  EXPECT_TRUE(NeedsMasterPort(spec));
}

TEST(ParseTimeLimitTest, AcceptsDurationsMinutesAndClockForms) {
  const std::pair<const char*, int64_t> cases[] = {
      {"2h30m", 9'000'000},
      {"90s", 90'000},
      {"1d", 86'400'000},
      {"500ms", 500},
      {"90", 5'400'000},
      {"2:30:00", 9'000'000},
      {"45:30", 2'730'000},
      {"0:00:01", 1000},
      // Slurm's day forms: after the days, the clock starts with hours.
      {"1-12:00:00", 129'600'000},
      {"2-0", 172'800'000},
      {"0-1:30", 5'400'000},
  };
  for (const auto& [text, ms] : cases) {
    Result<int64_t> got = ParseTimeLimit(text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status().message();
    EXPECT_EQ(*got, ms) << text;
  }
}

TEST(ParseTimeLimitTest, RefusesOtherFormsNamingTheOption) {
  for (const char* text : {"",        "0",    "0s",   "0:00", "soon",        "2h30",    "-5",
                           "1:2:3:4", ":30",  "1::2", "2 h",  "10000000000", "1:99:99", "1:60:00",
                           "45:60",   "0:61", "1-",   "a-1",  "1-1:99",      "0-0"}) {
    Result<int64_t> got = ParseTimeLimit(text);
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_THAT(got.status().message(), HasSubstr("--time")) << text;
    EXPECT_EQ(got.status().code(), Code::kInvalid) << text;
  }
}

// Each used to wrap to a negative limit (the range was checked before the unit multiplied).
TEST(ParseTimeLimitTest, RefusesWhatDoesNotFitNamingTheBound) {
  for (const char* text :
       {"9999999999999h", "99999999999999999999d", "36501d", "999999999:00:00", "999999999"}) {
    Result<int64_t> got = ParseTimeLimit(text);
    ASSERT_FALSE(got.ok()) << text << " gave " << *got;
    EXPECT_THAT(got.status().message(), HasSubstr("--time")) << text;
    EXPECT_THAT(got.status().message(), HasSubstr("at most 36500d")) << text;
  }
  Result<int64_t> longest = ParseTimeLimit("36500d");
  ASSERT_TRUE(longest.ok());
  EXPECT_EQ(*longest, kMaxDurationMs);
}

TEST(ValidateSpecTest, DependencyIdsMustBePositiveAndFew) {
  JobSpec spec = GoodSpec();
  spec.after = {12, 0};
  spec.after_any = {-3};
  std::vector<FieldError> errors = ValidateSpec(spec, kLimits, kDir);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "--after");
  EXPECT_THAT(errors[0].message, HasSubstr("0 is not a job id"));
  EXPECT_EQ(errors[1].field, "--after-any");
  spec = GoodSpec();
  spec.after.assign(kMaxDeps + 1, 5);
  errors = ValidateSpec(spec, kLimits, kDir);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message, HasSubstr("at most 1000"));
  spec = GoodSpec();
  spec.after = {1, 2};
  spec.after_any = {3};
  spec.time_limit_ms = 60'000;
  EXPECT_THAT(ValidateSpec(spec, kLimits, kDir), IsEmpty());
}

TEST(ValidateSpecTest, NodeListsAndGangs) {
  JobSpec spec = GoodSpec();
  spec.nodes_allowed = {"gpu1", "gpu-2.lab", "GPU_3"};
  spec.nodes_excluded = {"gpu4"};
  spec.num_nodes = 2;
  EXPECT_THAT(ValidateSpec(spec, kLimits, kDir), IsEmpty());
  spec.nodes_allowed = {std::string(kMaxNodeNameBytes, 'a')};
  spec.num_nodes = 1;
  EXPECT_THAT(ValidateSpec(spec, kLimits, kDir), IsEmpty());
}

TEST(ValidateSpecTest, ElasticGangsNameNodesAndTheAcceptedRange) {
  const SpecLimits cluster{.max_gpus_per_node = 4, .max_cpu_slots = 16, .max_nodes = 8};
  JobSpec spec = GoodSpec();
  spec.gpus = 2;
  spec.num_nodes = 1;
  spec.max_nodes = 4;
  EXPECT_THAT(ValidateSpec(spec, cluster, kDir), IsEmpty());
  auto says = [&](const JobSpec& s, const SpecLimits& limits) {
    std::vector<FieldError> errors = ValidateSpec(s, limits, kDir);
    std::string all;
    for (const FieldError& e : errors) all += e.field + ": " + e.message + "\n";
    return all;
  };
  JobSpec bad = spec;
  bad.max_nodes = 1;
  EXPECT_THAT(says(bad, cluster), HasSubstr("--nodes: 1:1 is not an elastic range"));
  bad = spec;
  bad.max_nodes = 9;
  EXPECT_THAT(says(bad, cluster),
              HasSubstr("--nodes: 1:9: the cluster has 8 nodes; use at most 1:8"));
  const SpecLimits one{.max_gpus_per_node = 4, .max_cpu_slots = 16, .max_nodes = 1};
  EXPECT_THAT(says(spec, one), HasSubstr("this is one machine"));
  bad = spec;
  bad.max_gpus = 4;
  EXPECT_THAT(says(bad, cluster), HasSubstr("--gpus: 2:4 with --nodes 1"));
  bad = spec;
  bad.interactive = true;
  EXPECT_THAT(says(bad, cluster), HasSubstr("--nodes: 1:4: a session runs on one node"));
  JobSpec batch = spec;  // a batch script's range (#SBATCH --nodes=1-4) is Slurm's
  batch.slurm_env = true;
  EXPECT_THAT(ValidateSpec(batch, cluster, kDir), IsEmpty());
}

TEST(ValidateSpecTest, BadNodeListsAndGangsNameTheirField) {
  auto only = [](const JobSpec& spec) {
    std::vector<FieldError> errors = ValidateSpec(spec, kLimits, kDir);
    EXPECT_EQ(errors.size(), 1u);
    return errors.empty() ? FieldError{} : errors[0];
  };
  JobSpec spec = GoodSpec();
  spec.nodes_allowed = {"gpu1", "bad name"};
  FieldError e = only(spec);
  EXPECT_EQ(e.field, "--node");
  EXPECT_THAT(e.message, HasSubstr("'bad name' is not a node name; use NAME[,NAME...]"));
  spec = GoodSpec();
  spec.nodes_excluded = {""};
  EXPECT_EQ(only(spec).field, "--exclude-node");
  spec.nodes_excluded = {std::string(kMaxNodeNameBytes + 1, 'a')};
  EXPECT_EQ(only(spec).field, "--exclude-node");
  spec.nodes_excluded = {"evil\n\x1b[31m"};  // shown with the control bytes replaced
  EXPECT_THAT(only(spec).message, HasSubstr("'evil??[31m'"));
  spec = GoodSpec();
  spec.nodes_allowed = {"a", "b"};
  spec.nodes_excluded = {"b"};
  e = only(spec);
  EXPECT_EQ(e.field, "--exclude-node");
  EXPECT_THAT(e.message, HasSubstr("b is also given with --node"));
  spec = GoodSpec();
  spec.num_nodes = 0;
  EXPECT_EQ(only(spec).message, "0 is not between 1 and 1024");
  spec.num_nodes = kMaxNumNodes + 1;
  EXPECT_EQ(only(spec).field, "--nodes");
  spec.num_nodes = 2;
  spec.gpus = 0;
  spec.mem_bytes.reset();
  EXPECT_THAT(only(spec).message, HasSubstr("give --gpus 1 or more"));
  spec = GoodSpec();
  spec.num_nodes = 3;
  spec.nodes_allowed = {"a", "b"};
  EXPECT_THAT(only(spec).message, HasSubstr("asks for 3 nodes but --node names 2"));
}

// A job over more nodes than there are: one machine says a cluster is needed, a cluster
// how many nodes it has.
TEST(ValidateSpecTest, MoreNodesThanThereAreIsRefused) {
  JobSpec spec = GoodSpec();
  spec.num_nodes = 2;
  SpecLimits one = kLimits;
  one.max_nodes = 1;
  std::vector<FieldError> errors = ValidateSpec(spec, one, kDir);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "--nodes");
  EXPECT_THAT(errors[0].message, HasSubstr("needs a cluster"));
  SpecLimits three = kLimits;
  three.max_nodes = 3;
  spec.num_nodes = 4;
  errors = ValidateSpec(spec, three, kDir);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message, "4 nodes asked; the cluster has 3");
  spec.num_nodes = 3;
  EXPECT_THAT(ValidateSpec(spec, three, kDir), IsEmpty());
}

TEST(DefaultJobNameTest, PrefersTheScriptOverTheInterpreter) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"python", "train.py", "--lr", "3e-4"}, "train.py"},
      {{"torchrun", "--nproc_per_node", "8", "/src/exp/pretrain.py"}, "pretrain.py"},
      {{"bash", "scripts/run.sh"}, "run.sh"},
      {{"/opt/bin/my-trainer", "--epochs", "3"}, "my-trainer"},
      {{"python", "-c", "print(1)"}, "python"},
      {{"python", "--config=x.py"}, "python"},
      {{"./a\nb"}, "a?b"},
      {{}, ""},
  };
  for (const auto& [command, name] : cases) EXPECT_EQ(DefaultJobName(command), name);
}

TEST(DefaultJobNameTest, TruncatesLongNamesOnACharacterBoundary) {
  std::string name = DefaultJobName({std::string(199, 'x') + "é.py"});
  EXPECT_EQ(name, std::string(199, 'x'));  // the 2-byte é would straddle byte 200
  EXPECT_EQ(DefaultJobName({std::string(300, 'y')}), std::string(200, 'y'));
}

SpecLimits HostLimited() {
  SpecLimits limits = kLimits;
  limits.host_limits = true;
  limits.machine_mem_bytes = 16ull << 30;
  limits.max_procs = 4096;
  return limits;
}

TEST(ValidateSpecTest, HostLimitsWithinTheirBoundsAreAccepted) {
  JobSpec spec = GoodSpec();
  spec.mem_limit_bytes = 64ull << 20;
  spec.max_procs = 20;
  EXPECT_THAT(ValidateSpec(spec, HostLimited(), kDir), IsEmpty());
}

TEST(ValidateSpecTest, HostLimitsAreRefusedWhereTheyCannotBeEnforced) {
  JobSpec spec = GoodSpec();
  spec.mem_limit_bytes = 64ull << 20;
  spec.max_procs = 20;
  SpecLimits limits = kLimits;
  limits.host_limits_off = "cgroup v1: mkdir /sys/fs/cgroup/memory/trainq: Permission denied";
  auto errors = ValidateSpec(spec, limits, kDir);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "--mem-limit");
  EXPECT_THAT(errors[0].message, HasSubstr("cannot enforce host limits (cgroup v1: mkdir"));
  EXPECT_EQ(errors[1].field, "--max-procs");
  EXPECT_THAT(errors[1].message, HasSubstr("leave --max-procs out"));
  EXPECT_THAT(ValidateSpec(GoodSpec(), limits, kDir), IsEmpty());  // asking nothing is fine
}

TEST(ValidateSpecTest, HostLimitsAboveTheirBoundsNameTheBound) {
  JobSpec spec = GoodSpec();
  spec.mem_limit_bytes = 32ull << 30;
  spec.max_procs = 5000;
  auto errors = ValidateSpec(spec, HostLimited(), kDir);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].message, "32.0 GiB is more than this machine has (16.0 GiB)");
  EXPECT_EQ(errors[1].message, "5000 is more than config max_procs_per_job allows (4096)");
  SpecLimits bounded = HostLimited();
  bounded.max_mem_limit = 8ull << 30;
  errors = ValidateSpec(spec, bounded, kDir);
  EXPECT_EQ(errors[0].message, "32.0 GiB is more than config max_mem_limit allows (8.0 GiB)");
  spec.max_procs = -1;
  errors = ValidateSpec(spec, bounded, kDir);
  EXPECT_EQ(errors[1].field, "--max-procs");
  EXPECT_EQ(errors[1].message, "-1 is not between 1 and 4194304");
}

TEST(AttemptHostLimitsTest, AskedElseDefaultCappedElseBound) {
  JobSpec spec = GoodSpec();
  HostLimitConfig none;
  EXPECT_EQ(AttemptHostLimits(spec, none).mem_bytes, 0u);
  EXPECT_EQ(AttemptHostLimits(spec, none).max_procs, 0);
  HostLimitConfig config{
      .max_mem = 8ull << 30, .default_mem = 2ull << 30, .max_procs = 32768, .default_procs = 4096};
  EXPECT_EQ(AttemptHostLimits(spec, config).mem_bytes, 2ull << 30);
  EXPECT_EQ(AttemptHostLimits(spec, config).max_procs, 4096);
  spec.mem_limit_bytes = 64ull << 20;
  spec.max_procs = 20;
  EXPECT_EQ(AttemptHostLimits(spec, config).mem_bytes, 64ull << 20);
  EXPECT_EQ(AttemptHostLimits(spec, config).max_procs, 20);
  // No default: every job is still held to the bound.
  JobSpec plain = GoodSpec();
  HostLimitConfig bound_only{.max_mem = 8ull << 30, .max_procs = 1000};
  EXPECT_EQ(AttemptHostLimits(plain, bound_only).mem_bytes, 8ull << 30);
  EXPECT_EQ(AttemptHostLimits(plain, bound_only).max_procs, 1000);
  // A default above the bound is cut to it.
  HostLimitConfig high{.max_procs = 100, .default_procs = 4096};
  EXPECT_EQ(AttemptHostLimits(plain, high).max_procs, 100);
}

}  // namespace
}  // namespace trainq
