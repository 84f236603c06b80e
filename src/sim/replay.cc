#include "src/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "src/core/placement.h"
#include "src/sim/cluster.h"
#include "src/sim/usage.h"

namespace trainq::sim {

std::optional<ReplayPolicy> ParseReplayPolicy(std::string_view name) {
  if (name == "trainq") return ReplayPolicy::kTrainq;
  if (name == "fifo") return ReplayPolicy::kFifo;
  if (name == "naive") return ReplayPolicy::kNaive;
  return std::nullopt;
}

const char* ReplayPolicyName(ReplayPolicy policy) {
  switch (policy) {
    case ReplayPolicy::kTrainq:
      return "trainq";
    case ReplayPolicy::kFifo:
      return "fifo";
    case ReplayPolicy::kNaive:
      return "naive";
  }
  return "?";
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(values.size())));
  size_t k = std::clamp<size_t>(rank, 1, values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + long(k), values.end());
  return values[k];
}

namespace {

// Where a started job runs: GPU positions on each of its nodes (several for gang jobs).
using Placement = std::vector<std::pair<size_t, std::vector<int>>>;

constexpr double kNaiveFreeShare = 0.9;  // a GPU "is free" when this share of it is free

class Replayer {
 public:
  Replayer(std::span<const TraceJob> trace, std::span<const NodeSpec> nodes,
           const ReplayOptions& options)
      : trace_(trace), options_(options), cluster_(nodes), placed_(trace.size()) {
    config_.headroom_bytes = 0;
    config_.aging_ms = options.aging_ms;
    config_.max_holds = options.max_holds;
    if (options.policy == ReplayPolicy::kTrainq) config_.workload = WorkloadMix(trace);
    metrics_.start_ms.resize(trace.size());
    metrics_.nodes = int(cluster_.size());
    metrics_.gpus = cluster_.total_gpus();
  }

  ReplayMetrics Run() {
    Admit();
    int64_t now = arrivals_.empty() ? 0 : trace_[arrivals_.front()].submit_ms;
    while (next_arrival_ < arrivals_.size() || !ends_.empty()) {
      int64_t t = NextEventTime();
      AdvanceUsage(usage_, running_gpus_, t - now, options_.half_life_ms);
      now = t;
      FinishEndingAt(now);
      ArriveAt(now);
      Pass(now);
    }
    metrics_.stuck = int(waiting_.size());
    Summarize();
    return std::move(metrics_);
  }

 private:
  bool IsGang(size_t i) const { return trace_[i].gpus > cluster_.max_gpus_per_node(); }

  // Sorts out rows that cannot be replayed and orders the rest by submit time.
  void Admit() {
    pending_.reserve(trace_.size());
    for (size_t i = 0; i < trace_.size(); ++i) {
      pending_.push_back(ToPending(trace_[i], JobId(i + 1)));
      if (IsGang(i)) pending_.back().cpus = 0, pending_.back().host_mem_bytes = 0;
      if (!trace_[i].duration_ms) {
        ++metrics_.skipped_no_duration;
      } else if (IsGang(i) ? trace_[i].gpus > cluster_.total_gpus()
                           : !cluster_.FitsEmpty(pending_[i])) {
        ++metrics_.unplaceable;
      } else {
        arrivals_.push_back(i);
      }
    }
    std::stable_sort(arrivals_.begin(), arrivals_.end(),
                     [&](size_t a, size_t b) { return trace_[a].submit_ms < trace_[b].submit_ms; });
  }

  int64_t NextEventTime() const {
    int64_t t = INT64_MAX;
    if (next_arrival_ < arrivals_.size()) t = trace_[arrivals_[next_arrival_]].submit_ms;
    if (!ends_.empty()) t = std::min(t, ends_.top().first);
    return t;
  }

  void FinishEndingAt(int64_t now) {
    while (!ends_.empty() && ends_.top().first == now) {
      size_t i = ends_.top().second;
      ends_.pop();
      for (const auto& [node, gpus] : placed_[i]) cluster_.Finish(pending_[i], node, gpus);
      running_gpus_[trace_[i].user] -= GpuShare(i);
    }
  }

  void ArriveAt(int64_t now) {
    while (next_arrival_ < arrivals_.size() && trace_[arrivals_[next_arrival_]].submit_ms == now) {
      waiting_.push_back(arrivals_[next_arrival_++]);
    }
  }

  double GpuShare(size_t i) const { return trace_[i].gpus * (trace_[i].gpu_milli / 1000.0); }

  void Start(size_t i, Placement where, int64_t now) {
    for (const auto& [node, gpus] : where) cluster_.Start(pending_[i], node, gpus);
    placed_[i] = std::move(where);
    metrics_.start_ms[i] = now;
    ends_.emplace(now + *trace_[i].duration_ms, i);
    running_gpus_[trace_[i].user] += GpuShare(i);
    started_.push_back(i);
  }

  // Whether any GPU has room for one more job. When none has and every waiting job needs
  // GPUs, a pass cannot start anything (nor make a gang job's nodes idle), so it is skipped;
  // holds stay as the last pass left them.
  bool Futile() const {
    for (size_t i : waiting_) {
      if (trace_[i].gpus == 0) return false;
    }
    for (const NodeState& n : cluster_.nodes()) {
      for (const GpuState& g : n.gpus) {
        uint64_t held = 0;
        bool exclusive = false;
        for (const Holding& h : g.holdings) held += h.reserved_bytes, exclusive |= h.exclusive;
        if (!exclusive && held < g.total_bytes) return false;
      }
    }
    return true;
  }

  void Pass(int64_t now) {
    if (waiting_.empty() || Futile()) return;
    ++metrics_.passes;
    switch (options_.policy) {
      case ReplayPolicy::kTrainq:
        TrainqPass(now);
        break;
      case ReplayPolicy::kFifo:
        FifoPass(now);
        break;
      case ReplayPolicy::kNaive:
        NaivePass(now);
        break;
    }
    DropStarted();
  }

  void DropStarted() {
    if (started_.empty()) return;
    std::sort(started_.begin(), started_.end());
    std::erase_if(waiting_, [&](size_t i) {
      return std::binary_search(started_.begin(), started_.end(), i);
    });
    started_.clear();
  }

  // ---- Gang jobs: several whole idle nodes at once, as cluster mode will place them. ----

  bool Reserved(size_t node) const {
    return std::find(reserved_nodes_.begin(), reserved_nodes_.end(), node) != reserved_nodes_.end();
  }

  bool TryGang(size_t i, int64_t now) {
    Placement where;
    int gpus = 0;
    bool own_reservation = reserved_for_ == i;
    for (size_t n = 0; n < cluster_.size() && gpus < trace_[i].gpus; ++n) {
      if (!cluster_.Idle(n) || cluster_.spec(n).gpus == 0) continue;
      if (!own_reservation && Reserved(n)) continue;
      std::vector<int> all(size_t(cluster_.spec(n).gpus));
      std::iota(all.begin(), all.end(), 0);
      where.emplace_back(n, std::move(all));
      gpus += cluster_.spec(n).gpus;
    }
    if (gpus < trace_[i].gpus) return false;
    ++metrics_.gang_jobs;
    if (own_reservation) reserved_for_.reset(), reserved_nodes_.clear();
    Start(i, std::move(where), now);
    return true;
  }

  // A gang job past the aging limit gets the nodes closest to idle held for it: no new job
  // starts there until it does, so a stream of small jobs cannot starve it. Chosen again at
  // every pass: held nodes only drain, so the choice moves only to a node that is emptier,
  // never stays stuck behind one long job.
  void ReserveForGang(size_t i) {
    reserved_nodes_.clear();
    std::vector<size_t> order(cluster_.size());
    std::iota(order.begin(), order.end(), 0);
    auto busy = [&](size_t n) {
      int b = 0;
      for (const GpuState& g : cluster_.nodes()[n].gpus) b += g.holdings.empty() ? 0 : 1;
      return b;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return busy(a) < busy(b); });
    int gpus = 0;
    for (size_t n : order) {
      if (gpus >= trace_[i].gpus) break;
      if (cluster_.spec(n).gpus == 0) continue;
      reserved_nodes_.push_back(n);
      gpus += cluster_.spec(n).gpus;
    }
    reserved_for_ = i;
  }

  // ---- trainq: the policy's Place() over everything waiting, fair share and holds. ----

  void TrainqPass(int64_t now) {
    std::vector<PendingJob> jobs;
    for (size_t i : waiting_) {
      if (!IsGang(i)) {
        jobs.push_back(pending_[i]);
        continue;
      }
      if (TryGang(i, now)) continue;
      bool aged = now - trace_[i].submit_ms >= options_.aging_ms;
      if (aged && (!reserved_for_ || reserved_for_ == i)) ReserveForGang(i);
    }
    if (jobs.empty()) return;
    PlacementResult r;
    if (reserved_nodes_.empty()) {
      r = Place(jobs, cluster_.nodes(), config_, now, usage_, holds_);
    } else {
      std::vector<NodeState> open;
      for (size_t n = 0; n < cluster_.size(); ++n) {
        if (!Reserved(n)) open.push_back(cluster_.nodes()[n]);
      }
      r = Place(jobs, open, config_, now, usage_, holds_);
    }
    holds_ = std::move(r.holds);
    ApplyStarts(r.starts, now);
  }

  void ApplyStarts(const std::vector<StartDecision>& starts, int64_t now) {
    for (const StartDecision& d : starts) {
      size_t i = size_t(d.job - 1);
      Start(i, {{cluster_.Find(d.node), GpuPositions(d)}}, now);
    }
  }

  // The simulated nodes number their GPUs 0..n-1, so an index is a position.
  static std::vector<int> GpuPositions(const StartDecision& d) { return d.gpu_indices; }

  // ---- fifo: only the head of the line may start; the same GPU choice as Place(). ----

  void FifoPass(int64_t now) {
    for (size_t i : waiting_) {
      if (IsGang(i)) {
        if (!TryGang(i, now)) return;
        continue;
      }
      PlacementResult r = Place(std::span(&pending_[i], 1), cluster_.nodes(), config_, now);
      if (r.starts.empty()) return;
      ApplyStarts(r.starts, now);
    }
  }

  // ---- naive: what task-spooler and the seed scripts do. ----

  bool LooksFree(size_t node, int g) const {
    const GpuState& gpu = cluster_.nodes()[node].gpus[size_t(g)];
    return double(cluster_.HeldBytes(node, g)) <= (1.0 - kNaiveFreeShare) * double(gpu.total_bytes);
  }

  void NaivePass(int64_t now) {
    // Within a pass GPUs only fill up, so a request that found no place finds none later.
    std::set<std::tuple<int, int, int, uint64_t>> failed;
    for (size_t i : waiting_) {
      if (IsGang(i)) {
        TryGang(i, now);
        continue;
      }
      const PendingJob& p = pending_[i];
      auto shape = std::tuple(p.gpus, trace_[i].gpu_milli, p.cpus, p.host_mem_bytes);
      if (failed.count(shape) || !NaiveStart(i, now)) failed.insert(shape);
    }
  }

  // First fit: the first node with enough GPUs that look free, its first such GPUs.
  bool NaiveStart(size_t i, int64_t now) {
    for (size_t n = 0; n < cluster_.size(); ++n) {
      if (!cluster_.HostFits(pending_[i], n)) continue;
      std::vector<int> gpus;
      for (int g = 0; g < cluster_.spec(n).gpus && int(gpus.size()) < trace_[i].gpus; ++g) {
        if (LooksFree(n, g)) gpus.push_back(g);
      }
      if (int(gpus.size()) < trace_[i].gpus) continue;
      CountOvercommit(i, n, gpus);
      Start(i, {{n, std::move(gpus)}}, now);
      return true;
    }
    return false;
  }

  void CountOvercommit(size_t i, size_t n, const std::vector<int>& gpus) {
    uint64_t need = cluster_.ReservedBytes(pending_[i], n);
    for (int g : gpus) {
      if (cluster_.HeldBytes(n, g) + need > cluster_.spec(n).gpu_mem_bytes) {
        ++metrics_.naive_overcommits;
        return;
      }
    }
  }

  void Summarize() {
    std::vector<double> queue, jct, big;
    int64_t first = INT64_MAX, last = INT64_MIN;
    double gpu_ms = 0;
    for (size_t i = 0; i < trace_.size(); ++i) {
      if (!metrics_.start_ms[i]) continue;
      int64_t submit = trace_[i].submit_ms, start = *metrics_.start_ms[i];
      int64_t end = start + *trace_[i].duration_ms;
      queue.push_back((start - submit) / 1000.0);
      jct.push_back((end - submit) / 1000.0);
      first = std::min(first, submit);
      last = std::max(last, end);
      gpu_ms += GpuShare(i) * double(*trace_[i].duration_ms);
      if (trace_[i].gpus >= cluster_.max_gpus_per_node()) big.push_back(queue.back());
    }
    metrics_.big_jobs = int(big.size());
    if (!big.empty()) {
      metrics_.big_mean_queue_s = std::accumulate(big.begin(), big.end(), 0.0) / double(big.size());
      metrics_.big_max_queue_s = *std::max_element(big.begin(), big.end());
    }
    metrics_.jobs = int(queue.size());
    if (queue.empty()) return;
    auto mean = [](const std::vector<double>& v) {
      return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    };
    metrics_.makespan_s = (last - first) / 1000.0;
    metrics_.mean_queue_s = mean(queue);
    metrics_.median_queue_s = Percentile(queue, 50);
    metrics_.p99_queue_s = Percentile(queue, 99);
    metrics_.mean_jct_s = mean(jct);
    metrics_.median_jct_s = Percentile(jct, 50);
    metrics_.p99_jct_s = Percentile(jct, 99);
    double capacity_ms = double(cluster_.total_gpus()) * double(last - first);
    metrics_.gpu_utilization = capacity_ms > 0 ? gpu_ms / capacity_ms : 0;
  }

  std::span<const TraceJob> trace_;
  ReplayOptions options_;
  Cluster cluster_;
  PolicyConfig config_;
  std::vector<PendingJob> pending_;  // per trace row
  std::vector<Placement> placed_;    // per trace row
  std::vector<size_t> arrivals_;     // rows to replay, by submit time
  size_t next_arrival_ = 0;
  std::vector<size_t> waiting_;  // arrival order
  std::vector<size_t> started_;  // in this pass
  std::priority_queue<std::pair<int64_t, size_t>, std::vector<std::pair<int64_t, size_t>>,
                      std::greater<>>
      ends_;
  UsageByUser usage_;
  std::map<std::string, double> running_gpus_;
  std::vector<Hold> holds_;
  std::optional<size_t> reserved_for_;
  std::vector<size_t> reserved_nodes_;
  ReplayMetrics metrics_;
};

}  // namespace

ReplayMetrics Replay(std::span<const TraceJob> trace, std::span<const NodeSpec> nodes,
                     const ReplayOptions& options) {
  return Replayer(trace, nodes, options).Run();
}

std::string ReplayJson(const ReplayMetrics& m, const ReplayOptions& options) {
  nlohmann::ordered_json j;
  j["jobs"] = m.jobs;
  j["makespan_s"] = m.makespan_s;
  j["mean_queue_s"] = m.mean_queue_s;
  j["median_queue_s"] = m.median_queue_s;
  j["p99_queue_s"] = m.p99_queue_s;
  j["mean_jct_s"] = m.mean_jct_s;
  j["median_jct_s"] = m.median_jct_s;
  j["p99_jct_s"] = m.p99_jct_s;
  j["gpu_utilization"] = m.gpu_utilization;
  j["big_jobs"] = m.big_jobs;
  j["big_mean_queue_s"] = m.big_mean_queue_s;
  j["big_max_queue_s"] = m.big_max_queue_s;
  j["unplaceable"] = m.unplaceable;
  j["skipped_no_duration"] = m.skipped_no_duration;
  j["stuck"] = m.stuck;
  j["gang_jobs"] = m.gang_jobs;
  j["naive_overcommits"] = m.naive_overcommits;
  j["passes"] = m.passes;
  j["cluster"] = {{"nodes", m.nodes}, {"gpus", m.gpus}};
  j["policy"] = ReplayPolicyName(options.policy);
  nlohmann::ordered_json knobs;
  if (options.policy == ReplayPolicy::kTrainq) {
    knobs["aging_s"] = options.aging_ms / 1000.0;
    knobs["half_life_s"] = options.half_life_ms / 1000.0;
    knobs["max_holds"] = options.max_holds;
    knobs["note"] =
        "fair share by decayed GPU-hours per user (user, else vc column); jobs "
        "waiting past aging_s get GPUs held (gang jobs: whole nodes)";
  } else if (options.policy == ReplayPolicy::kFifo) {
    knobs["note"] = "strict head of line: nothing starts while the first waiting job does not fit";
  } else {
    knobs["note"] =
        "a GPU is free when >= 90% of its memory is free; one job per GPU; FIFO "
        "with skipping; no fair share, no holds";
  }
  j["knobs"] = knobs;
  return j.dump();
}

}  // namespace trainq::sim
