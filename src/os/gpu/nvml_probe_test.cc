// The real NVML loader against the fake libnvidia-ml.so.1 (tests/fakes/fake_nvml.c).
#include <dlfcn.h>

#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/gpu/gpu_probe.h"
#include "src/os/gpu/gpu_test_util.h"
#include "src/os/gpu/nvml_api.h"

namespace trainq {
namespace {

using gpu_test::FakeNvmlPath;
using gpu_test::ScopedEnv;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kMiB = 1024 * 1024;

auto IsProcess(int64_t pid, uint64_t bytes) {
  return ::testing::AllOf(Field(&GpuProcess::pid, pid), Field(&GpuProcess::used_bytes, bytes));
}

// The fake library held open by the test too, to read its counters after the probe closed
// its own handle.
class FakeLibrary {
 public:
  FakeLibrary() : handle_(dlopen(FakeNvmlPath().c_str(), RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_NE(handle_, nullptr) << dlerror();
  }
  ~FakeLibrary() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  FakeLibrary(const FakeLibrary&) = delete;
  FakeLibrary& operator=(const FakeLibrary&) = delete;

  int Call(const char* counter) const {
    auto fn = reinterpret_cast<int (*)()>(dlsym(handle_, counter));
    EXPECT_NE(fn, nullptr) << counter;
    return fn != nullptr ? fn() : -1;
  }

 private:
  void* handle_;
};

class NvmlProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { gpu_test::ClearFakeNvmlEnv(&env_); }

  // dlsym, except for the names in `hidden`; every name asked for is recorded.
  SymbolLookup Hiding(std::set<std::string> hidden) {
    return [this, hidden](void* handle, const char* name) -> void* {
      asked_.insert(name);
      return hidden.count(name) != 0 ? nullptr : dlsym(handle, name);
    };
  }

  std::unique_ptr<GpuProbe> Open(const std::set<std::string>& hidden = {}) {
    auto probe = OpenNvmlProbeWithLookup(FakeNvmlPath(), Hiding(hidden));
    EXPECT_TRUE(probe.ok()) << probe.status().ToString();
    return probe.ok() ? std::move(probe).value() : nullptr;
  }

  GpuSnapshot SampleWith(const std::set<std::string>& hidden = {}) {
    auto probe = Open(hidden);
    if (probe == nullptr) return {};
    auto snapshot = probe->Sample();
    EXPECT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    return snapshot.ok() ? std::move(snapshot).value() : GpuSnapshot{};
  }

  ScopedEnv env_;
  std::set<std::string> asked_;
};

TEST_F(NvmlProbeTest, AbsentLibraryIsUnavailableWithClearMessage) {
  gpu_test::TempDir dir;
  std::string missing = dir.Path("no-such/libnvidia-ml.so.1");
  auto probe = OpenNvmlProbe(missing);
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), Code::kUnavailable);
  EXPECT_THAT(probe.status().message(), StartsWith("NVML library " + missing + " not found: "));
}

TEST_F(NvmlProbeTest, DescribeNamesDriverAndGpuCount) {
  env_.Set("FAKE_NVML_GPUS", "2");
  auto probe = OpenNvmlProbe(FakeNvmlPath());
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ((*probe)->Describe(), "NVML (driver 535.104.05), 2 GPUs");
}

TEST_F(NvmlProbeTest, SampleReportsEveryGpu) {
  env_.Set("FAKE_NVML_GPUS", "2");
  env_.Set("FAKE_NVML_TOTAL_MIB", "81920,40960");
  env_.Set("FAKE_NVML_USED_MIB", "1024,2048");
  env_.Set("FAKE_NVML_RESERVED_MIB", "512");
  env_.Set("FAKE_NVML_UTIL", "37");
  env_.Set("FAKE_NVML_NAME", "NVIDIA H100 80GB HBM3");
  GpuSnapshot snapshot = SampleWith();
  EXPECT_EQ(snapshot.source, "nvml");
  ASSERT_EQ(snapshot.gpus.size(), 2u);
  const GpuInfo& a = snapshot.gpus[0];
  const GpuInfo& b = snapshot.gpus[1];
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(a.uuid, "GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(b.uuid, "GPU-00000000-0000-0000-0000-000000000001");
  EXPECT_EQ(a.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(a.total_bytes, 81920 * kMiB);
  EXPECT_EQ(a.used_bytes, (1024 + 512) * kMiB);  // the driver's reservation is in use too
  EXPECT_EQ(a.free_bytes, (81920 - 1024 - 512) * kMiB);
  EXPECT_EQ(b.total_bytes, 40960 * kMiB);
  EXPECT_EQ(b.used_bytes, (2048 + 512) * kMiB);
  EXPECT_EQ(b.free_bytes, (40960 - 2048 - 512) * kMiB);
  EXPECT_EQ(a.utilization_pct, 37);
  EXPECT_TRUE(a.processes_known);
  EXPECT_TRUE(a.processes.empty());
}

TEST_F(NvmlProbeTest, MemoryInfoV1FallbackGivesTheSameNumbers) {
  env_.Set("FAKE_NVML_TOTAL_MIB", "81920");
  env_.Set("FAKE_NVML_USED_MIB", "3000");
  env_.Set("FAKE_NVML_RESERVED_MIB", "600");
  GpuSnapshot v2 = SampleWith();
  asked_.clear();
  GpuSnapshot v1 = SampleWith({"nvmlDeviceGetMemoryInfo_v2"});
  EXPECT_TRUE(asked_.count("nvmlDeviceGetMemoryInfo"));
  ASSERT_EQ(v2.gpus.size(), 1u);
  ASSERT_EQ(v1.gpus.size(), 1u);
  EXPECT_EQ(v1.gpus[0].total_bytes, 81920 * kMiB);
  EXPECT_EQ(v1.gpus[0].used_bytes, 3600 * kMiB);
  EXPECT_EQ(v1.gpus[0].total_bytes, v2.gpus[0].total_bytes);
  EXPECT_EQ(v1.gpus[0].used_bytes, v2.gpus[0].used_bytes);
  EXPECT_EQ(v1.gpus[0].free_bytes, v2.gpus[0].free_bytes);
}

// Each version of the process query, newest first, reached by hiding the newer ones.
class NvmlProcessesTest : public NvmlProbeTest,
                          public ::testing::WithParamInterface<std::set<std::string>> {};

TEST_P(NvmlProcessesTest, ListsProcessesThroughTheTwoCallProtocol) {
  env_.Set("FAKE_NVML_GPUS", "2");
  env_.Set("FAKE_NVML_PROCS", "4242:1024,4343:2048,5555:512@1");
  FakeLibrary fake;
  GpuSnapshot snapshot = SampleWith(GetParam());
  ASSERT_EQ(snapshot.gpus.size(), 2u);
  EXPECT_TRUE(snapshot.gpus[0].processes_known);
  EXPECT_THAT(snapshot.gpus[0].processes,
              ElementsAre(IsProcess(4242, 1024 * kMiB), IsProcess(4343, 2048 * kMiB)));
  EXPECT_THAT(snapshot.gpus[1].processes, ElementsAre(IsProcess(5555, 512 * kMiB)));
  // The first call of each GPU asked with room for none.
  EXPECT_EQ(fake.Call("fake_nvml_insufficient_size_answers"), 2);
}

INSTANTIATE_TEST_SUITE_P(
    Versions, NvmlProcessesTest,
    ::testing::Values(std::set<std::string>{},
                      std::set<std::string>{"nvmlDeviceGetComputeRunningProcesses_v3"},
                      std::set<std::string>{"nvmlDeviceGetComputeRunningProcesses_v3",
                                            "nvmlDeviceGetComputeRunningProcesses_v2"}));

TEST_F(NvmlProbeTest, ProcessStartingBetweenTheTwoCallsIsRetried) {
  env_.Set("FAKE_NVML_PROCS", "4242:1024");
  env_.Set("FAKE_NVML_PROCS_LATE", "7777:256");
  FakeLibrary fake;
  GpuSnapshot snapshot = SampleWith();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_THAT(snapshot.gpus[0].processes,
              ElementsAre(IsProcess(4242, 1024 * kMiB), IsProcess(7777, 256 * kMiB)));
  EXPECT_EQ(fake.Call("fake_nvml_insufficient_size_answers"), 2);
}

TEST_F(NvmlProbeTest, ProcessWithUnknownMemoryIsListedButFiguresAreUnknown) {
  env_.Set("FAKE_NVML_PROCS", "4242:1024,4343:na");
  GpuSnapshot snapshot = SampleWith();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_FALSE(snapshot.gpus[0].processes_known);
  EXPECT_THAT(snapshot.gpus[0].processes,
              ElementsAre(IsProcess(4242, 1024 * kMiB), IsProcess(4343, 0)));
}

TEST_F(NvmlProbeTest, MissingOptionalSymbolsMeanUnknownNotError) {
  env_.Set("FAKE_NVML_PROCS", "4242:1024");
  env_.Set("FAKE_NVML_UTIL", "50");
  GpuSnapshot snapshot = SampleWith(
      {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetComputeRunningProcesses_v3",
       "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses"});
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].utilization_pct, -1);
  EXPECT_FALSE(snapshot.gpus[0].processes_known);
  EXPECT_TRUE(snapshot.gpus[0].processes.empty());
}

TEST_F(NvmlProbeTest, UnsupportedUtilizationIsUnknown) {
  env_.Set("FAKE_NVML_UTIL", "na");
  GpuSnapshot snapshot = SampleWith();
  ASSERT_EQ(snapshot.gpus.size(), 1u);
  EXPECT_EQ(snapshot.gpus[0].utilization_pct, -1);
}

TEST_F(NvmlProbeTest, InitErrorIsUnavailableWithNvmlErrorString) {
  env_.Set("FAKE_NVML_INIT_ERROR", "9");
  auto probe = OpenNvmlProbe(FakeNvmlPath());
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), Code::kUnavailable);
  EXPECT_THAT(probe.status().message(), HasSubstr("Driver Not Loaded"));
  EXPECT_THAT(probe.status().message(), HasSubstr("nvmlInit"));
}

TEST_F(NvmlProbeTest, MissingRequiredSymbolIsUnavailableNamingIt) {
  auto probe = OpenNvmlProbeWithLookup(FakeNvmlPath(), Hiding({"nvmlDeviceGetUUID"}));
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), Code::kUnavailable);
  EXPECT_THAT(probe.status().message(), HasSubstr("nvmlDeviceGetUUID"));
}

TEST_F(NvmlProbeTest, EveryMissingRequiredSymbolIsNamedAtOnce) {
  auto probe = OpenNvmlProbeWithLookup(
      FakeNvmlPath(),
      Hiding({"nvmlInit_v2", "nvmlInit", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"}));
  ASSERT_FALSE(probe.ok());
  EXPECT_THAT(probe.status().message(), HasSubstr("nvmlInit_v2 or nvmlInit"));
  EXPECT_THAT(probe.status().message(), HasSubstr("nvmlDeviceGetMemoryInfo"));
}

TEST_F(NvmlProbeTest, OlderEntryPointsAreUsedWhenNewerAreAbsent) {
  env_.Set("FAKE_NVML_GPUS", "3");
  GpuSnapshot snapshot =
      SampleWith({"nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2"});
  EXPECT_EQ(snapshot.gpus.size(), 3u);
  EXPECT_TRUE(asked_.count("nvmlInit"));
  EXPECT_TRUE(asked_.count("nvmlDeviceGetHandleByIndex"));
}

TEST_F(NvmlProbeTest, LostGpuFailsTheSampleWithNvmlErrorString) {
  env_.Set("FAKE_NVML_GPUS", "2");
  env_.Set("FAKE_NVML_LOST_GPU", "1");
  auto probe = Open();
  ASSERT_NE(probe, nullptr);
  auto snapshot = probe->Sample();
  ASSERT_FALSE(snapshot.ok());
  EXPECT_EQ(snapshot.status().code(), Code::kUnavailable);
  EXPECT_THAT(snapshot.status().message(), HasSubstr("GPU is lost"));
}

TEST_F(NvmlProbeTest, DestructorShutsNvmlDown) {
  FakeLibrary fake;
  auto probe = Open();
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(fake.Call("fake_nvml_init_count"), 1);
  probe.reset();
  EXPECT_EQ(fake.Call("fake_nvml_init_count"), 0);
}

TEST_F(NvmlProbeTest, EachProbeHoldsOneInitOfNvml) {
  FakeLibrary fake;
  auto probe = OpenNvmlProbeWithLookup(FakeNvmlPath(), Hiding({}));
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(fake.Call("fake_nvml_init_count"), 1);
  auto second = OpenNvmlProbeWithLookup(FakeNvmlPath(), Hiding({}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(fake.Call("fake_nvml_init_count"), 2);  // NVML counts inits, as the real one
  second = Status::Unavailable("dropped");
  EXPECT_EQ(fake.Call("fake_nvml_init_count"), 1);
}

TEST_F(NvmlProbeTest, TopologyHoldsTheCommonAncestorOfEveryPair) {
  env_.Set("FAKE_NVML_GPUS", "3");
  // GPUs 0 and 1 behind one PCIe switch, GPU 2 on the other socket.
  env_.Set("FAKE_NVML_TOPO", "0,10,50,10,0,50,50,50,0");
  GpuSnapshot snapshot = SampleWith();
  ASSERT_EQ(snapshot.gpus.size(), 3u);
  EXPECT_THAT(snapshot.topology,
              ElementsAre(ElementsAre(0, 10, 50), ElementsAre(10, 0, 50), ElementsAre(50, 50, 0)));
  EXPECT_TRUE(asked_.count("nvmlDeviceGetTopologyCommonAncestor"));
}

TEST_F(NvmlProbeTest, TopologyIsReadOnceWhileTheGpusStayTheSame) {
  env_.Set("FAKE_NVML_GPUS", "4");
  FakeLibrary fake;
  auto probe = Open();
  ASSERT_NE(probe, nullptr);
  for (int i = 0; i < 3; ++i) {
    auto snapshot = probe->Sample();
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    ASSERT_EQ(snapshot->topology.size(), 4u);
    EXPECT_EQ(snapshot->topology[0][3], kTopoSystem);  // the fake's default between two GPUs
    EXPECT_EQ(snapshot->topology[2][2], kTopoInternal);
  }
  EXPECT_EQ(fake.Call("fake_nvml_topology_queries"), 6);  // the 6 pairs of 4 GPUs, once
}

TEST_F(NvmlProbeTest, TopologyIsUnknownWithoutTheSymbol) {
  env_.Set("FAKE_NVML_GPUS", "2");
  GpuSnapshot snapshot = SampleWith({"nvmlDeviceGetTopologyCommonAncestor"});
  EXPECT_EQ(snapshot.gpus.size(), 2u);  // the rest of the sample is whole
  EXPECT_TRUE(snapshot.topology.empty());
}

TEST_F(NvmlProbeTest, TopologyIsUnknownWhenNvmlCannotTell) {
  env_.Set("FAKE_NVML_GPUS", "2");
  env_.Set("FAKE_NVML_TOPO_ERROR", "3");  // NOT_SUPPORTED
  GpuSnapshot unsupported = SampleWith();
  EXPECT_EQ(unsupported.gpus.size(), 2u);
  EXPECT_TRUE(unsupported.topology.empty());
  env_.Unset("FAKE_NVML_TOPO_ERROR");
  env_.Set("FAKE_NVML_TOPO", "0,35,35,0");  // no such level
  EXPECT_TRUE(SampleWith().topology.empty());
}

}  // namespace
}  // namespace trainq
