// Per-user limits (max_gpus_per_user, max_jobs_per_user): what counts, who may still start,
// the reason a capped job shows, and that no GPU is held for a job that cannot start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/placement.h"

namespace trainq {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kNow = 1'700'000'000'000;
constexpr UnixMs kHour = 3600 * 1000;

GpuState Gpu(int index, std::vector<Holding> held = {}) {
  uint64_t used = 0;
  for (const Holding& h : held) used += h.reserved_bytes;
  return {index, "GPU-" + std::to_string(index), 80 * kGiB, 80 * kGiB - used, 0, std::move(held)};
}

Holding Held(JobId job, uint64_t gib) { return {job, gib * kGiB, gib * kGiB, false, kNow - kHour}; }

// One node of `gpus` GPUs; `use`: what each user's running attempts take there.
NodeState Node(std::vector<GpuState> gpus, std::map<std::string, UserUse> use = {}) {
  NodeState node;
  node.name = "a";
  node.gpus = std::move(gpus);
  node.cpu_slots = 64;
  node.use_by_user = std::move(use);
  return node;
}

PendingJob Job(JobId id, std::string user, int gpus, std::optional<uint64_t> gib = 10) {
  PendingJob j;
  j.id = id;
  j.user = std::move(user);
  j.gpus = gpus;
  if (gpus > 0) j.mem_bytes = gib ? std::optional(*gib * kGiB) : std::nullopt;
  j.submitted_at = kNow - 1000 + id;
  return j;
}

PolicyConfig Limits(int gpus, int jobs) {
  PolicyConfig c;
  c.headroom_bytes = 0;
  c.max_gpus_per_user = gpus;
  c.max_jobs_per_user = jobs;
  return c;
}

std::vector<JobId> Started(const PlacementResult& r) {
  std::vector<JobId> ids;
  for (const StartDecision& d : r.starts) ids.push_back(d.job);
  return ids;
}

std::string ReasonOf(const PlacementResult& r, JobId id) {
  for (const auto& [job, text] : r.Reasons()) {
    if (job == id) return text;
  }
  return "(no reason)";
}

TEST(UserLimitsTest, GpuCapCountsRunningGpusAndLetsSmallerJobsAndOtherUsersStart) {
  // ada's running jobs hold 3 GPUs; 4 free GPUs remain.
  std::vector<NodeState> nodes = {Node({Gpu(0), Gpu(1), Gpu(2), Gpu(3)}, {{"ada", {3, 2}}})};
  std::vector<PendingJob> jobs = {Job(1, "ada", 2), Job(2, "ada", 1), Job(3, "bob", 2),
                                  Job(4, "ada", 1)};
  PlacementResult r = Place(jobs, nodes, Limits(4, 0), kNow);
  EXPECT_THAT(Started(r), ::testing::ElementsAre(2, 3));
  EXPECT_EQ(ReasonOf(r, 1),
            "waiting: ada has 4 GPUs in use and this job needs 2; max_gpus_per_user = 4");
  // Job 2 started in this pass brought ada to the cap.
  EXPECT_EQ(ReasonOf(r, 4), "waiting: ada has 4 GPUs in use; max_gpus_per_user = 4");
}

TEST(UserLimitsTest, JobCapCountsCpuJobsAndDoesNotBlockOtherUsers) {
  // ada runs a 1-GPU job and a CPU job: 2 jobs, 1 GPU.
  std::vector<NodeState> nodes = {Node({Gpu(0), Gpu(1)}, {{"ada", {1, 2}}})};
  std::vector<PendingJob> jobs = {Job(1, "ada", 1), Job(2, "ada", 0), Job(3, "bob", 1)};
  PlacementResult r = Place(jobs, nodes, Limits(0, 2), kNow);
  EXPECT_THAT(Started(r), ::testing::ElementsAre(3));
  EXPECT_EQ(ReasonOf(r, 1), "waiting: ada has 2 jobs running; max_jobs_per_user = 2");
  EXPECT_EQ(ReasonOf(r, 2), "waiting: ada has 2 jobs running; max_jobs_per_user = 2");
}

TEST(UserLimitsTest, JobsStartedInThePassCount) {
  std::vector<NodeState> nodes = {Node({Gpu(0), Gpu(1), Gpu(2)})};
  // A CPU job counts as a job, not as a GPU.
  std::vector<PendingJob> jobs = {Job(1, "ada", 0), Job(2, "ada", 1), Job(3, "ada", 1),
                                  Job(4, "bob", 1)};
  PlacementResult gpus = Place(jobs, nodes, Limits(1, 0), kNow);
  EXPECT_THAT(Started(gpus), ::testing::ElementsAre(1, 2, 4));
  EXPECT_EQ(ReasonOf(gpus, 3), "waiting: ada has 1 GPU in use; max_gpus_per_user = 1");

  PlacementResult count = Place(jobs, nodes, Limits(0, 2), kNow);
  EXPECT_THAT(Started(count), ::testing::ElementsAre(1, 2, 4));
  EXPECT_EQ(ReasonOf(count, 3), "waiting: ada has 2 jobs running; max_jobs_per_user = 2");
}

TEST(UserLimitsTest, ZeroMeansNoLimit) {
  std::vector<NodeState> nodes = {Node({Gpu(0), Gpu(1), Gpu(2)}, {{"ada", {8, 8}}})};
  std::vector<PendingJob> jobs = {Job(1, "ada", 1), Job(2, "ada", 2)};
  PlacementResult r = Place(jobs, nodes, Limits(0, 0), kNow);
  EXPECT_THAT(Started(r), ::testing::ElementsAre(1, 2));
}

TEST(UserLimitsTest, ALargerRequestThanTheCapSaysItCannotStart) {
  std::vector<NodeState> nodes = {Node({Gpu(0), Gpu(1), Gpu(2)})};
  std::vector<PendingJob> jobs = {Job(1, "ada", 3)};
  PlacementResult r = Place(jobs, nodes, Limits(2, 0), kNow);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_EQ(ReasonOf(r, 1), "waiting: needs 3 GPUs, more than max_gpus_per_user = 2");
}

PendingJob Aged(PendingJob j) {
  j.submitted_at = kNow - 3 * kHour;
  return j;
}

// Holding a GPU for a job that cannot start would only idle it.
TEST(UserLimitsTest, NoGpusAreHeldForAnAgedJobAtItsUsersCap) {
  // GPU 0 has ada's small job 10; an aged whole-GPU job of hers would get GPU 0 held (it is
  // nearest to free), closing it to bob's job 2, were she not at her cap. Job 2 comes first
  // in line (priority), so only a hold never made leaves GPU 0 open to it.
  std::vector<NodeState> nodes = {
      Node({Gpu(0, {Held(10, 5)}), Gpu(1, {Held(11, 20)})}, {{"ada", {1, 1}}, {"carol", {1, 1}}})};
  PendingJob bobs = Job(2, "bob", 1, 65);
  bobs.priority = 1;
  std::vector<PendingJob> jobs = {Aged(Job(1, "ada", 1, std::nullopt)), bobs};
  PlacementResult r = Place(jobs, nodes, Limits(0, 1), kNow);
  EXPECT_TRUE(r.holds.empty());
  EXPECT_THAT(Started(r), ::testing::ElementsAre(2));
  EXPECT_EQ(ReasonOf(r, 1), "waiting: ada has 1 job running; max_jobs_per_user = 1");

  PlacementResult uncapped = Place(jobs, nodes, Limits(0, 0), kNow);  // the hold it prevents
  ASSERT_EQ(uncapped.holds.size(), 1u);
  EXPECT_TRUE(uncapped.starts.empty());
}

TEST(UserLimitsTest, AHoldIsReleasedWhenItsUserReachesTheCapInThePass) {
  // Phase one holds GPU 1 for ada's aged whole-GPU job 1; then her higher-priority job 2
  // starts on GPU 0 and takes her to the cap, so job 1 cannot start: GPU 1 goes to bob.
  std::vector<NodeState> nodes = {Node({Gpu(0, {Held(11, 20)}), Gpu(1)}, {{"carol", {1, 1}}})};
  PendingJob first = Job(2, "ada", 1);
  first.priority = 1;
  std::vector<PendingJob> jobs = {Aged(Job(1, "ada", 1, std::nullopt)), first,
                                  Job(3, "bob", 1, 30)};
  PlacementResult r = Place(jobs, nodes, Limits(1, 0), kNow);
  ASSERT_THAT(Started(r), ::testing::ElementsAre(2, 3));
  EXPECT_EQ(r.starts[0].gpu_indices, std::vector<int>{0});
  EXPECT_EQ(r.starts[1].gpu_indices, std::vector<int>{1});
  EXPECT_TRUE(r.holds.empty());
  EXPECT_EQ(ReasonOf(r, 1), "waiting: ada has 1 GPU in use; max_gpus_per_user = 1");
}

TEST(UserLimitsTest, AHoldIsReleasedWhenALaterJobOfItsUserReachesTheCap) {
  // ada's aged whole-GPU job 1 cannot start: GPU 0, nearest to free, is held for it. Her
  // share job 2 then starts on GPU 1 and takes her to the cap: job 1 can no longer start, so
  // the hold ends with the pass.
  std::vector<NodeState> nodes = {
      Node({Gpu(0, {Held(10, 5)}), Gpu(1, {Held(11, 20)})}, {{"carol", {2, 2}}})};
  std::vector<PendingJob> jobs = {Aged(Job(1, "ada", 1, std::nullopt)), Job(2, "ada", 1)};
  PlacementResult r = Place(jobs, nodes, Limits(1, 0), kNow);
  ASSERT_THAT(Started(r), ::testing::ElementsAre(2));
  EXPECT_EQ(r.starts[0].gpu_indices, std::vector<int>{1});
  EXPECT_TRUE(r.holds.empty());
  EXPECT_EQ(ReasonOf(r, 1), "waiting: ada has 1 GPU in use; max_gpus_per_user = 1");
}

TEST(UserLimitsTest, UseIsSummedOverNodes) {
  NodeState a = Node({Gpu(0)}, {{"ada", {1, 1}}});
  NodeState b = Node({Gpu(0)}, {{"ada", {1, 1}}});
  b.name = "b";
  std::vector<NodeState> nodes = {a, b};
  std::vector<PendingJob> jobs = {Job(1, "ada", 1)};
  EXPECT_EQ(ReasonOf(Place(jobs, nodes, Limits(2, 0), kNow), 1),
            "waiting: ada has 2 GPUs in use; max_gpus_per_user = 2");
  EXPECT_EQ(Place(jobs, nodes, Limits(3, 0), kNow).starts.size(), 1u);
}

TEST(UserLimitsTest, ExplainGivesTheSameReason) {
  std::vector<NodeState> nodes = {Node({Gpu(0)}, {{"ada", {0, 1}}})};
  std::vector<PendingJob> jobs = {Job(1, "ada", 1)};
  Explanation e = Explain(1, jobs, nodes, Limits(0, 1), kNow);
  EXPECT_FALSE(e.would_start);
  EXPECT_EQ(e.reason, "waiting: ada has 1 job running; max_jobs_per_user = 1");
}

}  // namespace
}  // namespace trainq
