// Node choice in a cluster: --node, --exclude-node, drained or lost nodes, and gangs
// (--nodes N): all parts at once on distinct nodes or nothing, with the reasons users see.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "src/core/placement.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr UnixMs kHour = 3600 * 1000;

// A GPU of 80 GiB with `free_gib` free (what others hold, as a foreign-free reading).
GpuState Gpu(int index, uint64_t free_gib = 80) {
  return {index, "GPU-" + std::to_string(index), 80 * kGiB, free_gib * kGiB, 0, {}};
}

NodeState Node(std::string name, std::vector<GpuState> gpus, bool accepts_new = true) {
  NodeState node;
  node.name = std::move(name);
  node.gpus = std::move(gpus);
  node.cpu_slots = 64;
  node.accepts_new = accepts_new;
  return node;
}

NodeState FourGpus(std::string name, uint64_t free_gib = 80, bool accepts_new = true) {
  return Node(std::move(name),
              {Gpu(0, free_gib), Gpu(1, free_gib), Gpu(2, free_gib), Gpu(3, free_gib)},
              accepts_new);
}

PendingJob Job(JobId id, int gpus, uint64_t gib = 20) {
  PendingJob j;
  j.id = id;
  j.gpus = gpus;
  j.mem_bytes = gib * kGiB;
  j.user = "ada";
  j.submitted_at = kNow - 1000 + id;
  return j;
}

PendingJob Gang(JobId id, int nodes, int gpus, uint64_t gib = 20) {
  PendingJob j = Job(id, gpus, gib);
  j.num_nodes = nodes;
  return j;
}

PolicyConfig NoHeadroom() {
  PolicyConfig c;
  c.headroom_bytes = 0;
  return c;
}

std::string ReasonOf(const PlacementResult& r, JobId id) {
  for (const auto& [job, text] : r.Reasons()) {
    if (job == id) return text;
  }
  return "(started)";
}

PlacementResult PlaceAll(const std::vector<PendingJob>& jobs, const std::vector<NodeState>& nodes,
                         const PolicyConfig& config = NoHeadroom(),
                         std::span<const Hold> holds = {}) {
  return Place(jobs, nodes, config, kNow, {}, holds);
}

// ---- --node, --exclude-node, drained nodes ----

TEST(NodeChoiceTest, OnlyAllowedNodeIsUsedEvenWhenAnotherFitsBetter) {
  PendingJob job = Job(1, 1);
  job.nodes_allowed = {"b"};
  // "a" is listed first and has a better fit; the job may only use b.
  PlacementResult r = PlaceAll({job}, {FourGpus("a", 21), FourGpus("b")});
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, "b");
}

TEST(NodeChoiceTest, ANodeHoldingTheJobsImageComesFirst) {
  // Spread would take b (most memory left); a holds the image, so the job loads nothing there.
  PendingJob job = Job(1, 1);
  job.images = {"env:3"};
  NodeState a = FourGpus("a", 40), b = FourGpus("b");
  PlacementResult r = PlaceAll({job}, {a, b});
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, "b");  // neither holds it: the rule alone decides
  a.images = {"localhost/env:3", "localhost/other:1"};
  r = PlaceAll({job}, {a, b});
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, "a");
  // A job without an image, or one of another name, is placed by the rule alone.
  r = PlaceAll({Job(1, 1)}, {a, b});
  EXPECT_EQ(r.starts[0].node, "b");
  job.images = {"env:4"};
  EXPECT_EQ(PlaceAll({job}, {a, b}).starts[0].node, "b");
  // The same with the fragmentation-aware rule, and for a gang's nodes.
  job.images = {"env:3"};
  PolicyConfig fgd = NoHeadroom();
  fgd.workload = {{1, 0.6, 1.0}};
  EXPECT_EQ(PlaceAll({job}, {b, a}, fgd).starts[0].node, "a");
  PendingJob gang = Gang(2, 2, 4);
  gang.images = {"env:3"};
  NodeState c = FourGpus("c", 40);
  c.images = {"localhost/env:3"};
  r = PlaceAll({gang}, {FourGpus("b"), a, c});
  ASSERT_EQ(r.starts.size(), 1u);
  std::set<std::string> nodes = {r.starts[0].parts[0].node, r.starts[0].parts[1].node};
  EXPECT_EQ(nodes, (std::set<std::string>{"a", "c"}));
  // Only a node that can start it now counts: a full holder does not keep it waiting.
  NodeState full = FourGpus("a", 5);
  full.images = {"localhost/env:3"};
  EXPECT_EQ(PlaceAll({job}, {full, b}).starts[0].node, "b");
}

TEST(NodeChoiceTest, ANodeHoldingMoreOfWhatTheJobShipsComesFirst) {
  // Spread would take b; the job ships 10 GiB from a (where it was submitted) and 1 GiB more.
  PendingJob job = Job(1, 1);
  job.shipped = {{"m-code", 1ull << 30}, {"m-data", 10ull << 30}};
  job.shipped_from = "a";
  NodeState a = FourGpus("a", 40), b = FourGpus("b"), c = FourGpus("c", 20);
  EXPECT_EQ(PlaceAll({job}, {a, b, c}).starts[0].node, "a");  // it holds it all
  job.shipped_from = "elsewhere";
  EXPECT_EQ(PlaceAll({job}, {a, b, c}).starts[0].node, "b");  // none holds any: the rule
  c.staged = {"m-data"};
  EXPECT_EQ(PlaceAll({job}, {a, b, c}).starts[0].node, "c");  // 1 GiB to fetch, not 11
  b.staged = {"m-code"};
  EXPECT_EQ(PlaceAll({job}, {a, b, c}).starts[0].node, "c");  // 10 GiB left on b
  // An image to load weighs more than any bytes; a gang's nodes are chosen the same way.
  job.images = {"env:3"};
  b.images = {"localhost/env:3"};
  EXPECT_EQ(PlaceAll({job}, {a, b, c}).starts[0].node, "b");
  PendingJob gang = Gang(2, 2, 4);
  gang.shipped = {{"m-data", 10ull << 30}};
  PlacementResult r = PlaceAll({gang}, {FourGpus("a"), FourGpus("b"), c, FourGpus("d", 30)});
  ASSERT_EQ(r.starts.size(), 1u);
  std::set<std::string> nodes = {r.starts[0].parts[0].node, r.starts[0].parts[1].node};
  EXPECT_TRUE(nodes.count("c")) << r.starts[0].parts[0].node << " " << r.starts[0].parts[1].node;
}

TEST(NodeChoiceTest, ExcludedNodeIsNeverUsed) {
  PendingJob job = Job(1, 1);
  job.nodes_excluded = {"a"};
  PlacementResult r = PlaceAll({job}, {FourGpus("a", 21), FourGpus("b")});
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, "b");
}

TEST(NodeChoiceTest, DrainedNodeTakesNothingNewButItsHoldingsStillCount) {
  NodeState drained = FourGpus("a");
  drained.accepts_new = false;
  PendingJob job = Job(1, 1);
  PlacementResult r = PlaceAll({job}, {drained, FourGpus("b", 10)});
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 1 GPU with 20.0 GiB usable; best: GPU 0 with 10.0 GiB on node b; a takes no "
            "new jobs (drained or lost)");
}

TEST(NodeChoiceTest, NamedNodeThatIsDrainedSaysSo) {
  PendingJob job = Job(1, 1);
  job.nodes_allowed = {"gpu3"};
  PlacementResult r = PlaceAll({job}, {FourGpus("gpu1"), FourGpus("gpu3", 80, false)});
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_EQ(ReasonOf(r, 1), "needs node gpu3 (--node), which takes no new jobs (drained or lost)");
}

TEST(NodeChoiceTest, NamedNodeNotInTheClusterSaysSo) {
  PendingJob job = Job(1, 1);
  job.nodes_allowed = {"gpu9"};
  PlacementResult r = PlaceAll({job}, {FourGpus("gpu1")});
  EXPECT_EQ(ReasonOf(r, 1), "needs node gpu9 (--node), which is not in the cluster");
}

TEST(NodeChoiceTest, NoneOfSeveralNamedNodesOpenListsEach) {
  PendingJob job = Job(1, 1);
  job.nodes_allowed = {"a", "b", "z"};
  job.nodes_excluded = {"c"};
  NodeState a = FourGpus("a", 80, false);
  PlacementResult r = PlaceAll({job}, {a, FourGpus("c")});
  EXPECT_EQ(ReasonOf(r, 1),
            "no node it may use (--node a, b, z; --exclude-node c) takes new jobs: a takes no new "
            "jobs (drained or lost), b is not in the cluster, z is not in the cluster");
}

TEST(NodeChoiceTest, AllowedNodesFullSayWhatTheyHave) {
  PendingJob job = Job(1, 1);
  job.nodes_allowed = {"a", "b"};
  PlacementResult r = PlaceAll({job}, {FourGpus("a", 11), FourGpus("b", 5), FourGpus("c")});
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_EQ(ReasonOf(r, 1),
            "on the nodes it may use (--node a, b): needs 1 GPU with 20.0 GiB usable; best: GPU "
            "0 with 11.0 GiB on node a");
}

TEST(NodeChoiceTest, CpuJobHonoursNodeLists) {
  PendingJob job = Job(1, 0);
  job.mem_bytes.reset();
  job.nodes_excluded = {"a"};
  PlacementResult r = PlaceAll({job}, {FourGpus("a"), FourGpus("b")});
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, "b");
}

TEST(NodeChoiceTest, ExplainNamesWhyANodesGpusAreClosed) {
  PendingJob job = Job(1, 1);
  job.nodes_allowed = {"b"};
  Explanation e = Explain(1, std::vector{job}, std::vector{FourGpus("a"), FourGpus("b", 10)},
                          NoHeadroom(), kNow);
  ASSERT_EQ(e.gpus.size(), 8u);
  EXPECT_EQ(e.gpus[0].closed, "node not in its --node");
  EXPECT_FALSE(e.gpus[0].fits);
  EXPECT_EQ(e.gpus[4].closed, "");
}

TEST(NodeChoiceTest, NoHoldOnANodeTheJobMayNotUse) {
  PolicyConfig config = NoHeadroom();
  config.aging_ms = kHour;
  PendingJob job = Job(1, 1, 40);
  job.queued_at = kNow - 2 * kHour;
  job.nodes_excluded = {"a"};
  PlacementResult r = PlaceAll({job}, {FourGpus("a", 30), FourGpus("b", 10)}, config);
  ASSERT_EQ(r.holds.size(), 1u);
  EXPECT_EQ(r.holds[0].node, "b");
}

// ---- Gangs ----

TEST(GangTest, FitsOnDistinctNodesAllAtOnce) {
  PlacementResult r = PlaceAll({Gang(1, 2, 4)}, {FourGpus("a"), FourGpus("b"), FourGpus("c")});
  ASSERT_EQ(r.starts.size(), 1u);
  const StartDecision& d = r.starts[0];
  ASSERT_EQ(d.parts.size(), 2u);
  EXPECT_NE(d.parts[0].node, d.parts[1].node);
  EXPECT_THAT(d.parts[0].gpu_indices, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(d.parts[1].gpu_indices, ElementsAre(0, 1, 2, 3));
  // The single-node fields repeat part 0.
  EXPECT_EQ(d.node, d.parts[0].node);
  EXPECT_EQ(d.gpu_indices, d.parts[0].gpu_indices);
  EXPECT_EQ(d.reserved_bytes, 20 * kGiB);
}

TEST(GangTest, SingleNodeDecisionHasOnePart) {
  PlacementResult r = PlaceAll({Job(1, 2)}, {FourGpus("a")});
  ASSERT_EQ(r.starts.size(), 1u);
  ASSERT_EQ(r.starts[0].parts.size(), 1u);
  EXPECT_EQ(r.starts[0].parts[0].node, "a");
  EXPECT_EQ(r.starts[0].parts[0].gpu_indices, r.starts[0].gpu_indices);
}

TEST(GangTest, ThatDoesNotFitStartsNothingAndSaysWhatIsMissing) {
  // Only gpu1 has four GPUs with 20 GiB; gpu2 has two.
  NodeState two_free = Node("gpu2", {Gpu(0), Gpu(1), Gpu(2, 5), Gpu(3, 5)});
  PlacementResult r = PlaceAll({Gang(1, 2, 4)}, {FourGpus("gpu1"), two_free});
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_EQ(ReasonOf(r, 1), "needs 2 nodes with 4 GPUs of 20.0 GiB usable each; 1 has them (gpu1)");
}

TEST(GangTest, NoneFitsNamesTheMost) {
  NodeState two_free = Node("gpu2", {Gpu(0), Gpu(1), Gpu(2, 5), Gpu(3, 5)});
  PlacementResult r = PlaceAll({Gang(1, 2, 4)}, {FourGpus("gpu1", 5), two_free});
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 2 nodes with 4 GPUs of 20.0 GiB usable each; none has them (most: 2 on node "
            "gpu2)");
}

TEST(GangTest, ExclusiveGangReason) {
  PendingJob gang = Gang(1, 2, 2);
  gang.mem_bytes.reset();
  NodeState busy = Node("b", {Gpu(0, 70), Gpu(1)});
  busy.gpus[0].holdings.push_back({9, 10 * kGiB, 10 * kGiB, false, kNow - kHour});
  PlacementResult r = PlaceAll({gang}, {Node("a", {Gpu(0), Gpu(1)}), busy});
  EXPECT_EQ(ReasonOf(r, 1), "needs 2 nodes with 2 whole GPUs each; 1 has them (a)");
}

// A whole-GPU gang never shares a GPU that a running whole-GPU job holds.
TEST(GangTest, ExclusiveGangSkipsAGpuHeldWhole) {
  PendingJob gang = Gang(2, 2, 1);
  gang.mem_bytes.reset();
  NodeState held = Node("node1", {Gpu(0)});
  held.gpus[0].holdings.push_back({1, 80 * kGiB, std::nullopt, true, kNow - 100});
  PlacementResult r = PlaceAll({gang}, {Node("node0", {Gpu(0)}), held});
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_EQ(ReasonOf(r, 2), "needs 2 nodes with 1 whole GPU each; 1 has them (node0)");
}

TEST(GangTest, MoreNodesThanTheClusterHas) {
  PlacementResult r = PlaceAll({Gang(1, 3, 1)}, {FourGpus("a"), FourGpus("b")});
  EXPECT_EQ(ReasonOf(r, 1), "needs 3 nodes at once; the cluster has 2");
}

TEST(GangTest, DrainedNodesLeaveTooFew) {
  PlacementResult r = PlaceAll({Gang(1, 2, 1)},
                               {FourGpus("a"), FourGpus("b", 80, false), FourGpus("c", 80, false)});
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 2 nodes at once; only 1 of the nodes it may use takes new jobs: b takes no new "
            "jobs (drained or lost), c takes no new jobs (drained or lost)");
}

TEST(GangTest, GangHonoursNodeLists) {
  PendingJob gang = Gang(1, 2, 1);
  gang.nodes_allowed = {"b", "c", "d"};
  gang.nodes_excluded = {"c"};
  PlacementResult r =
      PlaceAll({gang}, {FourGpus("a"), FourGpus("b"), FourGpus("c"), FourGpus("d")});
  ASSERT_EQ(r.starts.size(), 1u);
  std::set<std::string> nodes;
  for (const NodeGpus& part : r.starts[0].parts) nodes.insert(part.node);
  EXPECT_EQ(nodes, (std::set<std::string>{"b", "d"}));
}

TEST(GangTest, SpreadChoiceIsMostUsableThenNameWhateverTheNodeOrder) {
  // b leaves the most usable memory; a and c tie, by name: a before c.
  std::vector<NodeState> nodes = {FourGpus("c", 30), FourGpus("b"), FourGpus("a", 30)};
  PlacementResult r = PlaceAll({Gang(1, 2, 2)}, nodes);
  ASSERT_EQ(r.starts.size(), 1u);
  ASSERT_EQ(r.starts[0].parts.size(), 2u);
  EXPECT_EQ(r.starts[0].parts[0].node, "b");
  EXPECT_EQ(r.starts[0].parts[1].node, "a");
  std::reverse(nodes.begin(), nodes.end());
  PlacementResult again = PlaceAll({Gang(1, 2, 2)}, nodes);
  ASSERT_EQ(again.starts.size(), 1u);
  EXPECT_EQ(again.starts[0].parts[0].node, "b");
  EXPECT_EQ(again.starts[0].parts[1].node, "a");
}

TEST(GangTest, PackChoiceIsBestFitThenNameWhateverTheNodeOrder) {
  // c and a leave least usable memory; b is the loosest. Ties go by name: a before c.
  std::vector<NodeState> nodes = {FourGpus("c", 30), FourGpus("b"), FourGpus("a", 30)};
  PolicyConfig pack = NoHeadroom();
  pack.pack = true;
  PlacementResult r = PlaceAll({Gang(1, 2, 2)}, nodes, pack);
  ASSERT_EQ(r.starts.size(), 1u);
  ASSERT_EQ(r.starts[0].parts.size(), 2u);
  EXPECT_EQ(r.starts[0].parts[0].node, "a");
  EXPECT_EQ(r.starts[0].parts[1].node, "c");
  std::reverse(nodes.begin(), nodes.end());
  PlacementResult again = PlaceAll({Gang(1, 2, 2)}, nodes, pack);
  ASSERT_EQ(again.starts.size(), 1u);
  EXPECT_EQ(again.starts[0].parts[0].node, "a");
  EXPECT_EQ(again.starts[0].parts[1].node, "c");
}

TEST(GangTest, GangAfterABackfilledSmallJobWaits) {
  // The gang is first in line but does not fit (one node short); the small job behind it
  // backfills on a, and the gang's reason is measured after it.
  PendingJob gang = Gang(1, 2, 4);
  gang.priority = 1;
  NodeState half = Node("b", {Gpu(0), Gpu(1), Gpu(2, 5), Gpu(3, 5)});
  PlacementResult r = PlaceAll({gang, Job(2, 1, 70)}, {FourGpus("a"), half});
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].job, 2);
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 2 nodes with 4 GPUs of 20.0 GiB usable each; none has them (most: 3 on node "
            "a)");
}

TEST(GangTest, SmallJobFirstLeavesTooFewNodesForTheGang) {
  // The small job goes first and takes room on a; the gang, needing both nodes whole, waits.
  PendingJob small = Job(1, 1, 70);
  small.priority = 1;
  PlacementResult r = PlaceAll({small, Gang(2, 2, 4)}, {FourGpus("a"), FourGpus("b")});
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].job, 1);
  EXPECT_EQ(ReasonOf(r, 2), "needs 2 nodes with 4 GPUs of 20.0 GiB usable each; 1 has them (b)");
}

TEST(GangTest, NoGpuIsGivenTwiceInOnePass) {
  PlacementResult r = PlaceAll({Gang(1, 2, 2), Gang(2, 2, 2), Gang(3, 2, 2)},
                               {FourGpus("a", 30), FourGpus("b", 30)});
  ASSERT_EQ(r.starts.size(), 2u);
  std::set<std::pair<std::string, int>> taken;
  for (const StartDecision& d : r.starts) {
    for (const NodeGpus& part : d.parts) {
      for (int g : part.gpu_indices) EXPECT_TRUE(taken.insert({part.node, g}).second);
    }
  }
  EXPECT_THAT(ReasonOf(r, 3), HasSubstr("needs 2 nodes with 2 GPUs"));
}

TEST(GangTest, PerUserLimitCountsEveryNodesGpus) {
  PolicyConfig config = NoHeadroom();
  config.max_gpus_per_user = 6;
  PlacementResult r = PlaceAll({Gang(1, 2, 4)}, {FourGpus("a"), FourGpus("b")}, config);
  EXPECT_THAT(r.starts, IsEmpty());
  EXPECT_EQ(ReasonOf(r, 1), "waiting: needs 8 GPUs, more than max_gpus_per_user = 6");
  config.max_gpus_per_user = 10;
  PlacementResult two =
      PlaceAll({Gang(1, 2, 4), Job(2, 4)}, {FourGpus("a"), FourGpus("b"), FourGpus("c")}, config);
  ASSERT_EQ(two.starts.size(), 1u);
  EXPECT_EQ(two.starts[0].job, 1);
  EXPECT_EQ(ReasonOf(two, 2),
            "waiting: ada has 8 GPUs in use and this job needs 4; max_gpus_per_user = 10");
}

TEST(GangTest, AgedGangGetsGpusHeldOnEnoughNodes) {
  PolicyConfig config = NoHeadroom();
  config.aging_ms = kHour;
  PendingJob gang = Gang(1, 2, 2, 40);
  gang.queued_at = kNow - 2 * kHour;
  // Neither node has room now; a small job behind the gang would fit on both.
  std::vector<NodeState> nodes = {FourGpus("a", 30), FourGpus("b", 30)};
  PlacementResult r = PlaceAll({gang, Job(2, 1, 10)}, nodes, config);
  EXPECT_THAT(r.starts.size(), 1u);
  ASSERT_EQ(r.holds.size(), 1u);
  ASSERT_EQ(r.holds[0].parts.size(), 2u);
  EXPECT_NE(r.holds[0].parts[0].node, r.holds[0].parts[1].node);
  EXPECT_EQ(r.holds[0].node, r.holds[0].parts[0].node);
  // The small job went to GPUs not held for the gang.
  for (const NodeGpus& part : r.holds[0].parts) {
    if (part.node != r.starts[0].node) continue;
    for (int g : r.starts[0].gpu_indices) {
      EXPECT_EQ(std::count(part.gpu_indices.begin(), part.gpu_indices.end(), g), 0);
    }
  }
  EXPECT_THAT(ReasonOf(r, 1), HasSubstr("waited past the aging limit: a/GPU"));
  EXPECT_THAT(ReasonOf(r, 1), HasSubstr("b/GPU"));
  // Handed back, the hold stays where it was.
  PlacementResult next = PlaceAll({gang}, nodes, config, r.holds);
  ASSERT_EQ(next.holds.size(), 1u);
  EXPECT_EQ(next.holds[0].parts.size(), 2u);
  EXPECT_EQ(next.holds[0].parts[0].gpu_indices, r.holds[0].parts[0].gpu_indices);
  EXPECT_EQ(next.holds[0].parts[1].gpu_indices, r.holds[0].parts[1].gpu_indices);
}

TEST(GangTest, HostSlotsShortOnOneNode) {
  PendingJob gang = Gang(1, 2, 1);
  gang.cpus = 8;
  NodeState small = FourGpus("b");
  small.cpu_slots = 4;
  PlacementResult r = PlaceAll({gang}, {FourGpus("a"), small});
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 2 nodes with 1 GPU of 20.0 GiB usable each; 2 have the GPUs but only 1 also 8 "
            "CPU slots free");
}

}  // namespace
}  // namespace trainq
