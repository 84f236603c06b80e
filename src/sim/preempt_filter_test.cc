#include "src/sim/preempt_filter.h"

#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "src/sim/allocation.h"

namespace trainq::sim {
namespace {

constexpr uint64_t kGpuBytes = 80ull << 30;
constexpr UnixMs kNow = 100LL * 3600 * 1000;
constexpr int64_t kMin = 60 * 1000;

// A random full-ish cluster: 3 nodes of 4 GPUs, whole-GPU jobs of 4 users on them, 20 waiting
// jobs of 5 users, random usage, priorities 0-2, and which rules are on.
struct Scenario {
  std::vector<NodeState> nodes;
  std::vector<RunningJob> running;
  std::vector<PendingJob> waiting;
  UsageByUser usage;
  PolicyConfig policy;
  PreemptConfig config;

  explicit Scenario(uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](uint64_t n) { return int64_t(UniformIndex(rng, n)); };
    for (int u = 0; u < 5; ++u) usage[fmt::format("u{}", u)] = double(pick(100));
    JobId next = 1;
    for (int n = 0; n < 3; ++n) {
      NodeState node;
      node.name = fmt::format("n{}", n);
      node.cpu_slots = 64;
      for (int g = 0; g < 4; ++g) node.gpus.push_back({g, "", kGpuBytes, kGpuBytes, 0, {}});
      for (int g = 0; g < 4;) {
        int width = std::min(4 - g, 1 + int(pick(2)));
        if (pick(5) == 0) {  // a free GPU now and then
          ++g;
          continue;
        }
        RunningJob r;
        r.job = next++;
        r.user = fmt::format("u{}", pick(4));
        r.priority = int(pick(3));
        r.preemptible = pick(6) != 0;
        r.started_at = kNow - pick(120) * kMin;
        r.preempted_in_a_row = int(pick(3));
        r.last_preempted_at = kNow - pick(120) * kMin;
        r.stop_ms = 60000;
        r.stopping = pick(10) == 0;
        r.cpus = 1;
        NodeGpus part{node.name, {}};
        for (int k = 0; k < width; ++k, ++g) {
          part.gpu_indices.push_back(g);
          // As the simulator books them: the reservation counts, free memory is not measured.
          node.gpus[size_t(g)].holdings.push_back({r.job, kGpuBytes, 0, true, r.started_at});
        }
        r.parts.push_back(std::move(part));
        node.cpu_slots_used += 1;
        running.push_back(std::move(r));
      }
      nodes.push_back(std::move(node));
    }
    for (int w = 0; w < 20; ++w) {
      PendingJob p;
      p.id = next++;
      p.gpus = 1 + int(pick(4));
      p.cpus = 1;
      p.priority = int(pick(3));
      p.user = fmt::format("u{}", pick(5));
      p.submitted_at = kNow - pick(240) * kMin;
      p.queued_at = p.submitted_at + pick(60) * kMin;
      waiting.push_back(p);
    }
    policy.headroom_bytes = 0;
    policy.aging_ms = 60 * kMin;
    config.for_fair_share = pick(2) == 0;
    config.for_aging = pick(2) == 0;
    config.priority_gap = int(pick(3));
  }
};

std::string Describe(const std::vector<Preemption>& decisions) {
  std::string out;
  for (const Preemption& d : decisions) {
    out += fmt::format("{} <- {} on", d.job, fmt::join(d.victims, ","));
    for (const NodeGpus& part : d.parts)
      out += fmt::format(" {}:{}", part.node, fmt::join(part.gpu_indices, ","));
    out += fmt::format(" at {}; ", d.ready_at);
  }
  return out;
}

TEST(WorthAsking, ChoosePreemptionsDecidesTheSameOnTheShortList) {
  int decided = 0, shortened = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    Scenario s(seed);
    std::vector<const PendingJob*> all;
    for (const PendingJob& p : s.waiting) all.push_back(&p);
    std::vector<const PendingJob*> asked =
        WorthAsking(all, s.nodes, s.running, s.policy, s.config, s.usage, kNow);
    std::vector<Preemption> full =
        ChoosePreemptions(all, s.nodes, s.running, s.policy, s.config, s.usage, kNow);
    std::vector<Preemption> cut =
        ChoosePreemptions(asked, s.nodes, s.running, s.policy, s.config, s.usage, kNow);
    EXPECT_EQ(Describe(full), Describe(cut)) << "seed " << seed;
    decided += full.empty() ? 0 : 1;
    shortened += asked.size() < all.size() ? 1 : 0;
  }
  // The scenarios exercise both: preemptions happen, and the list gets shorter.
  EXPECT_GT(decided, 30);
  EXPECT_GT(shortened, 30);
}

TEST(WorthAsking, NothingWhenNoRunningJobIsACandidate) {
  Scenario s(7);
  for (RunningJob& r : s.running) r.started_at = kNow;  // all younger than min_runtime
  std::vector<const PendingJob*> all;
  for (const PendingJob& p : s.waiting) all.push_back(&p);
  EXPECT_TRUE(WorthAsking(all, s.nodes, s.running, s.policy, s.config, s.usage, kNow).empty());
}

}  // namespace
}  // namespace trainq::sim
