// Replay mode: jobs arrive at their submit time, run their duration and leave; a virtual
// clock jumps from event to event and every event runs one scheduling pass. Policies that
// preempt cut a running job short: it loses the work since its last checkpoint, goes back to
// the queue and pays a restart cost when it runs again (src/sim/attempts.h). Deterministic:
// the same inputs give the same result.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/sim/attempts.h"
#include "src/sim/fairness.h"
#include "src/sim/inputs.h"
#include "src/sim/window.h"

namespace trainq::sim {

enum class ReplayPolicy {
  kTrainq,    // Place() with fair share from decayed GPU-hours and aging holds; may preempt
  kFifo,      // strict head of line: only the first waiting job may start
  kNaive,     // a GPU is free when 90 % of its memory is; one job per GPU; FIFO with skipping
  kTiresias,  // 2D-LAS with K = 2 queues (src/sim/las.h), preemptive
};

std::optional<ReplayPolicy> ParseReplayPolicy(std::string_view name);
const char* ReplayPolicyName(ReplayPolicy policy);

struct ReplayOptions {
  ReplayPolicy policy = ReplayPolicy::kTrainq;
  int max_holds = 1;                              // PolicyConfig::max_holds
  int64_t aging_ms = 2 * 3600 * 1000;             // PolicyConfig::aging_ms; also for gang jobs
  int64_t half_life_ms = 7 * 24 * 3600 * 1000LL;  // of the fair-share usage; 0: no decay

  // Policy trainq: after each pass, waiting jobs left for lack of GPUs may preempt running
  // ones through ChoosePreemptions (src/core/preemption.h). Every job is preemptible and has
  // priority 0. The rules are the daemon's options of the same names (config.toml), read by
  // PreemptConfigFrom as the daemon's are: a gap of 0 lets equal priorities, so every job,
  // preempt; the default 1 never fires at priority 0.
  bool preempt = false;
  int preempt_priority_gap = 1;
  bool preempt_for_fair_share = false;
  bool preempt_for_aging = false;
  int64_t min_runtime_ms = 10 * 60 * 1000;
  int64_t preempt_spare_ms = 60 * 60 * 1000;  // PreemptConfig::spare_ms, the thrash guard
  // The attained-service order and rule (PreemptConfig::attained_service_ms, GPU-time; 0:
  // off): jobs that received less go first, and may preempt those past it.
  int64_t attained_service_ms = 0;
  bool preempt_for_attained_service = false;
  // Policies that preempt: from the decision until a victim's GPUs are free (RunningJob::stop_ms:
  // the daemon's default --signal lead, 60 s, plus its grace_period, 10 s). The victim runs on
  // until then.
  int64_t stop_ms = 70 * 1000;
  CheckpointModel checkpoint;
  // Elastic jobs (policy trainq): this fraction of the single-node whole-GPU jobs, drawn by
  // `elastic_seed`, runs on 1 to twice its requested GPUs (at most a node's). On g GPUs a job
  // progresses (g / requested) ^ scaling_exponent times as fast as on its request. Grows and
  // shrinks are chosen by ChooseGrowth and ChooseShrinks (src/core/elastic.h) with
  // min_runtime_ms as the rate limit; a resize is a stop (stop_ms), then a restart at the new
  // size costing restart_cost_ms plus the work since the last checkpoint.
  double elastic_fraction = 0;
  uint64_t elastic_seed = 1;
  double scaling_exponent = 0.8;
  // Policy tiresias: the service (GPUs x seconds) at which a job moves to the second queue.
  double las_threshold_gpu_s = 3250;

  // Rows submitted before this run (they load the cluster) but are not measured: not in the
  // figures, and fairness is measured from here. nullopt: every row is measured.
  std::optional<int64_t> measure_from_ms;
  // Shown in the report when the trace was cut to a window (src/sim/window.h).
  std::optional<TraceWindow> window;
};

struct ReplayMetrics {
  int jobs = 0;                 // replayed to completion
  int skipped_no_duration = 0;  // rows without a duration: never ran in the trace
  int unplaceable = 0;          // need more than the cluster has, even empty
  int stuck = 0;                // still waiting when nothing was left to happen (a bug if > 0)
  int gang_jobs = 0;            // ran on several whole nodes
  int naive_overcommits = 0;    // naive starts whose GPU memory then exceeded the GPU
  int64_t passes = 0;           // scheduling passes run (futile ones are skipped)
  int nodes = 0;
  int gpus = 0;
  double makespan_s = 0;  // last end - first submit
  // Time spent waiting in the queue, summed over a job's waits (submit to first start, and
  // each requeue after a preemption to the next start).
  double mean_queue_s = 0, median_queue_s = 0, p99_queue_s = 0;
  double mean_first_queue_s = 0;                           // submit to first start
  double mean_jct_s = 0, median_jct_s = 0, p99_jct_s = 0;  // end - submit
  double gpu_utilization = 0;  // GPU-time the jobs asked for / (GPUs x makespan)
  // Jobs asking for at least a whole node's GPUs: the ones a stream of small jobs starves.
  int big_jobs = 0;
  double big_mean_queue_s = 0, big_max_queue_s = 0;
  int elastic_jobs = 0;    // replayed jobs that were elastic
  int grows = 0;           // resizes to more GPUs (not counting growth at a job's start)
  int shrinks = 0;         // resizes to fewer GPUs, each for a waiting job
  int preemptions = 0;     // attempts cut short (resizes not counted)
  int preempted_jobs = 0;  // jobs cut short at least once
  // GPU-time held beyond what the jobs asked for: work lost since the last checkpoint, the
  // stop window and restart costs.
  double lost_gpu_hours = 0;
  // Per user, GPU-time received / max-min fair share, from the first submit to the last
  // (src/sim/fairness.h); users asking for at least kFairnessMinGpuHours counted.
  FairnessReport fairness;
  // Per trace row: when it first started (ms on the trace's clock); nullopt if it never did.
  std::vector<std::optional<int64_t>> start_ms;
};

inline constexpr double kFairnessMinGpuHours = 1.0;

ReplayMetrics Replay(std::span<const TraceJob> trace, std::span<const NodeSpec> nodes,
                     const ReplayOptions& options);

// {"jobs":..,"makespan_s":..,...,"policy":..,"knobs":{..}} on one line.
std::string ReplayJson(const ReplayMetrics& m, const ReplayOptions& options);

// Nearest-rank percentile (0 < p <= 100) of unsorted values; 0 for none.
double Percentile(std::vector<double> values, double p);

}  // namespace trainq::sim
