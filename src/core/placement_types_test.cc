// GPU types (--gpu-type) and node features (--constraint) in placement: a job goes only to
// GPUs of its type on nodes with its features, and its reason counts them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/placement.h"

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr UnixMs kHour = 3600 * 1000;
constexpr char kA100[] = "NVIDIA A100-SXM4-80GB";
constexpr char kT4[] = "Tesla T4";

GpuState Gpu(int index, std::string model, std::string label = "") {
  GpuState g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.total_bytes = 80 * kGiB;
  g.free_bytes = 80 * kGiB;
  g.model = std::move(model);
  g.label = std::move(label);
  return g;
}

// `job` holds the GPU whole: what is free on it is gone.
GpuState Taken(GpuState g, JobId job) {
  g.free_bytes = 0;
  g.holdings.push_back({job, g.total_bytes, g.total_bytes, true, kNow - kHour});
  return g;
}

NodeState Node(std::string name, std::vector<GpuState> gpus,
               std::vector<std::string> features = {}) {
  NodeState node;
  node.name = std::move(name);
  node.gpus = std::move(gpus);
  node.cpu_slots = 64;
  node.features = std::move(features);
  return node;
}

PendingJob Job(JobId id, int gpus, std::string type = "", std::optional<uint64_t> gib = {}) {
  PendingJob j;
  j.id = id;
  j.gpus = gpus;
  if (gib) j.mem_bytes = *gib * kGiB;
  j.user = "ada";
  j.submitted_at = kNow - 1000 + id;
  j.gpu_type = std::move(type);
  return j;
}

PolicyConfig NoHeadroom() {
  PolicyConfig c;
  c.headroom_bytes = 0;
  return c;
}

PlacementResult PlaceAll(const std::vector<PendingJob>& jobs, const std::vector<NodeState>& nodes,
                         const PolicyConfig& config = NoHeadroom()) {
  return Place(jobs, nodes, config, kNow);
}

std::string ReasonOf(const PlacementResult& r, JobId id) {
  for (const auto& [job, text] : r.Reasons()) {
    if (job == id) return text;
  }
  return "(started)";
}

TEST(GpuTypePlacementTest, TypedJobTakesOnlyGpusOfItsType) {
  // Spread would take GPU 0 first (same load, lower index); the type says GPU 2.
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, kT4), Gpu(1, kT4), Gpu(2, kA100)})};
  PlacementResult r = PlaceAll({Job(1, 1, "a100"), Job(2, 1, "", 10), Job(3, 1, "t4", 10)}, nodes);
  ASSERT_EQ(r.starts.size(), 3u);
  EXPECT_THAT(r.starts[0].gpu_indices, ElementsAre(2));
  EXPECT_THAT(r.starts[1].gpu_indices, ElementsAre(0));  // untyped: any GPU
  EXPECT_THAT(r.starts[2].gpu_indices, ElementsAre(1));  // spread, among the T4s
}

TEST(GpuTypePlacementTest, ReasonCountsTheTypeAndWhoHoldsIt) {
  std::vector<NodeState> nodes = {
      Node("a", {Taken(Gpu(0, kA100), 4), Gpu(1, kT4), Taken(Gpu(2, kA100), 9), Gpu(3, kT4)})};
  PlacementResult r = PlaceAll({Job(1, 1, "a100"), Job(2, 1, "a100", 20)}, nodes);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 1 whole A100 (no other job or process on it); A100s: 2, all taken by jobs 4 "
            "and 9");
  EXPECT_THAT(ReasonOf(r, 2), StartsWith("needs 1 A100 with 20.0 GiB usable; "));
  EXPECT_THAT(ReasonOf(r, 2), HasSubstr("; A100s: 2, all taken by jobs 4 and 9"));
  // The T4s, free, are not offered as the best GPU for an A100 job.
  EXPECT_THAT(ReasonOf(r, 2), ::testing::Not(HasSubstr("GPU 1")));
}

TEST(GpuTypePlacementTest, ReasonCountsPerNodeInACluster) {
  std::vector<NodeState> nodes = {Node("a", {Taken(Gpu(0, kA100), 4), Gpu(1, kT4)}),
                                  Node("b", {Taken(Gpu(0, kA100), 7), Gpu(1, kA100)})};
  PlacementResult r = PlaceAll({Job(1, 2, "a100")}, nodes);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 2 whole A100s (no other job or process on them) on one node; only 1 is free on "
            "node b; A100s: 3 (a: 1, b: 2), 2 taken by jobs 4 and 7");
}

TEST(GpuTypePlacementTest, NoGpuOfTheTypeSaysWhatThereIs) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, kT4), Gpu(1, kT4, "small")})};
  PlacementResult r = PlaceAll({Job(1, 1, "a100"), Job(2, 2, "t4")}, nodes);
  EXPECT_EQ(ReasonOf(r, 1),
            "needs 1 A100; no GPU is of --gpu-type a100 (GPUs: 1 Tesla T4, 1 Tesla T4 (label "
            "small))");
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].job, 2);
  std::vector<NodeState> two = {Node("a", {Gpu(0, kA100), Gpu(1, kT4)}),
                                Node("b", {Gpu(0, kT4), Gpu(1, kA100)})};
  EXPECT_EQ(ReasonOf(PlaceAll({Job(1, 2, "a100")}, two), 1),
            "needs 2 A100s on one node; the most any node has is 1 on node a");
}

TEST(GpuTypePlacementTest, NodeLabelIsATypeToo) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, "NVIDIA Graphics Device")}),
                                  Node("b", {Gpu(0, "NVIDIA Graphics Device", "big")})};
  PlacementResult r = PlaceAll({Job(1, 1, "big")}, nodes);
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, "b");
}

TEST(GpuTypePlacementTest, AgedTypedJobHoldsOnlyGpusOfItsType) {
  PolicyConfig config = NoHeadroom();
  config.aging_ms = kHour;
  PendingJob job = Job(1, 1, "a100");
  job.submitted_at = job.queued_at = kNow - 2 * kHour;
  // The T4 is busy too, with less in the way: a hold by distance alone would take it.
  GpuState t4 = Gpu(0, kT4);
  t4.free_bytes = 70 * kGiB;
  t4.foreign_processes = 1;
  std::vector<NodeState> nodes = {Node("a", {t4, Taken(Gpu(1, kA100), 4)})};
  PlacementResult r = PlaceAll({job}, nodes, config);
  ASSERT_EQ(r.holds.size(), 1u);
  EXPECT_THAT(r.holds[0].gpu_indices, ElementsAre(1));
}

TEST(GpuTypePlacementTest, ExplainSaysWhichGpusAreNotOfTheType) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, kT4), Taken(Gpu(1, kA100), 4)})};
  Explanation e = Explain(1, std::vector{Job(1, 1, "a100")}, nodes, NoHeadroom(), kNow);
  ASSERT_EQ(e.gpus.size(), 2u);
  EXPECT_EQ(e.gpus[0].closed, "not of --gpu-type a100 (it is Tesla T4)");
  EXPECT_FALSE(e.gpus[0].fits);
  EXPECT_EQ(e.gpus[1].closed, "");
}

// ---- --constraint ----

TEST(ConstraintPlacementTest, JobGoesOnlyToNodesWithItsFeatures) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, kA100)}, {"nvlink"}),
                                  Node("b", {Gpu(0, kA100)}, {"ib", "nvlink"})};
  PendingJob job = Job(1, 1);
  job.constraints = {"ib", "nvlink"};
  PendingJob either = Job(2, 1);
  either.constraints = {"ib|eth"};
  PlacementResult r = PlaceAll({job, either}, nodes);
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].node, "b");
  EXPECT_EQ(ReasonOf(r, 2),
            "on the nodes it may use (--constraint ib|eth): needs 1 whole GPU (no other job or "
            "process on it); none is free; taken: b/GPU 0 by job 1");
}

TEST(ConstraintPlacementTest, NoNodeWithTheFeatureListsWhatNodesHave) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, kA100)}),
                                  Node("b", {Gpu(0, kA100)}, {"nvlink"})};
  PendingJob job = Job(1, 1);
  job.constraints = {"ib"};
  EXPECT_EQ(ReasonOf(PlaceAll({job}, nodes), 1),
            "needs a node with ib (--constraint); none has it (features: a: none, b: nvlink)");
}

TEST(ConstraintPlacementTest, DrainedNodeWithTheFeatureIsNamed) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, kA100)}), Node("b", {Gpu(0, kA100)}, {"ib"})};
  nodes[1].accepts_new = false;
  PendingJob job = Job(1, 1);
  job.constraints = {"ib"};
  EXPECT_EQ(ReasonOf(PlaceAll({job}, nodes), 1),
            "no node it may use (--constraint ib) takes new jobs: a lacks ib (--constraint), b "
            "takes no new jobs (drained or lost)");
}

TEST(ConstraintPlacementTest, GangTakesOnlyNodesWithTheFeature) {
  std::vector<NodeState> nodes = {Node("a", {Gpu(0, kA100)}, {"ib"}), Node("b", {Gpu(0, kA100)}),
                                  Node("c", {Gpu(0, kA100)}, {"ib"})};
  PendingJob gang = Job(1, 1, "a100");
  gang.num_nodes = 2;
  gang.constraints = {"ib"};
  PlacementResult r = PlaceAll({gang}, nodes);
  ASSERT_EQ(r.starts.size(), 1u);
  ASSERT_EQ(r.starts[0].parts.size(), 2u);
  EXPECT_EQ(r.starts[0].parts[0].node, "a");
  EXPECT_EQ(r.starts[0].parts[1].node, "c");
  gang.num_nodes = 3;
  EXPECT_EQ(ReasonOf(PlaceAll({gang}, nodes), 1),
            "needs 3 nodes at once; only 2 of the nodes it may use (--constraint ib) take new "
            "jobs: b lacks ib (--constraint)");
}

}  // namespace
}  // namespace trainq
