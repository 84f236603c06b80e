// Preemption: which running jobs a waiting job stops (the fewest, least work lost), under which
// rules (priority gap, fair share, aging), what spares a job (not preemptible, min runtime,
// the thrash guard, already stopping), gangs, several waiting jobs in one pass, the texts.
#include "src/core/preemption.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr UnixMs kSec = 1000;
constexpr UnixMs kMin = 60 * kSec;
constexpr UnixMs kHour = 60 * kMin;

NodeState Node(std::string name, int gpus, uint64_t gib = 80) {
  NodeState node;
  node.name = std::move(name);
  for (int i = 0; i < gpus; ++i) {
    node.gpus.push_back({i, fmt::format("GPU-{}", i), gib * kGiB, gib * kGiB, 0, {}});
  }
  node.cpu_slots = 64;
  return node;
}

// A preemptible job of priority 0 that has run an hour on whole GPUs of one node.
RunningJob Running(JobId id, std::string user, std::string node, std::vector<int> gpus) {
  RunningJob r;
  r.job = id;
  r.user = std::move(user);
  r.preemptible = true;
  r.started_at = kNow - kHour;
  r.stop_ms = 30 * kSec;
  r.parts = {{std::move(node), std::move(gpus)}};
  r.cpus = 1;
  return r;
}
RunningJob Prio(RunningJob r, int priority) {
  r.priority = priority;
  return r;
}
RunningJob Ran(RunningJob r, int64_t ms) {
  r.started_at = kNow - ms;
  return r;
}
RunningJob Kept(RunningJob r) {
  r.preemptible = false;
  return r;
}
RunningJob Stopping(RunningJob r) {
  r.stopping = true;
  return r;
}
RunningJob Preempted(RunningJob r, int in_a_row, int64_t ago) {
  r.preempted_in_a_row = in_a_row;
  r.last_preempted_at = kNow - ago;
  return r;
}
RunningJob StopsIn(RunningJob r, int64_t ms) {
  r.stop_ms = ms;
  return r;
}
RunningJob Spanning(RunningJob r, std::vector<NodeGpus> parts) {
  r.parts = std::move(parts);
  return r;
}

// A waiting job of priority 0 asking whole GPUs, queued 10 s ago.
PendingJob Waiting(JobId id, int gpus, int priority = 0, std::string user = "alice") {
  PendingJob j;
  j.id = id;
  j.gpus = gpus;
  j.priority = priority;
  j.user = std::move(user);
  j.submitted_at = kNow - 10 * kSec;
  return j;
}
PendingJob Mem(PendingJob j, uint64_t gib) {
  j.mem_bytes = gib * kGiB;
  return j;
}
PendingJob Gang(PendingJob j, int nodes) {
  j.num_nodes = nodes;
  return j;
}
PendingJob Aged(PendingJob j) {
  j.submitted_at = kNow - 3 * kHour;
  return j;
}

PolicyConfig Policy() {
  PolicyConfig c;
  c.headroom_bytes = 0;
  c.aging_ms = 2 * kHour;
  return c;
}
PreemptConfig Config(int gap = 1) {
  PreemptConfig c;
  c.priority_gap = gap;
  return c;
}

// The nodes with the running jobs' holdings on them: whole GPUs (exclusive), or the GiB per
// GPU `shares` gives a job, each using what it reserved.
std::vector<NodeState> Cluster(std::vector<NodeState> nodes, const std::vector<RunningJob>& running,
                               const std::map<JobId, uint64_t>& shares = {}) {
  for (const RunningJob& r : running) {
    for (size_t p = 0; p < r.parts.size(); ++p) {
      NodeState* node = nullptr;
      for (NodeState& n : nodes) node = n.name == r.parts[p].node ? &n : node;
      if (node == nullptr) continue;
      for (int i : r.parts[p].gpu_indices) {
        GpuState& gpu = node->gpus[static_cast<size_t>(i)];
        auto share = shares.find(r.job);
        uint64_t bytes = share == shares.end() ? gpu.total_bytes : share->second * kGiB;
        gpu.holdings.push_back({r.job, bytes, bytes, share == shares.end(), r.started_at});
        gpu.free_bytes -= bytes;
      }
      node->cpu_slots_used += r.cpus;
      UserUse& use = node->use_by_user[r.user];
      use.gpus += static_cast<int>(r.parts[p].gpu_indices.size());
      use.jobs += p == 0 ? 1 : 0;
    }
  }
  return nodes;
}

struct Want {
  JobId job;
  std::vector<JobId> victims;
  std::vector<NodeGpus> parts;
};

struct Case {
  const char* what;
  std::vector<NodeState> nodes;  // bare: the running jobs are put on them
  std::vector<RunningJob> running;
  std::vector<PendingJob> waiting;
  std::vector<Want> want;  // in order
  PreemptConfig config = Config();
  UsageByUser usage = {};
  std::map<JobId, uint64_t> shares = {};
  PolicyConfig policy = Policy();
};

// A job that has had `ms` of GPU time in earlier attempts.
RunningJob Served(RunningJob r, int64_t ms) {
  r.attained_gpu_ms = double(ms);
  return r;
}

PendingJob Band(PendingJob w, int band) {
  w.service_band = band;
  return w;
}

PreemptConfig Las(int64_t threshold_ms = 2 * kHour) {
  PreemptConfig c = Config();
  c.for_attained_service = true;
  c.attained_service_ms = threshold_ms;
  return c;
}

std::vector<Case> Cases() {
  PreemptConfig fair = Config();
  fair.for_fair_share = true;
  PreemptConfig aging = Config();
  aging.for_aging = true;
  PreemptConfig no_min_runtime = Config();
  no_min_runtime.min_runtime_ms = 0;
  PreemptConfig below_zero = Config(-5);
  UsageByUser alice_light = {{"alice", 1.0}, {"bob", 10.0}};
  PolicyConfig one_job_each = Policy();
  one_job_each.max_jobs_per_user = 1;
  return {
      // ---- Which victims. ----
      {"fewest victims: one 2-GPU job rather than two younger 1-GPU jobs",
       {Node("a", 4)},
       {Ran(Running(10, "bob", "a", {0, 1}), 2 * kHour),
        Ran(Running(11, "bob", "a", {2}), 20 * kMin), Ran(Running(12, "bob", "a", {3}), 30 * kMin)},
       {Waiting(1, 2, 5)},
       {{1, {10}, {{"a", {0, 1}}}}}},
      {"least work lost among equal counts: the youngest attempt",
       {Node("a", 2)},
       {Ran(Running(10, "bob", "a", {0}), 3 * kHour), Ran(Running(11, "bob", "a", {1}), kHour)},
       {Waiting(1, 1, 5)},
       {{1, {11}, {{"a", {1}}}}}},
      {"equal run time: the lower priority first",
       {Node("a", 2)},
       {Prio(Running(10, "bob", "a", {0}), 1), Running(11, "bob", "a", {1})},
       {Waiting(1, 1, 5)},
       {{1, {11}, {{"a", {1}}}}}},
      {"equal run time and priority: the higher job id first",
       {Node("a", 2)},
       {Running(10, "bob", "a", {0}), Running(11, "bob", "a", {1})},
       {Waiting(1, 1, 5)},
       {{1, {11}, {{"a", {1}}}}}},
      {"least work lost across nodes: the node whose victims ran least",
       {Node("a", 1), Node("b", 1)},
       {Ran(Running(10, "bob", "a", {0}), 3 * kHour), Ran(Running(11, "bob", "b", {0}), kHour)},
       {Waiting(1, 1, 5)},
       {{1, {11}, {{"b", {0}}}}}},
      {"exact fit: one larger victim, not the youngest and it",
       {Node("a", 1)},
       {Ran(Running(10, "bob", "a", {0}), 20 * kMin), Ran(Running(11, "bob", "a", {0}), 3 * kHour)},
       {Mem(Waiting(1, 1, 5), 60)},
       {{1, {11}, {{"a", {0}}}}},
       Config(),
       {},
       {{10, 5}, {11, 40}}},
      {"memory shares: a 20 GiB job needs one small victim, not every job on the GPU",
       {Node("a", 1)},
       {Ran(Running(10, "bob", "a", {0}), 2 * kHour), Ran(Running(11, "bob", "a", {0}), kHour),
        Ran(Running(12, "bob", "a", {0}), 3 * kHour)},
       {Mem(Waiting(1, 1, 5), 20)},
       {{1, {11}, {{"a", {0}}}}},
       Config(),
       {},
       {{10, 10}, {11, 10}, {12, 50}}},
      {"more victims than the subset search tries: greedy removal finds them",
       {Node("a", 1)},
       {Running(10, "bob", "a", {0}), Running(11, "bob", "a", {0}), Running(12, "bob", "a", {0}),
        Running(13, "bob", "a", {0}), Running(14, "bob", "a", {0}), Running(15, "bob", "a", {0}),
        Running(16, "bob", "a", {0}), Running(17, "bob", "a", {0}), Running(18, "bob", "a", {0}),
        Ran(Running(19, "bob", "a", {0}), 3 * kHour)},
       {Mem(Waiting(1, 1, 5), 75)},
       {{1, {18, 17, 16, 15, 14, 13, 12, 11, 10, 19}, {{"a", {0}}}}},
       Config(),
       {},
       {{10, 8}, {11, 8}, {12, 8}, {13, 8}, {14, 8}, {15, 8}, {16, 8}, {17, 8}, {18, 8}, {19, 8}}},
      {"a whole-GPU job takes every holder of the GPUs it needs, ten of them",
       {Node("a", 2)},
       {Running(10, "bob", "a", {0}), Running(11, "bob", "a", {0}), Running(12, "bob", "a", {0}),
        Running(13, "bob", "a", {0}), Running(14, "bob", "a", {0}), Running(15, "bob", "a", {1}),
        Running(16, "bob", "a", {1}), Running(17, "bob", "a", {1}), Running(18, "bob", "a", {1}),
        Running(19, "bob", "a", {1})},
       {Waiting(1, 2, 5)},
       {{1, {19, 18, 17, 16, 15, 14, 13, 12, 11, 10}, {{"a", {0, 1}}}}},
       Config(),
       {},
       {{10, 8}, {11, 8}, {12, 8}, {13, 8}, {14, 8}, {15, 8}, {16, 8}, {17, 8}, {18, 8}, {19, 8}}},
      {"a job that would fit now (waiting for a hold) preempts nothing",
       {Node("a", 2)},
       {Running(10, "bob", "a", {0})},
       {Waiting(1, 1, 5)},
       {}},
      {"no set of victims frees enough: nothing",
       {Node("a", 2)},
       {Running(10, "bob", "a", {0}), Kept(Running(11, "bob", "a", {1}))},
       {Waiting(1, 2, 5)},
       {}},

      // ---- The priority rule. ----
      {"equal priority with gap 1: no preemption",
       {Node("a", 1)},
       {Prio(Running(10, "bob", "a", {0}), 3)},
       {Waiting(1, 1, 3)},
       {}},
      {"gap 0: equal priority preempts",
       {Node("a", 1)},
       {Prio(Running(10, "bob", "a", {0}), 3)},
       {Waiting(1, 1, 3)},
       {{1, {10}, {{"a", {0}}}}},
       Config(0)},
      {"a negative gap never lets a job preempt a higher priority",
       {Node("a", 1)},
       {Prio(Running(10, "bob", "a", {0}), 1)},
       {Waiting(1, 1, 0)},
       {},
       below_zero},

      // ---- What spares a job. ----
      {"not preemptible: spared, the other taken though it ran longer",
       {Node("a", 2)},
       {Ran(Kept(Running(10, "bob", "a", {0})), 20 * kMin),
        Ran(Running(11, "bob", "a", {1}), 5 * kHour)},
       {Waiting(1, 1, 5)},
       {{1, {11}, {{"a", {1}}}}}},
      {"min_runtime: a job that ran 5m of 10m is spared",
       {Node("a", 1)},
       {Ran(Running(10, "bob", "a", {0}), 5 * kMin)},
       {Waiting(1, 1, 5)},
       {}},
      {"min_runtime 0: the same job is taken",
       {Node("a", 1)},
       {Ran(Running(10, "bob", "a", {0}), 5 * kMin)},
       {Waiting(1, 1, 5)},
       {{1, {10}, {{"a", {0}}}}},
       no_min_runtime},
      {"thrash guard: preempted twice in a row, 30m ago, spared for spare_ms",
       {Node("a", 1)},
       {Preempted(Running(10, "bob", "a", {0}), 2, 30 * kMin)},
       {Waiting(1, 1, 5)},
       {}},
      {"thrash guard: eligible again once spare_ms passed",
       {Node("a", 1)},
       {Preempted(Running(10, "bob", "a", {0}), 2, 2 * kHour)},
       {Waiting(1, 1, 5)},
       {{1, {10}, {{"a", {0}}}}}},
      {"thrash guard: preempted once is not spared",
       {Node("a", 1)},
       {Preempted(Running(10, "bob", "a", {0}), 1, kMin)},
       {Waiting(1, 1, 5)},
       {{1, {10}, {{"a", {0}}}}}},
      {"a stopping job is not chosen; its GPU counts as free",
       {Node("a", 2)},
       {Ran(Stopping(Running(10, "bob", "a", {0})), 20 * kMin), Running(11, "bob", "a", {1})},
       {Waiting(1, 2, 5)},
       {{1, {11}, {{"a", {0, 1}}}}}},
      {"a job that fits once a stopping job is gone preempts nothing",
       {Node("a", 2)},
       {Stopping(Running(10, "bob", "a", {0})), Running(11, "bob", "a", {1})},
       {Waiting(1, 1, 5)},
       {}},

      // ---- Fair share. ----
      {"fair share off: equal priority, no preemption",
       {Node("a", 1)},
       {Running(10, "bob", "a", {0})},
       {Waiting(1, 1)},
       {},
       Config(),
       alice_light},
      {"fair share on: a user below their share preempts one above it",
       {Node("a", 1)},
       {Running(10, "bob", "a", {0})},
       {Waiting(1, 1)},
       {{1, {10}, {{"a", {0}}}}},
       fair,
       alice_light},
      {"fair share on: not a user also below the mean, though their job ran less",
       {Node("a", 2)},
       {Ran(Running(10, "bob", "a", {0}), 3 * kHour),
        Ran(Running(11, "carol", "a", {1}), 30 * kMin)},
       {Waiting(1, 1)},
       {{1, {10}, {{"a", {0}}}}},
       fair,
       {{"alice", 0.0}, {"bob", 9.0}, {"carol", 3.0}}},
      {"fair share on: never a job of a higher priority",
       {Node("a", 1)},
       {Prio(Running(10, "bob", "a", {0}), 1)},
       {Waiting(1, 1)},
       {},
       fair,
       alice_light},

      // ---- Aging. ----
      {"aging off: an aged gang of equal priority waits",
       {Node("a", 2), Node("b", 2)},
       {Running(10, "bob", "a", {0, 1}), Running(11, "bob", "b", {0, 1})},
       {Aged(Gang(Waiting(1, 2), 2))},
       {}},
      {"aging on: an aged gang preempts other users' jobs of equal priority",
       {Node("a", 2), Node("b", 2)},
       {Running(10, "bob", "a", {0, 1}), Ran(Running(11, "bob", "b", {0, 1}), 2 * kHour)},
       {Aged(Gang(Waiting(1, 2), 2))},
       {{1, {10, 11}, {{"a", {0, 1}}, {"b", {0, 1}}}}},
       aging},
      {"aging on: a gang not yet aged waits",
       {Node("a", 2), Node("b", 2)},
       {Running(10, "bob", "a", {0, 1}), Running(11, "bob", "b", {0, 1})},
       {Gang(Waiting(1, 2), 2)},
       {},
       aging},
      {"aging on: an aged small job (1 GPU of 4) waits",
       {Node("a", 4)},
       {Running(10, "bob", "a", {0, 1, 2, 3})},
       {Aged(Waiting(1, 1))},
       {},
       aging},
      {"aging on: an aged job of half a node is large",
       {Node("a", 4)},
       {Running(10, "bob", "a", {0, 1, 2, 3})},
       {Aged(Waiting(1, 2))},
       {{1, {10}, {{"a", {0, 1}}}}},
       aging},
      {"aging on: not the same user's jobs",
       {Node("a", 2), Node("b", 2)},
       {Running(10, "alice", "a", {0, 1}), Running(11, "alice", "b", {0, 1})},
       {Aged(Gang(Waiting(1, 2), 2))},
       {},
       aging},

      // ---- Attained service. ----
      {"attained service: a job that has had none preempts one past the threshold, the "
       "same user's too",
       {Node("a", 2)},
       {Ran(Running(10, "alice", "a", {0}), 3 * kHour), Ran(Running(11, "bob", "a", {1}), kHour)},
       {Waiting(1, 1)},
       {{1, {10}, {{"a", {0}}}}},
       Las()},
      {"attained service: a 2-GPU hour counts two GPU-hours",
       {Node("a", 3)},
       {Ran(Running(10, "bob", "a", {0, 1}), kHour), Ran(Running(11, "bob", "a", {2}), kHour)},
       {Waiting(1, 2)},
       {{1, {10}, {{"a", {0, 1}}}}},
       Las()},
      {"attained service: earlier attempts count",
       {Node("a", 1)},
       {Served(Ran(Running(10, "bob", "a", {0}), kHour), 90 * kMin)},
       {Waiting(1, 1)},
       {{1, {10}, {{"a", {0}}}}},
       Las()},
      {"attained service: none past the threshold, none preempted",
       {Node("a", 2)},
       {Ran(Running(10, "bob", "a", {0}), 90 * kMin), Ran(Running(11, "bob", "a", {1}), kHour)},
       {Waiting(1, 1)},
       {},
       Las()},
      {"attained service: a waiting job past it preempts nobody by that rule",
       {Node("a", 1)},
       {Ran(Running(10, "bob", "a", {0}), 3 * kHour)},
       {Band(Waiting(1, 1), 1)},
       {},
       Las()},
      {"attained service: off, the same jobs wait",
       {Node("a", 1)},
       {Ran(Running(10, "bob", "a", {0}), 3 * kHour)},
       {Waiting(1, 1)},
       {}},
      {"attained service: not a job of higher priority",
       {Node("a", 1)},
       {Prio(Ran(Running(10, "bob", "a", {0}), 3 * kHour), 1)},
       {Waiting(1, 1)},
       {},
       Las()},

      // ---- Gangs. ----
      {"a gang preempts on two nodes, not on the node whose job is kept",
       {Node("a", 1), Node("b", 1), Node("c", 1)},
       {Kept(Running(10, "bob", "a", {0})), Running(11, "bob", "b", {0}),
        Running(12, "bob", "c", {0})},
       {Gang(Waiting(1, 1, 5), 2)},
       {{1, {12, 11}, {{"b", {0}}, {"c", {0}}}}}},
      {"a gang uses a free node and preempts on one other",
       {Node("a", 1), Node("b", 1), Node("c", 1)},
       {Running(11, "bob", "b", {0}), Ran(Running(12, "bob", "c", {0}), 2 * kHour)},
       {Gang(Waiting(1, 1, 5), 2)},
       {{1, {11}, {{"a", {0}}, {"b", {0}}}}}},
      {"a victim gang on both nodes counts once",
       {Node("a", 1), Node("b", 1), Node("c", 1)},
       {Spanning(Running(20, "bob", "a", {0}), {{"a", {0}}, {"b", {0}}}),
        Ran(Running(12, "bob", "c", {0}), 20 * kMin)},
       {Gang(Waiting(1, 1, 5), 2)},
       {{1, {20}, {{"a", {0}}, {"b", {0}}}}}},

      // ---- Several waiting jobs in one pass. ----
      {"two waiting jobs do not share victims",
       {Node("a", 2)},
       {Ran(Running(10, "bob", "a", {0}), 20 * kMin), Ran(Running(11, "bob", "a", {1}), 3 * kHour)},
       {Waiting(1, 1, 5), Waiting(2, 1, 5)},
       {{1, {10}, {{"a", {0}}}}, {2, {11}, {{"a", {1}}}}}},
      {"the GPUs an earlier preemptor takes are taken for later ones",
       {Node("a", 1)},
       {Running(10, "bob", "a", {0})},
       {Waiting(1, 1, 5), Waiting(2, 1, 5)},
       {{1, {10}, {{"a", {0}}}}}},
      {"a per-user limit counts an earlier preemptor's start: its user's next job waits",
       {Node("a", 2)},
       {Running(10, "bob", "a", {0}), Running(11, "bob", "a", {1})},
       {Waiting(1, 1, 5), Waiting(2, 1, 5)},
       {{1, {11}, {{"a", {1}}}}},
       Config(),
       {},
       {},
       one_job_each},
      {"a later waiting job may preempt where an earlier one found nothing",
       {Node("a", 2)},
       {Running(10, "bob", "a", {0}), Kept(Running(11, "bob", "a", {1}))},
       {Waiting(1, 2, 5), Waiting(2, 1, 5)},
       {{2, {10}, {{"a", {0}}}}}},
  };
}

TEST(PreemptTest, Table) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.what);
    std::vector<NodeState> nodes = Cluster(c.nodes, c.running, c.shares);
    std::vector<Preemption> got =
        ChoosePreemptions(c.waiting, nodes, c.running, c.policy, c.config, c.usage, kNow);
    ASSERT_EQ(got.size(), c.want.size());
    for (size_t i = 0; i < c.want.size(); ++i) {
      EXPECT_EQ(got[i].job, c.want[i].job) << "preemption " << i;
      EXPECT_EQ(got[i].victims, c.want[i].victims) << "preemption " << i;
      EXPECT_EQ(got[i].victim_reasons.size(), got[i].victims.size());
      ASSERT_EQ(got[i].parts.size(), c.want[i].parts.size()) << "preemption " << i;
      for (size_t p = 0; p < c.want[i].parts.size(); ++p) {
        EXPECT_EQ(got[i].parts[p].node, c.want[i].parts[p].node) << "part " << p;
        EXPECT_EQ(got[i].parts[p].gpu_indices, c.want[i].parts[p].gpu_indices) << "part " << p;
      }
    }
  }
}

TEST(PreemptTest, ReadyAtIsNowPlusTheLongestStop) {
  std::vector<RunningJob> running = {StopsIn(Running(10, "bob", "a", {0}), 40 * kSec),
                                     StopsIn(Running(11, "bob", "a", {1}), 2 * kMin)};
  std::vector<NodeState> nodes = Cluster({Node("a", 2)}, running);
  std::vector<PendingJob> waiting = {Waiting(1, 2, 5)};
  std::vector<Preemption> got =
      ChoosePreemptions(waiting, nodes, running, Policy(), Config(), {}, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ready_at, kNow + 2 * kMin);
}

// The reason a waiting job shows, and each victim's.
struct TextCase {
  const char* what;
  std::vector<RunningJob> running;  // on node "a", 2 GPUs
  PendingJob job;
  std::string reason;
  std::vector<std::string> victim_reasons;
  PreemptConfig config = Config();
  UsageByUser usage = {};
};

TEST(PreemptTest, Reasons) {
  PreemptConfig fair = Config();
  fair.for_fair_share = true;
  PreemptConfig aging = Config();
  aging.for_aging = true;
  std::vector<TextCase> cases = {
      {"one victim",
       {StopsIn(Running(12, "bob", "a", {0, 1}), 40 * kSec)},
       Waiting(31, 2, 100),
       "will preempt job 12 (bob, priority 0) in 40s",
       {"preempted by job 31 (priority 100)"}},
      {"two victims of one user and priority",
       {StopsIn(Running(12, "bob", "a", {0}), 40 * kSec),
        Ran(Running(14, "bob", "a", {1}), 2 * kHour)},
       Waiting(31, 2, 100),
       "will preempt jobs 12 and 14 (bob, priority 0) in 40s",
       {"preempted by job 31 (priority 100)", "preempted by job 31 (priority 100)"}},
      {"victims of different users",
       {StopsIn(Running(12, "bob", "a", {0}), kMin),
        Ran(Prio(Running(14, "carol", "a", {1}), 1), 30 * kMin)},
       Waiting(31, 2, 100),
       "will preempt jobs 14 (carol, priority 1) and 12 (bob, priority 0) in 1m00s",
       {"preempted by job 31 (priority 100)", "preempted by job 31 (priority 100)"}},
      {"a stop that takes no time",
       {StopsIn(Running(12, "bob", "a", {0, 1}), 0)},
       Waiting(31, 2, 100),
       "will preempt job 12 (bob, priority 0)",
       {"preempted by job 31 (priority 100)"}},
      {"fair share",
       {Running(12, "bob", "a", {0, 1})},
       Waiting(31, 2),
       "will preempt job 12 (bob, priority 0) in 30s",
       {"preempted by job 31 (alice, below their fair share)"},
       fair,
       {{"alice", 1.0}, {"bob", 10.0}}},
      {"aging",
       {Running(12, "bob", "a", {0, 1})},
       Aged(Waiting(31, 2)),
       "will preempt job 12 (bob, priority 0) in 30s",
       {"preempted by job 31 (alice, a large job waiting 3h00m)"},
       aging},
      {"attained service",
       {Ran(Running(12, "bob", "a", {0, 1}), 2 * kHour)},
       Waiting(31, 2),
       "will preempt job 12 (bob, priority 0) in 30s",
       {"preempted by job 31 (alice; this job had 4h00m of GPU time)"},
       Las()},
  };
  for (const TextCase& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<NodeState> nodes = Cluster({Node("a", 2)}, c.running);
    std::vector<PendingJob> waiting = {c.job};
    std::vector<Preemption> got =
        ChoosePreemptions(waiting, nodes, c.running, Policy(), c.config, c.usage, kNow);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].reason, c.reason);
    EXPECT_EQ(got[0].victim_reasons, c.victim_reasons);
  }
}

TEST(PreemptTest, ExplainGivesAVerdictPerRunningJob) {
  std::vector<RunningJob> running = {
      Ran(Running(10, "bob", "a", {0}), 42 * kMin),
      Ran(Running(11, "bob", "a", {1}), 20 * kMin),
      Kept(Running(12, "bob", "a", {2})),
      Stopping(Running(13, "bob", "a", {3})),
      Prio(Running(14, "bob", "b", {0}), 5),
      Prio(Running(15, "bob", "b", {1}), 7),
      Ran(Running(16, "bob", "b", {2}), 3 * kMin),
      Preempted(Running(17, "bob", "b", {3}), 2, 40 * kMin),
  };
  std::vector<NodeState> nodes = Cluster({Node("a", 4), Node("b", 4)}, running);
  PendingJob job = Waiting(1, 1, 5);
  std::vector<const PendingJob*> waiting = {&job};
  std::vector<PreemptCandidate> got =
      ExplainPreemption(job, waiting, nodes, running, Policy(), Config(), {}, kNow);
  std::vector<std::pair<JobId, std::string>> verdicts;
  for (const PreemptCandidate& pc : got) {
    verdicts.emplace_back(pc.job, fmt::format("{}{}", pc.eligible ? "+ " : "- ", pc.why));
  }
  EXPECT_THAT(
      verdicts,
      ElementsAre(
          std::pair<JobId, std::string>{11, "+ eligible: priority 0, ran 20m00s"},
          std::pair<JobId, std::string>{10, "+ eligible: priority 0, ran 42m00s"},
          std::pair<JobId, std::string>{16, "- ran 3m00s of min_runtime 10m00s"},
          std::pair<JobId, std::string>{17, "- spared for 20m00s more: preempted 2 times in a row"},
          std::pair<JobId, std::string>{13, "- being stopped"},
          std::pair<JobId, std::string>{12, "- not preemptible"},
          std::pair<JobId, std::string>{14, "- priority 5 is within preempt_priority_gap 1 of 5"},
          std::pair<JobId, std::string>{15, "- priority 7 is above this job's 5"}));
  EXPECT_EQ(got[0].user, "bob");
  EXPECT_EQ(got[0].priority, 0);
}

TEST(PreemptTest, ExplainNamesTheOtherRulesWhenOn) {
  std::vector<RunningJob> running = {Running(10, "bob", "a", {0}), Running(11, "alice", "a", {1})};
  std::vector<NodeState> nodes = Cluster({Node("a", 4)}, running);
  PendingJob job = Waiting(1, 1);
  std::vector<const PendingJob*> waiting = {&job};
  PreemptConfig both = Config();
  both.for_fair_share = true;
  both.for_aging = true;
  UsageByUser usage = {{"alice", 5.0}, {"bob", 1.0}};
  std::vector<PreemptCandidate> got =
      ExplainPreemption(job, waiting, nodes, running, Policy(), both, usage, kNow);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].job, 11);  // same run time: the higher id first
  EXPECT_EQ(got[0].why,
            "priority 0 is within preempt_priority_gap 1 of 0; fair share: same user; aging: same "
            "user");
  EXPECT_EQ(got[1].why,
            "priority 0 is within preempt_priority_gap 1 of 0; fair share: alice is not below "
            "their share; aging: not a large job");
}

// A large cluster: 100 nodes of 8 GPUs, each GPU held by a 1-GPU preemptible job, and 50
// waiting 8-GPU jobs. Each gets a whole node of its own; no victim is chosen twice.
TEST(PreemptTest, LargeClusterStaysSane) {
  std::vector<NodeState> bare;
  std::vector<RunningJob> running;
  for (int n = 0; n < 100; ++n) {
    std::string name = fmt::format("n{}", n);
    bare.push_back(Node(name, 8));
    for (int g = 0; g < 8; ++g) {
      JobId id = 1000 + n * 8 + g;
      running.push_back(Ran(Running(id, fmt::format("u{}", id % 10), name, {g}),
                            20 * kMin + (id * 7919 % 600) * kMin));
    }
  }
  std::vector<NodeState> nodes = Cluster(bare, running);
  std::vector<PendingJob> waiting;
  for (JobId id = 1; id <= 50; ++id) waiting.push_back(Waiting(id, 8, 5));
  std::vector<Preemption> got =
      ChoosePreemptions(waiting, nodes, running, Policy(), Config(), {}, kNow);
  ASSERT_EQ(got.size(), 50u);
  std::set<JobId> victims;
  std::set<std::string> used;
  for (const Preemption& p : got) {
    EXPECT_EQ(p.victims.size(), 8u);
    victims.insert(p.victims.begin(), p.victims.end());
    ASSERT_EQ(p.parts.size(), 1u);
    EXPECT_EQ(p.parts[0].gpu_indices.size(), 8u);
    used.insert(p.parts[0].node);
  }
  EXPECT_EQ(victims.size(), 400u);
  EXPECT_EQ(used.size(), 50u);
}

// The same cluster with every GPU shared by two 40 GiB jobs, and 50 waiting 4-GPU jobs: each
// needs 8 victims, past what the subset search looks at first.
TEST(PreemptTest, LargeSharedClusterStaysSane) {
  std::vector<NodeState> bare;
  std::vector<RunningJob> running;
  std::map<JobId, uint64_t> shares;
  for (int n = 0; n < 100; ++n) {
    std::string name = fmt::format("n{}", n);
    bare.push_back(Node(name, 8));
    for (int k = 0; k < 16; ++k) {
      JobId id = 1000 + n * 16 + k;
      running.push_back(Ran(Running(id, fmt::format("u{}", id % 10), name, {k / 2}),
                            20 * kMin + (id * 7919 % 600) * kMin));
      shares[id] = 40;
    }
  }
  std::vector<NodeState> nodes = Cluster(bare, running, shares);
  std::vector<PendingJob> waiting;
  for (JobId id = 1; id <= 50; ++id) waiting.push_back(Waiting(id, 4, 5));
  std::vector<Preemption> got =
      ChoosePreemptions(waiting, nodes, running, Policy(), Config(), {}, kNow);
  ASSERT_EQ(got.size(), 50u);
  std::set<JobId> victims;
  for (const Preemption& p : got) {
    EXPECT_EQ(p.victims.size(), 8u);
    victims.insert(p.victims.begin(), p.victims.end());
  }
  EXPECT_EQ(victims.size(), 400u);
}

TEST(PreemptTest, NothingRunningNothingPreempted) {
  std::vector<NodeState> nodes = {Node("a", 1)};
  std::vector<PendingJob> waiting = {Waiting(1, 2, 5)};
  EXPECT_THAT(ChoosePreemptions(waiting, nodes, {}, Policy(), Config(), {}, kNow), IsEmpty());
}

// The settings PreemptConfigFrom reads, named as the daemon's Config and the simulator's
// ReplayOptions name them, each away from its default.
struct AllPreemptSettings {
  int preempt_priority_gap = 7;
  bool preempt_for_fair_share = true;
  bool preempt_for_aging = true;
  int64_t min_runtime_ms = 123;
  int64_t preempt_spare_ms = 456;
  bool preempt_for_attained_service = true;
  int64_t attained_service_ms = 789;
};

TEST(PreemptConfigFromTest, EverySettingReachesItsField) {
  PreemptConfig c = PreemptConfigFrom(AllPreemptSettings{});
  // Fails to compile when PreemptConfig gains a field: PreemptConfigFrom must read it too, and
  // both the daemon's Config and the simulator's ReplayOptions must then carry its setting.
  const auto& [priority_gap, for_fair_share, for_aging, min_runtime_ms, spare_ms,
               for_attained_service, attained_service_ms] = c;
  EXPECT_EQ(priority_gap, 7);
  EXPECT_TRUE(for_fair_share);
  EXPECT_TRUE(for_aging);
  EXPECT_EQ(min_runtime_ms, 123);
  EXPECT_EQ(spare_ms, 456);
  EXPECT_TRUE(for_attained_service);
  EXPECT_EQ(attained_service_ms, 789);
  EXPECT_NE(c, PreemptConfig{});
}

}  // namespace
}  // namespace trainq
