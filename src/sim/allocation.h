// Placement mode: the FGD paper's protocol (Weng et al., ATC'23; docs/scheduling.md).
// No departures; pods arrive one at a time in a seeded shuffled order, the trace inflated to
// `inflate` x the cluster's GPUs by resampling pods uniformly with replacement; a pod that
// fits nowhere fails. Host CPU and memory are enforced; a GPU-sharing pod needs its share of
// one GPU. Reported: the GPU allocation ratio (GPU share allocated / GPUs, %) at the moment
// the arrived GPU demand first reaches each level (a level never reached: the final ratio).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/sim/inputs.h"

namespace trainq::sim {

enum class AllocationPolicy {
  kTrainq,   // Place(), with the trace's pod mix as PolicyConfig::workload
  kBestFit,  // the reference BestFit score, for calibration against the published table
  kRandom,   // a random node that fits, a random GPU there
};

std::optional<AllocationPolicy> ParseAllocationPolicy(std::string_view name);
const char* AllocationPolicyName(AllocationPolicy policy);

inline constexpr std::array<int, 7> kLevels = {50, 80, 90, 100, 110, 120, 130};

struct AllocationOptions {
  AllocationPolicy policy = AllocationPolicy::kTrainq;
  double inflate = 1.3;
  std::vector<uint64_t> seeds = {42};
};

struct SeedRun {
  uint64_t seed = 0;
  int pods = 0;     // arrived, copies included
  int failed = 0;   // fitted nowhere (or the policy chose a place they did not fit)
  int invalid = 0;  // of those: the policy's choice broke a limit the protocol enforces
  std::array<double, kLevels.size()> ratio{};  // %, per level
};

struct AllocationReport {
  std::vector<SeedRun> per_seed;
  std::array<double, kLevels.size()> mean{}, stddev{};  // over seeds (population std)
};

// Rows of `pods` in arrival order for one seed: every row once plus copies drawn uniformly
// with replacement until the next copy would take the total GPU request past
// inflate x capacity, then all shuffled. GPU request = gpus x share, in thousandths.
std::vector<size_t> ArrivalOrder(std::span<const TraceJob> pods, int64_t capacity_milli,
                                 double inflate, uint64_t seed);

AllocationReport RunAllocation(std::span<const TraceJob> pods, std::span<const NodeSpec> nodes,
                               const AllocationOptions& options);

// {"allocation_ratio":{"50":..,..},"std":{..},"policy":..,"seeds":[..],"per_seed":[..],
//  "failed_pods":..} on one line; failed_pods is the mean over seeds.
std::string AllocationJson(const AllocationReport& report, const AllocationOptions& options);

// A uniform integer in [0, n), the same on every standard library (std::uniform_int_distribution
// is not).
uint64_t UniformIndex(std::mt19937_64& rng, uint64_t n);

}  // namespace trainq::sim
