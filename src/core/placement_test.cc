#include "src/core/placement.h"

#include <limits>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr UnixMs kSec = 1000;

constexpr uint64_t G(double gib) { return static_cast<uint64_t>(gib * kGiB); }

// A trainq attempt on a GPU: reserved GiB, what it uses now (nullopt: unknown), started
// `age` ms before kNow.
Holding Held(JobId job, double reserved, std::optional<double> used, UnixMs age,
             bool exclusive = false) {
  std::optional<uint64_t> used_bytes;
  if (used) used_bytes = G(*used);
  return {job, G(reserved), used_bytes, exclusive, kNow - age};
}

GpuState Gpu(int index, double total, double free, std::vector<Holding> held = {},
             int foreign = 0) {
  return {index, "GPU-" + std::to_string(index), G(total), G(free), foreign, std::move(held)};
}

NodeState Node(std::string name, std::vector<GpuState> gpus, int slots = 64, int used = 0) {
  NodeState node;
  node.name = std::move(name);
  node.gpus = std::move(gpus);
  node.cpu_slots = slots;
  node.cpu_slots_used = used;
  return node;
}

// Holds off: these cases test fitting, and their jobs were "submitted" at the epoch.
PolicyConfig Config(uint64_t headroom, int64_t ramp_up_ms) {
  PolicyConfig c;
  c.aging_ms = 0;
  c.headroom_bytes = headroom;
  c.ramp_up_ms = ramp_up_ms;
  return c;
}

PendingJob Job(JobId id, int gpus) {
  PendingJob j;
  j.id = id;
  j.gpus = gpus;
  j.submitted_at = id;
  return j;
}
PendingJob Shared(JobId id, double gib, int gpus = 1) {
  PendingJob j = Job(id, gpus);
  j.mem_bytes = G(gib);
  return j;
}
PendingJob Percent(JobId id, double pct) {
  PendingJob j = Job(id, 1);
  j.mem_percent = pct;
  return j;
}
PendingJob Exclusive(JobId id, int gpus = 1) { return Job(id, gpus); }
PendingJob Cpu(JobId id, int cpus) {
  PendingJob j = Job(id, 0);
  j.cpus = cpus;
  return j;
}
PendingJob WithCpus(PendingJob j, int cpus) {
  j.cpus = cpus;
  return j;
}
PendingJob LostOn(PendingJob j, std::string node) {
  j.lost_node = std::move(node);
  return j;
}

PendingJob NotBefore(PendingJob j, UnixMs not_before) {
  j.not_before = not_before;
  return j;
}
PendingJob With(PendingJob j, int priority, UnixMs submitted_at) {
  j.priority = priority;
  j.submitted_at = submitted_at;
  return j;
}

struct Start {
  JobId job;
  std::string node;
  std::vector<int> gpus;
  uint64_t reserved;
};

struct Case {
  const char* what;
  std::vector<NodeState> nodes;
  std::vector<PendingJob> jobs;
  std::vector<Start> starts;                           // in decision order
  std::vector<std::pair<JobId, std::string>> reasons;  // substrings, in order
  PolicyConfig config = Config(0, 60 * kSec);
};

const PolicyConfig kRealConfig = Config(256ull << 20, 60 * kSec);

PolicyConfig Packing() {
  PolicyConfig c = Config(0, 60 * kSec);
  c.pack = true;
  return c;
}

// A GPU last sampled `age` ms before kNow, every sample since failing with `error`.
GpuState Sampled(GpuState gpu, UnixMs age, std::string error = "") {
  gpu.sampled_at = kNow - age;
  gpu.sample_error = std::move(error);
  return gpu;
}

std::vector<Case> Cases() {
  return {
      {"two 30 GiB jobs share an 80 GiB GPU; a third waits though none has allocated yet",
       {Node("a", {Gpu(0, 80, 80)})},
       {Shared(1, 30), Shared(2, 30), Shared(3, 30)},
       {{1, "a", {0}, G(30)}, {2, "a", {0}, G(30)}},
       {{3, "needs 1 GPU with 30.0 GiB usable; best: GPU 0 with 20.0 GiB"}}},
      {"reservations of earlier passes count in full during ramp-up",
       {Node("a", {Gpu(0, 80, 80,
                       {Held(10, 30, std::nullopt, 10 * kSec),
                        Held(11, 30, std::nullopt, 59 * kSec)})})},
       {Shared(1, 30)},
       {},
       {{1, "needs 1 GPU with 30.0 GiB usable; best: GPU 0 with 20.0 GiB"}}},
      {"after ramp-up with unknown usage the probe is trusted",
       {Node("a", {Gpu(0, 80, 80, {Held(10, 30, std::nullopt, 60 * kSec)})})},
       {Shared(1, 70)},
       {{1, "a", {0}, G(70)}},
       {}},
      {"foreign usage (low free) is respected; a smaller job backfills",
       {Node("a", {Gpu(0, 80, 15, {}, 1)})},
       {Shared(1, 20), Shared(2, 10)},
       {{2, "a", {0}, G(10)}},
       {{1, "needs 1 GPU with 20.0 GiB usable; best: GPU 0 with 5.0 GiB"}}},
      {"headroom is kept free",
       {Node("a", {Gpu(0, 80, 20)})},
       {Shared(1, 20)},
       {},
       {{1, "needs 1 GPU with 20.0 GiB usable; best: GPU 0 with 19.8 GiB"}},
       kRealConfig},
      {"without headroom the same job fits exactly",
       {Node("a", {Gpu(0, 80, 20)})},
       {Shared(1, 20)},
       {{1, "a", {0}, G(20)}},
       {}},
      {"used_now below the reservation frees only the difference",
       {Node("a", {Gpu(0, 80, 55, {Held(10, 40, 25, 5 * kSec)})})},
       {Shared(1, 41)},
       {},
       {{1, "needs 1 GPU with 41.0 GiB usable; best: GPU 0 with 40.0 GiB"}}},
      {"used_now below the reservation: a job of the difference fits",
       {Node("a", {Gpu(0, 80, 55, {Held(10, 40, 25, 5 * kSec)})})},
       {Shared(1, 40)},
       {{1, "a", {0}, G(40)}},
       {}},
      {"a job using more than it reserved holds nothing outstanding",
       {Node("a", {Gpu(0, 80, 50, {Held(10, 20, 30, 5 * kSec)})})},
       {Shared(1, 50)},
       {{1, "a", {0}, G(50)}},
       {}},
      {"exclusive takes only a GPU with no holding and no foreign process",
       {Node("a", {Gpu(0, 80, 70, {}, 1), Gpu(1, 80, 70, {Held(10, 5, 5, kSec)}), Gpu(2, 40, 40)})},
       {Exclusive(1)},
       {{1, "a", {2}, G(40)}},
       {}},
      {"exclusive waits when every GPU is taken, naming who holds each",
       {Node("a",
             {Gpu(0, 80, 70, {}, 2), Gpu(1, 80, 70, {Held(10, 5, 5, kSec), Held(11, 5, 5, kSec)}),
              Gpu(2, 80, 70, {Held(12, 5, 5, kSec)}, 1)})},
       {Exclusive(1)},
       {},
       {{1,
         "needs 1 whole GPU (no other job or process on it); none is free; taken: GPU 0 by "
         "2 other processes, GPU 1 by jobs 10, 11, GPU 2 by job 12 and 1 other process"}}},
      {"two exclusive jobs in one pass do not share the free GPU",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 80, 80, {}, 1)})},
       {Exclusive(1), Exclusive(2)},
       {{1, "a", {0}, G(80)}},
       {{2, "none is free; taken: GPU 0 by job 1, GPU 1 by 1 other process"}}},
      {"nothing joins an exclusive GPU, even one that has not allocated",
       {Node("a", {Gpu(0, 80, 80, {Held(10, 80, std::nullopt, 3600 * kSec, true)})})},
       {Shared(1, 1), Percent(2, 1)},
       {},
       {{1, "needs 1 GPU with 1.0 GiB usable; every GPU is held by an exclusive job"},
        {2, "every GPU is held by an exclusive job"}}},
      {"multi-GPU jobs take GPUs of one node only",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 80, 80, {Held(10, 80, 80, kSec, true)})}),
        Node("b", {Gpu(0, 80, 80, {Held(11, 80, 80, kSec, true)}), Gpu(1, 80, 80)})},
       {Shared(1, 20, 2), Exclusive(2, 2)},
       {},
       {{1,
         "needs 2 GPUs with 20.0 GiB usable on one node; at most 1 on any node has room "
         "(node a: GPU 0 with 80.0 GiB)"},
        {2,
         "needs 2 whole GPUs (no other job or process on them) on one node; only 1 is free "
         "on node a; taken: a/GPU 1 by job 10, b/GPU 0 by job 11"}}},
      {"whole: memory others use counts though NVML lists no process for it",
       {Node("a", {Gpu(0, 80, 10), Gpu(1, 80, 79.5), Gpu(2, 80, 80)})},
       {Exclusive(1), Exclusive(2), Exclusive(3)},
       // GPU 0 has 70 GiB used with no process listed (another container); GPU 1's 0.5 GiB
       // is under the 1 GiB threshold.
       {{1, "a", {1}, G(80)}, {2, "a", {2}, G(80)}},
       {{3,
         "none is free; taken: GPU 0 with 70.0 GiB in use by others (whole_gpu_max_used = 1.0 "
         "GiB), GPU 1 by job 1, GPU 2 by job 2"}}},
      {"whole: the threshold is the policy's",
       {Node("a", {Gpu(0, 80, 70)})},
       {Exclusive(1)},
       {{1, "a", {0}, G(80)}},
       {},
       [] {
         PolicyConfig c = Config(0, 60 * kSec);
         c.whole_max_used_bytes = G(10);
         return c;
       }()},
      {"stale facts: nothing starts on a GPU sampled longer ago than the bound",
       {Node("a", {Sampled(Gpu(0, 80, 80), 11 * kSec, "bad.json: expected a JSON object"),
                   Sampled(Gpu(1, 80, 30), 2 * kSec)})},
       {Shared(1, 40), Shared(2, 20), Exclusive(3)},
       {{2, "a", {1}, G(20)}},
       {{1,
         "needs 1 GPU with 40.0 GiB usable; best: GPU 1 with 10.0 GiB; would fit but closed: "
         "GPU 0 last sampled 11s ago (sampling fails: bad.json: expected a JSON object), more "
         "than gpu_stale_after = 10s"},
        {3, "none is free; taken: GPU 1 by job 2; would fit but closed: GPU 0 last sampled 11s"}}},
      {"stale facts within the bound, or with the bound off, are used",
       {Node("a", {Sampled(Gpu(0, 80, 80), 10 * kSec), Sampled(Gpu(1, 80, 80), 3600 * kSec)})},
       {Shared(1, 40), Shared(2, 40)},
       {{1, "a", {0}, G(40)}, {2, "a", {1}, G(40)}},
       {},
       [] {
         PolicyConfig c = Config(0, 60 * kSec);
         c.stale_after_ms = 0;
         return c;
       }()},
      {"spread: a multi-GPU job on the node whose GPUs leave the most",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 80, 80), Gpu(2, 80, 80)}),
        Node("b", {Gpu(0, 40, 40), Gpu(1, 40, 40)})},
       {Shared(1, 30, 2)},
       {{1, "a", {0, 1}, G(30)}},
       {}},
      {"pack: a multi-GPU job on the node whose GPUs leave the least over",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 80, 80), Gpu(2, 80, 80)}),
        Node("b", {Gpu(0, 40, 40), Gpu(1, 40, 40)})},
       {Shared(1, 30, 2)},
       {{1, "b", {0, 1}, G(30)}},
       {},
       Packing()},
      {"over nodes too, an unused GPU comes before a better fit",
       {Node("a", {Gpu(0, 80, 40, {Held(10, 10, 10, kSec)})}), Node("b", {Gpu(0, 80, 80)})},
       {Shared(1, 30)},
       {{1, "b", {0}, G(30)}},
       {}},
      {"spread: fewest trainq jobs, then most usable memory, then lowest index",
       {Node("a", {Gpu(0, 80, 70, {Held(10, 10, 10, kSec)}), Gpu(1, 80, 80), Gpu(2, 40, 40),
                   Gpu(3, 40, 40)})},
       {Shared(1, 20), Shared(2, 30), Shared(3, 30), Shared(4, 30), Shared(5, 15)},
       // 1: no job on 1, 2, 3; GPU 1 has the most; 2: GPUs 2 and 3 tie, lower index; 3: GPU
       // 3; 4: one job on each, GPU 0 leaves 40 GiB, GPU 1 30; 5: GPU 0 (2 jobs) has 10 GiB
       // left, so GPU 1 (1 job).
       {{1, "a", {1}, G(20)},
        {2, "a", {2}, G(30)},
        {3, "a", {3}, G(30)},
        {4, "a", {0}, G(30)},
        {5, "a", {1}, G(15)}},
       {}},
      {"spread balances jobs over GPUs: eight shares on four GPUs, two each",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 80, 80), Gpu(2, 80, 80), Gpu(3, 80, 80)})},
       {Shared(1, 10), Shared(2, 10), Shared(3, 10), Shared(4, 10), Shared(5, 10), Shared(6, 10),
        Shared(7, 10), Shared(8, 10)},
       {{1, "a", {0}, G(10)},
        {2, "a", {1}, G(10)},
        {3, "a", {2}, G(10)},
        {4, "a", {3}, G(10)},
        {5, "a", {0}, G(10)},
        {6, "a", {1}, G(10)},
        {7, "a", {2}, G(10)},
        {8, "a", {3}, G(10)}},
       {}},
      {"spread: four more shares after four running ones, one on each GPU",
       {Node("a",
             {Gpu(0, 80, 70, {Held(10, 10, 10, kSec)}), Gpu(1, 80, 70, {Held(11, 10, 10, kSec)}),
              Gpu(2, 80, 70, {Held(12, 10, 10, kSec)}), Gpu(3, 80, 70, {Held(13, 10, 10, kSec)})})},
       {Shared(1, 10), Shared(2, 10), Shared(3, 10), Shared(4, 10)},
       {{1, "a", {0}, G(10)}, {2, "a", {1}, G(10)}, {3, "a", {2}, G(10)}, {4, "a", {3}, G(10)}},
       {}},
      {"pack: GPUs in use first, then best fit, then lowest index",
       {Node("a", {Gpu(0, 80, 70, {Held(10, 10, 10, kSec)}), Gpu(1, 80, 80), Gpu(2, 40, 40),
                   Gpu(3, 40, 40)})},
       {Shared(1, 20), Shared(2, 30), Shared(3, 30), Shared(4, 30), Shared(5, 15)},
       // 1: GPU 0, the one in use (50 GiB left); 2: GPU 0 again (20 left); 3: no GPU in use
       // fits, best fit among the others GPU 2 (10 left); 4: GPUs 0 and 2 are too full, best
       // fit GPU 3; 5: GPU 0, in use, has 20.
       {{1, "a", {0}, G(20)},
        {2, "a", {0}, G(30)},
        {3, "a", {2}, G(30)},
        {4, "a", {3}, G(30)},
        {5, "a", {0}, G(15)}},
       {},
       Packing()},
      {"priority first; a blocked big job lets later small ones start (backfill)",
       {Node("a", {Gpu(0, 80, 80)})},
       {Shared(1, 50), With(Shared(2, 40), 5, 2), Shared(3, 60), Shared(4, 30)},
       {{2, "a", {0}, G(40)}, {4, "a", {0}, G(30)}},
       {{1, "needs 1 GPU with 50.0 GiB usable; best: GPU 0 with 10.0 GiB"},
        {3, "needs 1 GPU with 60.0 GiB usable; best: GPU 0 with 10.0 GiB"}}},
      {"equal priority and submit time: lower id first",
       {Node("a", {Gpu(0, 80, 80)})},
       {With(Shared(6, 50), 0, 100), With(Shared(5, 50), 0, 100), With(Shared(4, 50), 0, 101)},
       {{5, "a", {0}, G(50)}},
       {{6, "best: GPU 0 with 30.0 GiB"}, {4, "best: GPU 0 with 30.0 GiB"}}},
      {"OOM backoff: not placed before not_before, seconds rounded up",
       {Node("a", {Gpu(0, 80, 80)})},
       {NotBefore(Shared(1, 10), kNow + 24 * kSec + 1), NotBefore(Shared(2, 10), kNow + 25 * kSec),
        NotBefore(Shared(3, 10), kNow)},
       {{3, "a", {0}, G(10)}},
       {{1, "retrying after out of memory in 25s"}, {2, "retrying after out of memory in 25s"}}},
      {"a lost node's job waits for its word, saying so",
       {Node("a", {Gpu(0, 80, 80)})},
       {LostOn(NotBefore(Shared(1, 10), kNow + 60 * kSec), "gpu2")},
       {},
       {{1,
         "node gpu2 was judged lost: waiting for it to say how its attempt ended; runs "
         "elsewhere in 60s"}}},
      {"CPU slots limit CPU jobs and GPU jobs alike",
       {Node("a", {Gpu(0, 80, 80)}, 16, 14)},
       {Cpu(1, 1), Cpu(2, 2), WithCpus(Shared(3, 10), 2)},
       {{1, "a", {}, 0}},
       {{2, "needs 2 CPU slots; 1 of 16 free (raise cpu_slots: trainq config set cpu-slots N)"},
        {3, "needs 2 CPU slots; 1 of 16 free (raise cpu_slots: trainq config set cpu-slots N)"}}},
      {"CPU slots taken earlier in the pass count",
       {Node("a", {Gpu(0, 80, 80)}, 16, 15)},
       {Shared(1, 10), Cpu(2, 1), Shared(3, 10)},
       {{1, "a", {0}, G(10)}},
       {{2, "needs 1 CPU slot; 0 of 16 free (raise cpu_slots: trainq config set cpu-slots N)"},
        {3, "needs 1 CPU slot; 0 of 16 free (raise cpu_slots: trainq config set cpu-slots N)"}}},
      {"CPU jobs need no GPU; a GPU node with free slots runs them",
       {Node("gpu", {Gpu(0, 80, 80)}, 2, 2), Node("cpu", {}, 8, 0)},
       {Cpu(1, 8), Cpu(2, 1)},
       {{1, "cpu", {}, 0}},
       {{2,
         "needs 1 CPU slot; the most free: 0 of 2, on node gpu (raise cpu_slots: trainq config set "
         "cpu-slots N)"}}},
      {"percent memory resolves per GPU",
       {Node("a", {Gpu(0, 80, 30), Gpu(1, 40, 40)}), Node("b", {Gpu(0, 80, 80)})},
       {Percent(1, 50), Percent(2, 60), Percent(3, 60)},
       // pack (best fit): 1: 40 GiB on a/0 (no room), 20 GiB on a/1 -- fits; 2: 48 GiB on b/0.
       {{1, "a", {1}, G(20)}, {2, "b", {0}, G(48)}},
       {{3,
         "needs 1 GPU with 60% of its memory usable; best: GPU 0 with 32.0 GiB on node b "
         "(needs 48.0 GiB there)"}},
       Packing()},
      {"a job asking more GPUs than any node has",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 80, 80), Gpu(2, 80, 80), Gpu(3, 80, 80)}),
        Node("b", {Gpu(0, 80, 80)})},
       {Shared(1, 1, 9999), Exclusive(2, 5)},
       {},
       {{1, "needs 9999 GPUs; the largest node has 4"},
        {2, "needs 5 GPUs; the largest node has 4"}}},
      {"no node has GPUs: GPU jobs wait, CPU jobs run",
       {Node("a", {}, 4)},
       {Shared(1, 1), Exclusive(2), Cpu(3, 4)},
       {{3, "a", {}, 0}},
       {{1, "needs 1 GPU; no node has GPUs"}, {2, "needs 1 GPU; no node has GPUs"}}},
      {"no nodes at all",
       {},
       {Cpu(1, 1), Shared(2, 1)},
       {},
       {{1, "needs 1 CPU slot; no node is up"}, {2, "needs 1 GPU; no node has GPUs"}}},
      {"more memory than any GPU has",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 40, 40)})},
       {Shared(1, 100)},
       {},
       {{1, "needs 1 GPU with 100.0 GiB usable; no GPU is that large (largest: 80.0 GiB)"}}},
      {"multi-GPU exclusive on one node",
       {Node("a", {Gpu(0, 80, 80), Gpu(1, 80, 80, {}, 1), Gpu(2, 80, 80), Gpu(3, 80, 80)})},
       {Exclusive(1, 3), Exclusive(2, 2)},
       {{1, "a", {0, 2, 3}, G(80)}},
       {{2, "on one node; none is free; taken: GPU 0 by job 1, GPU 1 by 1 other process"}}},
      {"multi-GPU shared job with only part of its GPUs free on the single node",
       {Node("a", {Gpu(0, 80, 30), Gpu(1, 80, 80), Gpu(2, 80, 10)})},
       {Shared(1, 25, 3), Shared(2, 50, 2)},
       {},
       {{1,
         "needs 3 GPUs with 25.0 GiB usable on one node; only 2 have room (GPU 0 with 30.0 "
         "GiB, GPU 1 with 80.0 GiB)"},
        {2, "only 1 has room (GPU 1 with 80.0 GiB)"}}},
  };
}

TEST(PlaceTest, Table) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.what);
    PlacementResult got = Place(c.jobs, c.nodes, c.config, kNow);
    ASSERT_EQ(got.starts.size(), c.starts.size());
    for (size_t i = 0; i < c.starts.size(); ++i) {
      const StartDecision& d = got.starts[i];
      const Start& want = c.starts[i];
      EXPECT_EQ(d.job, want.job) << "start " << i;
      EXPECT_EQ(d.node, want.node) << "job " << d.job;
      EXPECT_EQ(d.gpu_indices, want.gpus) << "job " << d.job;
      EXPECT_EQ(d.reserved_bytes, want.reserved) << "job " << d.job;
      auto job = std::find_if(c.jobs.begin(), c.jobs.end(),
                              [&d](const PendingJob& j) { return j.id == d.job; });
      ASSERT_NE(job, c.jobs.end());
      EXPECT_EQ(d.cpus, job->cpus);
    }
    ASSERT_EQ(got.Reasons().size(), c.reasons.size());
    for (size_t i = 0; i < c.reasons.size(); ++i) {
      EXPECT_EQ(got.Reasons()[i].first, c.reasons[i].first);
      EXPECT_THAT(got.Reasons()[i].second, HasSubstr(c.reasons[i].second));
    }
  }
}

TEST(PlaceTest, EveryJobIsStartedOrGivenAReasonExactlyOnce) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.what);
    PlacementResult got = Place(c.jobs, c.nodes, c.config, kNow);
    std::multiset<JobId> seen;
    for (const StartDecision& d : got.starts) seen.insert(d.job);
    for (const auto& [id, reason] : got.Reasons()) {
      seen.insert(id);
      EXPECT_FALSE(reason.empty()) << "job " << id;
    }
    std::multiset<JobId> want;
    for (const PendingJob& j : c.jobs) want.insert(j.id);
    EXPECT_EQ(seen, want);
  }
}

TEST(PlaceTest, NoDoubleBookingWithinAPassEvenWithoutRampUp) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, 80, 80)})};
  std::vector<PendingJob> jobs = {Shared(1, 50), Shared(2, 50)};
  PlacementResult got = Place(jobs, nodes, Config(0, 0), kNow);
  ASSERT_EQ(got.starts.size(), 1u);
  EXPECT_EQ(got.starts[0].job, 1);
  EXPECT_EQ(nodes[0].gpus[0].holdings.size(), 0u);  // the caller's state is not touched
}

TEST(UsableBytesTest, Formula) {
  PolicyConfig config = Config(256 * kMiB, 60 * kSec);
  struct UsableCase {
    const char* what;
    GpuState gpu;
    uint64_t usable;
  };
  const UsableCase cases[] = {
      {"empty GPU", Gpu(0, 80, 80), G(80) - 256 * kMiB},
      {"foreign use is in free", Gpu(0, 80, 20, {}, 3), G(20) - 256 * kMiB},
      {"unknown use in ramp-up counts in full", Gpu(0, 80, 80, {Held(1, 30, std::nullopt, 0)}),
       G(50) - 256 * kMiB},
      {"started in the future counts in full",
       Gpu(0, 80, 80, {Held(1, 30, std::nullopt, -10 * kSec)}), G(50) - 256 * kMiB},
      {"unknown use after ramp-up is ignored",
       Gpu(0, 80, 70, {Held(1, 30, std::nullopt, 61 * kSec)}), G(70) - 256 * kMiB},
      {"known use counts the rest", Gpu(0, 80, 70, {Held(1, 30, 10, 0)}), G(50) - 256 * kMiB},
      {"floored at zero", Gpu(0, 80, 10, {Held(1, 30, 0, 0)}), 0},
      {"headroom floors at zero", Gpu(0, 80, 0.1), 0},
      {"huge reservations saturate",
       Gpu(0, 80, 80,
           {{1, UINT64_MAX, std::nullopt, false, kNow},
            {2, UINT64_MAX, std::nullopt, false, kNow}}),
       0},
  };
  for (const UsableCase& c : cases) EXPECT_EQ(UsableBytes(c.gpu, config, kNow), c.usable) << c.what;
}

TEST(UsableBytesTest, ExtremeTimesDoNotOverflow) {
  PolicyConfig config = Config(0, 60 * kSec);
  GpuState gpu = Gpu(0, 80, 80, {{1, G(30), std::nullopt, false, INT64_MIN}});
  EXPECT_EQ(UsableBytes(gpu, config, INT64_MAX), G(80));  // long past ramp-up
  gpu.holdings[0].started_at = INT64_MAX;
  EXPECT_EQ(UsableBytes(gpu, config, INT64_MIN), G(50));  // in the future
}

TEST(NeededBytesTest, BytesPercentOrWholeGpu) {
  GpuState gpu = Gpu(0, 80, 80);
  EXPECT_EQ(NeededBytes(Shared(1, 20), gpu), G(20));
  EXPECT_EQ(NeededBytes(Percent(1, 40), gpu), G(32));
  EXPECT_EQ(NeededBytes(Percent(1, 100), gpu), G(80));
  EXPECT_EQ(NeededBytes(Percent(1, 1e-9), gpu), 1u);  // 0.86 bytes: rounded up, never 0
  EXPECT_EQ(NeededBytes(Exclusive(1), gpu), G(80));
  EXPECT_EQ(NeededBytes(Cpu(1, 1), gpu), 0u);
  gpu.total_bytes = UINT64_MAX;
  EXPECT_EQ(NeededBytes(Percent(1, 100), gpu), UINT64_MAX);
}

// The moments time alone changes a pass: a backoff ending, the aging limit reached (counted
// from when the job was last queued), a ramp-up window closing while jobs wait.
TEST(NextPassDueTest, BackoffAgingAndRampUp) {
  PolicyConfig config = Config(0, 60 * kSec);
  config.aging_ms = 3600 * kSec;
  PendingJob backoff = NotBefore(Shared(1, 10), kNow + 30 * kSec);
  PendingJob fresh = Shared(2, 10);
  fresh.submitted_at = kNow - 7200 * kSec;  // submitted long ago, queued again just now
  fresh.queued_at = kNow - 10 * kSec;
  std::vector<NodeState> nodes = {
      Node("a", {Gpu(0, 80, 10, {Held(9, 40, std::nullopt, 20 * kSec)}),
                 Gpu(1, 80, 10, {Held(8, 40, 1.0, 50 * kSec)})})};  // usage known: no ramp-up
  std::vector<const PendingJob*> waiting = {&backoff, &fresh};
  // Ramp-up of job 9 ends 40 s from now, the backoff 30 s from now: the backoff first.
  EXPECT_EQ(NextPassDue(waiting, nodes, config, kNow), kNow + 30 * kSec);
  waiting = {&fresh};
  EXPECT_EQ(NextPassDue(waiting, nodes, config, kNow), kNow + 40 * kSec);
  config.ramp_up_ms = 0;
  // Aged from queued_at, not submitted_at: 3590 s from now, one ms past the limit.
  EXPECT_EQ(NextPassDue(waiting, nodes, config, kNow), kNow + 3590 * kSec + 1);
  config.aging_ms = 0;
  EXPECT_EQ(NextPassDue(waiting, nodes, config, kNow), 0);
  // Nothing waits: no ramp-up can matter.
  config.ramp_up_ms = 60 * kSec;
  EXPECT_EQ(NextPassDue({}, nodes, config, kNow), 0);
}

// A pass must run when a GPU's facts turn stale, so the waiting reasons say why nothing
// starts there.
TEST(NextPassDueTest, FactsTurningStale) {
  PolicyConfig config = Config(0, 0);
  config.aging_ms = 0;
  config.stale_after_ms = 10 * kSec;
  PendingJob job = Shared(1, 100);
  std::vector<const PendingJob*> waiting = {&job};
  std::vector<NodeState> nodes = {Node("a", {Sampled(Gpu(0, 80, 80), 4 * kSec, "bad file")})};
  EXPECT_EQ(NextPassDue(waiting, nodes, config, kNow), kNow + 6 * kSec + 1);
  nodes[0].gpus[0].sampled_at = kNow - 11 * kSec;  // stale already
  EXPECT_EQ(NextPassDue(waiting, nodes, config, kNow), 0);
  config.stale_after_ms = 0;
  nodes[0].gpus[0].sampled_at = kNow - 4 * kSec;
  EXPECT_EQ(NextPassDue(waiting, nodes, config, kNow), 0);
}

TEST(NextPassDueTest, ExtremeTimesDoNotWrap) {
  PolicyConfig config = Config(0, 0);
  config.aging_ms = std::numeric_limits<int64_t>::max();
  PendingJob job = Shared(1, 10);
  job.queued_at = kNow;
  std::vector<const PendingJob*> waiting = {&job};
  EXPECT_EQ(NextPassDue(waiting, {}, config, kNow), std::numeric_limits<UnixMs>::max());
}

}  // namespace
}  // namespace trainq

namespace trainq {
namespace {

// A long queue of alike jobs: once a shape does not fit, the rest of that shape share its
// reason without being tried again, and smaller jobs behind them still backfill.
TEST(PlaceTest, AlikeJobsShareTheirReasonAndSmallerOnesStillBackfill) {
  std::vector<NodeState> nodes = {Node("n", {Gpu(0, 80, 80)})};
  std::vector<PendingJob> jobs;
  for (JobId id = 1; id <= 500; ++id) jobs.push_back(Shared(id, 50));
  jobs.push_back(Shared(501, 10));
  jobs.push_back(Cpu(502, 1));
  PlacementResult r = Place(jobs, nodes, PolicyConfig{}, 0);
  std::vector<JobId> started;
  for (const StartDecision& d : r.starts) started.push_back(d.job);
  EXPECT_EQ(started, (std::vector<JobId>{1, 501, 502}));
  ASSERT_EQ(r.Reasons().size(), 499u);
  for (const auto& [id, reason] : r.Reasons()) {
    EXPECT_EQ(reason, r.Reasons().front().second) << id;
  }
  EXPECT_THAT(r.Reasons().front().second, ::testing::HasSubstr("needs 1 GPU with 50.0 GiB usable"));
}

}  // namespace
}  // namespace trainq
