// The GpuSampler on its own, with the fake probe and clock.
#include "src/daemon/gpu_sampler.h"

#include <gtest/gtest.h>

#include "src/os/fake_clock.h"
#include "src/os/gpu/fake_gpu_probe.h"

namespace trainq {
namespace {

constexpr UnixMs kT0 = 1'800'000'000'000;

GpuInfo Gpu(int index, uint64_t free_bytes) {
  GpuInfo g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.total_bytes = 80ull << 30;
  g.free_bytes = free_bytes;
  return g;
}

TEST(GpuSamplerTest, AFailedSampleKeepsTheLastGoodOneAndSaysSoOnce) {
  auto gpus = std::make_shared<GpuSnapshot>();
  auto error = std::make_shared<std::string>();
  FakeClock clock(kT0);
  GpuSampler sampler(ProbeChoice{std::make_unique<FakeGpuProbe>(gpus, error), ""}, clock);
  EXPECT_FALSE(sampler.snapshot().has_value());

  gpus->gpus = {Gpu(0, 80ull << 30)};
  GpuSampler::Outcome first = sampler.Sample();
  EXPECT_TRUE(first.fresh);
  EXPECT_TRUE(first.changed);
  ASSERT_TRUE(sampler.snapshot().has_value());
  EXPECT_EQ(sampler.sampled_at(), kT0);
  EXPECT_FALSE(sampler.Sample().changed);  // the same GPUs

  clock.Advance(1000);
  *error = "NVML: GPU is lost";
  GpuSampler::Outcome failed = sampler.Sample();
  EXPECT_FALSE(failed.fresh);
  EXPECT_TRUE(failed.changed);  // the facts are stale from now on
  EXPECT_EQ(sampler.error(), "NVML: GPU is lost");
  EXPECT_EQ(sampler.snapshot()->gpus.size(), 1u);
  EXPECT_EQ(sampler.sampled_at(), kT0);
  EXPECT_FALSE(sampler.Sample().changed);  // the same error again: no news

  error->clear();
  gpus->gpus[0].free_bytes = 10ull << 30;
  clock.Advance(1000);
  GpuSampler::Outcome back = sampler.Sample();
  EXPECT_TRUE(back.fresh && back.changed);
  EXPECT_EQ(sampler.error(), "");
  EXPECT_EQ(sampler.sampled_at(), kT0 + 2000);
  EXPECT_EQ(sampler.snapshot()->gpus[0].free_bytes, 10ull << 30);
}

}  // namespace
}  // namespace trainq
