#include "src/core/srun.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SlurmAllocation TwoNodes(std::vector<int> capacity = {1, 1}) {
  SlurmAllocation a;
  a.job_id = "7";
  a.nodes = {"gpu1", "gpu2"};
  a.capacity = std::move(capacity);
  return a;
}

SrunOptions Parse(std::vector<std::string> args) {
  Result<SrunOptions> o = ParseSrun(args);
  EXPECT_TRUE(o.ok()) << o.status().message();
  return o.ok() ? *o : SrunOptions{};
}

TEST(SrunTest, ReadsOptionsUpToTheCommand) {
  SrunOptions o = Parse({"-n", "4", "-N2", "--gpus-per-task=1", "-lK", "--cpus-per-task", "3",
                         "torchrun", "-n", "9", "train.py"});
  EXPECT_EQ(o.ntasks, 4);
  EXPECT_EQ(o.nodes, 2);
  EXPECT_EQ(o.gpus_per_task, 1);
  EXPECT_EQ(o.cpus_per_task, 3);
  EXPECT_TRUE(o.label);
  EXPECT_TRUE(o.kill_on_bad_exit);
  EXPECT_THAT(o.command, ElementsAre("torchrun", "-n", "9", "train.py"));
  EXPECT_FALSE(Parse({"true"}).kill_on_bad_exit);  // Slurm's default: the others run on
  EXPECT_FALSE(Parse({"--kill-on-bad-exit=0", "true"}).kill_on_bad_exit);
  EXPECT_THAT(Parse({"-w", "gpu[1-2]", "true"}).nodelist, ElementsAre("gpu1", "gpu2"));
}

TEST(SrunTest, WarnsOfWhatItCannotHonourAndRefusesWhatItDoesNotKnow) {
  SrunOptions o = Parse({"--mpi=pmix", "--exclusive", "--export=ALL", "--mem", "4G", "true"});
  EXPECT_THAT(o.warnings, ElementsAre(HasSubstr("--mpi=pmix is not honoured"),
                                      HasSubstr("--exclusive is not honoured"),
                                      HasSubstr("--mem=4G is not honoured")));
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {"--bogus", "true"}, {"-n", "zero", "true"}, {"-n"}, {"-l"}, {"--label=1", "true"}}) {
    Result<SrunOptions> r = ParseSrun(bad);
    ASSERT_FALSE(r.ok()) << bad[0];
    EXPECT_EQ(r.status().code(), Code::kInvalid);
    EXPECT_THAT(r.status().message(), HasSubstr("srun: "));
  }
  // pyxis's step containers: refused, saying how trainq runs a job in an image.
  for (const char* pyxis : {"--container-image=nvcr.io/pytorch:24.01", "--container-mounts=/a:/b",
                            "--container-name=tf"}) {
    Result<SrunOptions> r = ParseSrun({pyxis, "python", "train.py"});
    ASSERT_FALSE(r.ok()) << pyxis;
    EXPECT_THAT(r.status().message(), HasSubstr("trainq runs a whole job in one container"));
  }
}

TEST(SrunTest, ReadsTheAllocationFromTheBatchEnvironment) {
  Result<SlurmAllocation> a = AllocationFromEnv({{"SLURM_JOB_ID", "12"},
                                                 {"SLURM_JOB_NODELIST", "n[1-3]"},
                                                 {"SLURM_TASKS_PER_NODE", "2(x2),1"},
                                                 {"SLURM_NTASKS", "5"},
                                                 {"SLURM_GPUS_PER_TASK", "2"},
                                                 {"SLURM_NODEID", "0"}});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_THAT(a->nodes, ElementsAre("n1", "n2", "n3"));
  EXPECT_THAT(a->capacity, ElementsAre(2, 2, 1));
  EXPECT_EQ(a->ntasks, 5);
  EXPECT_EQ(a->gpus_per_task, 2);
  Result<SlurmAllocation> outside = AllocationFromEnv({});
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().message(), HasSubstr("SLURM_JOB_ID is not set"));
  Result<SlurmAllocation> short_counts = AllocationFromEnv(
      {{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "1"}});
  ASSERT_FALSE(short_counts.ok());
  EXPECT_THAT(short_counts.status().message(), HasSubstr("a count for each of the 3 nodes"));
}

TEST(SrunTest, LaysOutTasksInBlocksOrSpreadOverTheNodesAsked) {
  SlurmAllocation a = TwoNodes({2, 2});
  a.ntasks = 4;
  Result<StepLayout> all = LayOutStep(Parse({"true"}), a);  // -n defaults to SLURM_NTASKS
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(all->tasks, ElementsAre(2, 2));
  EXPECT_THAT(all->first, ElementsAre(0, 2));
  Result<StepLayout> two = LayOutStep(Parse({"-n", "2", "true"}), a);  // block: node 0 first
  ASSERT_TRUE(two.ok());
  EXPECT_THAT(two->tasks, ElementsAre(2, 0));
  EXPECT_THAT(two->step_nodes, ElementsAre("gpu1"));
  Result<StepLayout> spread = LayOutStep(Parse({"-N", "2", "-n", "3", "true"}), a);
  ASSERT_TRUE(spread.ok());
  EXPECT_THAT(spread->tasks, ElementsAre(2, 1));
  Result<StepLayout> one = LayOutStep(Parse({"-w", "gpu2", "-n", "1", "true"}), a);
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(one->tasks, ElementsAre(0, 1));
  EXPECT_THAT(one->first, ElementsAre(0, 0));
}

TEST(SrunTest, RefusesAStepTheAllocationCannotHoldInSlurmsWords) {
  SlurmAllocation a = TwoNodes();
  a.ntasks = 2;
  Result<StepLayout> many = LayOutStep(Parse({"-n", "5", "true"}), a);
  ASSERT_FALSE(many.ok());
  EXPECT_THAT(
      many.status().message(),
      HasSubstr("Unable to create step for job 7: More processors requested than permitted"));
  Result<StepLayout> nodes = LayOutStep(Parse({"-N", "3", "-n", "3", "true"}), a);
  ASSERT_FALSE(nodes.ok());
  EXPECT_THAT(nodes.status().message(), HasSubstr("Only allocated 2 nodes asked for 3"));
  // More nodes than tasks: Slurm shrinks the node count and says so.
  Result<StepLayout> shrunk = LayOutStep(Parse({"-N", "3", "true"}), a);
  ASSERT_TRUE(shrunk.ok());
  EXPECT_THAT(shrunk->warnings,
              ElementsAre("can't run 2 processes on 3 nodes, setting nnodes to 2"));
  Result<StepLayout> stranger = LayOutStep(Parse({"-w", "gpu9", "true"}), a);
  ASSERT_FALSE(stranger.ok());
  EXPECT_THAT(stranger.status().message(), HasSubstr("node gpu9 is not in the job's allocation"));
}

TEST(SrunTest, EachTaskGetsItsRanksAndWithGpusPerTaskItsShareOfTheNodesGpus) {
  SlurmAllocation a = TwoNodes({2, 2});
  SrunOptions o = Parse({"-n", "4", "--gpus-per-task", "2", "true"});
  Result<StepLayout> l = LayOutStep(o, a);
  ASSERT_TRUE(l.ok());
  EnvMap base = {{"SLURM_JOB_CPUS_PER_NODE", "2(x2)"}, {"MASTER_ADDR", "10.0.0.1"}};
  EnvMap env = TaskEnv(base, *l, a, 1, 1, 3, {"4", "5", "6", "7"});
  EXPECT_EQ(env["SLURM_PROCID"], "3");
  EXPECT_EQ(env["SLURM_LOCALID"], "1");
  EXPECT_EQ(env["SLURM_NODEID"], "1");
  EXPECT_EQ(env["SLURMD_NODENAME"], "gpu2");
  EXPECT_EQ(env["SLURM_GTIDS"], "2,3");
  EXPECT_EQ(env["SLURM_STEP_ID"], "3");
  EXPECT_EQ(env["SLURM_NTASKS"], "4");
  EXPECT_EQ(env["SLURM_STEP_NODELIST"], "gpu[1-2]");
  EXPECT_EQ(env["SLURM_STEP_TASKS_PER_NODE"], "2(x2)");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "6,7");
  EXPECT_EQ(env["SLURM_STEP_GPUS"], "6,7");
  EXPECT_EQ(env["SLURMD_TRES_BIND"], "gpu:per_task:2");
  EXPECT_EQ(env["SLURM_DISTRIBUTION"], "block");
  EXPECT_EQ(env["SLURM_LAUNCH_NODE_IPADDR"], "10.0.0.1");
  EXPECT_EQ(env["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"], "2(x2)");
  // One task a node: it sees all of its node's GPUs, unbound, as Slurm leaves them.
  SlurmAllocation b = TwoNodes();
  Result<StepLayout> wide = LayOutStep(Parse({"--gpus-per-task=4", "true"}), b);
  ASSERT_TRUE(wide.ok());
  EnvMap one =
      TaskEnv({{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}}, *wide, b, 0, 0, 0, {"0", "1", "2", "3"});
  EXPECT_EQ(one["CUDA_VISIBLE_DEVICES"], "0,1,2,3");
  EXPECT_FALSE(one.contains("SLURMD_TRES_BIND"));
  EXPECT_EQ(one["SLURM_DISTRIBUTION"], "cyclic");
}

TEST(SrunTest, NodeSpecificVariablesAreTheTasksNode) {
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "SLURM_NODEID", "TRAINQ_RUN_DIR",
                           "TRAINQ_NODE_RANK", "PET_NODE_RANK", "HOSTNAME"}) {
    EXPECT_TRUE(NodeSpecificVar(name)) << name;
  }
  for (const char* name : {"TRAINQ_JOB_ID", "PATH", "MASTER_ADDR", "SLURM_JOB_ID", "MST_ADDR"}) {
    EXPECT_FALSE(NodeSpecificVar(name)) << name;
  }
}

}  // namespace
}  // namespace trainq
