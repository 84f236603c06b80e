// The replay's working state, shared by the files that implement it: replay.cc (the event
// loop, jobs' attempts, the fifo, naive and trainq passes, gang jobs), replay_preempt.cc
// (trainq's preemption step), replay_tiresias.cc (2D-LAS) and replay_report.cc (metrics and
// JSON). Not a public interface.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "src/core/elastic.h"
#include "src/core/placement.h"
#include "src/core/preemption.h"
#include "src/sim/cluster.h"
#include "src/sim/fairness.h"
#include "src/sim/las.h"
#include "src/sim/replay.h"

namespace trainq::sim::replay_internal {

enum class RunState { kAhead, kWaiting, kRunning, kStopping, kDone };

// One trace row's life in the replay.
struct JobRun {
  RunState state = RunState::kAhead;
  JobWork work;
  int64_t attempt_start_ms = 0;
  int64_t attempt_ms = 0;      // how long the attempt runs if nothing stops it
  int64_t attempt_end_ms = 0;  // when it ends: that, or its stop
  uint32_t epoch = 0;          // bumped when attempt_end_ms moves; older end events are stale
  int64_t queued_since_ms = 0;
  int64_t waited_ms = 0;  // summed over its waits
  int64_t end_ms = 0;
  int preemptions = 0;
  int64_t last_preempted_ms = 0;
  double gpu_ms = 0;  // GPU-time held, all attempts
  // Tiresias: service of the attempts that ended, and the queue it has reached.
  double attained_gpu_ms = 0;
  int las_queue = 0;
  int64_t las_entered_ms = 0;  // when it reached queue 1
  // Elastic jobs: the range of GPUs (0: a rigid job), the size and pace of the attempt, and a
  // resize under way (the attempt stops, then runs on `resize_to` at once; a grow holds the
  // GPUs it adds in `reserved` until then).
  int min_gpus = 0, max_gpus = 0;
  int gpus_now = 0;
  double speed = 1.0;
  std::optional<Placement> resize_to;
  Placement reserved;
};

struct EndEvent {
  int64_t at = 0;
  size_t row = 0;
  uint32_t epoch = 0;
  auto operator<=>(const EndEvent&) const = default;
};

// A waiting job whose victims are stopping; its GPUs are held for it (Hold::preempting).
struct Preempting {
  int64_t ready_at = 0;
  int64_t give_up_at = 0;  // the preemption is over if it has not started by then
};

// How long after ready_at (its victims' stop) a preemptor may take to start before the
// preemption is over. The daemon allows grace_period + 60 s for a slow stop; a simulated stop
// takes exactly stop_ms.
inline constexpr int64_t kGiveUpMs = 60 * 1000;

class Replayer {
 public:
  Replayer(std::span<const TraceJob> trace, std::span<const NodeSpec> nodes,
           const ReplayOptions& options);
  ReplayMetrics Run();

 private:
  // ---- replay.cc ----
  bool IsGang(size_t i) const { return trace_[i].gpus > cluster_.max_gpus_per_node(); }
  // What the trace row asks for, and what its attempt holds (an elastic job's size).
  double GpuShare(size_t i) const { return trace_[i].gpus * (trace_[i].gpu_milli / 1000.0); }
  double HeldShare(size_t i) const { return runs_[i].gpus_now * (trace_[i].gpu_milli / 1000.0); }
  bool Preempts() const;  // whether this policy may stop running jobs
  bool Measured(size_t i) const {
    return !options_.measure_from_ms || trace_[i].submit_ms >= *options_.measure_from_ms;
  }
  void Admit();
  void PruneEnds();
  int64_t NextEventTime() const;
  void Advance(int64_t from, int64_t to);
  void EndAttemptsAt(int64_t now);
  void ArriveAt(int64_t now);
  void Enqueue(size_t i, int64_t now);
  void Start(size_t i, Placement where, int64_t now);
  void Release(size_t i, int64_t now);
  void Complete(size_t i, int64_t now);
  void Cut(size_t i, int64_t now);
  void StopAt(size_t i, int64_t at);
  void WakeAt(int64_t at, int64_t now);
  bool Futile() const;
  void Pass(int64_t now);
  void DropStarted();
  bool Reserved(size_t node) const;
  bool TryGang(size_t i, int64_t now);
  void ReserveForGang(size_t i);
  std::span<const NodeState> PassNodes(std::vector<NodeState>& storage) const;
  void TrainqPass(int64_t now);
  void ApplyStarts(const std::vector<StartDecision>& starts, int64_t now);
  void FifoPass(int64_t now);
  bool LooksFree(size_t node, int g) const;
  void NaivePass(int64_t now);
  bool NaiveStart(size_t i, int64_t now);
  void CountOvercommit(size_t i, size_t n, const std::vector<int>& gpus);

  // ---- replay_elastic.cc ----
  bool Elastic(size_t i) const { return runs_[i].max_gpus > 0; }
  bool Resizes() const { return options_.policy == ReplayPolicy::kTrainq && elastic_jobs_ > 0; }
  void ChooseElastic();
  double SpeedAt(size_t i, int gpus) const;
  std::vector<ElasticRun> ElasticRuns(int64_t now) const;
  std::vector<const PendingJob*> ShrinkFor(std::vector<const PendingJob*> ready, int64_t now);
  // Growth of the jobs this pass started (`starting`), or of those running before it.
  void GrowStep(int64_t now, bool starting);
  void GrowAtStart(size_t i, const Resize& d, int64_t now);
  void BeginResize(size_t i, const Resize& d, int64_t now);
  void EndResize(size_t i, int64_t now);
  void DropReserved(size_t i);

  // ---- replay_preempt.cc ----
  PreemptConfig PreemptSettings() const;
  bool LargeForAging(size_t i) const;
  void PreemptStep(const PlacementResult* result, int64_t now);
  void ExpirePreemptions(int64_t now);
  std::vector<const PendingJob*> LeftForGpus(const PlacementResult& result) const;
  std::vector<const PendingJob*> AllWaitingInOrder() const;
  std::vector<RunningJob> RunningJobs() const;
  void ApplyPreemption(const Preemption& d, int64_t now);

  // ---- replay_tiresias.cc ----
  double LasThresholdGpuMs() const { return options_.las_threshold_gpu_s * 1000.0; }
  LasRank RankOf(size_t i, int64_t now) const;
  void AccrueService(size_t i, int64_t now);
  void WakeForDemotion(size_t i, int64_t now);
  std::vector<std::vector<LasGpu>> LasNodes() const;
  void TiresiasPass(int64_t now);

  // ---- replay_report.cc ----
  void Summarize();

  std::span<const TraceJob> trace_;
  ReplayOptions options_;
  Cluster cluster_;
  PolicyConfig config_;
  std::vector<PendingJob> pending_;  // per trace row
  std::vector<Placement> placed_;    // per trace row: where its attempt runs
  std::vector<JobRun> runs_;         // per trace row
  std::vector<size_t> arrivals_;     // rows to replay, by submit time
  std::vector<size_t> rank_;         // per row: its place in arrivals_
  size_t next_arrival_ = 0;
  std::vector<size_t> waiting_;  // arrival order
  std::vector<size_t> started_;  // in this pass
  std::set<size_t> running_;     // rows running or stopping
  std::priority_queue<EndEvent, std::vector<EndEvent>, std::greater<>> ends_;
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> wakeups_;
  UsageByUser usage_;
  std::map<std::string, double> running_gpus_;  // per user: GPUs held (running or stopping)
  std::map<std::string, double> demand_;        // per user: GPUs of waiting and held jobs
  std::vector<Hold> holds_;
  std::map<JobId, Preempting> preempting_;
  std::optional<size_t> reserved_for_;
  std::vector<size_t> reserved_nodes_;
  std::optional<FairnessMeter> fairness_;
  int elastic_jobs_ = 0;
  ReplayMetrics metrics_;
};

}  // namespace trainq::sim::replay_internal
