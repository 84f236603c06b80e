// Preemption: which running preemptible jobs a waiting job that did not fit may stop to take
// their GPUs. A pure function of its inputs, as the placement policy is: no I/O, no clock.
// Whether a waiting job fits once victims are gone is judged by Place itself.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/core/fair_share.h"
#include "src/core/placement.h"
#include "trainq/job.h"

namespace trainq {

// A running attempt as preemption sees it.
struct RunningJob {
  JobId job = 0;
  std::string user;
  int priority = 0;
  bool preemptible = false;  // its submitter let it be stopped for others (--preemptible)
  UnixMs started_at = 0;     // this attempt's start: the work a preemption loses
  // GPU-time its earlier attempts received, for the attained-service rule; this attempt's
  // is added as it runs (its GPUs x how long it ran).
  double attained_gpu_ms = 0;
  int preempted_in_a_row = 0;    // how many of its latest attempts in a row ended preempted
  UnixMs last_preempted_at = 0;  // when the latest of those ended
  // How long its stop may take: its --signal lead plus the grace period.
  int64_t stop_ms = 0;
  bool stopping = false;  // already being stopped (cancel, time limit, an earlier preemption)
  // Where it runs, one part per node, parts[0] its master node. Its memory on each GPU is read
  // from the nodes' holdings that name `job`.
  std::vector<NodeGpus> parts;
  int cpus = 0;                 // CPU slots it takes on each of its nodes
  uint64_t host_mem_bytes = 0;  // host memory it takes on each of its nodes
};

// When a waiting job may stop running ones. The priority rule is always on.
struct PreemptConfig {
  // A waiting job may preempt a job whose priority is at least this much below its own; 0:
  // equal priorities preempt one another.
  int priority_gap = 1;
  // A job of a user below their fair share may preempt jobs of users above theirs.
  bool for_fair_share = false;
  // A large job (multi-node, or at least half the GPUs of the largest node) that waited past
  // PolicyConfig::aging_ms may preempt jobs of other users with no higher priority.
  bool for_aging = false;
  // An attempt that has run less than this is not preempted: it has barely started.
  int64_t min_runtime_ms = 10 * 60 * 1000;
  // Thrash guard: a job whose latest two attempts or more ended preempted is spared this long
  // after the latest of them; <= 0: never spared.
  int64_t spare_ms = 60 * 60 * 1000;
  // Attained service (2D-LAS): a waiting job of service band 0 may preempt a job of no higher
  // priority that has received at least `attained_service_ms` GPU-time (earlier attempts and
  // this one), whoever's it is. The same threshold makes the bands of the order; 0: off.
  bool for_attained_service = false;
  int64_t attained_service_ms = 0;

  bool operator==(const PreemptConfig&) const = default;
};

// The one way to build a PreemptConfig: from `settings`, any type with the fields named as
// config.toml names its options (docs/scheduling.md): preempt_priority_gap,
// preempt_for_fair_share, preempt_for_aging, min_runtime_ms, preempt_spare_ms. The daemon
// passes its Config (Scheduler::PreemptSettings), the simulator its ReplayOptions
// (Replayer::PreemptSettings), so a rule added here must be given to both or neither compiles,
// and the simulator decides with every setting the daemon decides with.
template <typename Settings>
PreemptConfig PreemptConfigFrom(const Settings& settings) {
  PreemptConfig c;
  c.priority_gap = settings.preempt_priority_gap;
  c.for_fair_share = settings.preempt_for_fair_share;
  c.for_aging = settings.preempt_for_aging;
  c.min_runtime_ms = settings.min_runtime_ms;
  c.spare_ms = settings.preempt_spare_ms;
  c.for_attained_service = settings.preempt_for_attained_service;
  c.attained_service_ms = settings.attained_service_ms;
  return c;
}

// GPU-time `job`'s ended attempts received: each attempt's GPUs (every node's) x how long it
// ran. The attained-service order's measure (PendingJob::service_band).
double AttainedGpuMs(const Job& job);

// PendingJob::service_band of a job that has had `attained_gpu_ms` under `threshold_ms`
// (PreemptConfig::attained_service_ms; 0: the order is off, every job band 0).
inline int ServiceBand(double attained_gpu_ms, int64_t threshold_ms) {
  return threshold_ms > 0 && attained_gpu_ms >= double(threshold_ms) ? 1 : 0;
}

// One waiting job's decision to stop `victims` and start where their GPUs free up.
struct Preemption {
  JobId job = 0;
  std::vector<JobId> victims;  // least work lost first
  // Where the job will start once they stopped, as Place's StartDecision::parts says.
  std::vector<NodeGpus> parts;
  UnixMs ready_at = 0;  // now + the longest of the victims' stop_ms: when the GPUs free up
  // For the job: "will preempt job 12 (bob, priority 0) in 40s".
  std::string reason;
  // One per victim, in `victims` order: "preempted by job 31 (priority 100)".
  std::vector<std::string> victim_reasons;
};

// The hold that keeps the GPUs `d` frees for its job (Hold::preempting), for the next passes.
Hold PreemptingHold(const Preemption& d);

// One running job as a candidate victim of one waiting job, for `trainq explain`.
struct PreemptCandidate {
  JobId job = 0;
  std::string user;
  int priority = 0;
  bool eligible = false;
  // "eligible: priority 0, ran 42m00s", "not preemptible", "ran 3m00s of min_runtime
  // 10m00s", "spared for 20m00s more: preempted 2 times in a row".
  std::string why;
};

// Which waiting jobs preempt which running ones in this pass.
//
// `waiting`: the jobs a placement pass left waiting for lack of GPUs, in placement order, each
// one that could start now if GPUs were free (the caller leaves out backoff, dependencies, a
// pause and per-user limits). `nodes`: as Place takes them. `running`: the attempts on them.
// `usage`: decayed GPU-hours per user, for the fair-share rule; a user's fair share is the mean
// over the users of `waiting` and `running`.
//
// A running job is a candidate victim when it is preemptible, not stopping, has run
// min_runtime_ms in this attempt and is not spared by the thrash guard. A waiting job W may
// preempt a candidate V of no higher priority than W's when W's priority is priority_gap or
// more above V's; or (for_fair_share) W's user is below their fair share and V's, another
// user, above it; or (for_aging) W is large and aged and V another user's.
//
// W takes the fewest victims whose going lets Place start it (judged on copies of the nodes
// without them), least work lost among equal counts (the youngest attempts, then lower
// priority, then the higher job id), on one node for a single-node job. A gang (num_nodes N)
// takes each node's best set, then the N nodes whose sets together take the fewest victims (a
// victim gang on several of them counts once). Jobs are served in order: an earlier one's
// victims and the GPUs it will take are gone for later ones. A stopping job's GPUs count as
// free, so a job that fits once they stop preempts nothing; nor does one that would fit now
// (it waits for a hold).
//
// The search is bounded so that a pass stays cheap on a large cluster: per node, sets of up to 8
// jobs and a few hundred of them (a whole-GPU job ranks choices of GPUs instead), then greedy
// removal; a gang's choice of nodes is greedy. Past those bounds the choice is a good one, not
// always the best there is.
std::vector<Preemption> ChoosePreemptions(std::span<const PendingJob* const> waiting,
                                          std::span<const NodeState> nodes,
                                          std::span<const RunningJob> running,
                                          const PolicyConfig& policy, const PreemptConfig& config,
                                          const UsageByUser& usage, UnixMs now);
// The same, for jobs held by value.
std::vector<Preemption> ChoosePreemptions(std::span<const PendingJob> waiting,
                                          std::span<const NodeState> nodes,
                                          std::span<const RunningJob> running,
                                          const PolicyConfig& policy, const PreemptConfig& config,
                                          const UsageByUser& usage, UnixMs now);

// Every running job but `job` itself as a victim of `job` (one of `waiting`, or not), with a
// verdict: eligible first, then least work lost first. Says nothing of whether the eligible
// ones would free enough: ChoosePreemptions decides that.
std::vector<PreemptCandidate> ExplainPreemption(
    const PendingJob& job, std::span<const PendingJob* const> waiting,
    std::span<const NodeState> nodes, std::span<const RunningJob> running,
    const PolicyConfig& policy, const PreemptConfig& config, const UsageByUser& usage, UnixMs now);

}  // namespace trainq
