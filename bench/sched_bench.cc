// Scheduling-pass benchmarks (`make bench-sched`): the placement policy alone, without
// what the daemon adds per pass (bench/daemon_bench.cc measures that). Timings here, never
// in unit tests.
//  - a pass over 100,000 waiting jobs on 8 nodes x 8 GPUs (target <= 20 ms), with the
//    daemon's incremental order (WaitingQueue) and without aged jobs or with many. The
//    queue has five request shapes, and jobs of a shape that did not fit are not tried
//    again, so the policy evaluates about five jobs: a best case;
//  - the same pass on a mixed queue (1/2/4/8 GPUs, 1-64 GiB and percent shares, 24 users,
//    three priorities): a few hundred shapes, each evaluated until it no longer fits;
//  - a cluster leader's pass: 10,000 mixed jobs on 1,000 nodes x 8 GPUs (target <= 100 ms);
//  - one pod placed on a 1,213-node cluster with thousands of holdings, as the placement
//    simulator calls it (target < 1 ms), best fit and fragmentation-aware (FGD).
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "src/core/placement.h"
#include "src/core/waiting_queue.h"

namespace trainq {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr int64_t kHour = 3600 * 1000;

// `count` nodes x 8 GPUs of 80 GiB, each GPU holding two jobs that leave 8 GiB usable.
std::vector<NodeState> BusyLab(int count = 8) {
  std::vector<NodeState> nodes;
  JobId id = 1'000'000;
  for (int n = 0; n < count; ++n) {
    NodeState node;
    node.name = "node" + std::to_string(n);
    node.cpu_slots = 128;
    for (int g = 0; g < 8; ++g) {
      GpuState gpu{g, "GPU-" + std::to_string(g), 80 * kGiB, 8 * kGiB, 0, {}};
      gpu.holdings.push_back({id++, 36 * kGiB, 36 * kGiB, false, kNow - kHour});
      gpu.holdings.push_back({id++, 36 * kGiB, 36 * kGiB, false, kNow - kHour});
      node.gpus.push_back(std::move(gpu));
    }
    node.cpu_slots_used = 16;
    nodes.push_back(std::move(node));
  }
  return nodes;
}

// Many waiting jobs of five shapes from a few users; `aged_every`: one in that many waited
// past the aging limit (0: none).
WaitingQueue LongQueue(int jobs, int aged_every) {
  WaitingQueue q;
  std::mt19937 rng(42);
  const char* users[] = {"ann", "bob", "cy", "dee", "eve", "fay"};
  for (JobId id = 1; id <= jobs; ++id) {
    PendingJob j;
    j.id = id;
    j.user = users[rng() % 6];
    j.priority = rng() % 10 == 0 ? 1 : 0;
    j.submitted_at = kNow - 10'000 + id / 100;
    if (aged_every > 0 && id % aged_every == 0) j.submitted_at = kNow - 3 * kHour;
    switch (rng() % 5) {
      case 0:
        j.mem_bytes = 10 * kGiB;
        break;
      case 1:
        j.mem_bytes = 20 * kGiB;
        break;
      case 2:
        j.mem_percent = 50;
        break;
      case 3:
        j.gpus = 2;
        break;  // exclusive
      default:
        j.gpus = 1;
        break;
    }
    q.emplace(id, j);
  }
  return q;
}

// Many waiting jobs of many shapes from 24 users with unequal fair-share standing.
WaitingQueue MixedQueue(int jobs, int aged_every) {
  WaitingQueue q;
  std::mt19937 rng(42);
  for (JobId id = 1; id <= jobs; ++id) {
    PendingJob j;
    j.id = id;
    j.user = "user" + std::to_string(rng() % 24);
    int p = static_cast<int>(rng() % 20);
    j.priority = p == 0 ? 10 : (p == 1 ? -10 : 0);
    j.submitted_at = kNow - 10'000 + id / 100;
    if (aged_every > 0 && id % aged_every == 0) j.submitted_at = kNow - 3 * kHour;
    int roll = static_cast<int>(rng() % 100);
    if (roll < 60) {
      j.mem_bytes = (1 + rng() % 64) * kGiB;
    } else if (roll < 70) {
      j.mem_percent = static_cast<int>(10 * (1 + rng() % 9));
    } else if (roll < 82) {
      j.gpus = 1;  // whole GPU
    } else if (roll < 92) {
      j.gpus = 2;
      if (rng() % 2) j.mem_bytes = (8 + rng() % 32) * kGiB;
    } else if (roll < 97) {
      j.gpus = 4;
    } else {
      j.gpus = 8;
    }
    q.emplace(id, j);
  }
  return q;
}

UsageByUser MixedUsage() {
  UsageByUser usage;
  for (int u = 0; u < 24; ++u) usage["user" + std::to_string(u)] = u * 1.5;
  return usage;
}

void RunPasses(benchmark::State& state, const WaitingQueue& queue, const UsageByUser& usage,
               int node_count = 8) {
  std::vector<NodeState> nodes = BusyLab(node_count);
  PolicyConfig config;
  std::vector<Hold> holds;
  size_t reasons = 0;
  size_t texts = 0;
  size_t starts = 0;
  for (auto _ : state) {
    std::vector<const PendingJob*> order = queue.Ordered(usage);
    PlacementResult r = PlaceOrdered(order, nodes, config, kNow, holds);
    holds = r.holds;
    reasons = r.waiting.size();
    texts = r.reason_texts.size();
    starts = r.starts.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["waiting"] = static_cast<double>(reasons);
  state.counters["texts"] = static_cast<double>(texts);
  state.counters["starts"] = static_cast<double>(starts);
  state.counters["holds"] = static_cast<double>(holds.size());
}

void SchedulingPass(benchmark::State& state, int aged_every) {
  UsageByUser usage = {{"ann", 30}, {"bob", 2}, {"cy", 7}, {"dee", 7}, {"eve", 0.5}};
  RunPasses(state, LongQueue(static_cast<int>(state.range(0)), aged_every), usage);
}

void MixedPass(benchmark::State& state, int aged_every) {
  RunPasses(state, MixedQueue(static_cast<int>(state.range(0)), aged_every), MixedUsage());
}

void BM_PassOver100kWaitingOn64Gpus(benchmark::State& state) { SchedulingPass(state, 0); }
void BM_PassOver100kWaitingOn64GpusManyAged(benchmark::State& state) { SchedulingPass(state, 7); }
BENCHMARK(BM_PassOver100kWaitingOn64Gpus)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PassOver100kWaitingOn64GpusManyAged)->Arg(100'000)->Unit(benchmark::kMillisecond);

void BM_MixedPassOn64Gpus(benchmark::State& state) { MixedPass(state, 0); }
void BM_MixedPassOn64GpusManyAged(benchmark::State& state) { MixedPass(state, 7); }
BENCHMARK(BM_MixedPassOn64Gpus)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MixedPassOn64GpusManyAged)->Arg(100'000)->Unit(benchmark::kMillisecond);

// A cluster's leader (docs/cluster.md): one pass over 1,000 nodes x 8 GPUs, every GPU busy,
// with 10,000 mixed jobs waiting (target <= 100 ms). The policy alone: reading the nodes'
// records and the active attempts from Redis is measured by bench/cluster.py.
void BM_LeaderPassOn1000NodesX8Gpus(benchmark::State& state) {
  RunPasses(state, MixedQueue(static_cast<int>(state.range(0)), 0), MixedUsage(), 1000);
}
BENCHMARK(BM_LeaderPassOn1000NodesX8Gpus)->Arg(10'000)->Unit(benchmark::kMillisecond);

// Ordering alone, for the record: the index against a full sort of the same jobs.
void BM_OrderFromIndex(benchmark::State& state) {
  WaitingQueue queue = LongQueue(100'000, 0);
  UsageByUser usage = {{"ann", 30}, {"bob", 2}};
  for (auto _ : state) benchmark::DoNotOptimize(queue.Ordered(usage));
}
BENCHMARK(BM_OrderFromIndex)->Unit(benchmark::kMillisecond);

// A cluster shaped like the openb trace's: 1,213 nodes of 2, 4 or 8 GPUs, CPU in millicores,
// host memory enforced, GPUs shared by several pods.
std::vector<NodeState> BigCluster() {
  std::mt19937 rng(7);
  std::vector<NodeState> nodes;
  JobId id = 1;
  for (int n = 0; n < 1213; ++n) {
    NodeState node;
    node.name = "node" + std::to_string(n);
    int gpus = n % 3 == 0 ? 2 : (n % 3 == 1 ? 4 : 8);
    node.cpu_slots = 96'000;
    node.host_mem_bytes = 512 * kGiB;
    for (int g = 0; g < gpus; ++g) {
      GpuState gpu{g, "", 16 * kGiB, 16 * kGiB, 0, {}};
      int pods = static_cast<int>(rng() % 3);
      for (int k = 0; k < pods; ++k) {
        uint64_t bytes = (1 + rng() % 4) * kGiB;
        gpu.holdings.push_back({id++, bytes, 0, false, kNow});
        node.cpu_slots_used += 4'000;
        node.host_mem_used += 16 * kGiB;
      }
      node.gpus.push_back(std::move(gpu));
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

void OnePod(benchmark::State& state, bool fgd, bool exclusive) {
  std::vector<NodeState> nodes = BigCluster();
  PolicyConfig config;
  config.headroom_bytes = 0;
  if (fgd) {
    config.workload = {{1, 0.25, 3, 4'000, 16 * kGiB},    {1, 0.5, 2, 8'000, 32 * kGiB},
                       {1, 1.0, 4, 8'000, 32 * kGiB},     {2, 1.0, 1, 16'000, 64 * kGiB},
                       {8, 1.0, 0.5, 64'000, 256 * kGiB}, {1, 0.1, 1, 2'000, 8 * kGiB}};
  }
  PendingJob pod;
  pod.id = 1 << 30;
  pod.submitted_at = kNow;
  pod.cpus = 8'000;
  pod.host_mem_bytes = 32 * kGiB;
  if (!exclusive) pod.mem_percent = 40;
  std::vector<PendingJob> jobs = {pod};
  size_t started = 0;
  for (auto _ : state) {
    PlacementResult r = Place(jobs, nodes, config, kNow);
    started += r.starts.size();
    benchmark::DoNotOptimize(r);
  }
  if (started != static_cast<size_t>(state.iterations())) state.SkipWithError("pod not placed");
}

void BM_OnePodOn1213NodesBestFit(benchmark::State& s) { OnePod(s, false, false); }
void BM_OnePodOn1213NodesFgdShared(benchmark::State& s) { OnePod(s, true, false); }
void BM_OnePodOn1213NodesFgdWholeGpu(benchmark::State& s) { OnePod(s, true, true); }
BENCHMARK(BM_OnePodOn1213NodesBestFit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OnePodOn1213NodesFgdShared)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OnePodOn1213NodesFgdWholeGpu)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace trainq

BENCHMARK_MAIN();
