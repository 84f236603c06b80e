#include "src/core/fragmentation.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace trainq {
namespace {

FragGpu Free(double f) { return {f, f >= 1.0}; }

TEST(NodeFragmentationTest, Table) {
  const WorkloadClass half{1, 0.5, 1.0};
  const WorkloadClass whole{1, 1.0, 1.0};
  const WorkloadClass two_whole{2, 1.0, 1.0};
  const WorkloadClass needs_cpu{1, 0.5, 1.0, 8};
  struct Case {
    const char* what;
    std::vector<FragGpu> gpus;
    FragHost host;
    std::vector<WorkloadClass> workload;
    double frag;
  };
  const FragHost roomy{64, 0, false};
  const Case cases[] = {
      {"GPUs less free than the class needs are fragment",
       {Free(0.3), Free(0.6), Free(1.0)},
       roomy,
       {half},
       0.3},
      {"for whole-GPU classes any used GPU is fragment",
       {Free(0.3), Free(0.9), Free(1.0)},
       roomy,
       {whole},
       1.2},
      {"a class that cannot fit the node sees all free capacity as fragment",
       {Free(0.9), Free(1.0)},
       roomy,
       {two_whole},
       1.9},
      {"nor can it without the CPUs", {Free(0.6), Free(0.2)}, {4, 0, false}, {needs_cpu}, 0.8},
      {"with the CPUs it can", {Free(0.6), Free(0.2)}, {8, 0, false}, {needs_cpu}, 0.2},
      {"nor without the host memory", {Free(0.6)}, {8, 1, true}, {{1, 0.5, 1.0, 0, 2}}, 0.6},
      {"the weighted mean over classes",
       {Free(0.3), Free(1.0)},
       roomy,
       {{1, 0.5, 3.0}, {2, 1.0, 1.0}},
       (3 * 0.3 + 1 * 1.3) / 4},
      {"a full node has no fragment", {Free(0), Free(0)}, roomy, {half, whole}, 0.0},
      {"no workload, no fragment", {Free(0.3)}, roomy, {}, 0.0},
  };
  for (const Case& c : cases) {
    EXPECT_NEAR(NodeFragmentation(c.gpus, c.host, c.workload), c.frag, 1e-12) << c.what;
  }
}

// The incremental what-if agrees with measuring the changed node from scratch.
TEST(FragmentationModelTest, AfterMatchesARecount) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<WorkloadClass> workload = {
      {1, 0.25, 2, 4}, {1, 0.5, 1, 2}, {1, 1.0, 3, 8}, {2, 1.0, 1, 16}, {4, 1.0, 0.5, 32}};
  FragmentationModel model(workload);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<FragGpu> gpus(8);
    for (FragGpu& g : gpus) g = unit(rng) < 0.4 ? Free(1.0) : Free(std::round(unit(rng) * 10) / 10);
    FragHost host{static_cast<int64_t>(unit(rng) * 40), 0, false};
    model.Prepare(gpus, host);
    ASSERT_NEAR(model.Before(), NodeFragmentation(gpus, host, workload), 1e-12);
    size_t a = trial % 8, b = (trial + 3) % 8;
    std::vector<size_t> pos = {a, b};
    std::vector<FragGpu> after = {Free(gpus[a].free / 2), Free(0)};
    after[0].whole_free = false;
    int64_t cpus = trial % 5;
    std::vector<FragGpu> changed = gpus;
    changed[a] = after[0];
    changed[b] = after[1];
    FragHost host_after{host.cpu_free - cpus, 0, false};
    EXPECT_NEAR(model.After(pos, after, cpus, 0), NodeFragmentation(changed, host_after, workload),
                1e-9)
        << "trial " << trial;
  }
}

}  // namespace
}  // namespace trainq
