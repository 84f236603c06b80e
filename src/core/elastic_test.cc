// Elastic jobs' resize decisions against a fake clock (the `now` they are given): growth into
// idle GPUs at a start and later, the rate limit, the gain a restart must buy, held GPUs; shrinks
// toward the min for a waiting job, the fewest GPUs, the priority rule, one shrink per job, the
// texts.
#include "src/core/elastic.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr int64_t kMin = 60 * 1000;
const ElasticConfig kConfig{30 * kMin};

NodeState Node(std::string name, int gpus) {
  NodeState node;
  node.name = std::move(name);
  for (int i = 0; i < gpus; ++i) {
    node.gpus.push_back({i, fmt::format("GPU-{}", i), 80 * kGiB, 80 * kGiB, 0, {}});
  }
  node.cpu_slots = 64;
  return node;
}

// `job` holds whole GPUs `gpus` of `node`, as the nodes a pass sees show it.
void Take(NodeState& node, JobId job, std::vector<int> gpus) {
  for (int g : gpus) node.gpus[size_t(g)].holdings.push_back({job, 80 * kGiB, 0, true, 0});
}

// An elastic job on whole GPUs that has run `ran_ms` at its size.
ElasticRun Elastic(JobId job, int min, int max, std::string node, std::vector<int> gpus,
                   int64_t ran_ms = 60 * kMin) {
  ElasticRun r;
  r.job = job;
  r.min_gpus = min;
  r.max_gpus = max;
  r.where = {std::move(node), std::move(gpus)};
  r.sized_at = kNow - ran_ms;
  r.stop_ms = 70 * 1000;
  return r;
}

ElasticRun Starting(ElasticRun r) {
  r.starting = true;
  r.sized_at = 0;
  return r;
}

PendingJob Waiting(JobId id, int gpus, int priority = 0) {
  PendingJob j;
  j.id = id;
  j.gpus = gpus;
  j.priority = priority;
  j.submitted_at = kNow - kMin;
  return j;
}

std::vector<int> To(const Resize& r) { return r.to.gpu_indices; }

TEST(ElasticGrowth, AJobThatStartsTakesTheIdleGpusOfItsNodeUpToItsMax) {
  std::vector<NodeState> nodes = {Node("a", 4), Node("b", 4)};
  Take(nodes[0], 1, {0});  // the job being started, at its min
  Take(nodes[0], 9, {3});  // someone else's
  std::vector<ElasticRun> runs = {Starting(Elastic(1, 1, 4, "a", {0}))};
  std::vector<Resize> got = ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, 1u);
  EXPECT_EQ(got[0].from_gpus, 1);
  EXPECT_EQ(got[0].to.node, "a");
  EXPECT_THAT(To(got[0]), ElementsAre(0, 1, 2));  // GPU 3 is taken; node b's are not its node's
  EXPECT_EQ(got[0].reason, "grows from 1 to 3 GPUs (GPUs 1, 2 idle)");

  // Its max caps it.
  runs[0].max_gpus = 2;
  got = ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(To(got[0]), ElementsAre(0, 1));
}

TEST(ElasticGrowth, ARunningJobWaitsOutItsMinRuntimeAndGrowsOnlyForARealGain) {
  std::vector<NodeState> nodes = {Node("a", 8)};
  Take(nodes[0], 1, {0, 1});
  std::vector<ElasticRun> runs = {Elastic(1, 1, 8, "a", {0, 1}, 29 * kMin)};
  EXPECT_THAT(ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow), IsEmpty());  // 29m of 30m
  std::vector<Resize> got = ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow + kMin);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(To(got[0]), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));

  // 2 -> 3 GPUs pays for a restart (1.5 times); 4 -> 5 does not, but does at a start.
  Take(nodes[0], 9, {3, 4, 5, 6, 7});
  EXPECT_EQ(ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow + kMin).size(), 1u);
  Take(nodes[0], 1, {2, 3});
  nodes[0].gpus[3].holdings.erase(nodes[0].gpus[3].holdings.begin());  // job 9's
  nodes[0].gpus[4].holdings.clear();
  runs[0].where.gpu_indices = {0, 1, 2, 3};
  EXPECT_THAT(ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow + kMin), IsEmpty());
  runs[0] = Starting(runs[0]);
  std::vector<Resize> at_start = ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(at_start.size(), 1u);
  EXPECT_THAT(To(at_start[0]), ElementsAre(0, 1, 2, 3, 4));

  // A job being stopped does not grow.
  runs[0] = Elastic(1, 1, 8, "a", {0, 1, 2, 3});
  runs[0].stopping = true;
  for (int g : {5, 6, 7}) nodes[0].gpus[size_t(g)].holdings.clear();
  EXPECT_THAT(ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow), IsEmpty());
}

TEST(ElasticGrowth, GpusHeldForAnotherJobOrClosedToNewJobsAreNotTaken) {
  std::vector<NodeState> nodes = {Node("a", 4)};
  Take(nodes[0], 1, {0});
  std::vector<ElasticRun> runs = {Starting(Elastic(1, 1, 4, "a", {0}))};
  std::vector<trainq::Hold> holds = {{7, "a", {1, 2}, {{"a", {1, 2}}}, true}};
  std::vector<Resize> got = ChooseGrowth(runs, nodes, holds, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(To(got[0]), ElementsAre(0, 3));

  PolicyConfig policy;
  policy.devices = {0, 1};  // the device allowlist
  EXPECT_THAT(To(ChooseGrowth(runs, nodes, {}, policy, kConfig, kNow)[0]), ElementsAre(0, 1));
  policy = {};
  policy.paused_gpus = {1, 2, 3};
  EXPECT_THAT(ChooseGrowth(runs, nodes, {}, policy, kConfig, kNow), IsEmpty());
  nodes[0].gpus[2].foreign_processes = 1;   // someone else's process
  nodes[0].gpus[3].free_bytes = 10 * kGiB;  // 70 GiB used by something trainq did not start
  EXPECT_THAT(To(ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow)[0]), ElementsAre(0, 1));
  nodes[0].accepts_new = false;  // drained
  EXPECT_THAT(ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow), IsEmpty());
}

TEST(ElasticGrowth, IdleGpusGoToTheSmallestJobFirst) {
  std::vector<NodeState> nodes = {Node("a", 8)};
  Take(nodes[0], 1, {0, 1, 2, 3});
  Take(nodes[0], 2, {4});
  std::vector<ElasticRun> runs = {Elastic(1, 1, 8, "a", {0, 1, 2, 3}), Elastic(2, 1, 8, "a", {4})};
  std::vector<Resize> got = ChooseGrowth(runs, nodes, {}, {}, kConfig, kNow);
  // Three idle GPUs: job 2 takes them all (1 -> 4) before job 1 is the smallest.
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, 2u);
  EXPECT_THAT(To(got[0]), ElementsAre(4, 5, 6, 7));
}

TEST(ElasticShrink, AWaitingJobTakesTheFewestGpusFromTheJobFurthestAboveItsMin) {
  std::vector<NodeState> nodes = {Node("a", 8)};
  Take(nodes[0], 1, {0, 1, 2, 3, 4, 5});
  Take(nodes[0], 2, {6, 7});
  std::vector<ElasticRun> runs = {Elastic(1, 2, 8, "a", {0, 1, 2, 3, 4, 5}),
                                  Elastic(2, 1, 2, "a", {6, 7})};
  PendingJob w = Waiting(31, 3);
  std::vector<const PendingJob*> waiting = {&w};
  std::vector<Shrink> got = ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, 31u);
  ASSERT_EQ(got[0].resizes.size(), 1u);
  EXPECT_EQ(got[0].resizes[0].job, 1u);
  EXPECT_THAT(To(got[0].resizes[0]), ElementsAre(0, 1, 2));  // keeps its first GPUs
  EXPECT_EQ(got[0].resizes[0].reason, "shrinks from 6 to 3 GPUs for job 31");
  ASSERT_EQ(got[0].parts.size(), 1u);
  EXPECT_THAT(got[0].parts[0].gpu_indices, ElementsAre(3, 4, 5));
  EXPECT_EQ(got[0].ready_at, kNow + 70 * 1000);
  EXPECT_EQ(got[0].reason, "will start when job 1 shrinks from 6 to 3 GPUs (in 1m10s)");
  EXPECT_EQ(ShrinkHold(got[0]).job, 31u);
  EXPECT_TRUE(ShrinkHold(got[0]).preempting);
  EXPECT_THAT(ShrinkHold(got[0]).gpu_indices, ElementsAre(3, 4, 5));

  // More than the jobs can give up above their mins (4 + 1): nothing shrinks.
  w.gpus = 6;
  EXPECT_THAT(ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow), IsEmpty());
  // Both give up some: job 1 down to 2, job 2 down to 1.
  w.gpus = 5;
  got = ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].resizes.size(), 2u);
  EXPECT_THAT(To(got[0].resizes[0]), ElementsAre(0, 1));
  EXPECT_THAT(To(got[0].resizes[1]), ElementsAre(6));
}

TEST(ElasticShrink, NotBeforeMinRuntimeNorForALowerPriorityNorTwiceInOneCall) {
  std::vector<NodeState> nodes = {Node("a", 4)};
  Take(nodes[0], 1, {0, 1, 2, 3});
  std::vector<ElasticRun> runs = {Elastic(1, 1, 4, "a", {0, 1, 2, 3}, 20 * kMin)};
  PendingJob w = Waiting(31, 1);
  PendingJob v = Waiting(32, 1);
  std::vector<const PendingJob*> waiting = {&w, &v};
  EXPECT_THAT(ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow), IsEmpty());
  // Past its min runtime; job 32 finds it shrunk already.
  std::vector<Shrink> got = ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow + 10 * kMin);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, 31u);
  EXPECT_THAT(To(got[0].resizes[0]), ElementsAre(0, 1, 2));

  runs[0].priority = 5;  // a waiting job of lower priority does not shrink it
  EXPECT_THAT(ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow + 10 * kMin), IsEmpty());
  w.priority = 5;
  EXPECT_EQ(ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow + 10 * kMin).size(), 1u);

  // At its min, or stopping: nothing to give.
  runs[0].priority = 0;
  runs[0].min_gpus = 4;
  EXPECT_THAT(ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow + 10 * kMin), IsEmpty());
  runs[0].min_gpus = 1;
  runs[0].stopping = true;
  EXPECT_THAT(ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow + 10 * kMin), IsEmpty());
}

TEST(ElasticShrink, ANodeWithIdleGpusNeedsFewerTakenAndGangsAreLeftToPreemption) {
  std::vector<NodeState> nodes = {Node("a", 4), Node("b", 4)};
  Take(nodes[0], 1, {0, 1, 2, 3});
  Take(nodes[1], 2, {0, 1, 2});
  std::vector<ElasticRun> runs = {Elastic(1, 1, 4, "a", {0, 1, 2, 3}),
                                  Elastic(2, 1, 4, "b", {0, 1, 2})};
  PendingJob w = Waiting(31, 2);
  std::vector<const PendingJob*> waiting = {&w};
  std::vector<Shrink> got = ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].resizes.size(), 1u);
  EXPECT_EQ(got[0].resizes[0].job, 2u);  // b has an idle GPU: one taken, not two
  EXPECT_THAT(To(got[0].resizes[0]), ElementsAre(0, 1));
  EXPECT_EQ(got[0].parts[0].node, "b");
  EXPECT_THAT(got[0].parts[0].gpu_indices, ElementsAre(2, 3));

  w.num_nodes = 2;
  EXPECT_THAT(ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow), IsEmpty());
}

// An elastic gang of `gpus` whole GPUs per node, MIN:MAX nodes, on `parts` (node names, GPU 0
// to gpus-1 of each), last sized `ran_ms` ago.
GangRun Gang(JobId job, int gpus, int min, int max, std::vector<std::string> parts,
             int64_t ran_ms = 60 * kMin) {
  GangRun g;
  g.shape = Waiting(job, gpus);
  g.shape.num_nodes = min;
  g.shape.max_nodes = max;
  for (std::string& node : parts) {
    std::vector<int> gpu_indices(static_cast<size_t>(gpus));
    for (int i = 0; i < gpus; ++i) gpu_indices[size_t(i)] = i;
    g.parts.push_back({std::move(node), std::move(gpu_indices)});
  }
  g.sized_at = kNow - ran_ms;
  return g;
}

std::vector<std::string> AddedNodes(const GangGrowth& g) {
  std::vector<std::string> out;
  for (const NodeGpus& part : g.added) out.push_back(part.node);
  return out;
}

TEST(ElasticGangGrowth, AGangThatStartsTakesNodesWhoseGpusAreIdleUpToItsMax) {
  std::vector<NodeState> nodes = {Node("a", 2), Node("b", 2), Node("c", 2), Node("d", 2),
                                  Node("e", 2)};
  Take(nodes[0], 1, {0, 1});     // its first part, being started
  Take(nodes[1], 9, {0});        // b has one GPU of another job: no room for a 2-GPU part
  nodes[3].accepts_new = false;  // d is drained
  GangRun g = Gang(1, 2, 1, 3, {"a"});
  g.starting = true;
  std::vector<GangGrowth> got = ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, 1u);
  EXPECT_EQ(got[0].from_nodes, 1);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("c", "e"));
  EXPECT_THAT(got[0].added[0].gpu_indices, ElementsAre(0, 1));
  EXPECT_EQ(got[0].reason, "grows from 1 to 3 nodes (c, e idle)");

  // At its max it takes no more; a node held for another job is not idle.
  g.shape.max_nodes = 2;
  got = ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("c"));
  std::vector<Hold> holds = {{7, "c", {1}, {}}};
  got = ChooseGangGrowth(std::span(&g, 1), nodes, holds, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("e"));
}

TEST(ElasticGangGrowth, ARunningGangGrowsAfterMinRuntimeByHalfItsNodesOrMore) {
  std::vector<NodeState> nodes = {Node("a", 1), Node("b", 1), Node("c", 1), Node("d", 1),
                                  Node("e", 1)};
  Take(nodes[0], 1, {0});
  Take(nodes[1], 1, {0});
  // Ran 10 minutes at its size of 2 nodes: it waits for min_runtime.
  GangRun g = Gang(1, 1, 1, 4, {"a", "b"}, 10 * kMin);
  EXPECT_THAT(ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow), IsEmpty());
  g.sized_at = kNow - 30 * kMin;
  std::vector<GangGrowth> got = ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("c", "d"));  // to 4, its max
  // One idle node would take it from 2 to 3: 1.5 times, enough.
  Take(nodes[3], 9, {0});
  Take(nodes[4], 9, {0});
  got = ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("c"));
  // From 3 nodes, one more is not worth the workers' restart.
  g = Gang(1, 1, 1, 4, {"a", "b", "c"});
  Take(nodes[2], 1, {0});
  nodes[3].gpus[0].holdings.clear();
  EXPECT_THAT(ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow), IsEmpty());
  // Nor does a gang that is stopping grow.
  g = Gang(1, 1, 1, 4, {"a", "b"});
  g.stopping = true;
  EXPECT_THAT(ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow), IsEmpty());
}

TEST(ElasticGangGrowth, TheGangWithFewestNodesGrowsFirstAndEachNodeGoesOnce) {
  std::vector<NodeState> nodes = {Node("a", 1), Node("b", 1), Node("c", 1),
                                  Node("d", 1), Node("e", 1), Node("f", 1)};
  Take(nodes[0], 1, {0});
  Take(nodes[1], 1, {0});
  Take(nodes[2], 2, {0});
  std::vector<GangRun> gangs = {Gang(1, 1, 1, 8, {"a", "b"}), Gang(2, 1, 1, 8, {"c"})};
  gangs[0].starting = gangs[1].starting = true;
  std::vector<GangGrowth> got = ChooseGangGrowth(gangs, nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 2u);
  // d goes to job 2 (1 node), e to job 1 (2 against 2: the lower id), f to job 2.
  EXPECT_EQ(got[0].job, 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("e"));
  EXPECT_EQ(got[1].job, 2u);
  EXPECT_THAT(AddedNodes(got[1]), ElementsAre("d", "f"));
}

TEST(ElasticGangGrowth, APartGoesOnlyWhereTheJobMayGo) {
  std::vector<NodeState> nodes = {Node("a", 1), Node("b", 1), Node("c", 1)};
  Take(nodes[0], 1, {0});
  GangRun g = Gang(1, 1, 1, 3, {"a"});
  g.starting = true;
  g.shape.nodes_excluded = {"b"};
  std::vector<GangGrowth> got = ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("c"));
  g.shape.nodes_excluded.clear();
  g.shape.nodes_allowed = {"a", "b"};
  got = ChooseGangGrowth(std::span(&g, 1), nodes, {}, {}, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("b"));
}

TEST(ElasticGangShrink, AGangAboveItsMinGivesUpItsLastPartsNodeAndRestartsOnTheRest) {
  std::vector<NodeState> nodes = {Node("a", 1), Node("b", 1), Node("c", 1)};
  Take(nodes[0], 1, {0});
  Take(nodes[1], 1, {0});
  Take(nodes[2], 1, {0});
  GangRun g = Gang(1, 1, 1, 3, {"a", "b", "c"});
  g.stop_ms = 70 * 1000;
  PendingJob w = Waiting(5, 1);
  const PendingJob* waiting[] = {&w};
  std::vector<Shrink> got = ChooseShrinks(waiting, nodes, {}, {}, kConfig, kNow, std::span(&g, 1));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, 5u);
  ASSERT_EQ(got[0].parts.size(), 1u);
  EXPECT_EQ(got[0].parts[0].node, "c");
  EXPECT_EQ(got[0].ready_at, kNow + 70 * 1000);
  EXPECT_EQ(got[0].reason, "will start when job 1 shrinks from 3 to 2 nodes (in 1m10s)");
  ASSERT_EQ(got[0].resizes.size(), 1u);
  const Resize& z = got[0].resizes[0];
  EXPECT_EQ(z.job, 1u);
  EXPECT_EQ(z.from_nodes, 3);
  ASSERT_EQ(z.to_parts.size(), 2u);
  EXPECT_EQ(z.to_parts[0].node, "a");
  EXPECT_EQ(z.to_parts[1].node, "b");
  EXPECT_EQ(z.to.node, "a");
  EXPECT_EQ(z.reason, "shrinks from 3 to 2 nodes for job 5 (it gives up c)");
  Hold h = ShrinkHold(got[0]);
  EXPECT_TRUE(h.preempting);
  EXPECT_EQ(h.node, "c");

  // Two waiting jobs: the gang shrinks once per call.
  PendingJob w2 = Waiting(6, 1);
  const PendingJob* two[] = {&w, &w2};
  got = ChooseShrinks(two, nodes, {}, {}, kConfig, kNow, std::span(&g, 1));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, 5u);
}

TEST(ElasticGangShrink, NotAtItsMinNorBeforeMinRuntimeNorForALowerPriority) {
  std::vector<NodeState> nodes = {Node("a", 1), Node("b", 1)};
  Take(nodes[0], 1, {0});
  Take(nodes[1], 1, {0});
  PendingJob w = Waiting(5, 1);
  const PendingJob* waiting[] = {&w};
  GangRun g = Gang(1, 1, 2, 3, {"a", "b"});  // at its min, 2
  EXPECT_THAT(ChooseShrinks(waiting, nodes, {}, {}, kConfig, kNow, std::span(&g, 1)), IsEmpty());
  g = Gang(1, 1, 1, 3, {"a", "b"}, 10 * kMin);  // 10 minutes at its size
  EXPECT_THAT(ChooseShrinks(waiting, nodes, {}, {}, kConfig, kNow, std::span(&g, 1)), IsEmpty());
  g = Gang(1, 1, 1, 3, {"a", "b"});
  g.shape.priority = 1;  // above the waiting job's
  EXPECT_THAT(ChooseShrinks(waiting, nodes, {}, {}, kConfig, kNow, std::span(&g, 1)), IsEmpty());
  g.shape.priority = 0;
  g.stopping = true;
  EXPECT_THAT(ChooseShrinks(waiting, nodes, {}, {}, kConfig, kNow, std::span(&g, 1)), IsEmpty());
  g.stopping = false;
  std::vector<Shrink> got = ChooseShrinks(waiting, nodes, {}, {}, kConfig, kNow, std::span(&g, 1));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].parts[0].node, "b");
  EXPECT_EQ(got[0].reason, "will start when job 1 shrinks from 2 to 1 node");
}

TEST(ElasticGangShrink, AJobOnOneNodeThatCanShrinkIsAskedBeforeAGang) {
  std::vector<NodeState> nodes = {Node("a", 2), Node("b", 1)};
  Take(nodes[0], 2, {0, 1});
  Take(nodes[1], 1, {0});
  std::vector<ElasticRun> runs = {Elastic(2, 1, 2, "a", {0, 1})};
  GangRun g = Gang(1, 1, 1, 2, {"c", "b"});
  PendingJob w = Waiting(5, 1);
  const PendingJob* waiting[] = {&w};
  std::vector<Shrink> got =
      ChooseShrinks(waiting, nodes, runs, {}, kConfig, kNow, std::span(&g, 1));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].resizes.size(), 1u);
  EXPECT_EQ(got[0].resizes[0].job, 2u);
  EXPECT_TRUE(got[0].resizes[0].to_parts.empty());
}

// Growth stays within max_gpus_per_user: what the user holds on every node, and what the same
// call gives.
TEST(ElasticGrowth, AUsersGrowthStopsAtMaxGpusPerUser) {
  std::vector<NodeState> nodes = {Node("a", 4), Node("b", 1)};
  Take(nodes[0], 1, {0});
  nodes[0].use_by_user["ada"].gpus = 1;
  Take(nodes[1], 2, {0});
  nodes[1].use_by_user["ada"].gpus = 1;  // another job of hers
  ElasticRun r = Starting(Elastic(1, 1, 4, "a", {0}));
  r.user = "ada";
  PolicyConfig capped;
  capped.max_gpus_per_user = 3;
  std::vector<Resize> got = ChooseGrowth(std::span(&r, 1), nodes, {}, capped, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(To(got[0]), ElementsAre(0, 1));  // 2 held, 1 more reaches 3
  r.user = "bob";
  got = ChooseGrowth(std::span(&r, 1), nodes, {}, capped, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(To(got[0]), ElementsAre(0, 1, 2, 3));  // bob holds none yet: up to his 3 more
}

TEST(ElasticGangGrowth, AGangGrowsOnlyWithinMaxGpusPerUser) {
  std::vector<NodeState> nodes = {Node("a", 2), Node("b", 2), Node("c", 2), Node("d", 2)};
  Take(nodes[0], 1, {0, 1});
  nodes[0].use_by_user["ada"].gpus = 2;
  GangRun g = Gang(1, 2, 1, 4, {"a"});
  g.shape.user = "ada";
  g.starting = true;
  PolicyConfig capped;
  capped.max_gpus_per_user = 6;
  std::vector<GangGrowth> got =
      ChooseGangGrowth(std::span(&g, 1), nodes, {}, capped, kConfig, kNow);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(AddedNodes(got[0]), ElementsAre("b", "c"));  // 2 + 2 + 2 = 6, not 8
}

}  // namespace
}  // namespace trainq
