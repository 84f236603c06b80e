#include "src/sim/las.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace trainq::sim {

int LasQueue(double attained_gpu_ms, double threshold_gpu_ms) {
  return attained_gpu_ms >= threshold_gpu_ms ? 1 : 0;
}

bool LasRank::operator<(const LasRank& o) const {
  return std::tuple(queue, !running, entered_ms, row) <
         std::tuple(o.queue, !o.running, o.entered_ms, o.row);
}

namespace {

// A GPU's cost to a waiting job that takes it: free, then a stopping job's, then a running
// job's (the smallest job first, then the one served last).
using GpuCost = std::tuple<int, int, size_t>;

class Walk {
 public:
  Walk(std::span<const LasJob> order, std::span<const std::vector<LasGpu>> nodes)
      : nodes_(nodes), claimed_(nodes.size()), open_(nodes.size(), 0) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      claimed_[n].assign(nodes[n].size(), 0);
      open_[n] = static_cast<int>(nodes[n].size());
      largest_ = std::max(largest_, open_[n]);
    }
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i].running) running_.emplace(order[i].row, std::pair(order[i].gpus, i));
    }
  }

  LasPlan Run(std::span<const LasJob> order) {
    LasPlan plan;
    for (const LasJob& job : order) {
      if (job.running) {
        if (Keep(job.where)) continue;
        doomed_.insert(job.row);
        plan.preempt.push_back(job.row);
        continue;
      }
      std::optional<Placement> where = Serve(job.gpus);
      if (where && FreeNow(*where)) plan.start.emplace_back(job.row, std::move(*where));
    }
    return plan;
  }

 private:
  bool Keep(const Placement& where) {
    for (const auto& [n, gpus] : where) {
      for (int g : gpus) {
        if (claimed_[n][size_t(g)]) return false;
      }
    }
    Claim(where);
    return true;
  }

  void Claim(const Placement& where) {
    for (const auto& [n, gpus] : where) {
      for (int g : gpus) claimed_[n][size_t(g)] = 1;
      open_[n] -= static_cast<int>(gpus.size());
    }
  }

  bool FreeNow(const Placement& where) const {
    for (const auto& [n, gpus] : where) {
      for (int g : gpus) {
        if (nodes_[n][size_t(g)].use != LasGpu::Use::kFree) return false;
      }
    }
    return true;
  }

  bool Doomed(size_t row) const { return doomed_.count(row) > 0; }

  GpuCost Cost(size_t n, size_t g) const {
    const LasGpu& gpu = nodes_[n][g];
    if (gpu.use == LasGpu::Use::kFree) return {0, 0, 0};
    if (gpu.use == LasGpu::Use::kStopping || Doomed(gpu.holder)) return {1, 0, 0};
    auto it = running_.find(gpu.holder);
    if (it == running_.end()) return {1, 0, 0};
    return {2, it->second.first, ~it->second.second};  // served last first
  }

  // GPUs of running jobs a choice takes (each such job whole), and its GPUs not free now.
  std::pair<int, int> Price(size_t n, const std::vector<int>& gpus) const {
    std::vector<size_t> victims;
    int victim_gpus = 0, busy = 0;
    for (int g : gpus) {
      const LasGpu& gpu = nodes_[n][size_t(g)];
      busy += gpu.use == LasGpu::Use::kFree ? 0 : 1;
      if (std::get<0>(Cost(n, size_t(g))) != 2) continue;
      if (std::find(victims.begin(), victims.end(), gpu.holder) != victims.end()) continue;
      victims.push_back(gpu.holder);
      victim_gpus += running_.at(gpu.holder).first;
    }
    return {victim_gpus, busy};
  }

  // The `want` cheapest open GPUs of node n.
  std::vector<int> Cheapest(size_t n, int want) const {
    std::vector<std::pair<GpuCost, int>> open;
    for (size_t g = 0; g < claimed_[n].size(); ++g) {
      if (!claimed_[n][g]) open.emplace_back(Cost(n, g), static_cast<int>(g));
    }
    std::sort(open.begin(), open.end());
    std::vector<int> gpus;
    for (int k = 0; k < want; ++k) gpus.push_back(open[size_t(k)].second);
    std::sort(gpus.begin(), gpus.end());
    return gpus;
  }

  std::optional<Placement> Serve(int want) {
    if (want <= 0) return Placement{};
    if (want >= smallest_failed_) return std::nullopt;  // claims only grow in a walk
    std::optional<Placement> where = want > largest_ ? Whole(want) : OneNode(want);
    if (!where) {
      smallest_failed_ = want;
      return std::nullopt;
    }
    Claim(*where);
    return where;
  }

  std::optional<Placement> OneNode(int want) {
    std::optional<std::tuple<int, int, size_t>> best;
    std::vector<int> best_gpus;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (open_[n] < want) continue;
      std::vector<int> gpus = Cheapest(n, want);
      auto [victim_gpus, busy] = Price(n, gpus);
      auto key = std::tuple(victim_gpus, busy, n);
      if (best && !(key < *best)) continue;
      best = key;
      best_gpus = std::move(gpus);
      if (victim_gpus == 0 && busy == 0) break;  // the first node where it fits now
    }
    if (!best) return std::nullopt;
    return Placement{{std::get<2>(*best), std::move(best_gpus)}};
  }

  // Whole open nodes, cheapest first, until their GPUs cover `want`.
  std::optional<Placement> Whole(int want) {
    std::vector<std::tuple<int, int, size_t>> options;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      int size = static_cast<int>(nodes_[n].size());
      if (size == 0 || open_[n] != size) continue;
      auto [victim_gpus, busy] = Price(n, Cheapest(n, size));
      options.emplace_back(victim_gpus, busy, n);
    }
    std::sort(options.begin(), options.end());
    Placement where;
    int got = 0;
    for (const auto& [victim_gpus, busy, n] : options) {
      if (got >= want) break;
      where.emplace_back(n, Cheapest(n, static_cast<int>(nodes_[n].size())));
      got += static_cast<int>(nodes_[n].size());
    }
    if (got < want) return std::nullopt;
    std::sort(where.begin(), where.end());
    return where;
  }

  std::span<const std::vector<LasGpu>> nodes_;
  std::vector<std::vector<char>> claimed_;
  std::vector<int> open_;  // unclaimed GPUs per node
  int largest_ = 0;
  int smallest_failed_ = 1 << 30;
  std::map<size_t, std::pair<int, size_t>> running_;  // row -> (GPUs, place in order)
  std::set<size_t> doomed_;                           // running jobs this decision preempts
};

}  // namespace

LasPlan PlanLas(std::span<const LasJob> order, std::span<const std::vector<LasGpu>> nodes) {
  return Walk(order, nodes).Run(order);
}

}  // namespace trainq::sim
