// Tiresias's 2D-LAS in the replay: at every event the jobs are served in LAS order
// (src/sim/las.h) and running jobs the order no longer fits are preempted.
#include <algorithm>
#include <cmath>

#include "src/sim/replay_internal.h"

namespace trainq::sim::replay_internal {

namespace {

// When a running attempt's service crosses the threshold, given what earlier attempts attained.
int64_t CrossingMs(const JobRun& r, double share, double threshold_gpu_ms) {
  double need = std::max(threshold_gpu_ms - r.attained_gpu_ms, 0.0);
  return r.attempt_start_ms + static_cast<int64_t>(std::ceil(need / share));
}

}  // namespace

LasRank Replayer::RankOf(size_t i, int64_t now) const {
  const JobRun& r = runs_[i];
  bool running = r.state == RunState::kRunning;
  if (r.las_queue == 0 && running && GpuShare(i) > 0) {
    int64_t cross = CrossingMs(r, GpuShare(i), LasThresholdGpuMs());
    if (now >= cross) return {1, running, cross, i};
  }
  if (r.las_queue == 1) return {1, running, r.las_entered_ms, i};
  return {0, running, trace_[i].submit_ms, i};
}

// An attempt ended: its service counts, and the queue it reached stays reached.
void Replayer::AccrueService(size_t i, int64_t now) {
  JobRun& r = runs_[i];
  double share = GpuShare(i);
  if (share <= 0) return;
  if (r.las_queue == 0) {
    int64_t cross = CrossingMs(r, share, LasThresholdGpuMs());
    if (now >= cross) r.las_queue = 1, r.las_entered_ms = cross;
  }
  r.attained_gpu_ms += share * double(now - r.attempt_start_ms);
}

// A job in the first queue may be preempted once it is demoted: a pass is due then.
void Replayer::WakeForDemotion(size_t i, int64_t now) {
  if (runs_[i].las_queue != 0 || GpuShare(i) <= 0) return;
  WakeAt(CrossingMs(runs_[i], GpuShare(i), LasThresholdGpuMs()), now);
}

std::vector<std::vector<LasGpu>> Replayer::LasNodes() const {
  std::vector<std::vector<LasGpu>> nodes(cluster_.size());
  for (size_t n = 0; n < cluster_.size(); ++n) nodes[n].resize(size_t(cluster_.spec(n).gpus));
  for (size_t i : running_) {
    LasGpu::Use use =
        runs_[i].state == RunState::kStopping ? LasGpu::Use::kStopping : LasGpu::Use::kRunning;
    for (const auto& [n, gpus] : placed_[i]) {
      for (int g : gpus) nodes[n][size_t(g)] = {use, i};
    }
  }
  return nodes;
}

void Replayer::TiresiasPass(int64_t now) {
  std::vector<LasRank> ranks;
  for (size_t i : running_) {
    if (runs_[i].state == RunState::kRunning) ranks.push_back(RankOf(i, now));
  }
  for (size_t i : waiting_) ranks.push_back(RankOf(i, now));
  std::sort(ranks.begin(), ranks.end());
  std::vector<LasJob> order;
  order.reserve(ranks.size());
  for (const LasRank& k : ranks) {
    order.push_back(
        {k.row, trace_[k.row].gpus, k.running, k.running ? placed_[k.row] : Placement{}});
  }
  std::vector<std::vector<LasGpu>> nodes = LasNodes();
  LasPlan plan = PlanLas(order, nodes);
  for (size_t i : plan.preempt) StopAt(i, now + options_.stop_ms);
  for (auto& [i, where] : plan.start) Start(i, std::move(where), now);
}

}  // namespace trainq::sim::replay_internal
