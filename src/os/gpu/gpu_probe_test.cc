// The no-GPU probe and the daemon's choice between simulated, NVML and none.
#include "src/os/gpu/gpu_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/os/gpu/gpu_test_util.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(NoGpuProbeTest, SamplesNoGpus) {
  auto probe = MakeNoGpuProbe();
  auto snapshot = probe->Sample();
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->source, "none");
  EXPECT_TRUE(snapshot->gpus.empty());
}

class ChooseGpuProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_test::ClearFakeNvmlEnv(&env_);
    env_.Set("FAKE_NVML_GPUS", "2");
  }

  gpu_test::ScopedEnv env_;
  gpu_test::TempDir dir_;
};

TEST_F(ChooseGpuProbeTest, FakeFileWinsOverNvml) {
  std::string file = dir_.Path("gpus.json");
  gpu_test::WriteFile(file, R"({"gpus": [{"uuid": "GPU-sim-0", "memory_total": "8GiB"}]})");
  auto choice = ChooseGpuProbe(file, gpu_test::FakeNvmlPath());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->note, "simulated GPUs from " + file);
  auto snapshot = choice->probe->Sample();
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->source, "simulated");
  EXPECT_EQ(snapshot->gpus.size(), 1u);
}

TEST_F(ChooseGpuProbeTest, UnreadableFakeFileIsAnError) {
  auto choice = ChooseGpuProbe(dir_.Path("missing.json"), gpu_test::FakeNvmlPath());
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), Code::kInvalid);
  EXPECT_THAT(choice.status().message(), HasSubstr("missing.json"));
}

TEST_F(ChooseGpuProbeTest, NvmlWhenNoFakeFile) {
  auto choice = ChooseGpuProbe("", gpu_test::FakeNvmlPath());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->note, "NVML (driver 535.104.05), 2 GPUs");
  auto snapshot = choice->probe->Sample();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  EXPECT_EQ(snapshot->source, "nvml");
  EXPECT_EQ(snapshot->gpus.size(), 2u);
}

TEST_F(ChooseGpuProbeTest, NoGpusWhenNvmlIsMissing) {
  std::string missing = dir_.Path("libnvidia-ml.so.1");
  auto choice = ChooseGpuProbe("", missing);
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_THAT(choice->note,
              MatchesRegex("no NVML \\(" + missing + " not found: .+\\): running CPU jobs only"));
  auto snapshot = choice->probe->Sample();
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->source, "none");
}

TEST_F(ChooseGpuProbeTest, NoGpusWhenNvmlInitFails) {
  env_.Set("FAKE_NVML_INIT_ERROR", "9");
  auto choice = ChooseGpuProbe("", gpu_test::FakeNvmlPath());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_THAT(choice->note, HasSubstr("Driver Not Loaded"));
  EXPECT_THAT(choice->note, HasSubstr("running CPU jobs only"));
  auto snapshot = choice->probe->Sample();
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->source, "none");
}

}  // namespace
}  // namespace trainq
