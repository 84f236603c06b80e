// Simulated GPUs: the file format, live-process usage files, errors naming their field.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/gpu/gpu_probe.h"
#include "src/os/gpu/gpu_test_util.h"

namespace trainq {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

auto IsProcess(int64_t pid, uint64_t bytes) {
  return AllOf(Field(&GpuProcess::pid, pid), Field(&GpuProcess::used_bytes, bytes));
}

// A child that has exited and been reaped: its pid names no process.
int64_t DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  EXPECT_GT(pid, 0);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return pid;
}

char ProcState(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

class SimulatedProbeTest : public ::testing::Test {
 protected:
  std::string gpus_file() const { return dir_.Path("gpus.json"); }

  void WriteGpus(const std::string& text) { gpu_test::WriteFile(gpus_file(), text); }

  void WriteUsage(const std::string& name, const std::string& text) {
    gpu_test::WriteFile(dir_.Path("usage/" + name), text);
  }

  // One GPU with the given total, others' memory 0.
  void WriteOneGpu(const std::string& extra = "") {
    WriteGpus(R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "80GiB")" + extra + "}]}");
  }

  GpuSnapshot Sample() {
    auto probe = OpenSimulatedProbe(gpus_file());
    EXPECT_TRUE(probe.ok()) << probe.status().ToString();
    if (!probe.ok()) return {};
    auto snapshot = (*probe)->Sample();
    EXPECT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    return snapshot.ok() ? std::move(snapshot).value() : GpuSnapshot{};
  }

  Status OpenError() {
    auto probe = OpenSimulatedProbe(gpus_file());
    EXPECT_FALSE(probe.ok());
    return probe.ok() ? Status::Ok() : probe.status();
  }

  gpu_test::TempDir dir_;
};

TEST_F(SimulatedProbeTest, ParsesEveryForm) {
  WriteGpus(R"({"gpus": [
      {"uuid": "GPU-sim-0", "name": "Simulated A100 80GB", "memory_total": "80GiB",
       "memory_used_by_others": "15GiB", "utilization": 40},
      {"uuid": "GPU-sim-1", "memory_total": 25769803776, "memory_used_by_others": 1073741824},
      {"uuid": "GPU-sim-2", "memory_total": "24G", "memory_used_by_others": "512MiB"},
      {"uuid": "GPU-sim-3", "memory_total": "1024"}]})");
  GpuSnapshot snapshot = Sample();
  EXPECT_EQ(snapshot.source, "simulated");
  ASSERT_EQ(snapshot.gpus.size(), 4u);
  const GpuInfo& a = snapshot.gpus[0];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.uuid, "GPU-sim-0");
  EXPECT_EQ(a.name, "Simulated A100 80GB");
  EXPECT_EQ(a.total_bytes, 80 * kGiB);
  EXPECT_EQ(a.used_bytes, 15 * kGiB);
  EXPECT_EQ(a.free_bytes, 65 * kGiB);
  EXPECT_EQ(a.utilization_pct, 40);
  EXPECT_TRUE(a.processes_known);
  EXPECT_THAT(a.processes, IsEmpty());  // others' memory is not a process
  EXPECT_EQ(snapshot.gpus[1].index, 1);
  EXPECT_EQ(snapshot.gpus[1].total_bytes, 24 * kGiB);
  EXPECT_EQ(snapshot.gpus[1].used_bytes, 1 * kGiB);
  EXPECT_EQ(snapshot.gpus[1].utilization_pct, -1);
  EXPECT_EQ(snapshot.gpus[2].total_bytes, 24 * kGiB);
  EXPECT_EQ(snapshot.gpus[2].used_bytes, kGiB / 2);
  EXPECT_EQ(snapshot.gpus[3].total_bytes, kGiB);  // a bare number is MiB
  EXPECT_EQ(snapshot.gpus[3].used_bytes, 0u);
  EXPECT_EQ(snapshot.gpus[3].name, "Simulated GPU");
}

TEST_F(SimulatedProbeTest, OtherProcessesCountAndAreListed) {
  WriteOneGpu(R"(, "memory_used_by_others": "1GiB",
               "other_processes": [{"pid": 999999, "bytes": "3GiB"}])");
  GpuSnapshot snapshot = Sample();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].used_bytes, 4 * kGiB);
  EXPECT_THAT(snapshot.gpus[0].processes, ElementsAre(IsProcess(999999, 3 * kGiB)));
}

TEST_F(SimulatedProbeTest, UsageOfALivePidCountsByUuidOrIndex) {
  WriteGpus(R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "80GiB"},
                         {"uuid": "GPU-sim-1", "memory_total": "80GiB",
                          "memory_used_by_others": "5GiB"}]})");
  int64_t me = getpid();
  WriteUsage("a.json", fmt::format(R"({{"pid": {}, "gpu": "GPU-sim-0", "bytes": "2GiB"}})", me));
  WriteUsage("b.json", fmt::format(R"({{"pid": {}, "gpu": 1, "bytes": {}}})", me, 3 * kGiB));
  GpuSnapshot snapshot = Sample();
  ASSERT_EQ(snapshot.gpus.size(), 2u);
  EXPECT_EQ(snapshot.gpus[0].used_bytes, 2 * kGiB);
  EXPECT_EQ(snapshot.gpus[0].free_bytes, 78 * kGiB);
  EXPECT_THAT(snapshot.gpus[0].processes, ElementsAre(IsProcess(me, 2 * kGiB)));
  EXPECT_EQ(snapshot.gpus[1].used_bytes, 8 * kGiB);
  EXPECT_THAT(snapshot.gpus[1].processes, ElementsAre(IsProcess(me, 3 * kGiB)));
}

TEST_F(SimulatedProbeTest, UsageOfADeadPidDoesNotCount) {
  WriteOneGpu();
  WriteUsage("dead.json",
             fmt::format(R"({{"pid": {}, "gpu": "GPU-sim-0", "bytes": "2GiB"}})", DeadPid()));
  GpuSnapshot snapshot = Sample();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].used_bytes, 0u);
  EXPECT_THAT(snapshot.gpus[0].processes, IsEmpty());
}

TEST_F(SimulatedProbeTest, UsageOfAZombieDoesNotCount) {
  WriteOneGpu();
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ProcState(child) != 'Z' && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(ProcState(child), 'Z');
  WriteUsage("zombie.json",
             fmt::format(R"({{"pid": {}, "gpu": "GPU-sim-0", "bytes": "2GiB"}})", child));
  GpuSnapshot snapshot = Sample();
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].used_bytes, 0u);
}

TEST_F(SimulatedProbeTest, MalformedOrUnmatchedUsageFilesAreSkipped) {
  WriteOneGpu();
  int64_t me = getpid();
  WriteUsage("half.json", fmt::format(R"({{"pid": {}, "gpu": "GPU-sim-0", "by)", me));
  WriteUsage("badsize.json", fmt::format(R"({{"pid": {}, "gpu": 0, "bytes": "lots"}})", me));
  WriteUsage("nogpu.json", fmt::format(R"({{"pid": {}, "gpu": "GPU-x", "bytes": 5}})", me));
  WriteUsage("good.json", fmt::format(R"({{"pid": {}, "gpu": 0, "bytes": "1GiB"}})", me));
  WriteUsage("ignored.txt", fmt::format(R"({{"pid": {}, "gpu": 0, "bytes": "9GiB"}})", me));
  GpuSnapshot snapshot = Sample();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].used_bytes, kGiB);
  EXPECT_THAT(snapshot.gpus[0].processes, ElementsAre(IsProcess(me, kGiB)));
}

TEST_F(SimulatedProbeTest, UsageDirMayBeRelativeOrAbsolute) {
  int64_t me = getpid();
  WriteGpus(R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "80GiB"}],
                "usage_dir": "jobs/mem"})");
  gpu_test::WriteFile(dir_.Path("jobs/mem/j.json"),
                      fmt::format(R"({{"pid": {}, "gpu": 0, "bytes": "1GiB"}})", me));
  EXPECT_EQ(Sample().gpus.at(0).used_bytes, kGiB);

  gpu_test::TempDir elsewhere;
  gpu_test::WriteFile(elsewhere.Path("k.json"),
                      fmt::format(R"({{"pid": {}, "gpu": 0, "bytes": "4GiB"}})", me));
  WriteGpus(fmt::format(R"({{"gpus": [{{"uuid": "GPU-sim-0", "memory_total": "80GiB"}}],
                             "usage_dir": "{}"}})",
                        elsewhere.path().string()));
  EXPECT_EQ(Sample().gpus.at(0).used_bytes, 4 * kGiB);
}

TEST_F(SimulatedProbeTest, ChangesBetweenSamplesAreSeen) {
  WriteOneGpu(R"(, "memory_used_by_others": "1GiB")");
  auto probe = OpenSimulatedProbe(gpus_file());
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto first = (*probe)->Sample();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->gpus.at(0).used_bytes, kGiB);

  WriteOneGpu(R"(, "memory_used_by_others": "10GiB")");
  WriteUsage("a.json", fmt::format(R"({{"pid": {}, "gpu": 0, "bytes": "2GiB"}})", getpid()));
  auto second = (*probe)->Sample();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->gpus.at(0).used_bytes, 12 * kGiB);

  WriteGpus("{\"gpus\": [");  // broken after open: the sample says so
  auto third = (*probe)->Sample();
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), Code::kInvalid);
}

// Jobs may claim more than the GPU has; the sample, like NVML's, never shows more used than all.
TEST_F(SimulatedProbeTest, UsedIsCappedAtTotal) {
  WriteOneGpu(R"(, "memory_used_by_others": "70GiB")");
  WriteUsage("a.json", fmt::format(R"({{"pid": {}, "gpu": 0, "bytes": "20GiB"}})", getpid()));
  GpuSnapshot snapshot = Sample();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].used_bytes, 80 * kGiB);
  EXPECT_EQ(snapshot.gpus[0].free_bytes, 0u);
  EXPECT_THAT(snapshot.gpus[0].processes, ElementsAre(IsProcess(getpid(), 20 * kGiB)));
}

// docs/simulated-gpus.md allows "0" for the memory of others, as a string or a number.
TEST_F(SimulatedProbeTest, ZeroMemoryOfOthersIsAccepted) {
  WriteGpus(R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "8GiB",
                          "memory_used_by_others": "0"},
                         {"uuid": "GPU-sim-1", "memory_total": "8GiB",
                          "memory_used_by_others": "0GiB"}]})");
  GpuSnapshot snapshot = Sample();
  ASSERT_EQ(snapshot.gpus.size(), 2u);
  EXPECT_EQ(snapshot.gpus[0].used_bytes, 0u);
  EXPECT_EQ(snapshot.gpus[1].free_bytes, 8 * kGiB);
  WriteGpus(R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "0"}]})");
  EXPECT_THAT(OpenError().message(), HasSubstr("must be more than zero"));
}

// The fuzzer's find: others' memory beyond the total was accepted and sampled as used > total.
TEST_F(SimulatedProbeTest, OthersBeyondTheTotalAreRefused) {
  WriteGpus(R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "14GiB",
                          "memory_used_by_others": "15GiB"},
                         {"uuid": "GPU-sim-1", "memory_total": "14GiB",
                          "memory_used_by_others": "10GiB",
                          "other_processes": [{"pid": 999999, "bytes": "5GiB"}]}]})");
  const std::string m = OpenError().message();
  EXPECT_THAT(m, HasSubstr("gpus[0].memory_used_by_others: with other_processes must not exceed"));
  EXPECT_THAT(m, HasSubstr("gpus[1].memory_used_by_others"));
}

TEST_F(SimulatedProbeTest, BadFieldsAreAllNamedWithTheFile) {
  WriteGpus(R"({"gpus": [
      {"uuid": "GPU-sim-0", "memory_total": "lots", "utilization": 140},
      {"memory_total": "8GiB", "memory_used_by_others": -1},
      {"uuid": "GPU-sim-0", "memory_total": "8GiB",
       "other_processes": [{"pid": 0, "bytes": "1GiB"}]}],
      "usage_dir": 7})");
  Status status = OpenError();
  EXPECT_EQ(status.code(), Code::kInvalid);
  const std::string& m = status.message();
  EXPECT_THAT(m, HasSubstr(gpus_file()));
  EXPECT_THAT(m, HasSubstr("gpus[0].memory_total"));
  EXPECT_THAT(m, HasSubstr("gpus[0].utilization"));
  EXPECT_THAT(m, HasSubstr("gpus[1].uuid: is missing"));
  EXPECT_THAT(m, HasSubstr("gpus[1].memory_used_by_others"));
  EXPECT_THAT(m, HasSubstr("gpus[2].uuid: 'GPU-sim-0' is also the uuid of gpus[0]"));
  EXPECT_THAT(m, HasSubstr("gpus[2].other_processes[0].pid"));
  EXPECT_THAT(m, HasSubstr("usage_dir"));
}

TEST_F(SimulatedProbeTest, MissingTotalAndGpusAreNamed) {
  WriteGpus(R"({"gpus": [{"uuid": "GPU-sim-0"}]})");
  EXPECT_THAT(OpenError().message(), HasSubstr("gpus[0].memory_total: is missing"));
  WriteGpus(R"({"gpu": []})");
  EXPECT_THAT(OpenError().message(), HasSubstr("gpus: must be an array"));
}

TEST_F(SimulatedProbeTest, NotJsonIsInvalidNamingTheFile) {
  WriteGpus("gpus: 80GiB");
  Status status = OpenError();
  EXPECT_EQ(status.code(), Code::kInvalid);
  EXPECT_THAT(status.message(), HasSubstr(gpus_file()));
  EXPECT_THAT(status.message(), HasSubstr("not a JSON object"));
}

TEST_F(SimulatedProbeTest, UnreadableFileIsInvalid) {
  Status status = OpenError();  // never written
  EXPECT_EQ(status.code(), Code::kInvalid);
  EXPECT_THAT(status.message(), HasSubstr("cannot read simulated GPU file " + gpus_file()));
}

// Two GPUs for the topology tests, then the given "topology" member.
std::string TwoGpusWith(const std::string& topology) {
  return R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "80GiB"},
                      {"uuid": "GPU-sim-1", "memory_total": "80GiB"},
                      {"uuid": "GPU-sim-2", "memory_total": "80GiB"}], "topology": )" +
         topology + "}";
}

TEST_F(SimulatedProbeTest, TopologyTakesNvidiaSmiNamesAndLevels) {
  WriteGpus(TwoGpusWith(R"([["X", "NV12", "SYS"], [0, "X", 50], ["SYS", "SYS", "X"]])"));
  GpuSnapshot snapshot = Sample();
  EXPECT_THAT(snapshot.topology,
              ElementsAre(ElementsAre(0, 0, 50), ElementsAre(0, 0, 50), ElementsAre(50, 50, 0)));
  WriteGpus(TwoGpusWith(R"([["X", "PIX", "PXB"], ["PIX", "X", "PHB"], ["PXB", "PHB", 0]])"));
  EXPECT_THAT(Sample().topology,
              ElementsAre(ElementsAre(0, 10, 20), ElementsAre(10, 0, 30), ElementsAre(20, 30, 0)));
  WriteGpus(TwoGpusWith(R"([["X", "NODE", 40], ["NODE", "X", "BRD"], [40, "BRD", "X"]])"));
  EXPECT_THAT(Sample().topology,
              ElementsAre(ElementsAre(0, 40, 40), ElementsAre(40, 0, 0), ElementsAre(40, 0, 0)));
}

TEST_F(SimulatedProbeTest, NoTopologyIsUnknown) {
  WriteOneGpu();
  EXPECT_THAT(Sample().topology, IsEmpty());
}

TEST_F(SimulatedProbeTest, BadTopologyNamesEveryField) {
  WriteGpus(TwoGpusWith(R"([["X", "PCI", 35], ["X"], ["SYS", "SYS", "X"]])"));
  std::string m = OpenError().message();
  EXPECT_THAT(m, HasSubstr("topology[0][1]: must be a level: X, NV# (NVLink), BRD, PIX, PXB"));
  EXPECT_THAT(m, HasSubstr("topology[0][2]: must be a level"));
  EXPECT_THAT(m, HasSubstr("topology[1]: must be an array of 3 levels, one per GPU"));

  WriteGpus(TwoGpusWith(R"([["X", "SYS"], ["SYS", "X"]])"));
  EXPECT_THAT(OpenError().message(),
              HasSubstr("topology: must be 3 rows (one per GPU) of 3 levels each"));

  WriteGpus(TwoGpusWith(R"([["PIX", "SYS", "SYS"], ["PIX", "X", "SYS"], ["SYS", "SYS", "X"]])"));
  m = OpenError().message();
  EXPECT_THAT(m, HasSubstr("topology[0][0]: a GPU with itself must be X"));
  EXPECT_THAT(m,
              HasSubstr("topology[1][0]: must equal topology[0][1]: both describe the same pair"));
}

TEST_F(SimulatedProbeTest, DescribeNamesTheFile) {
  WriteOneGpu();
  auto probe = OpenSimulatedProbe(gpus_file());
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ((*probe)->Describe(), "simulated GPUs from " + gpus_file());
}

}  // namespace
}  // namespace trainq
