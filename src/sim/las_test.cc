#include "src/sim/las.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

using Use = LasGpu::Use;

TEST(LasQueue, TwoQueuesSplitAtTheThreshold) {
  EXPECT_EQ(LasQueue(0, 3250e3), 0);
  EXPECT_EQ(LasQueue(3249.999e3, 3250e3), 0);
  EXPECT_EQ(LasQueue(3250e3, 3250e3), 1);
}

TEST(LasRank, HigherQueueThenRunningThenEnteredThenRow) {
  std::vector<LasRank> ranks = {
      {1, true, 0, 1},     // demoted, running
      {0, false, 50, 2},   // queue 0, waiting, entered later
      {0, false, 10, 3},   // queue 0, waiting, entered first
      {0, true, 90, 4},    // queue 0, running: before the waiting ones of its queue
      {1, false, 0, 5},    // demoted, waiting
      {0, false, 10, 0}};  // a tie on entry: the lower row first
  std::sort(ranks.begin(), ranks.end());
  std::vector<size_t> rows;
  for (const LasRank& r : ranks) rows.push_back(r.row);
  EXPECT_EQ(rows, (std::vector<size_t>{4, 0, 3, 2, 1, 5}));
}

// Nodes from rows of GPU uses: '.' free, 's' stopping, a digit: held by that running row.
std::vector<std::vector<LasGpu>> Nodes(std::vector<std::string> rows) {
  std::vector<std::vector<LasGpu>> nodes;
  for (const std::string& r : rows) {
    std::vector<LasGpu> gpus;
    for (char c : r) {
      if (c == '.') gpus.push_back({Use::kFree, 0});
      if (c == 's') gpus.push_back({Use::kStopping, 0});
      if (c >= '0' && c <= '9') gpus.push_back({Use::kRunning, size_t(c - '0')});
    }
    nodes.push_back(std::move(gpus));
  }
  return nodes;
}

// The running jobs' placements as the nodes show them.
LasJob Running(size_t row, const std::vector<std::vector<LasGpu>>& nodes) {
  LasJob job{row, 0, true, {}};
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::vector<int> gpus;
    for (size_t g = 0; g < nodes[n].size(); ++g) {
      if (nodes[n][g].use == Use::kRunning && nodes[n][g].holder == row) gpus.push_back(int(g));
    }
    if (!gpus.empty()) job.where.emplace_back(n, gpus), job.gpus += int(gpus.size());
  }
  return job;
}

LasJob Waiting(size_t row, int gpus) { return {row, gpus, false, {}}; }

struct PlanCase {
  const char* name;
  std::vector<std::string> nodes;
  // LAS order: a digit is a running row, "wR:G" a waiting row R wanting G GPUs.
  std::vector<std::string> order;
  std::vector<size_t> preempt;
  std::vector<std::pair<size_t, Placement>> start;
};

class Plan : public ::testing::TestWithParam<PlanCase> {};

TEST_P(Plan, ServesInLasOrder) {
  const PlanCase& c = GetParam();
  std::vector<std::vector<LasGpu>> nodes = Nodes(c.nodes);
  std::vector<LasJob> order;
  for (const std::string& o : c.order) {
    if (o[0] == 'w') {
      order.push_back(Waiting(size_t(o[1] - '0'), std::stoi(o.substr(3))));
    } else {
      order.push_back(Running(size_t(o[0] - '0'), nodes));
    }
  }
  LasPlan plan = PlanLas(order, nodes);
  EXPECT_EQ(plan.preempt, c.preempt);
  EXPECT_EQ(plan.start, c.start);
}

INSTANTIATE_TEST_SUITE_P(
    Las, Plan,
    ::testing::Values(
        // A free GPU first: the running job of the lower queue keeps its GPU.
        PlanCase{"free_first", {"1."}, {"w2:1", "1"}, {}, {{2, {{0, {1}}}}}},
        // No free GPU: the job served later is preempted; the waiting job waits for its stop.
        PlanCase{"preempts_lower", {"1"}, {"w2:1", "1"}, {1}, {}},
        // A running job served first keeps its GPUs: the waiting one after it waits.
        PlanCase{"running_first", {"1"}, {"1", "w2:1"}, {}, {}},
        // Consolidated: a 2-GPU job goes to one node with two free GPUs, the first such.
        PlanCase{"one_node", {"1.", "..", ".."}, {"1", "w2:2"}, {}, {{2, {{1, {0, 1}}}}}},
        // A stopping job's GPU before a running job's: nothing more is preempted.
        PlanCase{"stopping_before_running", {"s1"}, {"w2:1", "1"}, {}, {}},
        // Of the jobs served after it, the smallest goes: 1 (one GPU) rather than 3 (two).
        PlanCase{"smallest_victim", {"133."}, {"w2:2", "3", "1"}, {1}, {}},
        // Wider than a node: whole nodes, the idle ones first.
        PlanCase{"gang", {"1.", "..", ".."}, {"1", "w2:4"}, {}, {{2, {{1, {0, 1}}, {2, {0, 1}}}}}},
        // Once a size fails, a larger one is not tried; a smaller one still starts.
        PlanCase{"backfill", {"1."}, {"1", "w2:2", "w3:1"}, {}, {{3, {{0, {1}}}}}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace trainq::sim
