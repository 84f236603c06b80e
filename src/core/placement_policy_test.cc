// The scheduling policy's rules beyond fitting memory: order and fair share, starvation
// protection (holds), limits, topology, host memory, fragmentation-aware choice, explain.
#include <algorithm>
#include <limits>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/placement.h"
#include "src/core/waiting_queue.h"

namespace trainq {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr UnixMs kSec = 1000;
constexpr UnixMs kHour = 3600 * kSec;

constexpr uint64_t G(double gib) { return static_cast<uint64_t>(gib * kGiB); }

Holding Held(JobId job, double reserved, bool exclusive = false) {
  return {job, G(reserved), G(reserved), exclusive, kNow - kHour};
}

// A GPU whose holdings use what they reserved: free = total - sum of them.
GpuState Gpu(int index, double total, std::vector<Holding> held = {}) {
  uint64_t used = 0;
  for (const Holding& h : held) used += h.reserved_bytes;
  return {index, "GPU-" + std::to_string(index), G(total), G(total) - used, 0, std::move(held)};
}

NodeState Node(std::string name, std::vector<GpuState> gpus, int slots = 64) {
  NodeState node;
  node.name = std::move(name);
  node.gpus = std::move(gpus);
  node.cpu_slots = slots;
  return node;
}

PendingJob Job(JobId id, int gpus, std::string user = "") {
  PendingJob j;
  j.id = id;
  j.gpus = gpus;
  j.submitted_at = kNow - 10 * kSec + id;  // recent: not aged
  j.user = std::move(user);
  return j;
}
PendingJob Shared(JobId id, double gib, int gpus = 1, std::string user = "") {
  PendingJob j = Job(id, gpus, std::move(user));
  j.mem_bytes = G(gib);
  return j;
}
PendingJob Exclusive(JobId id, int gpus = 1, std::string user = "") {
  return Job(id, gpus, std::move(user));
}
PendingJob Prio(PendingJob j, int priority) {
  j.priority = priority;
  return j;
}
PendingJob Aged(PendingJob j) {
  j.submitted_at = kNow - 3 * kHour;
  return j;
}
PendingJob HostMem(PendingJob j, double gib) {
  j.host_mem_bytes = G(gib);
  return j;
}

PolicyConfig Config() {
  PolicyConfig c;
  c.headroom_bytes = 0;
  c.aging_ms = 2 * kHour;
  return c;
}

struct Start {
  JobId job;
  std::string node;
  std::vector<int> gpus;
};

struct Case {
  const char* what;
  std::vector<NodeState> nodes;
  std::vector<PendingJob> jobs;
  std::vector<Start> starts;                           // in decision order
  std::vector<std::pair<JobId, std::string>> reasons;  // substrings, in order
  std::vector<Hold> holds = {};                        // after the pass
  PolicyConfig config = Config();
  UsageByUser usage = {};
  std::vector<Hold> previous = {};
};

std::vector<Case> Cases() {
  PolicyConfig hold_all = Config();
  hold_all.max_holds = 0;
  PolicyConfig allow_1_2 = Config();
  allow_1_2.devices = {1, 2};
  PolicyConfig max_two = Config();
  max_two.max_jobs_per_gpu = 2;
  PolicyConfig no_aging = Config();
  no_aging.aging_ms = 0;
  NodeState close_pairs =
      Node("a", {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80), Gpu(2, 80), Gpu(3, 80)});
  close_pairs.topology = {{0, 10, 40, 40}, {10, 0, 40, 40}, {40, 40, 0, 10}, {40, 40, 10, 0}};
  NodeState flat = Node("a", {Gpu(0, 80), Gpu(1, 80), Gpu(2, 80), Gpu(3, 80)});
  flat.topology = std::vector<std::vector<int>>(4, std::vector<int>(4, 20));
  NodeState tight_host = Node("a", {Gpu(0, 80)});
  tight_host.host_mem_bytes = G(64);
  tight_host.host_mem_used = G(60);
  NodeState roomy_host = Node("b", {Gpu(0, 40, {Held(11, 20)})});
  roomy_host.host_mem_bytes = G(64);
  return {
      // ---- Order: priority, then fair share, then submit order. ----
      {"priority before fair share",
       {Node("a", {Gpu(0, 80)})},
       {Exclusive(1, 1, "light"), Prio(Exclusive(2, 1, "heavy"), 1)},
       {{2, "a", {0}}},
       {{1, "needs 1 whole GPU"}},
       {},
       Config(),
       {{"heavy", 100.0}, {"light", 1.0}}},
      {"same priority: the user with fewer decayed GPU-hours first, though submitted later",
       {Node("a", {Gpu(0, 80)})},
       {Exclusive(1, 1, "heavy"), Exclusive(2, 1, "heavy"), Exclusive(3, 1, "light")},
       {{3, "a", {0}}},
       {{1, "none is free"}, {2, "none is free"}},
       {},
       Config(),
       {{"heavy", 100.0}, {"light", 1.0}}},
      {"a user with no record holds no GPU-hours",
       {Node("a", {Gpu(0, 80)})},
       {Exclusive(1, 1, "heavy"), Exclusive(2, 1, "new")},
       {{2, "a", {0}}},
       {{1, "none is free"}},
       {},
       Config(),
       {{"heavy", 0.5}}},
      {"equal standing: submit order",
       {Node("a", {Gpu(0, 80)})},
       {Exclusive(2, 1, "bob"), Exclusive(1, 1, "ann")},
       {{1, "a", {0}}},
       {{2, "none is free"}},
       {},
       Config(),
       {{"ann", 3.0}, {"bob", 3.0}}},
      {"backfill: a later job starts where an earlier one does not fit",
       {Node("a", {Gpu(0, 80, {Held(10, 40)})})},
       {Shared(1, 50), Shared(2, 30)},
       {{2, "a", {0}}},
       {{1, "needs 1 GPU with 50.0 GiB usable"}}},

      // ---- Starvation protection. ----
      {"an aged job gets the GPU nearest to fitting held; a later job may not start there",
       {Node("a", {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)})})},
       {Aged(Exclusive(1)), Shared(2, 65), Shared(3, 50)},
       {{3, "a", {1}}},
       {{1, "waited past the aging limit: GPU 0 held for it"},
        {2, "would fit but closed: GPU 0 held for job 1"}},
       {{1, "a", {0}}}},
      {"without aging the same later job backfills",
       {Node("a", {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)})})},
       {Exclusive(1), Shared(2, 65)},
       {{2, "a", {0}}},
       {{1, "none is free"}}},
      {"aging_ms 0 turns holds off",
       {Node("a", {Gpu(0, 80, {Held(10, 5)})})},
       {Aged(Exclusive(1)), Shared(2, 65)},
       {{2, "a", {0}}},
       {{1, "none is free"}},
       {},
       no_aging},
      {"a job in OOM backoff ages from its not_before",
       {Node("a", {Gpu(0, 80, {Held(10, 5)})})},
       {[] {
          PendingJob j = Aged(Exclusive(1));
          j.not_before = kNow - kHour;
          return j;
        }(),
        Shared(2, 65)},
       {{2, "a", {0}}},
       {{1, "none is free"}}},
      {"a previous hold stays on its GPUs while they are a valid choice",
       {Node("a", {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)})})},
       {Aged(Exclusive(1)), Shared(2, 50)},
       {{2, "a", {0}}},
       {{1, "GPU 1 held for it"}},
       {{1, "a", {1}}},
       Config(),
       {},
       {{1, "a", {1}}}},
      {"a previous hold on a GPU no longer allowed moves",
       {Node("a",
             {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)}), Gpu(2, 80, {Held(12, 30)})})},
       {Aged(Exclusive(1))},
       {},
       {{1, "GPU 1 held for it"}},
       {{1, "a", {1}}},
       allow_1_2,
       {},
       {{1, "a", {0}}}},
      {"several aged jobs, in order, hold distinct GPUs",
       {Node("a",
             {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)}), Gpu(2, 80, {Held(12, 30)})})},
       {Aged(Exclusive(1)), Aged(Exclusive(2)), Shared(3, 45)},
       {{3, "a", {2}}},
       {{1, "GPU 0 held for it"}, {2, "GPU 1 held for it"}},
       {{1, "a", {0}}, {2, "a", {1}}},
       hold_all},
      {"max_holds 1: only the first aged job in line that cannot start holds GPUs",
       {Node("a",
             {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)}), Gpu(2, 80, {Held(12, 30)})})},
       {Aged(Exclusive(1)), Aged(Exclusive(2)), Shared(3, 45)},
       {{3, "a", {1}}},  // spread: of GPUs 1 and 2 (one job each), the one with more usable
       {{1, "GPU 0 held for it"}, {2, "needs 1 whole GPU"}},
       {{1, "a", {0}}}},
      {"a hold never blocks its own job, and ends when it starts",
       {Node("a", {Gpu(0, 80), Gpu(1, 80, {Held(11, 20)})})},
       {Aged(Exclusive(1)), Shared(2, 50)},
       {{1, "a", {0}}, {2, "a", {1}}},
       {},
       {},
       Config(),
       {},
       {{1, "a", {0}}}},
      {"a multi-GPU aged job holds GPUs of one node",
       {Node("a", {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80)}),
        Node("b", {Gpu(0, 80, {Held(11, 1)}), Gpu(1, 80, {Held(12, 1)})})},
       {Aged(Exclusive(1, 2)), Shared(2, 10)},
       {{2, "b", {0}}},
       {{1, "a/GPU 0, a/GPU 1 held for it"}},
       {{1, "a", {0, 1}}}},

      // ---- Limits. ----
      {"GPUs outside the device allowlist are never used",
       {Node("a", {Gpu(0, 80), Gpu(1, 80, {Held(10, 70)}), Gpu(2, 80, {Held(11, 60)})})},
       {Shared(1, 15), Shared(2, 30)},
       {{1, "a", {2}}},
       {{2, "would fit but closed: GPU 0 not in the device allowlist"}},
       {},
       allow_1_2},
      {"a job needing more GPUs than the allowlist leaves",
       {Node("a", {Gpu(0, 80), Gpu(1, 80), Gpu(2, 80)})},
       {Exclusive(1, 3)},
       {},
       {{1, "needs 3 GPUs; the device allowlist (1,2) leaves 2 on any node"}},
       {},
       allow_1_2},
      {"max jobs per GPU counts attempts already there and those started in the pass",
       {Node("a", {Gpu(0, 80, {Held(10, 1), Held(11, 1)}), Gpu(1, 80, {Held(12, 1)})})},
       {Shared(1, 1), Shared(2, 1)},
       {{1, "a", {1}}},
       {{2, "GPU 0 has 2 jobs (max-jobs-per-gpu 2)"}},
       {},
       max_two},

      // ---- Topology and host memory. ----
      {"a multi-GPU job takes the closest GPUs, over the unused-first order",
       {close_pairs},
       {Exclusive(1, 2)},
       {{1, "a", {2, 3}}},
       {}},
      {"equal distances: the usual preference", {flat}, {Shared(1, 10, 2)}, {{1, "a", {0, 1}}}, {}},
      {"host memory is enforced where the node counts it",
       {tight_host, roomy_host},
       {HostMem(Shared(1, 10), 8), HostMem(Shared(2, 15), 8), HostMem(Shared(3, 10), 3)},
       {{1, "b", {0}}, {3, "a", {0}}},
       {{2, "needs 8.0 GiB of host memory"}}},
  };
}

TEST(PolicyTest, Table) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.what);
    PlacementResult got = Place(c.jobs, c.nodes, c.config, kNow, c.usage, c.previous);
    ASSERT_EQ(got.starts.size(), c.starts.size());
    for (size_t i = 0; i < c.starts.size(); ++i) {
      EXPECT_EQ(got.starts[i].job, c.starts[i].job) << "start " << i;
      EXPECT_EQ(got.starts[i].node, c.starts[i].node) << "start " << i;
      EXPECT_EQ(got.starts[i].gpu_indices, c.starts[i].gpus) << "start " << i;
    }
    ASSERT_EQ(got.Reasons().size(), c.reasons.size());
    for (size_t i = 0; i < c.reasons.size(); ++i) {
      EXPECT_EQ(got.Reasons()[i].first, c.reasons[i].first);
      EXPECT_THAT(got.Reasons()[i].second, HasSubstr(c.reasons[i].second));
    }
    ASSERT_EQ(got.holds.size(), c.holds.size());
    for (size_t i = 0; i < c.holds.size(); ++i) {
      EXPECT_EQ(got.holds[i].job, c.holds[i].job);
      EXPECT_EQ(got.holds[i].node, c.holds[i].node);
      EXPECT_EQ(got.holds[i].gpu_indices, c.holds[i].gpu_indices);
    }
  }
}

TEST(PolicyTest, AHeldJobStartsOnceItsGpuFrees) {
  std::vector<NodeState> busy = {
      Node("a", {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)})})};
  std::vector<PendingJob> jobs = {Aged(Exclusive(1)), Shared(2, 10)};
  PlacementResult first = Place(jobs, busy, Config(), kNow);
  ASSERT_EQ(first.holds.size(), 1u);
  // Job 10 ended: GPU 0 is free, and only job 1 may take it.
  std::vector<NodeState> freed = {Node("a", {Gpu(0, 80), Gpu(1, 80, {Held(11, 20)})})};
  jobs = {Prio(Shared(3, 10), 1), Aged(Exclusive(1))};
  PlacementResult second = Place(jobs, freed, Config(), kNow, {}, first.holds);
  ASSERT_EQ(second.starts.size(), 2u);
  EXPECT_EQ(second.starts[0].job, 3);
  EXPECT_EQ(second.starts[0].gpu_indices, std::vector<int>{1});  // not the held GPU 0
  EXPECT_EQ(second.starts[1].job, 1);
  EXPECT_EQ(second.starts[1].gpu_indices, std::vector<int>{0});
  EXPECT_TRUE(second.holds.empty());
}

TEST(PolicyTest, AHoldEndsWhenItsJobFitsElsewhere) {
  // Job 1 (aged, 2 whole GPUs) held node a's GPUs last pass; now node b is free.
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, 80), Gpu(1, 80, {Held(10, 5)})}),
                                  Node("b", {Gpu(0, 80), Gpu(1, 80)})};
  std::vector<PendingJob> jobs = {Aged(Exclusive(1, 2)), Shared(3, 70)};
  PlacementResult got = Place(jobs, nodes, Config(), kNow, {}, std::vector<Hold>{{1, "a", {0, 1}}});
  ASSERT_EQ(got.starts.size(), 2u);
  EXPECT_EQ(got.starts[0].job, 1);
  EXPECT_EQ(got.starts[0].node, "b");
  EXPECT_EQ(got.starts[1].job, 3);
  EXPECT_EQ(got.starts[1].node, "a");
  EXPECT_EQ(got.starts[1].gpu_indices, std::vector<int>{0});
  EXPECT_TRUE(got.holds.empty());
}

// GPUs a preemption frees are held for its job however young it is, past max_holds, and the
// hold goes with the job once it starts there or leaves the queue.
TEST(PolicyTest, APreemptingHoldKeepsFreedGpusForItsJobWhateverItsAge) {
  // Job 1 (2 whole GPUs, not aged) preempted job 10 on GPU 0; GPU 1's job still stops.
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, 80), Gpu(1, 80, {Held(11, 80, true)})})};
  std::vector<PendingJob> jobs = {Exclusive(1, 2), Shared(3, 10), Aged(Exclusive(4))};
  Hold preempting{1, "a", {0, 1}, {{"a", {0, 1}}}, true};
  PolicyConfig config = Config();
  config.max_holds = 1;
  PlacementResult got = Place(jobs, nodes, config, kNow, {}, std::vector<Hold>{preempting});
  EXPECT_TRUE(got.starts.empty());  // neither 3 nor the aged 4 takes GPU 0
  ASSERT_EQ(got.holds.size(), 1u);
  EXPECT_EQ(got.holds[0].job, 1);
  EXPECT_TRUE(got.holds[0].preempting);
  EXPECT_THAT(got.Reasons(), Contains(Pair(3, HasSubstr("held for job 1"))));
  // Job 11 is gone: job 1 starts on both; the hold ends.
  nodes = {Node("a", {Gpu(0, 80), Gpu(1, 80)})};
  got = Place(jobs, nodes, config, kNow, {}, got.holds);
  ASSERT_FALSE(got.starts.empty());
  EXPECT_EQ(got.starts[0].job, 1);
  EXPECT_TRUE(
      std::none_of(got.holds.begin(), got.holds.end(), [](const Hold& h) { return h.preempting; }));
  // A hold for a job no longer waiting is dropped.
  got = Place(std::vector<PendingJob>{Shared(3, 10)}, nodes, config, kNow, {},
              std::vector<Hold>{preempting});
  ASSERT_EQ(got.starts.size(), 1u);
  EXPECT_TRUE(got.holds.empty());
}

// ---- Fragmentation-aware choice. ----

TEST(PolicyTest, WorkloadMixMakesTheChoiceFragmentationAware) {
  std::vector<NodeState> nodes = {
      Node("a", {Gpu(0, 10, {Held(10, 3)}), Gpu(1, 10, {Held(11, 1)})})};
  std::vector<PendingJob> jobs = {Shared(1, 2)};
  // Best fit (pack) takes GPU 0 (5 GiB left), where a 6 GiB job no longer fits.
  PolicyConfig pack = Config();
  pack.pack = true;
  EXPECT_EQ(Place(jobs, nodes, pack, kNow).starts.at(0).gpu_indices, std::vector<int>{0});
  PolicyConfig fgd = pack;
  fgd.workload = {{1, 0.6, 1.0}};
  EXPECT_EQ(Place(jobs, nodes, fgd, kNow).starts.at(0).gpu_indices, std::vector<int>{1});
}

TEST(PolicyTest, FragmentationAwareChoiceAcrossNodesKeepsWholeGpusForWholeGpuJobs) {
  // A half-GPU job: node a's free GPU or node b's half-used one. With whole-GPU jobs in the
  // mix the half-used GPU is the one to fill.
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, 10), Gpu(1, 10, {Held(10, 10, true)})}),
                                  Node("b", {Gpu(0, 10, {Held(11, 5)}), Gpu(1, 10)})};
  PendingJob half = Job(1, 1);
  half.mem_percent = 50;
  PolicyConfig fgd = Config();
  fgd.workload = {{1, 1.0, 1.0}, {1, 0.5, 1.0}};
  PlacementResult got = Place(std::vector<PendingJob>{half}, nodes, fgd, kNow);
  ASSERT_EQ(got.starts.size(), 1u);
  EXPECT_EQ(got.starts[0].node, "b");
  EXPECT_EQ(got.starts[0].gpu_indices, std::vector<int>{0});
}

TEST(PolicyTest, FragmentationAwareChoiceStillObeysLimitsAndHolds) {
  std::vector<NodeState> nodes = {
      Node("a", {Gpu(0, 10, {Held(10, 3)}), Gpu(1, 10, {Held(11, 1)})})};
  PolicyConfig fgd = Config();
  fgd.workload = {{1, 0.6, 1.0}};
  fgd.devices = {0};
  PlacementResult got = Place(std::vector<PendingJob>{Shared(1, 2)}, nodes, fgd, kNow);
  ASSERT_EQ(got.starts.size(), 1u);
  EXPECT_EQ(got.starts[0].gpu_indices, std::vector<int>{0});
}

// ---- The incremental order. ----

TEST(WaitingQueueTest, OrderedMatchesPlacedBeforeAndFollowsErases) {
  WaitingQueue q;
  std::vector<PendingJob> all;
  const char* users[] = {"ann", "bob", "cy", "dee"};
  for (JobId id = 1; id <= 200; ++id) {
    PendingJob j = Shared(id, 1, 1, users[(id * 7) % 4]);
    j.priority = static_cast<int>(id % 3) - 1;
    j.submitted_at = kNow + (id * 37) % 50;  // many equal times: id breaks ties
    j.service_band = id % 5 == 0;            // a few have had their attained-service share
    all.push_back(j);
    EXPECT_TRUE(q.emplace(id, j));
  }
  EXPECT_FALSE(q.emplace(1, all[0]));
  UsageByUser usage = {{"ann", 5.0}, {"bob", 1.0}, {"cy", 5.0}};  // dee: none; ann and cy tie
  auto ids = [](const std::vector<const PendingJob*>& v) {
    std::vector<JobId> out;
    for (const PendingJob* j : v) out.push_back(j->id);
    return out;
  };
  auto sorted = [&](std::vector<PendingJob> jobs) {
    std::stable_sort(jobs.begin(), jobs.end(), [&](const PendingJob& a, const PendingJob& b) {
      return PlacedBefore(a, b, usage);
    });
    std::vector<JobId> out;
    for (const PendingJob& j : jobs) out.push_back(j.id);
    return out;
  };
  EXPECT_EQ(ids(q.Ordered(usage)), sorted(all));
  for (JobId id = 1; id <= 200; id += 3) EXPECT_EQ(q.erase(id), 1u);
  EXPECT_EQ(q.erase(1), 0u);
  std::erase_if(all, [](const PendingJob& j) { return j.id % 3 == 1; });
  EXPECT_EQ(q.size(), all.size());
  EXPECT_EQ(ids(q.Ordered(usage)), sorted(all));
  // PlaceOrdered on the index's order decides as Place does.
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, 10), Gpu(1, 10, {Held(10, 5)})})};
  std::vector<const PendingJob*> order = q.Ordered(usage);
  PlacementResult a = PlaceOrdered(order, nodes, Config(), kNow);
  PlacementResult b = Place(all, nodes, Config(), kNow, usage);
  ASSERT_EQ(a.starts.size(), b.starts.size());
  for (size_t i = 0; i < a.starts.size(); ++i) EXPECT_EQ(a.starts[i].job, b.starts[i].job);
  EXPECT_EQ(a.Reasons(), b.Reasons());
}

// The attained-service order: at equal priority a job that has had less GPU time goes first,
// whatever its user's standing; priority still comes first.
TEST(WaitingQueueTest, AJobThatHadLessGoesFirstAtEqualPriority) {
  WaitingQueue q;
  PendingJob served = Shared(1, 1, 1, "light");  // submitted first, its user used little
  served.service_band = 1;
  PendingJob fresh = Shared(2, 1, 1, "heavy");
  fresh.submitted_at = kNow + 1;
  PendingJob urgent = Shared(3, 1, 1, "light");
  urgent.service_band = 1;
  urgent.priority = 5;
  for (const PendingJob& j : {served, fresh, urgent}) q.emplace(j.id, j);
  UsageByUser usage = {{"light", 0.0}, {"heavy", 100.0}};
  std::vector<JobId> order;
  for (const PendingJob* j : q.Ordered(usage)) order.push_back(j->id);
  EXPECT_EQ(order, (std::vector<JobId>{3, 2, 1}));
  EXPECT_TRUE(PlacedBefore(fresh, served, usage));
  served.service_band = 0;  // the order off: fair share decides
  EXPECT_TRUE(PlacedBefore(served, fresh, usage));
}

// A level of -INT_MIN used to be narrowed to int: the merge loop never advanced and a pass
// never ended.
TEST(WaitingQueueTest, EveryIntPriorityIsOrdered) {
  WaitingQueue q;
  const int priorities[] = {0, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), -1,
                            std::numeric_limits<int>::min() + 1};
  JobId id = 0;
  for (int p : priorities) {
    ++id;
    PendingJob j = Shared(id, 1, 1, id % 2 ? "ann" : "bob");
    j.priority = p;
    q.emplace(id, j);
  }
  std::vector<int> order;
  for (const PendingJob* j : q.Ordered({})) order.push_back(j->priority);
  EXPECT_EQ(order, (std::vector<int>{std::numeric_limits<int>::max(), 0, -1,
                                     std::numeric_limits<int>::min() + 1,
                                     std::numeric_limits<int>::min()}));
}

// ---- explain. ----

TEST(ExplainTest, PositionStandingGpusAndHolds) {
  std::vector<NodeState> nodes = {Node(
      "a", {Gpu(0, 80, {Held(10, 5)}), Gpu(1, 80, {Held(11, 20)}), Gpu(2, 80, {Held(12, 70)})})};
  PolicyConfig config = Config();
  config.devices = {0, 1};
  std::vector<PendingJob> jobs = {Aged(Exclusive(1, 1, "ann")), Shared(2, 65, 1, "bob"),
                                  Shared(3, 65, 1, "cy")};
  UsageByUser usage = {{"ann", 9.0}, {"bob", 2.0}, {"cy", 4.0}};
  Explanation e = Explain(3, jobs, nodes, config, kNow, usage);
  ASSERT_TRUE(e.waiting);
  EXPECT_FALSE(e.would_start);
  EXPECT_EQ(e.position, 2);  // bob (2.0) before cy (4.0) before ann (9.0)
  EXPECT_EQ(e.ahead, 1);
  EXPECT_EQ(e.user, "cy");
  EXPECT_DOUBLE_EQ(e.user_gpu_hours, 4.0);
  EXPECT_EQ(e.user_rank, 2);
  EXPECT_EQ(e.users_waiting, 3);
  EXPECT_THAT(e.reason, HasSubstr("needs 1 GPU with 65.0 GiB usable"));
  EXPECT_THAT(e.reason, HasSubstr("GPU 0 held for job 1"));
  ASSERT_EQ(e.gpus.size(), 3u);
  EXPECT_EQ(e.gpus[0].held_for, 1);
  EXPECT_EQ(e.gpus[0].closed, "held for job 1");
  EXPECT_FALSE(e.gpus[0].fits);
  EXPECT_EQ(e.gpus[0].usable_bytes, G(75));
  EXPECT_EQ(e.gpus[0].total_bytes, G(80));
  EXPECT_EQ(e.gpus[0].jobs, std::vector<JobId>{10});
  EXPECT_FALSE(e.gpus[1].fits);  // 60 GiB usable
  EXPECT_TRUE(e.gpus[1].closed.empty());
  EXPECT_EQ(e.gpus[2].closed, "not in the device allowlist");
  ASSERT_EQ(e.holds.size(), 1u);
  EXPECT_EQ(e.holds[0].job, 1);

  Explanation held = Explain(1, jobs, nodes, config, kNow, usage);
  EXPECT_EQ(held.position, 3);
  EXPECT_EQ(held.user_rank, 3);
  EXPECT_THAT(held.reason, HasSubstr("GPU 0 held for it"));
  EXPECT_EQ(held.gpus[0].closed, "");  // its own hold does not close it

  Explanation bob = Explain(2, jobs, nodes, config, kNow, usage);
  EXPECT_EQ(bob.position, 1);
  EXPECT_EQ(bob.user_rank, 1);

  EXPECT_FALSE(Explain(99, jobs, nodes, config, kNow, usage).waiting);
}

TEST(ExplainTest, AJobThatWouldStartSaysSo) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, 80)})};
  std::vector<PendingJob> jobs = {Shared(1, 10)};
  Explanation e = Explain(1, jobs, nodes, Config(), kNow);
  EXPECT_TRUE(e.would_start);
  EXPECT_TRUE(e.reason.empty());
  ASSERT_EQ(e.gpus.size(), 1u);
  EXPECT_TRUE(e.gpus[0].fits);
}

}  // namespace
}  // namespace trainq
