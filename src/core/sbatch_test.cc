#include "src/core/sbatch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kScript[] = R"(#!/bin/bash
#SBATCH --job-name=resnet
#SBATCH -N 2
#SBATCH --gres=gpu:2
#SBATCH --mem-per-gpu=20G
#SBATCH -t 1-02:00:00
#SBATCH --array=0-15%4
#SBATCH --dependency=afterok:12:13
#SBATCH -o logs/%x-%A_%a.out   # one file per task
#SBATCH --error=logs/%x-%j.err
#SBATCH --cpus-per-task=4
#SBATCH --partition=gpu
# a plain comment

python train.py
#SBATCH --gpus=8
)";

TEST(SbatchTest, ReadsTheOptionsBeforeTheFirstCommand) {
  SbatchOptions o;
  Status st = ReadSbatchScript(kScript, o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(o.job_name, "resnet");
  EXPECT_EQ(o.nodes, 2);
  EXPECT_EQ(o.gpus, 2);  // the --gpus=8 after the first command is not read, as in sbatch
  EXPECT_EQ(o.mem_per_gpu, "20G");
  EXPECT_EQ(o.time_limit_ms, (24 + 2) * 3600 * 1000LL);
  EXPECT_EQ(o.array, "0-15%4");
  EXPECT_THAT(o.after_ok, ElementsAre(12, 13));
  EXPECT_EQ(o.output, "logs/%x-%A_%a.out");
  EXPECT_EQ(o.error, "logs/%x-%j.err");
  EXPECT_EQ(o.cpus_per_task, 4);
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_THAT(o.warnings[0], HasSubstr("#SBATCH line 12: --partition=gpu is not honoured"));
}

TEST(SbatchTest, NamesTheLineAndFormOfABadValue) {
  SbatchOptions o;
  Status st = ReadSbatchScript("#!/bin/sh\n#SBATCH --time=soon\n", o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("#SBATCH line 2: --time 'soon' cannot be read"));
  EXPECT_THAT(st.message(), HasSubstr("D-HH:MM:SS"));
}

TEST(SbatchTest, TrainqLinesGiveWhatTravelsWithTheJobAndNothingElse) {
  SbatchOptions o;
  Status st = ReadSbatchScript(
      "#!/bin/bash\n#SBATCH --gres=gpu:1\n#TRAINQ --stage /data/set:data --collect 'ckpt/*'\n"
      "#TRAINQ --collect-to=/home/ann/results  # where\n#TRAINQ --stage /data/other\n"
      "python train.py\n#TRAINQ --stage /not/read\n",
      o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_THAT(o.stage, ElementsAre("/data/set:data", "/data/other"));
  EXPECT_THAT(o.collect, ElementsAre("ckpt/*"));
  EXPECT_EQ(o.collect_to, "/home/ann/results");
  EXPECT_EQ(o.origin["stage"], "#TRAINQ line 5");
  for (const char* bad : {"#TRAINQ --gpus 2", "#TRAINQ --stage", "#TRAINQ data"}) {
    SbatchOptions other;
    st = ReadSbatchScript(std::string("#!/bin/sh\n") + bad + "\n", other);
    EXPECT_EQ(st.code(), Code::kInvalid) << bad;
    EXPECT_THAT(st.message(), HasSubstr("#TRAINQ line 2")) << bad;
    EXPECT_THAT(st.message(), HasSubstr("--stage SRC[:DST]")) << bad;
  }
}

TEST(SbatchTest, AScriptWithoutAnInterpreterIsRefused) {
  SbatchOptions o;
  Status st = ReadSbatchScript("python train.py\n", o);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("#!"));
}

TEST(SbatchTest, UnknownAndUnhonouredOptionsAreWarnedNeverDropped) {
  SbatchOptions o;
  Status st = ApplySbatchOptions(
      {"--qos=high", "--frobnicate", "-A", "lab", "--exclusive", "--parsable", "-J", "x"},
      "the command line", o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(o.parsable);
  EXPECT_EQ(o.job_name, "x");
  ASSERT_EQ(o.warnings.size(), 4u);
  EXPECT_THAT(o.warnings[0], HasSubstr("--qos=high is not honoured"));
  EXPECT_THAT(o.warnings[1], HasSubstr("--frobnicate is not an option"));
  EXPECT_THAT(o.warnings[2], HasSubstr("-A=lab is not honoured"));
  EXPECT_THAT(o.warnings[3], HasSubstr("--exclusive is not honoured"));
}

// --hold and -H submit the job held, as Slurm's do (scontrol release starts it).
TEST(SbatchTest, HoldSubmitsTheJobHeld) {
  SbatchOptions plain;
  ASSERT_TRUE(ApplySbatchOptions({"--job-name=x"}, "the command line", plain).ok());
  EXPECT_FALSE(plain.hold);
  for (const char* form : {"-H", "--hold"}) {
    SbatchOptions o;
    ASSERT_TRUE(ApplySbatchOptions({form}, "#SBATCH line 2", o).ok());
    EXPECT_TRUE(o.hold) << form;
    EXPECT_TRUE(o.warnings.empty()) << form << ": " << o.warnings[0];
  }
}

TEST(SbatchTest, GresFormsAndDependencies) {
  SbatchOptions o;
  ASSERT_TRUE(ApplySbatchOptions({"--gres=gpu:a100:3", "-d", "afterany:7,afterok:8"}, "x", o).ok());
  EXPECT_EQ(o.gpus, 3);
  EXPECT_THAT(o.after_any, ElementsAre(7));
  EXPECT_THAT(o.after_ok, ElementsAre(8));
  EXPECT_EQ(o.gpu_type, "a100");  // selected, not warned about
  EXPECT_TRUE(o.warnings.empty());
  for (const char* bad :
       {"--gres=gpu:x", "--gres=gpu:a100:1,gpu:v100:1", "--gres=gpu:a/b:1", "--gpus=a100:x",
        "--constraint=ib&a|b", "--constraint=[ib]", "-C=", "--dependency=after:3",
        "--dependency=afterok:1?afterok:2", "-N0", "--cpus-per-task=0", "--nodelist=n[1-3]"}) {
    SbatchOptions b;
    Status st = ApplySbatchOptions({bad}, "x", b);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_THAT(st.message(), HasSubstr("expected")) << bad;
  }
}

// Slurm's ways of naming a GPU type and node features select them: the type as --gpu-type,
// the features as --constraint; a later option replaces an earlier one, as in Slurm.
TEST(SbatchTest, GpuTypesAndConstraintsSelect) {
  SbatchOptions o;
  ASSERT_TRUE(ApplySbatchOptions({"--gpus=h100:4", "-C", "ib&nvlink"}, "x", o).ok());
  EXPECT_EQ(o.gpus_total, 4);
  EXPECT_EQ(o.gpu_type, "h100");
  EXPECT_THAT(o.constraints, ElementsAre("ib", "nvlink"));
  ASSERT_TRUE(ApplySbatchOptions({"--gpus-per-node=2", "--constraint=a100|h100"}, "x", o).ok());
  EXPECT_EQ(o.gpus, 2);
  EXPECT_EQ(o.gpu_type, "");  // the later option asks for any GPU
  EXPECT_THAT(o.constraints, ElementsAre("a100|h100"));
  ASSERT_TRUE(ApplySbatchOptions({"--gres=gpu:rtx_6000:1"}, "x", o).ok());
  EXPECT_EQ(o.gpu_type, "rtx_6000");
  EXPECT_TRUE(o.warnings.empty());
  SbatchOptions bad;
  Status st = ApplySbatchOptions({"--constraint=a*2"}, "#SBATCH line 3", bad);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("#SBATCH line 3: --constraint 'a*2' cannot be read"));
}

TEST(SbatchTest, ShebangWithOneArgument) {
  EXPECT_THAT(ShebangOf("#!/usr/bin/env bash\n"), ElementsAre("/usr/bin/env", "bash"));
  EXPECT_THAT(ShebangOf("#! /bin/sh\r\n"), ElementsAre("/bin/sh"));
  EXPECT_TRUE(ShebangOf("echo\n").empty());
}

TEST(SbatchTest, OutputPatternsBecomeShellWords) {
  EXPECT_EQ(ShellPathOf("logs/%x-%A_%a.out", "it's", "ada"),
            "'logs/it'\\''s-'\"${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}\"'_'"
            "\"${SLURM_ARRAY_TASK_ID:-4294967294}\"'.out'");
  EXPECT_EQ(ShellPathOf("slurm-%j.out", "x", "ada"), "'slurm-'\"${SLURM_JOB_ID}\"'.out'");
  EXPECT_EQ(ShellPathOf("100%%-%u-%q", "x", "ada"), "'100%-ada-%q'");
}

TEST(SbatchTest, TheAllocationOfTasksGpusAndCpusAsSlurmReadsIt) {
  SbatchOptions o;
  Status st = ReadSbatchScript(
      "#!/bin/bash\n#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-task=4 --cpus-per-task=8\n",
      o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(o.origin["cpus-per-task"], "#SBATCH line 2: --cpus-per-task=8");
  Result<SbatchAllocation> a = AllocationOf(o);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->nodes, 2);
  EXPECT_EQ(a->ntasks, 2);
  EXPECT_THAT(a->tasks_per_node, ElementsAre(1, 1));
  EXPECT_EQ(a->gpus_per_node, 4);
  EXPECT_EQ(a->cpus_per_node, 8);
  // --ntasks alone: one node, a CPU a task, --gpus-per-task times the tasks.
  SbatchOptions g2;
  ASSERT_TRUE(
      ReadSbatchScript("#!/bin/sh\n#SBATCH --ntasks=2\n#SBATCH --gpus-per-task=1\n", g2).ok());
  a = AllocationOf(g2);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nodes, 1);
  EXPECT_THAT(a->tasks_per_node, ElementsAre(2));
  EXPECT_EQ(a->gpus_per_node, 2);
  EXPECT_EQ(a->cpus_per_node, 2);
  // --gpus is the job's: split over its nodes.
  SbatchOptions total;
  ASSERT_TRUE(ReadSbatchScript("#!/bin/sh\n#SBATCH -N 2 --gpus=8\n", total).ok());
  a = AllocationOf(total);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gpus_per_node, 4);
  EXPECT_EQ(a->cpus_per_node, 0);  // no task options: trainq's rule, no CPU slot for a GPU job
  // Tasks spread with the extras on the first nodes.
  SbatchOptions uneven;
  ASSERT_TRUE(ReadSbatchScript("#!/bin/sh\n#SBATCH -N 2 -n 3\n", uneven).ok());
  a = AllocationOf(uneven);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a->tasks_per_node, ElementsAre(2, 1));
}

// Slurm's node range: MIN to MAX nodes, decided when the job starts; laid out per node.
TEST(SbatchTest, ANodeRangeIsKeptAndNeedsPerNodeCounts) {
  SbatchOptions o;
  ASSERT_TRUE(ReadSbatchScript("#!/bin/sh\n#SBATCH -N 1-4 --ntasks-per-node=2\n", o).ok());
  EXPECT_EQ(o.nodes, 1);
  EXPECT_EQ(o.max_nodes, 4);
  EXPECT_THAT(o.warnings, IsEmpty());
  Result<SbatchAllocation> a = AllocationOf(o);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->nodes, 1);
  EXPECT_THAT(a->tasks_per_node, ElementsAre(2));
  SbatchOptions same;
  ASSERT_TRUE(ReadSbatchScript("#!/bin/sh\n#SBATCH --nodes=2-2\n", same).ok());
  EXPECT_EQ(same.nodes, 2);
  EXPECT_FALSE(same.max_nodes);  // exactly 2
  for (const char* bad : {"#!/bin/sh\n#SBATCH --nodes=3-2\n", "#!/bin/sh\n#SBATCH --nodes=1-\n",
                          "#!/bin/sh\n#SBATCH --nodes=0-2\n"}) {
    SbatchOptions b;
    Status st = ReadSbatchScript(bad, b);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_THAT(st.message(), HasSubstr("a node count or a range MIN-MAX")) << bad;
  }
  SbatchOptions total;
  ASSERT_TRUE(ReadSbatchScript("#!/bin/sh\n#SBATCH -N 1-2\n#SBATCH --ntasks=4\n", total).ok());
  a = AllocationOf(total);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(),
              HasSubstr("#SBATCH line 2: --nodes=1-2 with #SBATCH line 3: --ntasks=4: a node "
                        "range is laid out per node"));
}

TEST(SbatchTest, OptionsThatDisagreeAreRefusedNamingTheirLines) {
  auto refused = [](std::string_view script) {
    SbatchOptions o;
    Status st = ReadSbatchScript(script, o);
    EXPECT_TRUE(st.ok()) << st.message();
    Result<SbatchAllocation> a = AllocationOf(o);
    EXPECT_FALSE(a.ok());
    return a.ok() ? std::string() : a.status().message();
  };
  EXPECT_THAT(refused("#!/bin/sh\n#SBATCH -N 2\n#SBATCH --gpus=3\n"),
              HasSubstr("#SBATCH line 3: --gpus=3 does not split evenly over the 2 nodes of "
                        "#SBATCH line 2: --nodes=2"));
  EXPECT_THAT(refused("#!/bin/sh\n#SBATCH --gres=gpu:2\n#SBATCH --ntasks=2 --gpus-per-task=2\n"),
              HasSubstr("#SBATCH line 3: --gpus-per-task=2 with 2 task(s) on a node needs 4 GPUs "
                        "there, more than the 2 of #SBATCH line 2: --gres=gpu:2"));
  EXPECT_THAT(refused("#!/bin/sh\n#SBATCH -N 3 -n 2\n"), HasSubstr("fewer tasks"));
  EXPECT_THAT(refused("#!/bin/sh\n#SBATCH -N 1 --ntasks-per-node=2 -n 3\n"),
              HasSubstr("at most 2 tasks"));
}

}  // namespace
}  // namespace trainq
