// What a container job's attempt runs: the runtime's command line, its environment, and the
// checks of --image and --mount.
#include "src/core/container.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

namespace trainq {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;

JobSpec Spec() {
  JobSpec s;
  s.command = {"python", "train.py", "--lr", "3e-4"};
  s.cwd = "/home/ada/proj";
  s.container.image = "localhost/env:1";
  return s;
}

ContainerHost Host() {
  ContainerHost h;
  h.runtime = "/usr/bin/podman";
  h.runtime_args = {"--runtime", "runc"};
  h.name = "trainq-12-1-abcd";
  return h;
}

// The value after `flag` in `cmd`, each time it appears.
std::vector<std::string> After(const std::vector<std::string>& cmd, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < cmd.size(); ++i) {
    if (cmd[i] == flag) out.push_back(cmd[i + 1]);
  }
  return out;
}

TEST(ContainerRunTest, RunsTheCommandInItsDirectoryOnTheHostNetworkWithAnInit) {
  ContainerRun run = BuildContainerRun(Spec(), {}, {{"PATH", "/usr/bin"}}, Host());
  const std::vector<std::string>& c = run.command;
  ASSERT_GE(c.size(), 8u);
  EXPECT_EQ(c[0], "/usr/bin/podman");
  EXPECT_EQ(c[1], "run");
  EXPECT_THAT(c, Contains("--rm"));
  EXPECT_THAT(c, Contains("--init"));
  EXPECT_THAT(After(c, "--network"), ElementsAre("host"));
  EXPECT_THAT(After(c, "--pull"), ElementsAre("never"));
  EXPECT_THAT(After(c, "--name"), ElementsAre("trainq-12-1-abcd"));
  EXPECT_THAT(After(c, "--volume"), ElementsAre("/home/ada/proj:/home/ada/proj"));
  EXPECT_THAT(After(c, "--workdir"), ElementsAre("/home/ada/proj"));
  EXPECT_THAT(After(c, "--shm-size"), ElementsAre("8589934592b"));
  // The runtime's own options, then the image, then the command as given.
  std::vector<std::string> tail(c.end() - 7, c.end());
  EXPECT_THAT(tail, ElementsAre("--runtime", "runc", "localhost/env:1", "python", "train.py",
                                "--lr", "3e-4"));
  EXPECT_THAT(run.cleanup, ElementsAre("/usr/bin/podman", "rm", "--force", "--ignore", "--time",
                                       "0", "trainq-12-1-abcd"));
}

// A session's container keeps stdin open; where --tty goes (when the client has a terminal)
// is the shim's to fill: the index is right after `run`. A batch job's has neither.
TEST(ContainerRunTest, ASessionKeepsStdinOpenAndSaysWhereTheTtyFlagGoes) {
  JobSpec s = Spec();
  s.interactive = true;
  ContainerRun run = BuildContainerRun(s, {}, {}, Host());
  ASSERT_GE(run.command.size(), 3u);
  EXPECT_EQ(run.command[2], "--interactive");
  EXPECT_EQ(run.tty_flag_at, 2);
  ContainerRun batch = BuildContainerRun(Spec(), {}, {}, Host());
  EXPECT_THAT(batch.command, Not(Contains("--interactive")));
  EXPECT_EQ(batch.tty_flag_at, -1);
}

TEST(ContainerRunTest, MountsShmAndWorkdirAsAsked) {
  JobSpec s = Spec();
  s.container.mounts = {"/data/imagenet:/data:ro", "/scratch:/scratch"};
  s.container.shm_bytes = 1ull << 30;
  s.container.workdir = "/workspace";
  ContainerRun run = BuildContainerRun(s, {}, {}, Host());
  EXPECT_THAT(
      After(run.command, "--volume"),
      ElementsAre("/home/ada/proj:/home/ada/proj", "/data/imagenet:/data:ro", "/scratch:/scratch"));
  EXPECT_THAT(After(run.command, "--workdir"), ElementsAre("/workspace"));
  EXPECT_THAT(After(run.command, "--shm-size"), ElementsAre("1073741824b"));
}

TEST(ContainerRunTest, TheEnvironmentGoesInByNameLessTheHostsOwn) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", "/home/ada/miniconda/bin:/usr/bin"},
      {"HOME", "/home/ada"},
      {"LD_LIBRARY_PATH", "/opt/cuda/lib64"},
      {"TRAINQ_JOB_ID", "12"},
      {"MASTER_PORT", "29500"},
      {"CUDA_VISIBLE_DEVICES", "2,3"},
      {"WANDB_MODE", "offline"}};
  ContainerRun run = BuildContainerRun(Spec(), {"GPU-a", "GPU-b"}, env, Host());
  std::vector<std::string> passed = After(run.command, "--env");
  EXPECT_THAT(passed, Contains("TRAINQ_JOB_ID"));
  EXPECT_THAT(passed, Contains("MASTER_PORT"));
  EXPECT_THAT(passed, Contains("WANDB_MODE"));
  EXPECT_THAT(passed, Contains("CUDA_VISIBLE_DEVICES=0,1"));  // counted from 0 inside
  for (const char* host_only : {"PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"}) {
    EXPECT_THAT(passed, Not(Contains(host_only))) << host_only;
  }
  // No value on the command line: the client's environment holds them (and its PATH).
  EXPECT_THAT(run.env, Contains(Pair("WANDB_MODE", "offline")));
  EXPECT_THAT(run.env, Contains(Pair("PATH", "/home/ada/miniconda/bin:/usr/bin")));
  for (const std::string& word : run.command) EXPECT_THAT(word, Not(HasSubstr("offline")));
}

TEST(ContainerRunTest, GpusByUuidThroughCdiOrTheNvidiaVariableAndNoneForACpuJob) {
  ContainerRun cdi = BuildContainerRun(Spec(), {"GPU-a", "GPU-b"}, {}, Host());
  EXPECT_THAT(After(cdi.command, "--device"),
              ElementsAre("nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"));
  ContainerHost hook = Host();
  hook.cdi_kind = "";
  ContainerRun env = BuildContainerRun(Spec(), {"GPU-a", "GPU-b"}, {}, hook);
  EXPECT_THAT(After(env.command, "--device"), IsEmpty());
  EXPECT_THAT(After(env.command, "--env"), Contains("NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"));
  ContainerRun cpu = BuildContainerRun(Spec(), {}, {}, Host());
  EXPECT_THAT(After(cpu.command, "--device"), IsEmpty());
  EXPECT_THAT(After(cpu.command, "--env"), Contains("NVIDIA_VISIBLE_DEVICES=void"));
  EXPECT_THAT(After(cpu.command, "--env"), Contains("CUDA_VISIBLE_DEVICES="));
}

TEST(GpuProbeTest, RunsNvidiaSmiWithTheJobsGpusAsTheRunGivesThem) {
  std::vector<std::string> probe = BuildGpuProbe("localhost/env:1", {"GPU-a", "GPU-b"}, Host());
  EXPECT_THAT(After(probe, "--device"),
              ElementsAre("nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b"));
  EXPECT_THAT(After(probe, "--name"), ElementsAre("trainq-12-1-abcd-probe"));
  EXPECT_THAT(After(probe, "--entrypoint"), ElementsAre("/usr/bin/nvidia-smi"));
  EXPECT_THAT(After(probe, "--runtime"), ElementsAre("runc"));
  ASSERT_GE(probe.size(), 2u);
  EXPECT_EQ(probe[0], "/usr/bin/podman");
  EXPECT_EQ(probe[probe.size() - 2], "localhost/env:1");
  EXPECT_EQ(probe.back(), "-L");
  ContainerHost hook = Host();
  hook.cdi_kind = "";
  probe = BuildGpuProbe("docker-archive:/x.tar", {"GPU-a"}, hook);
  EXPECT_THAT(After(probe, "--env"), Contains("NVIDIA_VISIBLE_DEVICES=GPU-a"));
  EXPECT_THAT(After(probe, "--device"), IsEmpty());
}

TEST(GpuProbeTest, OnlyExactlyTheJobsGpusInTheirOrderPass) {
  const std::vector<std::string> job = {"GPU-a", "GPU-b"};
  std::string two = "GPU 0: NVIDIA H100 (UUID: GPU-a)\nGPU 1: NVIDIA H100 (UUID: GPU-b)\n";
  GpuProbeVerdict v = JudgeGpuProbe(two, 0, job);
  EXPECT_TRUE(v.ran);
  EXPECT_EQ(v.problem, "");
  v = JudgeGpuProbe(two + "GPU 2: NVIDIA H100 (UUID: GPU-c)\n", 0, job);
  EXPECT_TRUE(v.ran);
  EXPECT_THAT(v.problem, HasSubstr("GPU isolation failed: a container given GPUs GPU-a, GPU-b "
                                   "lists GPU-a, GPU-b, GPU-c (also GPU-c)"));
  v = JudgeGpuProbe("GPU 0: T4 (UUID: GPU-a)\n", 0, job);
  EXPECT_THAT(v.problem, HasSubstr("(not GPU-b)"));
  v = JudgeGpuProbe("GPU 0: T4 (UUID: GPU-b)\nGPU 1: T4 (UUID: GPU-a)\n", 0, job);
  EXPECT_THAT(v.problem, HasSubstr("(in another order)"));
  // A probe that did not list GPUs judges nothing about the node: the reason is its words.
  v = JudgeGpuProbe("Error: setting up CDI devices: unresolvable CDI devices x\n", 126, job);
  EXPECT_FALSE(v.ran);
  EXPECT_EQ(v.problem,
            "GPU isolation check: nvidia-smi -L in a container exited 126 (Error: setting up CDI "
            "devices: unresolvable CDI devices x)");
  v = JudgeGpuProbe("No devices were found\n", 0, job);
  EXPECT_FALSE(v.ran);
  EXPECT_THAT(v.problem, HasSubstr("listed no GPU (No devices were found)"));
}

TEST(ContainerRunTest, AnArchiveIsReadThroughItsTransportAndDockerHasNoIgnore) {
  ContainerHost h = Host();
  h.image_ref = "docker-archive:/srv/env.tar";
  h.podman = false;
  h.runtime = "/usr/bin/docker";
  JobSpec s = Spec();
  s.container.image = "/srv/env.tar";
  ContainerRun run = BuildContainerRun(s, {}, {}, h);
  EXPECT_THAT(run.command, Contains("docker-archive:/srv/env.tar"));
  EXPECT_THAT(run.command, Not(Contains("/srv/env.tar")));
  EXPECT_THAT(run.cleanup, ElementsAre("/usr/bin/docker", "rm", "--force", "trainq-12-1-abcd"));
}

TEST(MountTest, ReadsSrcDstAndReadOnly) {
  Result<Mount> m = ParseMount("/data/x:/data:ro", "--mount");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->src, "/data/x");
  EXPECT_EQ(m->dst, "/data");
  EXPECT_TRUE(m->read_only);
  EXPECT_FALSE(ParseMount("/a:/b:rw", "m")->read_only);
  EXPECT_FALSE(ParseMount("/a:/b", "m")->read_only);
  for (const char* bad :
       {"", "/a", "a:/b", "/a:b", "/a:/b:x", "/a:/b:ro:z", "/a,b:/c", "/a\n:/b"}) {
    Result<Mount> r = ParseMount(bad, "--mount");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--mount: '"));
    EXPECT_THAT(r.status().message(), HasSubstr("SRC:DST"));
  }
}

TEST(ImageTest, NamesAndArchivesAreImagesSpacesAreNot) {
  EXPECT_TRUE(CheckImage("pytorch/pytorch:2.1.0-cuda12.1", "--image").ok());
  EXPECT_TRUE(CheckImage("localhost/env@sha256:abc", "--image").ok());
  EXPECT_TRUE(CheckImage("/srv/images/env.tar", "--image").ok());
  EXPECT_TRUE(IsImageArchive("/srv/images/env.tar"));
  EXPECT_FALSE(IsImageArchive("env:1"));
  for (const char* bad : {"", "a b", "a\tb", "x\n"}) {
    EXPECT_THAT(CheckImage(bad, "--image").message(), HasSubstr("is not an image")) << bad;
  }
}

TEST(ImageNameTest, MatchesAsTheRuntimeNamesImages) {
  EXPECT_TRUE(ImageNameMatches("localhost/env:3", "localhost/env:3"));
  EXPECT_TRUE(ImageNameMatches("env:3", "localhost/env:3"));
  EXPECT_TRUE(ImageNameMatches("ubuntu", "docker.io/library/ubuntu:latest"));
  EXPECT_TRUE(ImageNameMatches("team/env:3", "registry.lab:5000/team/env:3"));
  EXPECT_TRUE(ImageNameMatches("localhost/env:3@sha256:ab", "localhost/env:3"));
  EXPECT_FALSE(ImageNameMatches("env:3", "localhost/env:4"));
  EXPECT_FALSE(ImageNameMatches("env:3", "localhost/other/env:3"));
  EXPECT_FALSE(ImageNameMatches("localhost/env:3", "registry.lab/localhost/env:3"));
  EXPECT_FALSE(ImageNameMatches("myenv:3", "localhost/env:3"));
  EXPECT_FALSE(ImageNameMatches("", "localhost/env:3"));
}

TEST(ContainerTextTest, RoundTripsAndRefusesWhatTrainqDoesNotWrite) {
  EXPECT_EQ(ContainerToText({}), "");
  EXPECT_FALSE(ContainerFromText("").value().on());
  ContainerSpec c{"/srv/env.tar", {"/a:/b:ro"}, 1ull << 30, "/w", {"localhost/env:3"}};
  Result<ContainerSpec> back = ContainerFromText(ContainerToText(c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, c);
  for (const char* bad :
       {"{", "[]", "{\"mounts\":[]}", "{\"image\":\"x\",\"shm\":-1}",
        "{\"image\":\"x\",\"mounts\":[1]}", "{\"image\":\"x\",\"archive_names\":\"y\"}"}) {
    EXPECT_FALSE(ContainerFromText(bad).ok()) << bad;
  }
}

TEST(SimulatedCdiTest, OneKindPerDaemonInTheFormCdiAccepts) {
  std::string a = SimulatedCdiKind("/var/lib/trainq");
  EXPECT_EQ(a, SimulatedCdiKind("/var/lib/trainq"));
  EXPECT_NE(a, SimulatedCdiKind("/tmp/tq-1/state"));
  // vendor/class, the vendor starting with a letter: what --device KIND=NAME resolves.
  EXPECT_TRUE(a.starts_with("sim-") && a.ends_with(".trainq.dev/gpu")) << a;
  EXPECT_EQ(a.size(), std::string("sim-").size() + 12 + std::string(".trainq.dev/gpu").size());
}

TEST(SimulatedCdiTest, EachDeviceMountsItsOwnFileAndNamesItselfAndAllGetNvidiaSmi) {
  std::vector<SimulatedGpu> gpus = {{0, "GPU-sim-0", "Simulated A100"},
                                    {11, "GPU-sim-11", "Two\nlines"}};
  Result<std::string> text = SimulatedCdiSpec("sim-1.trainq.dev/gpu", gpus, "/run/x/sim-1");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  nlohmann::json spec = nlohmann::json::parse(*text);
  EXPECT_EQ(spec["kind"], "sim-1.trainq.dev/gpu");
  ASSERT_EQ(spec["devices"].size(), 2u);
  const nlohmann::json& second = spec["devices"][1];
  EXPECT_EQ(second["name"], "GPU-sim-11");
  EXPECT_EQ(second["containerEdits"]["env"],
            nlohmann::json({"TRAINQ_SIMULATED_GPU_11=GPU-sim-11"}));
  const nlohmann::json& mounts = second["containerEdits"]["mounts"];
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0]["hostPath"], "/run/x/sim-1/0011");
  EXPECT_EQ(mounts[0]["containerPath"], "/run/trainq-gpus/0011");
  EXPECT_EQ(mounts[0]["options"], nlohmann::json({"ro", "bind"}));
  EXPECT_EQ(spec["containerEdits"]["mounts"][0]["hostPath"], "/run/x/sim-1/nvidia-smi");
  EXPECT_EQ(spec["containerEdits"]["mounts"][0]["containerPath"], "/usr/bin/nvidia-smi");
  // The file's name sorts as the host's index does; its text is one line, read by nvidia-smi.
  EXPECT_EQ(SimulatedGpuFileName(gpus[0]), "0000");
  EXPECT_EQ(SimulatedGpuFileText({3, "GPU-sim-3", "A\nB\tC"}), "GPU-sim-3 A B C\n");
  EXPECT_EQ(SimulatedGpuFileText({3, "GPU-sim-3", ""}), "GPU-sim-3 Simulated GPU\n");
  EXPECT_THAT(SimulatedNvidiaSmi(), HasSubstr("(UUID: $uuid)"));
}

TEST(SimulatedCdiTest, RefusesWhatCdiCannotNameSayingWhichField) {
  Result<std::string> bad = SimulatedCdiSpec(
      "k.dev/gpu",
      {{0, "GPU-sim-0", ""}, {1, "GPU sim/1", ""}, {2, "GPU-sim-0", ""}, {3, "-x", ""}},
      "relative/dir");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalid);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("files_dir: 'relative/dir' is not an absolute path"));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("gpus[1].uuid: 'GPU sim/1' cannot name a CDI device"));
  EXPECT_THAT(bad.status().message(), HasSubstr("gpus[2].uuid: 'GPU-sim-0' is given twice"));
  EXPECT_THAT(bad.status().message(), HasSubstr("gpus[3].uuid: '-x'"));
  EXPECT_THAT(bad.status().message(), Not(HasSubstr("gpus[0]")));
}

}  // namespace
}  // namespace trainq
