// Elastic jobs in the replay: which rows are elastic, and the resizes ChooseGrowth and
// ChooseShrinks (src/core/elastic.h) decide, as the daemon's scheduler applies them. A job
// grows at its start in place; a running job's resize is a stop (stop_ms), then a restart on
// the new GPUs at once, which keeps the work checkpointed and pays the restart cost.
#include <algorithm>
#include <cmath>
#include <random>

#include "src/sim/replay_internal.h"

namespace trainq::sim::replay_internal {

// Draws the elastic rows: one number per row in row order, so a seed picks the same rows
// whatever the policy. Only whole-GPU single-node jobs; their range is 1 GPU to twice the
// request, at most a node's GPUs. A waiting elastic job is placed at its min.
void Replayer::ChooseElastic() {
  if (options_.policy != ReplayPolicy::kTrainq || options_.elastic_fraction <= 0) return;
  std::mt19937_64 draw(options_.elastic_seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (size_t i = 0; i < trace_.size(); ++i) {
    double u = uniform(draw);
    const TraceJob& t = trace_[i];
    if (u >= options_.elastic_fraction || t.gpus <= 0 || t.gpu_milli != 1000 || IsGang(i) ||
        !t.duration_ms) {
      continue;
    }
    int max = std::min(2 * t.gpus, cluster_.max_gpus_per_node());
    if (max <= 1) continue;
    runs_[i].min_gpus = 1;
    runs_[i].max_gpus = max;
    pending_[i].gpus = 1;
    ++elastic_jobs_;
    if (Measured(i)) ++metrics_.elastic_jobs;
  }
}

double Replayer::SpeedAt(size_t i, int gpus) const {
  if (!Elastic(i) || gpus == trace_[i].gpus) return 1.0;
  return std::pow(double(gpus) / double(trace_[i].gpus), options_.scaling_exponent);
}

// The elastic attempts on the cluster, as the daemon's scheduler describes them; those this
// pass started are `starting`.
std::vector<ElasticRun> Replayer::ElasticRuns(int64_t now) const {
  std::vector<ElasticRun> out;
  for (size_t i : running_) {
    if (!Elastic(i) || placed_[i].empty()) continue;
    const JobRun& r = runs_[i];
    ElasticRun e;
    e.job = JobId(i + 1);
    e.min_gpus = r.min_gpus;
    e.max_gpus = r.max_gpus;
    e.where = {cluster_.nodes()[placed_[i].front().first].name, placed_[i].front().second};
    e.starting = r.attempt_start_ms == now && r.state == RunState::kRunning &&
                 std::find(started_.begin(), started_.end(), i) != started_.end();
    e.sized_at = r.attempt_start_ms;
    e.stopping = r.state == RunState::kStopping;
    e.stop_ms = options_.stop_ms;
    out.push_back(std::move(e));
  }
  return out;
}

// Shrinks for the jobs a pass left waiting for GPUs; returns those it found no room for.
std::vector<const PendingJob*> Replayer::ShrinkFor(std::vector<const PendingJob*> ready,
                                                   int64_t now) {
  if (ready.empty()) return ready;
  std::vector<ElasticRun> runs = ElasticRuns(now);
  if (runs.empty()) return ready;
  std::vector<NodeState> storage;
  std::vector<Shrink> shrinks =
      ChooseShrinks(ready, PassNodes(storage), runs, config_, {options_.min_runtime_ms}, now);
  for (const Shrink& s : shrinks) {
    for (const Resize& d : s.resizes) {
      BeginResize(size_t(d.job - 1), d, now);
      ++metrics_.shrinks;
    }
    preempting_[s.job] = {s.ready_at, s.ready_at + kGiveUpMs};
    std::erase_if(holds_, [&](const Hold& h) { return h.job == s.job; });
    holds_.push_back(ShrinkHold(s));
    std::erase_if(ready, [&](const PendingJob* p) { return p->id == s.job; });
  }
  return ready;
}

void Replayer::GrowStep(int64_t now, bool starting) {
  std::vector<ElasticRun> runs = ElasticRuns(now);
  std::erase_if(runs, [&](const ElasticRun& e) { return e.starting != starting; });
  if (runs.empty()) return;
  std::vector<NodeState> storage;
  std::vector<Resize> grows =
      ChooseGrowth(runs, PassNodes(storage), holds_, config_, {options_.min_runtime_ms}, now);
  for (const Resize& d : grows) {
    size_t i = size_t(d.job - 1);
    if (starting) {
      GrowAtStart(i, d, now);
    } else {
      BeginResize(i, d, now);
      ++metrics_.grows;
    }
  }
}

// A job this pass started takes more GPUs before it has done anything: no restart.
void Replayer::GrowAtStart(size_t i, const Resize& d, int64_t now) {
  JobRun& r = runs_[i];
  size_t node = cluster_.Find(d.to.node);
  for (const auto& [n, gpus] : placed_[i]) cluster_.Finish(pending_[i], n, gpus);
  running_gpus_[trace_[i].user] -= HeldShare(i);
  placed_[i] = {{node, d.to.gpu_indices}};
  cluster_.Start(pending_[i], node, d.to.gpu_indices);
  r.gpus_now = int(d.to.gpu_indices.size());
  r.speed = SpeedAt(i, r.gpus_now);
  running_gpus_[trace_[i].user] += HeldShare(i);
  r.attempt_ms = r.work.AttemptMs(r.speed);
  r.attempt_end_ms = now + r.attempt_ms;
  ends_.push({r.attempt_end_ms, i, ++r.epoch});
}

// A running job is told to stop; the GPUs a grow adds are its own from now.
void Replayer::BeginResize(size_t i, const Resize& d, int64_t now) {
  JobRun& r = runs_[i];
  size_t node = cluster_.Find(d.to.node);
  r.resize_to = Placement{{node, d.to.gpu_indices}};
  std::vector<int> added;
  const std::vector<int>& had = placed_[i].front().second;
  for (int g : d.to.gpu_indices) {
    if (std::find(had.begin(), had.end(), g) == had.end()) added.push_back(g);
  }
  if (!added.empty()) {
    PendingJob extra = pending_[i];
    extra.cpus = 0, extra.host_mem_bytes = 0;
    cluster_.Start(extra, node, added);
    r.reserved = {{node, std::move(added)}};
  }
  StopAt(i, now + options_.stop_ms);
}

// The stop is over: the job keeps its checkpointed work and runs on its new GPUs at once.
void Replayer::EndResize(size_t i, int64_t now) {
  JobRun& r = runs_[i];
  Placement to = std::move(*r.resize_to);
  r.work.Cut(now - r.attempt_start_ms, options_.checkpoint, r.speed);
  Release(i, now);
  r.queued_since_ms = now;
  Start(i, std::move(to), now);
  started_.pop_back();  // not a start of this pass: it never waited
}

// The GPUs a grow reserved, and the resize itself, are over (the job ended or resized).
void Replayer::DropReserved(size_t i) {
  JobRun& r = runs_[i];
  r.resize_to.reset();
  if (r.reserved.empty()) return;
  PendingJob extra = pending_[i];
  extra.cpus = 0, extra.host_mem_bytes = 0;
  for (const auto& [node, gpus] : r.reserved) cluster_.Finish(extra, node, gpus);
  r.reserved.clear();
}

}  // namespace trainq::sim::replay_internal
