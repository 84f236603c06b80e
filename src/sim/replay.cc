#include "src/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "src/sim/replay_internal.h"
#include "src/sim/usage.h"

namespace trainq::sim {

std::optional<ReplayPolicy> ParseReplayPolicy(std::string_view name) {
  if (name == "trainq") return ReplayPolicy::kTrainq;
  if (name == "fifo") return ReplayPolicy::kFifo;
  if (name == "naive") return ReplayPolicy::kNaive;
  if (name == "tiresias") return ReplayPolicy::kTiresias;
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
    case ReplayPolicy::kTiresias:
      return "tiresias";
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

namespace replay_internal {

namespace {

constexpr double kNaiveFreeShare = 0.9;  // a GPU "is free" when this share of it is free

}  // namespace

Replayer::Replayer(std::span<const TraceJob> trace, std::span<const NodeSpec> nodes,
                   const ReplayOptions& options)
    : trace_(trace),
      options_(options),
      cluster_(nodes),
      placed_(trace.size()),
      runs_(trace.size()),
      rank_(trace.size(), 0) {
  config_.headroom_bytes = 0;
  config_.aging_ms = options.aging_ms;
  config_.max_holds = options.max_holds;
  if (options.policy == ReplayPolicy::kTrainq) config_.workload = WorkloadMix(trace);
  metrics_.start_ms.resize(trace.size());
  metrics_.nodes = int(cluster_.size());
  metrics_.gpus = cluster_.total_gpus();
}

bool Replayer::Preempts() const {
  return options_.policy == ReplayPolicy::kTiresias ||
         (options_.policy == ReplayPolicy::kTrainq && options_.preempt);
}

ReplayMetrics Replayer::Run() {
  Admit();
  int64_t now = arrivals_.empty() ? 0 : trace_[arrivals_.front()].submit_ms;
  int64_t last = arrivals_.empty() ? 0 : trace_[arrivals_.back()].submit_ms;
  fairness_.emplace(double(cluster_.total_gpus()),
                    std::max(now, options_.measure_from_ms.value_or(now)), last);
  for (;;) {
    PruneEnds();
    if (next_arrival_ >= arrivals_.size() && ends_.empty()) break;
    int64_t t = NextEventTime();
    Advance(now, t);
    now = t;
    EndAttemptsAt(now);
    while (!wakeups_.empty() && wakeups_.top() <= now) wakeups_.pop();
    ArriveAt(now);
    Pass(now);
  }
  metrics_.stuck = int(waiting_.size());
  Summarize();
  return std::move(metrics_);
}

// Sorts out rows that cannot be replayed and orders the rest by submit time.
void Replayer::Admit() {
  pending_.reserve(trace_.size());
  for (size_t i = 0; i < trace_.size(); ++i) {
    pending_.push_back(ToPending(trace_[i], JobId(i + 1)));
    if (IsGang(i)) pending_.back().cpus = 0, pending_.back().host_mem_bytes = 0;
    // Tiresias counts whole GPUs, as its paper's simulator does.
    if (options_.policy == ReplayPolicy::kTiresias) {
      pending_.back().mem_percent.reset();
      pending_.back().mem_bytes.reset();
    }
    if (!trace_[i].duration_ms) {
      metrics_.skipped_no_duration += Measured(i) ? 1 : 0;
    } else if (IsGang(i) ? trace_[i].gpus > cluster_.total_gpus()
                         : !cluster_.FitsEmpty(pending_[i])) {
      metrics_.unplaceable += Measured(i) ? 1 : 0;
    } else {
      arrivals_.push_back(i);
      runs_[i].work.left_ms = *trace_[i].duration_ms;
    }
  }
  std::stable_sort(arrivals_.begin(), arrivals_.end(),
                   [&](size_t a, size_t b) { return trace_[a].submit_ms < trace_[b].submit_ms; });
  for (size_t k = 0; k < arrivals_.size(); ++k) rank_[arrivals_[k]] = k;
  ChooseElastic();
}

// Drops end events of attempts that ended otherwise or moved (a stop brought forward).
void Replayer::PruneEnds() {
  while (!ends_.empty()) {
    const EndEvent& e = ends_.top();
    const JobRun& r = runs_[e.row];
    bool live =
        (r.state == RunState::kRunning || r.state == RunState::kStopping) && r.epoch == e.epoch;
    if (live) return;
    ends_.pop();
  }
}

int64_t Replayer::NextEventTime() const {
  int64_t t = INT64_MAX;
  if (next_arrival_ < arrivals_.size()) t = trace_[arrivals_[next_arrival_]].submit_ms;
  if (!ends_.empty()) t = std::min(t, ends_.top().at);
  if (!wakeups_.empty()) t = std::min(t, wakeups_.top());
  return t;
}

void Replayer::Advance(int64_t from, int64_t to) {
  AdvanceUsage(usage_, running_gpus_, to - from, options_.half_life_ms);
  fairness_->Add(from, to, demand_, running_gpus_);
}

void Replayer::EndAttemptsAt(int64_t now) {
  for (PruneEnds(); !ends_.empty() && ends_.top().at == now; PruneEnds()) {
    size_t i = ends_.top().row;
    ends_.pop();
    const JobRun& r = runs_[i];
    if (r.state == RunState::kStopping && now < r.attempt_start_ms + r.attempt_ms) {
      if (r.resize_to) {
        EndResize(i, now);
        continue;
      }
      Cut(i, now);
    } else {
      Complete(i, now);
    }
  }
}

void Replayer::ArriveAt(int64_t now) {
  while (next_arrival_ < arrivals_.size() && trace_[arrivals_[next_arrival_]].submit_ms == now) {
    size_t i = arrivals_[next_arrival_++];
    demand_[trace_[i].user] += GpuShare(i);
    Enqueue(i, now);
  }
}

// Into the line at its place by arrival (a requeued job keeps its submit order), waiting from
// now.
void Replayer::Enqueue(size_t i, int64_t now) {
  JobRun& r = runs_[i];
  r.state = RunState::kWaiting;
  r.queued_since_ms = now;
  pending_[i].queued_at = now;
  pending_[i].service_band = ServiceBand(r.attained_gpu_ms, options_.attained_service_ms);
  auto at = std::lower_bound(waiting_.begin(), waiting_.end(), rank_[i],
                             [&](size_t row, size_t rank) { return rank_[row] < rank; });
  waiting_.insert(at, i);
  if (options_.policy == ReplayPolicy::kTrainq && options_.preempt && options_.preempt_for_aging &&
      LargeForAging(i)) {
    WakeAt(now + options_.aging_ms + 1, now);  // aged is "waited more than aging_ms"
  }
}

void Replayer::WakeAt(int64_t at, int64_t now) {
  if (at > now) wakeups_.push(at);
}

void Replayer::Start(size_t i, Placement where, int64_t now) {
  for (const auto& [node, gpus] : where) cluster_.Start(pending_[i], node, gpus);
  placed_[i] = std::move(where);
  if (!metrics_.start_ms[i]) metrics_.start_ms[i] = now;
  JobRun& r = runs_[i];
  r.waited_ms += now - r.queued_since_ms;
  r.state = RunState::kRunning;
  r.gpus_now = 0;
  for (const auto& [node, gpus] : placed_[i]) r.gpus_now += int(gpus.size());
  r.speed = SpeedAt(i, r.gpus_now);
  r.attempt_start_ms = now;
  r.attempt_ms = r.work.AttemptMs(r.speed);
  r.attempt_end_ms = now + r.attempt_ms;
  ends_.push({r.attempt_end_ms, i, ++r.epoch});
  running_gpus_[trace_[i].user] += HeldShare(i);
  if (Elastic(i)) WakeAt(now + options_.min_runtime_ms, now);  // it may resize from then on
  running_.insert(i);
  started_.push_back(i);
  if (options_.policy == ReplayPolicy::kTrainq && options_.preempt) {
    WakeAt(now + options_.min_runtime_ms, now);  // it may be a victim from then on
    // ... and once past the attained-service threshold, by that rule.
    if (options_.preempt_for_attained_service && options_.attained_service_ms > 0 &&
        r.gpus_now > 0) {
      double need = double(options_.attained_service_ms) - r.attained_gpu_ms;
      if (need > 0) WakeAt(now + int64_t(need / r.gpus_now) + 1, now);
    }
  }
  if (options_.policy == ReplayPolicy::kTiresias) WakeForDemotion(i, now);
}

// Its GPUs back; the attempt's GPU-time (and Tiresias's service) counted.
void Replayer::Release(size_t i, int64_t now) {
  for (const auto& [node, gpus] : placed_[i]) cluster_.Finish(pending_[i], node, gpus);
  placed_[i].clear();
  DropReserved(i);
  running_gpus_[trace_[i].user] -= HeldShare(i);
  runs_[i].gpu_ms += HeldShare(i) * double(now - runs_[i].attempt_start_ms);
  if (options_.policy == ReplayPolicy::kTiresias) AccrueService(i, now);
  if (options_.policy == ReplayPolicy::kTrainq) {
    runs_[i].attained_gpu_ms += double(runs_[i].gpus_now) * double(now - runs_[i].attempt_start_ms);
  }
  running_.erase(i);
}

void Replayer::Complete(size_t i, int64_t now) {
  Release(i, now);
  runs_[i].state = RunState::kDone;
  runs_[i].end_ms = now;
  demand_[trace_[i].user] -= GpuShare(i);
}

// A preempted attempt ends: the job keeps its checkpointed progress and queues again.
void Replayer::Cut(size_t i, int64_t now) {
  JobRun& r = runs_[i];
  r.work.Cut(now - r.attempt_start_ms, options_.checkpoint, r.speed);
  Release(i, now);
  ++r.preemptions;
  ++metrics_.preemptions;
  r.last_preempted_ms = now;
  Enqueue(i, now);
  // The thrash guard spares a job preempted twice in a row for a while: a pass is due after.
  if (options_.policy == ReplayPolicy::kTrainq && r.preemptions >= 2 &&
      options_.preempt_spare_ms > 0) {
    WakeAt(now + options_.preempt_spare_ms, now);
  }
}

// A victim: it runs on until `at` (or its own end, if sooner), then its attempt is cut.
void Replayer::StopAt(size_t i, int64_t at) {
  JobRun& r = runs_[i];
  r.state = RunState::kStopping;
  if (at >= r.attempt_end_ms) return;
  r.attempt_end_ms = at;
  ends_.push({at, i, ++r.epoch});
}

// Whether any GPU has room for one more job. When none has and every waiting job needs
// GPUs, a pass cannot start anything (nor make a gang job's nodes idle), so it is skipped;
// holds stay as the last pass left them. A policy that preempts still decides, below.
bool Replayer::Futile() const {
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

void Replayer::Pass(int64_t now) {
  if (waiting_.empty()) {
    if (Resizes()) GrowStep(now, /*starting=*/false);  // idle GPUs nobody waits for
    return;
  }
  bool futile = Futile();
  if (futile && !Preempts() && !Resizes()) return;
  ++metrics_.passes;
  switch (options_.policy) {
    case ReplayPolicy::kTrainq:
      // Nothing can start, so Place would leave every job waiting for GPUs: only the
      // preemption step can change anything.
      if (futile) {
        PreemptStep(nullptr, now);
      } else {
        TrainqPass(now);
      }
      break;
    case ReplayPolicy::kFifo:
      FifoPass(now);
      break;
    case ReplayPolicy::kNaive:
      NaivePass(now);
      break;
    case ReplayPolicy::kTiresias:
      TiresiasPass(now);
      break;
  }
  DropStarted();
}

void Replayer::DropStarted() {
  if (started_.empty()) return;
  std::sort(started_.begin(), started_.end());
  std::erase_if(waiting_,
                [&](size_t i) { return std::binary_search(started_.begin(), started_.end(), i); });
  started_.clear();
}

// ---- Gang jobs: several whole idle nodes at once, as cluster mode will place them. ----

bool Replayer::Reserved(size_t node) const {
  return std::find(reserved_nodes_.begin(), reserved_nodes_.end(), node) != reserved_nodes_.end();
}

bool Replayer::TryGang(size_t i, int64_t now) {
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
  if (own_reservation) reserved_for_.reset(), reserved_nodes_.clear();
  Start(i, std::move(where), now);
  return true;
}

// A gang job past the aging limit gets the nodes closest to idle held for it: no new job
// starts there until it does, so a stream of small jobs cannot starve it. Chosen again at
// every pass: held nodes only drain, so the choice moves only to a node that is emptier,
// never stays stuck behind one long job.
void Replayer::ReserveForGang(size_t i) {
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

// The nodes a trainq pass places on: all but those held for a gang job.
std::span<const NodeState> Replayer::PassNodes(std::vector<NodeState>& storage) const {
  if (reserved_nodes_.empty()) return cluster_.nodes();
  storage.clear();
  for (size_t n = 0; n < cluster_.size(); ++n) {
    if (!Reserved(n)) storage.push_back(cluster_.nodes()[n]);
  }
  return storage;
}

// ---- trainq: the policy's Place() over everything waiting, fair share and holds. ----

void Replayer::TrainqPass(int64_t now) {
  std::vector<PendingJob> jobs;
  for (size_t i : waiting_) {
    if (!IsGang(i)) {
      jobs.push_back(pending_[i]);
      continue;
    }
    if (TryGang(i, now)) continue;
    bool aged = now - runs_[i].queued_since_ms >= options_.aging_ms;
    if (aged && (!reserved_for_ || reserved_for_ == i)) ReserveForGang(i);
  }
  if (jobs.empty()) return;
  std::vector<NodeState> storage;
  PlacementResult r = Place(jobs, PassNodes(storage), config_, now, usage_, holds_);
  holds_ = std::move(r.holds);
  ApplyStarts(r.starts, now);
  // As the daemon's pass: a job starts with its node's idle GPUs, then the jobs left waiting
  // shrink elastic jobs or preempt, then running elastic jobs grow into what is still idle.
  if (Resizes()) GrowStep(now, /*starting=*/true);
  if (options_.preempt || Resizes()) PreemptStep(&r, now);
  if (Resizes()) GrowStep(now, /*starting=*/false);
}

void Replayer::ApplyStarts(const std::vector<StartDecision>& starts, int64_t now) {
  for (const StartDecision& d : starts) {
    // The simulated nodes number their GPUs 0..n-1, so an index is a position.
    Start(size_t(d.job - 1), {{cluster_.Find(d.node), d.gpu_indices}}, now);
  }
}

// ---- fifo: only the head of the line may start; the same GPU choice as Place(). ----

void Replayer::FifoPass(int64_t now) {
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

bool Replayer::LooksFree(size_t node, int g) const {
  const GpuState& gpu = cluster_.nodes()[node].gpus[size_t(g)];
  return double(cluster_.HeldBytes(node, g)) <= (1.0 - kNaiveFreeShare) * double(gpu.total_bytes);
}

void Replayer::NaivePass(int64_t now) {
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
bool Replayer::NaiveStart(size_t i, int64_t now) {
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

void Replayer::CountOvercommit(size_t i, size_t n, const std::vector<int>& gpus) {
  uint64_t need = cluster_.ReservedBytes(pending_[i], n);
  for (int g : gpus) {
    if (cluster_.HeldBytes(n, g) + need > cluster_.spec(n).gpu_mem_bytes) {
      ++metrics_.naive_overcommits;
      return;
    }
  }
}

}  // namespace replay_internal

ReplayMetrics Replay(std::span<const TraceJob> trace, std::span<const NodeSpec> nodes,
                     const ReplayOptions& options) {
  return replay_internal::Replayer(trace, nodes, options).Run();
}

}  // namespace trainq::sim
