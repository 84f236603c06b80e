// The replay's figures (docs/scheduling.md, "Replay mode" and "Preemption in the simulator").
#include <algorithm>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "src/sim/replay_internal.h"

namespace trainq::sim {

namespace replay_internal {

namespace {

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

}  // namespace

void Replayer::Summarize() {
  std::vector<double> queue, first_queue, jct, big;
  int64_t first = INT64_MAX, last = INT64_MIN;
  double asked_ms = 0, held_ms = 0;
  std::map<std::string, double> asked_by_user;
  for (size_t i : arrivals_) {
    if (Measured(i)) asked_by_user[trace_[i].user] += GpuShare(i) * double(*trace_[i].duration_ms);
  }
  for (size_t i = 0; i < trace_.size(); ++i) {
    const JobRun& r = runs_[i];
    if (r.state != RunState::kDone || !Measured(i)) continue;
    int64_t submit = trace_[i].submit_ms;
    queue.push_back(double(r.waited_ms) / 1000.0);
    first_queue.push_back(double(*metrics_.start_ms[i] - submit) / 1000.0);
    jct.push_back(double(r.end_ms - submit) / 1000.0);
    first = std::min(first, submit);
    last = std::max(last, r.end_ms);
    asked_ms += GpuShare(i) * double(*trace_[i].duration_ms);
    held_ms += r.gpu_ms;
    if (trace_[i].gpus >= cluster_.max_gpus_per_node()) big.push_back(queue.back());
    if (IsGang(i)) ++metrics_.gang_jobs;
    if (r.preemptions > 0) ++metrics_.preempted_jobs;
  }
  metrics_.fairness = fairness_->Report(asked_by_user, kFairnessMinGpuHours * 3600.0 * 1000.0);
  metrics_.big_jobs = int(big.size());
  if (!big.empty()) {
    metrics_.big_mean_queue_s = Mean(big);
    metrics_.big_max_queue_s = *std::max_element(big.begin(), big.end());
  }
  metrics_.jobs = int(queue.size());
  if (queue.empty()) return;
  metrics_.makespan_s = double(last - first) / 1000.0;
  metrics_.mean_queue_s = Mean(queue);
  metrics_.median_queue_s = Percentile(queue, 50);
  metrics_.p99_queue_s = Percentile(queue, 99);
  metrics_.mean_first_queue_s = Mean(first_queue);
  metrics_.mean_jct_s = Mean(jct);
  metrics_.median_jct_s = Percentile(jct, 50);
  metrics_.p99_jct_s = Percentile(jct, 99);
  double capacity_ms = double(cluster_.total_gpus()) * double(last - first);
  metrics_.gpu_utilization = capacity_ms > 0 ? asked_ms / capacity_ms : 0;
  metrics_.lost_gpu_hours = (held_ms - asked_ms) / (3600.0 * 1000.0);
}

}  // namespace replay_internal

namespace {

using Json = nlohmann::ordered_json;

// A figure that may be unbounded: null then.
Json Maybe(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

void AddFairness(Json& j, const FairnessReport& f) {
  j["fairness"] = Maybe(f.figure);
  j["fairness_equal_split"] = Maybe(f.equal_split_figure);
  j["fairness_users"] = f.users;
  Json per_user = Json::object();
  for (const UserFairness& u : f.per_user) {
    if (!u.counted) continue;
    per_user[u.user] = {
        {"ratio", u.ratio}, {"received_gpu_h", u.received_gpu_h}, {"fair_gpu_h", u.fair_gpu_h}};
  }
  j["fairness_per_user"] = per_user;
}

void AddPreemptKnobs(Json& knobs, const ReplayOptions& o) {
  knobs["stop_s"] = double(o.stop_ms) / 1000.0;
  knobs["ckpt_interval_s"] = double(o.checkpoint.interval_ms) / 1000.0;
  knobs["restart_cost_s"] = double(o.checkpoint.restart_cost_ms) / 1000.0;
}

Json TrainqKnobs(const ReplayOptions& o) {
  Json knobs;
  knobs["aging_s"] = double(o.aging_ms) / 1000.0;
  knobs["half_life_s"] = double(o.half_life_ms) / 1000.0;
  knobs["max_holds"] = o.max_holds;
  knobs["preempt"] = o.preempt;
  if (o.attained_service_ms > 0)
    knobs["attained_service_s"] = double(o.attained_service_ms) / 1000.0;
  if (o.elastic_fraction > 0) {
    knobs["elastic_fraction"] = o.elastic_fraction;
    knobs["seed"] = o.elastic_seed;
    knobs["scaling_exponent"] = o.scaling_exponent;
    if (!o.preempt) {
      knobs["min_runtime_s"] = double(o.min_runtime_ms) / 1000.0;
      AddPreemptKnobs(knobs, o);
    }
  }
  if (o.preempt) {
    knobs["preempt_attained_service"] = o.preempt_for_attained_service;
    knobs["preempt_fair_share"] = o.preempt_for_fair_share;
    knobs["preempt_aging"] = o.preempt_for_aging;
    knobs["preempt_priority_gap"] = o.preempt_priority_gap;
    knobs["min_runtime_s"] = double(o.min_runtime_ms) / 1000.0;
    knobs["preempt_spare_s"] = double(o.preempt_spare_ms) / 1000.0;
    AddPreemptKnobs(knobs, o);
  }
  knobs["note"] = o.preempt
                      ? "fair share by decayed GPU-hours per user (user, else vc column); jobs "
                        "waiting past aging_s get GPUs held (gang jobs: whole nodes); waiting jobs "
                        "preempt running ones through ChoosePreemptions; a victim loses the work "
                        "since its last checkpoint"
                      : "fair share by decayed GPU-hours per user (user, else vc column); jobs "
                        "waiting past aging_s get GPUs held (gang jobs: whole nodes)";
  return knobs;
}

Json TiresiasKnobs(const ReplayOptions& o) {
  Json knobs;
  knobs["queues"] = 2;
  knobs["threshold_gpu_seconds"] = o.las_threshold_gpu_s;
  AddPreemptKnobs(knobs, o);
  knobs["note"] =
      "2D-LAS: queue 0 below threshold_gpu_seconds of attained service (GPUs x seconds run), "
      "queue 1 above; FIFO within a queue, running jobs first; a job of a higher queue "
      "preempts those of a lower one; whole GPUs, one node per job, first fit";
  return knobs;
}

Json Knobs(const ReplayOptions& o) {
  switch (o.policy) {
    case ReplayPolicy::kTrainq:
      return TrainqKnobs(o);
    case ReplayPolicy::kTiresias:
      return TiresiasKnobs(o);
    case ReplayPolicy::kFifo:
      return {
          {"note", "strict head of line: nothing starts while the first waiting job does not fit"}};
    case ReplayPolicy::kNaive:
      break;
  }
  return {{"note",
           "a GPU is free when >= 90% of its memory is free; one job per GPU; FIFO "
           "with skipping; no fair share, no holds"}};
}

}  // namespace

std::string ReplayJson(const ReplayMetrics& m, const ReplayOptions& options) {
  Json j;
  j["jobs"] = m.jobs;
  j["makespan_s"] = m.makespan_s;
  j["mean_queue_s"] = m.mean_queue_s;
  j["median_queue_s"] = m.median_queue_s;
  j["p99_queue_s"] = m.p99_queue_s;
  j["mean_first_queue_s"] = m.mean_first_queue_s;
  j["mean_jct_s"] = m.mean_jct_s;
  j["median_jct_s"] = m.median_jct_s;
  j["p99_jct_s"] = m.p99_jct_s;
  j["gpu_utilization"] = m.gpu_utilization;
  j["big_jobs"] = m.big_jobs;
  j["big_mean_queue_s"] = m.big_mean_queue_s;
  j["big_max_queue_s"] = m.big_max_queue_s;
  j["preemptions"] = m.preemptions;
  if (options.elastic_fraction > 0) {
    j["elastic_jobs"] = m.elastic_jobs;
    j["grows"] = m.grows;
    j["shrinks"] = m.shrinks;
  }
  j["preempted_jobs"] = m.preempted_jobs;
  j["lost_gpu_hours"] = m.lost_gpu_hours;
  AddFairness(j, m.fairness);
  j["unplaceable"] = m.unplaceable;
  j["skipped_no_duration"] = m.skipped_no_duration;
  j["stuck"] = m.stuck;
  j["gang_jobs"] = m.gang_jobs;
  j["naive_overcommits"] = m.naive_overcommits;
  j["passes"] = m.passes;
  j["cluster"] = {{"nodes", m.nodes}, {"gpus", m.gpus}};
  if (options.window) {
    j["window"] = {{"text", options.window->text},
                   {"start_s", double(options.window->start_ms) / 1000.0},
                   {"end_s", double(options.window->end_ms) / 1000.0},
                   {"warmup_s", double(options.window->warmup_ms) / 1000.0}};
  }
  j["policy"] = ReplayPolicyName(options.policy);
  j["knobs"] = Knobs(options);
  return j.dump();
}

}  // namespace trainq::sim
