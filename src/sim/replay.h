// Replay mode: jobs arrive at their submit time, run their duration and leave; a virtual
// clock jumps from event to event and every event runs one scheduling pass. Deterministic:
// the same inputs give the same result.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/sim/inputs.h"

namespace trainq::sim {

enum class ReplayPolicy {
  kTrainq,  // Place() with fair share from decayed GPU-hours and aging holds
  kFifo,    // strict head of line: only the first waiting job may start
  kNaive,   // a GPU is free when 90 % of its memory is; one job per GPU; FIFO with skipping
};

std::optional<ReplayPolicy> ParseReplayPolicy(std::string_view name);
const char* ReplayPolicyName(ReplayPolicy policy);

struct ReplayOptions {
  ReplayPolicy policy = ReplayPolicy::kTrainq;
  int max_holds = 1;                              // PolicyConfig::max_holds
  int64_t aging_ms = 2 * 3600 * 1000;             // PolicyConfig::aging_ms; also for gang jobs
  int64_t half_life_ms = 7 * 24 * 3600 * 1000LL;  // of the fair-share usage; 0: no decay
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
  double makespan_s = 0;                                         // last end - first submit
  double mean_queue_s = 0, median_queue_s = 0, p99_queue_s = 0;  // start - submit
  double mean_jct_s = 0, median_jct_s = 0, p99_jct_s = 0;        // end - submit
  double gpu_utilization = 0;  // GPU-time the jobs asked for / (GPUs x makespan)
  // Jobs asking for at least a whole node's GPUs: the ones a stream of small jobs starves.
  int big_jobs = 0;
  double big_mean_queue_s = 0, big_max_queue_s = 0;
  // Per trace row: when it started (ms on the trace's clock); nullopt if it never did.
  std::vector<std::optional<int64_t>> start_ms;
};

ReplayMetrics Replay(std::span<const TraceJob> trace, std::span<const NodeSpec> nodes,
                     const ReplayOptions& options);

// {"jobs":..,"makespan_s":..,...,"policy":..,"knobs":{..}} on one line.
std::string ReplayJson(const ReplayMetrics& m, const ReplayOptions& options);

// Nearest-rank percentile (0 < p <= 100) of unsorted values; 0 for none.
double Percentile(std::vector<double> values, double p);

}  // namespace trainq::sim
